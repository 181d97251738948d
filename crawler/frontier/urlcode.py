"""URLs in few bytes, for the queued entries of the persistent and shared frontiers.

A normalized URL is ASCII: its characters are coded with a static Huffman code built from
generic letter frequencies, ``.html`` one symbol more (4.6-5.8 bits a character on links,
``bench/url_code.py``; no dictionary to train, to store or to share between workers). The code
is canonical, so the padding of the last byte (ones: a prefix of the longest code) is never a
character, and it is decoded a byte at a time. Numbers are LEB128 varints.

Where a link was found (the *referrer*, :attr:`crawler.frontier.api.Entry.referrer`) is stored
as a delta against the queued URL itself (:func:`pack_referrer`): how many leading characters
the two share, then the rest, coded. A page's links mostly point into its own site, and most
often near it in the tree (a sibling, a child, the parent), so a referrer of the same host never
stores the host, and one in the same folder stores only its file name. It is a delta rather
than a reference to a table of pages (an id resolved through the crawl database or a shared
hash): such a table needs a lifetime (when may a page's row go? when no queued URL names it any
more: a count kept by every add and every acknowledgement), a look-up per handed-out URL, and
a crawl database that is not always there; the delta needs nothing but the entry itself, is
dropped with it, and costs ~5-6 bytes on documentation links (``bench/referrer_bytes.py``).
"""

from __future__ import annotations

import heapq
from typing import Any

# Generic frequencies (per 100,000 characters) of the characters of URL paths: English letters
# as in running text, then the separators and digits of paths, upper case rare. Static: every
# entry of every crawl is coded with the same table, so nothing is stored or shared.
_WEIGHTS = {
    "e": 7100, "t": 5100, "a": 4600, "o": 4200, "i": 3900, "n": 3800, "s": 3500, "h": 3400,
    "r": 3400, "d": 2400, "l": 2200, "c": 1600, "u": 1600, "m": 1400, "w": 1300, "f": 1200,
    "g": 1100, "y": 1100, "p": 1100, "b": 800, "v": 600, "k": 450, "x": 150, "j": 90, "q": 60,
    "z": 40, "/": 9000, ".": 3000, "-": 2500, "_": 2000, "?": 150, "=": 300, "&": 150,
    "%": 300, "+": 60, "~": 20, ",": 30, ";": 20, ":": 30, "!": 5, "*": 5, "(": 10, ")": 10,
    "'": 5, "@": 5, "$": 5, "[": 5, "]": 5,
}
_WEIGHTS.update({d: 600 for d in "0123456789"})
_WEIGHTS.update({c.upper(): 120 for c in "abcdefghijklmnopqrstuvwxyz"})
# One symbol more than ASCII's: the web's commonest file name ending, coded as one character
# (~7 bits for the ~24 of its five). On link tails none of this table was fitted to
# (bench/url_code.py), with the padding below: 1.7 B less per link of this machine's
# /usr/share/doc HTML (19.0 B), 0.8 B less per link of the Rust docs to other sites (27.9 B).
_TOKEN = ".html"
_TOKEN_WEIGHT = 800


def _code_lengths(weights: dict[int, int]) -> dict[int, int]:
    """Huffman code lengths of ``weights``' symbols; ties broken by symbol, so every process
    builds the same code."""
    heap: list[tuple[int, int, Any]] = [(w, s, s) for s, w in sorted(weights.items())]
    heapq.heapify(heap)
    order = 1 << 16
    while len(heap) > 1:
        w1, _, a = heapq.heappop(heap)
        w2, _, b = heapq.heappop(heap)
        heapq.heappush(heap, (w1 + w2, order, (a, b)))
        order += 1
    lengths: dict[int, int] = {}

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, int):
            lengths[node] = max(depth, 1)
        else:
            walk(node[0], depth + 1)
            walk(node[1], depth + 1)

    walk(heap[0][2], 0)
    return lengths


def _canonical(lengths: dict[int, int]) -> dict[int, str]:
    """The canonical code of these lengths (shorter codes first, then by symbol): the last,
    longest code is all ones, so up to 7 ones after the last code (the padding of the last
    byte) are never a whole code when it is 8 bits or longer."""
    codes: dict[int, str] = {}
    code = prev = 0
    for sym, n in sorted(lengths.items(), key=lambda item: (item[1], item[0])):
        code <<= n - prev
        codes[sym] = format(code, f"0{n}b")
        code += 1
        prev = n
    return codes


_CODES = _canonical(_code_lengths(
    {**{i: _WEIGHTS.get(chr(i), 1) for i in range(128)}, 128: _TOKEN_WEIGHT}
))
assert max(map(len, _CODES.values())) >= 8, "the padding must never be a whole code"
_ENCODE = [_CODES[i] for i in range(129)]  # ordinal -> its bits (128: _TOKEN)


def _decoding_table() -> tuple[list[tuple[str, int]], frozenset[int]]:
    """The decoder as a state machine over bytes: a state is a node of the code's tree (a
    prefix of a code; 0 the root), and ``table[state + byte]`` is what the byte completes
    from there (the characters) and the state it leaves (times 256). And the states the
    padding may leave: the root, or up to 7 ones into the all-ones code."""
    symbol = {code: _TOKEN if s == 128 else chr(s) for s, code in _CODES.items()}
    prefixes = sorted({c[:i] for c in _CODES.values() for i in range(len(c))}, key=len)
    state = {p: n << 8 for n, p in enumerate(prefixes)}
    table: list[tuple[str, int]] = []
    for prefix in prefixes:
        for byte in range(256):
            out, at = [], prefix
            for bit in format(byte, "08b"):
                at += bit
                sym = symbol.get(at)
                if sym is not None:
                    out.append(sym)
                    at = ""
            table.append(("".join(out), state[at]))
    return table, frozenset(state["1" * n] for n in range(8))


_TABLE, _PADDED = _decoding_table()


def huffman_encode(text: str) -> bytes:
    """``text`` (ASCII) in the static code, in big-endian bytes, the last one padded with ones
    (a prefix of the longest code, never a whole one)."""
    codes = _ENCODE
    bits = "".join([codes[c] for c in text.replace(_TOKEN, "\x80").encode("latin-1")])
    n = -(-len(bits) // 8)
    return int(bits + "1" * (n * 8 - len(bits)), 2).to_bytes(n, "big") if bits else b""


def huffman_decode(data: bytes) -> str:
    table, state, out = _TABLE, 0, ""
    for byte in data:
        text, state = table[state + byte]
        out += text
    if state not in _PADDED:
        raise ValueError("not a coded URL tail")
    return out


_BYTE = [bytes((n,)) for n in range(0x80)]  # the one-byte varints (most: every entry has one)


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a LEB128 varint: 1 byte under 128, 2 under 16,384."""
    if 0 <= n < 0x80:
        return _BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(blob: bytes, i: int) -> tuple[int, int]:
    """The varint at ``blob[i]`` and the offset after it."""
    n = shift = 0
    while True:
        b = blob[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def shared_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def pack_referrer(referrer: str, url: str) -> bytes:
    """``referrer`` as a delta against ``url`` (the URL it led to): a varint of the characters
    they share at the start, a varint of the rest's byte length (times two, plus one when the
    rest is Huffman-coded rather than UTF-8), the rest. See the module docstring."""
    shared = shared_prefix(referrer, url)
    rest = referrer[shared:]
    if rest.isascii():
        body = huffman_encode(rest)
        return varint(shared) + varint(len(body) << 1 | 1) + body
    body = rest.encode("utf-8", "surrogatepass")
    return varint(shared) + varint(len(body) << 1) + body


def unpack_referrer(blob: bytes, i: int, url: str) -> tuple[str, int]:
    """The referrer :func:`pack_referrer` stored at ``blob[i]`` against ``url``, and the offset
    after it."""
    shared, i = read_varint(blob, i)
    size, i = read_varint(blob, i)
    n = size >> 1
    body = blob[i : i + n]
    rest = huffman_decode(body) if size & 1 else body.decode("utf-8", "surrogatepass")
    return url[:shared] + rest, i + n
