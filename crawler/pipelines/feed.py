"""Feed export of big items without stalling the reactor: their JSON is made on a thread.

Scrapy's feed export serializes every item on the reactor, when ``item_scraped`` fires:
``json`` of a page item whose text and main text are a million characters each, plus thousands
of outlinks, is one C call of 10-40 ms and its UTF-8 encoding a few more, while every host that
came due waits (``bench/realcrawl.py --spy``: the longest stalls left once the crawl database
wrote from its own thread). Here:

* :class:`FeedLinePipeline`, the last item pipeline, takes an item of at least
  :data:`THREAD_MIN_CHARS` characters (its strings, plus ~50 per element of its lists) to the
  ``feed`` worker thread (:mod:`crawler.offload.components`) and there makes the exact bytes each
  JSON feed
  of the crawl will write for it: the same exporter class, built with the same feed options
  (``fields``, ``encoding``, ``indent``, ``item_export_kwargs``), picks the fields
  (``get_serialized_fields``) and its encoder encodes them. The encoding is cut into pieces (a
  long string ``_PIECE_CHARS`` characters at a time, a long list ``_PIECE_ITEMS`` elements at a
  time) whose concatenation is the whole encoding, so that the thread never holds the GIL for
  more than about a millisecond at once (a C call cannot be interrupted);
* :class:`JsonLinesExporter` and :class:`JsonExporter` (``FEED_EXPORTERS`` for ``jsonlines``,
  ``jsonl``, ``jl`` and ``json`` in the project settings) write those bytes when the item
  comes with them, and otherwise do exactly what Scrapy's ``JsonLinesItemExporter`` and
  ``JsonItemExporter`` do (small items, items that cannot be weakly referenced, a crawl without
  the content thread, an encoding error: Scrapy raises it as before).

The bytes are those of the item as it left the pipelines; an ``item_scraped`` handler that
changed an item before the feed export would not be seen (none in this project does).
Small items stay on the reactor: handing an item to a thread and back costs more than
encoding a few kilobytes.
"""

from __future__ import annotations

import codecs
import weakref
from collections.abc import Iterable
from io import BytesIO
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exporters import JsonItemExporter, JsonLinesItemExporter
from scrapy.extensions.feedexport import FeedExporter
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.python import to_bytes

from crawler.offload.components import feed_worker

__all__ = ["FeedLinePipeline", "JsonExporter", "JsonLinesExporter", "encode_in_pieces"]

#: Items of at least this many characters (strings, ~50 per list element) get their JSON feed
#: bytes made on the feed thread (a page item of a million characters: 10-40 ms on the
#: reactor); smaller ones cost less than the hand-over.
THREAD_MIN_CHARS = 100_000
_PIECE_CHARS = 1 << 15  # characters of a string encoded in one C call (~0.15 ms)
_PIECE_ITEMS = 256  # elements of a list encoded in one C call


def encode_in_pieces(encoder: Any, value: dict[str, Any]) -> list[str]:
    """``encoder.encode(value)`` as a list of strings whose concatenation is exactly that, each
    made by a short C call: JSON escapes a string one code point at a time and joins a list's
    elements and an object's members with fixed separators, so the pieces of a long string or
    list encode to the pieces of its encoding. Only for what this holds for: an object with
    string keys, no ``indent``, no ``sort_keys`` (else one whole encoding)."""
    plain = encoder.indent is None and not encoder.sort_keys
    if not plain or not all(isinstance(k, str) for k in value):
        return [encoder.encode(value)]
    if not value:
        return ["{}"]
    pieces: list[str] = ["{"]
    for n, (key, item) in enumerate(value.items()):
        if n:
            pieces.append(encoder.item_separator)
        pieces.append(encoder.encode(key))
        pieces.append(encoder.key_separator)
        if isinstance(item, str) and len(item) > _PIECE_CHARS:
            pieces.append('"')
            pieces.extend(
                encoder.encode(item[i : i + _PIECE_CHARS])[1:-1]
                for i in range(0, len(item), _PIECE_CHARS)
            )
            pieces.append('"')
        elif isinstance(item, list | tuple) and len(item) > _PIECE_ITEMS:
            pieces.append("[")
            for i in range(0, len(item), _PIECE_ITEMS):
                if i:
                    pieces.append(encoder.item_separator)
                pieces.append(encoder.encode(item[i : i + _PIECE_ITEMS])[1:-1])
            pieces.append("]")
        else:
            pieces.append(encoder.encode(item))
    pieces.append("}")
    return pieces


def _to_bytes(pieces: list[str], encoding: str | None) -> list[bytes]:
    """``to_bytes("".join(pieces), encoding)``, in pieces for UTF-8, which encodes every code
    point on its own (a codec with a byte-order mark or state cannot be cut). Kept in pieces
    (written one by one): no megabytes at once in the feed thread's malloc arena, which would
    keep them."""
    if encoding is None or codecs.lookup(encoding).name == "utf-8":
        return [p.encode("utf-8") for p in pieces]
    return [to_bytes("".join(pieces), encoding)]


def _options_key(cls: type, options: dict[str, Any]) -> str:
    """What makes two feeds' bytes for one item the same: the exporter class and its options."""
    return f"{cls.__module__}.{cls.__qualname__}{sorted(options.items(), key=lambda kv: kv[0])!r}"


class _LinesFromThread:
    """What both exporters share: the bytes the pipeline made for this feed's options."""

    line_key: str = ""
    _stats: Any = None
    _ready: weakref.WeakKeyDictionary[Any, dict[str, list[bytes]]] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, file: Any, **options: Any) -> Any:
        exporter = cls(file, **options)
        pipeline = crawler.get_item_pipeline(FeedLinePipeline)
        if pipeline is not None:
            exporter._ready = pipeline.ready
            exporter._stats = crawler.stats
        return exporter

    def __init__(self, file: Any, **options: Any) -> None:
        self.line_key = _options_key(type(self), options)
        super().__init__(file, **options)  # Scrapy's exporter, next in the MRO

    def _encoded(self, item: Any) -> list[str]:
        """The JSON text of ``item`` as Scrapy's exporter would encode it, in short pieces."""
        return encode_in_pieces(self.encoder, dict(self.get_serialized_fields(item)))  # type: ignore[attr-defined]

    def _made(self, item: Any) -> list[bytes] | None:
        if self._ready is None:
            return None
        try:
            lines = self._ready.get(item)
        except TypeError:  # not weakly referenceable (a dict item)
            return None
        line = lines.get(self.line_key) if lines else None
        if line is not None and self._stats is not None:
            self._stats.inc_value("feed/lines_from_thread")
        return line

    _item_end = ""  # what follows an item's JSON in the feed: JSON lines end each with "\n"

    def line_pieces(self, item: Any) -> list[bytes]:
        """The bytes ``export_item`` writes for ``item`` (after the comma, in a JSON array), in
        pieces (made on the feed thread)."""
        pieces = self._encoded(item)
        if self._item_end:
            pieces.append(self._item_end)
        return _to_bytes(pieces, self.encoding)  # type: ignore[attr-defined]

    def _start_item(self) -> None:
        """What Scrapy's exporter writes before an item (a JSON array's comma)."""

    def export_item(self, item: Any) -> None:
        data = self._made(item)
        if data is None:
            super().export_item(item)  # type: ignore[misc]
        else:
            self._start_item()
            self._write(data)

    def line(self, item: Any) -> bytes:
        """The bytes ``export_item`` writes for ``item`` (after the comma, in a JSON array)."""
        return b"".join(self.line_pieces(item))

    def _write(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.file.write(piece)  # type: ignore[attr-defined]


class JsonLinesExporter(_LinesFromThread, JsonLinesItemExporter):
    """Scrapy's ``JsonLinesItemExporter``, writing the line made on the feed thread when there
    is one (module docstring)."""

    _item_end = "\n"


class JsonExporter(_LinesFromThread, JsonItemExporter):
    """Scrapy's ``JsonItemExporter`` (a JSON array), writing the item made on the feed thread
    when there is one (module docstring)."""

    def _start_item(self) -> None:
        self._add_comma_after_first()


class FeedLinePipeline:
    """The last item pipeline: makes a big item's feed bytes on the feed thread (module
    docstring). Does nothing when no feed of the crawl uses this module's exporters."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.min_chars = THREAD_MIN_CHARS
        # one exporter per distinct (class, options) of the crawl's feeds, on no file: it only
        # picks fields and encodes (on the feed thread)
        self.templates: dict[str, _LinesFromThread] = {}
        self.ready: weakref.WeakKeyDictionary[Any, dict[str, list[bytes]]] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FeedLinePipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        feeds = self.crawler.get_extension(FeedExporter) if self.min_chars > 0 else None
        if feeds is None:
            return
        for options in feeds.feeds.values():
            cls = feeds.exporters.get(options["format"])
            if not (isinstance(cls, type) and issubclass(cls, _LinesFromThread)):
                continue
            kwargs = {
                "fields_to_export": options["fields"],
                "encoding": options["encoding"],
                "indent": options["indent"],
                **options["item_export_kwargs"],
            }
            try:
                template = cls(BytesIO(), **kwargs)
            except Exception:  # options the exporter refuses: Scrapy says so when it builds it
                continue
            self.templates.setdefault(template.line_key, template)

    def process_item(self, item: Any) -> Any:
        if not self.templates or _weight(item, self.min_chars) < self.min_chars:
            return item
        worker = feed_worker(self.crawler)
        if worker is None:
            return item
        try:
            weakref.ref(item)
        except TypeError:
            return item
        return self._offloaded(item, worker)

    async def _offloaded(self, item: Any, worker: Any) -> Any:
        lines = await maybe_deferred_to_future(worker.run(self._lines, item))
        if lines:
            self.ready[item] = lines
        return item

    def _lines(self, item: Any) -> dict[str, list[bytes]]:
        """Every feed's bytes for ``item``; a feed whose encoding fails gets none (its exporter
        then runs Scrapy's path on the reactor, which raises the same error as ever)."""
        lines: dict[str, list[bytes]] = {}
        for key, template in self.templates.items():
            try:
                lines[key] = template.line_pieces(item)
            except Exception:
                continue
        return lines


def _weight(item: Any, enough: int) -> int:
    """Roughly how many characters the item's JSON has: its strings, ~50 per list element;
    stops counting at ``enough``."""
    total = 0
    values: Iterable[Any] = item.values() if hasattr(item, "values") else ()
    for value in values:
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list | tuple | dict):
            total += 50 * len(value)
        if total >= enough:
            break
    return total
