"""What a Mercator frontier says about its hosts (``mercator.py``): how many are ready, waiting
or busy, which were fetched most, and why each host with queued URLs waits."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import fields

from crawler.frontier.api import Entry, FrontierCounts, HostReport
from crawler.frontier.hoststate import HostState


def count_hosts(counts: FrontierCounts, hosts: Iterable[HostState], now: float) -> FrontierCounts:
    """Add the hosts in flight, ready now and waiting for their time to ``counts``."""
    for host in hosts:
        if host.in_flight():
            counts.hosts_busy += 1
        when = host.ready_time()
        if when is None:
            continue
        if when <= now:
            counts.hosts_ready += 1
        else:
            counts.hosts_waiting += 1
    return counts


def busiest(hosts: Iterable[HostState], n: int) -> list[tuple[str, int, float]]:
    """``(host, fetches, mean real gap)`` of the ``n`` hosts fetched most."""
    top = heapq.nlargest(n, hosts, key=lambda h: h.fetches)
    return [(h.name, h.fetches, h.gap_sum / h.gaps if h.gaps else 0.0) for h in top if h.fetches]


def waiting(
    hosts: Iterable[HostState], queued_entries: Iterable[Entry], now: float
) -> list[HostReport]:
    """Hosts with queued URLs that are not handed out now, and why, the longest wait first."""
    queued: dict[str, int] = {}
    for entry in queued_entries:
        queued[entry.host] = queued.get(entry.host, 0) + 1
    reports = []
    for host in hosts:
        # a returned entry with a row id is still in a persistent store: counted above
        n = queued.get(host.name, 0) + len(host.firsts)
        n += sum(1 for e in host.returned if not e.id)
        if not n or host.dead or host.skipped:
            continue
        when = host.ready_time()
        if not host.has_back and not host.firsts and not host.returned:
            reason, due_in = "waiting for a back queue", 0.0
        elif when is None:
            reason, due_in = "in flight", 0.0
        else:
            reason, due_in = "politeness delay", max(0.0, when - now)
        reports.append(HostReport(host.name, n, due_in, reason))
    return sorted(reports, key=lambda r: -r.due_in)


def add_counts(parts: Iterable[FrontierCounts | None]) -> FrontierCounts:
    """The counts of several frontiers (a worker's partitions) as one; None: a part that
    could not say."""
    total = FrontierCounts()
    for counts in parts:
        if counts is None:
            continue
        for f in fields(FrontierCounts):
            if f.name != "extra":
                setattr(total, f.name, getattr(total, f.name) + getattr(counts, f.name))
        for key, value in counts.extra.items():
            total.extra[key] = total.extra.get(key, 0) + value
    return total
