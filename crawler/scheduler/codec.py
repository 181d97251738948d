"""How a Request is kept in the frontier while it waits, and rebuilt when it is due.

A plain link (a GET of a URL with the spider's default callback, nothing else) is kept as its
URL and depth only (and the page it was found on: the entry's ``referrer``, rebuilt as the
``Referer`` header and ``meta["found_on"]``); a plain seed (the same with ``meta["seed"]``) as
its URL, depth and the payload :data:`~crawler.frontier.api.SEED` (a flag in a shared store,
not a serialized Request); a host's first request, its robots.txt, as its URL and the payload
:data:`~crawler.frontier.api.ROBOTS_FIRST`.
Anything else is kept as ``Request.to_dict``: the Request object itself in memory, msgpack bytes
in a persistent or shared store. msgpack rather than pickle: a payload read back from disk or
from Redis must never be able to run code, and msgpack keeps ``bytes`` (bodies, headers) apart
from ``str`` without base64.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgpack
from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

from crawler.download.robots_request import first_robots_origin, first_robots_request
from crawler.frontier import Entry
from crawler.frontier.api import ROBOTS_FIRST, SEED
from crawler.meta import CASH_META, FOUND_ON_META, POLICY_META

logger = logging.getLogger(__name__)

# Request meta that a plain link carries and that its rebuilt Request gets back.
PLAIN_META = frozenset({"depth", CASH_META, POLICY_META, FOUND_ON_META})
# Headers a plain link may carry: rebuilt from its entry when it is due.
PLAIN_HEADERS = frozenset({b"Referer"})
# ``referer(page, url)``: the ``Referer`` header a request of ``url`` found on ``page`` gets
# (the crawl's REFERRER_POLICY, as stock Scrapy's RefererMiddleware decides it), or None.
RefererPolicy = Callable[[str, str], str | None]
# Never written with a queued request: middlewares add them again when it is sent.
SECRET_HEADERS = frozenset({b"authorization", b"proxy-authorization", b"cookie"})
# ``Request.to_dict`` fields at these values are left out of a stored payload:
# ``request_from_dict`` gives a missing field the Request's default back. A host's robots.txt
# request, queued first for every new host of a seeds file, takes ~190 bytes, not ~270.
_DEFAULTS: dict[str, Any] = {
    "callback": None,
    "errback": None,
    "headers": {},
    "body": b"",
    "cookies": {},
    "encoding": "utf-8",
    "flags": [],
    "cb_kwargs": {},
    "dont_filter": False,
    "method": "GET",
    "priority": 0,
}


class PayloadError(ValueError):
    """A stored payload that cannot be turned back into a Request."""


def _bare(request: Request) -> bool:
    """A GET with nothing of its own: no errback, body, headers, cookies, flags or priority."""
    return (
        request.method == "GET"
        and request.errback is None
        and not request.body
        and request.headers.keys() <= PLAIN_HEADERS
        and not request.cookies
        and not request.cb_kwargs
        and not request.flags
        and request.priority == 0
        and not request.dont_filter
    )


def is_plain(request: Request) -> bool:
    """A plain link: a GET of the URL with the spider's default callback and nothing else, so
    the frontier keeps only its URL and depth and rebuilds the Request when it is due."""
    return request.callback is None and _bare(request) and request.meta.keys() <= PLAIN_META


def is_plain_seed(request: Request, spider: Spider | None) -> bool:
    """A seed as the site spider makes it (``meta["seed"]``, the spider's ``parse`` or no
    callback) and nothing else: kept as :data:`SEED`, rebuilt as the same seed."""
    meta = request.meta
    if not meta.get("seed") or meta.keys() - PLAIN_META != {"seed"} or meta["seed"] is not True:
        return False
    callback = request.callback
    if callback is not None and (spider is None or callback != getattr(spider, "parse", None)):
        return False
    return _bare(request)


def encode(request: Request, spider: Spider | None, *, serialize: bool) -> Any:
    """The payload to queue with ``request``: None for a plain link, the Request itself when
    the store keeps Python objects, msgpack bytes when ``serialize`` (the store is on disk or
    shared). Meta values msgpack cannot hold are left out (and logged), not a reason to lose
    the request."""
    if is_plain(request):
        return None
    if is_plain_seed(request, spider):
        return SEED
    if first_robots_origin(request, PLAIN_META) is not None:
        return ROBOTS_FIRST
    if not serialize:
        return request
    data = request.to_dict(spider=spider)
    data["headers"] = {
        k: v for k, v in data.get("headers", {}).items() if k.lower() not in SECRET_HEADERS
    }
    data = {k: v for k, v in data.items() if k not in _DEFAULTS or v != _DEFAULTS[k]}
    try:
        return _pack(data)
    except (TypeError, ValueError, OverflowError):
        meta = data.get("meta") or {}
        kept, dropped = {}, []
        for key, value in meta.items():
            try:
                _pack({key: value})
            except (TypeError, ValueError, OverflowError):
                dropped.append(key)
            else:
                kept[key] = value
        data["meta"] = kept
        logger.debug("Request %s queued without meta %s: not serializable", request.url, dropped)
        return _pack(data)


def decode(entry: Entry, spider: Spider | None, referer: RefererPolicy | None = None) -> Request:
    """The Request for a queued entry. Raises ``PayloadError`` for a payload that cannot be
    read (e.g. one written by an older version, or a callback the spider no longer has).
    ``referer``: the crawl's referrer policy (None: REFERER_ENABLED is off)."""
    payload = entry.payload
    if payload is None:
        request = Request(entry.url, meta={"depth": entry.depth})
    elif payload == SEED:
        request = Request(entry.url, meta={"depth": entry.depth, "seed": True})
    elif payload == ROBOTS_FIRST:
        request = first_robots_request(entry.url)
        if entry.depth:
            request.meta["depth"] = entry.depth
    elif isinstance(payload, Request):
        request = payload
    else:
        try:
            data = msgpack.unpackb(payload, raw=False, strict_map_key=False)
            request = request_from_dict(data, spider=spider)
        except Exception as exc:  # any malformed payload: the caller drops the entry
            raise PayloadError(f"cannot rebuild the request for {entry.url}: {exc}") from exc
    _with_ranking(request, entry)
    if entry.referrer:
        _with_referrer(request, entry.referrer, referer)
    return request


def _with_ranking(request: Request, entry: Entry) -> None:
    if entry.cash:
        request.meta[CASH_META] = entry.cash
    if entry.policy:
        request.meta[POLICY_META] = entry.policy


def _with_referrer(request: Request, page: str, referer: RefererPolicy | None) -> None:
    """Where the URL was found: in ``meta`` always (the broken-link lists read it there), as
    the ``Referer`` header when the policy sends one (stock Scrapy sets it from the response
    that produced the request; here the request is rebuilt from its entry)."""
    request.meta[FOUND_ON_META] = page
    if referer is not None and b"Referer" not in request.headers:
        value = referer(page, request.url)
        if value:
            request.headers[b"Referer"] = value


def _pack(data: dict[str, Any]) -> bytes:
    return msgpack.packb(data, use_bin_type=True)
