"""Per-shard load of a crawl's frontier, for ``scrapy frontier <site> status``: what each shard
holds (queued URLs, hosts, ready hosts, open leases) and what its Redis node reports of itself
(operations per second, CPU seconds, memory), so an operator sees a hot shard or node before it
saturates, and when to add a master and reshard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from crawler.backends.redis.frontier import RedisFrontier


def _node_of(client: Any, key: str) -> tuple[str, Any]:
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


def shard_loads(shards: Sequence[RedisFrontier]) -> list[dict[str, Any]]:
    """One row per shard: its tag, node, counts, and the node's own figures."""
    nodes: dict[str, dict[str, Any]] = {}
    rows = []
    for shard in shards:
        name, connection = _node_of(shard.client, shard.keys.stats)
        if name not in nodes:
            nodes[name] = node_report(connection)
        c = shard.counts()
        rows.append(
            {
                "shard": shard.keys.index,
                "tag": shard.keys.prefix,
                "node": name,
                "queued": c.queued,
                "hosts": c.hosts,
                "hosts_ready": c.hosts_ready,
                "in_flight": c.in_flight,
                **{f"node_{k}": v for k, v in nodes[name].items()},
            }
        )
    return rows


def format_shard_loads(rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"shards ({len(rows)}):"]
    for r in rows:
        memory = r.get("node_used_memory")
        lines.append(
            f"  {r['shard']:>3} {r['tag']:<24} {r['node']:<21} queued {r['queued']:>9,}  "
            f"hosts {r['hosts']:>7,}  ready {r['hosts_ready']:>6,}  leases {r['in_flight']:>4}"
            + (
                f"  | node {r['node_ops_per_sec']:,} ops/s, {r['node_cpu_seconds']} CPU s, "
                f"{memory / 2**20:,.0f} MiB"
                if memory is not None
                else ""
            )
        )
    return "\n".join(lines)
