"""What a link costs in a partition's inbox (``crawler.backends.redis.mail``): the bytes of a
letter per link it carries, and what the inbox stream holds in Redis per link until the owner
acknowledges it.

Run from the project root::

    .venv/bin/python bench/letter_bytes.py                    # 20,000 links, <= 2,000 a host
    .venv/bin/python bench/letter_bytes.py --links 50000 --per-host 500

The links are real: those ``bench/referrer_bytes.py`` finds in the HTML files of /usr/share/doc
and the Rust toolchain's docs (one tree per host, crawled breadth-first, each link queued the
first time it is met, with its page as referrer). Each page's links make one letter, as a worker
sends them when they all belong to one other partition; each seed is a letter of its own. Under
depth order the links carry no cash; under OPIC each carries its page's cash split over its
links (1 / links of the page). A letter of one link is the other end: a page with one link to
another partition (the host name and the letter's headers are its own).

Printed: links, letters, links per letter, bytes per link of the packed entries alone
(``pack_entry``), of page letters (depth, OPIC), of single-link letters, and the inbox stream's
``MEMORY USAGE`` per link with each kind of letter (its own ``redis-server`` on a free port).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.referrer_bytes import crawl_links  # noqa: E402
from crawler.backends.redis.entries import pack_entry  # noqa: E402
from crawler.backends.redis.keys import PartitionKeys  # noqa: E402
from crawler.backends.redis.mail import (  # noqa: E402
    FIELD,
    Letter,
    Mailboxes,
    pack_letter,
    unpack_letter,
)
from crawler.frontier import Entry  # noqa: E402
from tests.redis_support import start_redis  # noqa: E402


def page_letters(entries: list[Entry], opic: bool) -> list[Letter]:
    """One letter per page (its links, in the order found), one per seed; under ``opic`` each
    link carries 1 / the page's links of cash."""
    pages: dict[str, list[Entry]] = {}
    letters: list[Letter] = []
    for e in entries:
        if e.referrer:
            pages.setdefault(e.referrer, []).append(e)
        else:
            letters.append(Letter(adds=[(e, False, False)]))
    for links in pages.values():
        share = 1.0 / len(links) if opic else 0.0
        letters.append(Letter(adds=[(replace(e, cash=share), False, False) for e in links]))
    return letters


def foreign(entries: list[Entry]) -> list[Entry]:
    """The entries with each page moved to another host (the next one in name order, its path
    kept): a link in a letter always leads to another partition's host than its page's, so its
    referrer shares no host with it."""
    hosts = sorted({e.host for e in entries})
    other = dict(zip(hosts, hosts[1:] + hosts[:1], strict=True))
    out = []
    for e in entries:
        if e.referrer:
            split = urlsplit(e.referrer)
            moved = split._replace(netloc=other[split.hostname or ""]).geturl()
            e = replace(e, referrer=moved)
        out.append(e)
    return out


def inbox_bytes(blobs: list[bytes], client: Any, links: int) -> float:
    """``MEMORY USAGE`` of an inbox holding ``blobs`` (as ``Mailboxes.send`` adds them), per
    link."""
    keys = PartitionKeys("letterbench", 0, 1)
    client.delete(keys.inbox)
    boxes = Mailboxes(client, lambda _: keys)
    for i in range(0, len(blobs), 1000):
        pipe = client.pipeline(transaction=False)
        for blob in blobs[i : i + 1000]:
            pipe.xadd(keys.inbox, {FIELD: blob})
        pipe.execute()
    assert boxes.backlog(0) == len(blobs)
    used = client.memory_usage(keys.inbox, samples=0) or 0
    client.delete(keys.inbox)
    return used / links


def entry_bytes(entries: list[Entry]) -> int:
    return sum(len(pack_entry(e, queue=e.priority, letter=True)) for e in entries)


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    entries, pages_read = crawl_links(args.links, args.per_host)
    n = len(entries)
    away = foreign(entries)
    letters = {
        "page_letters_depth": page_letters(entries, opic=False),
        "page_letters_opic": page_letters(entries, opic=True),
        "page_letters_depth_foreign": page_letters(away, opic=False),
        "page_letters_opic_foreign": page_letters(away, opic=True),
        "single_link_letters_foreign": [Letter(adds=[(e, False, False)]) for e in away],
    }
    blobs = {name: [pack_letter(x) for x in batch] for name, batch in letters.items()}
    for name, batch in letters.items():  # the measured form is the real one
        for letter, blob in zip(batch, blobs[name], strict=True):
            assert unpack_letter(blob) == letter
    pages = len(letters["page_letters_depth"])
    result: dict[str, Any] = {
        "links": n,
        "pages_read": pages_read,
        "hosts": len({e.host for e in entries}),
        "page_letters": pages,
        "links_per_page_letter": round(n / pages, 1),
        "bytes_per_link": {
            "packed_entries_with_referrer": round(entry_bytes(entries) / n, 1),
            "packed_entries_with_foreign_referrer": round(entry_bytes(away) / n, 1),
            "packed_entries_without_referrer": round(
                entry_bytes([replace(e, referrer="") for e in entries]) / n, 1
            ),
            **{name: round(sum(map(len, b)) / n, 1) for name, b in blobs.items()},
        },
    }
    work = Path(tempfile.mkdtemp(prefix="letter_bytes_"))
    server = start_redis(work)
    try:
        client = server.client()
        result["inbox_memory_usage_per_link"] = {
            name: round(inbox_bytes(b, client, n), 1) for name, b in blobs.items()
        }
        result["redis_version"] = client.info("server")["redis_version"]
        client.close()
    finally:
        server.stop()
    result["wall_s"] = round(time.monotonic() - t0, 1)
    result["load_average_end"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=20_000)
    parser.add_argument("--per-host", type=int, default=2_000)
    args = parser.parse_args()
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
