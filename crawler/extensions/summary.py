"""The end of a crawl in a dozen lines, in place of Scrapy's dump of the stats dict.

Scrapy ends every crawl with ~50 lines of stats in which "response_received_count" counts the
robots.txt fetches and the 404s as pages, and a broken link leaves no item anywhere. This
extension says what the pages themselves did, from the crawl's one per-host tally
(:mod:`crawler.extensions.tally`: pages by status, robots.txt fetches apart, the broken links
with their URLs and the pages they were found on, each host's real gap from the end of one
fetch to the start of the next, what the site owner sees of our politeness), and at the end of
the crawl logs pages by status, bytes, hosts, errors by kind, rejections by reason, duplicates,
broken links (each with the page that linked it), the busiest hosts and what to do next.

The full stats stay available: ``STATS_FILE`` (every broken link under ``broken_links``) and,
with ``STATS_DUMP`` off (the project's default), the whole dict at ``LOG_LEVEL=DEBUG``.
"""

from __future__ import annotations

import logging
import pprint
from collections.abc import Mapping
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler

from crawler.backends.registry import backend_class
from crawler.config.features import crawldb_enabled
from crawler.extensions.tally import CrawlTally
from crawler.index.config import IndexConfig
from crawler.report.policies import policy_line
from crawler.report.tally import busiest_line, is_ok

logger = logging.getLogger(__name__)

BROKEN_LINKS_SHOWN = 5  # in the summary itself
BUSIEST_SHOWN = 3


class CrawlSummary:
    """Logs the summary when the engine stops (after every other extension has written its
    stats), from the crawl's tally."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.reason = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlSummary:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    def _tally(self) -> CrawlTally | None:
        return self.crawler.get_extension(CrawlTally)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        """The busiest hosts into the stats, before the stats file is written."""
        self.reason = reason
        tally = self._tally()
        stats = self.crawler.stats
        assert stats is not None
        for i, busiest in enumerate(tally.busiest(BUSIEST_SHOWN) if tally else []):
            stats.set_value(f"pages/busiest/{i + 1}", busiest_line([busiest]))

    def engine_stopped(self) -> None:
        stats = self.crawler.stats
        assert stats is not None
        values = dict(stats.get_stats())
        settings = self.crawler.settings
        if not settings.getbool("STATS_DUMP") and logger.isEnabledFor(logging.DEBUG):
            logger.debug("Scrapy stats:\n%s", pprint.pformat(values))
        spider = getattr(self.crawler, "spider", None)
        name = getattr(spider, "name", None) or "crawl"
        tally = self._tally()
        lines = summary_lines(
            name,
            values,
            statuses=tally.statuses if tally else {},
            broken=tally.broken if tally else [],
            busiest=tally.busiest(BUSIEST_SHOWN) if tally else [],
            hosts=tally.hosts.with_pages() if tally else 0,
            settings=_SettingsView(settings),
        )
        logger.info("%s", "\n".join(lines))


class _SettingsView:
    """The few settings the advice depends on, read once."""

    shared = False  # the queue kept by a shared frontier (Redis), not in a JOBDIR

    def __init__(self, settings: Any) -> None:
        self.jobdir = settings.get("JOBDIR") or ""
        self.stats_file = settings.get("STATS_FILE") or ""
        index = IndexConfig.from_settings(settings)
        self.index_enabled = index.enabled
        self.index_path = str(index.path or "")
        self.crawldb = crawldb_enabled(settings)
        # a frontier kept outside this process without a JOBDIR: a shared one (Redis)
        store = backend_class(settings, "frontier_store")
        self.shared = not self.jobdir and bool(getattr(store, "persistent", False))


def summary_lines(
    name: str,
    stats: Mapping[str, Any],
    *,
    statuses: Mapping[int, int],
    broken: list[tuple[str, int, str]],
    busiest: list[tuple[str, int, float | None]],
    hosts: int,
    settings: _SettingsView,
) -> list[str]:
    """The summary's lines (a pure function of the tallies, so tests can read it whole)."""
    ok = sum(n for s, n in statuses.items() if is_ok(s))
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
        f"  downloaded {_size(nbytes)}; pages from {_n(hosts, 'host')}"
        + (f" ({robots} robots.txt {'fetch' if robots == 1 else 'fetches'})" if robots else "")
    )
    errors = _grouped(stats, "downloader/exception_type_count/", last_dot=True)
    errors += _grouped(stats, "robotstxt/denied", exact=True, label="robots.txt denied")
    errors += _grouped(stats, "address_safety/refused/", label_prefix="address refused: ")
    errors += _grouped(stats, "frontier/hosts_given_up/", label_prefix="host given up: ")
    errors += _grouped(stats, "retry_after/gave_up", exact=True, label="gave up after 429/503")
    if errors:
        lines.append("  errors: " + _joined(sorted(errors, key=lambda kv: (-kv[1], kv[0]))))
    # URLs that failed for good, by reason: retries used up, or dropped with their host
    lost = _grouped(stats, "retry/gave_up/", label_prefix="retries used up: ")
    lost += _grouped(stats, "frontier/dropped/", label_prefix="dropped: ")
    if lost:
        lines.append("  URLs given up: " + _joined(sorted(lost, key=lambda kv: (-kv[1], kv[0]))))
    limits = _grouped(stats, "limits/")
    if limits:
        lines.append("  limits hit: " + _joined(limits))
    rejected = _grouped(stats, "frontier/rejected/")
    if rejected:
        lines.append("  URLs not queued: " + _joined(rejected))
    dup_exact, dup_near = stats.get("neardup/exact", 0), stats.get("neardup/near", 0)
    if dup_exact or dup_near:
        lines.append(f"  duplicates: {dup_exact} exact, {dup_near} near (indexed as aliases)")
    soft404 = stats.get("soft404/pages", 0)
    if soft404:
        probes = stats.get("soft404/probes", 0)
        lines.append(f"  soft 404s: {soft404} pages like their host's not-found page "
                     f"({probes} hosts probed; not indexed)")
    if broken:
        shown = ", ".join(
            f"{url} ({status or 'no answer'}" + (f", on {page})" if page else ")")
            for url, status, page in broken[:BROKEN_LINKS_SHOWN]
        )
        more = n_broken - min(len(broken), BROKEN_LINKS_SHOWN)
        where = (
            f"all in {settings.stats_file} (broken_links)"
            if settings.stats_file
            else "all with -s STATS_FILE=stats.json (broken_links)"
        )
        lines.append(f"  broken links: {shown}" + (f" and {more} more, {where}" if more else ""))
    if busiest:
        lines.append("  busiest hosts: " + busiest_line(busiest))
    lines += _servers_lines(stats)
    lines += _policy_lines(stats)
    lines += _usage_lines(stats)
    queued = int(stats.get("frontier/queued_at_close", 0))
    if queued:
        lines.append(f"  left in the frontier: {queued} URLs")
    lines += [f"  next: {hint}" for hint in _next_steps(name, stats, reason, queued, settings)]
    return lines


def _usage_lines(stats: Mapping[str, Any]) -> list[str]:
    """What sites' usage preferences did (crawler.robots.usage: effects, the signals read by
    kind and value, unknown values as written)."""
    effects = _grouped(stats, "usage/effect/")
    if not effects:
        return []
    lines = ["  usage preferences: " + _joined([(k.replace("_", " "), n) for k, n in effects])]
    signals = [(k, n) for k, n in _grouped(stats, "usage/")
               if not k.startswith(("effect/", "unknown/"))]
    lines.append("  usage signals: " + _joined(signals))
    unknown = _grouped(stats, "usage/unknown/")
    if unknown:
        lines.append("  usage values nobody defined: " + _joined(unknown))
    return lines


def _servers_lines(stats: Mapping[str, Any]) -> list[str]:
    """DNS, the busiest server addresses and what sitemaps gave, when the crawl met them."""
    lines = []
    lookups = int(stats.get("dns/lookups", 0))
    if lookups:
        failures = sum(int(v) for k, v in stats.items() if k.startswith("dns/failures/"))
        lines.append(
            f"  DNS: {lookups} lookups, {int(stats.get('dns/cache_hits', 0))} cache hits, "
            f"{int(stats.get('dns/shared_hits', 0))} from other workers, {failures} failed, "
            f"{int(stats.get('dns/prefetched', 0))} ahead of the first fetch"
            + (f", {int(stats.get('dns/held', 0))} host holds" if stats.get("dns/held") else "")
        )
    addresses = stats.get("frontier/address/busiest")
    if addresses and stats.get("frontier/address/refused"):
        lines.append("  busiest addresses: " + "; ".join(addresses[:3]))
    files = int(stats.get("sitemaps/files", 0))
    if files:
        lines.append(
            f"  sitemaps: {files} files, {int(stats.get('sitemaps/entries', 0))} entries, "
            f"{int(stats.get('sitemaps/unchanged_skipped', 0))} pages spared by lastmod"
        )
    return lines


def _policy_lines(stats: Mapping[str, Any]) -> list[str]:
    """Pages fetched and URLs queued per crawl policy, when the site has policies."""
    line = policy_line(stats)
    return [f"  crawl policies: {line}"] if line else []


def _next_steps(
    name: str, stats: Mapping[str, Any], reason: str, queued: int, settings: _SettingsView
) -> list[str]:
    hints = []
    if settings.shared and (reason != "finished" or queued):
        hints.append(
            "resume: start a worker with the same settings (the queue stays in the shared "
            "frontier)"
        )
    elif settings.jobdir and (reason != "finished" or queued):
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
