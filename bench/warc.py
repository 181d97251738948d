"""WARC output: what it costs a crawl, and what a recrawl of unchanged pages stores.

    .venv/bin/python bench/warc.py records [--pages 300]
    .venv/bin/python bench/warc.py crawl [--runs 2] [--trees nodejs/api,valgrind/html,...]
    .venv/bin/python bench/warc.py requisites [--runs 2] [--trees reference,nomicon,...]
    .venv/bin/python bench/warc.py wacz [--gb 1]

``records``: CPU per response record (request + response, SHA-1 digests, one gzip member each)
for real documentation pages (HTML files of /usr/share/doc), written by warcio and by FastWARC
at gzip levels 1, 3, 6 and 9: the measurement behind the choice of FastWARC and of
its gzip level (crawler/archive/files.py).

``crawl``: real documentation trees served by nginx (``bench/realcrawl.py``'s site set and
command: this crawler with near-duplicates, index and crawl database on), crawled with
``WARC_ENABLED`` off and on, alternating, each to completion: CPU per page (user + sys of the
crawl process and its children) and the added share; bytes written to WARC files against
the bytes received (nginx's log). Then a second crawl of the same, unchanged trees into the same
WARC directory and digest index: every 200 becomes an identical-payload revisit, and its
bytes are compared with the first crawl's.

``requisites``: the same trees crawled with WARC on, without and with ``[requisites] fetch =
true``, alternating: the requisites fetched per page, and what they add per page archived (CPU
of the crawl process, bytes written), and how soon after its page a requisite came (nginx's
log: the gap from a page's fetch to the fetch of the first requisite it alone asked for).

``wacz``: WARC files of about ``--gb`` GB (real documentation pages, request and response
records, FastWARC at the crawl's gzip level) indexed as a crawl does at its end, then packaged
by ``crawler.archive.wacz`` with that index merged (``WARC_WACZ``) and with a fresh one (``scrapy
wacz`` of a directory without indexes): wall and CPU seconds per GB of each.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.realcrawl import SITE, doc_site, run_config  # noqa: E402

DEFAULT_TREES = "nodejs/api,valgrind/html,reference,nomicon,cargo,edition-guide"
# mdBook trees (stylesheets, scripts, fonts, images per page) and two plain HTML trees
REQUISITE_TREES = "reference,nomicon,edition-guide,nodejs/api,valgrind/html"


# ------------------------------------------------------------------------------ records


def doc_pages(limit: int) -> list[bytes]:
    pages = []
    for path in sorted(Path("/usr/share/doc").rglob("*.html")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if len(data) > 2000:
            pages.append(data)
        if len(pages) >= limit:
            break
    return pages


def _http(body: bytes) -> tuple[bytes, bytes]:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body)
    return head, body


def bench_records(pages: list[bytes]) -> list[dict[str, Any]]:
    from datetime import UTC, datetime

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from crawler.archive.records import Exchange, request_record, response_record

    request = b"GET / HTTP/1.1\r\nHost: docs.test\r\nUser-Agent: bench\r\n\r\n"

    def fastwarc(level: int) -> int:
        out = 0
        for i, body in enumerate(pages):
            head, payload = _http(body)
            ex = Exchange(f"http://docs.test/{i}", request, head, payload, 200, datetime.now(UTC))
            for record in (request_record(ex), response_record(ex, ex.payload_digest)):
                out += len(record.gzip_member(level))
        return out

    def warcio(level: int) -> int:
        import zlib

        out = 0
        for i, body in enumerate(pages):
            for kind, http, payload in (
                ("request", StatusAndHeaders("GET / HTTP/1.1", [("Host", "docs.test")],
                                             is_http_request=True), b""),
                ("response", StatusAndHeaders("200 OK", [("Content-Type", "text/html"),
                                              ("Content-Length", str(len(body)))],
                                              protocol="HTTP/1.1"), body),
            ):  # fmt: skip
                buf = io.BytesIO()
                writer = WARCWriter(buf, gzip=False)
                record = writer.create_warc_record(
                    f"http://docs.test/{i}", kind, payload=io.BytesIO(payload),
                    http_headers=http,
                )  # fmt: skip
                writer.write_record(record)
                # warcio's own gzip is level 9; the same level as FastWARC's for a fair count
                c = zlib.compressobj(level, zlib.DEFLATED, 31)
                out += len(c.compress(buf.getvalue()) + c.flush())
        return out

    received = sum(len(p) for p in pages)
    results = []
    for level in (1, 3, 6, 9):
        for name, fn in (("fastwarc", fastwarc), ("warcio", warcio)):
            fn(level)  # warm up
            start = time.process_time()
            size = fn(level)
            cpu = time.process_time() - start
            results.append({
                "writer": name, "level": level, "us_per_page": 1e6 * cpu / len(pages),
                "bytes_ratio": size / received,
            })  # fmt: skip
    return results


# ------------------------------------------------------------------------------ crawl


def warc_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.warc.gz"))


def warc_settings(warc_dir: Path) -> dict[str, str]:
    """The settings of a crawl that writes WARC files (and their digest index) to
    ``warc_dir``, at the crawl's gzip level (crawler/archive/files.py)."""
    return {"WARC_ENABLED": "1", "WARC_DIR": str(warc_dir),
            "WARC_DIGEST_PATH": str(warc_dir / "digests.sqlite")}  # fmt: skip


def bench_crawl(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with doc_site(args.trees, args.port, "bench-warc-", keep=args.keep) as site:
        root = site.root
        for i in range(args.runs):
            for config in ("off", "on"):
                extra: dict[str, str] = {}
                if config == "on":
                    warc_dir = root / f"warc-{i}"
                    extra = warc_settings(warc_dir)
                (root / config).mkdir(exist_ok=True)
                r = run_config("ours", i, root / config, site.sites, site.seeds, site.allow,
                               site.nginx, extra, args.timeout)  # fmt: skip
                r["config"] = f"warc-{config}"
                if config == "on":
                    r["warc_bytes"] = warc_bytes(warc_dir)
                    r["written_vs_received"] = r["warc_bytes"] / r["bytes"] if r["bytes"] else 0
                results.append(r)
                print(json.dumps({k: r[k] for k in _SHOWN if k in r}), flush=True)
        # the recrawl: same trees, same WARC directory and digest index as run 0's "on"
        warc_dir = root / "warc-0"
        first = warc_bytes(warc_dir)
        before = set(warc_dir.glob("*.warc.gz"))
        (root / "recrawl").mkdir()
        r = run_config("ours", 0, root / "recrawl", site.sites, site.seeds, site.allow,
                       site.nginx, warc_settings(warc_dir), args.timeout)  # fmt: skip
        second = sum(p.stat().st_size for p in warc_dir.glob("*.warc.gz") if p not in before)
        stats = json.loads((root / "recrawl" / "ours-0" / "stats.json").read_text())
        r |= {"config": "recrawl", "warc_bytes": second, "vs_first": second / first,
              "revisits": stats.get("warc/records/revisit/identical", 0),
              "responses": stats.get("warc/records/response", 0)}  # fmt: skip
        results.append(r)
        print(json.dumps({k: r[k] for k in _SHOWN if k in r}), flush=True)
    return results


def bench_requisites(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with doc_site(args.trees, args.port, "bench-requisites-") as site:
        root, nginx = site.root, site.nginx
        config = (site.sites / f"{SITE}.toml").read_text()
        (root / "sites-req").mkdir()
        # the trees embed a few resources of other hosts (web fonts, badges): a benchmark
        # never leaves loopback, so they are denied (and counted: requisite_denied)
        (root / "sites-req" / f"{SITE}.toml").write_text(
            config + "[requisites]\nfetch = true\ndeny = ['^https?://(?!127[.])']\n"
        )
        for i in range(args.runs):
            for mode in ("pages", "requisites"):
                warc_dir = root / f"warc-{mode}-{i}"
                sites = root / ("sites" if mode == "pages" else "sites-req")
                (root / mode).mkdir(exist_ok=True)
                offset = nginx.log_offset()
                r = run_config("ours", i, root / mode, sites, site.seeds, site.allow, nginx,
                               warc_settings(warc_dir), args.timeout)  # fmt: skip
                stats = json.loads((root / mode / f"ours-{i}" / "stats.json").read_text())
                items = stats.get("item_scraped_count", 0)
                r |= {"config": mode, "items": items,
                      "requisites": stats.get("requisites/fetched", 0),
                      "denied": stats.get("frontier/rejected/requisite_denied", 0),
                      "requisite_bytes": stats.get("requisites/bytes", 0),
                      "warc_bytes": warc_bytes(warc_dir),
                      "ms_per_item": 1000 * r["cpu"] / items if items else 0}  # fmt: skip
                if mode == "requisites":
                    r["lag"] = requisite_lag(nginx.requests(offset), warc_dir)
                results.append(r)
                print(json.dumps({k: r[k] for k in _SHOWN_REQ if k in r}), flush=True)
    return results


def requisite_lag(requests: list[Any], warc_dir: Path) -> dict[str, dict[str, float]]:
    """Seconds from a page's fetch to the fetch of each requisite first asked for by it (the
    page's WARC metadata lists its ``embed`` lines; nginx's log has when each URL came), and
    the same for the links a page was the first to list (``outlink`` lines), to compare."""
    from tests.warc_support import all_records

    first: dict[str, float] = {}
    for r in requests:  # (time, host, status, bytes, path)
        first.setdefault(f"{r[1]}{r[4]}", float(r[0]))
    claimed: set[str] = set()
    gaps: dict[str, list[float]] = {"embed": [], "outlink": []}
    records = [r for r in all_records(warc_dir) if r["type"] == "metadata"]
    records.sort(key=lambda r: first.get(_host_path(r["headers"]["WARC-Target-URI"]), 0.0))
    for record in records:
        page = _host_path(record["headers"]["WARC-Target-URI"])
        for line in record["payload"].decode("utf-8", "replace").splitlines():
            kind, _, value = line.partition(": ")
            if kind not in gaps:
                continue
            url = _host_path(value.strip())
            if url in claimed or url not in first or page not in first:
                continue
            claimed.add(url)
            if first[url] >= first[page]:  # fetched after the page that listed it first
                gaps[kind].append(first[url] - first[page])
    out = {}
    for kind, values in gaps.items():
        values.sort()
        if values:
            out[kind] = {"n": len(values), "median_s": round(statistics.median(values), 2),
                         "p90_s": round(values[int(0.9 * (len(values) - 1))], 2),
                         "max_s": round(values[-1], 2)}  # fmt: skip
    return out


def _host_path(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.hostname}{parts.path}"


# ------------------------------------------------------------------------------ wacz


def bench_wacz(args: argparse.Namespace) -> dict[str, Any]:
    import resource
    from datetime import UTC, datetime

    from crawler.archive.cdxj import write_cdxj
    from crawler.archive.files import RotatingWarcFiles
    from crawler.archive.naming import WarcNamer
    from crawler.archive.records import Exchange, request_record, response_record, warcinfo
    from crawler.archive.wacz import package_wacz

    pages = doc_pages(args.pages)
    root = Path(tempfile.mkdtemp(prefix="bench-wacz-"))
    try:
        files = RotatingWarcFiles(root / "warc", WarcNamer("bench"),
                                  lambda name, date: warcinfo(name, [("software", "bench")], date),
                                  max_size=250_000_000)  # fmt: skip
        request = b"GET / HTTP/1.1\r\nHost: docs.test\r\n\r\n"
        n = 0
        while files.bytes_written < args.gb * 1e9:
            for body in pages:
                head, payload = _http(body + b"<!-- %d -->" % n)  # distinct payloads
                ex = Exchange(f"http://docs.test/{n}.html", request, head, payload, 200,
                              datetime.now(UTC))  # fmt: skip
                files.write([request_record(ex), response_record(ex, ex.payload_digest)])
                n += 1
        warcs = files.close()
        size = sum(w.stat().st_size for w in warcs)

        def cpu() -> float:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return usage.ru_utime + usage.ru_stime

        load = os.getloadavg()[0]
        # the crawl's own index, as WARC_CDXJ writes it at the end
        c0, t0 = cpu(), time.monotonic()
        index = write_cdxj(warcs, root / "crawl.cdxj")
        c1, t1 = cpu(), time.monotonic()
        # WARC_WACZ at the end of that crawl (or scrapy wacz DIR with it): the index merged
        summary = package_wacz(warcs, root / "reuse.wacz", indexes=[index])
        c2, t2 = cpu(), time.monotonic()
        (root / "reuse.wacz").unlink()
        # scrapy wacz DIR of files without an index: indexed afresh
        package_wacz(warcs, root / "fresh.wacz")
        c3, t3 = cpu(), time.monotonic()
        gb = size / 1e9
        return {"warc_files": len(warcs), "records": 2 * n, "warc_gb": round(gb, 3),
                "wacz_gb": round(summary.bytes / 1e9, 3), "pages": summary.pages,
                "index_s_per_gb": (t1 - t0) / gb, "index_cpu_s_per_gb": (c1 - c0) / gb,
                "wacz_reuse_s_per_gb": (t2 - t1) / gb, "wacz_reuse_cpu_s_per_gb": (c2 - c1) / gb,
                "wacz_fresh_s_per_gb": (t3 - t2) / gb, "wacz_fresh_cpu_s_per_gb": (c3 - c2) / gb,
                "load": (load, os.getloadavg()[0])}  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


_SHOWN_REQ = ("config", "run", "exit", "items", "requisites", "denied", "cpu", "ms_per_item",
              "bytes", "requisite_bytes", "warc_bytes", "lag", "wall", "load")  # fmt: skip

_SHOWN = ("config", "run", "exit", "pages", "cpu", "ms_per_page", "bytes", "warc_bytes",
          "written_vs_received", "vs_first", "revisits", "responses", "wall")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("records")
    rec.add_argument("--pages", type=int, default=300)
    crawl = sub.add_parser("crawl")
    crawl.add_argument("--runs", type=int, default=2)
    crawl.add_argument("--port", type=int, default=8083)
    crawl.add_argument("--trees", default=DEFAULT_TREES)
    crawl.add_argument("--timeout", type=float, default=1800)
    crawl.add_argument("--keep", action="store_true")
    req = sub.add_parser("requisites")
    req.add_argument("--runs", type=int, default=2)
    req.add_argument("--port", type=int, default=8084)
    req.add_argument("--trees", default=REQUISITE_TREES)
    req.add_argument("--timeout", type=float, default=1800)
    wacz = sub.add_parser("wacz")
    wacz.add_argument("--gb", type=float, default=1.0)
    wacz.add_argument("--pages", type=int, default=300)
    args = parser.parse_args()
    if args.what == "wacz":
        print(json.dumps(bench_wacz(args)))
        return
    if args.what == "requisites":
        results = bench_requisites(args)
        for mode in ("pages", "requisites"):
            runs = [r for r in results if r["config"] == mode]
            print(f"{mode}: ms CPU per page archived "
                  f"{statistics.median(r['ms_per_item'] for r in runs):.1f}, WARC bytes per page "
                  f"{statistics.median(r['warc_bytes'] / r['items'] for r in runs):,.0f}, "
                  f"requisites per page "
                  f"{statistics.median(r['requisites'] / r['items'] for r in runs):.2f}")
        return
    if args.what == "records":
        pages = doc_pages(args.pages)
        print(f"{len(pages)} pages, {sum(map(len, pages)) / len(pages):.0f} bytes on average")
        for r in bench_records(pages):
            print(f"{r['writer']:9} gzip {r['level']}: {r['us_per_page']:7.0f} us CPU per page "
                  f"(request + response), written/received {r['bytes_ratio']:.3f}")
        return
    results = bench_crawl(args)
    on = [r["ms_per_page"] for r in results if r["config"] == "warc-on"]
    off = [r["ms_per_page"] for r in results if r["config"] == "warc-off"]
    print(f"\nms CPU per page: off {statistics.median(off):.2f}, on {statistics.median(on):.2f}"
          f" (+{100 * (statistics.median(on) / statistics.median(off) - 1):.1f} %)")
    for r in results:
        if "written_vs_received" in r:
            print(f"run {r['run']}: {r['warc_bytes']} bytes written for {r['bytes']} received"
                  f" ({r['written_vs_received']:.3f})")
        if r["config"] == "recrawl":
            print(f"recrawl: {r['warc_bytes']} bytes, {100 * r['vs_first']:.1f} % of the first"
                  f" crawl's; {r['revisits']} revisits, {r['responses']} full responses")


if __name__ == "__main__":
    main()
