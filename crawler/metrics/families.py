"""The crawl's figures as Prometheus metric families.

One mapping for a worker and for the crawl as one: a worker's stats and the merged totals a
fleet keeps in Redis (``{key}:totals``, the sum of every worker's counters) have the same names,
so :func:`stats_families` serves both, and a dashboard reads the crawl's figures from the
crawl-wide exporter without summing workers itself (a sum over workers that restart, or whose
scrape failed once, is wrong; the totals in Redis are not).

Naming (Prometheus's conventions): every name starts with ``crawler_``, says its unit
(``_seconds``, ``_bytes``, ``_urls``), counters end in ``_total``; labels have bounded values
(a status class, a reason from a fixed set, an exception's class name), never a URL or a host.
Every series carries the constant labels it is given (``crawl``, and ``worker`` on a worker's).

The histograms live in the stats themselves (:class:`StatsHistogram`: one counter per bucket),
so the merged totals of a fleet are a histogram of the whole crawl too.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

PREFIX = "crawler_"
FETCH_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0)
DELAY_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
STALL_SECONDS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
BYTES_PREFIX = "metrics/bytes/"  # + status class: bytes of the answers of that class
ROUND_TRIPS = "redis/round_trips"
REDIS_ERRORS = "redis/errors"


class FrontierCounts(Protocol):
    """What :meth:`crawler.frontier.Frontier.counts` answers (read only)."""

    queued: int
    in_flight: int
    seen: int
    hosts: int
    hosts_ready: int
    hosts_waiting: int
    hosts_busy: int
    extra: dict[str, int]


class Stats(Protocol):
    def inc_value(self, key: str, count: float = 1, start: float = 0) -> None: ...


def status_class(status: int | None) -> str:
    """``2xx`` .. ``5xx``; ``none`` for no answer (the label's values stay bounded)."""
    if status is None or not 100 <= status <= 599:
        return "none"
    return f"{status // 100}xx"


class StatsHistogram:
    """A histogram kept in the crawl's stats: one counter per bucket (not cumulative, so
    workers' counters add up), with ``/sum`` and ``/count``. ``observe`` costs a bisect and
    three stats increments."""

    def __init__(self, key: str, bounds: Sequence[float]) -> None:
        self.key = key
        self.bounds = tuple(bounds)
        self._keys = [f"{key}/le/{b:g}" for b in self.bounds] + [f"{key}/le/+Inf"]
        self._sum = f"{key}/sum"
        self._count = f"{key}/count"

    def observe(self, stats: Stats, value: float) -> None:
        stats.inc_value(self._keys[bisect_left(self.bounds, value)])
        stats.inc_value(self._sum, value, 0.0)
        stats.inc_value(self._count)

    def buckets(self, stats: Mapping[str, Any]) -> tuple[list[tuple[str, float]], float]:
        """Cumulative buckets as Prometheus wants them, and the sum."""
        out, seen = [], 0.0
        for bound, key in zip([*self.bounds, float("inf")], self._keys, strict=True):
            seen += float(stats.get(key, 0) or 0)
            out.append(("+Inf" if bound == float("inf") else f"{bound:g}", seen))
        return out, float(stats.get(self._sum, 0.0) or 0.0)


class LocalHistogram:
    """A :class:`StatsHistogram` counted in plain lists on the hot path (a bisect and two
    additions per observation, ~1 µs) and written into the stats by :meth:`write` (every
    snapshot, and at close): Scrapy's ``inc_value`` costs ~4 µs a call."""

    def __init__(self, kept: StatsHistogram) -> None:
        self.kept = kept
        self.counts = [0] * (len(kept.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.kept.bounds, value)] += 1
        self.total += value

    def write(self, stats: Any) -> None:
        """The running totals into ``stats`` (``set_value``): counters that only grow."""
        kept = self.kept
        for key, n in zip(kept._keys, self.counts, strict=True):
            if n:
                stats.set_value(key, n)
        stats.set_value(kept._sum, self.total)
        stats.set_value(kept._count, sum(self.counts))


FETCH_HISTOGRAM = StatsHistogram("metrics/fetch_seconds", FETCH_SECONDS)
DELAY_HISTOGRAM = StatsHistogram("metrics/politeness_delay_seconds", DELAY_SECONDS)


class _Labelled:
    """Makes families that all carry the same constant labels."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.names = list(labels)
        self.values = [labels[n] for n in self.names]

    def counter(self, name: str, doc: str, value: float | None = None) -> CounterMetricFamily:
        family = CounterMetricFamily(PREFIX + name, doc, labels=self.names)
        if value is not None:
            family.add_metric(self.values, value)
        return family

    def gauge(self, name: str, doc: str, value: float | None = None) -> GaugeMetricFamily:
        family = GaugeMetricFamily(PREFIX + name, doc, labels=self.names)
        if value is not None:
            family.add_metric(self.values, value)
        return family

    def by(
        self, kind: type[CounterMetricFamily] | type[GaugeMetricFamily], name: str, doc: str,
        label: str, values: Mapping[str, float],
    ) -> Metric:
        family = kind(PREFIX + name, doc, labels=[*self.names, label])
        for key, value in sorted(values.items()):
            family.add_metric([*self.values, key], value)
        return family

    def histogram(
        self, name: str, doc: str, buckets: list[tuple[str, float]], total: float
    ) -> HistogramMetricFamily:
        family = HistogramMetricFamily(PREFIX + name, doc, labels=self.names)
        family.add_metric(self.values, buckets, total)
        return family


def _under(stats: Mapping[str, Any], prefix: str, last_dot: bool = False) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in stats.items():
        if key.startswith(prefix) and isinstance(value, int | float) and not isinstance(
            value, bool
        ):
            rest = key[len(prefix):]
            if last_dot:
                rest = rest.rsplit(".", 1)[-1]
            if "/" not in rest:
                out[rest] = out.get(rest, 0) + value
    return out


def stats_families(stats: Mapping[str, Any], labels: Mapping[str, str]) -> Iterator[Metric]:
    """The counters of a crawl's stats (a worker's, or a fleet's merged totals)."""
    m = _Labelled(labels)
    by_class: dict[str, float] = {}
    for code, n in _under(stats, "pages/status/").items():
        key = status_class(int(code)) if code.isdigit() else "none"
        by_class[key] = by_class.get(key, 0) + n
    yield m.by(CounterMetricFamily, "pages_total",
               "Pages answered, robots.txt apart, by status class", "status_class", by_class)
    yield m.by(CounterMetricFamily, "answer_bytes_total",
               "Body bytes of every answer fetched (robots.txt, redirects and errors too), "
               "by status class", "status_class", _under(stats, BYTES_PREFIX))
    yield m.counter("response_bytes_total", "Bytes downloaded (Scrapy's count)",
                    stats.get("downloader/response_bytes", 0))
    yield m.counter("broken_links_total", "Links that led to an error answer or none",
                    stats.get("pages/broken", 0))
    yield m.counter("items_total", "Items scraped", stats.get("item_scraped_count", 0))
    errors = _under(stats, "downloader/exception_type_count/", last_dot=True)
    errors.pop("IgnoreRequest", None)  # a request refused on purpose (robots.txt), not an error
    yield m.by(CounterMetricFamily, "fetch_errors_total",
               "Fetches that got no answer, by exception class", "kind", errors)
    yield m.by(CounterMetricFamily, "robotstxt_events_total",
               "robots.txt fetches and decisions (request_count, response_count, denied, "
               "deferred, unreachable, ...)", "event", _under(stats, "robotstxt/"))
    # by effect only: signal values are whatever sites write (unbounded label values)
    yield m.by(CounterMetricFamily, "usage_pages_total",
               "Pages by what their usage preferences did (not_fetched, not_kept, not_indexed, "
               "not_archived, recorded)", "effect", _under(stats, "usage/effect/"))
    yield m.by(CounterMetricFamily, "duplicates_total", "Pages found to duplicate another",
               "kind", {"exact": stats.get("neardup/exact", 0),
                        "near": stats.get("neardup/near", 0)})
    yield m.counter("frontier_enqueued_urls_total", "URLs admitted to the frontier",
                    stats.get("frontier/enqueued", 0))
    yield m.by(CounterMetricFamily, "frontier_rejected_urls_total",
               "URLs not admitted, by reason", "reason", _under(stats, "frontier/rejected/"))
    yield m.by(CounterMetricFamily, "frontier_hosts_given_up_total",
               "Hosts given up, by reason", "reason", _under(stats, "frontier/hosts_given_up/"))
    yield m.counter("redis_round_trips_total", "Round trips to Redis (a pipeline is one)",
                    stats.get(ROUND_TRIPS, 0))
    yield m.counter("redis_errors_total", "Redis calls that failed (connection lost, "
                    "timeout, error reply)", stats.get(REDIS_ERRORS, 0))
    buckets, total = FETCH_HISTOGRAM.buckets(stats)
    yield m.histogram("fetch_duration_seconds",
                      "Network time of each fetch (request sent to body received)",
                      buckets, total)
    buckets, total = DELAY_HISTOGRAM.buckets(stats)
    yield m.histogram("politeness_delay_seconds",
                      "The delay the frontier put on a host after each of its fetches",
                      buckets, total)


def frontier_families(
    counts: FrontierCounts, labels: Mapping[str, str], held: int | None = None,
    held_max_seconds: float | None = None,
) -> Iterator[Metric]:
    """The frontier's state: gauges, and its drops as counters."""
    m = _Labelled(labels)
    yield m.gauge("frontier_queued_urls", "URLs queued in the frontier", counts.queued)
    yield m.gauge("frontier_seen_urls", "URLs the frontier has seen", counts.seen)
    yield m.gauge("frontier_hosts_known", "Hosts the frontier knows", counts.hosts)
    hosts = {"ready": counts.hosts_ready, "waiting": counts.hosts_waiting,
             "in_flight": counts.hosts_busy}
    if held is not None:
        hosts["held"] = held
    yield m.by(GaugeMetricFamily, "frontier_hosts", "Hosts with queued URLs by state (ready: "
               "due now; waiting: in their politeness delay; held: waiting longer than "
               "FRONTIER_MAX_DELAY)", "state", hosts)
    yield m.gauge("frontier_leases", "URLs handed out and not yet acknowledged",
                  counts.in_flight)
    extra = dict(counts.extra)
    expired = extra.pop("leases_expired", 0)
    yield m.counter("frontier_leases_expired_total", "Leases that expired (their worker "
                    "died or stalled) and went back to the queue", expired)
    yield m.by(CounterMetricFamily, "frontier_dropped_urls_total",
               "Queued URLs dropped, by reason", "reason", extra)
    if held_max_seconds is not None:
        yield m.gauge("frontier_host_held_max_seconds",
                      "How long the longest-held host still has to wait", held_max_seconds)


def stall_family(
    histogram: Mapping[int, int], labels: Mapping[str, str]
) -> Metric:
    """The reactor stall probe's histogram (whole milliseconds late -> samples) in seconds."""
    buckets, total, seen = [], 0.0, 0
    items = sorted(histogram.items())
    for bound in [*STALL_SECONDS, float("inf")]:
        seen = sum(n for ms, n in items if ms / 1000.0 < bound)
        buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", float(seen)))
    total = sum((ms + 0.5) / 1000.0 * n for ms, n in items)
    return _Labelled(labels).histogram(
        "reactor_stall_seconds",
        "How late the reactor's probe timer fired (the reactor busy elsewhere), per sample",
        buckets, total,
    )


def gauges(
    values: Iterable[tuple[str, str, float]], labels: Mapping[str, str]
) -> Iterator[Metric]:
    """Plain gauges: (name, help, value)."""
    m = _Labelled(labels)
    for name, doc, value in values:
        yield m.gauge(name, doc, value)


def labelled_gauge(
    name: str, doc: str, label: str, values: Mapping[str, float], labels: Mapping[str, str]
) -> Metric:
    return _Labelled(labels).by(GaugeMetricFamily, name, doc, label, values)


def crawl_families(report: Mapping[str, Any], labels: Mapping[str, str]) -> Iterator[Metric]:
    """The crawl as one, from ``scrapy frontier``'s report of a shared crawl
    (:func:`crawler.backends.redis.status.crawl_report`, plain data): the merged totals of every
    worker, the frontier's state, the workers' heartbeats and the operator's controls."""
    yield from stats_families(report.get("totals") or {}, labels)
    hosts = report.get("hosts") or {}
    m = _Labelled(labels)
    yield m.gauge("frontier_queued_urls", "URLs queued in the frontier", report.get("queued", 0))
    yield m.gauge("frontier_seen_urls", "URLs the frontier has seen", report.get("seen", 0))
    yield m.gauge("frontier_hosts_known", "Hosts the frontier knows",
                  report.get("hosts_total", 0))
    yield m.by(GaugeMetricFamily, "frontier_hosts", "Hosts by state (held: waiting longer "
               "than FRONTIER_MAX_DELAY; given_up, blocked: no longer crawled)", "state",
               {k: float(v) for k, v in hosts.items()})
    leases = report.get("leases") or {}
    yield m.gauge("frontier_leases", "URLs handed out and not yet acknowledged",
                  leases.get("open", 0))
    oldest = leases.get("oldest") or []
    yield m.gauge("frontier_lease_oldest_age_seconds", "Age of the oldest open lease",
                  max((float(x.get("age", 0)) for x in oldest), default=0.0))
    dropped = dict(report.get("dropped") or {})
    yield m.counter("frontier_leases_expired_total", "Leases that expired and went back",
                    dropped.pop("leases_expired", 0))
    yield m.by(CounterMetricFamily, "frontier_dropped_urls_total",
               "Queued URLs dropped, by reason", "reason", dropped)
    held = report.get("held_hosts") or []
    yield m.gauge("frontier_host_held_max_seconds",
                  "How long the longest-held host still has to wait",
                  max((float(x.get("for", 0)) for x in held), default=0.0))
    workers = report.get("workers") or []
    states: dict[str, float] = {}
    for w in workers:
        states[str(w.get("state", "?"))] = states.get(str(w.get("state", "?")), 0) + 1
    yield m.by(GaugeMetricFamily, "workers", "Workers by the state of their last heartbeat",
               "state", states)
    for name, doc, field in (
        ("worker_heartbeat_age_seconds", "Seconds since each worker's last heartbeat",
         "last_beat_ago"),
        ("worker_pages_per_second", "Each worker's pages/s over its last heartbeat interval",
         "pages_per_s"),
    ):
        family = GaugeMetricFamily(PREFIX + name, doc, labels=[*m.names, "worker", "state"])
        for w in workers:
            family.add_metric([*m.values, str(w.get("worker", "")), str(w.get("state", "?"))],
                              float(w.get(field, 0) or 0))
        yield family
    controls = report.get("controls") or {}
    yield m.gauge("crawl_paused", "1 while the operator has paused the crawl",
                  1.0 if controls.get("paused") else 0.0)
    yield m.gauge("crawl_halted", "1 once the crawl is halted (deadline, byte budget)",
                  1.0 if report.get("halt") else 0.0)
    if controls.get("deadline") is not None:
        yield m.gauge("crawl_deadline_timestamp_seconds", "When the crawl is to end (Unix time)",
                      float(controls["deadline"]))
    if controls.get("byte_budget") is not None:
        yield m.gauge("crawl_byte_budget_bytes", "The crawl's byte budget",
                      float(controls["byte_budget"]))
