"""The politeness policy: how long a host's slot rests after each fetch, and when a host is
given up. Its limits are the settings schema's (crawler/config/schema.py): a policy built from
settings (:func:`politeness_from_settings`) has passed the same checks as ``-s`` and a site
config's ``[politeness]`` table; this module holds only the algorithm."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Protocol

from crawler.config import defaults
from crawler.config.schema import read_settings
from crawler.config.tuning import knob_default

# A failed fetch (no answer, or a 5xx) holds its host min_delay x 2^(failures - 1) beyond the
# usual rest, ``failures`` being those among its last failure_window fetches (in a row when the
# window is off), and never more than this: a host whose failures stay frequent is asked less
# and less often until the give-up rule ends it, instead of taking a download slot (for
# DOWNLOAD_TIMEOUT, if it hangs) at every turn.
FAILURE_BACKOFF_MAX = 600.0

# The policy's fields and the settings they come from, then the TUNING knobs (the failure
# window is the test-turned tuning of the give-up rule; an operator sets max_failures).
_SETTINGS = {
    "min_delay": "FRONTIER_MIN_DELAY",
    "delay_factor": "FRONTIER_DELAY_FACTOR",
    "max_delay": "FRONTIER_MAX_DELAY",
    "host_concurrency": "FRONTIER_HOST_CONCURRENCY",
    "max_crawl_delay": "FRONTIER_MAX_CRAWL_DELAY",
    "max_failures": "FRONTIER_HOST_MAX_FAILURES",
}
_KNOBS = {"failure_window": "host_failure_window", "max_failure_ratio": "host_failure_ratio"}


class SettingsSource(Protocol):
    def get(self, name: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class PolitenessPolicy:
    """Mercator's adaptive delay, with Heritrix's defaults (the FRONTIER_* settings').

    After a fetch that took ``d`` seconds, the slot rests
    ``min(max(min_delay, delay_factor * d), max_delay)``, and never less than the host's robots.txt
    ``Crawl-delay``: a Crawl-delay above ``max_delay`` is still honoured in full (a host is never
    crawled faster than it asked); one above ``max_crawl_delay`` makes the host skipped instead.
    A host is given up (see :meth:`gives_up`) after ``max_failures`` failed fetches in a row, or
    when ``max_failure_ratio`` of its last ``failure_window`` fetches failed; until then each
    failure holds it longer (:meth:`backoff`). A fetch failed when no answer came (timeout,
    refused, reset) or the answer was 5xx: a 503 is an answer, but a host that gives it to half
    its pages is as broken for a crawl as one that drops half its connections (and a 503 is
    asked again up to RETRY_TIMES times, so such a host fails most of its fetches).
    """

    min_delay: float = defaults.FRONTIER_MIN_DELAY
    delay_factor: float = defaults.FRONTIER_DELAY_FACTOR
    max_delay: float = defaults.FRONTIER_MAX_DELAY
    host_concurrency: int = defaults.FRONTIER_HOST_CONCURRENCY
    max_crawl_delay: float = defaults.FRONTIER_MAX_CRAWL_DELAY
    max_failures: int = defaults.FRONTIER_HOST_MAX_FAILURES
    failure_window: int = knob_default("host_failure_window")
    max_failure_ratio: float = knob_default("host_failure_ratio")

    @property
    def window_failures(self) -> int:
        """Failures among the last ``failure_window`` fetches that give a host up (0: off)."""
        if not self.failure_window:
            return 0
        return max(1, math.ceil(self.max_failure_ratio * self.failure_window - 1e-9))

    def gives_up(self, consecutive: int, in_window: int) -> bool:
        """Is a host with ``consecutive`` failed fetches in a row, ``in_window`` of its last
        ``failure_window``, given up? The first rule ends a dead host fast; the second a host
        whose successes come between failures (any success used to reset the count, so a host
        that mixed silent and fast pages was never given up)."""
        if consecutive >= self.max_failures:
            return True
        limit = self.window_failures
        return bool(limit) and in_window >= limit

    def after_failure(self, consecutive: int, in_window: int) -> float | None:
        """After a failed fetch: None when the host is given up, else the hold beyond its
        usual rest (:meth:`backoff` of its failures in the window, or in a row without one)."""
        if self.gives_up(consecutive, in_window):
            return None
        return self.backoff(in_window if self.failure_window else consecutive)

    def backoff(self, failures: int) -> float:
        """The hold after a failed fetch, beyond :meth:`delay`: ``failures`` (>= 1) counted as
        :meth:`gives_up` counts them, among the window (or in a row without one)."""
        if failures <= 0:
            return 0.0
        return min(self.min_delay * 2.0 ** min(failures - 1, 30), FAILURE_BACKOFF_MAX)

    def delay(self, duration: float | None, crawl_delay: float | None = None) -> float:
        wait = self.min_delay
        if duration:
            wait = max(wait, self.delay_factor * duration)
        wait = min(wait, self.max_delay)
        if crawl_delay:
            wait = max(wait, crawl_delay)
        return wait

    def accepts_crawl_delay(self, crawl_delay: float | None) -> bool:
        return crawl_delay is None or crawl_delay <= self.max_crawl_delay


def politeness_from_settings(settings: SettingsSource) -> PolitenessPolicy:
    """The crawl's policy from its FRONTIER_* settings and TUNING knobs (Scrapy's settings or
    any mapping), read and checked by the settings schema;
    :class:`~crawler.config.schema.SettingsError` names every setting that cannot be used."""
    values = read_settings([*_SETTINGS.values(), "TUNING"], settings.get)
    tuned = values["TUNING"] or {}
    given = {key: values[name] for key, name in _SETTINGS.items()}
    given.update({key: tuned.get(k, knob_default(k)) for key, k in _KNOBS.items()})
    return PolitenessPolicy(**{f.name: given[f.name] for f in fields(PolitenessPolicy)})
