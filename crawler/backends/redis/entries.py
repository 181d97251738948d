"""A queued URL as the Redis frontier keeps it: a few bytes of flags and the URL's tail, never
pickle (what comes out of a shared Redis is data, not code).

The entry never names its host (the queue store puts the host's number before it,
:mod:`crawler.backends.redis.queue_store`; a letter names it once for its links,
:mod:`crawler.backends.redis.mail`); nor does it repeat ``https://<host>`` or ``http://<host>``
when the URL starts with it (the usual case); nor spend a byte per character of the path: a
normalized URL is ASCII, and its characters are coded with a static Huffman code built from
generic letter frequencies (about 5 bits a character on documentation links, no dictionary to
train or to share; :mod:`crawler.frontier.urlcode`). An entry is:

====================  ========================================================================
1 byte                flags: bits 0-1 what the tail lacks (0 ``https://<host>``, 1
                      ``http://<host>``, 2 nothing: the whole URL is there; 3: a second byte
                      follows), bit 2 a payload follows, bit 3 a seed (the payload
                      :data:`SEED`, no bytes), bit 4 the tail is Huffman-coded (else UTF-8),
                      bits 5-7 the priority (7: a varint follows)
1 byte                only when bits 0-1 are 3: bits 0-1 what the tail lacks, as above; bit 2
                      a referrer follows; bit 3 a seen key follows
varint                depth
varint                priority, when bits 5-7 are 7
varint + bytes        the payload (msgpack), when bit 2 is set
8 bytes               the seen key (:attr:`crawler.frontier.api.Entry.key`), only when the
                      URL's canonical form is not the URL itself (a sorted query, ...)
referrer              only when the second byte says so: the page the URL was found on, as a
                      delta against the URL (:func:`crawler.frontier.urlcode.pack_referrer`:
                      the characters both share at the start, then the rest coded)
the rest              the tail: path and query (or the whole URL)
====================  ========================================================================

The URL is the request URL (the link as found, made safe: ASCII), so the tail is nearly always
Huffman-coded; its seen key is stored only when it cannot be computed from it.

A link's referrer adds ~12 B (``bench/referrer_bytes.py``). A crawl stored with another layout
is refused by name (:data:`crawler.backends.redis.frontier_store.LAYOUT`), not read.
"""

from __future__ import annotations

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

_HTTPS, _HTTP, _WHOLE, _MORE = 0, 1, 2, 3
_HAS_REFERRER, _HAS_KEY = 4, 8  # in the second byte
_PAYLOAD, _SEED, _CODED = 4, 8, 16
_PRIO_SHIFT, _PRIO_ESCAPE = 5, 7


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
    referrer, key = entry.referrer, entry.key
    plain = not flags & _PAYLOAD and not referrer and not key
    if priority < _PRIO_ESCAPE and depth < 0x80 and plain:
        return bytes((flags | priority << _PRIO_SHIFT, depth)) + body  # the common case
    if referrer or key:  # bits 0-1 say "a second byte", which says what the tail lacks
        flags = flags & ~3 | _MORE
        more = form | (_HAS_REFERRER if referrer else 0) | (_HAS_KEY if key else 0)
        head = bytes((flags | min(priority, _PRIO_ESCAPE) << _PRIO_SHIFT, more))
    else:
        head = bytes((flags | min(priority, _PRIO_ESCAPE) << _PRIO_SHIFT,))
    parts = [head, varint(depth)]
    if priority >= _PRIO_ESCAPE:
        parts.append(varint(priority))
    if flags & _PAYLOAD:
        try:
            packed = msgpack.packb(payload, use_bin_type=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"Entry.payload must be plain data (bytes, str, numbers): {exc}"
            ) from None
        parts.append(varint(len(packed)) + packed)
    if key:
        parts.append(key.to_bytes(8, "big", signed=True))
    if referrer:
        parts.append(pack_referrer(referrer, entry.url))
    parts.append(body)
    return b"".join(parts)


def unpack_entry(blob: bytes, host: str) -> Entry:
    """The entry of ``host`` that :func:`pack_entry` stored as ``blob``."""
    flags = blob[0]
    form = flags & 3
    more = 0
    i = 1
    if form == _MORE:
        more = blob[1]
        form = more & 3
        i = 2
    depth, i = read_varint(blob, i)
    priority = flags >> _PRIO_SHIFT
    if priority == _PRIO_ESCAPE:
        priority, i = read_varint(blob, i)
    payload: Any = None
    if flags & _PAYLOAD:
        size, i = read_varint(blob, i)
        payload = msgpack.unpackb(blob[i : i + size], raw=False, strict_map_key=False)
        i += size
    elif flags & _SEED:
        payload = SEED
    key = 0
    if more & _HAS_KEY:
        key = int.from_bytes(blob[i : i + 8], "big", signed=True)
        i += 8
    referred_at = -1
    if more & _HAS_REFERRER:
        referred_at = i
        _, i = read_varint(blob, i)
        size, i = read_varint(blob, i)
        i += size >> 1
    body = blob[i:]
    tail = huffman_decode(body) if flags & _CODED else body.decode("utf-8", "surrogatepass")
    if form == _HTTPS:
        url = "https://" + host + tail
    elif form == _HTTP:
        url = "http://" + host + tail
    else:
        url = tail
    referrer = unpack_referrer(blob, referred_at, url)[0] if referred_at >= 0 else ""
    return Entry(
        url=url, host=host, priority=priority, depth=depth, payload=payload, referrer=referrer,
        key=key,
    )

