"""The shared near-duplicate index on a real Redis: the in-process detector's decisions (template
models included), check-and-insert atomic across workers, the per-host penalty and each host's
template seen by every worker."""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter

import numpy as np
import pytest
from scrapy.utils.test import get_crawler

from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from crawler.backends.redis.neardup_codec import (
    decode_record,
    decode_snapshot,
    encode_record,
    encode_snapshot,
    pack_sorted,
    unpack_sorted,
)
from crawler.backends.registry import class_path
from crawler.content.neardup import Decision, NearDuplicateDetector, block_hash
from crawler.content.neardup_features import ANCHORS, Features
from crawler.content.normalize import normalize_lines, normalize_text
from crawler.spiders.analysis import near_duplicate_judge
from devsite.testset import LabelledSet, build_labelled_set, page_item
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

Page = tuple[str, str, str | None]  # url, main text, title


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=30, variants_per_page=6, seed=5)


def _pages(labelled: LabelledSet) -> list[Page]:
    """(url, main text, title) of every page of the set: originals first, then variants."""
    out = []
    for p in [*labelled.originals, *labelled.variants]:
        item = page_item(p.url, p.html)
        out.append((p.url, str(item["main_text"]), item.get("title") or None))  # type: ignore[arg-type]
    return out


def _real_pages(per_tree: int) -> list[Page]:
    """A slice of bench/realpages.py's real documentation pages in crawl order (hosts
    interleaved), or a skip when the Debian documentation packages are not installed."""
    from bench.realpages import build, in_crawl_order

    pages, skipped = build(per_tree=per_tree)
    if len(skipped) > 10 or len(pages) < 60:
        pytest.skip(
            f"documentation trees missing ({', '.join(skipped)}): bench/realpages.py --install"
        )
    return [(p.url, p.main_text, p.title or None) for p in in_crawl_order(pages)]


def _same_as_in_process(
    workers: list[RedisNearDuplicateDetector], pages: list[Page]
) -> Counter[str]:
    """Check every page with the workers in turn and with one in-process detector: every
    decision, every host's template and the counts must be the same."""
    local = NearDuplicateDetector()
    kinds: Counter[str] = Counter()
    for n, (url, text, title) in enumerate(pages):
        shared = workers[n % len(workers)].check(url, text, title=title)
        assert shared == local.check(url, text, title=title), url
        kinds[shared.kind] += 1
    hosts = {url.split("/")[2].split(":")[0] for url, _, _ in pages}
    # a fresh worker reads the counts (a worker's own copy may be a few seconds old)
    reader = RedisNearDuplicateDetector(workers[0].client, workers[0].prefix[1:-4])
    for host in hosts:
        assert workers[0].template(host) == set(local.templates.template(host)), host
        assert reader.host_duplicate_ratio(host, 1) == local.host_duplicate_ratio(host, 1)
    assert len(workers[0]) == len(local) and workers[0].originals == local.originals
    return kinds


def test_same_decisions_as_the_in_process_detector(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2)]
    pages = _pages(labelled)
    kinds = _same_as_in_process(workers, pages)
    assert kinds["near"] > 0 and kinds["exact"] > 0 and kinds["new"] > 0
    # a refetched original is not its own duplicate; a look (noindex) records nothing
    url, text, title = pages[0]
    assert workers[1].check(url, text, title=title).kind == "new"
    before = len(workers[0])
    assert workers[0].check("http://new.test/x", text, add=False).duplicate_of == url
    assert len(workers[0]) == before


def test_same_decisions_on_real_pages_with_template_models(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Real documentation trees, one host each: the hosts' template models are learned in
    Redis, and two workers taking turns decide as one in-process detector."""
    pages = _real_pages(per_tree=12)
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2)]
    kinds = _same_as_in_process(workers, pages)
    assert kinds["near"] > 0 and kinds["exact"] > 0
    learned = [h for h in {u.split("/")[2] for u, _, _ in pages} if workers[0].template(h)]
    assert len(learned) >= 5, learned  # the template models did learn something


def test_a_refetched_original_is_replaced_for_every_worker(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    key = fresh_key()
    a, b = (RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2))
    local = NearDuplicateDetector()
    pages = _pages(labelled)
    (url1, text1, _), (url2, text2, _) = pages[0], pages[1]
    steps = [
        (a, url1, text1),
        (b, "http://m.test/1", text1),
        (a, url1, text2),
        (b, "http://m.test/2", text1),
        (b, "http://m.test/3", text2),
        (a, url2, text2),
    ]
    for worker, url, text in steps:
        assert worker.check(url, text) == local.check(url, text), url


def test_a_urls_id_is_its_commits_place_and_an_original_stored_again_keeps_it(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """No id counter of its own: a new URL's id is the ``seq`` of the commit that recorded it,
    a refetch commit gives none (its URL keeps its id), and an original stored again is listed
    under its id in its new anchors' postings."""
    key = fresh_key()
    a, b = (RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2))
    client = redis_server.client()
    text = "\n".join(" ".join(f"w{i}x{j}" for j in range(12)) for i in range(8))
    ids = {}
    for worker, url, page in [
        (a, "http://a.test/1", text),
        (b, "http://b.test/1", "other " + text),
        (a, "http://a.test/1", text),
        (b, "http://c.test/1", text),
    ]:
        decision = worker.check(url, page)
        ids.setdefault(url, worker.last_commit)
        read = worker.store.read(
            worker._host_id(url.split("/")[2]),
            hashlib.blake2b(url.encode(), digest_size=8).digest(),
            b"",
            [],
        )
        assert read.own == ids[url], (url, decision)
    assert ids == {"http://a.test/1": 1, "http://b.test/1": 2, "http://c.test/1": 4}
    assert not client.exists(a.keys.prefix + ":next")
    changed = "changed " + text
    assert a.check("http://a.test/1", changed).kind == "new"  # stored again, id 1
    anchors = a._features(normalize_lines(changed), a._host_id("a.test")).sketch[:ANCHORS].tolist()
    read = a.store.read(a._host_id("a.test"), b"\0" * 8, b"", anchors)
    assert all(p[-1] == 1 for p in read.postings)


def test_a_worker_names_the_right_original_after_the_store_lost_its_state(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The crawl's keys deleted under a running worker (nothing failed, no outage seen): the
    ids and host ids given again name other URLs and hosts than the worker copied, and its
    decisions are those of a fresh detector over what the store now holds."""
    key = fresh_key()
    worker = RedisNearDuplicateDetector(redis_server.client(), key)
    text = "\n".join(f"line {i} of a page about harvesting saffron by hand" for i in range(30))
    edited = text.replace("line 7 of", "a line edited: seven of")
    worker.check("http://a.test/0", text)
    worker.check("http://a.test/1", edited)  # reads a.test/0's record into its cache
    for k in redis_server.client().scan_iter(match="{" + key + "}*"):
        redis_server.client().delete(k)
    for k in redis_server.client().scan_iter(match="{" + key + ":nd:*"):
        redis_server.client().delete(k)
    fresh = RedisNearDuplicateDetector(redis_server.client(), key)
    local = NearDuplicateDetector()
    steps = [
        (fresh, "http://c.test/0", text),
        (worker, "http://d.test/1", edited),
        (worker, "http://e.test/2", text),
    ]
    for detector, url, page in steps:
        assert detector.check(url, page) == local.check(url, page), url


def test_two_workers_racing_decide_as_one_detector_in_commit_order(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    """Both workers get every page at once, each under its own host and in its own order:
    each content is indexed once (the other copy flagged, never each the other's duplicate),
    and replaying all pages in the order their commits happened through one in-process
    detector gives exactly the decisions the workers made."""
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2)]
    pages = [(u, t, ti) for u, t, ti in _pages(labelled)]
    done: list[list[tuple[int, str, str, str | None, Decision]]] = [[], []]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        order = list(pages)
        random.Random(n).shuffle(order)
        start.wait()
        try:
            for url, text, title in order:
                mine = url.replace("http://", f"http://w{n}.")
                decision = workers[n].check(mine, text, title=title)
                done[n].append((workers[n].last_commit, mine, text, title, decision))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    commits = sorted(done[0] + done[1], key=lambda d: d[0])
    assert [c[0] for c in commits] == list(range(1, 2 * len(pages) + 1))  # one commit each
    local = NearDuplicateDetector()
    for _, url, text, title, decision in commits:
        assert local.check(url, text, title=title) == decision, url
    by_url = {url: decision for _, url, _, _, decision in commits}
    for url, _, _ in pages:
        one = by_url[url.replace("http://", "http://w0.")]
        two = by_url[url.replace("http://", "http://w1.")]
        assert one.is_duplicate or two.is_duplicate, url
        pair = {url.replace("http://", "http://w0."), url.replace("http://", "http://w1.")}
        assert {one.duplicate_of, two.duplicate_of} != pair
    assert workers[0].originals == local.originals  # not one content indexed twice


def test_three_workers_sharing_hosts_learn_one_model(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Three workers take pages of two big hosts from one queue as fast as they can, so each
    host's model is taught by all of them in turn (each replays the others' pages, reloads a
    snapshot after a pruning it did not write, has commits refused): replaying the pages in
    commit order through one in-process detector gives every decision and both templates."""
    import queue

    rng = random.Random(11)
    words = [f"w{i}" for i in range(300)]
    shared = {h: [" ".join(rng.choices(words, k=10)) for _ in range(12)] for h in ("a", "b")}
    pages: list[tuple[str, str]] = []
    for n in range(260):
        host = "ab"[n % 2]
        own = [" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(2, 6))]
        text = "\n".join([*own, *rng.sample(shared[host], 6)])
        pages.append((f"http://{host}.test/{n}", text))
        if n % 9 == 0:  # an edited copy, and an exact one
            pages.append((f"http://{host}.test/{n}e", text + "\none more line of text here"))
            pages.append((f"http://{host}.test/{n}x", text))
    todo: queue.Queue[tuple[str, str]] = queue.Queue()
    for page in pages:
        todo.put(page)
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(3)]
    done: list[tuple[int, str, str, Decision]] = []
    errors: list[BaseException] = []

    def run(worker: RedisNearDuplicateDetector) -> None:
        try:
            while True:
                try:
                    url, text = todo.get_nowait()
                except queue.Empty:
                    return
                decision = worker.check(url, text)
                done.append((worker.last_commit, url, text, decision))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    local = NearDuplicateDetector()
    for _, url, text, decision in sorted(done):
        assert local.check(url, text) == decision, url
    for host in ("a.test", "b.test"):
        assert workers[0].template(host) == set(local.templates.template(host)), host
        assert local.templates.pages(host) > 2 * 48  # pruned twice: snapshots were written
    assert sum(w.replayed for w in workers) > len(pages) // 2  # each learned the others' pages


def test_the_host_penalty_is_shared(redis_server: RedisServer) -> None:  # noqa: F811
    key = fresh_key()
    a = RedisNearDuplicateDetector(redis_server.client(), key)
    b = RedisNearDuplicateDetector(redis_server.client(), key)
    text = "one two three four five six seven eight nine ten eleven twelve " * 5
    a.check("http://orig.test/", text)
    for i in range(6):
        a.check(f"http://mirror.test/{i}", text)
    assert b.host_duplicate_ratio("mirror.test", min_pages=5) == 1.0
    assert b.host_duplicate_ratio("orig.test", min_pages=1) == 0.0


def test_a_template_learned_by_one_worker_is_left_out_by_another(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Worker A sees a host's pages, all with one long shared section; worker B, which never
    saw the host, then checks two sibling pages: they differ once the section (learned by A)
    is out, and B knows that."""
    key = fresh_key()
    a, b = (RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2))
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    shared = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(30))

    def page(i: int) -> str:
        own = " ".join(rng.choices(words, k=30))
        return f"page {i} about {own}\n{shared}"

    for i in range(6):
        a.check(f"http://docs.test/{i}", page(i))
    assert len(b.template("docs.test")) == 30
    first = b.check("http://docs.test/x", page(100))
    second = b.check("http://docs.test/y", page(101))
    assert (first.kind, second.kind) == ("new", "new")
    local = NearDuplicateDetector()  # without the model the shared section makes them alike
    local.check("http://docs.test/x", page(100))
    assert local.check("http://docs.test/y", page(101)).kind == "near"


def test_template_counts_pruned_as_in_process_on_a_big_host(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """A host of 400 pages, each with its own lines and a few recurring ones, learned by two
    workers in turn (each replaying the other's pages into its copy of the model): the shared
    model prunes blocks seen once exactly as :class:`HostTemplates` does, so the same blocks
    become template. A line seen on pages 1, 60 and 70 survives the first pruning and becomes
    template; one seen on pages 1, 100 and 110 is pruned in between and does not."""
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2)]
    local = NearDuplicateDetector()
    rng = random.Random(8)
    recurring = {
        f"recurring line {i} of the site": rng.sample(range(1, 401), rng.randint(2, 12))
        for i in range(60)
    }
    recurring["kept across the first pruning"] = [1, 60, 70]
    recurring["pruned before it recurs"] = [1, 100, 110]
    for page in range(1, 401):
        lines = [f"page {page} line {j} {rng.random()}" for j in range(rng.randint(3, 12))]
        lines += [line for line, pages in recurring.items() if page in pages]
        url, text = f"http://big.test/{page}", "\n".join(lines)
        assert workers[page % 2].check(url, text) == local.check(url, text), url
    learned = workers[0].template("big.test")
    assert learned == set(local.templates.template("big.test"))
    blocks = {line: block_hash(normalize_text(line)) for line in recurring}
    assert blocks["kept across the first pruning"] in learned
    assert blocks["pruned before it recurs"] not in learned
    # Redis keeps the model as a snapshot at the last pruning (page 384) and the 16 pages since
    client, prefix = workers[0].client, workers[0].prefix
    assert int(client.hget(prefix + ":v", 1) or 0) >> 24 == 400
    assert int.from_bytes((client.get(prefix + ":ts:1") or b"")[:4], "big") == 384
    assert client.llen(prefix + ":tl:1") == 16
    # and a worker that never saw the host catches up from them
    late = RedisNearDuplicateDetector(client, prefix[1:-4])
    last = ("http://big.test/401", "one more page\nof the big host")
    assert late.check(*last) == local.check(*last)
    assert late.template("big.test") == set(local.templates.template("big.test"))
    assert late.replayed == 16
    # its copy of the model, given the template first, counts what the host's model counts
    pages, blocks, counts = late._copies.models.counts(late._copies.hids["big.test"])
    want = local.templates.counts("big.test")
    assert (pages, blocks.tolist(), counts.tolist()) == (want[0], *(a.tolist() for a in want[1:]))


def test_a_worker_that_starts_late_decides_at_once(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    """A worker joining a crawl keeps no copy of the index: it decides its first page with no
    replay (nothing read but what that page needs), then exactly as the in-process detector
    that saw every page."""
    key = fresh_key()
    first = RedisNearDuplicateDetector(redis_server.client(), key)
    local = NearDuplicateDetector()
    pages = _pages(labelled)
    half = len(pages) // 2
    for url, text, title in pages[:half]:
        assert first.check(url, text, title=title) == local.check(url, text, title=title)
    late = RedisNearDuplicateDetector(redis_server.client(), key)
    assert late.cache_used == 0
    for url, text, title in pages[half:]:
        assert late.check(url, text, title=title) == local.check(url, text, title=title), url
    assert late.replayed < half  # only the models of the hosts it checked, no index


def test_urls_come_back_exactly(redis_server: RedisServer) -> None:  # noqa: F811
    """A record keeps its URL without ``scheme://host`` when it can: whatever the URL looks
    like, a worker that never saw the original names it exactly."""
    key = fresh_key()
    a, b = (RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2))
    urls = [
        "http://docs.test/a/b?c=d#e",
        "https://docs.test/x",
        "http://Docs.test:8080/p",
        "https://docs.test:8443/q",
        "http://[::1]:8000/v6",
        "http://user@docs.test/u",
    ]
    for n, url in enumerate(urls):
        text = " ".join(f"word{n}x{i}" for i in range(60))
        assert a.check(url, text).kind == "new"
        assert b.check(f"http://mirror{n}.test/copy", text).duplicate_of == url


def test_records_round_trip() -> None:
    rng = np.random.default_rng(4)
    for n, blocks in ((0, 1), (1, 1), (7, 3), (128, 40), (128, 128), (300, 280)):
        sketch = np.unique(rng.integers(0, 2**32, size=n, dtype=np.uint64)).astype(np.uint32)
        block_ids = rng.integers(0, 2**32, size=blocks, dtype=np.uint64).astype(np.uint32)
        entry_blocks = block_ids[rng.integers(0, blocks, size=len(sketch))]
        for cover in {int(sketch[-1]) if len(sketch) else 0xFFFFFFFF, 0xFFFFFFFF}:
            f = Features("", n, n, [], sketch, entry_blocks, cover)
            url = f"http://h{n}.test/é?q={n}"
            record = decode_record(encode_record(b"fp%06d" % n, 5 + n, url, 77, f))
            assert (record.hid, record.url, record.title, record.cover) == (5 + n, url, 77, cover)
            assert record.sketch.tolist() == sketch.tolist()
            assert record.blocks.tolist() == entry_blocks.tolist()


def test_template_model_entries_and_snapshots_round_trip() -> None:
    """Log entries and snapshots (packed in the bits they need) come back
    exactly, next to other data, down to the extreme hashes and counts."""
    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 12, 700):
        values = np.unique(rng.integers(0, 2**32, size=n, dtype=np.uint64)).astype(np.uint32)
        if n >= 2:
            values[0], values[-1] = 0, 2**32 - 1
        packed = b"ab" + pack_sorted(values) + b"zz"
        out, end = unpack_sorted(packed, 2)
        assert out.tolist() == values.tolist() and packed[end:] == b"zz"
    keys = np.unique(rng.integers(0, 2**32, size=400, dtype=np.uint64)).astype(np.uint32)
    for most in (1, 2, 3, 65_535):
        counts = rng.integers(1, most + 1, size=len(keys)).astype(np.uint16)
        pages, k, c = decode_snapshot(encode_snapshot(96, keys, counts))
        assert pages == 96 and k.tolist() == keys.tolist() and c.tolist() == counts.tolist()
    pages, k, c = decode_snapshot(encode_snapshot(48, keys[:0], counts[:0]))
    assert (pages, len(k), len(c)) == (48, 0, 0)


def test_workers_must_agree_on_the_settings(redis_server: RedisServer) -> None:  # noqa: F811
    key = fresh_key()
    RedisNearDuplicateDetector(redis_server.client(), key)
    with pytest.raises(ValueError, match="NEARDUP_\\* settings must match"):
        RedisNearDuplicateDetector(redis_server.client(), key, threshold=0.8)


def test_the_redis_backend_shares_near_duplicates(redis_server: RedisServer) -> None:  # noqa: F811
    settings = {
        "FRONTIER_BACKEND": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "FRONTIER_REDIS_KEY": fresh_key(),
    }
    assert class_path(settings, "neardup_store").endswith("RedisNearDuplicateStore")
    # two workers' content analyses
    judges = [near_duplicate_judge(get_crawler(settings_dict=settings)) for _ in range(2)]
    assert all(isinstance(j.detector, RedisNearDuplicateDetector) for j in judges)
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu " * 4
    first = judges[0].judge("http://a.test/p", text).item_fields()
    second = judges[1].judge("http://b.test/p", text).item_fields()
    assert "duplicate_of" not in first
    assert second["duplicate_of"] == "http://a.test/p" and second["similarity"] == 1.0
