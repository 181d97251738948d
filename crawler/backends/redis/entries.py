"""A queued URL as the Redis frontier keeps it: a few bytes of flags and the URL's tail, never
pickle (what comes out of a shared Redis is data, not code).

The entry never names its host, only its number (a partition's host number, its field in the
hosts HASH, :mod:`crawler.backends.redis.queue_store`; a letter's index into its table of
hosts, :mod:`crawler.backends.redis.letters`); nor does it repeat ``https://<host>/`` or
``http://<host>/`` when the URL starts with it (the usual case); nor its priority when it sits
in the front queue of that priority (the reader knows which queue it read); nor its depth when
that is its priority (the depth order's usual case); nor spend a byte per character of the
path: a normalized URL is ASCII, and its characters are coded with a static Huffman code
(:mod:`crawler.frontier.urlcode`). An entry is:

====================  ========================================================================
varint                ``host number << 4 | flags``: bit 0 the URL is ``http://<host>/`` +
                      the tail (else ``https://<host>/`` + the tail), bit 1 cash follows,
                      bit 2 the depth follows (else it is the priority), bit 3 a flags byte
                      follows (else none of what it says is there)
1 byte                when bit 3 says so: bit 0 the priority follows (else it is the caller's
                      queue), bit 1 a referrer, bit 2 a seed (the payload :data:`SEED`, no
                      bytes), bit 3 a payload, bit 4 a crawl policy, bit 5 a host's first
                      request (its robots.txt), bit 6 a seen key, bit 7 a second flags byte
1 byte                when bit 7 says so: bit 0 the tail is the whole URL (a port, a user,
                      no path), bit 1 the tail is UTF-8 (else Huffman-coded)
varint                the priority
varint                the depth
3 bytes               OPIC cash (:attr:`crawler.frontier.api.Entry.cash`): a float32's top
                      24 bits, rounded (1.5e-5 relative: a front queue is a factor of 2)
varint + bytes        the crawl policy (UTF-8)
varint + bytes        the payload (msgpack)
8 bytes               the seen key (:attr:`crawler.frontier.api.Entry.key`), only when the
                      URL's canonical form is not the URL itself (a sorted query, ...)
referrer              the page the URL was found on, as a delta against the URL
                      (:func:`crawler.frontier.urlcode.pack_referrer`)
the rest              the tail: path and query after the host's ``/`` (or the whole URL)
====================  ========================================================================

Each field is there only when its flag says so, in this order. A seed of the depth order is
two bytes and its coded tail (under 1,024 hosts a partition); under OPIC three more of cash and
one of depth. The URL is the request URL (the link as found, made safe: ASCII), so the tail is
nearly always Huffman-coded (a letter's link's is UTF-8: see
:func:`pack_entry`); its seen key is stored only when it cannot be computed from it. Sizes:
docs/benchmarks/history.md (layout 7).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack

from crawler.frontier.api import SEED, Entry
from crawler.frontier.urlcode import (
    huffman_decode,
    huffman_encode,
    pack_referrer,
    read_varint,
    unpack_referrer,
    varint,
)

# the head's flags
_HTTP, _CASH, _DEPTH, _EXT = 1, 2, 4, 8
_HEAD_BITS = 4
# the flags byte's
_PRIO, _REFERRER, _SEED, _PAYLOAD, _POLICY, _FIRST, _KEY, _MORE = 1, 2, 4, 8, 16, 32, 64, 128
# the second flags byte's
_WHOLE, _RAW = 1, 2
_F32 = struct.Struct(">f")
_U32 = struct.Struct(">I")
_MAX_CASH = 3.0e38  # a float32's range


# Tails coded or decoded lately -> their coded bytes (a tail has exactly one code). A tail
# recurs: on many hosts (``index.html``, the paths of a documentation tree: 58 % of the tails a
# worker of ``bench/partition_costs.py`` coded in its pages were coded before), and in an
# entry read and packed again unchanged (a front queue's entry moved to its host's back
# queue). Its code is then taken from here, not computed again (~20k instructions for a
# 48-character tail, a look-up ~0.1k). When full, all forgotten.
CODED_TAILS = 16_384
_CODED: dict[str, bytes] = {}


def pack_cash(cash: float) -> bytes:
    """``cash`` in 3 bytes: the top 24 bits of its float32 (sign, exponent, 15 bits of
    mantissa), rounded; a positive amount never becomes 0."""
    bits = _U32.unpack(_F32.pack(max(-_MAX_CASH, min(cash, _MAX_CASH))))[0]
    top = (bits + 0x80) >> 8
    if top & 0x7FFFFF == 0 and cash:  # rounded to 0 (or to inf): the nearest nonzero
        top = (bits >> 8) or 1
    return top.to_bytes(3, "big")


def unpack_cash(blob: bytes, i: int) -> float:
    return _F32.unpack(blob[i : i + 3] + b"\0")[0]


def _split(url: str, host: str) -> tuple[int, str]:
    """What of ``url`` need not be stored: ``https://<host>/`` or ``http://<host>/`` when the
    URL starts with it (no port, no user); -1: nothing, the tail is the whole URL."""
    if url.startswith("https://"):
        at, form = 8, 0
    elif url.startswith("http://"):
        at, form = 7, _HTTP
    else:
        return -1, url
    end = at + len(host)
    if url.startswith(host, at) and url.startswith("/", end):
        return form, url[end + 1 :]
    return -1, url


def pack_entry(
    entry: Entry, hid: int = 0, *, queue: int = -1, first: bool = False, letter: bool = False
) -> bytes:
    """The entry's bytes (see the module docstring). ``hid``: its host's number for the reader.
    ``queue``: the front queue it goes to, whose reader knows its priority (the entry's
    priority must be it); -1: the priority is stored. ``first``: a host's first request.
    ``letter``: a letter's link (:mod:`crawler.backends.redis.letters`), which carries the cash,
    the crawl policy and the referrer itself, whose priority is ``queue`` (the letter's clamp
    of it), and whose tail is UTF-8: a letter lives seconds in its inbox, and coding a tail
    costs its sender as much as decoding it costs the owner (~10-20k instructions each),
    where the owner codes only the links it queues, not those it has seen."""
    form, tail = _split(entry.url, entry.host)
    head = hid << _HEAD_BITS
    ext = more = 0
    if form < 0:
        more = _WHOLE
    else:
        head |= form
    if letter or not tail.isascii():
        body = tail.encode("utf-8", "surrogatepass")
        more |= _RAW
    elif (body := _CODED.get(tail)) is None:
        body = huffman_encode(tail)
        if len(_CODED) >= CODED_TAILS:
            _CODED.clear()
        _CODED[tail] = body
    priority, depth = entry.priority, entry.depth
    if queue < 0:
        ext = _PRIO
        if priority < 0:
            priority = 0
    elif queue != priority:
        if not letter:
            raise ValueError(f"an entry of priority {priority} in front queue {queue}")
        priority = queue
    if depth != priority:
        head |= _DEPTH
    cash = 0.0 if letter else entry.cash
    if cash:
        head |= _CASH
    policy = "" if letter else entry.policy
    payload, key = entry.payload, entry.key
    referrer = "" if letter else entry.referrer
    if payload is not None:
        ext |= _SEED if payload == SEED else _PAYLOAD
    if policy:
        ext |= _POLICY
    if referrer:
        ext |= _REFERRER
    if key:
        ext |= _KEY
    if first:
        ext |= _FIRST
    if more:
        ext |= _MORE
    if not ext:
        if not head & (_DEPTH | _CASH):
            return varint(head) + body  # a front entry of the depth order: the common case
        parts = [varint(head)]
    else:
        parts = [varint(head | _EXT), bytes((ext, more) if more else (ext,))]
        if ext & _PRIO:
            parts.append(varint(priority))
    if head & _DEPTH:
        parts.append(varint(depth))
    if head & _CASH:
        parts.append(pack_cash(cash))
    if ext & _POLICY:
        raw = policy.encode()
        parts += [varint(len(raw)), raw]
    if ext & _PAYLOAD:
        try:
            packed = msgpack.packb(payload, use_bin_type=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"Entry.payload must be plain data (bytes, str, numbers): {exc}"
            ) from None
        parts += [varint(len(packed)), packed]
    if key:
        parts.append(key.to_bytes(8, "big", signed=True))
    if referrer:
        parts.append(pack_referrer(referrer, entry.url))
    parts.append(body)
    return b"".join(parts)


def is_first(blob: bytes) -> bool:
    """Whether the entry :func:`pack_entry` stored as ``blob`` is a host's first request."""
    head, i = read_varint(blob, 0)
    return bool(head & _EXT and blob[i] & _FIRST)


def stored_priority(blob: bytes) -> int:
    """The priority stored in ``blob`` (an entry packed outside a front queue), read without
    decoding the rest; -1 when it has none (a front queue's entry: the queue's)."""
    head, i = read_varint(blob, 0)
    if not head & _EXT or not blob[i] & _PRIO:
        return -1
    return read_varint(blob, i + (2 if blob[i] & _MORE else 1))[0]


def unpack_entry(blob: bytes, host_of: Mapping[int, str] | Sequence[str], queue: int = 0) -> Entry:
    """The entry :func:`pack_entry` stored as ``blob``; ``host_of``: host number -> name;
    ``queue``: the front queue it was read from (its priority unless stored)."""
    head, i = read_varint(blob, 0)
    host = host_of[head >> _HEAD_BITS]
    priority = queue
    ext = more = 0
    if head & _EXT:
        ext = blob[i]
        i += 1
        if ext & _MORE:
            more = blob[i]
            i += 1
        if ext & _PRIO:
            priority, i = read_varint(blob, i)
    depth = priority
    if head & _DEPTH:
        depth, i = read_varint(blob, i)
    cash = 0.0
    if head & _CASH:
        cash = unpack_cash(blob, i)
        i += 3
    policy = ""
    payload: Any = None
    key = 0
    referred_at = -1
    if ext:
        if ext & _POLICY:
            n, i = read_varint(blob, i)
            policy = blob[i : i + n].decode()
            i += n
        if ext & _PAYLOAD:
            n, i = read_varint(blob, i)
            payload = msgpack.unpackb(blob[i : i + n], raw=False, strict_map_key=False)
            i += n
        elif ext & _SEED:
            payload = SEED
        if ext & _KEY:
            key = int.from_bytes(blob[i : i + 8], "big", signed=True)
            i += 8
        if ext & _REFERRER:
            referred_at = i
            _, i = read_varint(blob, i)
            n, i = read_varint(blob, i)
            i += n >> 1
    body = blob[i:]
    if more & _RAW:
        tail = body.decode("utf-8", "surrogatepass")
    else:
        tail = huffman_decode(body)
        if len(_CODED) >= CODED_TAILS:
            _CODED.clear()
        _CODED[tail] = body
    if more & _WHOLE:
        url = tail
    elif head & _HTTP:
        url = "http://" + host + "/" + tail
    else:
        url = "https://" + host + "/" + tail
    referrer = unpack_referrer(blob, referred_at, url)[0] if referred_at >= 0 else ""
    return Entry(url, host, priority, depth, payload, 0, cash, policy, referrer, key)
