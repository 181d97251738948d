"""The shared near-duplicate detector's data as Redis keeps it, packed to cost Redis least per
page: sorted values
Rice-coded, an original's sketch (title, cover, hashes Rice-coded, each entry's block as a digit
in base the page's number of blocks), a host's template model after a pruning, and a record's
URL without ``scheme://host``.

A record (``:r``) is: fingerprint (8 bytes), host id (4), the URL (:func:`url_part`), then
title, cover and the packed sketch (:func:`encode_sketch`).

**Why the sketch is most of a record and stays so.** An original's sketch is a set of ~128
hashes spread evenly below its cover: their gaps are geometric, so their entropy is
log2(e * mean gap) bits each, ~26 bits on a page of ~170 shingles (the synthetic pages of
``bench/neardup_scale.py``: 404 bytes a sketch). The Rice code reaches it within a fraction of
a bit (a fixed width, the bits of the largest gap, would cost ~425); the entries' blocks need
log2(blocks) bits each (~58 bytes) and the blocks 4 bytes each (~47). Every bit of it is read by
the decision (each entry's hash and block: ``neardup_decide``), so a record cannot shrink below
~500 bytes without deciding differently from the in-process detector.
"""

from __future__ import annotations

import numpy as np

from crawler.frontier.urlcode import read_varint, varint

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


_COVER_ALL, _COVER_LAST, _COVER_GIVEN = 0, 1, 2  # how a record says its cover (see encode_sketch)
_KS = np.arange(33, dtype=np.uint64)


def _rice(gaps: np.ndarray) -> tuple[int, bytes, bytes]:
    """Rice code of ``gaps`` (uint64): the parameter ``k`` that makes it shortest, the low
    ``k`` bits of each (packed), and the rest of each in unary (that many ones, then a zero).
    Within a fraction of a bit per gap of the entropy of a sorted sketch's gaps, which are
    geometric; a fixed width for the largest gap cost ~2 bits more each."""
    near = int(gaps.sum() // len(gaps)).bit_length()  # the best k is within 2 of log2(mean)
    ks = _KS[max(0, near - 2) : near + 1]
    totals = (gaps[None, :] >> ks[:, None]).sum(axis=1) + ks * np.uint64(len(gaps))
    k = int(ks[int(np.argmin(totals))])
    low = _pack((gaps & np.uint64((1 << k) - 1)).astype(np.uint32), k)
    high = gaps >> np.uint64(k)
    bits = np.ones(int(high.sum()) + len(gaps), np.uint8)
    bits[np.cumsum(high + np.uint64(1)).astype(np.int64) - 1] = 0
    return k, low, np.packbits(bits).tobytes()


def _gaps(values: np.ndarray) -> np.ndarray:
    """Sorted distinct ``values`` as gaps: the first from 0, each next less 1 (all >= 0)."""
    gaps = values.astype(np.uint64)
    gaps[1:] = np.diff(gaps) - np.uint64(1)
    return gaps


def _ungaps(low: np.ndarray, unary: np.ndarray, n: int, k: int) -> np.ndarray:
    """The values of :func:`_rice`'s code of their :func:`_gaps`: ``low`` bits and the
    ``unary`` bytes (as uint8)."""
    ends = np.flatnonzero(np.unpackbits(unary) == 0)[:n]
    high = np.diff(ends, prepend=-1).astype(np.uint64) - np.uint64(1)
    gaps = (high << np.uint64(k)) | low.astype(np.uint64)
    gaps[1:] += np.uint64(1)
    return np.cumsum(gaps, dtype=np.uint64).astype(np.uint32)


def pack_sorted(values: np.ndarray) -> bytes:
    """Sorted distinct uint32 ``values`` (a template model's log entry, its snapshot's blocks):
    their number, then their gaps Rice-coded (the parameter, the low bits, the unary part's
    length and the unary part)."""
    n = len(values)
    if not n:
        return b"\0"
    k, low, unary = _rice(_gaps(values))
    return b"".join((varint(n), bytes((k,)), low, varint(len(unary)), unary))


def unpack_sorted(data: bytes, pos: int = 0) -> tuple[np.ndarray, int]:
    """:func:`pack_sorted`'s values from ``data[pos:]``, and the position after them."""
    n, pos = read_varint(data, pos)
    if not n:
        return np.empty(0, np.uint32), pos
    k = data[pos]
    low, pos = _unpack(data, pos + 1, n, k)
    size, pos = read_varint(data, pos)
    unary = np.frombuffer(data, np.uint8, size, pos)
    return _ungaps(low, unary, n, k), pos + size


def encode_sketch(title: int, sketch: np.ndarray, blocks: np.ndarray, cover: int) -> bytes:
    """An original's title, cover and sketch in few bytes (bench/neardup_scale.py
    measures it): the title (4), the number of entries, how the cover is given (all hashes
    kept, or the last entry's: the only two a sketch can have; else 4 bytes follow), then the
    page's distinct blocks (4 bytes each, sorted), each entry's block as a digit of one number
    in base their count (log2(blocks) bits an entry, not its ceiling), and the sketch's gaps
    Rice-coded (the first hash counts as a gap from 0): its low bits packed, the rest in unary
    to the record's end."""
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
    k, low, unary = _rice(_gaps(sketch))
    table, index = np.unique(blocks, return_inverse=True)
    d = len(table)
    return b"".join((head, bytes((k,)), varint(d), table.astype(">u4").tobytes(),
                     _digits(index.ravel().tolist(), d, n), low, unary))


def _digits_size(d: int, n: int) -> int:
    return ((d**n - 1).bit_length() + 7) // 8 if d > 1 else 0


def _chunk(d: int) -> int:
    """Digits of base ``d`` that fit in 62 bits (the work is done that many at a time)."""
    return max(1, 62 // d.bit_length())


def _digits(values: list[int], d: int, n: int) -> bytes:
    """``values`` (each below ``d``) as one number in base ``d``, the first the lowest digit."""
    if d <= 1:
        return b""
    m = _chunk(d)
    x = np.zeros(-(-n // m) * m, np.int64)
    x[:n] = values
    powers = d ** np.arange(m, dtype=np.int64)
    chunks = (x.reshape(-1, m) * powers).sum(axis=1).tolist()
    big, v = d**m, 0
    for c in reversed(chunks):
        v = v * big + c
    return v.to_bytes(_digits_size(d, n), "big")


def _undigits(data: bytes, pos: int, d: int, n: int) -> tuple[np.ndarray, int]:
    if d <= 1:
        return np.zeros(n, np.int64), pos
    size = _digits_size(d, n)
    v = int.from_bytes(data[pos : pos + size], "big")
    m = _chunk(d)
    big = d**m
    chunks = []
    for _ in range(-(-n // m)):
        v, c = divmod(v, big)
        chunks.append(c)
    powers = d ** np.arange(m, dtype=np.int64)
    digits = (np.array(chunks, np.int64)[:, None] // powers) % d
    return digits.ravel()[:n], pos + size


def decode_sketch(data: bytes, offset: int = 0) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(title, sketch, blocks, cover) of :func:`encode_sketch`'s bytes from ``offset`` (to the
    end of ``data``)."""
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
    k = data[pos]
    d, pos = read_varint(data, pos + 1)
    table = np.frombuffer(data, ">u4", d, pos).astype(np.uint32)
    index, pos = _undigits(data, pos + 4 * d, d, n)
    low, pos = _unpack(data, pos, n, k)
    sketch = _ungaps(low, np.frombuffer(data, np.uint8, len(data) - pos, pos), n, k)
    if mode == _COVER_LAST:
        cover = int(sketch[-1])
    return title, sketch, table[index], cover


def encode_snapshot(pages: int, tlen: int, keys: np.ndarray, counts: np.ndarray) -> bytes:
    """A host's model right after a pruning: pages (4 bytes: a worker reads them first), template
    length, the blocks counted once and those counted more often (:func:`pack_sorted`), and the
    latter's counts less 2 in the bits the largest needs (none when every one is 2, as on most
    hosts right after a pruning)."""
    once = counts == 1
    extra = counts[~once].astype(np.uint32) - np.uint32(2)
    width = int(extra.max()).bit_length() if len(extra) else 0
    return b"".join((pages.to_bytes(4, "big"), tlen.to_bytes(4, "big"),
                     pack_sorted(keys[once]), pack_sorted(keys[~once]), bytes((width,)),
                     _pack(extra, width)))


def decode_snapshot(data: bytes) -> tuple[int, int, np.ndarray, np.ndarray]:
    pages = int.from_bytes(data[:4], "big")
    tlen = int.from_bytes(data[4:8], "big")
    once, pos = unpack_sorted(data, 8)
    more, pos = unpack_sorted(data, pos)
    extra, _ = _unpack(data, pos + 1, len(more), data[pos])
    counts = np.concatenate((np.ones(len(once), np.uint16),
                             (extra + np.uint32(2)).astype(np.uint16)))
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
