"""What the frontier's hosts are doing, for reports (``waiting_hosts`` at the end of a crawl,
the busiest hosts in the summary, ``scrapy frontier`` status): read client-side in batches
(SSCAN, pipelined reads), so a report on a million hosts never blocks Redis for long.

A part of :class:`crawler.backends.redis.frontier.RedisFrontier` (a mixin), with the Lua
frontier's side of the operator's controls (:class:`OperatorControls`, another mixin): both go
with the Lua frontier. The partitioned frontier's controls are
:class:`crawler.backends.redis.controls.CrawlControls`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis

from crawler.backends.redis.controls import host_name
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


class OperatorControls:
    """Blocks of hosts and domains, pause, deadline and byte budget. Needs the frontier's
    client, keys, script call, clock and host walk."""

    client: redis.Redis
    keys: FrontierKeys
    _call: Callable[..., Any]
    _now: Callable[[], float]
    _iter_hosts: Callable[[], Iterable[list[str]]]

    def block(self, name: str, *, domain: bool = False) -> int:
        """Block a host, or a domain with all its hosts: their queued URLs are dropped
        (returned, and counted in ``drop:host_blocked``), no URL of theirs is admitted or
        handed out again, by any worker. A domain block is recorded first (hosts met later
        are blocked as they come), then the known hosts are walked with SSCAN, one script
        call per matching host: no script walks the host set. ``name`` is read as
        :func:`host_name` reads it (a port or a URL around it is dropped)."""
        name = host_name(name)
        if not domain:
            return int(self._call("block", name, "1"))
        self.client.hset(self.keys.blocked, "d:" + name, repr(self._now()))
        dropped = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    dropped += int(self._call("block", host, "0"))
        self.client.publish(self.keys.wake, "ctl")
        return dropped

    def unblock(self, name: str, *, domain: bool = False) -> int:
        """Lift a block; returns how many hosts may be crawled again (a host also blocked by
        name or by another domain stays blocked). URLs dropped by the block stay dropped."""
        name = host_name(name)
        if not domain:
            return int(self._call("unblock", name, "1"))
        self.client.hdel(self.keys.blocked, "d:" + name)
        lifted = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    lifted += int(self._call("unblock", host, "0"))
        return lifted

    def set_control(self, name: str, value: float | None, *, relative: bool = False) -> str:
        """Set (None: clear) one control: ``paused`` (1), ``deadline`` (Redis time, or
        seconds from now with ``relative``), ``budget`` (bytes). Every worker hears of it at
        once (the wake channel) and obeys it inside the scripts. Returns the crawl's halt."""
        if name not in ("paused", "deadline", "budget"):
            raise ValueError(f"no such control: {name}")
        text = "" if value is None else repr(float(value)) if name == "deadline" else str(
            int(value)
        )
        _, halt = self._call("control", name, text, "rel" if relative else "abs")
        return halt.decode()

    def controls(self) -> dict[str, Any]:
        """The operator's controls as stored: paused, deadline (Redis time), byte budget and
        bytes so far, blocked hosts and domains."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.controls)
        pipe.hget(self.keys.stats, "bytes")
        pipe.hkeys(self.keys.blocked)
        ctl, size, blocked = pipe.execute()
        ctl = {k.decode(): v.decode() for k, v in ctl.items()}
        names = sorted(b.decode() for b in blocked)
        return {
            "paused": ctl.get("paused") == "1",
            "deadline": float(ctl["deadline"]) if "deadline" in ctl else None,
            "byte_budget": int(ctl["budget"]) if "budget" in ctl else None,
            "bytes": int(size or 0),
            "blocked_hosts": [n[2:] for n in names if n.startswith("h:")],
            "blocked_domains": [n[2:] for n in names if n.startswith("d:")],
        }


def _in_domain(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)
