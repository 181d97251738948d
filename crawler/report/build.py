"""The crawl report: one self-contained HTML file built from crawl records.

``build_report(record)`` turns a merged :class:`CrawlRecord` (one file, or one per worker of a
shared crawl) into figures and renders them as inline SVG with a short "what healthy looks
like" under each chart. Nothing in the page is loaded from anywhere: no script, no font, no
image, no stylesheet link.
"""

from __future__ import annotations

import bisect
import functools
import statistics
import string
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from crawler.report import svg
from crawler.report.addresses import addresses_section
from crawler.report.policies import policy_counts
from crawler.report.recordfile import CrawlRecord, Fetch, Session
from crawler.report.tally import BROKEN_LINK, GAP_TOLERANCE, HostTally, replay

# Stats that are a level at close, not a count: several sessions give their largest value.
GAUGES = frozenset(
    {
        "frontier/seen",
        "frontier/queued_at_close",
        "frontier/hosts",
        "frontier/depth_max",
        "frontier/hosts_waiting_at_close",
        "memusage/max",
        "memusage/startup",
    }
)
GAP_CHARTS = 8  # hosts with a chart of their gaps (the busiest)
MAX_POINTS = 1000  # points per line over time
MAX_DOTS = 1500  # gaps drawn per host; past that, the extremes of each pixel column
TABLE_HOSTS = 50
TOP_BARS = 20
DURATION_BUCKETS = (
    (0.01, "< 10 ms"),
    (0.03, "10-30 ms"),
    (0.1, "30-100 ms"),
    (0.3, "100-300 ms"),
    (1.0, "0.3-1 s"),
    (3.0, "1-3 s"),
    (10.0, "3-10 s"),
    (float("inf"), ">= 10 s"),
)


@dataclass
class HostPoliteness:
    """A host's tally (:class:`~crawler.report.tally.HostTally`, replayed from the record) with
    what the charts draw: each gap ``(t, gap, delay held against)`` and each fetch's time."""

    host: str
    tally: HostTally = field(default_factory=HostTally)
    gaps: list[tuple[float, float, float | None]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    @property
    def fetches(self) -> int:
        return self.tally.fetches

    @property
    def errors(self) -> int:
        return self.tally.errors

    @property
    def short(self) -> int:
        return self.tally.short

    @property
    def gap_count(self) -> int:
        return self.tally.gaps

    @property
    def min_gap(self) -> float | None:
        return self.tally.gap_min

    @property
    def mean_gap(self) -> float | None:
        return self.tally.gap

    @property
    def mean_asked(self) -> float | None:
        return self.tally.delay


def merged_stats(sessions: list[Session]) -> dict[str, Any]:
    """One crawl's stats from all its sessions: counts summed, levels (GAUGES) at their
    largest; a session that never ended gives the stats of its last counters line."""
    out: dict[str, Any] = {}
    for s in sessions:
        stats = s.stats if s.stats is not None else s.counters.get("stats", {})
        for key, value in stats.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                out.setdefault(key, value)
                continue
            if key in GAUGES:
                out[key] = max(out.get(key, value), value)
            else:
                out[key] = out.get(key, 0) + value
    return out


def _sum_counters(sessions: list[Session], key: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for s in sessions:
        for k, v in s.counters.get(key, {}).items():
            total[str(k)] += v
    return total


def politeness(record: CrawlRecord) -> dict[str, HostPoliteness]:
    """Per host, the real gap before each fetch (from the end of the host's latest earlier
    fetch, whichever worker made it) against the delay the frontier applied after that fetch:
    the record replayed into the one tally (:func:`crawler.report.tally.replay`), then the
    intervals summed past ``record_max_fetches`` added."""
    hosts: dict[str, HostPoliteness] = {}
    by_host: dict[str, list[Fetch]] = defaultdict(list)
    for f in record.fetches:  # sorted by start
        by_host[f.host].append(f)
    for name, fetches in by_host.items():
        hp = hosts[name] = HostPoliteness(name)
        hp.durations = [f.end - f.start for f in fetches]
        hp.gaps = list(replay(hp.tally, ((f.start, f.end, f.status, f.asked) for f in fetches)))
    for a in record.aggregates:
        hp = hosts.setdefault(a.host, HostPoliteness(a.host))
        hp.tally.add(HostTally(
            fetches=a.n, http_errors=a.errors, gaps=a.gaps, gap_sum=a.gap_sum,
            gap_min=a.gap_min, short=a.short, delays=a.asked_n, delay_sum=a.asked_sum,
        ))
    return hosts


def _grid(record: CrawlRecord) -> tuple[float, float, float]:
    """The crawl's start, end and the series' step (the longest snapshot interval)."""
    starts = [s.t0 for s in record.sessions]
    ends = [s.snapshots[-1]["t"] for s in record.sessions if s.snapshots]
    if not ends:  # no snapshot at all (a crawl killed at once): the fetches' span
        ends = [f.end for f in record.fetches[-1:]]
    start = min(starts) if starts else 0.0
    end = max(ends, default=start)
    step = max((float(s.header.get("interval", 5.0)) for s in record.sessions), default=5.0)
    end = max(end, start)
    # a week-long crawl would draw 120,000 points per line: at most MAX_POINTS, wider steps
    return start, end, max(step, (end - start) / MAX_POINTS)


def _at(snapshots: list[dict[str, float]], times: list[float], t: float, key: str) -> float | None:
    """A session's figure at time ``t``, interpolated between the snapshots around it; None
    outside the session (before its first snapshot or after its last)."""
    if not times or t < times[0] - 1e-6 or t > times[-1] + 1e-6:
        return None
    i = bisect.bisect_right(times, t)
    if i >= len(times):
        value = snapshots[-1].get(key)
        return None if value is None else float(value)
    before, after = snapshots[max(i - 1, 0)].get(key), snapshots[i].get(key)
    if before is None or after is None:
        return None if before is None else float(before)
    t0, t1 = times[max(i - 1, 0)], times[i]
    share = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
    return float(before) + (float(after) - float(before)) * share


def time_series(record: CrawlRecord) -> dict[str, Any]:
    """Pages/s (in all and per worker) and the frontier's levels on one time grid, values
    interpolated between each session's snapshots. Counts of several sessions add up (a
    session over counts as its last figure); a shared frontier's levels (every worker sees the
    same) are taken at their largest."""
    start, end, step = _grid(record)
    grid = []
    t = start
    while t < end - step / 2:
        grid.append(t)
        t += step
    grid.append(end)
    sessions = [s for s in record.sessions if s.snapshots]
    times = {id(s): [p["t"] for p in s.snapshots] for s in sessions}

    workers: dict[str, list[Session]] = defaultdict(list)
    for s in sessions:
        workers[s.worker].append(s)
    rate: dict[str, list[tuple[float, float]]] = {}
    groups = {"all workers": sessions} | (dict(workers) if len(workers) > 1 else {})
    for name, group in groups.items():
        cum = [sum(_held(s, times[id(s)], t, "pages") for s in group) for t in grid]
        rate[name] = [(grid[0], 0.0)] + [
            (grid[i], (cum[i] - cum[i - 1]) / max(grid[i] - grid[i - 1], 1e-9))
            for i in range(1, len(grid))
        ]
    levels: dict[str, list[tuple[float, float]]] = {}
    for key in ("queued", "seen", "in_flight", "hosts_ready", "hosts_waiting", "hosts_busy"):
        points = []
        for t in grid:
            values = [_at(s.snapshots, times[id(s)], t, key) for s in sessions]
            known = [v for v in values if v is not None]
            if known:
                points.append((t, max(known)))
        levels[key] = points
    counts: dict[str, list[tuple[float, float]]] = {}
    for key in ("failed", "http_errors", "rejected"):
        counts[key] = [
            (t, sum(_held(s, times[id(s)], t, key) for s in sessions)) for t in grid
        ]
    pages_total = sum(s.snapshots[-1].get("pages") or 0 for s in sessions)
    return {"start": start, "end": end, "rate": rate, "levels": levels, "counts": counts,
            "pages": pages_total}


def _held(s: Session, times: list[float], t: float, key: str) -> float:
    """A session's running count at ``t``: 0 before it started, its last figure after."""
    if t > times[-1]:
        return float(s.snapshots[-1].get(key) or 0)
    return _at(s.snapshots, times, t, key) or 0.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- the page --------------------------------------------------------------------------------


def build_report(record: CrawlRecord, *, title: str = "") -> str:
    """The page: ``templates/report.html`` (its layout, style and the "what healthy looks like"
    texts) filled with the figures, charts and tables made here."""
    stats = merged_stats(record.sessions)
    series = time_series(record)
    hosts = politeness(record)
    start, end = series["start"], series["end"]
    site = ", ".join(sorted({s.site for s in record.sessions if s.site})) or "crawl"
    title = title or f"Crawl report: {site}"
    fetches = sum(h.fetches for h in hosts.values())
    gap_total = sum(h.gap_count for h in hosts.values())
    short_total = sum(h.short for h in hosts.values())
    reasons = sorted({s.reason for s in record.sessions if s.reason}) or ["(not finished)"]
    summary = [
        ("pages", svg.fmt_number(stats.get("response_received_count", series["pages"]))),
        ("fetches", svg.fmt_number(fetches)),
        ("bytes", svg.fmt_bytes(stats.get("downloader/response_bytes", 0))),
        ("hosts", svg.fmt_number(len(hosts))),
        ("duration", svg.fmt_duration(end - start)),
        ("workers", svg.fmt_number(len(record.workers))),
        ("gaps below the delay asked", f"{short_total:,} of {gap_total:,}"),
        ("finish", ", ".join(reasons)),
    ]
    return _page().substitute(
        title=escape(title),
        started=datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        sessions=len(record.sessions),
        skipped=f"; unreadable lines skipped: {record.bad_lines}" if record.bad_lines else "",
        summary="".join(
            f'<div data-summary={svg._a(k)}><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>'
            for k, v in summary
        ),
        holds=len(record.holds),
        broken_definition=escape(BROKEN_LINK) + ", with the page it was found on (the "
        "frontier keeps it with each queued URL; none for a seed).",
        **_time_sections(series, start, end),
        politeness=_politeness_section(hosts, start, end),
        addresses=addresses_section(record),
        **_fetch_sections(hosts, stats, record),
        **_content_sections(record),
        languages=_language_section(stats),
        **_outcome_sections(stats, record),
        policies=_policy_section(stats),
        usage=_usage_section(stats),
    )


def _usage_section(stats: dict[str, Any]) -> str:
    """Sites' usage preferences (crawler/robots/usage.py): what they did to pages (effects),
    the signals read, the values nobody defined, as counted by every worker."""
    rows = sorted(
        ((k.split("/", 1)[1], v) for k, v in stats.items()
         if k.startswith("usage/") and isinstance(v, int | float) and v),
        key=lambda kv: (not kv[0].startswith("effect/"), kv[0].startswith("unknown/"), kv[0]),
    )
    if not rows:
        return '<p class="muted" data-table="usage" data-count="0">none</p>'
    body = "".join(
        f"<tr data-usage={svg._a(k)}><td>{escape(k)}</td><td>{v:,}</td></tr>" for k, v in rows
    )
    return (
        f'<table data-table="usage" data-count="{len(rows)}">'
        "<tr><th>effect, signal or unknown value</th><th>pages</th></tr>" + body + "</table>"
    )


def _policy_section(stats: dict[str, Any]) -> str:
    """Pages fetched and URLs queued per crawl policy (every worker's, merged)."""
    rows = policy_counts(stats)
    if not rows:
        return '<p class="muted" data-table="policies" data-count="0">none</p>'
    body = "".join(
        f'<tr data-policy={svg._a(r.name)}><td>{escape(r.name)}</td>'
        f"<td>{r.pages:,}</td><td>{r.queued:,}</td></tr>"
        for r in rows
    )
    return (
        f'<table data-table="policies" data-count="{len(rows)}">'
        "<tr><th>crawl policy</th><th>pages fetched</th><th>URLs queued</th></tr>"
        + body + "</table>"
    )


@functools.cache
def _page() -> string.Template:
    text = resources.files("crawler.report").joinpath("templates", "report.html").read_text(
        encoding="utf-8"
    )
    return string.Template(text)


def _figure(chart: str, content: str, caption: str = "", **data: Any) -> str:
    attrs = "".join(f" data-{k.replace('_', '-')}={svg._a(v)}" for k, v in data.items())
    cap = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return f'<figure data-chart="{chart}"{attrs}>{cap}{content}</figure>'


def _time_sections(series: dict[str, Any], start: float, end: float) -> dict[str, str]:
    rate = [svg.Series(name, pts) for name, pts in series["rate"].items()]
    levels = series["levels"]
    frontier = [
        svg.Series("queued", levels["queued"]),
        svg.Series("in flight", levels["in_flight"]),
    ]
    seen = [svg.Series("seen", levels["seen"], color="#2ca02c")]
    host_states = [
        svg.Series("ready", levels["hosts_ready"]),
        svg.Series("waiting (politeness)", levels["hosts_waiting"]),
        svg.Series("in flight", levels["hosts_busy"]),
    ]
    counts = series["counts"]
    problems = [
        svg.Series("fetches failed (no answer)", counts["failed"], color="#7f7f7f"),
        svg.Series("HTTP errors (4xx, 5xx)", counts["http_errors"], color="#d62728"),
        svg.Series("URLs rejected", counts["rejected"], color="#ff7f0e"),
    ]
    return {
        "rate": _figure("rate", svg.line_chart("rate", rate, y_label="pages/s", x_start=start,
                                               x_end=end), total=series["pages"]),
        "frontier": _figure("frontier", svg.line_chart("frontier", frontier, y_label="URLs",
                                                       x_start=start, x_end=end))
        + _figure("seen", svg.line_chart("seen", seen, y_label="URLs seen", x_start=start,
                                         x_end=end, height=160)),
        "host_states": _figure("host-states", svg.line_chart(
            "host-states", host_states, y_label="hosts", x_start=start, x_end=end)),
        "problems": _figure("problems", svg.line_chart("problems", problems, y_label="total",
                                                       x_start=start, x_end=end)),
    }


def _politeness_section(hosts: dict[str, HostPoliteness], start: float, end: float) -> str:
    busiest = sorted(hosts.values(), key=lambda h: (-h.fetches, h.host))
    figures = []
    for i, hp in enumerate(busiest[:GAP_CHARTS]):
        if not hp.gaps:
            continue
        drawn = _thin(hp.gaps, start, end)
        gaps = [(t, g) for t, g, _ in drawn]
        asked = [(t, a) for t, _, a in drawn if a is not None]
        flagged = {k for k, (_, g, a) in enumerate(drawn) if _below(g, a)}
        top = max(max((a for _, a in asked), default=0.0) * 2.5,
                  _pct([g for _, g in gaps], 0.9) * 1.2)
        chart = svg.line_chart(
            f"gaps-{i}",
            [svg.Series("delay asked", asked, color="#2ca02c", step=True)],
            dots=[svg.Dots("real gap", gaps, color="#1f77b4", flagged=flagged)],
            y_label="seconds", x_start=start, x_end=end, y_max=top, width=480, height=200,
        )
        figures.append(_figure(
            f"gaps-{i}", chart, f"{hp.host}: {hp.fetches} fetches, {len(hp.gaps)} gaps, "
            f"{hp.short} below the delay asked", host=hp.host, gaps=len(hp.gaps),
            short=hp.short, fetches=hp.fetches,
        ))
    rows = []
    for hp in busiest[:TABLE_HOSTS]:
        mg, mn, ma = hp.mean_gap, hp.min_gap, hp.mean_asked
        rows.append(
            f"<tr data-host={svg._a(hp.host)} data-fetches=\"{hp.fetches}\" "
            f"data-short=\"{hp.short}\"><td>{escape(hp.host)}</td><td>{hp.fetches:,}</td>"
            f"<td>{hp.gap_count:,}</td><td>{_secs(mn)}</td><td>{_secs(mg)}</td>"
            f"<td>{_secs(ma)}</td><td class=\"{'bad' if hp.short else ''}\">{hp.short:,}</td>"
            "</tr>"
        )
    table = (
        '<table data-table="politeness"><tr><th>host</th><th>fetches</th><th>gaps</th>'
        "<th>shortest gap</th><th>mean gap</th><th>mean delay asked</th>"
        "<th>gaps below asked</th></tr>" + "".join(rows) + "</table>"
    )
    body = (f'<div class="grid2">{"".join(figures)}</div>' if figures
            else _figure("gaps-0", svg.empty_chart("gaps-0", "no host was fetched twice")))
    return body + table


def _thin(
    gaps: list[tuple[float, float, float | None]], start: float, end: float, columns: int = 400
) -> list[tuple[float, float, float | None]]:
    """At most about MAX_DOTS gaps for a chart: every gap below the delay asked, and the
    shortest and the longest gap of each pixel column (what the eye reads in a scatter)."""
    if len(gaps) <= MAX_DOTS:
        return gaps
    keep: dict[int, list[tuple[float, float, float | None]]] = {}
    short = []
    width = max(end - start, 1e-9) / columns
    for gap in gaps:
        t, g, a = gap
        if _below(g, a):
            short.append(gap)
            continue
        col = keep.setdefault(int((t - start) / width), [gap, gap])
        if g < col[0][1]:
            col[0] = gap
        if g > col[1][1]:
            col[1] = gap
    kept = {id(g): g for pair in keep.values() for g in pair}
    return sorted([*kept.values(), *short], key=lambda gap: gap[0])


def _below(gap: float, delay: float | None) -> bool:
    """A gap below the delay asked (impolite); never when the delay is not known."""
    return delay is not None and gap < delay - GAP_TOLERANCE


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _fetch_sections(
    hosts: dict[str, HostPoliteness], stats: dict[str, Any], record: CrawlRecord
) -> dict[str, str]:
    hist = [0] * len(DURATION_BUCKETS)
    for f in record.fetches:
        d = f.end - f.start
        hist[next(i for i, (top, _) in enumerate(DURATION_BUCKETS) if d < top)] += 1
    times = svg.bar_chart("response-times", [(label, n) for (_, label), n in
                                             zip(DURATION_BUCKETS, hist, strict=True)])
    busiest = sorted((h for h in hosts.values() if h.durations), key=lambda h: -h.fetches)
    per_host = [
        (h.host, statistics.median(h.durations) * 1000) for h in busiest[:TOP_BARS]
    ]
    host_times = svg.bar_chart(
        "host-times", per_host,
        value_text=[f"median {statistics.median(h.durations) * 1000:,.0f} ms, p90 "
                    f"{_pct(h.durations, 0.9) * 1000:,.0f} ms" for h in busiest[:TOP_BARS]],
    )
    top = sorted(hosts.values(), key=lambda h: (-h.fetches, h.host))[:TOP_BARS]
    hosts_chart = svg.bar_chart(
        "hosts", [(h.host, h.fetches) for h in top],
        value_text=[f"{h.fetches:,} fetches, errors: {h.errors:,}" for h in top],
    )
    statuses = sorted(
        ((k.rsplit("/", 1)[1], v) for k, v in stats.items()
         if k.startswith("downloader/response_status_count/")),
        key=lambda kv: kv[0],
    )
    failed = sum(1 for f in record.fetches if f.status == 0)
    colors = [_status_color(code) for code, _ in statuses]
    if failed:
        statuses.append(("no answer", failed))
        colors.append("#7f7f7f")
    return {
        "response_times": _figure("response-times", times, "fetches by network time",
                                  total=sum(hist))
        + _figure("host-times", host_times, "per host (busiest first)"),
        "status": _figure("status", svg.bar_chart("status", statuses, colors=colors)),
        "hosts": _figure("hosts", hosts_chart),
    }


def _status_color(code: str) -> str:
    return {"2": "#2ca02c", "3": "#1f77b4", "4": "#ff7f0e", "5": "#d62728"}.get(code[:1], "#777")


def _content_sections(record: CrawlRecord) -> dict[str, str]:
    ctypes = _sum_counters(record.sessions, "content_types").most_common(TOP_BARS)
    depth = sorted(_sum_counters(record.sessions, "depth").items(), key=lambda kv: int(kv[0]))
    return {
        "content_types": _figure("content-types", svg.bar_chart("content-types", ctypes)),
        "depth": _figure("depth", svg.bar_chart("depth", [(f"depth {d}", n) for d, n in depth])),
    }


def _language_section(stats: dict[str, Any]) -> str:
    """HTML pages by the language of their text (``language/<code>``, crawler.content.language),
    and how many said another one in ``<html lang>``."""
    counts = sorted(
        ((k.split("/", 1)[1], v) for k, v in stats.items()
         if k.startswith("language/") and k != "language/html_lang_differs"
         and isinstance(v, int | float) and v),
        key=lambda kv: (-kv[1], kv[0]),
    )[:TOP_BARS]
    differs = stats.get("language/html_lang_differs", 0)
    return _figure("languages", svg.bar_chart("languages", counts, colors=["#8c564b"]),
                   f"<html lang> said another language: {differs:,}")


def _outcome_sections(stats: dict[str, Any], record: CrawlRecord) -> dict[str, str]:
    rejected = sorted(
        ((k.split("/", 2)[2], v) for k, v in stats.items()
         if k.startswith("frontier/rejected/") and k != "frontier/rejected/seen"),
        key=lambda kv: -kv[1],
    )
    rejected += sorted(
        (("dropped: " + k.split("/", 2)[2], v) for k, v in stats.items()
         if k.startswith("frontier/dropped/") and isinstance(v, int | float)),
        key=lambda kv: -kv[1],
    )
    # what failed for good, with its reason (crawler/middlewares/retry.py, the frontier)
    rejected += sorted(
        ((label + k.rsplit("/", 1)[1], v) for k, v in stats.items()
         for prefix, label in (("retry/gave_up/", "gave up retrying: "),
                               ("frontier/hosts_given_up/", "host given up: "))
         if k.startswith(prefix) and isinstance(v, int | float)),
        key=lambda kv: -kv[1],
    )
    dup_keys = (
        ("frontier/rejected/seen", "URL already seen"),
        ("frontier/links_repeated", "link met before (as written)"),
        ("neardup/exact", "page: exact duplicate"),
        ("neardup/near", "page: near-duplicate"),
        ("soft404/pages", "page: soft 404 (its host's not-found page, with 200)"),
    )
    dups = [(label, stats[k]) for k, label in dup_keys if stats.get(k)]
    robots = sorted(
        ((k.split("/", 1)[1], v) for k, v in stats.items()
         if k.startswith("robotstxt/") and isinstance(v, int | float) and v),
        key=lambda kv: kv[0],
    )
    workers: Counter[str] = Counter(f.worker for f in record.fetches)
    for a in record.aggregates:
        workers[a.worker] += a.n
    shown = record.broken[:500]
    broken_total = sum(s.counters.get("broken", 0) for s in record.sessions)
    rows = "".join(
        f"<tr data-status=\"{b['status']}\"><td class=\"url\">{escape(b['url'])}</td>"
        f"<td>{b['status'] or 'no answer'}</td>"
        f"<td class=\"url\">{escape(b['referer'] or '-')}</td></tr>"
        for b in shown
    )
    broken = (
        f'<table data-table="broken" data-count="{len(record.broken)}">'
        "<tr><th>URL</th><th>status</th><th>linked from</th></tr>"
        + rows + "</table>"
        if shown else '<p class="muted" data-table="broken" data-count="0">none</p>'
    )
    more = (f'<p class="muted">{broken_total - len(shown):,} more not listed '
            f"</p>" if broken_total > len(shown) else "")
    return {
        "rejections": _figure("rejections", svg.bar_chart("rejections", rejected,
                                                          colors=["#ff7f0e"])),
        "duplicates": _figure("duplicates", svg.bar_chart("duplicates", dups,
                                                          colors=["#9467bd"])),
        "robots": _figure("robots", svg.bar_chart("robots", robots, colors=["#17becf"])),
        "broken": broken + more,
        "workers": _figure("workers", svg.bar_chart("workers", sorted(workers.items()),
                                                    colors=svg.PALETTE)),
    }
