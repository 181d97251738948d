"""What the frontier's hosts are doing, for reports (``waiting_hosts`` at the end of a crawl,
the busiest hosts in the summary, ``scrapy frontier`` status): read client-side in batches
(SSCAN, pipelined reads), so a report on a million hosts never blocks Redis for long.

A part of :class:`crawler.backends.redis.frontier.RedisFrontier` (a mixin).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import redis

from crawler.backends.redis.keys import FrontierKeys
from crawler.frontier.api import HostReport


class HostReports:
    """The hosts, those waiting and why, the busiest. Needs the frontier's client, keys and
    clock."""

    client: redis.Redis
    keys: FrontierKeys
    _now: Callable[[], float]

    def _iter_hosts(self, batch: int = 500) -> Iterable[list[str]]:
        """Host names in batches, read with SSCAN (never one blocking call over all hosts)."""
        names: list[str] = []
        for raw in self.client.sscan_iter(self.keys.hosts, count=batch):
            names.append(raw.decode())
            if len(names) >= batch:
                yield names
                names = []
        if names:
            yield names

    def hosts(self) -> list[str]:
        return [name for batch in self._iter_hosts() for name in batch]

    def waiting_hosts(self) -> list[HostReport]:
        """Hosts with queued URLs that ``next`` would not serve now. Read client-side in
        batches (SSCAN + pipelined HMGET), so a report never blocks Redis for long."""
        now = self._now()
        reports = []
        for names in self._iter_hosts():
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hmget(self.keys.host(name), "hq", "st", "bk", "fi", "fr", "tr")
                pipe.llen(self.keys.first(name))
                pipe.zscore(self.keys.ready, name)
            replies = pipe.execute()
            for i, name in enumerate(names):
                (hq, st, bk, fi, fronted, tried), firsts, ready = replies[3 * i : 3 * i + 3]
                queued = int(hq or 0)
                if not queued or st:
                    continue
                if ready is not None:
                    if ready <= now:
                        continue
                    reason, due = "politeness delay", ready - now
                elif bk != b"1" and (
                    not firsts or (int(fronted or 0) > 0 and tried != b"1")
                ):  # (OPIC: its robots.txt waits with its pages for a back queue)
                    reason, due = "waiting for a back queue", 0.0
                elif fi and int(fi):
                    reason, due = "first request in flight", 0.0
                else:
                    reason, due = "in flight", 0.0
                reports.append(HostReport(name, queued, due, reason))
        return sorted(reports, key=lambda r: -r.due_in)

    def busiest_hosts(self, n: int = 3) -> list[tuple[str, int, float]]:
        top = self.client.zrevrange(self.keys.fetches, 0, n - 1, withscores=True)
        pipe = self.client.pipeline(transaction=False)
        for name, _ in top:
            pipe.hmget(self.keys.host(name.decode()), "gs", "gn")
        out = []
        for (name, fetches), (gs, gn) in zip(top, pipe.execute(), strict=True):
            mean = float(gs) / int(gn) if gn and int(gn) else 0.0
            out.append((name.decode(), int(fetches), mean))
        return out
