"""How a spider hands a page's links to the crawl."""

from __future__ import annotations

import weakref
from typing import Any
from urllib.parse import urlsplit

from pydispatch import dispatcher
from scrapy import Request, Spider
from scrapy.http import Response

from crawler import signals as crawler_signals
from crawler.net.weburl import join as web_join

# Spiders whose crawl's scheduler announced a frontier (``frontier_opened``): their links go to
# it in bulk. Heard for every crawler in the process (any sender), since the announcement comes
# before the spider's first page and follow_links has no component of its own to connect it.
_frontier_spiders: weakref.WeakSet[Spider] = weakref.WeakSet()


def _frontier_opened(frontier: Any, spider: Spider) -> None:
    _frontier_spiders.add(spider)


dispatcher.connect(_frontier_opened, signal=crawler_signals.frontier_opened, sender=dispatcher.Any)


def has_frontier(spider: Spider) -> bool:
    """The spider's crawl has a frontier that takes links and seeds in bulk (its scheduler
    announced it with ``frontier_opened``)."""
    return spider in _frontier_spiders


def follow_links(
    spider: Spider,
    response: Response,
    urls: list[str],
    demote: int = 0,
    forms: dict[str, Any] | None = None,
) -> list[Request]:
    """Hand ``urls`` to the crawl: to the frontier in one notification (``links_extracted``)
    when the crawl's scheduler announced one, else as the Requests to yield (another
    scheduler runs the crawl). ``demote``: levels of depth to add to them (a near-duplicate
    page's links); ``forms``: their stateless part, prepared on the content thread
    (``crawler.frontier.urls.UrlPolicy.link_form``), or None.

    The frontier tests each link against what it has seen before any Request exists: on real
    sites most links of a page repeat, and building a Request costs about 12 us.
    """
    if not urls:
        return []
    if spider in _frontier_spiders:
        spider.crawler.signals.send_catch_log(
            crawler_signals.links_extracted,
            response=response,
            urls=urls,
            spider=spider,
            demote=demote,
            forms=forms,
        )
        return []
    requests = []
    for url in urls:
        try:
            requests.append(Request(url))
        except ValueError:  # a URL urlsplit accepts but Scrapy cannot encode
            spider.crawler.stats.inc_value("links/invalid")
    return requests


class UrlJoiner:
    """``href`` joined to ``base`` as a browser joins it (:func:`crawler.net.weburl.join`:
    WHATWG, where ``\\`` is ``/`` and ``///host`` a host) for one page's links, with the
    common shapes done by string concatenation: an absolute path (``/docs/a.html``), a plain
    relative path (``a.html``, ``sub/b.html``), an anchor on the page (``#method.len``), a path
    that only climbs first (``../../std/vec/struct.Vec.html``: rustdoc and Sphinx write almost
    every link so) and an absolute http(s) URL. Anything else (dot segments further in,
    ``?query`` alone, ``//host``, other schemes, backslashes) goes to
    :func:`~crawler.net.weburl.join`. On pages with hundreds of links this is most of the
    per-link cost of the spider.
    """

    __slots__ = ("base", "directory", "origin", "segments", "unfragmented")

    def __init__(self, base: str) -> None:
        self.base = base
        self.unfragmented = base.partition("#")[0]
        parts = urlsplit(base)
        self.origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
        path = parts.path or "/"
        self.directory = self.origin + path[: path.rfind("/") + 1]
        # the base's directories, for climbing: "/a/b/c.html" -> ["a", "b"]; None: no climbing
        # by strings (no origin, or a base whose path does not start with "/")
        self.segments: list[str] | None = None
        if self.origin and parts.path.startswith("/"):
            self.segments = path[1 : path.rfind("/")].split("/") if path.count("/") > 1 else []

    def join(self, href: str) -> str:
        href = href.strip()
        if href[:1] == "." and self.segments is not None:
            return self._climb(href)
        if not href or "\\" in href or "/." in href or href[0] == ".":
            return web_join(self.base, href)
        first = href[0]
        if first == "/":
            if href[1:2] == "/" or not self.origin:
                return web_join(self.base, href)
            return self.origin + href
        if first == "#" and len(href) > 1 and self.origin:
            return self.unfragmented + href  # an anchor on the page itself
        if first in "?#":
            return web_join(self.base, href)
        if href.startswith(("http://", "https://")):
            if href.count("/") < 3 or href[-1] in "?#" or ";" in href:
                return web_join(self.base, href)
            return href
        if ":" in href.split("/", 1)[0] or not self.origin:
            return web_join(self.base, href)  # another scheme (mailto:, javascript:) or no base
        return self.directory + href

    def _climb(self, href: str) -> str:
        """``../`` and ``./`` at the start of a relative path, then a plain path: the base's
        directories less one per ``../`` (never above the root, as RFC 3986 says)."""
        rest = href
        up = 0
        while rest[:3] == "../":
            rest = rest[3:]
            up += 1
        while rest[:2] == "./":
            rest = rest[2:]
        if (
            not rest
            or rest[0] in "./?#"
            or "/." in rest
            or "\\" in rest
            or ":" in rest.split("/", 1)[0]
        ):
            return web_join(self.base, href)
        segments = self.segments or []
        if up:
            segments = segments[: max(0, len(segments) - up)]
        if not segments:
            return f"{self.origin}/{rest}"
        return f"{self.origin}/{'/'.join(segments)}/{rest}"
