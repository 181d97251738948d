"""``/metrics`` on its own thread: prometheus_client's WSGI server, answering from a callable
that builds the metric families (from the last snapshot a crawl published, or from Redis for
the crawl-wide exporter). A scrape never runs on the reactor, and the reactor never waits for
a scrape.

``linger``: a crawl that ends (a short batch crawl, a test) keeps serving its final figures
until a scraper has read them, so the last scrape is not one taken before the crawl's last
pages: :meth:`MetricsServer.wait_final_scraped` returns once two scrapes began after
:meth:`MetricsServer.final` was called (a scraper reads one target at a time, so the second
beginning means the first, with the final figures, was read whole).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_wsgi_server
from prometheus_client.core import Metric

logger = logging.getLogger(__name__)


class _Collector:
    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterable[Metric]:
        return self.server._collect()


class MetricsServer:
    """Serves ``families()`` at ``http://host:port/metrics`` (with the process's CPU, RSS and
    open files from prometheus_client's process collector)."""

    def __init__(
        self, host: str, port: int, families: Callable[[], Iterable[Metric]],
        process: bool = True,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.families = families
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))  # type: ignore[arg-type]
        if process:
            ProcessCollector(registry=self.registry)
        self.scrapes = 0
        self._final_scrapes = -1  # scrapes begun since final(); -1: not final yet
        self._final_read = threading.Event()
        self._httpd: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Listen (OSError when the port is taken); returns the port."""
        self._httpd, self._thread = start_wsgi_server(
            self.requested_port, self.host, self.registry
        )
        return self.port

    @property
    def port(self) -> int:
        return int(self._httpd.server_port) if self._httpd is not None else 0

    def _collect(self) -> list[Metric]:
        self.scrapes += 1
        if self._final_scrapes >= 0:
            self._final_scrapes += 1
            if self._final_scrapes >= 2:
                self._final_read.set()
        try:
            return list(self.families())
        except Exception:
            logger.exception("Could not gather the metrics")
            raise

    def final(self) -> None:
        """The figures served from now on are the crawl's last."""
        if self._final_scrapes < 0:
            self._final_scrapes = 0

    def wait_final_scraped(self, timeout: float) -> bool:
        return self._final_read.wait(timeout)

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
