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

_pow: np.ndarray = np.ones(1, dtype=np.uint64)
_inv: np.ndarray = np.ones(1, dtype=np.uint64)


# Powers are cached for texts up to this many bytes (2 x 512 KB of tables); a longer text (rarer,
# and costly anyway) gets its own tables, so one huge page does not pin 16 MB for good.
_CACHED_POWERS = 1 << 16


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """BASE**i and BASE**-i modulo 2**64 for i < n, grown geometrically and cached."""
    global _pow, _inv
    if len(_pow) < n:
        size = max(n, 2 * len(_pow), 1 << 14)
        if n > _CACHED_POWERS:
            return _power_tables(n)
        _pow, _inv = _power_tables(min(size, _CACHED_POWERS))
    return _pow, _inv


def _power_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        pw = np.concatenate(
            ([np.uint64(1)], np.cumprod(np.full(size - 1, _BASE), dtype=np.uint64))
        )
        inv = np.concatenate(
            ([np.uint64(1)], np.cumprod(np.full(size - 1, _BASE_INV), dtype=np.uint64))
        )
    return pw, inv


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
    pw, inv = _powers(n)
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
        np.cumsum(data.astype(np.uint64) * pw[:n], out=prefix[1:])
        first = starts[:count]
        last = ends[k - 1 :]
        h = (prefix[last] - prefix[first]) * inv[first]
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
