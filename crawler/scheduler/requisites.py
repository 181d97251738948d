"""The requisites rule at the frontier's door: which page requisites join the frontier, and how.

A requisite (``crawler.spiders.requisites``) is admitted outside the site's scope, URL filters,
depth and per-host page budget (``crawler.sites.sitefile.Requisites`` states the rule); a
malformed or too long URL and the site's ``requisites.deny`` patterns still refuse it. It goes
through the crawl's seen-set like any URL, so a stylesheet that every page embeds is fetched
once, by whichever worker claims it first (``Frontier.mark_seen``: atomic on a shared
frontier), and is then queued as a forced entry, which the frontier's page budget does not
count (``max_pages_per_host`` counts pages, not their embeds). Once queued its host's
politeness, robots.txt and an operator's block hold as for any URL.

The requisites a page repeats (a site's stylesheet, logo, scripts) are remembered here, up to
``cache_size`` and then forgotten all at once, so that on a shared frontier a repeated one
costs no round trip. Free of Scrapy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from crawler.frontier import Frontier


class RequisiteGate:
    """Decides and records a requisite's admission (see the module docstring)."""

    def __init__(self, deny: Iterable[str] = (), cache_size: int = 100_000) -> None:
        self.deny = [re.compile(p) for p in deny]
        self.cache_size = cache_size
        self._known: set[int] = set()

    def refusal(self, url: str) -> str:
        """``"requisite_denied"`` when a ``requisites.deny`` pattern matches the (normalized)
        URL, else ``""``."""
        if self.deny and any(p.search(url) for p in self.deny):
            return "requisite_denied"
        return ""

    def claim(self, frontier: Frontier, url: str) -> bool:
        """True when ``url`` (normalized) was not seen by the crawl before and is now: the
        caller queues it (forced: the seen-test is done). False: fetched or queued already,
        as a requisite or as a page. For a frontier in this process; a shared one is asked
        without waiting (``add_unseen``), after :meth:`remember`."""
        return self.remember(url) and frontier.mark_seen([url]) == 1

    def remember(self, url: str) -> bool:
        """False when this worker met ``url`` (normalized) before; else it is remembered."""
        key = hash(url)
        if key in self._known:
            return False
        if len(self._known) >= self.cache_size:
            self._known.clear()
        self._known.add(key)
        return True
