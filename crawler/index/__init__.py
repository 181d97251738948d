"""The full-text index of crawled pages: one interface, an embedded SQLite FTS5 backend.

``crawler.backends.registry.open_index(settings)`` builds the backend named by ``INDEX_CLASS``
(default
:class:`crawler.backends.sqlite.index.SQLiteIndex`, a file at ``INDEX_PATH``); a shared backend
(PostgreSQL) implements :class:`crawler.index.base.Index` and is selected the same way.
"""

from __future__ import annotations

from crawler.index.base import Index, IndexAccessError, PageDocument, QuerySyntaxError, SearchResult

__all__ = ["Index", "IndexAccessError", "PageDocument", "QuerySyntaxError", "SearchResult"]
