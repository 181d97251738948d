"""The full-text index of crawled pages: one interface, one query language, engine backends.

``crawler.backends.registry.open_index(settings)`` builds the backend named by ``index``
(default :class:`crawler.backends.sqlite.index.SQLiteIndex`, a file at ``INDEX_PATH``); a
shared backend (:class:`crawler.backends.postgres.index.PostgresIndex`) implements
:class:`crawler.index.base.Index` and is selected the same way. Both search with the query
language of :mod:`crawler.index.query`, parsed there and only rendered by each backend.
"""

from __future__ import annotations

from crawler.index.base import Index, IndexAccessError, PageDocument, QuerySyntaxError, SearchResult

__all__ = ["Index", "IndexAccessError", "PageDocument", "QuerySyntaxError", "SearchResult"]
