"""One view of a shared (Redis) crawl: what ``scrapy frontier <site>`` prints, and the workers'
heartbeats and merged counters it reads.

Nothing here runs a script over the queue or the host set: a long script stalls every worker.
Counts come from counters and cardinalities (``RedisFrontier.counts``, O(K)); hosts and leases
are read client-side with SSCAN/HSCAN and pipelined reads in batches, so a report on a crawl of a
million hosts costs Redis many short calls, never one long one.

Keys (under the crawl's hash tag, beside the frontier's):

=====================  ======  ================================================================
``{key}:totals``       HASH    every worker's counters merged (``HINCRBY`` of the deltas)
``{key}:workers``      HASH    worker id -> JSON heartbeat: pages, pages/s over the last
                               interval, state, started and last beat (Redis time)
=====================  ======  ================================================================
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgpack
import redis

from crawler.backends.redis.frontier import RedisFrontier, unpack_entry
from crawler.backends.redis.keys import CrawlKeys
from crawler.frontier.addresses import AddressLoad
from crawler.report.policies import policy_counts
from crawler.report.tally import HostTallies, HostTally, busiest_line

# Merge the deltas of the counters and stamp the heartbeat with Redis's clock, in one call
# (bounded: one HINCRBY per counter that moved since the last beat). A running worker of a
# paused crawl is "paused" in its heartbeat; the reply carries the operator's controls (the
# control hash and the names blocked: a few, set by hand), so a worker can say in its log what
# the operator did.
# KEYS: totals, workers, controls, blocked; ARGV: worker id, heartbeat JSON (without its
# time), then name, delta.
HEARTBEAT = r"""
for i = 3, #ARGV, 2 do
  if string.find(ARGV[i + 1], '.', 1, true) then
    redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1])
  else
    redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local beat = cjson.decode(ARGV[2])
beat.beat = now
if not beat.started then
  local old = redis.call('HGET', KEYS[2], ARGV[1])
  beat.started = old and cjson.decode(old).started or now
end
local ctl = redis.call('HGETALL', KEYS[3])
for i = 1, #ctl, 2 do
  if ctl[i] == 'paused' and ctl[i + 1] == '1' and beat.state == 'running' then
    beat.state = 'paused'
  end
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(beat))
return {string.format('%.17g', now), ctl, redis.call('HKEYS', KEYS[4])}
"""


class Fleet:
    """A worker's side of the one view: counters merged into ``{key}:totals`` and a heartbeat in
    ``{key}:workers``, one script call per beat. Blocking calls: run them off the reactor."""

    def __init__(self, client: redis.Redis, key: str, worker_id: str) -> None:
        self.client = client
        self.keys = CrawlKeys(key)
        self.worker_id = worker_id
        self._script = client.register_script(HEARTBEAT)
        self._sent: dict[str, float] = {}
        # the operator's controls as the last beat saw them: the control hash, blocked names
        self.controls: dict[str, str] = {}
        self.blocked: list[str] = []

    def beat(self, counters: Mapping[str, float], heartbeat: dict[str, Any]) -> float:
        """Send what moved in ``counters`` since the last beat, and the heartbeat; returns
        Redis's time."""
        args: list[Any] = [self.worker_id, json.dumps(heartbeat)]
        sent = dict(self._sent)
        for name, value in counters.items():
            delta = value - self._sent.get(name, 0)
            if delta:
                args += [name, repr(float(delta)) if isinstance(delta, float) else int(delta)]
                sent[name] = value
        keys = self.keys
        now, ctl, blocked = self._script(
            keys=[keys.totals, keys.workers, keys.controls, keys.blocked], args=args
        )
        self._sent = sent  # only once Redis has them: a failed beat is sent again in full
        self.controls = {ctl[i].decode(): ctl[i + 1].decode() for i in range(0, len(ctl), 2)}
        self.blocked = sorted(b.decode() for b in blocked)
        return float(now)

    def workers(self) -> dict[str, dict[str, Any]]:
        beats = self.client.hgetall(self.keys.workers)
        return {k.decode(): json.loads(v) for k, v in beats.items()}

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, v in self.client.hgetall(self.keys.totals).items():
            text = v.decode()
            out[k.decode()] = float(text) if "." in text or "e" in text else int(text)
        return out


def _batches(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def crawl_report(frontier: RedisFrontier, *, top: int = 10, batch: int = 500) -> dict[str, Any]:
    """Everything ``scrapy frontier <site>`` shows, as plain data (``--json`` prints it)."""
    client = frontier.client
    now = frontier._now()
    counts = frontier.counts()
    controls = frontier.controls()
    held_after = max(frontier.policy.max_delay, 1.0)  # only a hold waits longer than this
    hosts = {"ready": 0, "waiting": 0, "in_flight": 0, "held": 0, "given_up": 0, "blocked": 0}
    given_up: Counter[str] = Counter()
    held: list[dict[str, Any]] = []
    parts = frontier.parts()  # the shards of a sharded crawl, each with its own keys
    for part, names in ((p, n) for p in parts for n in p._iter_hosts(batch)):
        keys = part.keys
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.hmget(keys.host(name), "hq", "st", "nb")
            pipe.zscore(keys.ready, name)
        replies = pipe.execute()
        for i, name in enumerate(names):
            (hq, st, nb), ready = replies[2 * i : 2 * i + 2]
            if st:
                kind = st.decode()
                given_up[kind] += 1
                hosts["blocked" if kind == "blocked" else "given_up"] += 1
                continue
            if nb and int(nb) > 0:
                hosts["in_flight"] += 1
            if ready is None:
                continue
            if ready <= now:
                hosts["ready"] += 1
            elif ready - now > held_after:
                hosts["held"] += 1
                held.append({"host": name, "queued": int(hq or 0), "for": ready - now})
            else:
                hosts["waiting"] += 1
    leases: list[dict[str, Any]] = []
    per_worker: Counter[str] = Counter()
    lease_chunks = (
        (part, chunk)
        for part in parts
        for chunk in _batches(client.hscan_iter(part.keys.lease, count=batch), batch)
    )
    for part, chunk in lease_chunks:
        for token, raw in chunk:
            # raw: the entry inside is bytes (msgpack within msgpack), not text
            rec = msgpack.unpackb(raw, raw=True)
            host, completed, blob, issued = rec[0].decode(), rec[3], rec[4], rec[5]
            worker = rec[6].decode() if len(rec) > 6 else ""
            per_worker[worker] += 1
            leases.append(
                {
                    "token": part.token_of(token.decode()),
                    "host": host,
                    "url": unpack_entry(blob, host).url,
                    "age": now - float(issued),
                    "worker": worker,
                    "fetched": bool(completed),
                }
            )
    leases.sort(key=lambda lease: -lease["age"])
    fleet = Fleet(client, frontier.key, "")
    workers = []
    for wid, beat in sorted(fleet.workers().items()):
        workers.append(
            {
                "worker": wid,
                "state": beat.get("state", "?"),
                "pages": beat.get("pages", 0),
                "pages_per_s": beat.get("rate", 0.0),
                "last_beat_ago": now - float(beat.get("beat", now)),
                "leases": per_worker.get(wid, 0),
                "started_ago": now - float(beat.get("started", now)),
            }
        )
    # The workers' tallies (each heartbeat carries its busiest hosts) merged, beside the
    # frontier's own figures: its fetches and gaps are measured where every worker's leases
    # meet, so they hold across workers.
    tallies = HostTallies()
    for beat in fleet.workers().values():
        for host, values in (beat.get("hosts") or {}).items():
            tallies[host].add(HostTally.of_counts(values))
    totals = fleet.totals()
    busiest = []
    for h, n, gap in frontier.busiest_hosts(top):
        tally = tallies.hosts.get(h)
        row: dict[str, Any] = {"host": h, "fetches": n, "gap": gap}
        if tally is not None:
            row |= {"pages": tally.pages, "errors": tally.errors, "broken": tally.broken,
                    "delay": tally.delay}
        busiest.append(row)
    return {
        "crawl": frontier.key,
        "time": now,
        "queued": counts.queued,
        "seen": counts.seen,
        "hosts_total": counts.hosts,
        "hosts": hosts,
        "given_up": dict(given_up),
        "dropped": counts.extra,
        "leases": {
            "open": len(leases),
            "oldest": leases[:top],
            "per_worker": dict(per_worker),
        },
        "held_hosts": sorted(held, key=lambda h: -h["for"])[:top],
        "workers": workers,
        "busiest_hosts": busiest,
        "busiest_addresses": [
            {"address": a.address, "in_flight": a.in_flight, "fetches": a.fetches,
             "waits": a.refusals}
            for a in address_loads(frontier.client, [p.prefix for p in parts], top)
        ],
        "controls": controls,
        "halt": next((p.halt for p in parts if p.halt), ""),
        "totals": totals,
        "policies": [
            {"policy": c.name, "pages": c.pages, "queued": c.queued}
            for c in policy_counts(totals)
        ],
    }


def address_loads(
    client: Any, prefixes: list[str], top: int, limit: int = 10_000
) -> list[AddressLoad]:
    """The ``top`` busiest addresses of a crawl whose shards have these key prefixes, for
    ``scrapy frontier <site> status`` (at most ``limit`` addresses read: a glance, not a scan
    of a billion-host crawl)."""
    states = []
    for prefix in prefixes:
        for key in client.scan_iter(match=prefix + ":ip:*", count=1000):
            states.append(key.decode() if isinstance(key, bytes) else key)
            if len(states) >= limit:
                break
    loads = []
    for state in states:
        tag, _, address = state.partition(":ip:")
        pipe = client.pipeline(transaction=False)
        pipe.hmget(state, "fetches", "refusals")
        pipe.zcard(f"{tag}:ipf:{address}")
        (fetches, refusals), in_flight = pipe.execute()
        loads.append(AddressLoad(address, int(in_flight), int(fetches or 0), int(refusals or 0)))
    loads.sort(key=lambda a: (-a.in_flight, -a.fetches, a.address))
    return loads[:top]


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
        f"crawl {r['crawl']}: {r['queued']} URLs queued, {r['seen']} seen, "
        f"{r['leases']['open']} leases open" + (f"; HALTED: {r['halt']}" if r["halt"] else ""),
        f"hosts: {r['hosts_total']} known; {h['ready']} ready, {h['waiting']} waiting, "
        f"{h['in_flight']} in flight, {h['held']} held, {h['given_up']} given up, "
        f"{h['blocked']} blocked",
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
            f"{w['leases']} leases, last heartbeat {_ago(w['last_beat_ago'])} ago"
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
    if r["leases"]["oldest"]:
        lines.append("oldest leases:")
        for lease in r["leases"]["oldest"][:5]:
            lines.append(
                f"  {_ago(lease['age'])} {lease['url']} ({lease['worker']}"
                + (", fetched, being processed" if lease["fetched"] else "")
                + ")"
            )
    if r["held_hosts"]:
        lines.append(
            "held: "
            + ", ".join(
                f"{x['host']} ({x['queued']} URLs, {_ago(x['for'])})" for x in r["held_hosts"]
            )
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
