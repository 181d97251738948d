"""What a test can read of a partitioned crawl in Redis: who owns which partition, and the URLs
out of the front queues (routed to a back queue, leased, handed back) in each."""

from __future__ import annotations

from typing import Any

import msgpack

from crawler.backends.redis.entries import unpack_entry
from crawler.backends.redis.frontier_store import PARTITIONS
from crawler.backends.redis.keys import PartitionKeys


def partition_keys(key: str) -> list[PartitionKeys]:
    return [PartitionKeys(key, i, PARTITIONS) for i in range(PARTITIONS)]


def owned(client: Any, key: str, proc: Any) -> list[PartitionKeys]:
    """The partitions the worker process ``proc`` owns now (its pid is in the lease value)."""
    marker = f":{proc.pid}/"
    out = []
    for keys in partition_keys(key):
        value = client.get(keys.lease)
        if value is not None and marker in value.decode():
            out.append(keys)
    return out


def out_urls(client: Any, keys: PartitionKeys) -> set[str]:
    """The URLs of a partition that are out of its front queues: in a back queue's head,
    leased, or handed back (its owner's work in hand)."""
    blobs = client.hvals(keys.out)
    if not blobs:
        return set()
    host_of = {
        msgpack.unpackb(record)[0]: name.decode()
        for name, record in client.hgetall(keys.hosts).items()
    }
    return {unpack_entry(blob, host_of).url for blob in blobs}


def holds_work(client: Any, key: str, proc: Any) -> bool:
    """Whether ``proc`` owns a partition with URLs out of its front queues."""
    return any(client.hlen(keys.out) for keys in owned(client, key, proc))


def held_urls(client: Any, key: str, proc: Any) -> set[str]:
    """The URLs out of the front queues in the partitions ``proc`` owns."""
    return {url for keys in owned(client, key, proc) for url in out_urls(client, keys)}


def urls_out(client: Any, key: str) -> int:
    """URLs out of the front queues in the whole crawl (0 once every page is acknowledged)."""
    return sum(client.hlen(keys.out) for keys in partition_keys(key))


def queued_urls(client: Any, key: str) -> set[str]:
    """Every URL the crawl holds: in front queues, back-queue lists, and out of them."""
    urls: set[str] = set()
    for keys in partition_keys(key):
        host_of = {
            msgpack.unpackb(record)[0]: name.decode()
            for name, record in client.hgetall(keys.hosts).items()
        }
        if not host_of:
            continue
        blobs = list(client.hvals(keys.out))
        for q in range(64):
            if not client.exists(keys.front(q)):
                if q > 16:
                    break
                continue
            blobs += client.lrange(keys.front(q), 0, -1)
        for host in client.smembers(keys.back_hosts):
            blobs += client.lrange(keys.back(host.decode()), 0, -1)
        urls.update(unpack_entry(blob, host_of).url for blob in blobs)
    return urls


def seen_count(client: Any, key: str) -> int:
    """URLs the crawl's seen-sets took (the exact kind's counters, or RedisBloom's cards)."""
    total = 0
    for keys in partition_keys(key):
        if client.exists(keys.seen):
            total += int(client.execute_command("BF.CARD", keys.seen))
        total += int(client.get(keys.seen_count) or 0)
    return total
