"""The site spider's side of canonical URLs (``crawler.content.canonical`` says which to
believe): read the ``Link`` header and the page's ``<link rel="canonical">``, put an honoured
canonical URL in the item (the index makes the page its alias) and among the links to follow
(queued if the frontier has not seen it)."""

from __future__ import annotations

from typing import Any

from scrapy.http import Response

from crawler.config import defaults
from crawler.content.canonical import CanonicalPolicy, link_header_canonical
from crawler.frontier.urls import registered_domain_function, url_forms
from crawler.sites.analysis import PageAnalysis


def canonical_policy(settings: Any) -> CanonicalPolicy:
    """The crawl's policy from ``CANONICAL_SCOPE``."""
    scope = str(settings.get("CANONICAL_SCOPE", defaults.CANONICAL_SCOPE)).strip().lower()
    domain_of = registered_domain_function(private=True) if scope == "domain" else None
    return CanonicalPolicy(scope, _request_form, domain_of)


def _request_form(url: str) -> tuple[str, str]:
    """A canonical link's request URL and host: queued and fetched as the page wrote it (made
    safe), like any link; the frontier's seen-test compares canonical forms."""
    request, _, host = url_forms(url)
    return request, host


def apply_canonical(
    policy: CanonicalPolicy, response: Response, item: Any, analysis: PageAnalysis
) -> None:
    """Judge the page's canonical URL (the header's before the HTML's); safe on the content
    thread: its count goes in ``analysis.stats`` for the reactor thread."""
    header = link_header_canonical(
        (v.decode("latin-1") for v in response.headers.getlist(b"Link")), response.url
    )
    canonical, why = policy.judge(response.url, header or analysis.canonical_href)
    if why != "none":
        analysis.stats[f"canonical/{why}"] += 1
    if canonical is None:
        return
    item["canonical"] = canonical
    if not analysis.nofollow and canonical not in analysis.follow:
        analysis.follow.append(canonical)
