"""Which class keeps each piece of crawl state: chosen by settings, never by an ``if``.

Every stateful part of a crawl has a class setting, loaded the Scrapy way (a dotted path, built
with ``build_from_crawler``):

=========================  =====================================================================
``FRONTIER_STORE_CLASS``   queued URLs, seen URLs, host politeness state, leases
``ROBOTS_CACHE_CLASS``     fetched robots.txt files
``CRAWLDB_CLASS``          what was fetched when, and when it is due again
``INDEX_CLASS``            the full-text index
``NEARDUP_STORE_CLASS``    the near-duplicate detector's state
``DNS_SHARED_CLASS``       DNS answers shared by a crawl's workers
``ADDRESS_BUDGET_CLASS``   politeness per server address (fetches in flight, next start)

``WARC_DIGEST_INDEX_CLASS``  payloads already archived in WARC files (revisit records)
=========================  =====================================================================

A user normally sets none of them: ``FRONTIER_BACKEND`` (``memory``, ``redis``) is the one public
switch, and it only chooses their defaults from :data:`BACKENDS`. A ``JOBDIR`` turns ``memory``
into ``sqlite`` (the same crawl, kept on disk so it can be resumed). ``DATABASE_URL`` is the
second: its scheme (``postgresql://``) picks, from :data:`DATABASES`, a shared crawl database
and index over the frontier backend's embedded ones. A class setting given explicitly always
wins, so a test or a deployment can swap one part alone.
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.misc import build_from_crawler, load_object

from crawler.index.base import Index

CLASS_SETTINGS = (
    "FRONTIER_STORE_CLASS",
    "ROBOTS_CACHE_CLASS",
    "CRAWLDB_CLASS",
    "INDEX_CLASS",
    "NEARDUP_STORE_CLASS",
    "DNS_SHARED_CLASS",
    "ADDRESS_BUDGET_CLASS",

    "WARC_DIGEST_INDEX_CLASS",
)

_EMBEDDED = {
    "ROBOTS_CACHE_CLASS": "crawler.robots.cache.SqliteRobotsCache",
    "CRAWLDB_CLASS": "crawler.backends.sqlite.crawldb.SqliteCrawlDb",
    "INDEX_CLASS": "crawler.backends.sqlite.index.SQLiteIndex",
    "NEARDUP_STORE_CLASS": "crawler.content.neardup.NearDuplicateDetector",
    "DNS_SHARED_CLASS": "crawler.net.dns.NoSharedDns",
    "ADDRESS_BUDGET_CLASS": "crawler.frontier.addresses.LocalAddressBudget",

    "WARC_DIGEST_INDEX_CLASS": "crawler.backends.sqlite.warc_digests.SqliteDigestIndex",
}

BACKENDS: dict[str, dict[str, str]] = {
    "memory": {"FRONTIER_STORE_CLASS": "crawler.backends.memory.MemoryFrontierStore", **_EMBEDDED},
    "sqlite": {
        "FRONTIER_STORE_CLASS": "crawler.backends.sqlite.frontier_store.SqliteFrontierStore",
        **_EMBEDDED,
    },
    "redis": {
        **_EMBEDDED,
        "FRONTIER_STORE_CLASS": "crawler.backends.redis.frontier_store.RedisFrontierStore",
        "ROBOTS_CACHE_CLASS": "crawler.backends.redis.robots.RedisRobotsCache",
        "NEARDUP_STORE_CLASS": "crawler.backends.redis.neardup_store.RedisNearDuplicateStore",
        "DNS_SHARED_CLASS": "crawler.backends.redis.dns.RedisDnsCache",
        "ADDRESS_BUDGET_CLASS": "crawler.backends.redis.addresses.RedisAddressBudget",

        "WARC_DIGEST_INDEX_CLASS": "crawler.backends.redis.warc_digests.RedisDigestIndex",
    },
}


# DATABASE_URL's scheme -> the classes it replaces (whatever the frontier backend); no URL: none.
_POSTGRES = {
    "CRAWLDB_CLASS": "crawler.backends.postgres.crawldb.PostgresCrawlDb",
    "INDEX_CLASS": "crawler.backends.postgres.index.PostgresIndex",
}
DATABASES: dict[str, dict[str, str]] = {"": {}, "postgresql": _POSTGRES, "postgres": _POSTGRES}


class BackendError(ValueError):
    """A backend setting names something that does not exist."""


def backend_name(settings: BaseSettings | dict[str, Any]) -> str:
    """The effective backend: ``FRONTIER_BACKEND``, with ``memory`` kept on disk under JOBDIR."""
    name = (settings.get("FRONTIER_BACKEND") or "memory").strip().lower()
    if name == "memory" and settings.get("JOBDIR"):
        name = "sqlite"
    if name not in BACKENDS:
        public = sorted(n for n in BACKENDS if n != "sqlite")
        raise BackendError(
            f"FRONTIER_BACKEND: unknown backend {name!r}; choose one of {', '.join(public)}"
        )
    return name


def database_scheme(settings: BaseSettings | dict[str, Any]) -> str:
    """The scheme of ``DATABASE_URL`` ("" without one); an unknown scheme is refused."""
    url = (settings.get("DATABASE_URL") or "").strip()
    scheme = url.partition("://")[0].lower() if url else ""
    if scheme not in DATABASES:
        known = ", ".join(sorted(f"{s}://" for s in DATABASES if s))
        raise BackendError(f"DATABASE_URL: unknown database {scheme!r}; use one of {known}")
    return scheme


def class_path(settings: BaseSettings | dict[str, Any], key: str) -> str:
    """The dotted path of the class ``key`` names: explicit, else chosen by ``DATABASE_URL``,
    else by the frontier backend."""
    if key not in CLASS_SETTINGS:
        raise KeyError(key)
    return (
        settings.get(key)
        or DATABASES[database_scheme(settings)].get(key)
        or BACKENDS[backend_name(settings)][key]
    )


def backend_class(settings: BaseSettings | dict[str, Any], key: str) -> type:
    path = class_path(settings, key)
    try:
        cls = load_object(path)
    except (ImportError, AttributeError, NameError, ValueError) as exc:
        raise BackendError(f"{key}: cannot load {path!r}: {exc}") from exc
    if not isinstance(cls, type):
        raise BackendError(f"{key}: {path!r} is not a class")
    return cls


def build_backend(crawler: Any, key: str, *args: Any, **kwargs: Any) -> Any:
    """An instance of the class ``key`` names, built from ``crawler`` (its ``from_crawler``)."""
    return build_from_crawler(backend_class(crawler.settings, key), crawler, *args, **kwargs)


def open_index(settings: Any, *, readonly: bool = False) -> Index:
    """The full-text index the settings configure (``INDEX_CLASS``, ``INDEX_PATH``, ``JOBDIR``);
    ``scrapy search`` opens it ``readonly`` from settings alone, with no crawler."""
    cls = backend_class(settings, "INDEX_CLASS")
    if not issubclass(cls, Index):
        raise BackendError(f"INDEX_CLASS: {cls.__module__}.{cls.__qualname__} is not an Index")
    return cls.from_settings(settings, readonly=readonly)
