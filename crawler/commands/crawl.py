"""``scrapy crawl``, with the checks that must refuse a crawl before it starts.

Scrapy's own command, plus a preflight: a malformed ``ALLOWED_NETWORKS`` entry, and the
frontier store the settings choose
(``FRONTIER_STORE_CLASS``) may refuse the crawl, e.g. a shared store whose server is unreachable
or whose stored crawl was made with other politeness settings. A refusal is one clear line on
stderr and exit status 2, before any request goes out; scrapyd shows that line in the job's log.

A stop (Ctrl-C, scrapyd's cancel) that arrives while the crawl is still starting (the spider
and the frontier opening, which with Redis takes a few round trips) waits until the engine
runs and then stops it the normal way: Scrapy's own stop does nothing before that and stops
the reactor under the opening crawl, so no stats (no ``finish_reason``) were written and the
leases read ahead stayed taken until they expired. A SIGINT before Scrapy has installed its
handlers (the first ~0.5 s, while Python imports it) ends the process as any Python program:
exit status 130, nothing sent, nothing leased, no stats file.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.crawler import Crawler
from scrapy.exceptions import UsageError
from scrapy.utils.defer import maybe_deferred_to_future

from crawler.addresses import policy_from_settings
from crawler.backends import backend_class


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError(
                "give one site: scrapy crawl <site> (scrapy list shows the configured sites)"
            )
        assert self.crawler_process is not None
        crawler = self._create_crawler(args[0])
        try:
            policy_from_settings(crawler.settings)
            store = backend_class(crawler.settings, "FRONTIER_STORE_CLASS")
            problems = store.preflight(crawler) if hasattr(store, "preflight") else []
        except ValueError as exc:  # BackendError too
            problems = [str(exc)]
        if problems:
            for problem in problems:
                print(f"crawl {args[0]} refused: {problem}", file=sys.stderr)
            self.exitcode = 2
            return
        _stop_once_started(crawler)
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1


logger = logging.getLogger(__name__)
_START_WAIT = 120.0  # seconds a stop waits at most for the opening crawl to run


def _stop_once_started(crawler: Crawler) -> None:
    """Make a stop that arrives while the crawl opens wait for the engine to run, then stop
    it as usual (spider closed with "shutdown", leases handed back, stats written)."""
    scrapy_stop = crawler.stop_async

    async def stop_async() -> None:
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        waited = 0.0
        while crawler.crawling and not _engine_running(crawler) and waited < _START_WAIT:
            if waited == 0.0:
                logger.info("Stop asked while the crawl is starting: stopping once it runs")
            await maybe_deferred_to_future(deferLater(reactor, 0.05, lambda: None))
            waited += 0.05
        await scrapy_stop()

    crawler.stop_async = stop_async  # type: ignore[method-assign]


def _engine_running(crawler: Crawler) -> bool:
    engine: Any = getattr(crawler, "_engine", None)
    return bool(engine is not None and engine.running)
