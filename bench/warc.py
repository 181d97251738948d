"""WARC output: what it costs a crawl, and what a recrawl of unchanged pages stores.

    .venv/bin/python bench/warc.py records [--pages 300]
    .venv/bin/python bench/warc.py crawl [--runs 2] [--trees nodejs/api,valgrind/html,...]

``records``: CPU per response record (request + response, SHA-1 digests, one gzip member each)
for real documentation pages (HTML files of /usr/share/doc), written by warcio and by FastWARC
at gzip levels 1, 3, 6 and 9: the measurement behind the choice of FastWARC and of
``WARC_GZIP_LEVEL``.

``crawl``: real documentation trees served by nginx (``bench/realcrawl.py``'s site set and
command: this crawler with near-duplicates, index and crawl database on), crawled with
``WARC_ENABLED`` off and on, alternating, each to completion: CPU per page (user + sys of the
crawl process and its children) and the added share; bytes written to WARC files against
the bytes received (nginx's log). Then a second crawl of the same, unchanged trees into the same
WARC directory and digest index: every 200 becomes an identical-payload revisit, and its
bytes are compared with the first crawl's.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.realcrawl import run_config, write_site  # noqa: E402
from bench.redis_workers import Nginx, default_trees  # noqa: E402

DEFAULT_TREES = "nodejs/api,valgrind/html,reference,nomicon,cargo,edition-guide"


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


def bench_crawl(args: argparse.Namespace) -> list[dict[str, Any]]:
    wanted = args.trees.split(",")
    trees = [t for t in default_trees() if t[1] in wanted]
    root = Path(tempfile.mkdtemp(prefix="bench-warc-"))
    (root / "nginx").mkdir()
    nginx = Nginx(root / "nginx", trees, args.port)
    results: list[dict[str, Any]] = []
    try:
        seeds, allow = write_site(root / "sites", nginx, trees)
        print("trees:", ", ".join(p for _, p in trees), flush=True)
        for i in range(args.runs):
            for config in ("off", "on"):
                extra: dict[str, str] = {}
                if config == "on":
                    warc_dir = root / f"warc-{i}"
                    extra = {"WARC_ENABLED": "1", "WARC_DIR": str(warc_dir),
                             "WARC_GZIP_LEVEL": str(args.level),
                             "WARC_DIGEST_PATH": str(warc_dir / "digests.sqlite")}  # fmt: skip
                (root / config).mkdir(exist_ok=True)
                r = run_config("ours", i, root / config, root / "sites", seeds, allow, nginx,
                               extra, args.timeout)  # fmt: skip
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
        extra = {"WARC_ENABLED": "1", "WARC_DIR": str(warc_dir),
                 "WARC_GZIP_LEVEL": str(args.level),
                 "WARC_DIGEST_PATH": str(warc_dir / "digests.sqlite")}  # fmt: skip
        (root / "recrawl").mkdir()
        r = run_config("ours", 0, root / "recrawl", root / "sites", seeds, allow, nginx, extra,
                       args.timeout)  # fmt: skip
        second = sum(p.stat().st_size for p in warc_dir.glob("*.warc.gz") if p not in before)
        stats = json.loads((root / "recrawl" / "ours-0" / "stats.json").read_text())
        r |= {"config": "recrawl", "warc_bytes": second, "vs_first": second / first,
              "revisits": stats.get("warc/records/revisit/identical", 0),
              "responses": stats.get("warc/records/response", 0)}  # fmt: skip
        results.append(r)
        print(json.dumps({k: r[k] for k in _SHOWN if k in r}), flush=True)
    finally:
        nginx.stop()
        if args.keep:
            print("kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return results


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
    crawl.add_argument("--level", type=int, default=3, help="WARC_GZIP_LEVEL")
    args = parser.parse_args()
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
