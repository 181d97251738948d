"""What reading one robots.txt costs a worker: decoding it and parsing it for the crawler's
token (``RobotsRules``), then checking URLs against it, on large real-ish files.

The files are shaped like the biggest robots.txt files of real sites: a long list of named
crawlers shut out one group each (some groups opened by several user-agent lines, with a
Crawl-delay), then a ``*`` group of thousands of rules (wildcards, queries, ``$``, non-ASCII
and percent-encoded paths in several languages, comments), sitemaps. Sizes: ~120 KB, and one
at the 500 KiB limit.

Then what decoding alone costs, on the reactor thread, files that are not all UTF-8 (RFC 9309
2.2.2: the bytes that are not UTF-8 are percent-encoded): a binary file served as robots.txt
(random bytes, at the 500 KiB limit and 200 KB), a Latin-1 file (a byte in 20 not UTF-8), the
same text in UTF-8, and with one stray byte at its end or its start. And what the compression
middleware costs a small gzipped robots.txt.

    .venv/bin/python bench/robots_parse.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from scrapy.http import TextResponse
from scrapy.utils.test import get_crawler

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.middlewares.compression import CountingHttpCompressionMiddleware
from crawler.middlewares.robots_requests import robots_request
from crawler.robots import MAX_SIZE, RULES, RobotsRecord, RobotsRules, decode_body

WORDS = ["Special", "Spécial", "Especial", "Служебная", "特別", "Benutzer", "Diskussion"]


def build_file(rules: int, bots: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    lines = ["# robots.txt of a large site", "# crawlers that misbehaved", ""]
    for i in range(bots):
        lines.append(f"User-agent: Bot{i}-crawler")
        if i % 5 == 0:
            lines.append(f"User-agent: bot{i}-images/2.{i}")
            lines.append(f"Crawl-delay: {1 + i % 7}")
        lines += ["Disallow: /", ""]
    lines += ["User-agent: *", "Crawl-delay: 1"]
    for i in range(rules):
        word = rng.choice(WORDS)
        shape = i % 6
        if shape == 0:
            lines.append(f"Disallow: /wiki/{word}:Search/{i}")
        elif shape == 1:
            lines.append(f"Disallow: /w/index.php?title={word}%3A{i}&action=*")
        elif shape == 2:
            lines.append(f"Allow: /w/load.php?lang={i}$")
        elif shape == 3:
            lines.append(f"Disallow: /*?sort={i}*&page=")
        elif shape == 4:
            lines.append(f"Disallow: /wiki/%E7%89%B9%E5%88%A5:{i}  # a comment")
        else:
            lines.append(f"Disallow: /api/rest_v1/page/{i}/")
    lines += ["", "Sitemap: https://site.example/sitemap.xml"]
    return ("\n".join(lines) + "\n").encode()


def urls(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        shape = i % 4
        n = rng.randrange(4000)
        if shape == 0:
            out.append(f"https://site.example/wiki/Article_{n}")
        elif shape == 1:
            out.append(f"https://site.example/w/index.php?title=Special%3A{n}&action=edit")
        elif shape == 2:
            out.append(f"https://site.example/list?sort={n}&page=2")
        else:
            out.append(f"https://site.example/api/rest_v1/page/{n}/html")
    return out


def measure(body: bytes, token: str, checks: list[str], repeat: int) -> tuple[float, float]:
    """Median CPU ms to decode and parse the file, and median CPU µs per URL check (CPU
    time, not wall time: the figures hold on a loaded machine)."""
    parse, check = [], []
    for _ in range(repeat):
        start = time.process_time()
        text, _ = decode_body(body)
        rules = RobotsRules(RobotsRecord("https://site.example", RULES, 200, 0, 1, text), token)
        parse.append((time.process_time() - start) * 1000)
        start = time.process_time()
        for url in checks:
            rules.allowed(url)
        check.append((time.process_time() - start) * 1e6 / len(checks))
    return statistics.median(parse), statistics.median(check)


def latin_text(size: int, seed: int = 3) -> str:
    """Rules of a French and German site, about one character in 20 not ASCII."""
    rng = random.Random(seed)
    words = ["catégorie", "été", "über", "Straße", "produits", "recherche", "panier", "suche"]
    lines = []
    while sum(map(len, lines)) < size:
        path = "/".join(rng.choice(words) for _ in range(3))
        lines.append(f"Disallow: /{path}/{rng.randrange(10_000)}\n")
    return "".join(lines)


def cpu_ms(work: Callable[[], object], repeat: int) -> float:
    """Median CPU ms of ``work()``."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


def decoding(repeat: int) -> None:
    rng = random.Random(5)
    files = {
        "random 500 KiB": rng.randbytes(MAX_SIZE),
        "random 200 KB": rng.randbytes(200_000),
        "Latin-1 600 KB": latin_text(600_000).encode("latin-1"),
        "UTF-8 600 KB": latin_text(600_000).encode(),
        "UTF-8, bad last": latin_text(600_000).encode() + b"\xe9\n",
        "UTF-8, bad 1st": b"\xe9" + latin_text(600_000).encode(),
    }
    for name, body in files.items():
        ms = cpu_ms(lambda body=body: decode_body(body, max_size=len(body)), repeat)
        print(f"decode {name:<15} ({len(body):,} bytes) {ms:7.2f} ms")


def compressed(repeat: int) -> None:
    """A gzipped robots.txt without a charset (a TextResponse, as the download handler makes
    it for a robots.txt URL) through the compression middleware: µs per response."""
    middleware = CountingHttpCompressionMiddleware.from_crawler(get_crawler())
    request = robots_request("http://site.example")
    plain = build_file(60, 10)[:2500]
    body = gzip.compress(plain)
    headers = {"Content-Encoding": "gzip", "Content-Type": "text/plain"}

    def inflate() -> None:
        for _ in range(100):
            response = TextResponse(request.url, body=body, headers=headers, request=request)
            middleware.process_response(request, response)

    us = cpu_ms(inflate, repeat) * 10
    print(f"inflate gzipped robots.txt ({len(plain):,} bytes, {len(body):,} gzipped) {us:7.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    checks = urls(2000)
    files = {"120 KB": build_file(3000, 120), "500 KiB": build_file(13000, 400)}
    for name, body in files.items():
        for token in ("crawler-bot", "bot5-crawler"):
            parse_ms, check_us = measure(body, token, checks, args.repeat)
            print(
                f"{name:>8} ({len(body):,} bytes) token {token:<13} parse {parse_ms:7.2f} ms"
                f"  check {check_us:6.2f} µs/URL"
            )
    decoding(args.repeat)
    compressed(args.repeat)


if __name__ == "__main__":
    main()
