"""A devsite server that behaves like a real web server towards a recrawl: ``ETag`` and
``Last-Modified`` on every 200, ``304`` to a matching ``If-None-Match`` / ``If-Modified-Since``,
pages that change between crawls, and routes (a path answered by a function: robots.txt of many
shapes, slow answers, redirects). Tests of robots.txt, conditional GET and recrawl use it, and
so does ``bench/recrawl.py``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from devsite.graph import HostSpec
from devsite.server import SiteServer

Answer = tuple[int, list[tuple[str, str]], bytes]


@dataclass
class Ask:
    """What a route sees of a request."""

    address: str
    path: str
    headers: dict[str, str]
    server: RoutedSiteServer

    def wait(self, seconds: float) -> None:
        """Sleep, but wake up when the server stops (a "slow" or "hanging" answer)."""
        self.server.stopping.wait(seconds)


Route = Callable[[Ask], Answer | None]


class RoutedSiteServer(SiteServer):
    """Devsite with validators, 304s, page changes and routes (see the module docstring)."""

    def __init__(
        self, *args: Any, conditional: bool = True, pad_html: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.conditional = conditional
        # Bytes of filler (an HTML comment) added to every generated page, for benchmarks that
        # want pages of a realistic size (the generated ones are about 1 KB).
        self.padding = b"<!-- " + b"x" * pad_html + b" -->\n" if pad_html else b""
        self.routes: dict[tuple[str, str], Route] = {}
        self._bodies: dict[tuple[str, str], bytes] = {}
        self._changed_at: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self.epoch = time.time() - 3600  # every page "last modified" an hour ago

    def route(self, address: str, path: str, route: Route) -> None:
        self.routes[(address, path)] = route

    def set_body(self, address: str, path: str, body: bytes) -> None:
        """Change a page: new content, Last-Modified now."""
        with self._lock:
            self._bodies[(address, path)] = body
            self._changed_at[(address, path)] = time.time()

    def respond(
        self, handler: Any, spec: HostSpec, default: Callable[[HostSpec], Answer]
    ) -> Answer:
        path = handler.path.split("#", 1)[0]
        key = (spec.address, path.split("?", 1)[0])
        ask = Ask(spec.address, path, dict(handler.headers.items()), self)
        route = self.routes.get((spec.address, path)) or self.routes.get(key)
        if route is not None:
            answer = route(ask)
            if answer is not None:
                return answer
        with self._lock:
            body = self._bodies.get(key)
            changed_at = self._changed_at.get(key, self.epoch)
        if body is None:
            status, headers, body = default(spec)
            if self.padding and status == 200 and "html" in dict(headers).get("Content-Type", ""):
                body += self.padding
        else:
            status, headers = 200, [("Content-Type", "text/html; charset=utf-8")]
        if status != 200 or not self.conditional:
            return status, headers, body
        etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
        last_modified = formatdate(changed_at, usegmt=True)
        validators = [("ETag", etag), ("Last-Modified", last_modified)]
        if _not_modified(ask.headers, etag, changed_at):
            return 304, validators, b""
        return 200, headers + validators, body


def _not_modified(headers: dict[str, str], etag: str, changed_at: float) -> bool:
    """RFC 9110 13.2.2: If-None-Match wins; If-Modified-Since only without it."""
    lowered = {k.lower(): v for k, v in headers.items()}
    inm = lowered.get("if-none-match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or etag in tags
    ims = lowered.get("if-modified-since")
    if ims is None:
        return False
    try:
        return int(changed_at) <= parsedate_to_datetime(ims).timestamp()
    except (TypeError, ValueError):
        return False
