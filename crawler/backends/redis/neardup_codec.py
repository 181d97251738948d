"""The shared near-duplicate detector's data as Redis keeps it, packed to cost Redis least per
page: sorted ids as gaps in the bits the largest needs, an original's sketch (title, cover,
hashes, each entry's block as an index into the page's blocks), a host's template model after a
pruning, and a record's URL without ``scheme://host``.

A record in the heap is: fingerprint (8 bytes), host id (4), the URL (:func:`url_part`), then
title, cover and the packed sketch (:func:`encode_sketch`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "decode_sketch",
    "decode_snapshot",
    "encode_sketch",
    "encode_snapshot",
    "pack_sorted",
    "unpack_sorted",
    "url_part",
]


def _pack(values: np.ndarray, width: int) -> bytes:
    """``values`` (each below 2**width) in ``width`` bits each, big-endian, the last byte
    padded with zeros."""
    if width == 0 or not len(values):
        return b""
    bits = np.unpackbits(values.astype(">u4").view(np.uint8).reshape(-1, 4), axis=1)
    return np.packbits(bits[:, 32 - width :]).tobytes()


def _unpack(data: bytes, pos: int, n: int, width: int) -> tuple[np.ndarray, int]:
    """``n`` values of ``width`` bits from ``data[pos:]`` (see :func:`_pack`); and the position
    after them."""
    size = (n * width + 7) // 8
    if width == 0 or not n:
        return np.zeros(n, np.uint32), pos + size
    bits = np.unpackbits(np.frombuffer(data, np.uint8, size, pos))[: n * width]
    full = np.zeros((n, 32), np.uint8)
    full[:, 32 - width :] = bits.reshape(n, width)
    return np.packbits(full, axis=1).view(">u4").ravel().astype(np.uint32), pos + size


def pack_sorted(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values``: their number, the first, then the gaps in the bits
    the largest needs."""
    n = len(values)
    if not n:
        return b"\0\0\0\0"
    gaps = np.diff(values.astype(np.uint32))
    width = int(gaps.max()).bit_length() if len(gaps) else 0
    return b"".join((n.to_bytes(4, "big"), int(values[0]).to_bytes(4, "big"), bytes((width,)),
                     _pack(gaps, width)))


def unpack_sorted(data: bytes, pos: int = 0) -> tuple[np.ndarray, int]:
    """:func:`pack_sorted`'s values from ``data[pos:]``, and the position after them."""
    n = int.from_bytes(data[pos : pos + 4], "big")
    if not n:
        return np.empty(0, np.uint32), pos + 4
    first = int.from_bytes(data[pos + 4 : pos + 8], "big")
    gaps, end = _unpack(data, pos + 9, n - 1, data[pos + 8])
    values = np.empty(n, np.uint64)
    values[0] = first
    values[1:] = gaps
    return np.cumsum(values, dtype=np.uint64).astype(np.uint32), end


def encode_sketch(title: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> bytes:
    """An original's title, cover and sketch in few bytes: the first hash, the gaps in the bits
    the largest gap needs, the page's distinct blocks, and each entry's block as an index into
    them in the bits their number needs."""
    n = len(sketch)
    head = np.array([title, cover], dtype=">u4").tobytes() + n.to_bytes(2, "big")
    if not n:
        return head
    gaps = np.diff(sketch.astype(np.uint32))
    width = int(gaps.max()).bit_length() if len(gaps) else 0
    table, index = np.unique(blocks, return_inverse=True)
    index_width = (len(table) - 1).bit_length()
    return b"".join((
        head, int(sketch[0]).to_bytes(4, "big"), bytes((width,)), _pack(gaps, width),
        len(table).to_bytes(2, "big"), table.astype(">u4").tobytes(), bytes((index_width,)),
        _pack(index.astype(np.uint32), index_width),
    ))


def decode_sketch(data: bytes, offset: int = 0) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(title, sketch, blocks, cover) of :func:`encode_sketch`'s bytes from ``offset``."""
    title, cover = np.frombuffer(data, ">u4", 2, offset).tolist()
    n = int.from_bytes(data[offset + 8 : offset + 10], "big")
    if not n:
        empty = np.empty(0, dtype=np.uint32)
        return title, empty, empty, cover
    pos = offset + 10
    first = int.from_bytes(data[pos : pos + 4], "big")
    gaps, pos = _unpack(data, pos + 5, n - 1, data[pos + 4])
    sketch = np.empty(n, dtype=np.uint64)
    sketch[0] = first
    sketch[1:] = gaps
    sketch = np.cumsum(sketch, dtype=np.uint64).astype(np.uint32)
    d = int.from_bytes(data[pos : pos + 2], "big")
    table = np.frombuffer(data, ">u4", d, pos + 2).astype(np.uint32)
    pos += 2 + 4 * d
    index, _ = _unpack(data, pos + 1, n, data[pos])
    return title, sketch, table[index], cover


def encode_snapshot(pages: int, tlen: int, keys: np.ndarray, counts: np.ndarray) -> bytes:
    """A host's model right after a pruning: pages, template length, the blocks counted once,
    those counted more often and their counts."""
    once = counts == 1
    more = counts[~once].astype(">u2").tobytes()
    return b"".join((pages.to_bytes(4, "big"), tlen.to_bytes(4, "big"),
                     pack_sorted(keys[once]), pack_sorted(keys[~once]), more))


def decode_snapshot(data: bytes) -> tuple[int, int, np.ndarray, np.ndarray]:
    pages = int.from_bytes(data[:4], "big")
    tlen = int.from_bytes(data[4:8], "big")
    once, pos = unpack_sorted(data, 8)
    more, pos = unpack_sorted(data, pos)
    counts = np.concatenate((np.ones(len(once), np.uint16),
                             np.frombuffer(data, ">u2", len(more), pos).astype(np.uint16)))
    keys = np.concatenate((once, more))
    order = np.argsort(keys, kind="stable")
    return pages, tlen, keys[order], counts[order]


def url_part(url: str, host: str) -> bytes:
    """``url`` as a record keeps it: its length, then 1 (``http://host`` left out), 2
    (``https://host``) or 0 (whole), then the rest."""
    code, rest = 0, url
    if host:
        for n, scheme in ((1, "http://"), (2, "https://")):
            if url.startswith(scheme + host):
                code, rest = n, url[len(scheme) + len(host) :]
                break
    raw = rest.encode("utf-8")
    return (len(raw) + 1).to_bytes(2, "big") + bytes((code,)) + raw
