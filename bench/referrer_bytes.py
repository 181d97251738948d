"""What the page a link was found on costs per queued URL: in memory (``MercatorFrontier`` over
``MemoryQueueStore``) and in SQLite (``JOBDIR/frontier.sqlite``), each measured with the
referrer and without it (the same entries with ``referrer=""``, as before this field existed)
in the same run, and in the Redis entry (``crawler.backends.redis.entries``) under each design.

Run from the project root::

    .venv/bin/python bench/referrer_bytes.py                  # 100,000 links, <= 40,000 a host
    .venv/bin/python bench/referrer_bytes.py --links 50000 --per-host 500

The links are real: the HTML files of the Rust toolchain's docs and of /usr/share/doc (the
trees of ``bench/seeds_bulk.py``), one tree per host (hosts named as there, 90 % https). Each
tree is crawled breadth-first from its shortest path (its index) by reading the files: every
``href`` is joined to its page's URL, kept when it names an HTML file of the same tree, and
queued the first time it is met, with that page as its referrer: what a crawl queues, in the
order it queues it. A page's links share one referrer string, as the intake passes them
(``response.url``). Seeds (the start pages) have none.

Printed: per queued URL, the bytes in memory (``tracemalloc``, everything the frontier holds:
entries, URL strings, seen-set), in the SQLite file (``dbstat``: the queue table and its indexes,
and the whole file); the Redis entry's own bytes under other designs of the referrer field
(the whole referrer URL coded; the path alone when the host is the same; a 4-byte reference
to a table of referring pages, with that table's coded URLs spread over the links); and the
cost of packing and unpacking.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import sys
import tempfile
import time
import tracemalloc
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.seeds_bulk import DOC_ROOTS, host_names  # noqa: E402
from crawler.backends.redis.entries import pack_entry, unpack_entry  # noqa: E402
from crawler.backends.sqlite.frontier import SqliteQueueStore  # noqa: E402
from crawler.frontier import Entry, MercatorFrontier, PolitenessPolicy  # noqa: E402
from crawler.frontier.api import SEED  # noqa: E402
from crawler.frontier.urlcode import huffman_encode, varint  # noqa: E402
from crawler.frontier.urls import normalize_url  # noqa: E402
from tests.frontier_contract import FakeClock  # noqa: E402

HREF = re.compile(rb'href="([^"#?]+)[^"]*"')


def doc_tree_files() -> list[tuple[Path, list[str]]]:
    """(tree's root folder, its HTML paths relative to the root with a leading /), as
    ``bench/seeds_bulk.py`` groups them: the first folder under a doc root is one tree."""
    trees: dict[tuple[Path, str], list[str]] = {}
    for root in DOC_ROOTS:
        if not root.is_dir():
            continue
        for dirpath, _, files in os.walk(root):
            for name in files:
                if name.endswith((".html", ".htm")):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    trees.setdefault((root, rel.split("/", 1)[0]), []).append("/" + rel)
    return [(root, sorted(paths)) for (root, _), paths in sorted(trees.items())
            if len(paths) >= 5]


def crawl_links(links: int, per_host: int, seed: int = 7) -> tuple[list[Entry], int]:
    """Entries as a breadth-first crawl of the doc trees queues them (see the module
    docstring), up to ``links`` links, ``per_host`` a host; and the pages read."""
    rng = random.Random(seed)
    trees = doc_tree_files()
    rng.shuffle(trees)
    hosts = host_names(len(trees), rng)
    out: list[Entry] = []
    pages_read = 0
    for (root, paths), host in zip(trees, hosts, strict=False):
        if len(out) >= links:
            break
        known = set(paths)
        scheme = "https" if rng.random() < 0.9 else "http"
        base = f"{scheme}://{host}"
        start = min(paths, key=lambda p: (len(p), p))
        out.append(Entry(base + start, host, 1, 0, SEED))
        queued = {start}
        todo = deque([start])
        taken = 1
        while todo and taken < per_host and len(out) < links:
            path = todo.popleft()
            page = base + path  # one string: every link of the page refers to it
            pages_read += 1
            try:
                body = (root / path.lstrip("/")).read_bytes()
            except OSError:
                continue
            for href in HREF.findall(body):
                try:
                    target = urlsplit(urljoin(page, href.decode("utf-8"))).path
                except ValueError:
                    continue
                if target not in known or target in queued:
                    continue
                queued.add(target)
                todo.append(target)
                url = normalize_url(base + target)[0]
                out.append(Entry(url, host, 1, 1 + path.count("/"), None, referrer=page))
                taken += 1
                if taken >= per_host or len(out) >= links:
                    break
    return out, pages_read


def without(entries: list[Entry]) -> list[Entry]:
    return [Entry(e.url, e.host, e.priority, e.depth, e.payload) for e in entries]


def fresh(entries: list[Entry]) -> list[Entry]:
    """Copies with URL strings of their own and one referrer string per page (shared by its
    links), so that tracemalloc sees what a crawl allocates."""
    pages: dict[str, str] = {}
    copies = []
    for e in entries:
        ref = e.referrer
        if ref:
            ref = pages.get(ref) or pages.setdefault(ref, _copy(ref))
        copies.append(Entry(_copy(e.url), e.host, e.priority, e.depth, e.payload, referrer=ref))
    return copies


def _copy(text: str) -> str:
    """A new string object equal to ``text`` (``"".join((text,))`` returns ``text`` itself)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


def memory_bytes(entries: list[Entry]) -> float:
    """Bytes per URL the memory frontier holds (tracemalloc: entries, their strings, queues,
    seen-set, host state) once every entry is queued."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    batch = fresh(entries)
    f = MercatorFrontier(PolitenessPolicy(min_delay=0.0), clock=FakeClock())
    for i in range(0, len(batch), 1000):
        f.add_many(batch[i : i + 1000])
    del batch
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(f) == len(entries)
    return used / len(entries)


def sqlite_bytes(entries: list[Entry], work: Path, name: str) -> dict[str, float]:
    path = work / f"{name}.sqlite"
    store = SqliteQueueStore(path, 8)
    f = MercatorFrontier(PolitenessPolicy(min_delay=0.0), store=store, clock=FakeClock())
    for i in range(0, len(entries), 1000):
        f.add_many(entries[i : i + 1000])
    f.close()
    import sqlite3

    db = sqlite3.connect(path)
    sizes = dict(db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    db.close()
    n = len(entries)
    queue = sum(v for k, v in sizes.items() if k.startswith("queue"))
    return {
        "queue_table_and_indexes": round(queue / n, 1),
        "queue_table": round(sizes.get("queue", 0) / n, 1),
        "file": round(path.stat().st_size / n, 1),
    }


def designs(entries: list[Entry]) -> dict[str, float]:
    """Mean bytes of the Redis entry (no list overhead, no host number) under each design of
    the referrer field."""
    n = len(entries)
    plain = [len(pack_entry(Entry(e.url, e.host, e.priority, e.depth, e.payload),
                            queue=e.priority)) for e in entries]
    chosen = [len(pack_entry(e, queue=e.priority)) for e in entries]
    whole, path_only = [], []
    for e, p in zip(entries, plain, strict=True):
        if not e.referrer:
            whole.append(p)
            path_only.append(p)
            continue
        coded = huffman_encode(e.referrer)
        whole.append(p + 1 + len(varint(len(coded))) + len(coded))
        ref = urlsplit(e.referrer)
        same = ref.hostname == e.host and e.referrer.startswith(e.url.split(e.host, 1)[0])
        tail = huffman_encode(e.referrer[len(ref.scheme) + 3 + len(ref.netloc):]) if same \
            else coded
        path_only.append(p + 1 + len(varint(len(tail))) + len(tail))
    pages = {e.referrer for e in entries if e.referrer}
    table = sum(len(huffman_encode(u)) + 8 for u in pages)  # coded URL + its 4-byte id, twice
    referred = sum(1 for e in entries if e.referrer)
    reference = [p + (5 if e.referrer else 0) for e, p in zip(entries, plain, strict=True)]
    return {
        "none": round(sum(plain) / n, 1),
        "delta against the URL (chosen)": round(sum(chosen) / n, 1),
        "whole referrer URL, coded": round(sum(whole) / n, 1),
        "path alone when the host is the same": round(sum(path_only) / n, 1),
        "4-byte page id + page table (lower bound)": round((sum(reference) + table) / n, 1),
        "referring pages per referred link": round(len(pages) / max(referred, 1), 3),
    }


def codec_cost(entries: list[Entry]) -> dict[str, float]:
    """Microseconds to pack and unpack one entry, with the referrer and without."""
    out = {}
    for name, batch in (("with", entries), ("without", without(entries))):
        t = time.process_time()
        blobs = [pack_entry(e, queue=e.priority) for e in batch]
        packed = time.process_time() - t
        t = time.process_time()
        for e, b in zip(batch, blobs, strict=True):
            unpack_entry(b, (e.host,), e.priority)
        unpacked = time.process_time() - t
        out[f"pack_us_{name}"] = round(packed / len(batch) * 1e6, 2)
        out[f"unpack_us_{name}"] = round(unpacked / len(batch) * 1e6, 2)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    entries, pages_read = crawl_links(args.links, args.per_host)
    n = len(entries)
    plain = without(entries)
    for e in entries[:2000]:  # the measured form is the real one
        assert unpack_entry(pack_entry(e, queue=1), (e.host,), 1) == Entry(
            e.url, e.host, 1, e.depth, e.payload, referrer=e.referrer
        )
    result: dict[str, Any] = {
        "links": n,
        "hosts": len({e.host for e in entries}),
        "pages_read": pages_read,
        "seeds": sum(1 for e in entries if not e.referrer),
        "mean_url_chars": round(sum(len(e.url) for e in entries) / n, 1),
        "mean_referrer_chars": round(
            sum(len(e.referrer) for e in entries if e.referrer)
            / max(1, sum(1 for e in entries if e.referrer)), 1),
        "same_host_referrers": round(
            sum(1 for e in entries if e.referrer and urlsplit(e.referrer).hostname == e.host)
            / max(1, sum(1 for e in entries if e.referrer)), 3),
        "load_average": os.getloadavg(),
    }
    result["redis_entry_bytes"] = designs(entries)
    # "without" holds entries whose referrer slot is "": 8 bytes an entry that a class
    # without the field would not have (sys.getsizeof(Entry) with and without it)
    result["memory_bytes_per_url"] = {
        "with": round(memory_bytes(entries), 1), "without": round(memory_bytes(plain), 1),
        "entry_object": sys.getsizeof(entries[0]), "referrer_slot": 8,
    }
    work = Path(tempfile.mkdtemp(prefix="referrer_bytes_"))
    result["sqlite_bytes_per_url"] = {
        "with": sqlite_bytes(entries, work, "with"),
        "without": sqlite_bytes(plain, work, "without"),
    }
    result["codec"] = codec_cost(entries)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    result["load_average_end"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=100_000)
    parser.add_argument("--per-host", type=int, default=40_000)
    args = parser.parse_args()
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
