"""A partition's seen-set without scripts (crawler/backends/redis/seenset.py), on real servers:
the exact buckets on every kind, RedisBloom's filter where the server has it (the
``redis-bloom`` kind of ``CRAWLER_TEST_REDIS``), two workers adding at once, and a cluster."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import hiredis
import pytest
import redis

from crawler.backends.redis import seenset
from crawler.backends.redis.keys import PartitionKeys, glob_escape
from crawler.backends.redis.seenset import SeenSet, SeenSetConfig, has_bloom_module
from crawler.frontier.store import url_key
from tests.redis_cluster_support import RedisClusterServers, start_cluster
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

KINDS = ("exact", "bloom")


def url_keys(n: int, salt: str = "") -> list[int]:
    return [url_key(f"https://h{i % 97}.example/{salt}page/{i}") for i in range(n)]


def config(kind: str, capacity: int = 100_000, error: float = 0.001) -> SeenSetConfig:
    return SeenSetConfig(capacity=capacity, error=error, bloom=kind == "bloom")


def usable(client: redis.Redis | object, kind: str) -> None:
    """Skip the bloom kind on a server without ``BF.*`` (Debian's Redis, Valkey)."""
    if kind == "bloom" and not has_bloom_module(client):  # type: ignore[arg-type]
        pytest.skip("the server has no BF.* commands (CRAWLER_TEST_REDIS=redis-bloom has)")


def partition(index: int = 0, count: int = 1) -> PartitionKeys:
    return PartitionKeys(fresh_key(), index, count)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    c = redis_server.client()
    try:
        yield c
    finally:
        c.close()


def test_the_server_kind_decides_bloom(redis_server: RedisServer, client: redis.Redis) -> None:  # noqa: F811
    """RedisBloom loaded: BF.* is used; Debian's Redis and Valkey have none: exact."""
    assert has_bloom_module(client) is (redis_server.kind == "redis-bloom")


@pytest.mark.parametrize("kind", KINDS)
def test_add_says_which_keys_were_new(client: redis.Redis, kind: str) -> None:
    usable(client, kind)
    seen = SeenSet(client, partition(), config(kind))
    first, second = url_keys(300), url_keys(300, "other/")
    assert seen.add_many(first) == [True] * 300
    assert seen.add_many(first[:100] + second) == [False] * 100 + [True] * 300
    assert seen.contains_many(first + second) == [True] * 600
    assert seen.contains_many(url_keys(200, "never/")) == [False] * 200
    assert seen.add_many([]) == [] and seen.contains_many([]) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("capacity", [1, 100_000, 10_000_000])
def test_a_seen_test_packed_by_hand_is_redis_pys_request(
    client: redis.Redis, kind: str, capacity: int
) -> None:
    """The seen-test's request, written out as text (``_exact_tests``), is byte for byte
    what hiredis packs of its commands, whether its keys share buckets (capacity 1: one
    bucket), fall in one each (10 million: 2^16 buckets) or both; its answers come back in
    the keys' order, through the lean path and through redis-py's (a cluster's) alike."""
    usable(client, kind)
    if kind == "bloom" and capacity != 100_000:
        pytest.skip("the bucket layout is the exact kind's (a tiny filter answers falsely)")
    seen = SeenSet(client, partition(), config(kind, capacity=capacity))
    keys = url_keys(40)
    seen.add_many(keys[::3])
    expected = [i % 3 == 0 for i in range(40)]
    for batch in (keys, keys[:1], [keys[5], keys[5]], [k ^ (1 << 31) for k in keys[:12]]):
        commands, _ = seen.contains_commands(batch)
        if kind == "exact":  # (the bloom kind's request is hiredis's own)
            out: list[str] = []
            seen._exact_tests(batch, out)
            assert "".join(out).encode() == b"".join(hiredis.pack_command(c) for c in commands)
    assert seen.contains_many(keys) == expected
    assert seen.contains_many([keys[3], keys[4], keys[3]]) == [True, False, True]
    # (a key's low 32 bits flipped: another member of the same bucket, never added)
    assert seen.contains_many([k ^ (1 << 31) for k in keys[:12]]) == [False] * 12
    pipe = client.pipeline(transaction=False)  # redis-py's path, as a cluster client takes
    commands, read = seen.contains_commands(keys)
    for command in commands:
        pipe.execute_command(*command)
    assert read(iter(pipe.execute())) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_twice_in_one_add_is_new_the_first_time(client: redis.Redis, kind: str) -> None:
    usable(client, kind)
    seen = SeenSet(client, partition(), config(kind))
    a, b, c = url_keys(3)
    assert seen.add_many([a, b, a, a, c, b]) == [True, True, False, False, True, False]
    assert seen.count() == 3


@pytest.mark.parametrize("kind", KINDS)
def test_count_is_the_urls_added(client: redis.Redis, kind: str) -> None:
    usable(client, kind)
    keys = partition()
    seen = SeenSet(client, keys, config(kind))
    assert seen.count() == 0
    batches = [url_keys(500)[i : i + 50] for i in range(0, 500, 50)]
    for batch in batches:
        seen.add_many(batch + batch[:10])
    assert seen.count() == 500
    # another worker's view of the same partition agrees once the adder has sent its count
    assert SeenSet(client, keys, config(kind)).count() == 500


def calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_an_exact_add_is_one_transaction_that_sends_the_last_count(client: redis.Redis) -> None:
    """One MULTI of one SADD per key (atomic whoever else adds); the INCRBY of the URLs it
    added rides in the next one, since a transaction cannot use its own replies (or in the
    next count)."""
    keys = partition()
    seen = SeenSet(client, keys, config("exact"))
    first, second = url_keys(50), url_keys(50, "2/")
    execs, sadds, incrbys = calls(client, "exec"), calls(client, "sadd"), calls(client, "incrby")
    seen.add_many(first)
    assert calls(client, "exec") == execs + 1 and calls(client, "sadd") == sadds + 50
    assert calls(client, "incrby") == incrbys and client.get(keys.seen_count) is None
    seen.add_many(first[:10] + second)
    assert calls(client, "exec") == execs + 2 and calls(client, "incrby") == incrbys + 1
    assert int(client.get(keys.seen_count)) == 50
    assert seen.count() == 100 and int(client.get(keys.seen_count)) == 100


def test_each_kind_writes_its_own_layout(client: redis.Redis) -> None:
    """Exact: integer members in buckets named by the keys' top bits, kept as intsets at
    capacity; bloom: one RedisBloom filter, reserved at the configured size."""
    keys = partition()
    seen = SeenSet(client, keys, config("exact", capacity=4096))
    rng = random.Random(7)
    added = [rng.getrandbits(64) - 2**63 for _ in range(4096)]
    seen.add_many(added)
    pattern = glob_escape(keys.seen_bucket_prefix) + "*"
    buckets = [b for b in client.scan_iter(match=pattern) if b.rsplit(b":", 1)[1].isdigit()]
    assert len(buckets) == 16  # 4096 / 256 per bucket
    assert {client.object("encoding", b) for b in buckets} == {b"intset"}
    key = added[0]
    bucket = keys.seen_bucket_prefix + str((key % 2**64) >> 60)
    assert client.sismember(bucket, (key % 2**32) - (2**32 if key % 2**32 >= 2**31 else 0))
    if not has_bloom_module(client):
        return
    keys = partition()
    SeenSet(client, keys, config("bloom", capacity=5000, error=0.01)).add_many(added[:10])
    assert client.type(keys.seen) == b"MBbloom--"
    info = client.bf().info(keys.seen)
    assert info.capacity == 5000 and info.expansionRate == 2 and info.insertedNum == 10
    # a second worker reserving the same filter is the expected race, not an error
    assert SeenSet(client, keys, config("bloom", capacity=5000, error=0.01)).add_many(
        added[:11]
    ) == [False] * 10 + [True]


def test_past_capacity_the_exact_set_warns_once(
    client: redis.Redis, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seenset, "_outgrown_warned", False)
    seen = SeenSet(client, partition(), config("exact", capacity=300))
    with caplog.at_level(logging.WARNING, logger=seenset.__name__):
        keys = url_keys(1000)
        seen.add_many(keys[:300])
        assert seen.count() == 300 and not caplog.records
        for i in range(300, 1000, 50):
            seen.add_many(keys[i : i + 50])
        assert seen.count() == 1000
        other = SeenSet(client, partition(), config("exact", capacity=300))
        other.add_many(url_keys(400, "b/"))
        other.count()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "RedisBloom" in warnings[0] and "intset" in warnings[0]


def test_the_owners_adds_count_and_warn_as_the_others_do(
    client: redis.Redis, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's adds, queued on its fenced writer, are counted once read (what it owes
    sent with the read), and past capacity they warn as any worker's adds do."""
    monkeypatch.setattr(seenset, "_outgrown_warned", False)

    class Writer:  # (the fenced writer's interface, each write sent at once)
        def write(self, *command: object) -> None:
            client.execute_command(*command)

        def write_packed(self, command: str, key: str, request: bytes) -> None:
            conn = client.connection_pool.get_connection()
            try:
                conn.send_packed_command([request])
                conn.read_response()
            finally:
                client.connection_pool.release(conn)

    keys = partition()
    seen = SeenSet(client, keys, config("exact", capacity=300))
    added = url_keys(400)
    with caplog.at_level(logging.WARNING, logger=seenset.__name__):
        seen.queue_adds(Writer(), added)
        assert seen.contains_many(added) == [True] * 400
        assert seen.count() == 400 and int(client.get(keys.seen_count)) == 400
    assert len(caplog.records) == 1 and "RedisBloom" in caplog.records[0].getMessage()


@pytest.mark.parametrize("kind", KINDS)
def test_two_workers_adding_the_same_keys_see_each_new_once(
    redis_server: RedisServer,  # noqa: F811
    client: redis.Redis,
    kind: str,
) -> None:
    """Two clients (two workers) add the same 4,000 keys at once, in batches of 50 in
    opposite orders, a batch each at a time (a barrier between batches: else one thread may
    add all its batches before the other sends its first, and they never meet): every key is
    new to exactly one of them."""
    usable(client, kind)
    keys = partition()
    wanted = url_keys(4000)
    results: list[dict[int, bool]] = [{}, {}]
    sets: list[SeenSet] = []
    clients = [redis_server.client(), redis_server.client()]
    start = threading.Barrier(2, timeout=60)  # (a thread that failed breaks it, not hangs)

    def work(i: int) -> None:
        seen = SeenSet(clients[i], keys, config(kind))
        sets.append(seen)
        order = wanted if i == 0 else wanted[::-1]
        for j in range(0, len(order), 50):
            start.wait()
            batch = order[j : j + 50]
            results[i].update(zip(batch, seen.add_many(batch), strict=True))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert all(results[0][k] != results[1][k] for k in wanted)
        assert 0 < sum(results[0].values()) < 4000  # they did meet
        for seen in sets:
            seen.count()  # (each sends what it owes)
        assert SeenSet(client, keys, config(kind)).count() == 4000
    finally:
        for c in clients:
            c.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    servers = start_cluster(Path(tmp_path_factory.mktemp("seenset-cluster")), 3, 0)
    try:
        yield servers
    finally:
        servers.stop()


def test_on_a_cluster_each_partition_is_one_slot(
    redis_server: RedisServer,  # noqa: F811
    cluster: RedisClusterServers,
) -> None:
    """Three partitions on three masters: the adds' transactions and the Bloom commands go to
    each partition's node through redis-py's cluster client; the module is found on a node."""
    client = cluster.client()
    try:
        bloom = has_bloom_module(client)
        assert bloom is (redis_server.kind == "redis-bloom")
        crawl = fresh_key()
        nodes = set()
        for kind in ("exact", "bloom") if bloom else ("exact",):
            for index in range(3):
                keys = PartitionKeys(f"{crawl}-{kind}", index, 3)
                nodes.add(client.get_node_from_key(keys.seen).port)
                seen = SeenSet(client, keys, config(kind))
                batch = url_keys(200, f"{index}/")
                assert seen.add_many(batch + batch[:5]) == [True] * 200 + [False] * 5
                assert seen.contains_many(batch[:50] + url_keys(50, "x/")) == (
                    [True] * 50 + [False] * 50
                )
                assert seen.count() == 200
        assert len(nodes) == 3
    finally:
        client.close()


@pytest.mark.parametrize("limit", [-1, 2_000_000])
def test_an_exact_limit_of_minus_one_keeps_an_exact_set_of_the_default_layout(
    redis_server: RedisServer, client: redis.Redis, limit: int  # noqa: F811
) -> None:
    """``FRONTIER_SEEN_EXACT_LIMIT=-1`` (exact whatever the size) is the exact kind, even on a
    server with RedisBloom, with the buckets of the default size: not one bucket (a capacity
    of 1) that every URL of the partition would share."""
    from scrapy.settings import Settings

    from crawler.backends.redis.frontier_store import PARTITIONS, RedisFrontierStore
    from crawler.config import defaults

    settings = Settings({
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "FRONTIER_SEEN_EXACT_LIMIT": limit,
    })  # fmt: skip
    seen = RedisFrontierStore(settings, "site")._seen_config(client)
    assert seen.capacity == defaults.FRONTIER_SEEN_EXACT_LIMIT // PARTITIONS
    assert seen.bloom == (limit > 0 and has_bloom_module(client))


def test_the_owners_packed_adds_are_hiredis_packed_sadds() -> None:
    """The owner's SADDs, written out as RESP text (``queue_adds``), are byte for byte what
    hiredis packs of ``SADD <bucket> <member>...`` (members the keys' low 32 bits, signed),
    over random keys of the whole 64-bit range (and its edges), every bucket layout from one
    bucket to the largest, crawl names of non-ASCII text (lengths in bytes, not characters),
    a key twice in one add, and a batch of thousands in one bucket."""
    rng = random.Random(20261206)
    edges = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63), 2**64 - 1]
    names = ["c", "crawl-é", "каталог", "爬虫☃", "\U0001f577web", "a" * 300]

    class Writer:
        def __init__(self) -> None:
            self.writes: list[tuple[str, str, bytes]] = []

        def write_packed(self, command: str, key: str, request: bytes) -> None:
            self.writes.append((command, key, request))

    for trial in range(300):
        capacity = rng.choice([1, 300, 100_000, 10**7, 10**12])
        keys = PartitionKeys(rng.choice(names) + str(trial), rng.randrange(4), 4)
        seen = SeenSet(None, keys, config("exact", capacity=capacity))  # type: ignore[arg-type]
        n = rng.choice([1, 2, 7, 50, 3000])
        batch = [rng.choice(edges) if rng.random() < 0.1 else
                 rng.randrange(-(2**63), 2**64) for _ in range(n)]  # fmt: skip
        batch += rng.sample(batch, min(3, len(batch)))  # a key twice
        writer = Writer()
        seen.queue_adds(writer, batch)
        expected: dict[str, list[int]] = {}
        for key in batch:
            member = ((key + 0x80000000) & 0xFFFFFFFF) - 0x80000000
            expected.setdefault(seen._bucket(key), []).append(member)
        assert [(c, k) for c, k, _ in writer.writes] == [("SADD", b) for b in expected]
        for (_, bucket, request), members in zip(writer.writes, expected.values(), strict=True):
            assert request == hiredis.pack_command(("SADD", bucket, *members)), (trial, bucket)



def test_an_add_refused_as_its_transaction_ran_is_new_and_said(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A command of the exact claim's ``MULTI`` that fails when ``EXEC`` runs it, the others
    applied: an add (a bucket of another type: ``WRONGTYPE``) answers new, as a claim of
    unknown outcome does (raised, the claim made again would find the others seen, and
    nobody would fetch them), not its error object read as a reply; a count's ``INCRBY``
    refused leaves its URLs owed, not a crash; said once, as an error."""
    keys = partition()
    seen = SeenSet(client, keys, config("exact"))
    first, others = url_keys(1), url_keys(3, "other/")
    assert seen.add_many(others[:1]) == [True]
    client.set(seen._bucket(first[0]), "a string")
    with caplog.at_level(logging.ERROR, logger=seenset.__name__):
        assert seen.add_many(first + others) == [True, False, True, True]
        assert seen.add_many(others) == [False, False, False]  # (the two landed)
        assert seen._owed == 0  # (sent with those)
        client.set(keys.seen_count, "not a number")
        assert seen.add_many(url_keys(2, "third/")) == [True, True]
        assert seen.add_many(url_keys(1, "fourth/")) == [True]  # (its INCRBY 2 refused)
    assert seen._owed == 3  # the refused INCRBY's 2 still owed, with the new one
    refusals = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(refusals) == 1 and "WRONGTYPE" in refusals[0].getMessage(), refusals
