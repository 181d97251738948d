"""An owner's read of its inbox on a cluster whose slot moved to another master since the
client read its map of slots (``crawler.backends.redis.mail``): the read is refused with
``MOVED`` as a transient error (the frontier's worker calls again), and the next read finds
the inbox where it is now, its letters read once. A take of seeds pushed to the crawl whose
list moved goes again at once."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from redis.exceptions import TryAgainError

from crawler.backends.redis.frontier_store import poll_inbox
from crawler.backends.redis.inbox import RedisScopeRegistry, SharedInbox
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys
from crawler.backends.redis.mail import Letter, Mailboxes, pack_letter
from crawler.frontier.api import Entry
from tests.redis_cluster_support import RedisClusterServers, redis_cluster  # noqa: F401
from tests.redis_support import fresh_key

COUNT = 4


def move_slot(cluster: RedisClusterServers, slot: int, source: str, target: str) -> None:
    """Move ``slot``, keys and all, from the master at ``source`` to the one at ``target``
    (addresses), as ``redis-cli --cluster reshard`` moves each slot."""
    nodes = {n.address: n for n in cluster.live()}
    src, dst = nodes[source].client(), nodes[target].client()
    src_id, dst_id = cluster.node_id(nodes[source]), cluster.node_id(nodes[target])
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        host, port = target.split(":")
        src.execute_command("MIGRATE", host, int(port), "", 0, 5000, "KEYS", *keys)
    for client in (dst, src):
        client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    src.close()
    dst.close()
    # the other masters told too, as redis-cli's reshard does, and every node (replicas learn
    # by gossip) left to agree: a client that reads its map of slots from a node that has not
    # heard yet is sent back and forth by MOVED, which is not what is tested here
    for master in cluster.masters():
        if master.address not in (source, target):
            with master.client() as other:
                other.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    cluster.wait_ok()


@dataclass
class Inbox:
    """An owned partition as :meth:`Mailboxes.read` sees it."""

    index: int
    claiming: bool = False


def letter_of(url: str) -> bytes:
    return pack_letter(Letter(adds=[(Entry(url, url.split("/")[2]), False, False)]))


def urls(letters: list[tuple[bytes, Letter]]) -> list[str]:
    return [entry.url for _, letter in letters for entry, _, _ in letter.adds]


def test_a_read_of_an_inbox_whose_slot_moved_goes_again_where_it_is(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    client = redis_cluster.client()
    try:
        key = fresh_key()
        keys = [PartitionKeys(key, i, COUNT) for i in range(COUNT)]
        mail = Mailboxes(client, keys.__getitem__, "w1")
        for i in range(COUNT):
            mail.open(i)
        mail.send({1: letter_of("http://a.test/1"), 2: letter_of("http://b.test/1")})
        inbox = keys[1].inbox
        source = client.get_node_from_key(inbox).name
        target = next(m.address for m in redis_cluster.masters() if m.address != source)
        slot = client.keyslot(inbox)
        owned = [Inbox(i) for i in range(COUNT)]
        move_slot(redis_cluster, slot, source, target)
        try:
            with pytest.raises(TryAgainError):  # transient: the worker calls again
                mail.read(owned, "w1", 64)
            got = mail.read(owned, "w1", 64)  # (what the failed read delivered: claimed)
            again = mail.read(owned, "w1", 64)
        finally:
            move_slot(redis_cluster, slot, target, source)
        assert {i: urls(ls) for i, ls in got.items()} == {
            1: ["http://a.test/1"], 2: ["http://b.test/1"]
        }
        assert again == {}
    finally:
        client.close()


def test_a_take_of_seeds_whose_slot_moved_goes_again_where_it_is(
    redis_cluster: RedisClusterServers,  # noqa: F811
) -> None:
    """The seeds' list (``<site>:start_urls``) moved to another master by a reshard since the
    worker read its map of slots: the take is answered ``MOVED``, which is not Redis away (the
    frontier's worker would say "Shared frontier unreachable" for any error the poll raises):
    the poll goes again at once, to where the list is now, and hands its seeds over."""
    client = redis_cluster.client()
    try:
        keys = CrawlKeys(fresh_key(), "site")
        got: list[str] = []
        inbox = SharedInbox(client, keys.seeds, RedisScopeRegistry(client, keys.scope),
                            on_seeds=got.extend, on_scope=None)  # fmt: skip
        assert poll_inbox(inbox) is False  # (the client's map of slots: read)
        pushed = [f"https://s{i}.test/" for i in range(3)]
        client.rpush(keys.seeds, *pushed)
        source = client.get_node_from_key(keys.seeds).name
        target = next(m.address for m in redis_cluster.masters() if m.address != source)
        slot = client.keyslot(keys.seeds)
        move_slot(redis_cluster, slot, source, target)
        try:
            poll_inbox(inbox)
        finally:
            move_slot(redis_cluster, slot, target, source)
        assert got == pushed
        inbox.scope.close()
    finally:
        client.close()
