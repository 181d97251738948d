"""The shared near-duplicate detector's data as Redis keeps it: sorted values as their gaps in
the bits the largest needs, an original's record and a host's template model after a pruning.

A record (``:r``, :func:`encode_record`) is: fingerprint (8 bytes), host id (4), the URL (its
length, 2 bytes, then its UTF-8 bytes), then the title (4), whether the sketch holds every
hash of the page (else its cover is its last), the sketch's hashes (:func:`pack_sorted`), the
page's distinct blocks (4 bytes each, sorted) and each entry's block's index among them,
packed. The sketch is most of it (~128 hashes whose gaps need ~27 bits each); every bit of it
is read by the decision (``neardup_decide``), so it is packed losslessly, in fixed widths: an
entropy code of the gaps would save a few % of a record, which Redis's allocator, rounding each
value up to its size class, mostly does not give back (``bench/neardup_scale.py`` measures it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from crawler.content.neardup_features import Features
from crawler.frontier.urlcode import read_varint, varint

ALL = 0xFFFFFFFF  # the cover of a sketch that holds every hash of its page


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


def pack_sorted(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values`` (a sketch, a template model's log entry, its
    snapshot's blocks): their number, then their gaps (the first from 0) packed."""
    gaps = values.astype(np.uint32)
    gaps[1:] = np.diff(gaps)
    return varint(len(values)) + (_pack(gaps) if len(values) else b"")


def unpack_sorted(data: bytes, pos: int = 0) -> tuple[np.ndarray, int]:
    """:func:`pack_sorted`'s values from ``data[pos:]``, and the position after them."""
    n, pos = read_varint(data, pos)
    if not n:
        return np.empty(0, np.uint32), pos
    gaps, pos = _unpack(data, pos, n)
    return np.cumsum(gaps, dtype=np.uint32), pos


def encode_snapshot(pages: int, keys: np.ndarray, counts: np.ndarray) -> bytes:
    """A host's model right after a pruning: pages (4 bytes: a worker reads them first), the
    blocks counted (:func:`pack_sorted`) and their counts less 1, packed (a bit each on most
    hosts right after a pruning)."""
    less = _pack(counts.astype(np.uint32) - np.uint32(1)) if len(keys) else b""
    return pages.to_bytes(4, "big") + pack_sorted(keys) + less


def decode_snapshot(data: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    keys, pos = unpack_sorted(data, 4)
    less = _unpack(data, pos, len(keys))[0] if len(keys) else keys
    return int.from_bytes(data[:4], "big"), keys, (less + np.uint32(1)).astype(np.uint16)


class Record(NamedTuple):
    """A stored original, decoded."""

    hid: int  # its host's id
    url: str
    title: int
    sketch: np.ndarray
    blocks: np.ndarray  # the block of each hash of the sketch
    cover: int  # every hash of the page up to it is in the sketch


def encode_record(fp: bytes, hid: int, url: str, title: int, f: Features) -> bytes:
    """A new original's record (see the module): ``fp`` the 8 bytes of its fingerprint."""
    raw = url.encode("utf-8")
    every = f.cover == ALL
    assert every or f.cover == int(f.sketch[-1]), "a sketch's cover is its last hash"
    head = fp + hid.to_bytes(4, "big") + len(raw).to_bytes(2, "big") + raw
    head += title.to_bytes(4, "big") + bytes((every,)) + pack_sorted(f.sketch)
    if not len(f.sketch):
        return head
    table, index = np.unique(f.sketch_blocks, return_inverse=True)
    return head + varint(len(table)) + table.astype(">u4").tobytes() + _pack(index.ravel())


def record_url(record: bytes) -> str:
    """The URL of a record, without decoding the rest."""
    return record[14 : 14 + int.from_bytes(record[12:14], "big")].decode("utf-8")


def decode_record(record: bytes) -> Record:
    at = 14 + int.from_bytes(record[12:14], "big")
    title, every = int.from_bytes(record[at : at + 4], "big"), record[at + 4]
    sketch, pos = unpack_sorted(record, at + 5)
    blocks = sketch
    if len(sketch):
        d, pos = read_varint(record, pos)
        table = np.frombuffer(record, ">u4", d, pos).astype(np.uint32)
        blocks = table[_unpack(record, pos + 4 * d, len(sketch))[0]]
    cover = ALL if every else int(sketch[-1])
    return Record(
        int.from_bytes(record[8:12], "big"), record_url(record), title, sketch, blocks, cover
    )
