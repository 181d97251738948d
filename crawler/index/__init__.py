"""The full-text index of crawled pages: one interface, an embedded SQLite FTS5 backend.

``open_index(settings)`` builds the backend named by ``INDEX_BACKEND`` (default
:class:`crawler.index.sqlite.SQLiteIndex`, a file at ``INDEX_PATH``); a shared backend
(PostgreSQL) implements :class:`crawler.index.base.Index` and is selected the same way.
"""

from __future__ import annotations

from typing import Any

from scrapy.utils.misc import load_object

from crawler.index.base import Index, IndexAccessError, PageDocument, QuerySyntaxError, SearchResult

__all__ = [
    "DEFAULT_BACKEND",
    "Index",
    "IndexAccessError",
    "PageDocument",
    "QuerySyntaxError",
    "SearchResult",
    "open_index",
]

DEFAULT_BACKEND = "crawler.index.sqlite.SQLiteIndex"


def open_index(settings: Any, *, readonly: bool = False) -> Index:
    """The index the settings configure (``INDEX_BACKEND``, ``INDEX_PATH``, ``JOBDIR``)."""
    backend = settings.get("INDEX_BACKEND") or DEFAULT_BACKEND
    cls = load_object(backend) if isinstance(backend, str) else backend
    if not (isinstance(cls, type) and issubclass(cls, Index)):
        raise IndexAccessError(f"INDEX_BACKEND {backend!r} is not a crawler.index.base.Index")
    return cls.from_settings(settings, readonly=readonly)
