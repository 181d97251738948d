"""Which class keeps each piece of crawl state: chosen by settings, never by an ``if``.

Every stateful part of a crawl is a plug point, filled by a class loaded the Scrapy way (a
dotted path, built with ``build_from_crawler``):

=====================  =========================================================================
``frontier_store``     queued URLs, seen URLs, host politeness state, leases
``robots_cache``       fetched robots.txt files
``crawldb``            what was fetched when, and when it is due again
``index``              the full-text index
``neardup_store``      the near-duplicate detector's state
``dns_shared``         DNS answers shared by a crawl's workers
``address_budget``     politeness per server address (fetches in flight, next start)
``warc_digest_index``  payloads already archived in WARC files (revisit records)
=====================  =========================================================================

A user normally fills none of them: ``FRONTIER_BACKEND`` (``memory``, ``redis``) is the one
public switch, and it chooses their classes from :data:`BACKENDS`. A ``JOBDIR`` turns ``memory``
into ``sqlite`` (the same crawl, kept on disk so it can be resumed). ``DATABASE_URL`` is the
second: its scheme (``postgresql://``) picks, from :data:`DATABASES`, a shared crawl database
and index over the frontier backend's embedded ones. The expert setting ``BACKEND_CLASSES`` (a
table of plug point to class) always wins, so a test or a deployment can swap one part alone.
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.misc import build_from_crawler, load_object

from crawler.config.schema import PLUG_POINTS, SettingValueError, read_value
from crawler.index.base import Index

CLASS_SETTINGS = PLUG_POINTS  # the plug points, in the words of the schema

_EMBEDDED = {
    "robots_cache": "crawler.robots.cache.SqliteRobotsCache",
    "crawldb": "crawler.backends.sqlite.crawldb.SqliteCrawlDb",
    "index": "crawler.backends.sqlite.index.SQLiteIndex",
    "neardup_store": "crawler.content.neardup.NearDuplicateDetector",
    "dns_shared": "crawler.net.dns.NoSharedDns",
    "address_budget": "crawler.frontier.addresses.LocalAddressBudget",

    "warc_digest_index": "crawler.backends.sqlite.warc_digests.SqliteDigestIndex",
}

BACKENDS: dict[str, dict[str, str]] = {
    "memory": {"frontier_store": "crawler.backends.memory.MemoryFrontierStore", **_EMBEDDED},
    "sqlite": {
        "frontier_store": "crawler.backends.sqlite.frontier_store.SqliteFrontierStore",
        **_EMBEDDED,
    },
    "redis": {
        **_EMBEDDED,
        "frontier_store": "crawler.backends.redis.frontier_store.RedisFrontierStore",
        "robots_cache": "crawler.backends.redis.robots.RedisRobotsCache",
        "neardup_store": "crawler.backends.redis.neardup_store.RedisNearDuplicateStore",
        "dns_shared": "crawler.backends.redis.dns.RedisDnsCache",
        "address_budget": "crawler.backends.redis.addresses.RedisAddressBudget",

        "warc_digest_index": "crawler.backends.redis.warc_digests.RedisDigestIndex",
    },
}


# DATABASE_URL's scheme -> the classes it replaces (whatever the frontier backend); no URL: none.
_POSTGRES = {
    "crawldb": "crawler.backends.postgres.crawldb.PostgresCrawlDb",
    "index": "crawler.backends.postgres.index.PostgresIndex",
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
    """The dotted path of the class that fills plug point ``key``: ``BACKEND_CLASSES``'s,
    else chosen by ``DATABASE_URL``, else by the frontier backend."""
    if key not in CLASS_SETTINGS:
        raise KeyError(key)
    try:
        chosen = read_value("BACKEND_CLASSES", settings.get("BACKEND_CLASSES")) or {}
    except SettingValueError as exc:
        raise BackendError(f"BACKEND_CLASSES: {exc}") from None
    return (
        chosen.get(key)
        or DATABASES[database_scheme(settings)].get(key)
        or BACKENDS[backend_name(settings)][key]
    )


def backend_class(settings: BaseSettings | dict[str, Any], key: str) -> type:
    path = class_path(settings, key)
    try:
        cls = load_object(path)
    except (ImportError, AttributeError, NameError, ValueError) as exc:
        raise BackendError(f"BACKEND_CLASSES {key}: cannot load {path!r}: {exc}") from exc
    if not isinstance(cls, type):
        raise BackendError(f"BACKEND_CLASSES {key}: {path!r} is not a class")
    return cls


def build_backend(crawler: Any, key: str, *args: Any, **kwargs: Any) -> Any:
    """An instance of the class ``key`` names, built from ``crawler`` (its ``from_crawler``)."""
    return build_from_crawler(backend_class(crawler.settings, key), crawler, *args, **kwargs)


def open_index(settings: Any, *, readonly: bool = False) -> Index:
    """The full-text index the settings configure (its class, ``INDEX_PATH``, ``JOBDIR``);
    ``scrapy search`` opens it ``readonly`` from settings alone, with no crawler."""
    cls = backend_class(settings, "index")
    if not issubclass(cls, Index):
        name = f"{cls.__module__}.{cls.__qualname__}"
        raise BackendError(f"BACKEND_CLASSES index: {name} is not an Index")
    return cls.from_settings(settings, readonly=readonly)
