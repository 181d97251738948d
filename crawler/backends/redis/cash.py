"""OPIC's side of the Redis frontier in the worker: the cash for URLs seen before on its way to
the add script, and the crawl's cash counters read back (``frontier.py`` uses these).

The add script (``frontier_lua``) takes a page's links and, in the same call, the cash its
repeated links bring (``Frontier.credit``) as one msgpack argument: redis-py encodes every
argument, so six of them per repeated link cost the worker more than the link itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import astuple, dataclass
from typing import Any
from urllib.parse import urlsplit

import msgpack

from crawler.backends.redis.seen import identity_seen_key

# a worker remembers this many URLs it leased (their hash: ~60 bytes each) to drop cash for them
FETCHED_KEYS = 1_000_000

# A credit as the add script takes it: (the URL's identity (crawler.frontier.store.identity), cash,
# crawl policy, host, largest share): one per URL, the cash of its repeated links summed, the
# policy of the link that brought the largest share (Frontier.credit's rule, applied in the worker)
Credit = tuple[str | int, float, str, str, float]


def credit_items(links: Iterable[tuple[Any, ...]]) -> list[Credit]:
    """``Frontier.credit``'s links, ``(url, cash, policy[, host])``, one item per URL (the
    intake gives the hosts; else the URL's), without those that bring no cash.

    A page links to the same URL many times (a documentation page to its items: ~8 links per
    URL on the Rust std docs), and every credit costs a seen key hashed here and a record
    rewritten in Redis: summed here, a URL costs that once. The sum is what the links one by
    one would give: the cash added up, and the policy of the largest share (the first of a
    tie), which Redis compares with the record's own largest share."""
    merged: dict[str | int, list[Any]] = {}
    get = merged.get
    for link in links:
        cash = link[1]
        if not cash:
            continue
        item = get(link[0])
        if item is None:
            merged[link[0]] = [cash, cash, link]
        else:
            item[0] += cash
            if cash > item[1]:
                item[1], item[2] = cash, link
    return [
        (url, float(total), link[2], link[3] if len(link) > 3 else _host(url), float(top))
        for url, (total, top, link) in merged.items()
    ]


def _host(url: str | int) -> str:
    return (urlsplit(url).hostname or "") if isinstance(url, str) else ""


def record_entries(fields: dict[bytes, bytes], long: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """A host's OPIC cash records as ``HGETALL`` of its buckets gives them (``frontier_lua_opic``:
    a record's first value, struct ``<dfBB``, its tail going on in a field ``<key>\\1`` or whole
    in ``long``, the host's hash of long tails): seen key -> the queued entry's bytes. For tools
    and tests; the scripts read them in Lua."""
    out = {}
    for key, value in fields.items():
        if len(key) != 8:
            continue  # the rest of a record's tail
        at = value[13]
        tail = long[key] if at == 2 else value[14:] + (fields[key + b"\x01"] if at == 1 else b"")
        out[key] = tail[1 + tail[0] :]
    return out


@dataclass
class CashTotals:
    """A shared frontier's OPIC counters (``CashLedger``'s): ``total`` cash of the queued
    URLs, ``queued`` URLs holding a record; cash ``seeded`` with new URLs, ``credited`` to
    queued ones, ``to_fetched`` for URLs no longer queued, ``spent`` by leases (and dropped).
    ``seeded + credited == total + spent``."""

    total: float = 0.0
    queued: int = 0
    seeded: float = 0.0
    credited: float = 0.0
    to_fetched: float = 0.0
    spent: float = 0.0

    def __len__(self) -> int:
        return self.queued

    def __add__(self, other: CashTotals) -> CashTotals:
        return CashTotals(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def pack_credits(credits: Iterable[Credit], fetched: set[int]) -> tuple[bytes | str, float]:
    """The add script's last argument (msgpack ``[[seen key, host, cash, policy, largest
    share], ...]``, or "" for none) and the cash left out: links to pages this worker leased
    (``fetched``: their URLs' ``hash``, which a ``str`` computes once), whose cash would only
    be counted as history (the memory ledger drops them with one dict test too)."""
    cash, dropped = [], 0.0
    for url, amount, policy, host, share in credits:
        if hash(url) in fetched:
            dropped += amount
        else:
            cash.append((identity_seen_key(url), host, amount, policy, share))
    return (msgpack.packb(cash, use_bin_type=False) if cash else ""), dropped


class OpicCash:
    """The Redis frontier's OPIC methods (a mixin of ``RedisFrontier``, which gives
    ``opic``, ``runner``, ``add_calls``, ``client``, ``_stats`` and ``credits_dropped``)."""

    opic: bool
    runner: Any
    client: Any
    _stats: str
    credits_dropped: float

    def add_calls(self, entries: Any, credits: Any = ()) -> list[Any]:  # pragma: no cover
        raise NotImplementedError

    def credit(self, links: Any) -> None:
        """OPIC cash for URLs seen before (``Frontier.credit``): one add script call that
        adds no URL. Ignored unless the frontier orders by cash."""
        if self.opic and links:
            self.runner.run_many(self.add_calls([], credit_items(links)))

    def cash_totals(self) -> CashTotals:
        """OPIC's counters (:class:`CashTotals`), from the stats hash."""
        raw = self.client.hmget(self._stats, ("cash", "cn", "cs", "cc", "ct", "cx"))
        v = [float(x) if x is not None else 0.0 for x in raw]
        return CashTotals(total=v[0], queued=int(v[1]), seeded=v[2], credited=v[3],
                          to_fetched=v[4] + self.credits_dropped, spent=v[5])

    @property
    def ledger(self) -> CashTotals:
        """The cash counters under the names of the embedded frontier's ``CashLedger``."""
        return self.cash_totals()
