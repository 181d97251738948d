"""Backends are chosen by settings: FRONTIER_BACKEND picks the defaults, a class setting wins.

Each component is built from a crawler the way Scrapy builds it, with a test double named in
its class setting, and must end up using that double: no backend is fixed in code.
"""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from crawler.backends.registry import (
    BACKENDS,
    CLASS_SETTINGS,
    BackendError,
    backend_class,
    backend_name,
    class_path,
)
from crawler.backends.sqlite.crawldb import SqliteCrawlDb
from crawler.backends.sqlite.index import SQLiteIndex
from crawler.content.neardup import NearDuplicateDetector
from crawler.extensions.recrawl import RecrawlExtension
from crawler.pipelines.index import IndexPipeline
from crawler.settings import __dict__ as project_settings
from crawler.spiders.analysis import near_duplicate_judge
from crawler.spiders.site import SiteSpider


class DoubleCrawlDb(SqliteCrawlDb):
    """A crawl database double: an in-memory SQLite database that says who built it."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> DoubleCrawlDb:
        db = cls(":memory:")
        db.built_with = crawler.settings.get("DOUBLE_TAG")  # type: ignore[attr-defined]
        return db


class DoubleIndex(SQLiteIndex):
    @classmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> DoubleIndex:
        index = cls(settings.get("DOUBLE_INDEX_PATH"))
        index.built_with = settings.get("DOUBLE_TAG")  # type: ignore[attr-defined]
        return index


class DoubleDetector(NearDuplicateDetector):
    @classmethod
    def from_crawler(cls, crawler: Any) -> DoubleDetector:
        detector = cls(threshold=0.9)
        detector.built_with = crawler.settings.get("DOUBLE_TAG")  # type: ignore[attr-defined]
        return detector


def _settings(**extra: Any) -> dict[str, Any]:
    base = {k: v for k, v in project_settings.items() if k.isupper()}
    return {**base, **extra}


def test_frontier_backend_chooses_the_defaults() -> None:
    assert backend_name({}) == "memory"
    assert backend_name({"FRONTIER_BACKEND": "memory", "JOBDIR": "job"}) == "sqlite"
    for key in CLASS_SETTINGS:
        assert class_path({}, key) == BACKENDS["memory"][key]
        assert class_path({"JOBDIR": "job"}, key) == BACKENDS["sqlite"][key]
    assert class_path({}, "frontier_store") != class_path({"JOBDIR": "job"}, "frontier_store")


def test_every_default_class_exists() -> None:
    for name, table in BACKENDS.items():
        assert set(table) == set(CLASS_SETTINGS), name
        for key in table:
            assert isinstance(backend_class({"FRONTIER_BACKEND": name}, key), type)


def test_backend_classes_wins_over_the_backend() -> None:
    path = "tests.test_backends.DoubleCrawlDb"
    chosen = {"BACKEND_CLASSES": {"crawldb": path}, "JOBDIR": "job"}
    assert class_path(chosen, "crawldb") == path
    assert class_path({"BACKEND_CLASSES": f'{{"crawldb": "{path}"}}'}, "crawldb") == path  # -s


def test_bad_backend_settings_are_refused_clearly() -> None:
    with pytest.raises(BackendError, match=r"FRONTIER_BACKEND: unknown backend 'mongo'.*memory"):
        backend_name({"FRONTIER_BACKEND": "mongo"})
    with pytest.raises(BackendError, match=r"BACKEND_CLASSES crawldb: cannot load 'nowhere\.Db'"):
        backend_class({"BACKEND_CLASSES": {"crawldb": "nowhere.Db"}}, "crawldb")
    with pytest.raises(BackendError, match="is not a class"):
        not_a_class = "crawler.backends.registry.CLASS_SETTINGS"
        backend_class({"BACKEND_CLASSES": {"crawldb": not_a_class}}, "crawldb")
    with pytest.raises(BackendError, match=r"plug point 'crawl_db'; did you mean crawldb\?"):
        class_path({"BACKEND_CLASSES": {"crawl_db": "x.Db"}}, "crawldb")


def test_components_build_the_classes_their_settings_name(tmp_path) -> None:
    crawler = get_crawler(
        SiteSpider,
        _settings(
            DOUBLE_TAG="from-settings",
            DOUBLE_INDEX_PATH=str(tmp_path / "double-index.sqlite"),
            RECRAWL_INTERVAL=60,
            BACKEND_CLASSES={
                "crawldb": "tests.test_backends.DoubleCrawlDb",
                "index": "tests.test_backends.DoubleIndex",
                "neardup_store": "tests.test_backends.DoubleDetector",
            },
        ),
    )
    recrawl = RecrawlExtension.from_crawler(crawler)
    assert isinstance(recrawl.db, DoubleCrawlDb)
    assert recrawl.db.built_with == "from-settings"

    judge = near_duplicate_judge(crawler)  # the content analysis's, in a crawl
    assert isinstance(judge.detector, DoubleDetector)
    assert judge.detector.threshold == 0.9

    index = IndexPipeline.from_crawler(crawler)
    index.open_spider()
    try:
        assert isinstance(index.index, DoubleIndex)
        assert index.index.built_with == "from-settings"
        assert (tmp_path / "double-index.sqlite").exists()
    finally:
        index.close_spider()


def test_the_embedded_defaults_are_built_without_class_settings(tmp_path) -> None:
    crawler = get_crawler(SiteSpider, _settings(CRAWLDB_PATH=str(tmp_path / "db.sqlite")))
    recrawl = RecrawlExtension.from_crawler(crawler)
    assert type(recrawl.db) is SqliteCrawlDb
    assert recrawl.db.path == str(tmp_path / "db.sqlite")
    assert type(near_duplicate_judge(crawler).detector) is NearDuplicateDetector
