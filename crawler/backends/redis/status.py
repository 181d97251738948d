"""What ``scrapy frontier <site>`` shows of a shared crawl, as plain data: the partitions as
their owners left them in Redis (many short calls, never one long one), and what only the
workers know from their heartbeats.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import msgpack
import redis

from crawler.backends.redis.controls import CrawlControls, redis_time
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys
from crawler.backends.redis.partition_load import address_loads, partition_loads
from crawler.frontier.addresses import AddressLoad
from crawler.report.policies import policy_counts
from crawler.report.tally import HostTallies, HostTally


class Fleet:
    """A worker's counters merged into the crawl's, and its heartbeat. Blocking calls: run
    them off the reactor.

    A beat is one transaction, so a beat that failed wrote nothing and is sent again in full.
    It is stamped with Redis's ``TIME`` (the workers' clocks never meet), asked apart: a
    cluster's transaction takes no keyless command."""

    def __init__(self, client: redis.Redis, key: str, worker_id: str) -> None:
        self.client = client
        self.keys = CrawlKeys(key)
        self.worker_id = worker_id
        self._sent: dict[str, float] = {}
        self._started: float | None = None
        # the operator's controls as the last beat saw them: the control hash, blocked names
        self.controls: dict[str, str] = {}
        self.blocked: list[str] = []

    def beat(self, counters: Mapping[str, float], heartbeat: dict[str, Any]) -> float:
        """Send what moved in ``counters`` since the last beat, and the heartbeat; returns
        Redis's time."""
        keys = self.keys
        now = redis_time(self.client)
        if self._started is None:
            old = self.client.hget(keys.workers, self.worker_id)
            self._started = json.loads(old)["started"] if old else now
        pipe = self.client.pipeline(transaction=True)
        sent = dict(self._sent)
        for name, value in counters.items():
            delta = value - self._sent.get(name, 0)
            if isinstance(delta, float) and delta:
                pipe.hincrbyfloat(keys.totals, name, delta)
            elif delta:
                pipe.hincrby(keys.totals, name, int(delta))
            sent[name] = value
        pipe.hgetall(keys.controls)
        pipe.hkeys(keys.blocked)
        beat = {**heartbeat, "beat": now, "started": self._started}
        pipe.hset(keys.workers, self.worker_id, json.dumps(beat))
        *_, ctl, blocked, _ = pipe.execute()
        self._sent = sent  # only once Redis has them: a failed beat is sent again in full
        self.controls = {k.decode(): v.decode() for k, v in ctl.items()}
        self.blocked = sorted(b.decode() for b in blocked)
        return now

    def workers(self) -> dict[str, dict[str, Any]]:
        """The workers' last heartbeats; a running worker of a paused crawl is "paused"."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.workers)
        pipe.hget(self.keys.controls, "paused")
        beats, paused = pipe.execute()
        out = {k.decode(): json.loads(v) for k, v in beats.items()}
        for beat in out.values():
            if paused == b"1" and beat.get("state") == "running":
                beat["state"] = "paused"
        return out

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, v in self.client.hgetall(self.keys.totals).items():
            text = v.decode()
            out[k.decode()] = float(text) if "." in text or "e" in text else int(text)
        return out


@dataclass
class SharedCrawl:
    """A crawl shared through Redis as ``scrapy frontier`` sees it; ``max_delay``: the
    politeness delay beyond which a waiting host is held."""

    client: Any
    crawl: str
    count: int
    front_queues: int
    max_delay: float = 1.0
    address_prefixes: list[str] = field(default_factory=list)

    @property
    def keys(self) -> CrawlKeys:
        return CrawlKeys(self.crawl)

    def partitions(self) -> list[PartitionKeys]:
        return [PartitionKeys(self.crawl, i, self.count) for i in range(self.count)]

    def controls(self) -> CrawlControls:
        return CrawlControls(self.client, self.crawl)

    def iter_hosts(self, batch: int = 500) -> Iterable[list[str]]:
        for names in self.iter_records(batch):
            yield [name for name, _ in names]

    def iter_records(self, batch: int = 500) -> Iterable[list[tuple[str, Any]]]:
        for keys in self.partitions():
            scan = self.client.hscan_iter(keys.hosts, count=batch)
            while chunk := list(islice(scan, batch)):
                yield [(name.decode(), msgpack.unpackb(blob)) for name, blob in chunk]

    def is_empty(self) -> bool:
        """No partition was ever owned and no worker ever beat: no crawl by this name."""
        pipe = self.client.pipeline(transaction=False)
        for keys in self.partitions():
            pipe.exists(keys.epoch)
        pipe.exists(self.keys.workers)
        return not any(pipe.execute())


def crawl_report(crawl: SharedCrawl, *, top: int = 10, batch: int = 500) -> dict[str, Any]:
    """Everything ``scrapy frontier <site>`` shows, as plain data (``--json`` prints it)."""
    client = crawl.client
    now = redis_time(client)
    operator = crawl.controls()
    controls = operator.controls()
    partitions = partition_loads(client, crawl.partitions(), crawl.front_queues)
    held_after = max(crawl.max_delay, 1.0)  # only a hold waits longer than this
    hosts = {"waiting": 0, "held": 0, "given_up": 0, "blocked": 0}
    given_up: Counter[str] = Counter()
    held: list[dict[str, Any]] = []
    total = 0
    for records in crawl.iter_records(batch):
        for name, (_, _, _, dead, skipped, free_at, *_) in records:
            total += 1
            if dead or skipped:
                given_up["host_dead" if dead else "host_skipped"] += 1
                hosts["given_up"] += 1
            elif operator.blocked(name):
                hosts["blocked"] += 1
            elif free_at - now > held_after:
                hosts["held"] += 1
                held.append({"host": name, "for": free_at - now})
            elif free_at > now:
                hosts["waiting"] += 1
    fleet = Fleet(client, crawl.crawl, "")
    beats = fleet.workers()
    owned = Counter(p["owner"].rpartition("/")[0] for p in partitions if p["owner"])
    workers = [
        {
            "worker": wid,
            "state": beat.get("state", "?"),
            "pages": beat.get("pages", 0),
            "pages_per_s": beat.get("rate", 0.0),
            "last_beat_ago": now - float(beat.get("beat", now)),
            "partitions": owned.get(wid, 0),
            "started_ago": now - float(beat.get("started", now)),
        }
        for wid, beat in sorted(beats.items())
    ]
    # The workers' tallies (each heartbeat carries its busiest hosts) merged: a host has one
    # owner at a time, so its fetches add up across the workers that owned it.
    tallies = HostTallies()
    for beat in beats.values():
        for host, values in (beat.get("hosts") or {}).items():
            tallies[host].add(HostTally.of_counts(values))
    busiest = [
        {"host": h, "fetches": t.fetches, "gap": t.gap or 0.0, "pages": t.pages,
         "errors": t.errors, "broken": t.broken, "delay": t.delay}
        for h, t in tallies.busiest(top, by="fetches")
    ]
    totals = fleet.totals()
    dropped = {
        k.rpartition("/")[2]: int(v) for k, v in totals.items()
        if k.startswith("frontier/dropped/")
    }
    blocked_drops = sum(controls["dropped"].values())
    if blocked_drops:
        dropped["host_blocked"] = max(dropped.get("host_blocked", 0), blocked_drops)
    return {
        "crawl": crawl.crawl,
        "time": now,
        "queued": sum(p["queued"] for p in partitions),
        "seen": sum(p["seen"] for p in partitions),
        "inbox": sum(p["inbox"] for p in partitions),
        "hosts_total": total,
        "hosts": hosts,
        "given_up": dict(given_up),
        "dropped": dropped,
        "held_hosts": sorted(held, key=lambda h: -h["for"])[:top],
        "partitions": partitions,
        "workers": workers,
        "busiest_hosts": busiest,
        "busiest_addresses": [
            {"address": a.address, "in_flight": a.in_flight, "fetches": a.fetches,
             "waits": a.refusals}
            for a in busiest_addresses(client, crawl.address_prefixes, top)
        ],
        "controls": controls,
        "halt": operator.halted(),
        "totals": totals,
        "policies": [
            {"policy": c.name, "pages": c.pages, "queued": c.queued}
            for c in policy_counts(totals)
        ],
    }


def busiest_addresses(
    client: Any, prefixes: list[str], top: int, limit: int = 10_000
) -> list[AddressLoad]:
    """The ``top`` busiest addresses of a crawl whose shards have these key prefixes (at most
    ``limit`` addresses read: a glance, not a scan of a billion-host crawl)."""
    tagged: list[tuple[str, str]] = []
    for prefix in prefixes:
        for key in islice(client.scan_iter(match=prefix + ":ip:*", count=1000), limit):
            tag, _, address = (key.decode() if isinstance(key, bytes) else key).partition(":ip:")
            tagged.append((tag, address))
    return address_loads(client, tagged, top)
