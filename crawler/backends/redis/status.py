"""What ``scrapy frontier <site>`` shows of a shared crawl, as plain data: the partitions as
their owners left them in Redis (pipelined counts, never a walk of a queue or a long call), and
what only the workers know from their heartbeats.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import msgpack
import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.controls import CrawlControls, redis_time
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys, address_keys
from crawler.frontier.addresses import AddressLoad
from crawler.report.policies import policy_counts
from crawler.report.tally import HostTallies, HostTally

BATCH = 500  # hosts' records read per call
ADDRESSES_READ = 10_000  # per shard, by the busiest addresses


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
        now = redis_time(self.client, keys.workers)
        if self._started is None:
            old = self.client.hget(keys.workers, self.worker_id)
            self._started = json.loads(old)["started"] if old else now
        pipe = self.client.pipeline(transaction=True)
        for name, value in counters.items():
            delta = value - self._sent.get(name, 0)
            if delta:
                add = pipe.hincrbyfloat if isinstance(delta, float) else pipe.hincrby
                add(keys.totals, name, delta)
        pipe.hgetall(keys.controls)
        pipe.hkeys(keys.blocked)
        beat = {**heartbeat, "beat": now, "started": self._started}
        pipe.hset(keys.workers, self.worker_id, json.dumps(beat))
        *_, ctl, blocked, _ = pipe.execute()
        self._sent = {**self._sent, **counters}  # only once Redis has them (else sent again)
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

    def partitions(self) -> list[PartitionKeys]:
        return [PartitionKeys(self.crawl, i, self.count) for i in range(self.count)]

    def controls(self) -> CrawlControls:
        return CrawlControls(self.client, self.crawl)

    def iter_records(self) -> Iterable[list[tuple[str, Any]]]:
        for keys in self.partitions():
            scan = self.client.hscan_iter(keys.hosts, count=BATCH)
            while chunk := list(islice(scan, BATCH)):
                yield [(name.decode(), msgpack.unpackb(blob)) for name, blob in chunk]

    def is_empty(self) -> bool:
        """No partition was ever owned and no worker ever beat: no crawl by this name."""
        pipe = self.client.pipeline(transaction=False)
        for keys in self.partitions():
            pipe.exists(keys.epoch)
        pipe.exists(CrawlKeys(self.crawl).workers)
        return not any(pipe.execute())


def crawl_report(crawl: SharedCrawl, *, top: int = 10) -> dict[str, Any]:
    """Everything ``scrapy frontier <site>`` shows, as plain data (``--json`` prints it)."""
    client = crawl.client
    now = redis_time(client, CrawlKeys(crawl.crawl).workers)
    operator = crawl.controls()
    controls = operator.controls()
    partitions = partition_loads(client, crawl.partitions(), crawl.front_queues)
    held_after = max(crawl.max_delay, 1.0)  # only a hold waits longer than this
    hosts = {"waiting": 0, "held": 0, "given_up": 0, "blocked": 0}
    given_up: Counter[str] = Counter()
    held: list[dict[str, Any]] = []
    total = 0
    for records in crawl.iter_records():
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
        {"worker": wid, "state": beat.get("state", "?"), "pages": beat.get("pages", 0),
         "pages_per_s": beat.get("rate", 0.0), "last_beat_ago": now - float(beat.get("beat", now)),
         "partitions": owned.get(wid, 0), "started_ago": now - float(beat.get("started", now))}
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
    # (shard's tag, address) of the first ADDRESSES_READ addresses of each shard, the busiest
    # of which are shown: a glance, not a scan of a billion-host crawl
    addresses = [
        key.decode().partition(":ip:")[::2]
        for prefix in crawl.address_prefixes
        for key in islice(client.scan_iter(match=prefix + ":ip:*", count=1000), ADDRESSES_READ)
    ]
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
            for a in address_loads(client, addresses, top)
        ],
        "controls": controls,
        "halt": operator.halted(),
        "totals": totals,
        "policies": [
            {"policy": c.name, "pages": c.pages, "queued": c.queued}
            for c in policy_counts(totals)
        ],
    }


def address_loads(client: Any, tagged: Iterable[tuple[str, str]], top: int) -> list[AddressLoad]:
    """The ``top`` busiest of these (shard's tag prefix, address) pairs, by fetches in flight
    then fetches so far: one pipelined call."""
    pairs = list(tagged)
    pipe = client.pipeline(transaction=False)
    for tag, address in pairs:
        state, flight, *_ = address_keys(tag, address)
        pipe.hmget(state, "fetches", "refusals")
        pipe.zcard(flight)
    replies = pipe.execute() if pairs else []
    loads = [
        AddressLoad(address, int(in_flight), int(fetches or 0), int(refusals or 0))
        for (_, address), (fetches, refusals), in_flight
        in zip(pairs, replies[::2], replies[1::2], strict=True)
    ]
    loads.sort(key=lambda a: (-a.in_flight, -a.fetches, a.address))
    return loads[:top]


def partition_loads(
    client: Any, partitions: Sequence[PartitionKeys], front_queues: int
) -> list[dict[str, Any]]:
    """One row per partition (a hot one or node, one nobody owns, an inbox not kept up with);
    its owner is its lease (``<worker>/<epoch>``, "" when nobody owns it)."""
    pipe = client.pipeline(transaction=False)
    for k in partitions:
        pipe.get(k.lease)
        pipe.hlen(k.out)
        pipe.smembers(k.back_hosts)
        pipe.hlen(k.hosts)
        pipe.xlen(k.inbox)
        pipe.exists(k.seen)  # a RedisBloom filter; else the exact set's counter
        pipe.get(k.seen_count)
        for q in range(front_queues):
            pipe.llen(k.front(q))
    replies = iter(pipe.execute())
    rows = [(k, list(islice(replies, 7)), sum(islice(replies, front_queues))) for k in partitions]
    pipe = client.pipeline(transaction=False)
    for k, (_, _, backs, _, _, bloom, _), _ in rows:
        for host in backs:
            pipe.llen(k.back(host.decode()))
        if bloom:
            pipe.execute_command("BF.CARD", k.seen)
    second = iter(pipe.execute())
    nodes: dict[str, dict[str, Any]] = {}
    out = []
    for k, (lease, out_len, backs, hosts, inbox, bloom, exact), fronts in rows:
        backed = sum(islice(second, len(backs)))
        seen = int(next(second)) if bloom else int(exact or 0)
        if isinstance(client, RedisCluster):
            node = client.get_node_from_key(k.lease)
            name, connection = node.name, node.redis_connection
        else:
            kwargs = client.get_connection_kwargs()
            name, connection = f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}", client
        if name not in nodes:
            nodes[name] = node_report(connection)
        out.append({
            "partition": k.index,
            "tag": k.prefix,
            "node": name,
            "owner": lease.decode() if lease else "",
            "queued": fronts + out_len + backed,
            "hosts": hosts,
            "seen": seen,
            "inbox": inbox,
            **{f"node_{key}": v for key, v in nodes[name].items()},
        })
    return out


def node_report(connection: Any) -> dict[str, Any]:
    """What a Redis node says of its load (empty when it cannot be asked)."""
    try:
        info = connection.info()
    except (redis.RedisError, OSError):
        return {}
    return {
        "ops_per_sec": int(info.get("instantaneous_ops_per_sec", 0)),
        "cpu_seconds": round(
            float(info.get("used_cpu_user", 0)) + float(info.get("used_cpu_sys", 0)), 1
        ),
        "used_memory": int(info.get("used_memory", 0)),
    }
