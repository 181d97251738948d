"""The shared near-duplicate index on a real Redis: the in-process detector's decisions, one
atomic check-and-insert per page across workers, the per-host penalty seen by every worker."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from scrapy.utils.test import get_crawler

from crawler.backends import class_path
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.redis_neardup import RedisNearDuplicateDetector
from crawler.pipelines.neardup import NearDuplicatePipeline
from devsite.testset import LabelledSet, build_labelled_set, page_item
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=30, variants_per_page=6, seed=5)


def _texts(labelled: LabelledSet) -> list[tuple[str, str, str]]:
    """(url, main text, kind) of every page of the set: originals first, then variants."""
    pages = [*labelled.originals, *labelled.variants]
    return [(p.url, page_item(p.url, p.html)["main_text"], p.kind) for p in pages]


def test_same_decisions_as_the_in_process_detector(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    shared = RedisNearDuplicateDetector(redis_server.client(), fresh_key())
    local = NearDuplicateDetector()
    kinds = Counter()
    for url, text, _ in _texts(labelled):
        a, b = shared.check(url, text), local.check(url, text)
        assert (a.kind, a.duplicate_of, a.fingerprint) == (b.kind, b.duplicate_of, b.fingerprint)
        if a.kind == "near":  # b-bit signature: the estimate is close to the full one
            assert a.similarity == pytest.approx(b.similarity, abs=0.08)
        kinds[a.kind] += 1
    assert kinds["near"] > 0 and kinds["exact"] > 0
    assert len(shared) == len(local) and shared.originals == local.originals
    # a refetched original is not its own duplicate; a noindex look records nothing
    url, text, _ = _texts(labelled)[0]
    assert shared.check(url, text).kind == "new"
    before = len(shared)
    assert shared.check("http://new.test/x", text, add=False).duplicate_of == url
    assert len(shared) == before


def test_two_workers_racing_on_the_same_pages_index_each_once(
    redis_server: RedisServer,  # noqa: F811
    labelled: LabelledSet,
) -> None:
    """Each worker gets every page of the set under its own host, at the same time, in its
    own order: every content is indexed once, and each pair has exactly one duplicate."""
    key = fresh_key()
    workers = [RedisNearDuplicateDetector(redis_server.client(), key) for _ in range(2)]
    pages = [(u, t) for u, t, kind in _texts(labelled) if kind != "mirror"]
    decisions: list[dict[str, object]] = [{}, {}]
    start = threading.Barrier(2)

    def run(n: int) -> None:
        order = list(pages)
        random.Random(n).shuffle(order)
        start.wait()
        for url, text in order:
            decisions[n][url] = workers[n].check(url.replace("http://", f"http://w{n}."), text)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    local = NearDuplicateDetector()
    for url, text in pages:
        local.check(url, text)
    assert workers[0].originals == local.originals  # not one content indexed twice
    for url, _ in pages:
        one, two = decisions[0][url], decisions[1][url]
        # the pair of copies: at least one of them is flagged (both, when the page is itself
        # a variant of an original), and never each as the other's duplicate
        assert one.is_duplicate or two.is_duplicate, url  # type: ignore[attr-defined]
        pair = {url.replace("http://", "http://w0."), url.replace("http://", "http://w1.")}
        assert {one.duplicate_of, two.duplicate_of} != pair  # type: ignore[attr-defined]


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
    assert class_path(settings, "NEARDUP_STORE_CLASS").endswith("RedisNearDuplicateStore")
    pipelines = [NearDuplicatePipeline.from_crawler(get_crawler(settings_dict=settings))
                 for _ in range(2)]
    assert all(isinstance(p.detector, RedisNearDuplicateDetector) for p in pipelines)
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu " * 4
    first = pipelines[0].process_item({"url": "http://a.test/p", "main_text": text})
    second = pipelines[1].process_item({"url": "http://b.test/p", "main_text": text})
    assert "duplicate_of" not in first
    assert second["duplicate_of"] == "http://a.test/p" and second["similarity"] == 1.0
