"""The full-text index interface: what the index pipeline and ``scrapy search`` need.

One small interface so the embedded SQLite FTS5 backend (:mod:`crawler.backends.sqlite.index`) can
be
joined by a shared one (PostgreSQL) without touching the pipeline or the command. Backends are
chosen by the ``index`` plug point (a class path, see ``crawler.backends.registry``) and built
with
:meth:`Index.from_settings`.

What every backend must guarantee:

* A page is one document, keyed by its URL; writing it again replaces it (title, text, and the
  anchor texts its outlinks contributed).
* The anchor text of every link is indexed with the link's *target* URL, so a page is found by
  what other pages call it, also before (or without) being fetched. Results say whether a page
  was fetched and whether it matched by its own text or by anchor text.
* A URL found to duplicate another is an *alias*: it has no document of its own, and anchor
  text pointing at it counts for its original.
* Writes are grouped in transactions (:meth:`Index.commit`); whatever is not committed when the
  process dies is lost, and what was committed is consistent. A backend may commit on a
  writer thread (so the reactor never waits); :meth:`Index.flush` waits for it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

__all__ = [
    "MAX_ANCHOR",
    "MAX_BODY",
    "Index",
    "IndexAccessError",
    "PageDocument",
    "QuerySyntaxError",
    "SearchResult",
    "indexed_links",
    "search_results",
]

MAX_BODY = 1_000_000  # characters of a page's text that every backend keeps
MAX_ANCHOR = 200  # characters of anchor text kept per link


class IndexAccessError(Exception):
    """An index cannot be opened or written (wrong path, schema from a newer version...)."""


class QuerySyntaxError(ValueError):
    """The search query cannot be parsed; the message says what is wrong and how to write it."""


@dataclass
class PageDocument:
    """What the index keeps of one fetched page."""

    url: str
    _: KW_ONLY
    site: str = ""
    title: str = ""
    text: str = ""  # the main text (boilerplate removed) when known, else the visible text
    status: int | None = None
    fetched_at: str | None = None
    fingerprint: str | None = None
    outlinks: Sequence[tuple[str, str]] = ()  # (target URL, anchor text)


def indexed_links(
    source_url: str, outlinks: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The (target URL, anchor text) pairs of a page that every backend indexes: the text with
    its white space collapsed and cut to :data:`MAX_ANCHOR`, no empty text or target, no link
    to the page itself."""
    links = []
    for target_url, text in outlinks:
        anchor = " ".join((text or "").split())[:MAX_ANCHOR]
        if anchor and target_url and target_url != source_url:
            links.append((target_url, anchor))
    return links


@dataclass
class SearchResult:
    url: str
    title: str
    snippet: str
    score: float  # higher is better
    site: str = ""
    fetched: bool = True  # False: known only from the anchor text of links to it
    matched_text: bool = False  # the page's own title or text matched
    matched_anchor: bool = False  # anchor text of links to it matched
    anchors: list[str] = field(default_factory=list)  # matching anchor texts, most used first
    aliases: list[str] = field(default_factory=list)  # URLs recorded as duplicates of it
    status: int | None = None


def search_results(
    rows: Iterable[Sequence[Any]],
    *,
    snippet: Callable[[int], str],
    anchors: Callable[[int], list[str]],
    aliases: Callable[[int], list[str]],
) -> list[SearchResult]:
    """The results of a backend's ranking query, whose rows are (page id, URL, title, site,
    has a document, status, score (higher is better), matched by text, matched by anchor);
    the snippet, matching anchor texts and aliases of a page are asked for by its id, the
    first two only when it matched that way."""
    return [
        SearchResult(
            url=url,
            title=title,
            snippet=snippet(pid) if by_text else "",
            score=float(score),
            site=site,
            fetched=bool(has_doc),
            matched_text=bool(by_text),
            matched_anchor=bool(by_anchor),
            anchors=anchors(pid) if by_anchor else [],
            aliases=aliases(pid),
            status=status,
        )
        for pid, url, title, site, has_doc, status, score, by_text, by_anchor in rows
    ]


class Index(abc.ABC):
    """A full-text index of crawled pages (see the module docstring for the guarantees)."""

    @classmethod
    @abc.abstractmethod
    def from_settings(cls, settings: Any, *, readonly: bool = False) -> Index:
        """Open the index the Scrapy settings point at.

        A writer creates it when missing; a reader (``readonly``, the search command) raises
        :class:`IndexAccessError` instead, naming where it looked.
        """

    @abc.abstractmethod
    def add_page(self, doc: PageDocument) -> None:
        """Index (or replace) the document of ``doc.url`` and the anchor texts of its outlinks."""

    @abc.abstractmethod
    def add_alias(
        self,
        url: str,
        original: str,
        *,
        site: str = "",
        status: int | None = None,
        fetched_at: str | None = None,
    ) -> None:
        """Record ``url`` as a duplicate of ``original``: no document of its own."""

    @abc.abstractmethod
    def record_visit(self, url: str, fetched_at: str | None, status: int | None) -> None:
        """A fetch that leaves the document as it is (``304 Not Modified``, a server error)."""

    @abc.abstractmethod
    def remove_page(
        self, url: str, *, status: int | None = None, fetched_at: str | None = None
    ) -> None:
        """Drop the document of ``url`` (gone, or ``noindex``); links to it still count."""

    @abc.abstractmethod
    def set_links(self, url: str, outlinks: Iterable[tuple[str, str]], site: str = "") -> None:
        """Replace the anchor texts ``url`` contributes to its link targets."""

    @abc.abstractmethod
    def search(self, query: str, *, site: str | None = None, limit: int = 10) -> list[SearchResult]:
        """The best ``limit`` results; raises :class:`QuerySyntaxError` for a malformed query."""

    @abc.abstractmethod
    def commit(self) -> None:
        """Make everything written so far durable and visible to readers."""

    def flush(self) -> None:
        """Commit, and wait until everything is durable: a backend whose :meth:`commit` only
        hands a batch to a writer thread (PostgreSQL) waits for it here."""
        self.commit()

    @abc.abstractmethod
    def close(self) -> None:
        """Commit and release the index."""

    @abc.abstractmethod
    def stats(self) -> dict[str, int]:
        """Counts for logs and tests: documents, known URLs, aliases, anchor texts."""

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
