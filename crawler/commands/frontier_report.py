"""How ``scrapy frontier <site>`` prints a shared crawl: the report
(:func:`crawler.backends.redis.status.crawl_report`'s plain data) for a person, and the
did-you-mean of a host the crawl has not met."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from crawler.report.tally import busiest_line


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def format_report(r: Mapping[str, Any]) -> str:
    """The report for a person: a dozen lines, the figures an operator looks at first."""
    h = r["hosts"]
    c = r["controls"]
    lines = [
        f"crawl {r['crawl']}: {r['queued']} URLs queued (in flight included), {r['seen']} seen, "
        f"{r['inbox']} letters in inboxes" + (f"; HALTED: {r['halt']}" if r["halt"] else ""),
        f"hosts: {r['hosts_total']} known; {h['waiting']} waiting, {h['held']} held, "
        f"{h['given_up']} given up, {h['blocked']} blocked",
    ]
    ctl = []
    if c["paused"]:
        ctl.append("paused")
    if c["deadline"] is not None:
        end = datetime.fromtimestamp(c["deadline"]).isoformat(timespec="seconds")
        left = c["deadline"] - r["time"]
        ctl.append(f"deadline {end} (in {_ago(left)})" if left > 0
                   else f"deadline {end} (passed {_ago(-left)} ago)")
    if c["byte_budget"] is not None:
        ctl.append(f"byte budget {c['bytes']}/{c['byte_budget']}")
    if c["blocked_hosts"] or c["blocked_domains"]:
        ctl.append(
            "blocked: "
            + ", ".join([*c["blocked_hosts"], *(f"*.{d}" for d in c["blocked_domains"])])
        )
    lines.append("controls: " + ("; ".join(ctl) if ctl else "none"))
    if r["dropped"]:
        lines.append(
            "dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(r["dropped"].items()))
        )
    lines.append(f"workers ({len(r['workers'])}):")
    for w in r["workers"]:
        lines.append(
            f"  {w['worker']}: {w['state']}, {w['pages']} pages, {w['pages_per_s']:.1f} pages/s, "
            f"{w['partitions']} partitions, last heartbeat {_ago(w['last_beat_ago'])} ago"
        )
    if r["busiest_hosts"]:
        lines.append("busiest: " + busiest_line(
            ((b["host"], b["fetches"], b["gap"]) for b in r["busiest_hosts"]),
            noun="fetches", sep=", ",
        ))
    if r.get("busiest_addresses"):
        lines.append("busiest addresses: " + ", ".join(
            f"{a['address']} {a['fetches']} fetches ({a['waits']} waits, {a['in_flight']} now)"
            for a in r["busiest_addresses"][:5]
        ))
    if r.get("policies"):  # the workers' merged counts per crawl policy
        lines.append("crawl policies: " + ", ".join(
            f"{p['policy']} {p['pages']} pages ({p['queued']} URLs queued)"
            for p in r["policies"]
        ))
    if r["held_hosts"]:
        lines.append(
            "held: " + ", ".join(f"{x['host']} ({_ago(x['for'])})" for x in r["held_hosts"])
        )
    t = r["totals"]
    if t:
        pages = sum(v for k, v in t.items() if k.startswith("pages/status/"))
        lines.append(
            f"totals of all workers: {pages} pages, "
            f"{int(t.get('downloader/response_bytes', 0))} bytes, "
            f"{int(t.get('item_scraped_count', 0))} items"
            + (f", {int(t['pages/broken'])} broken links" if t.get("pages/broken") else "")
        )
    return "\n".join(lines)


def format_partition_loads(rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"partitions ({len(rows)}):"]
    for r in rows:
        memory = r.get("node_used_memory")
        lines.append(
            f"  {r['partition']:>3} {r['owner'] or '(no owner)':<24} queued {r['queued']:>9,}  "
            f"hosts {r['hosts']:>7,}  seen {r['seen']:>10,}  inbox {r['inbox']:>5,}  "
            f"{r['node']}"
            + (
                f" ({r['node_ops_per_sec']:,} ops/s, {r['node_cpu_seconds']} CPU s, "
                f"{memory / 2**20:,.0f} MiB)"
                if memory is not None
                else ""
            )
        )
    return "\n".join(lines)


def closest_hosts(name: str, hosts: Iterable[list[str]], n: int = 3,
                  limit: int = 200_000) -> tuple[bool, list[str]]:
    """Whether ``name`` is one of ``hosts`` (batches, as a walk of the crawl's hosts gives
    them), and else the known names closest to it (a did-you-mean), looking at ``limit`` at
    most."""
    seen: list[str] = []
    for batch in hosts:
        for host in batch:
            if host == name:
                return True, []
            seen.append(host)
        if len(seen) >= limit:
            break
    return False, difflib.get_close_matches(name, seen, n=n, cutoff=0.6)
