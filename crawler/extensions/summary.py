"""The end of a crawl in a dozen lines, in place of Scrapy's dump of the stats dict.

Scrapy ends every crawl with ~50 lines of stats in which "response_received_count" counts the
robots.txt fetches and the 404s as pages, and a broken link leaves no item anywhere. This
extension tallies what the pages themselves did (robots.txt fetches apart), keeps the broken
links (404 and 410) with their URLs, measures each host's real gap (from the end of one fetch
to the start of the next: what the site owner sees of our politeness), and at the end of the
crawl logs pages by status, bytes, hosts, errors by kind, rejections by reason, duplicates,
broken links, the busiest hosts and what to do next.

The full stats stay available: ``STATS_FILE`` (every broken link under ``broken_links``) and,
with ``STATS_DUMP`` off (the project's default), the whole dict at ``LOG_LEVEL=DEBUG``.

The tallies are also in the stats (``pages/ok``, ``pages/status/<code>``, ``pages/broken``), so
the exit status and the progress line count pages the same way.
"""

from __future__ import annotations

import logging
import pprint
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from time import monotonic
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawler.config import defaults
from crawler.meta import ROBOTS_META

logger = logging.getLogger(__name__)

BROKEN_STATUSES = frozenset({404, 410})
# Broken links kept with their URL (memory stays bounded on a site of a million dead links;
# the count goes on past it).
BROKEN_LINKS_KEPT = 10_000
BROKEN_LINKS_SHOWN = 5  # in the summary itself
BUSIEST_SHOWN = 3


@dataclass
class HostTally:
    """One host's pages and real gaps, as this process saw them."""

    pages: int = 0
    in_flight: int = 0
    last_end: float | None = None
    gap_sum: float = 0.0
    gaps: int = 0

    @property
    def gap(self) -> float | None:
        return self.gap_sum / self.gaps if self.gaps else None


class CrawlSummary:
    """Tallies pages per status and host while the crawl runs; logs the summary when the
    engine stops (after every other extension has written its stats)."""

    def __init__(self, crawler: Crawler, enabled: bool = True) -> None:
        self.crawler = crawler
        self.enabled = enabled
        self.clock = monotonic
        self.hosts: dict[str, HostTally] = {}
        self.statuses: Counter[int] = Counter()
        self.broken: list[tuple[str, int]] = []
        self.reason = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlSummary:
        enabled = crawler.settings.getbool("CRAWL_SUMMARY", defaults.CRAWL_SUMMARY)
        ext = cls(crawler, enabled)
        connect = crawler.signals.connect
        connect(ext.response_received, signals.response_received)
        connect(ext.request_reached_downloader, signals.request_reached_downloader)
        connect(ext.request_left_downloader, signals.request_left_downloader)
        connect(ext.spider_closed, signals.spider_closed)
        connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    # -- while the crawl runs ----------------------------------------------------------------

    def _tally(self, request: Request) -> HostTally:
        host = urlparse_cached(request).netloc.lower()
        tally = self.hosts.get(host)
        if tally is None:
            tally = self.hosts[host] = HostTally()
        return tally

    def request_reached_downloader(self, request: Request, spider: Spider) -> None:
        tally = self._tally(request)
        if tally.in_flight == 0 and tally.last_end is not None:
            tally.gap_sum += self.clock() - tally.last_end
            tally.gaps += 1
        tally.in_flight += 1

    def request_left_downloader(self, request: Request, spider: Spider) -> None:
        tally = self._tally(request)
        tally.in_flight = max(0, tally.in_flight - 1)
        tally.last_end = self.clock()

    def response_received(self, response: Response, request: Request, spider: Spider) -> None:
        if request.meta.get(ROBOTS_META):
            return  # a robots.txt fetch is not a page, and its 404 is no broken link
        status = response.status
        self.statuses[status] += 1
        stats = self.crawler.stats
        assert stats is not None
        stats.inc_value(f"pages/status/{status}")
        if 200 <= status < 300 or status == 304:
            stats.inc_value("pages/ok")
            self._tally(request).pages += 1
        elif status in BROKEN_STATUSES:
            stats.inc_value("pages/broken")
            if len(self.broken) < BROKEN_LINKS_KEPT:
                self.broken.append((response.url, status))

    def ok_pages(self) -> int:
        return sum(n for s, n in self.statuses.items() if 200 <= s < 300 or s == 304)

    def busiest(self, n: int = BUSIEST_SHOWN) -> list[tuple[str, int, float | None]]:
        """``(host, pages, mean real gap)`` of the hosts with the most pages (robots.txt and
        error answers not counted)."""
        top = sorted(self.hosts.items(), key=lambda kv: -kv[1].pages)[:n]
        return [(host, t.pages, t.gap) for host, t in top if t.pages]

    # -- at the end ------------------------------------------------------------------------

    def spider_closed(self, spider: Spider, reason: str) -> None:
        """Into the stats before the stats file is written: every broken link kept, and the
        busiest hosts."""
        self.reason = reason
        stats = self.crawler.stats
        assert stats is not None
        if self.broken:
            stats.set_value(
                "broken_links", [{"url": url, "status": status} for url, status in self.broken]
            )
        for i, (host, pages, gap) in enumerate(self.busiest()):
            stats.set_value(f"pages/busiest/{i + 1}", f"{host} {pages} pages, gap {_secs(gap)}")

    def engine_stopped(self) -> None:
        stats = self.crawler.stats
        assert stats is not None
        values = dict(stats.get_stats())
        settings = self.crawler.settings
        if not settings.getbool("STATS_DUMP") and logger.isEnabledFor(logging.DEBUG):
            logger.debug("Scrapy stats:\n%s", pprint.pformat(values))
        if not self.enabled:
            return
        spider = getattr(self.crawler, "spider", None)
        name = getattr(spider, "name", None) or "crawl"
        lines = summary_lines(
            name,
            values,
            statuses=self.statuses,
            broken=self.broken,
            busiest=self.busiest(),
            hosts=sum(1 for t in self.hosts.values() if t.pages),
            settings=_SettingsView(settings),
        )
        logger.info("%s", "\n".join(lines))


class _SettingsView:
    """The few settings the advice depends on, read once."""

    def __init__(self, settings: Any) -> None:
        self.jobdir = settings.get("JOBDIR") or ""
        self.stats_file = settings.get("STATS_FILE") or ""
        self.index_enabled = settings.getbool("INDEX_ENABLED", defaults.INDEX_ENABLED)
        self.index_path = str(settings.get("INDEX_PATH") or "")
        self.crawldb = bool(settings.get("CRAWLDB_PATH") or settings.getfloat("RECRAWL_INTERVAL"))


def summary_lines(
    name: str,
    stats: Mapping[str, Any],
    *,
    statuses: Mapping[int, int],
    broken: list[tuple[str, int]],
    busiest: list[tuple[str, int, float | None]],
    hosts: int,
    settings: _SettingsView,
) -> list[str]:
    """The summary's lines (a pure function of the tallies, so tests can read it whole)."""
    ok = sum(n for s, n in statuses.items() if 200 <= s < 300 or s == 304)
    n_broken = stats.get("pages/broken", len(broken))
    other = sum(statuses.values()) - ok - n_broken
    reason = stats.get("finish_reason", "")
    elapsed = float(stats.get("elapsed_time_seconds") or 0.0)
    head = f"Crawl {name} ended ({reason or 'unknown'}) after {_duration(elapsed)}: "
    head += f"{_n(ok, 'page')} OK"
    if n_broken:
        head += f", {_n(n_broken, 'broken link')}"
    if other:
        head += f", {_n(other, 'other error answer')}"
    lines = [head]
    if statuses:
        by_status = ", ".join(f"{s} x{n}" for s, n in sorted(statuses.items()))
        lines.append(f"  pages by status: {by_status}")
    nbytes = int(stats.get("downloader/response_bytes", 0))
    robots = int(stats.get("robotstxt/response_count", 0))
    lines.append(
        f"  downloaded {_size(nbytes)}; pages from {hosts} hosts"
        + (f" ({robots} robots.txt fetches)" if robots else "")
    )
    errors = _grouped(stats, "downloader/exception_type_count/", last_dot=True)
    errors += _grouped(stats, "robotstxt/denied", exact=True, label="robots.txt denied")
    errors += _grouped(stats, "address_safety/refused/", label_prefix="address refused: ")
    errors += _grouped(stats, "frontier/hosts_given_up/", label_prefix="host given up: ")
    errors += _grouped(stats, "retry_after/gave_up", exact=True, label="gave up after 429/503")
    if errors:
        lines.append("  errors: " + _joined(sorted(errors, key=lambda kv: (-kv[1], kv[0]))))
    limits = _grouped(stats, "limits/")
    if limits:
        lines.append("  limits hit: " + _joined(limits))
    rejected = _grouped(stats, "frontier/rejected/")
    if rejected:
        lines.append("  URLs not queued: " + _joined(rejected))
    dup_exact, dup_near = stats.get("neardup/exact", 0), stats.get("neardup/near", 0)
    if dup_exact or dup_near:
        lines.append(f"  duplicates: {dup_exact} exact, {dup_near} near (indexed as aliases)")
    if broken:
        shown = ", ".join(f"{url} ({status})" for url, status in broken[:BROKEN_LINKS_SHOWN])
        more = n_broken - min(len(broken), BROKEN_LINKS_SHOWN)
        where = (
            f"all in {settings.stats_file} (broken_links)"
            if settings.stats_file
            else "all with -s STATS_FILE=stats.json (broken_links)"
        )
        lines.append(f"  broken links: {shown}" + (f" and {more} more, {where}" if more else ""))
    if busiest:
        lines.append(
            "  busiest hosts: "
            + "; ".join(f"{host} {pages} pages, gap {_secs(gap)}" for host, pages, gap in busiest)
        )
    queued = int(stats.get("frontier/queued_at_close", 0))
    if queued:
        lines.append(f"  left in the frontier: {queued} URLs")
    lines += [f"  next: {hint}" for hint in _next_steps(name, stats, reason, queued, settings)]
    return lines


def _next_steps(
    name: str, stats: Mapping[str, Any], reason: str, queued: int, settings: _SettingsView
) -> list[str]:
    hints = []
    if settings.jobdir and (reason != "finished" or queued):
        hints.append(f"resume: run the same command again (JOBDIR={settings.jobdir})")
    elif reason not in ("finished", "") or queued:
        hints.append(
            f"to make a crawl resumable, give it a job folder: -s JOBDIR=crawls/{name}-1"
        )
    if settings.crawldb:
        hints.append("recrawl: run the same command again; it refetches only what is due")
    elif stats.get("pages/ok"):
        hints.append("recrawl later with conditional GET: -s RECRAWL_INTERVAL=86400")
    if settings.index_enabled and stats.get("index/documents"):
        where = f" --index {settings.index_path}" if settings.index_path else ""
        if settings.jobdir and not settings.index_path:
            where = f" -s JOBDIR={settings.jobdir}"
        hints.append(f'search: scrapy search "some words"{where}')
    return hints


def _grouped(
    stats: Mapping[str, Any],
    prefix: str,
    *,
    exact: bool = False,
    last_dot: bool = False,
    label: str = "",
    label_prefix: str = "",
) -> list[tuple[str, int]]:
    """(label, count) of the stats under ``prefix`` (or the one stat ``prefix``), biggest
    first."""
    if exact:
        value = stats.get(prefix)
        return [(label or prefix, int(value))] if isinstance(value, int) and value else []
    out = []
    for key, value in stats.items():
        if not key.startswith(prefix) or not isinstance(value, int) or not value:
            continue
        rest = key[len(prefix) :]
        if last_dot:
            rest = rest.rsplit(".", 1)[-1]
        out.append((label_prefix + rest, value))
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _joined(pairs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{label} {n}" for label, n in pairs)


def _secs(gap: float | None) -> str:
    return "-" if gap is None else f"{gap:.2f}s"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"  # pragma: no cover - the loop always returns
