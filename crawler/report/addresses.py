"""Server addresses in the report: the politeness of names that share one machine.

Politeness per host name says nothing about a server that answers for a thousand names; the
crawl keeps a budget per IP address too (``crawler/frontier/addresses.py``). The record names
each host's address as DNS answered it (``["ip", host, address]`` lines), so the report can hold
the fetches of all names of one address, of every worker, against the IP delay: how many
at once, and how many gaps between one fetch's end and the next one's start were shorter than
the delay. Aggregated fetches (past ``record_max_fetches``) count in the fetches only: their
single times are not in the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from itertools import pairwise

from crawler.report.recordfile import CrawlRecord

TABLE_ADDRESSES = 20
TOLERANCE = 0.005  # a gap this much below the delay is the clocks', not the crawl's


@dataclass
class AddressLoad:
    """What the crawl sent to one server address."""

    address: str
    names: set[str] = field(default_factory=set)
    fetches: int = 0
    timed: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each fetch
    most_at_once: int = 0
    gaps: int = 0
    short: int = 0
    shortest: float | None = None


def address_loads(record: CrawlRecord) -> list[AddressLoad]:
    """Each address some host resolved to, busiest first, with its fetches held against the
    IP delay the sessions recorded (``politeness.ip_delay``; the minimum delay when absent)."""
    where: dict[str, str] = {}
    for session in record.sessions:
        where.update(session.addresses)
    if not where:
        return []
    loads: dict[str, AddressLoad] = {}
    for f in record.fetches:
        address = where.get(f.host)
        if address:
            load = loads.setdefault(address, AddressLoad(address))
            load.names.add(f.host)
            load.fetches += 1
            load.timed.append((f.start, f.end))
    for a in record.aggregates:
        address = where.get(a.host)
        if address:
            load = loads.setdefault(address, AddressLoad(address))
            load.names.add(a.host)
            load.fetches += a.n
    delay = _ip_delay(record)
    for load in loads.values():
        _measure(load, delay)
    return sorted(loads.values(), key=lambda x: (-x.fetches, x.address))


def _ip_delay(record: CrawlRecord) -> float:
    delays = []
    for s in record.sessions:
        p = s.header.get("politeness") or {}
        d = p.get("ip_delay")
        delays.append(float(d if d is not None else p.get("min_delay", 0.0)))
    return min(delays, default=0.0)


def _measure(load: AddressLoad, delay: float) -> None:
    spans = sorted(load.timed)
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = 0
    for _, step in events:
        now += step
        load.most_at_once = max(load.most_at_once, now)
    for (_, end), (start, _) in pairwise(spans):
        gap = start - end
        load.gaps += 1
        load.short += gap < delay - TOLERANCE
        load.shortest = gap if load.shortest is None else min(load.shortest, gap)


def addresses_section(record: CrawlRecord) -> str:
    """The table, or a line saying why there is none."""
    loads = address_loads(record)
    shared = [x for x in loads if len(x.names) > 1]
    if not shared:
        why = ("no address served more than one host name" if loads
               else "the record names no address (the DNS middleware was off)")
        return f'<p data-table="addresses" data-shared="0">{escape(why)}.</p>'
    delay = _ip_delay(record)
    rows = []
    for x in shared[:TABLE_ADDRESSES]:
        shortest = "-" if x.shortest is None else f"{x.shortest:.3f} s"
        rows.append(
            f'<tr data-address="{escape(x.address)}" data-names="{len(x.names)}" '
            f'data-fetches="{x.fetches}" data-at-once="{x.most_at_once}" '
            f'data-short="{x.short}"><td>{escape(x.address)}</td><td>{len(x.names):,}</td>'
            f"<td>{x.fetches:,}</td><td>{x.most_at_once}</td><td>{x.gaps:,}</td>"
            f"<td>{shortest}</td>"
            f'<td class="{"bad" if x.short else ""}">{x.short:,}</td></tr>'
        )
    return (
        f'<table data-table="addresses" data-shared="{len(shared)}" data-ip-delay="{delay}">'
        "<tr><th>address</th><th>host names</th><th>fetches</th><th>most at once</th>"
        f"<th>gaps</th><th>shortest gap</th><th>gaps below {delay:g} s</th></tr>"
        + "".join(rows) + "</table>"
    )
