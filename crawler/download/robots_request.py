"""What a robots.txt request is: its meta keys and its shape. The robots.txt fetcher makes them
(``crawler.middlewares.robots_requests``); the frontier's payload codec keeps the usual one, a
host's first request, as a flag of a few bytes rather than a serialized Request
(``crawler.scheduler.codec``), since one waits for every new host of a crawl."""

from __future__ import annotations

from typing import Any

from scrapy import Request

from crawler.meta import ROBOTS_META
from crawler.robots.rules import MAX_SIZE

HOPS_META = "robotstxt_hops"  # redirects followed so far
RETRY_META = "robotstxt_retry"  # a scheduled retry after a failure
DIRECT_META = "robotstxt_direct"  # fetched with engine.download, not through the frontier
# fetched again without validators: the 304 to a refresh named another file than the copy
AGAIN_META = "robotstxt_again"
FIRST_META = "frontier_first"  # the frontier hands it out before its host's other URLs
PRIORITY = 1000


def is_robots_request(request: Request) -> bool:
    return request.meta.get(ROBOTS_META) is not None


def read_up_to(request: Request) -> int | None:
    """The bytes of a body its reader needs, for the download handler to stop at (None: the
    whole body). A robots.txt is parsed up to 500 KiB (RFC 9309 2.5), and a byte more tells a
    longer file: the rest is never downloaded, and a file longer than ``DOWNLOAD_MAXSIZE`` is
    read, not dropped as unreachable. Told by the request rather than kept in its meta, which a
    frontier stores with every queued robots.txt retry."""
    return MAX_SIZE + 1 if is_robots_request(request) else None


def robots_request(origin: str, url: str | None = None, hops: int = 0, **meta: Any) -> Request:
    """The request of ``origin``'s robots.txt (``url``: a redirect's target, ``hops`` deep)."""
    return Request(
        url or f"{origin}/robots.txt",
        meta={
            ROBOTS_META: origin,
            HOPS_META: hops,
            "dont_redirect": True,  # followed by the fetcher, within RFC 9309's limit
            "dont_retry": True,  # a failure is "disallowed for now", retried by the fetcher
            "dont_obey_robotstxt": True,
            **meta,
        },
        dont_filter=True,
        priority=PRIORITY,
    )


def first_robots_origin(request: Request, extra_meta: frozenset[str]) -> str | None:
    """The origin when ``request`` is exactly ``robots_request(origin, frontier_first=True)``
    (meta keys in ``extra_meta`` aside, which the frontier's entry carries itself), else None:
    such a request can be queued as its URL alone and rebuilt by :func:`first_robots_request`."""
    meta = request.meta
    origin = meta.get(ROBOTS_META)
    if not isinstance(origin, str) or request.url != f"{origin}/robots.txt":
        return None
    if {k: v for k, v in meta.items() if k not in extra_meta} != _first_meta(origin):
        return None
    if (
        request.method != "GET"
        or request.callback is not None
        or request.errback is not None
        or request.body
        or request.headers
        or request.cookies
        or request.cb_kwargs
        or request.flags
        or request.priority != PRIORITY
        or not request.dont_filter
    ):
        return None
    return origin


def first_robots_request(url: str) -> Request:
    """The request :func:`first_robots_origin` recognized, rebuilt from its URL."""
    return robots_request(url[: -len("/robots.txt")], **{FIRST_META: True})


def _first_meta(origin: str) -> dict[str, Any]:
    return dict(robots_request(origin, **{FIRST_META: True}).meta)
