"""A calendar trap next to real documentation: what share of a polite crawl goes to the trap.

    .venv/bin/python bench/calendar_docs.py [--delay 0.05] [--runs 1] [--json out.json]

Serves local documentation trees (the Rust books of a rustup toolchain, /usr/share/doc's nodejs and
valgrind HTML, whichever are installed), each on its own loopback address with a small static
server of its own (only the tree's folder; everything else is 404), and the hostile server's
endless calendar (``tests/hostile.py``: every month links the previous and the next) on one more
host. One crawl with the ``web`` site's limits (``max_depth = 20``) and the shipped settings (only
the politeness delay shortened) runs to completion for each value of ``TUNING``'s
``neardup_link_demotion`` (0: off, then the default): the calendar's months are duplicates of each
other to the near-duplicate detector (digits masked), so their links go that many levels deeper and
the depth limit ends the walk sooner. Reported per run: requests in all, on the calendar, their
share (target under 1 %), and the documentation pages fetched (the same in both: no documentation
page may be lost to the demotion).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import date
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.config.tuning import knob_default
from tests import hostile as h
from tests.crawling import run_crawl, write_site

CALENDAR = "127.0.0.240"


def trees() -> list[tuple[str, str]]:
    """(served root, URL prefix) of the installed trees: ``root/prefix/index.html`` exists."""
    pattern = os.path.expanduser("~/.rustup/toolchains/stable-*/share/doc/rust/html")
    rust = sorted(glob.glob(pattern))
    found = [
        (rust[-1], p)
        for p in ("book", "reference", "cargo", "edition-guide", "nomicon", "rustc")
        if rust
    ]
    found += [("/usr/share/doc", "nodejs/api"), ("/usr/share/doc", "valgrind/html")]
    return [(r, p) for r, p in found if os.path.isfile(os.path.join(r, p, "index.html"))]


class _TreeHandler(SimpleHTTPRequestHandler):
    """Serves files under ``/<prefix>/`` only, and counts every request."""

    prefix = ""
    hits: Counter[str]
    lock: threading.Lock

    def do_GET(self) -> None:
        with self.lock:
            self.hits[self.server.server_address[0]] += 1  # type: ignore[index]
        if not self.path.startswith(f"/{self.prefix}/"):
            self.send_error(404)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class DocServers:
    """One threading static server per tree, on 127.0.0.2, 127.0.0.3, ..., one port."""

    def __init__(self, tree_list: list[tuple[str, str]]) -> None:
        self.hits: Counter[str] = Counter()
        self.servers: list[ThreadingHTTPServer] = []
        self.seeds: list[str] = []
        lock = threading.Lock()
        port = 0
        for i, (root, prefix) in enumerate(tree_list):
            handler = type("Handler", (_TreeHandler,), {"prefix": prefix, "hits": self.hits,
                                                        "lock": lock})
            server = ThreadingHTTPServer(
                (f"127.0.0.{2 + i}", port), partial(handler, directory=root)
            )
            server.daemon_threads = True
            port = server.server_address[1]
            self.servers.append(server)
            self.seeds.append(f"http://127.0.0.{2 + i}:{port}/{prefix}/index.html")
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def run(docs: DocServers, demotion: int, delay: float, timeout: float) -> dict[str, Any]:
    calendar = h.HostileServer()
    calendar.route(CALENDAR, "/cal/", h.calendar(), prefix=True)
    today = date.today()
    docs.hits.clear()
    with calendar, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        write_site(tmp / "sites", "docs", "[urls]\nmax_depth = 20\n")  # the "web" site's limit
        start = time.monotonic()
        result = run_crawl(
            tmp,
            "docs",
            sites_dir=tmp / "sites",
            seeds=[*docs.seeds, calendar.url(CALENDAR, f"/cal/{today.year}/{today.month:02d}")],
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": delay,
                "FRONTIER_DELAY_FACTOR": 0,
                "TUNING": {"neardup_link_demotion": demotion},
                "LOG_LEVEL": "INFO",
            },
            timeout=timeout,
        )
        wall = time.monotonic() - start
        calendar.wait_idle()
        on_calendar = len(calendar.hits_of(CALENDAR))
    doc_requests = sum(docs.hits.values())
    total = doc_requests + on_calendar
    doc_pages = sum(
        1 for item in result.items if "/cal/" not in item["url"] and item.get("status") == 200
    )
    return {
        "demotion": demotion,
        "returncode": result.returncode,
        "wall_s": round(wall, 1),
        "requests": total,
        "calendar_requests": on_calendar,
        "calendar_share_pct": round(100 * on_calendar / total, 2) if total else None,
        "doc_requests": doc_requests,
        "doc_pages_200": doc_pages,
        "links_demoted": result.stats.get("frontier/links_demoted", 0),
        "too_deep": result.stats.get("frontier/rejected/too_deep", 0),
        "finish_reason": result.stats.get("finish_reason"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.05, help="FRONTIER_MIN_DELAY")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tree_list = trees()
    if not tree_list:
        print("no documentation tree installed (rustup's stable docs, nodejs, valgrind)")
        return 2
    print("trees:", ", ".join(p for _, p in tree_list), flush=True)
    docs = DocServers(tree_list)
    rows = []
    try:
        for _ in range(args.runs):
            for demotion in (0, knob_default("neardup_link_demotion")):
                row = run(docs, demotion, args.delay, args.timeout)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        docs.close()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
