"""Word shingles of normalized text, hashed in bulk with numpy.

Hashing each shingle in Python (``hashlib.sha1`` per shingle, datasketch's default) costs more
than the whole MinHash of a page, so the shingles of a page are hashed in one vectorized pass:
a polynomial hash over the UTF-8 bytes with prefix sums (every shingle is a substring of the
normalized text, whose words are separated by exactly one space), then the MurmurHash3 64-bit
finalizer. The result is stable across processes and machines (no ``PYTHONHASHSEED``), which a
shared near-duplicate index needs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shingle_hashes", "shingle_hashes32", "shingle_set", "shingle_texts"]

_BASE = np.uint64(0x100000001B3)  # odd, so invertible modulo 2**64
_BASE_INV = np.uint64(pow(int(_BASE), -1, 1 << 64))
_SPACE = 32

# BASE**i and BASE**-i for any i < n come from two small tables: BASE**(256 q + r) =
# HIGH**q * BASE**r, HIGH = BASE**256. Full tables of every power up to a page's length (they
# were cached up to 64 KB of text: 1 MB pinned in every process, the near-duplicate state of
# ~700 pages) are gone; expanding the two per call costs ~15 us on a documentation page's text.
_STEP = 256


def _low_tables() -> tuple[np.ndarray, np.ndarray, np.uint64, np.uint64]:
    with np.errstate(over="ignore"):
        low = np.cumprod(np.full(_STEP, _BASE), dtype=np.uint64)  # BASE**1 .. BASE**256
        low_inv = np.cumprod(np.full(_STEP, _BASE_INV), dtype=np.uint64)
    return (np.concatenate(([np.uint64(1)], low[:-1])),
            np.concatenate(([np.uint64(1)], low_inv[:-1])), low[-1], low_inv[-1])


_LOW, _LOW_INV, _HIGH, _HIGH_INV = _low_tables()


def _high(count: int, step: np.uint64) -> np.ndarray:
    """step**q for q < count."""
    with np.errstate(over="ignore"):
        return np.concatenate(
            ([np.uint64(1)], np.cumprod(np.full(count - 1, step), dtype=np.uint64))
        )


def _powers_upto(n: int) -> np.ndarray:
    """BASE**i modulo 2**64 for i < n."""
    high = _high(-(-n // _STEP), _HIGH)
    with np.errstate(over="ignore"):
        return np.multiply.outer(high, _LOW).ravel()[:n]


def _inverse_powers_at(at: np.ndarray) -> np.ndarray:
    """BASE**-i modulo 2**64 for each i in ``at`` (sorted, non-negative)."""
    high = _high(int(at[-1]) // _STEP + 1, _HIGH_INV) if len(at) else _high(1, _HIGH_INV)
    with np.errstate(over="ignore"):
        return high[at // _STEP] * _LOW_INV[at % _STEP]


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def shingle_hashes(normalized: str, size: int) -> np.ndarray:
    """64-bit hashes of the ``size``-word shingles of normalized text (one per position).

    A text shorter than ``size`` words yields one shingle of all its words, so short pages still
    have a signature; empty text yields none.
    """
    if not normalized:
        return np.empty(0, dtype=np.uint64)
    data = np.frombuffer(normalized.encode("utf-8"), dtype=np.uint8)
    n = len(data)
    spaces = np.flatnonzero(data == _SPACE)
    starts = np.empty(len(spaces) + 1, dtype=np.intp)
    starts[0] = 0
    starts[1:] = spaces + 1
    ends = np.empty(len(spaces) + 1, dtype=np.intp)
    ends[:-1] = spaces
    ends[-1] = n
    words = len(starts)
    k = min(size, words)
    count = words - k + 1
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(data.astype(np.uint64) * _powers_upto(n), out=prefix[1:])
        first = starts[:count]
        last = ends[k - 1 :]
        h = (prefix[last] - prefix[first]) * _inverse_powers_at(first)
        # Mix in the length so that shingles whose bytes are a prefix of each other differ.
        h = h + (last - first).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return _fmix64(h)


def shingle_hashes32(normalized: str, size: int) -> np.ndarray:
    """The high 32 bits of :func:`shingle_hashes`: the input datasketch's affine32 MinHash takes."""
    return (shingle_hashes(normalized, size) >> np.uint64(32)).astype(np.uint32)


def shingle_set(normalized: str, size: int) -> set[int]:
    """The set of 64-bit shingle hashes, for an exact Jaccard similarity (collisions ~2**-64)."""
    return set(shingle_hashes(normalized, size).tolist())


def shingle_texts(normalized: str, size: int) -> list[str]:
    """The shingles themselves, for humans (the explain command) and tests."""
    words = normalized.split()
    if not words:
        return []
    k = min(size, len(words))
    return [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]
