"""Per-partition load of a crawl's frontier, for ``scrapy frontier <site> status``: a hot
partition or node, one nobody owns, an inbox not kept up with. Two pipelined calls of counts,
never a walk of a queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import redis

from crawler.backends.redis.keys import PartitionKeys, address_keys
from crawler.frontier.addresses import AddressLoad


def node_of(client: Any, key: str) -> tuple[str, Any]:
    """The node serving ``key``: its address and a client of it (the client itself when it
    is one server)."""
    get_node = getattr(client, "get_node_from_key", None)
    if get_node is None:
        kwargs = client.get_connection_kwargs()
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}", client
    node = get_node(key)
    return node.name, node.redis_connection


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


def partition_loads(
    client: Any, partitions: Sequence[PartitionKeys], front_queues: int
) -> list[dict[str, Any]]:
    """One row per partition; its owner is its lease (``<worker>/<epoch>``, "" when nobody
    owns it)."""
    pipe = client.pipeline(transaction=False)
    for k in partitions:
        pipe.get(k.lease)
        for q in range(front_queues):
            pipe.llen(k.front(q))
        pipe.hlen(k.out)
        pipe.smembers(k.back_hosts)
        pipe.hlen(k.hosts)
        pipe.xlen(k.inbox)
        pipe.exists(k.seen)  # a RedisBloom filter; else the exact set's counter
        pipe.get(k.seen_count)
    width = front_queues + 7
    replies = pipe.execute()
    rows: list[tuple[PartitionKeys, list[Any]]] = [
        (k, replies[i * width : (i + 1) * width]) for i, k in enumerate(partitions)
    ]
    pipe = client.pipeline(transaction=False)
    for k, r in rows:
        backs = sorted(h.decode() for h in r[front_queues + 2])
        for host in backs:
            pipe.llen(k.back(host))
        if r[front_queues + 5]:
            pipe.execute_command("BF.CARD", k.seen)
    second = iter(pipe.execute())
    nodes: dict[str, dict[str, Any]] = {}
    out = []
    for k, r in rows:
        lease, fronts = r[0], r[1 : front_queues + 1]
        out_len, backs, hosts, inbox, bloom, exact = r[front_queues + 1 :]
        backed = sum(next(second) for _ in backs)
        seen = int(next(second)) if bloom else int(exact or 0)
        name, connection = node_of(client, k.lease)
        if name not in nodes:
            nodes[name] = node_report(connection)
        out.append({
            "partition": k.index,
            "tag": k.prefix,
            "node": name,
            "owner": lease.decode() if lease else "",
            "queued": sum(fronts) + out_len + backed,
            "hosts": hosts,
            "seen": seen,
            "inbox": inbox,
            **{f"node_{key}": v for key, v in nodes[name].items()},
        })
    return out


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
