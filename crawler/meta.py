"""``Request.meta`` keys that more than one component reads, defined once so that components
need not import each other for a string (the robots middleware must not import the scheduler).
"""

from __future__ import annotations

from typing import Any

LEASE_META = "frontier_lease"  # set by the frontier scheduler on every request it hands out
# The frontier entry's OPIC cash and crawl policy label, when it has them
# (crawler/frontier/opic.py, crawler/frontier/policies.py): the page's links get their share of
# the cash and inherit the policy (a content rule may switch it: the site spider).
CASH_META = "frontier_cash"
POLICY_META = "crawl_policy"
# The page a request's URL was found on (its frontier entry's referrer), set by the frontier
# scheduler on the requests it rebuilds: the broken-link lists name it even when the referrer
# policy kept it out of the ``Referer`` header (an https page's link to an http URL).
FOUND_ON_META = "found_on"
ROBOTS_META = "robotstxt_for"  # on a robots.txt request: the origin it is for
# set by the download handler on a request whose download a stop (crawl_stopping) cut short
STOPPED_META = "download_stopped"
# Scrapy's flag on a response whose download ``StopDownload(fail=False)`` ended once its reader
# had enough (``crawler.download.robots_request.read_up_to``): the body is its beginning only
READ_UP_TO_FLAG = "download_stopped"
# On a page requisite's request (crawler/spiders/requisites.py): its hops from the page that
# embeds it (1: the page's own stylesheets and images; 2: a stylesheet's fonts). The scheduler
# admits it by the requisites rule, and nothing counts it as a page.
REQUISITE_META = "requisite"
# On a page's response: the requisites it asked for (absolute URLs), for the WARC metadata
# record's "embed" lines (crawler/middlewares/warc.py)
EMBEDS_META = "requisites_embedded"
# On a request, once its response's headers came (crawler/download/handler.py): the response's
# header section byte for byte as the server sent it, for the WARC capture, which pops it
RAW_HEAD_META = "http_raw_head"
# Usage preferences (crawler/robots/usage.py): on a page request, the signals known before it
# was fetched (its robots.txt group's, its tdmrep.json rule's), set by the robots gate; on its
# response, the decision made of them and the answer's own, made by whoever asks first (the
# WARC capture, before the spider)
USAGE_BEFORE_META = "usage_before_fetch"
USAGE_META = "usage_decision"
# On a /.well-known/tdmrep.json request (crawler/middlewares/tdmrep.py): its origin. Like a
# robots.txt fetch it is no page: never a broken link nor a page by status (the tally)
TDMREP_META = "tdmrep_for"


def found_on(request: Any) -> str:
    """The page a Request's URL was found on: what the frontier rebuilt it with
    (``FOUND_ON_META``), else its ``Referer`` header (stock RefererMiddleware's, on a request a
    spider yielded), else "" (a seed, a robots.txt URL)."""
    page = request.meta.get(FOUND_ON_META)
    if page:
        return str(page)
    header = request.headers.get(b"Referer")
    return header.decode("latin-1") if header else ""
