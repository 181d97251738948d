"""A queued URL as the Redis frontier keeps it: msgpack, never pickle (what comes out of a
shared Redis is data, not code): the host, then ``[url, priority, depth, payload]``, about 80
bytes for a 50-character URL in a LIST."""

from __future__ import annotations

import msgpack

from crawler.frontier.api import Entry


def pack_entry(entry: Entry, priority: int) -> bytes:
    """msgpack, never pickle: what comes out of a shared Redis is data, not code.

    Two msgpack objects back to back: the host, then ``[url, priority, depth, payload]``. The
    scripts decode only the first (``cmsgpack.unpack_one``): Redis's cmsgpack cannot decode
    msgpack's bin type, which a bytes payload needs."""
    try:
        rest = msgpack.packb([entry.url, priority, entry.depth, entry.payload], use_bin_type=True)
    except TypeError as exc:
        raise TypeError(f"Entry.payload must be plain data (bytes, str, numbers): {exc}") from None
    return msgpack.packb(entry.host) + rest


def unpack_entry(blob: bytes) -> Entry:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(blob)
    host = unpacker.unpack()
    url, priority, depth, payload = unpacker.unpack()
    return Entry(url=url, host=host, priority=priority, depth=depth, payload=payload)
