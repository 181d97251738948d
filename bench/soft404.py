"""Soft-404 detection (``crawler/content/soft404.py``): precision and recall on real pages.

    .venv/bin/python bench/soft404.py            # development part, every threshold; held out
    .venv/bin/python bench/soft404.py --show     # each development host's scores
    .venv/bin/python bench/soft404.py --keep-path-words   # without leaving out URL words

The labelled set: each of the 25 real "not found" pages of ``bench/soft404_set/notfound``
(Apache httpd's 21 languages, rustdoc, pywb, Python's http.server, Twisted; see
``bench/soft404_set/build.py``) is one host that answers every unknown path with that page and
status 200, the path filled in where the page repeats it. The host also serves real pages of a
documentation tree under ``/usr/share/doc`` (rustdoc's own tree for the rustdoc host: the same
template as its not-found page). A local HTTP server serves them all; each answer is fetched
over loopback, parsed as the site spider parses a page (``crawler.content.html.parse_page``)
and judged against the host's probe (``/<random>-soft404-probe``):

* positives: the not-found page for 4 other missing paths (an old post, a document, a search
  query, a deep link), which must be flagged;
* negatives: 8 real pages of the host's tree and 8 short ones (under 60 words of main text:
  rustdoc's API stubs, one-line sections), which must not be.

A fixed rule on the host's name (``held_out``) keeps a third of the hosts out of the threshold
choice; their figures are printed apart, for the chosen ``THRESHOLD`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import sys
import threading
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.content import soft404
from crawler.content.html import parse_page
from crawler.content.soft404 import THRESHOLD, Answer, answer_of, probe_path, similarity

SET = Path(__file__).resolve().parent / "soft404_set" / "notfound"
RUSTDOC = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
DOC_TREES = ["libxslt1-dev", "nodejs", "valgrind", "libffi8", "python3"]
MISSING = [
    "/2019/05/an-old-post-about-crawlers/",
    "/docs/install.html",
    "/search?q=mercator+frontier",
    "/a/b/c/d/deep-link-123.php",
]
PER_HOST = 8  # normal pages per host, and as many short ones
SHORT = 60  # words of main text


def held_out(name: str) -> bool:
    return hashlib.blake2b(name.encode(), digest_size=2).digest()[0] % 3 == 0


def words(page: Path) -> int:
    parsed = parse_page(page.read_bytes(), "utf-8").page
    return len((parsed.main_text or parsed.text).split())


def doc_pages(tree: Path, n: int, salt: str) -> list[Path]:
    """``n`` pages of ``tree`` picked by a hash of the host's name, and as many *short* ones
    (under ``SHORT`` words of main text: an API stub, a redirect page, a one-line section),
    the hard cases for a comparison with a short not-found text."""
    pages = sorted(p for p in tree.rglob("*.html") if p.is_file() and p.stat().st_size > 500)
    ranked = sorted(pages, key=lambda p: hashlib.blake2b(f"{salt}{p}".encode()).digest())
    long: list[Path] = []
    short: list[Path] = []
    for page in ranked[: 40 * n]:
        if page.stat().st_size > 2_000_000:
            continue
        bucket = short if words(page) < SHORT else long
        if len(bucket) < n:
            bucket.append(page)
        if len(long) == len(short) == n:
            break
    return long + short


class Site:
    """Hosts by first path segment: ``/<host>/...``."""

    def __init__(self) -> None:
        self.notfound: dict[str, str] = {}
        self.pages: dict[tuple[str, str], Path] = {}

    def answer(self, path: str) -> tuple[int, bytes]:
        _, host, rest = path.split("/", 2)
        rest = "/" + rest
        page = self.pages.get((host, rest))
        if page is not None:
            return 200, page.read_bytes()
        html = self.notfound[host].replace("{{path}}", rest).replace("{{host}}", host)
        return 200, html.encode("utf-8")


def serve(site: Site) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = site.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def fetch(base: str, host: str, path: str) -> Answer:
    url = f"{base}/{host}{path}"
    with urllib.request.urlopen(url, timeout=30) as r:
        status, body = r.status, r.read()
    page = parse_page(body, "utf-8").page
    return answer_of(status, page.title, page.main_text or page.text, path)


def scores(site: Site, base: str) -> dict[str, list[tuple[bool, float]]]:
    """Per host: (is a not-found page, similarity to the host's probe) of each judged page."""
    out: dict[str, list[tuple[bool, float]]] = {}
    for host in sorted(site.notfound):
        probe = fetch(base, host, probe_path())
        judged = [(True, similarity(probe, fetch(base, host, p))) for p in MISSING]
        paths = [p for (h, p) in site.pages if h == host]
        judged += [(False, similarity(probe, fetch(base, host, p))) for p in paths]
        out[host] = judged
    return out


def prf(rows: list[tuple[bool, float]], threshold: float) -> tuple[float, float, int, int, int]:
    tp = sum(1 for pos, s in rows if pos and s >= threshold)
    fp = sum(1 for pos, s in rows if not pos and s >= threshold)
    fn = sum(1 for pos, s in rows if pos and s < threshold)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--show", action="store_true", help="each development host's scores")
    ap.add_argument(
        "--keep-path-words",
        action="store_true",
        help="compare the texts with the words of their URLs (what leaving them out buys)",
    )
    args = ap.parse_args()
    if args.keep_path_words:
        soft404._path_words = lambda url: set()  # the ablation
    site = Site()
    trees = [RUSTDOC] if RUSTDOC.exists() else []
    trees += [Path("/usr/share/doc") / t for t in DOC_TREES]
    trees = [t for t in trees if t.exists()]
    for i, path in enumerate(sorted(SET.glob("*.html"))):
        host = path.stem
        site.notfound[host] = path.read_text(encoding="utf-8")
        tree = RUSTDOC if host == "rustdoc" and RUSTDOC.exists() else trees[i % len(trees)]
        for page in doc_pages(tree, PER_HOST, host):
            site.pages[(host, "/" + str(page.relative_to(tree)))] = page
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        by_host = scores(site, base)
    finally:
        server.shutdown()
    dev = [r for h, rows in by_host.items() if not held_out(h) for r in rows]
    test = [r for h, rows in by_host.items() if held_out(h) for r in rows]
    n_dev = sum(1 for h in by_host if not held_out(h))
    print(f"{len(by_host)} hosts ({n_dev} development, {len(by_host) - n_dev} held out); "
          f"doc trees: {', '.join(t.name for t in trees)}")
    if args.show:
        for h, rows in by_host.items():
            if not held_out(h):
                pos = " ".join(f"{s:.2f}" for p, s in rows if p)
                neg = max((s for p, s in rows if not p), default=0.0)
                print(f"  {h:22} not-found {pos}   highest normal page {neg:.2f}")
    print(f"development part: {sum(1 for x, _ in dev if x)} not-found pages, "
          f"{sum(1 for x, _ in dev if not x)} normal pages")
    print("development part:  threshold  precision  recall  (tp fp fn)")
    for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        p, r, tp, fp, fn = prf(dev, t)
        mark = "  <- THRESHOLD" if t == THRESHOLD else ""
        print(f"                   {t:9.2f}  {p:9.3f}  {r:6.3f}  ({tp} {fp} {fn}){mark}")
    p, r, tp, fp, fn = prf(test, THRESHOLD)
    print(f"held out, THRESHOLD {THRESHOLD}: precision {p:.3f} recall {r:.3f} "
          f"({tp} {fp} {fn}; {sum(1 for x, _ in test if x)} not-found pages, "
          f"{sum(1 for x, _ in test if not x)} normal pages)")


if __name__ == "__main__":
    main()
