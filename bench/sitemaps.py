"""Sitemaps and canonical URLs on a real documentation tree served by nginx: does a generated
sitemap find the pages no page links to, does its ``<lastmod>`` spare a recrawl the pages that
did not change, and are pages served under several URLs indexed once?

    .venv/bin/python bench/sitemaps.py [--tree book] [--hidden 25] [--canonical 20]
                                       [--change 0.05]

The tree (default: the Rust book of the stable rustup toolchain, else nodejs's API docs from
/usr/share/doc) is copied to a temporary folder and served by nginx on 127.0.0.2 (static files:
``Last-Modified``, ``ETag`` and ``304`` as nginx gives them). Added to the copy:

* the sitemaps list every page of the tree but its meta-refresh redirect stubs (sitemaps list
  pages, not redirects);
* ``--hidden`` pages of another tree (the Rustonomicon, else valgrind's manual) under
  ``/<tree>/_extra/``, their links removed: only the sitemap lists them;
* for ``--canonical`` pages of the tree, two copies (``_print/``, ``_amp/``) naming the page as
  canonical (``<link rel="canonical">``), listed in the sitemap only;
* ``robots.txt`` naming ``/sitemap_index.xml``, an index of a gzip sitemap (the tree's pages)
  and a plain one (the extra pages and copies), ``lastmod`` from each file's mtime (text
  sitemaps, which carry no lastmod, are covered by tests/test_sitemaps.py).

Runs: (1) a first crawl from the tree's ``index.html`` with a crawl database; then ``--change``
of the tree's pages get a new paragraph and a new mtime (the sitemap follows), every page is
made due, and the same database is crawled again (2) with sitemaps and (3) without them
(``SITEMAPS_ENABLED=False``, today's recrawl: a conditional GET for every page), each from its
own copy of the database. Pages asked are counted from nginx's access log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.redis_workers import rust_html  # noqa: E402
from tests.crawling import run_crawl  # noqa: E402

HOST = "127.0.0.2"
HREF = re.compile(rb"""\shref\s*=\s*["'][^"']*["']""", re.I)
REFRESH = re.compile(rb"""<meta[^>]+http-equiv\s*=\s*["']?refresh""", re.I)
NOINDEX = re.compile(rb"""<meta[^>]+name\s*=\s*["']?robots["']?[^>]+noindex""", re.I)


def is_stub(path: Path) -> bool:
    """A meta-refresh redirect: no page of its own, and no sitemap lists it (nor does this one)."""
    return bool(REFRESH.search(path.read_bytes()[:4096]))


def trees() -> tuple[tuple[Path, str], tuple[Path, str]]:
    """((root, prefix) of the main tree, (root, prefix) of the extra pages' tree)."""
    rust = rust_html()
    if rust and os.path.isfile(os.path.join(rust, "book", "index.html")):
        return (Path(rust), "book"), (Path(rust), "nomicon")
    return (Path("/usr/share/doc"), "nodejs/api"), (Path("/usr/share/doc"), "valgrind/html")


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


class Site:
    """The served copy: the tree, the extra pages, the canonical copies, robots.txt and the
    sitemaps."""

    def __init__(self, root: Path, port: int, main: tuple[Path, str], extra: tuple[Path, str],
                 hidden: int, canonical: int) -> None:
        self.root, self.port = root, port
        self.prefix = main[1]
        shutil.copytree(main[0] / main[1], root / main[1])
        self.pages = sorted(p.relative_to(root).as_posix() for p in (root / main[1]).rglob("*.html")
                            if not is_stub(p))
        rng = random.Random(26)
        extra_files = [p for p in sorted((extra[0] / extra[1]).rglob("*.html"))
                       if not is_stub(p)][:hidden]
        self.extra: list[str] = []
        for i, src in enumerate(extra_files):
            rel = f"{self.prefix}/_extra/{i}.html"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(HREF.sub(b"", src.read_bytes()))
            self.extra.append(rel)
        self.copies: dict[str, list[str]] = {}
        indexable = [r for r in self.pages if not NOINDEX.search((root / r).read_bytes())]
        for rel in rng.sample(indexable, min(canonical, len(indexable))):
            body = (root / rel).read_bytes()
            inner = rel[len(self.prefix) + 1 :]
            head = (f'<head><base href="/{rel.rsplit("/", 1)[0]}/">'
                    f'<link rel="canonical" href="/{rel}">').encode()
            for kind in ("_print", "_amp"):
                copy = f"{self.prefix}/{kind}/{inner}"
                (root / copy).parent.mkdir(parents=True, exist_ok=True)
                (root / copy).write_bytes(body.replace(b"<head>", head, 1))
                self.copies.setdefault(rel, []).append(copy)
        (root / "robots.txt").write_text(
            f"User-agent: *\nDisallow:\nSitemap: {self.url('sitemap_index.xml')}\n")
        self.write_sitemaps()

    def url(self, rel: str) -> str:
        return f"http://{HOST}:{self.port}/{rel}"

    def write_sitemaps(self) -> None:
        def urlset(rels: list[str]) -> bytes:
            rows = "".join(
                f"<url><loc>{self.url(r)}</loc><lastmod>{iso((self.root / r).stat().st_mtime)}"
                "</lastmod></url>" for r in rels)
            return (f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns='
                    f'"http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>').encode()

        (self.root / "sitemap-pages.xml.gz").write_bytes(gzip.compress(urlset(self.pages)))
        others = self.extra + [c for cs in self.copies.values() for c in cs]
        (self.root / "sitemap-more.xml").write_bytes(urlset(others))
        index = "".join(f"<sitemap><loc>{self.url(n)}</loc></sitemap>"
                        for n in ("sitemap-pages.xml.gz", "sitemap-more.xml"))
        (self.root / "sitemap_index.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns='
            f'"http://www.sitemaps.org/schemas/sitemap/0.9">{index}</sitemapindex>')

    def change(self, share: float) -> list[str]:
        """Change ``share`` of the tree's pages (a paragraph, a new mtime); sitemaps follow."""
        rng = random.Random(5)
        changed = rng.sample(self.pages, max(1, round(share * len(self.pages))))
        later = time.time() + 2
        for rel in changed:
            path = self.root / rel
            path.write_bytes(path.read_bytes().replace(
                b"</main>", b"<p>Changed for the recrawl benchmark.</p></main>", 1))
            os.utime(path, (later, later))
        self.write_sitemaps()
        return changed


class Nginx:
    def __init__(self, root: Path, port: int) -> None:
        self.root, self.log = root, root / "access.log"
        conf = root / "nginx.conf"
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (root / d).mkdir(exist_ok=True)
        conf.write_text(f"""user root;
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    types {{ text/html html; application/xml xml; text/plain txt; application/gzip gz; }}
    default_type application/octet-stream;
    client_body_temp_path {root}/client_body; proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi; uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
    log_format bench '$status $request_uri';
    access_log {self.log} bench;
    server {{ listen {HOST}:{port}; root {root}/site; }}
}}
""")
        import subprocess

        self.process = subprocess.Popen(
            [shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(root), "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import socket

        for _ in range(200):
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start")

    def take_log(self) -> list[tuple[int, str]]:
        """(status, path) of each request since the last call."""
        time.sleep(0.2)
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        self.log.write_text("")  # truncated in place: nginx appends (O_APPEND) from 0
        return [(int(s), p) for s, p in (line.split(" ", 1) for line in lines)]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def pages_of(log: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(s, p) for s, p in log
            if p != "/robots.txt" and not p.startswith(("/sitemap", "/sitemap-"))]


def crawl(work: Path, seed: str, db: Path, **extra: Any) -> dict[str, Any]:
    work.mkdir(parents=True)
    settings = {
        "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "FRONTIER_HOST_CONCURRENCY": 4, "CRAWLDB_PATH": db, "RECRAWL_INTERVAL": 86400,
        "TUNING": {"recrawl_sync_delta": False}, "INDEX_PATH": work / "index.sqlite",
        "LOG_LEVEL": "INFO",
        **extra,
    }
    started = time.monotonic()
    result = run_crawl(work, seeds=[seed], settings=settings, timeout=1800)
    if result.returncode != 0:
        print(result.log[-3000:], file=sys.stderr)
        raise SystemExit(1)
    errors = [line for line in result.log.splitlines() if " ERROR" in line or "Traceback" in line]
    return {"stats": result.stats, "seconds": round(time.monotonic() - started, 1),
            "index": work / "index.sqlite", "errors": errors[:5], "log": result.log}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=25)
    parser.add_argument("--canonical", type=int, default=20)
    parser.add_argument("--change", type=float, default=0.05)
    args = parser.parse_args()
    main_tree, extra_tree = trees()
    out: dict[str, Any] = {"tree": f"{main_tree[0]}/{main_tree[1]}"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        port = free_port()
        site = Site(root / "site", port, main_tree, extra_tree, args.hidden, args.canonical)
        server = Nginx(root, port)
        try:
            seed = site.url(f"{site.prefix}/index.html")
            listed = {f"/{r}" for r in site.pages + site.extra}
            listed |= {f"/{c}" for cs in site.copies.values() for c in cs}
            out["pages listed in the sitemaps"] = len(listed)
            out["of them linked from no page"] = len(site.extra) + 2 * len(site.copies)

            first = crawl(root / "1", seed, root / "db.sqlite")
            log1 = pages_of(server.take_log())
            ok = {p for s, p in log1 if s == 200}
            out["first crawl"] = {
                "pages asked": len(log1), "seconds": first["seconds"],
                "sitemap pages found": len(listed & ok),
                "missing": sorted(listed - ok)[:5],
                "errors": first["errors"],
                "items": first["stats"].get("item_scraped_count"),
                "crawldb/recorded": first["stats"].get("crawldb/recorded"),
            }
            conn = sqlite3.connect(first["index"])
            ids = dict(conn.execute("SELECT url, id FROM pages"))
            docs = dict(conn.execute("SELECT url, has_doc FROM pages"))
            aliases = dict(conn.execute("SELECT url, alias_of FROM pages"))
            conn.close()
            groups = once = 0
            for rel, copies in site.copies.items():
                groups += 1
                urls = [site.url(rel)] + [site.url(c) for c in copies]
                # one document for the group: the URLs that have one, and the targets of those
                # that are aliases, are one and the same page
                targets = {ids.get(u) if docs.get(u) else aliases.get(u) for u in urls}
                once += len(targets) == 1 and None not in targets
            out["canonical groups (3 URLs each) indexed once"] = f"{once} / {groups}"
            out["canonical stats"] = {k: v for k, v in first["stats"].items()
                                      if k.startswith(("canonical/", "index/canonical"))}

            changed = site.change(args.change)
            shutil.copy(root / "db.sqlite", root / "db-baseline.sqlite")
            for db in ("db.sqlite", "db-baseline.sqlite"):
                conn = sqlite3.connect(root / db)
                # every page fetched with 200 comes due (broken links keep their 30 days)
                conn.execute("UPDATE pages SET next_fetch = 0 WHERE status BETWEEN 200 AND 299")
                conn.commit()
                conn.close()
            known = len(ok)  # every page the first crawl fetched (sitemap-listed or linked)
            for name, db, extra in (
                ("recrawl with sitemaps", "db.sqlite", {}),
                ("recrawl without sitemaps (today)", "db-baseline.sqlite",
                 {"SITEMAPS_ENABLED": False}),
            ):
                run = crawl(root / name.split()[1], seed, root / db, **extra)
                log = pages_of(server.take_log())
                statuses = Counter(s for s, _ in log)
                out[name] = {
                    "pages asked": len(log),
                    "share of the site's pages": round(len(log) / known, 4),
                    "200": statuses.get(200, 0), "304": statuses.get(304, 0),
                    "changed pages asked": len({f"/{c}" for c in changed} & {p for _, p in log}),
                    "seconds": run["seconds"],
                    "sitemaps/unchanged_skipped": run["stats"].get("sitemaps/unchanged_skipped", 0),
                    "other pages asked (some)": sorted(
                        f"{s} {p}" for s, p in log if p not in {f"/{c}" for c in changed})[:12],
                }
            out["pages changed"] = len(changed)
            out["site pages"] = known
        finally:
            server.stop()
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
