"""The shared near-duplicate detector's data as Redis keeps it: sorted values as their gaps in
the bits the largest needs, an original's sketch (title, cover, hashes, each entry's block as
an index into the page's distinct blocks) and a host's template model after a pruning.

A record (``:r``, :func:`encode_record`) is: fingerprint (8 bytes), host id (4), the URL (its
length, 2 bytes, then its UTF-8 bytes), then title, cover and the packed sketch
(:func:`encode_sketch`). The sketch is most of it (~128
hashes whose gaps need ~27 bits each); every bit of it is read by the decision
(``neardup_decide``), so it is packed losslessly, in fixed widths: an entropy code of the gaps
would save a few % of a record, which Redis's allocator, rounding each value up to its size
class, mostly does not give back (``bench/neardup_scale.py`` measures it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from crawler.content.neardup_features import Features
from crawler.frontier.urlcode import read_varint, varint

_COVER_ALL, _COVER_LAST, _COVER_GIVEN = 0, 1, 2  # how a record says its cover (see encode_sketch)


def _pack(values: np.ndarray) -> bytes:
    """``values`` (uint32) in the bits the largest needs, big-endian, after a byte saying
    that width."""
    width = int(values.max()).bit_length() if len(values) else 0
    if width == 0:
        return bytes((0,))
    bits = np.unpackbits(values.astype(">u4").view(np.uint8).reshape(-1, 4), axis=1)
    return bytes((width,)) + np.packbits(bits[:, 32 - width :]).tobytes()


def _unpack(data: bytes, pos: int, n: int) -> tuple[np.ndarray, int]:
    """``n`` values of :func:`_pack` from ``data[pos:]``; and the position after them."""
    width = data[pos]
    pos += 1
    size = (n * width + 7) // 8
    if width == 0 or not n:
        return np.zeros(n, np.uint32), pos + size
    bits = np.unpackbits(np.frombuffer(data, np.uint8, size, pos))[: n * width]
    full = np.zeros((n, 32), np.uint8)
    full[:, 32 - width :] = bits.reshape(n, width)
    return np.packbits(full, axis=1).view(">u4").ravel().astype(np.uint32), pos + size


def _pack_gaps(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values`` as their gaps (the first from 0), packed."""
    gaps = values.astype(np.uint32)
    gaps[1:] = np.diff(gaps)
    return _pack(gaps)


def _unpack_gaps(data: bytes, pos: int, n: int) -> tuple[np.ndarray, int]:
    gaps, pos = _unpack(data, pos, n)
    return np.cumsum(gaps, dtype=np.uint32), pos


def pack_sorted(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values`` (a template model's log entry, its snapshot's
    blocks): their number, then their gaps packed."""
    return varint(len(values)) + (_pack_gaps(values) if len(values) else b"")


def unpack_sorted(data: bytes, pos: int = 0) -> tuple[np.ndarray, int]:
    """:func:`pack_sorted`'s values from ``data[pos:]``, and the position after them."""
    n, pos = read_varint(data, pos)
    if not n:
        return np.empty(0, np.uint32), pos
    return _unpack_gaps(data, pos, n)


def encode_sketch(title: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> bytes:
    """An original's title, cover and sketch: the title (4), the number of entries, how the
    cover is given (all hashes kept, or the last entry's: the only two a sketch can have; else
    4 bytes follow), then the page's distinct blocks (4 bytes each, sorted), each entry's
    block's index among them and the sketch's gaps, packed."""
    n = len(sketch)
    if cover == 0xFFFFFFFF:
        mode, given = _COVER_ALL, b""
    elif n and cover == int(sketch[-1]):
        mode, given = _COVER_LAST, b""
    else:
        mode, given = _COVER_GIVEN, int(cover).to_bytes(4, "big")
    head = int(title).to_bytes(4, "big") + varint(n) + bytes((mode,)) + given
    if not n:
        return head
    table, index = np.unique(blocks, return_inverse=True)
    return b"".join(
        (
            head,
            varint(len(table)),
            table.astype(">u4").tobytes(),
            _pack(index.ravel().astype(np.uint32)),
            _pack_gaps(sketch),
        )
    )


def decode_sketch(data: bytes, offset: int = 0) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(title, sketch, blocks, cover) of :func:`encode_sketch`'s bytes from ``offset``."""
    title = int.from_bytes(data[offset : offset + 4], "big")
    n, pos = read_varint(data, offset + 4)
    mode = data[pos]
    pos += 1
    cover = 0xFFFFFFFF
    if mode == _COVER_GIVEN:
        cover = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
    if not n:
        empty = np.empty(0, dtype=np.uint32)
        return title, empty, empty, cover
    d, pos = read_varint(data, pos)
    table = np.frombuffer(data, ">u4", d, pos).astype(np.uint32)
    index, pos = _unpack(data, pos + 4 * d, n)
    sketch, _ = _unpack_gaps(data, pos, n)
    if mode == _COVER_LAST:
        cover = int(sketch[-1])
    return title, sketch, table[index], cover


def encode_snapshot(pages: int, tlen: int, keys: np.ndarray, counts: np.ndarray) -> bytes:
    """A host's model right after a pruning: pages (4 bytes: a worker reads them first),
    template length, the blocks counted (:func:`pack_sorted`) and their counts less 1, packed
    (a bit each on most hosts right after a pruning)."""
    return b"".join(
        (
            pages.to_bytes(4, "big"),
            tlen.to_bytes(4, "big"),
            pack_sorted(keys),
            _pack(counts.astype(np.uint32) - np.uint32(1)) if len(keys) else b"",
        )
    )


def decode_snapshot(data: bytes) -> tuple[int, int, np.ndarray, np.ndarray]:
    pages = int.from_bytes(data[:4], "big")
    tlen = int.from_bytes(data[4:8], "big")
    keys, pos = unpack_sorted(data, 8)
    counts = np.ones(0, np.uint16)
    if len(keys):
        extra, _ = _unpack(data, pos, len(keys))
        counts = (extra + np.uint32(1)).astype(np.uint16)
    return pages, tlen, keys, counts


class Record(NamedTuple):
    """A stored original, decoded."""

    hid: int  # its host's id
    url: str
    title: int
    sketch: np.ndarray
    blocks: np.ndarray
    cover: int


def encode_record(fp: bytes, hid: int, url: str, title: int, f: Features) -> bytes:
    """A new original's record (see the module): ``fp`` the 8 bytes of its fingerprint."""
    raw = url.encode("utf-8")
    return b"".join(
        (
            fp,
            hid.to_bytes(4, "big"),
            len(raw).to_bytes(2, "big"),
            raw,
            encode_sketch(title, f.sketch, f.sketch_blocks, f.cover),
        )
    )


def record_url(record: bytes) -> str:
    """The URL of a record, without decoding the rest."""
    return record[14 : 14 + int.from_bytes(record[12:14], "big")].decode("utf-8")


def decode_record(record: bytes) -> Record:
    n = int.from_bytes(record[12:14], "big")
    return Record(
        int.from_bytes(record[8:12], "big"),
        record[14 : 14 + n].decode("utf-8"),
        *decode_sketch(record, 14 + n),
    )
