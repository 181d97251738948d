"""The shared near-duplicate detector without a copy of the index in each worker: on a real
Redis Cluster, worker processes racing on copies of one page, a new worker deciding at once,
the worker's cache within its bound, a crawl of another layout refused, and the crawl's slots
resharded under the workers."""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from redis.crc import key_slot

from crawler.backends.redis.neardup import RECORD_BYTES, RedisNearDuplicateDetector
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.neardup_features import ANCHORS
from crawler.content.neardup_index import MAX_POSTING
from devsite.testset import LabelledSet, build_labelled_set
from tests.dns_support import wait_for
from tests.redis_cluster_support import (  # noqa: F401
    RedisClusterServers,
    redis_cluster,
    start_cluster,
)
from tests.redis_support import RedisServer, fresh_key, redis_server, start_redis  # noqa: F401
from tests.test_neardup_shared import Page, _pages


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=20, variants_per_page=4, seed=9)


def _word(n: int) -> str:
    """A word of letters only (normalization masks digits), one per ``n``."""
    out = ""
    for _ in range(4):
        n, r = divmod(n, 26)
        out += chr(97 + r)
    return out + "ly"


def _text(n: int, edit: str = "") -> str:
    """A page of its own words, with an optional edited line (a near copy)."""
    lines = [" ".join(_word(n * 997 + i * 31 + j * 7919) for j in range(10)) for i in range(8)]
    if edit:
        lines.insert(4, edit)
    return "\n".join(lines)


def _race(port: int, key: str, who: int, start: Any, pages: int, out: Any) -> None:
    """One worker process with its own client: waits for the other, then judges its copy of
    every page (worker 1's copies carry one more line: near, not exact, duplicates)."""
    import redis

    detector = RedisNearDuplicateDetector(redis.Redis(port=port), key)
    start.wait()
    for n in range(pages):
        text = _text(n, "one line only this copy has, added by the mirror" if who else "")
        d = detector.check(f"http://w{who}.test/{n}", text)
        out.put((who, n, d.kind, d.duplicate_of))
    detector.close()


def test_worker_processes_racing_on_copies_of_a_page_make_one_original(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    key, pages = fresh_key(), 40
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_race, args=(redis_server.port, key, who, start, pages, out))
        for who in range(2)
    ]
    for p in procs:
        p.start()
    got = [out.get(timeout=300) for _ in range(2 * pages)]
    for p in procs:
        p.join()
    by_page: dict[int, dict[int, tuple[str, str | None]]] = {}
    for who, n, kind, dup in got:
        by_page.setdefault(n, {})[who] = (kind, dup)
    for n, both in by_page.items():
        kinds = sorted(k for k, _ in both.values())
        assert kinds == ["near", "new"], (n, both)  # exactly one original per page
        original = next(w for w, (k, _) in both.items() if k == "new")
        copy = both[1 - original]
        assert copy[1] == f"http://w{original}.test/{n}"
    assert RedisNearDuplicateDetector(redis_server.client(), key).originals == pages


def test_decisions_on_a_cluster_are_the_in_process_detectors(
    redis_cluster: RedisClusterServers,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    """Two workers on a three-master cluster decide as the in-process detector."""
    key = fresh_key()
    worker = RedisNearDuplicateDetector(redis_cluster.client(), key)
    other = RedisNearDuplicateDetector(redis_cluster.client(), key)
    local = NearDuplicateDetector()
    for n, (url, text, title) in enumerate(_pages(labelled)):
        decision = (worker if n % 2 else other).check(url, text, title=title)
        assert decision == local.check(url, text, title=title), url


def test_a_new_worker_decides_its_first_page_without_replaying(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    key = fresh_key()
    first = RedisNearDuplicateDetector(redis_server.client(), key)
    local = NearDuplicateDetector()
    for url, text, title in _pages(labelled):
        first.check(url, text, title=title)
        local.check(url, text, title=title)
    new = RedisNearDuplicateDetector(redis_server.client(), key)
    assert new.cache_used == 0  # nothing copied at the start
    copy = _text(3, "")
    first.check("http://early.test/3", copy)
    local.check("http://early.test/3", copy)
    edited = _text(3, "a banner line this mirror added")
    decision = new.check("http://mirror.test/3", edited)
    assert decision == local.check("http://mirror.test/3", edited)
    assert decision.duplicate_of == "http://early.test/3"
    assert new.replayed == 0  # no host model of another host, no index replayed


def test_the_worker_cache_stays_within_its_bound_and_decides_alike(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    """A cache far too small for the crawl: the least recently used records and host copies
    go (and are read again), every decision stays the in-process detector's."""
    bound = 64 * 1024
    key = fresh_key()
    small = RedisNearDuplicateDetector(redis_server.client(), key, cache_bytes=bound)
    local = NearDuplicateDetector()
    pages: list[Page] = _pages(labelled)
    most = 0
    for url, text, title in pages + [
        (u.replace("http://", "http://again."), t, ti) for u, t, ti in pages
    ]:
        assert small.check(url, text, title=title) == local.check(url, text, title=title), url
        most = max(most, small.cache_used)
    assert most <= bound
    assert small._copies.used <= bound // 2
    assert 0 < small._decode.cache_info().currsize <= bound // 2 // RECORD_BYTES


def test_a_crawl_stored_by_another_version_is_refused_in_one_line(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A crawl's state of another layout is refused, never misread, with what to do."""
    key = fresh_key()
    client = redis_server.client()
    client.set(
        "{" + key + "}:nd:params", "layout=6 shingles=3 perm=128 threshold=0.5 capacity=100000"
    )
    with pytest.raises(ValueError, match=r"layout=6 .*delete \{" + key + r"\}:nd:\*") as err:
        RedisNearDuplicateDetector(client, key)
    assert "\n" not in str(err.value)


def test_anchors_spread_over_every_bucket_though_they_are_small_hashes() -> None:
    """An original's anchors are its smallest hashes (the low ~15 % of the range): bucketed by
    their own top bits they would fill ~3 buckets in 16, each past Redis's compact encoding;
    spread (a bijection), every bucket gets its share and (bucket, field) still names one
    anchor."""
    import random

    from crawler.backends.redis.keys import NeardupKeys
    from crawler.backends.redis.neardup_state import NeardupState

    store = NeardupState(None, NeardupKeys("{crawl}:nd"), 1, 10)
    rng = random.Random(5)
    anchors = rng.sample(range(int(0.15 * 2**32)), 64 * 1024)
    places = [store.place(a) for a in anchors]
    per_bucket: dict[str, int] = {}
    for bucket, _ in places:
        per_bucket[bucket] = per_bucket.get(bucket, 0) + 1
    assert len(per_bucket) == 1024 and max(per_bucket.values()) < 128
    assert len(set(places)) == len(anchors)


def test_a_buckets_entries_give_each_anchors_first_postings_in_the_order_appended() -> None:
    """A bucket's 8-byte entries of several anchors (fields), an original listed twice (stored
    again): each field's ids in the order appended, the first MAX_POSTING."""
    from crawler.backends.redis.neardup_state import postings

    entries = [(7, 9), (8, 4), (7, 3), (7, 9)] + [(7, 100 + i) for i in range(MAX_POSTING)]
    bucket = b"".join((f << 32 | d).to_bytes(8, "big") for f, d in entries)
    assert postings(bucket, 7) == [9, 3, 9, *range(100, 100 + MAX_POSTING - 3)]
    assert postings(bucket, 8) == [4]
    assert postings(bucket, 1) == [] and postings(b"", 7) == []


def test_long_postings_stay_in_their_bucket_strings_and_decide_alike(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Sixty originals sharing a paragraph list its anchors more than 16 times: each bucket is
    a string of 8-byte entries (no alias here), every anchor's postings in it, none past
    MAX_POSTING written by a worker that read it full; decisions stay in-process's."""
    key = fresh_key()
    shared = RedisNearDuplicateDetector(redis_server.client(), key)
    local = NearDuplicateDetector()
    common = _text(10_000).splitlines()[:4]
    for n in range(60):
        text = "\n".join(common + _text(n).splitlines())
        url = f"http://h{n}.test/p"  # one page a host: the paragraph never turns template
        assert shared.check(url, text) == local.check(url, text), url
        assert local.check(url + "?copy", text) == shared.check(url + "?copy", text)
    client = redis_server.client()
    buckets = list(client.scan_iter(match=shared.keys.pattern("a")))
    assert buckets and {client.type(k) for k in buckets} == {b"string"}
    fields = Counter[int]()
    for k in buckets:
        value = client.get(k) or b""
        assert len(value) % 8 == 0
        fields.update(np.frombuffer(value, ">u4")[0::2].tolist())
    assert 16 < max(fields.values()) <= MAX_POSTING  # long postings, none past the limit


def test_decisions_hold_while_the_crawls_slots_move(tmp_path: Path) -> None:
    """Every slot of the master serving the crawl's tag resharded to a new master while two
    workers check pages: redis-py follows the moves (every key a script touches is declared),
    no page is judged alone and every decision is the in-process detector's."""
    cluster = start_cluster(tmp_path, masters=3, replicas=0)
    try:
        key = fresh_key()
        workers = [RedisNearDuplicateDetector(cluster.client(), key) for _ in range(2)]
        local = NearDuplicateDetector()
        slot = key_slot(workers[0].keys.versions.encode())
        owner = next(n for n in cluster.masters() if slot in _slots(cluster, n.address))
        new = cluster.add_master()
        mover = threading.Thread(
            target=cluster.move_slots, args=(len(_slots(cluster, owner.address)), new, owner)
        )
        mover.start()
        n = 0
        while mover.is_alive() or n < 100:
            url, text = f"http://h{n % 7}.test/{n}", _text(n // 3, f"edit {n % 3}" if n % 3 else "")
            assert workers[n % 2].check(url, text) == local.check(url, text), url
            n += 1
        mover.join()
        assert slot in _slots(cluster, new.address)
        assert not any(w.unjudged for w in workers)
    finally:
        cluster.stop()


def test_a_check_waits_while_the_keys_of_its_slot_are_half_moved(tmp_path: Path) -> None:
    """A reshard moves a slot's keys in batches (``redis-cli --cluster-pipeline``): between
    two, some of the crawl's keys are on the new master and some on the old, and a call on
    both gets ``ASK``/``TRYAGAIN`` until the last batch moved (longer than redis-py's own
    retries on a loaded machine). The check waits, as for an outage, and once the slot moved
    gets the in-process detector's decision; no page judged alone."""
    cluster = start_cluster(tmp_path, masters=3, replicas=0)
    try:
        key = fresh_key()
        worker = RedisNearDuplicateDetector(cluster.client(), key)
        local = NearDuplicateDetector()
        for n in range(6):
            url, text = f"http://h{n % 3}.test/{n}", _text(n)
            assert worker.check(url, text) == local.check(url, text), url
        slot = key_slot(worker.keys.versions.encode())
        source = next(n for n in cluster.masters() if slot in _slots(cluster, n.address))
        target = next(n for n in cluster.masters() if n is not source)
        source_id, target_id = cluster.node_id(source), cluster.node_id(target)
        with target.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        with source.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            c.execute_command(  # the first batch: one key
                "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", worker.keys.versions
            )
        url, text = "http://h1.test/copy", _text(2, "edit 1")
        decided: list[Any] = []
        checker = threading.Thread(target=lambda: decided.append(_decide(worker, url, text)))
        checker.start()
        wait_for(lambda: worker.outage.outages > 0 or not checker.is_alive(), "the check", 60)
        with source.client() as c:  # the last batch, then the slot is the target's
            rest = c.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
            c.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *rest)
        for node in cluster.masters():
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        checker.join(60)
        assert decided == [local.check(url, text)]
        assert not worker.unjudged
    finally:
        cluster.stop()


def _decide(worker: RedisNearDuplicateDetector, url: str, text: str) -> Any:
    """The worker's decision, or the error the check raised."""
    try:
        return worker.check(url, text)
    except Exception as exc:
        return exc


def _slots(cluster: RedisClusterServers, address: str) -> set[int]:
    """The slots the node at ``address`` serves."""
    out: set[int] = set()
    for row in cluster.cluster_nodes():
        if row["address"] == address:
            for part in row["slots"].split():
                if not part.startswith("["):  # a slot being migrated: [slot->-node]
                    low, _, high = part.partition("-")
                    out.update(range(int(low), int(high or low) + 1))
    return out


def test_a_worker_started_while_redis_is_away_checks_the_crawl_once_it_is_back(
    tmp_path: Path,
) -> None:
    """The detector is built at the spider's start, when Redis may be away (a worker started
    during a restart): no error then; the crawl's stored settings are checked at the first
    call that reaches Redis, and another version's state is still refused."""
    server = start_redis(tmp_path)
    port = server.port
    server.stop()
    key = fresh_key()
    client = redis.Redis(host="127.0.0.1", port=port)
    detector = RedisNearDuplicateDetector(client, key)  # Redis away: no error
    other = RedisNearDuplicateDetector(redis.Redis(host="127.0.0.1", port=port), fresh_key())
    server = start_redis(tmp_path, port=port)
    try:
        server.client().set("{" + key + "}:nd:params", "layout=6 shingles=3 perm=128")
        with pytest.raises(ValueError, match="layout=6"):
            detector.check("http://a.test/1", _text(1))
        assert other.check("http://b.test/1", _text(2)).kind != "unjudged"
    finally:
        server.stop()


def test_a_pages_postings_are_one_mget_and_an_originals_one_append_each(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A page's postings are read with one ``MGET``, a new original's written with one
    ``APPEND`` an anchor, one transaction a commit; decisions stay alike."""
    shared = RedisNearDuplicateDetector(redis_server.client(), fresh_key())
    local = NearDuplicateDetector()
    common = _text(10_000).splitlines()[:4]
    client = redis_server.client()
    shared.check("http://warm.test/", "")
    client.config_resetstat()
    for n in range(6):
        url, text = f"http://h{n}.test/p", "\n".join(common + _text(n).splitlines())
        assert shared.check(url, text) == local.check(url, text), url
    stats = client.info("commandstats")
    assert stats["cmdstat_mget"]["calls"] == 6
    assert stats["cmdstat_watch"]["calls"] == 6  # the commits
    assert "cmdstat_evalsha" not in stats
    assert stats["cmdstat_append"]["calls"] == 6 * ANCHORS
    assert stats["cmdstat_hsetnx"]["calls"] == 6  # the hosts' ids, no posting
