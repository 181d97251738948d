"""A queued URL as the Redis frontier keeps it: a few bytes of flags and the URL's tail, never
pickle (what comes out of a shared Redis is data, not code).

A back queue (``{crawl}:q:<host>``) holds the URLs of one host, so its entries need not name
the host; nor repeat ``https://<host>`` or ``http://<host>`` when the URL starts with it (the
usual case); nor spend a byte per character of the path: a normalized URL is ASCII, and its
characters are coded with a static Huffman code built from generic letter frequencies (about
5 bits a character on documentation links, no dictionary to train or to share). An entry is:

====================  ========================================================================
1 byte                flags: bits 0-1 what the tail lacks (0 ``https://<host>``, 1
                      ``http://<host>``, 2 nothing: the whole URL is there), bit 2 a payload
                      follows, bit 3 a seed (the payload :data:`SEED`, no bytes), bit 4 the tail
                      is Huffman-coded (else UTF-8), bits 5-7 the priority (7: a varint follows)
varint                depth
varint                priority, when bits 5-7 are 7
varint + bytes        the payload (msgpack), when bit 2 is set
the rest              the tail: path and query (or the whole URL)
====================  ========================================================================

A front queue (``{crawl}:f:<p>``) holds URLs of every host: the script that queues one puts
the host's number (a varint the scripts give each host once, ``{crawl}:hid`` maps it back to
the name) before the entry, and the refill takes it off when the URL moves to its host's back
queue. Neither the client nor the scripts decode more than that prefix: the host goes to the
scripts as an argument and comes back with each lease. ~30 B a URL in a front queue on
documentation links (``bench/seeds_bulk.py``), where a msgpack host + ``[url, priority, depth,
payload]`` took ~60-70.

Crawls stored with the msgpack entries (layout 1) are refused by name, not read
(:data:`crawler.backends.redis.frontier.LAYOUT`).
"""

from __future__ import annotations

import heapq
from typing import Any

import msgpack

from crawler.frontier.api import SEED, Entry

_HTTPS, _HTTP, _WHOLE = 0, 1, 2
_PAYLOAD, _SEED, _CODED = 4, 8, 16
_PRIO_SHIFT, _PRIO_ESCAPE = 5, 7

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


def _huffman_codes(weights: dict[int, int]) -> dict[int, str]:
    """Huffman codes (bit strings) of ``weights``' symbols; ties broken by symbol, so every
    process builds the same code."""
    heap: list[tuple[int, int, Any]] = [(w, s, s) for s, w in sorted(weights.items())]
    heapq.heapify(heap)
    order = 256
    while len(heap) > 1:
        w1, _, a = heapq.heappop(heap)
        w2, _, b = heapq.heappop(heap)
        heapq.heappush(heap, (w1 + w2, order, (a, b)))
        order += 1
    codes: dict[int, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, int):
            codes[node] = prefix or "0"
        else:
            walk(node[0], prefix + "0")
            walk(node[1], prefix + "1")

    walk(heap[0][2], "")
    return codes


_CODES = _huffman_codes({i: _WEIGHTS.get(chr(i), 1) for i in range(128)})
_ENCODE = _CODES  # for str.translate: character -> its bits
_PEEK = 12  # bits looked at once when decoding; longer codes are found one bit at a time


def _decoding_tables() -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """Every ``_PEEK``-bit string that starts with a short code -> (its character, the code's
    length); the longer codes -> their character."""
    short: dict[str, tuple[str, int]] = {}
    long_: dict[str, str] = {}
    for sym, code in _CODES.items():
        if len(code) > _PEEK:
            long_[code] = chr(sym)
            continue
        pad = _PEEK - len(code)
        for i in range(1 << pad):
            short[code + (format(i, f"0{pad}b") if pad else "")] = (chr(sym), len(code))
    return short, long_


_SHORT, _LONG = _decoding_tables()
_LONGEST = max(len(c) for c in _CODES.values())


def huffman_encode(text: str) -> bytes:
    """``text`` (ASCII) in the static code: a 1 bit, then the codes, in big-endian bytes (the
    leading 1 keeps the leading zeros of the codes)."""
    bits = "1" + text.translate(_ENCODE)
    return int(bits, 2).to_bytes((len(bits) + 7) // 8, "big")


def huffman_decode(data: bytes) -> str:
    bits = bin(int.from_bytes(data, "big"))[3:]  # less "0b1"
    end = len(bits)
    bits += "0" * _PEEK
    out = []
    i = 0
    short, long_ = _SHORT, _LONG
    while i < end:
        hit = short.get(bits[i : i + _PEEK])
        if hit is not None:
            out.append(hit[0])
            i += hit[1]
            continue
        for n in range(_PEEK + 1, _LONGEST + 1):
            sym = long_.get(bits[i : i + n])
            if sym is not None:
                out.append(sym)
                i += n
                break
        else:
            raise ValueError("not a coded URL tail")
    return "".join(out)


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(blob: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = blob[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def _split(url: str, host: str) -> tuple[int, str]:
    """What of ``url`` need not be stored: ``https://<host>`` or ``http://<host>`` when the URL
    starts with it and goes on with its path, query or nothing (no port, no user)."""
    for form, scheme in ((_HTTPS, "https://"), (_HTTP, "http://")):
        n = len(scheme) + len(host)
        if (
            url.startswith(scheme)
            and url.startswith(host, len(scheme))
            and (len(url) == n or url[n] in "/?")
        ):
            return form, url[n:]
    return _WHOLE, url


def pack_entry(entry: Entry, priority: int) -> bytes:
    """The entry's bytes in a back queue (see the module docstring). ``priority``: the front
    queue it goes to (the entry's own, clamped)."""
    form, tail = _split(entry.url, entry.host)
    flags = form
    payload = entry.payload
    if payload is not None:
        if payload == SEED:
            flags |= _SEED
        else:
            flags |= _PAYLOAD
    if tail.isascii():
        flags |= _CODED
        body = huffman_encode(tail)
    else:
        body = tail.encode("utf-8", "surrogatepass")
    depth = entry.depth
    if priority < _PRIO_ESCAPE and depth < 0x80 and not flags & _PAYLOAD:
        return bytes((flags | priority << _PRIO_SHIFT, depth)) + body  # the common case
    parts = []
    if priority < _PRIO_ESCAPE:
        parts.append(bytes((flags | priority << _PRIO_SHIFT,)) + _varint(depth))
    else:
        parts.append(bytes((flags | _PRIO_ESCAPE << _PRIO_SHIFT,)) + _varint(depth))
        parts.append(_varint(priority))
    if flags & _PAYLOAD:
        try:
            packed = msgpack.packb(payload, use_bin_type=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"Entry.payload must be plain data (bytes, str, numbers): {exc}"
            ) from None
        parts.append(_varint(len(packed)) + packed)
    parts.append(body)
    return b"".join(parts)


def unpack_entry(blob: bytes, host: str) -> Entry:
    """The entry of ``host`` that :func:`pack_entry` stored as ``blob``."""
    flags = blob[0]
    depth, i = _read_varint(blob, 1)
    priority = flags >> _PRIO_SHIFT
    if priority == _PRIO_ESCAPE:
        priority, i = _read_varint(blob, i)
    payload: Any = None
    if flags & _PAYLOAD:
        size, i = _read_varint(blob, i)
        payload = msgpack.unpackb(blob[i : i + size], raw=False, strict_map_key=False)
        i += size
    elif flags & _SEED:
        payload = SEED
    body = blob[i:]
    tail = huffman_decode(body) if flags & _CODED else body.decode("utf-8", "surrogatepass")
    form = flags & 3
    if form == _HTTPS:
        url = "https://" + host + tail
    elif form == _HTTP:
        url = "http://" + host + tail
    else:
        url = tail
    return Entry(url=url, host=host, priority=priority, depth=depth, payload=payload)


def host_number(prefixed: bytes) -> tuple[bytes, bytes]:
    """A front-queue element split into the host's number (as stored) and the entry."""
    _, i = _read_varint(prefixed, 0)
    return prefixed[:i], prefixed[i:]
