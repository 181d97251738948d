"""Bytes of the static URL code (``crawler.frontier.urlcode.huffman_encode``) on link tails it
was not fitted to, against another version of the module (``--against``).

    .venv/bin/python bench/url_code.py
    git show <rev>:crawler/frontier/urlcode.py > /tmp/old_urlcode.py
    .venv/bin/python bench/url_code.py --against /tmp/old_urlcode.py

The tails (what an entry codes: the URL after ``scheme://host/``) of three sets:

* ``doc``: every distinct link (``href``, resolved against the page) of this machine's
  /usr/share/doc HTML;
* ``web``: the distinct links of the Rust toolchain's HTML docs to other sites, at most 20 a
  host (so no one site's shape weighs much);
* ``bench``: the seed URLs of ``bench/partition_costs.py`` (``bench.seeds_bulk.seed_urls``:
  file paths of the same two doc trees, under version prefixes).

Printed per set: links, mean bytes per tail, bits per character, and the CPU microseconds to
encode and to decode a tail (the best of 3 passes), for this code and the other.
Measured 2026-12-05 (a load of 10-20), layout 7's code (one symbol for ``.html``, trailing
padding, decoded a byte at a time) against layout 6's (ASCII only, a leading 1 bit, decoded a
bit at a time)::

    set       links   layout 6: B (bits/char), encode / decode us   layout 7: the same
    doc       2,877   20.66 (5.26), 1.54 / 4.75                     19.00 (4.84), 1.41 / 1.12
    web         767   28.76 (5.98), 2.48 / 6.18                     27.92 (5.81), 1.70 / 1.46
    bench   100,000   23.36 (5.12), 1.76 / 5.86                     21.01 (4.60), 1.68 / 1.33
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import math
import os
import re
import sys
import time
from pathlib import Path
from types import ModuleType
from urllib.parse import urljoin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.seeds_bulk import seed_urls  # noqa: E402
from crawler.frontier import urlcode  # noqa: E402

HREF = re.compile(rb"""href\s*=\s*["']([^"'#]+)""", re.I)
RUST = sorted(Path.home().glob(".rustup/toolchains/*/share/doc/rust/html"))[:1]


def links(root: Path, base: str) -> set[str]:
    """The http(s) links of the HTML files under ``root``, served from ``base``."""
    out: set[str] = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith((".html", ".htm")):
                continue
            path = os.path.join(dirpath, name)
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue
            page = base + os.path.relpath(path, root)
            for match in HREF.finditer(data):
                try:
                    href = match.group(1).decode("ascii").strip()
                except UnicodeDecodeError:
                    continue
                url = urljoin(page, href)
                if url.startswith(("http://", "https://")):
                    out.add(url)
    return out


def tail(url: str) -> str:
    parts = url.split("/", 3)
    return parts[3] if len(parts) > 3 else ""


def sets() -> dict[str, list[str]]:
    doc = sorted(tail(u) for u in links(Path("/usr/share/doc"), "https://doc.test/"))
    per: collections.Counter[str] = collections.Counter()
    web = []
    for url in sorted(links(RUST[0], "https://doc.rust-lang.org/") if RUST else ()):
        host = url.split("/", 3)[2]
        if host != "doc.rust-lang.org" and per[host] < 20:
            per[host] += 1
            web.append(tail(url))
    return {"doc": doc, "web": web, "bench": [tail(u) for u in seed_urls(100_000, 10_000)]}


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("other_urlcode", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(code: ModuleType, tails: list[str]) -> tuple[float, float, float, float]:
    """Bytes a tail, bits a character, and microseconds of CPU to encode and to decode one
    (the best of 3 passes)."""
    ascii_ = [t for t in tails if t.isascii()]
    blobs = [code.huffman_encode(t) for t in ascii_]
    total = sum(map(len, blobs))
    chars = sum(len(t) for t in ascii_)
    assert [code.huffman_decode(b) for b in blobs] == ascii_
    encode = decode = math.inf
    for _ in range(3):
        t0 = time.process_time()
        for t in ascii_:
            code.huffman_encode(t)
        t1 = time.process_time()
        for b in blobs:
            code.huffman_decode(b)
        t2 = time.process_time()
        encode, decode = min(encode, t1 - t0), min(decode, t2 - t1)
    n = max(len(ascii_), 1)
    return total / n, total * 8 / max(chars, 1), encode / n * 1e6, decode / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", help="another urlcode.py to compare with")
    args = parser.parse_args()
    other = load(args.against) if args.against else None
    head = f"{'B':>6} {'bits/c':>6} {'enc us':>6} {'dec us':>6}"
    print(f"{'set':6} {'links':>7}  this: {head}" + (f"   other: {head}" if other else ""))
    for name, tails in sets().items():
        row = f"{name:6} {len(tails):7,}        " + "{:6.2f} {:6.2f} {:6.2f} {:6.2f}".format(
            *measure(urlcode, tails))
        if other is not None:
            row += "          {:6.2f} {:6.2f} {:6.2f} {:6.2f}".format(*measure(other, tails))
        print(row)


if __name__ == "__main__":
    main()
