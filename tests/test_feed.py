"""The feed exporters that write bytes made on the feed thread (``crawler/pipelines/feed.py``)
write, byte for byte, what Scrapy's own JSON exporters write for the same items and options."""

from __future__ import annotations

import datetime
import weakref
from decimal import Decimal
from io import BytesIO
from typing import Any

import pytest
from scrapy.exporters import JsonItemExporter, JsonLinesItemExporter

from crawler.pipelines.feed import (
    _PIECE_CHARS,
    _PIECE_ITEMS,
    JsonExporter,
    JsonLinesExporter,
    _weight,
)
from crawler.spiders.site_items import PageItem

# every kind of character JSON escapes or spells differently, some of them astride the
# boundaries where the encoding is cut into pieces
_TRICKY = 'a"b\\c/d\ne\tf\x00g\x1fh\x7fé中😀\u2028\u2029'


def _long_text(n: int) -> str:
    text = (_TRICKY * (n // len(_TRICKY) + 1))[:n]
    for cut in range(_PIECE_CHARS - 3, n, _PIECE_CHARS):  # quotes, backslashes, an emoji
        text = text[:cut] + '"\\😀\n' + text[cut + 4 :]
    return text


def _items() -> list[Any]:
    big = PageItem(
        url="http://a.example/big.html",
        final_url="http://a.example/big.html",
        status=200,
        fetched_at="2026-11-26T15:00:00Z",
        depth=3,
        site="docs",
        title='The "manual" — ünïcode',
        text=_long_text(3 * _PIECE_CHARS + 17),
        main_text=_long_text(_PIECE_CHARS + 1),
        outlinks=[{"url": f"http://a.example/{i}", "text": f"link {i} \"{_TRICKY}\""}
                  for i in range(3 * _PIECE_ITEMS + 5)],
        content_fingerprint="abc",
        last_modified=None,
        etag='"e"',
        content_type="text/html",
        similarity=0.8333333333333334,
        noindex=False,
    )
    exact = PageItem(url="http://a.example/e", title="", text="x" * (2 * _PIECE_CHARS),
                     outlinks=[{"url": "u", "text": "t"}] * (2 * _PIECE_ITEMS), depth=0)
    small = PageItem(url="http://a.example/s", title="Small", outlinks=[], similarity=1e-7)
    odd = PageItem(url="http://a.example/o", title=datetime.date(2026, 11, 26),
                   text=Decimal("1.10"), outlinks=({"nested": {"list": [1, 2.5, None]}},))
    return [big, exact, small, odd]


OPTIONS: list[dict[str, Any]] = [
    {"encoding": "utf-8"},
    {"encoding": "UTF8"},
    {"encoding": None},  # ensure_ascii: \uXXXX escapes
    {"encoding": "utf-8", "fields_to_export": ["title", "outlinks", "url", "missing"]},
    {"encoding": "utf-8", "fields_to_export": {"url": "address", "text": "body"}},
    {"encoding": "utf-8", "fields_to_export": ["url", "etag"], "export_empty_fields": True},
    {"encoding": "utf-8", "indent": 2},
    {"encoding": "utf-8", "sort_keys": True},
    {"encoding": "utf-16"},  # a codec that cannot be cut into pieces
]


def _scrapy_bytes(cls: type, items: list[Any], options: dict[str, Any]) -> bytes:
    out = BytesIO()
    exporter = cls(out, **options)
    exporter.start_exporting()
    for item in items:
        exporter.export_item(item)
    exporter.finish_exporting()
    return out.getvalue()


def _our_bytes(cls: type, items: list[Any], options: dict[str, Any], made: bool) -> bytes:
    """What our exporter writes, with every item's bytes made beforehand by a template built
    from the same options (as the pipeline does on the feed thread), or none (``made``)."""
    template = cls(BytesIO(), **options)
    ready: weakref.WeakKeyDictionary[Any, dict[str, list[bytes]]] = weakref.WeakKeyDictionary()
    if made:
        for item in items:
            ready[item] = {template.line_key: template.line_pieces(item)}
    out = BytesIO()
    exporter = cls(out, **options)
    assert exporter.line_key == template.line_key
    exporter._ready = ready
    used = []
    exporter._stats = type("Stats", (), {"inc_value": lambda self, key: used.append(key)})()
    exporter.start_exporting()
    for item in items:
        exporter.export_item(item)
    exporter.finish_exporting()
    assert len(used) == (len(items) if made else 0)  # the made bytes were the ones written
    return out.getvalue()


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
@pytest.mark.parametrize(
    "ours,theirs", [(JsonLinesExporter, JsonLinesItemExporter), (JsonExporter, JsonItemExporter)],
    ids=["jsonlines", "json"],
)
def test_bytes_equal_scrapys_exporter(ours: type, theirs: type, options: dict[str, Any]) -> None:
    items = _items()
    expected = _scrapy_bytes(theirs, items, dict(options))
    assert _our_bytes(ours, items, dict(options), made=True) == expected
    assert _our_bytes(ours, items, dict(options), made=False) == expected


def test_the_big_item_is_really_cut_into_pieces() -> None:
    """The cases above go through the piecewise path, not one whole encoding."""
    from crawler.pipelines.feed import encode_in_pieces

    template = JsonLinesExporter(BytesIO(), encoding="utf-8")
    item = _items()[0]
    pieces = encode_in_pieces(template.encoder, dict(template.get_serialized_fields(item)))
    assert len(pieces) > 20 and max(map(len, pieces)) < 2 * _PIECE_CHARS
    assert "".join(pieces) == template.encoder.encode(dict(template.get_serialized_fields(item)))


def test_an_options_difference_is_a_different_line() -> None:
    keys = {JsonLinesExporter(BytesIO(), **dict(o)).line_key for o in OPTIONS}
    assert len(keys) == len(OPTIONS)
    assert JsonExporter(BytesIO(), encoding="utf-8").line_key != JsonLinesExporter(
        BytesIO(), encoding="utf-8").line_key


def test_weight_counts_strings_and_list_elements() -> None:
    assert _weight(PageItem(text="x" * 10, outlinks=[{}] * 3), 10**9) == 10 + 150
    assert _weight(PageItem(text="x" * 500), 100) == 500  # stops once it is enough


def test_an_item_scrapy_cannot_encode_fails_the_same_way() -> None:
    """A lone surrogate cannot be UTF-8: the line is not made (the pipeline then leaves the
    item to Scrapy's path, which raises on the reactor as it always did)."""
    item = PageItem(url="http://a.example/", text="x" * _PIECE_CHARS + "\ud800")
    with pytest.raises(UnicodeEncodeError):
        _scrapy_bytes(JsonLinesItemExporter, [item], {"encoding": "utf-8"})
    with pytest.raises(UnicodeEncodeError):
        JsonLinesExporter(BytesIO(), encoding="utf-8").line(item)
