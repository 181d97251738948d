"""The web-graph bench (``bench/webgraph.py``): the start pages of a documentation tree for
``--linkcost`` (a tree without an ``index.html`` is timed rather than crashing), and its drive of
the Redis frontier (a redis-server of the test's own) against the memory frontier's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.webgraph import RedisFrontiers, crawl_frontier, doc_site, link_cost, tree_seeds
from devsite.webgraph import WebGraph, build_webgraph


def write(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root


def test_a_tree_with_an_index_starts_there(tmp_path: Path) -> None:
    root = write(tmp_path / "book", {
        "index.html": '<a href="a.html">a</a>',
        "a.html": '<a href="index.html">up</a>',
        "lost.html": "nobody links here",
    })
    pages, seeds = doc_site([str(root)])
    assert seeds == ["http://t0.docs.test/index.html"]
    assert tree_seeds(pages, "t0.docs.test") == seeds


def test_a_tree_without_an_index_starts_where_every_page_is_reached(tmp_path: Path) -> None:
    """As /usr/share/doc: one directory a package, whose pages link to each other (a chapter
    back to its manual), and pages no page links to."""
    root = write(tmp_path / "doc", {
        "pkg-a/manual.html": '<a href="ch1.html#top">1</a> <a href="ch2.html">2</a>',
        "pkg-a/ch1.html": '<a href="manual.html">up</a>',
        "pkg-a/ch2.html": '<a href="ch1.html">back</a>',
        "pkg-b/README.html": '<a href="sub/x.html">x</a>',
        "pkg-b/sub/x.html": "",
        "pkg-c/deep/index.html": '<a href="../a.html">a</a>',
        "pkg-c/a.html": '<a href="deep/index.html">deeper</a>',
    })
    _, seeds = doc_site([str(root)])
    assert seeds == [
        "http://t0.docs.test/pkg-b/README.html",  # nothing links to it
        "http://t0.docs.test/pkg-a/ch1.html",  # then the shallowest unreached, by name
        "http://t0.docs.test/pkg-c/a.html",
    ]


def test_linkcost_times_a_tree_without_an_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ZeroDivisionError of ``--linkcost`` on /usr/share/doc alone: no link was taken."""
    root = write(tmp_path / "doc", {
        "pkg/manual.html": '<a href="ch1.html">1</a> <a href="ch2.html">2</a>',
        "pkg/ch1.html": '<a href="ch2.html">2</a>',
        "pkg/ch2.html": '<a href="manual.html">up</a>',
    })
    link_cost([str(root)], runs=1)
    out = capsys.readouterr().out
    assert "| depth | 3 | 4 |" in out
    assert "| opic | 3 | 4 |" in out


def small_graph() -> WebGraph:
    return build_webgraph(3, pages=3000, hosts=60, farms=1, farm_hosts=4, farm_pages=300,
                          good_seeds=5)


@pytest.mark.parametrize("order", ["opic", "depth"])
def test_one_redis_partition_fetches_in_the_memory_frontiers_order(
    tmp_path: Path, order: str
) -> None:
    """The Redis store keeps the one Mercator algorithm's order: one partition, the same
    number of back queues (the worker's 192, all on its one partition), the very same fetches."""
    graph = small_graph()
    memory = crawl_frontier(graph, order, 600)
    redis = RedisFrontiers(tmp_path, back_queues=192, partitions=1)
    try:
        on_redis = crawl_frontier(graph, order, 600, redis=redis)
    finally:
        redis.stop()
    assert on_redis.back_queues == "1 x 192"
    assert on_redis.fetched == memory.fetched


def test_two_redis_workers_fetch_every_page_once(tmp_path: Path) -> None:
    """Links to the other worker's partitions go by mail and are all fetched, none twice."""
    graph = small_graph()
    redis = RedisFrontiers(tmp_path)
    try:
        crawl = crawl_frontier(graph, "opic", graph.pages, redis=redis, workers=2)
    finally:
        redis.stop()
    assert crawl.back_queues == "8 x 12, 8 x 12"
    assert sorted(crawl.fetched) == list(range(graph.pages))
