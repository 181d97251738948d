"""``TUNING``: the one expert setting, a table of knobs that tests and benchmarks turn.

A knob is internal tuning (how often a worker looks at Redis, how long an idle crawl waits),
not a promise to operators, so it is not a setting of its own: ``TUNING`` holds the few knobs
that a test or benchmark of another process must shorten (a test cannot change a module
constant of the crawl it starts), every other knob is a constant beside the code that uses it.

    scrapy crawl web -s 'TUNING={"idle_horizon": 2, "record_interval": 0.5}'

or, in a site config, ``[settings.TUNING]`` with ``idle_horizon = 2``. An unknown knob is
refused with the closest name, a bad value with what the knob takes, like any setting. A
feature reads its knobs with its other settings (:func:`crawler.config.typed.knob`).

The bottom layer: free of Scrapy and of every other package of the crawler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crawler.config.rules import Boolean, Number, Rule, SettingValueError, Show, closest, table_from


@dataclass(frozen=True)
class Knob:
    """One knob: its value when ``TUNING`` does not name it, how it is read, what it does."""

    default: Any
    rule: Rule
    what: str


#: Every knob, by name. The defaults are the measured ones; a test shortens them.
KNOBS: dict[str, Knob] = {
    "idle_horizon": Knob(300.0, Number(), "seconds: a crawl ends when nothing is in flight and "
                         "no host is due within this long (the hosts still waiting are reported)"),
    "join_wait": Knob(60.0, Number(), "seconds a worker of a shared crawl whose frontier never "
                      "held a URL waits for the worker that brings the seeds"),
    "link_slice": Knob(1000, Number(integer=True, low=1), "links of one page the scheduler "
                       "takes in one reactor turn (1,000: ~5-10 ms); a page with more is taken in "
                       "slices, one turn each"),
    "read_ahead": Knob(8, Number(integer=True, low=1), "leases a Redis worker fetches ahead of "
                       "the engine's asks at most (it adapts below that to the engine's pace)"),
    "heartbeat_interval": Knob(5.0, Number(), "seconds between a Redis worker's heartbeats "
                               "(its counters merged into the crawl's totals); 0: off"),
    "content_thread": Knob(True, Boolean(), "parse, main text and near-duplicate checks on a "
                           "thread of their own (crawler/offload/components.py), so a big page "
                           "does not hold up the reactor; off: all on the reactor (tests)"),
    "process_min_bytes": Knob(256 * 1024, Number(integer=True), "HTML pages of at least this "
                              "many bytes are parsed in the crawl's parse process, off the GIL "
                              "the reactor waits for; 0: all on the content thread"),
    "index_thread": Knob("content", Rule(), "the thread that writes the embedded index: "
                         "\"content\" shares the content thread (one thread at the GIL, the "
                         "reactor's stalls halved), any other name is a thread of its own"),
    "min_rate_grace": Knob(5.0, Number(), "seconds from a response's first byte before "
                           "DOWNLOAD_MIN_RATE applies"),
    "dns_min_ttl": Knob(60.0, Number(), "seconds a DNS answer is kept at least, whatever its "
                        "TTL (at most 6 hours is kept)"),
    "dns_negative_ttl": Knob(60.0, Number(), "seconds a failed lookup is kept before it is "
                             "asked again"),
    "dns_hold_times": Knob(3, Number(integer=True), "holds of a host whose name fails "
                           "(servfail, timeout) before its pages fail"),
    "robots_book_size": Knob(10_000, Number(integer=True), "origins whose parsed robots.txt a "
                             "worker keeps in memory (~10 KB each); 0: no bound"),
    "sitemap_max_urls": Knob(50_000, Number(integer=True, low=1), "entries read from one "
                             "sitemap file (sitemaps.org's limit)"),
    "sitemap_max_bytes": Knob(52_428_800, Number(integer=True, low=1), "bytes of one sitemap "
                              "file once uncompressed (sitemaps.org's 50 MB); a longer one, or "
                              "a gzip bomb, is read up to there"),
    "url_date_past_days": Knob(10950, Number(integer=True), "days back past which a date in "
                               "a URL marks a calendar trap (30 years: older than most of the "
                               "web); 0: no bound"),
    "robots_retry_delay": Knob(30.0, Number(), "seconds before a robots.txt answered with a 5xx "
                               "or 429, or unreachable, is tried again (the host is held "
                               "meanwhile); doubling, or the server's Retry-After, up to an hour"),
    "metrics_linger": Knob(0.0, Number(), "seconds at most a finished crawl keeps serving "
                           "/metrics until its final figures have been scraped (0: stop at once)"),
    "progress_interval": Knob(30.0, Number(), "seconds between two progress lines (pages/s, "
                              "the frontier's size, hosts ready); 0: none"),
    "recrawl_sync_delta": Knob(True, Boolean(), "Nutch's sync delta: a page long unchanged "
                               "gets at least that long an interval, its next fetch pulled "
                               "forward by a share of it (tests turn it off for exact dates)"),
    "neardup_link_demotion": Knob(4, Number(integer=True), "levels of depth added to the "
                                  "links of a page that duplicates another, so chains of "
                                  "look-alike pages end in a few hops"),
    "record_max_fetches": Knob(100_000, Number(integer=True), "fetches of a session recorded "
                               "one line each; past them, one line per host and minute"),
    "warc_revisit_min_size": Knob(256, Number(integer=True), "bytes from which a payload "
                                  "archived before becomes a revisit record (0: never)"),
    "metrics_interval": Knob(5.0, Number(), "seconds between the snapshots the reactor "
                             "publishes for /metrics (at least 0.1)"),
    "record_interval": Knob(5.0, Number(above=True), "seconds between two snapshots of the "
                            "crawl record"),
    "host_failure_window": Knob(20, Number(integer=True, high=32), "a host is also given "
                                "up when host_failure_ratio of its last this many fetches "
                                "failed, successes between them or not (at most 32: a bit mask "
                                "in the Redis frontier); 0: only FRONTIER_HOST_MAX_FAILURES in "
                                "a row"),
    "host_failure_ratio": Knob(0.5, Number(above=True, high=1), "the share of a host's last "
                               "host_failure_window fetches that, failed, give it up"),
    "robots_retry_times": Knob(2, Number(integer=True), "tries again of a robots.txt answered "
                               "with a 5xx or 429, or unreachable, before its host is given up "
                               "(the host is held meanwhile, robots_retry_delay apart)"),
    "max_backlog_bytes": Knob(8 * 1024 * 1024, Number(integer=True), "bytes of fetched pages "
                              "not yet acknowledged past which a worker stops taking work, "
                              "beside FRONTIER_MAX_BACKLOG's count; 0: no bound"),
}  # fmt: skip


def knob_default(name: str) -> Any:
    """The value of knob ``name`` when ``TUNING`` does not set it."""
    return KNOBS[name].default


@dataclass(frozen=True)
class TuningRule(Rule):
    """``TUNING``'s value: a table (a mapping, or its JSON text from ``-s``) of knobs by name,
    each read by its own rule; stored as a dict of the knobs given."""

    def read(self, value: object, show: Show) -> Any:
        table = table_from(value)
        if table is None:
            raise SettingValueError(
                f'must be a table of knobs such as {{"idle_horizon": 2}}, got {show(value)}'
            )
        out = {}
        for name, given in table.items():
            knob = KNOBS.get(str(name))
            if knob is None:
                hint = closest(str(name), KNOBS, "knobs")
                raise SettingValueError(f"unknown knob {name!r}; {hint}")
            try:
                out[str(name)] = knob.rule.read(given, show)
            except SettingValueError as exc:
                raise SettingValueError(f"{name} {exc}") from None
        return out
