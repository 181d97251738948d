"""A page's outlinks as stored: zlib-compressed JSON, the same in every crawl database."""

from __future__ import annotations

import json
import zlib

from crawler.crawldb.api import Outlink

_PACK_SLICE = 512  # outlinks encoded at a time


def pack_outlinks(outlinks: list[Outlink]) -> bytes | None:
    """The outlinks as zlib-compressed JSON, made a slice at a time: a page of 20,000 links
    would otherwise make megabytes of JSON text and bytes at once, and the writer thread's
    malloc arena keeps such peaks."""
    if not outlinks:
        return None
    if len(outlinks) <= _PACK_SLICE:
        return zlib.compress(json.dumps(outlinks, separators=(",", ":")).encode("utf-8"))
    packer = zlib.compressobj()
    out = [packer.compress(b"[")]
    for i in range(0, len(outlinks), _PACK_SLICE):
        text = json.dumps(outlinks[i : i + _PACK_SLICE], separators=(",", ":"))[1:-1]
        out.append(packer.compress(("," if i else "").encode() + text.encode("utf-8")))
    out.append(packer.compress(b"]"))
    out.append(packer.flush())
    return b"".join(out)


def unpack_outlinks(blob: bytes | None) -> list[Outlink]:
    if not blob:
        return []
    return [(url, text) for url, text in json.loads(zlib.decompress(blob))]
