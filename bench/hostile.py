"""Hostile-web benchmark: one crawl of every hostile case (tests/hostile.py), each on a host of
its own, next to a normal devsite, with the shipped settings (only the politeness delay
shortened). Reports the crawl process's peak RSS (target < 400 MB), how long each case held
its host (first request start to last request end, at the server), what the server sent, which
limit or trap defense fired, and whether the normal site was crawled completely.

    .venv/bin/python bench/hostile.py [--delay 0.2] [--bomb-mb 1024] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devsite import HostSpec, SiteServer, build_site
from tests import hostile as h
from tests.crawling import PROJECT, crawl_command, normalized, write_site

MB = 1 << 20


def cases(bomb_mb: int) -> dict[str, tuple[str, list[tuple[str, h.Route, bool]]]]:
    """name -> (seed path, routes (path, route, prefix)) for one host each."""
    today = date.today()
    many = h.many_links(200_000, "http://127.0.0.9/x/")  # out of scope: only the cost counts
    return {
        "trickled_body": ("/", [("/", h.trickled_body(), False)]),
        "trickled_headers": ("/", [("/", h.trickled_headers(), False)]),
        "endless_headers": ("/", [("/", h.endless_headers(), False)]),
        "endless_body": ("/", [("/", h.endless_body(), False)]),
        "big_body_50MB": ("/", [("/", h.big_body(50 * MB), False)]),
        "big_body_50MB_no_length": ("/", [("/", h.big_body(50 * MB, declare_length=False), False)]),
        "gzip_bomb": ("/", [("/", h.bomb("gzip", bomb_mb * MB), False)]),
        "deflate_bomb": ("/", [("/", h.bomb("deflate", bomb_mb * MB), False)]),
        "br_bomb": ("/", [("/", h.bomb("br", bomb_mb * MB), False)]),
        "reset_mid_body": ("/", [("/", h.reset_mid_body(), False)]),
        "silent": ("/", [("/", h.silent(), False)]),
        "redirect_loop": ("/loop/a", [("/loop/", h.redirect_loop(), True)]),
        "redirect_chain_100": ("/chain/0", [("/chain/", h.redirect_chain(), True)]),
        "binary_junk": ("/", [("/", h.binary_junk(), False)]),
        "invalid_utf8": ("/", [("/", h.invalid_utf8(), False)]),
        "lying_charset": ("/", [("/", h.lying_charset(), False)]),
        "deep_nesting_5000": ("/", [("/", h.deep_nesting(5000), False)]),
        "links_200000": ("/", [("/", many, False)]),
        "429_retry_after_5s": ("/", [("/", h.retry_after(429, "5", h.page("ok")), False)]),
        "503_retry_after_date": (
            "/",
            [("/", h.retry_after(503, h.http_date_in(5), h.page("ok")), False)],
        ),
        "429_retry_after_absurd": (
            "/",
            [("/", h.retry_after(429, "99999999", h.page("ok")), False)],
        ),
        "calendar": (f"/cal/{today.year}/{today.month:02d}", [("/cal/", h.calendar(), True)]),
        "session_ids": ("/s/", [("/s/", h.session_ids(), True)]),
        "facets": ("/shop", [("/shop", h.facets(), False)]),
        "growing_path": ("/g/", [("/g/", h.growing_path(), True)]),
        "relative_loop": ("/loop2/", [("/loop2/", h.relative_loop(), True)]),
    }


def run_crawl_measured(cmd: list[str], timeout: float) -> tuple[int, float, float]:
    """(return code, peak RSS in MB, wall seconds) of the crawl process."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.2, help="FRONTIER_MIN_DELAY")
    parser.add_argument("--bomb-mb", type=int, default=1024, help="decompressed bomb size")
    parser.add_argument("--pages", type=int, default=40, help="pages of the normal devsite")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()

    t = time.monotonic()
    for encoding in ("gzip", "deflate", "br"):
        h.bomb_body(encoding, args.bomb_mb * MB)
    print(f"bombs built in {time.monotonic() - t:.1f}s", flush=True)

    server = h.HostileServer()
    table = cases(args.bomb_mb)
    if args.only:
        table = {k: v for k, v in table.items() if k in args.only.split(",")}
    addresses = {}
    for i, (name, (_, routes)) in enumerate(table.items()):
        address = f"127.0.0.{150 + i}"
        addresses[name] = address
        for path, route, prefix in routes:
            server.route(address, path, route, prefix=prefix)
    graph = build_site([HostSpec("127.0.0.220", pages=args.pages)])
    with server, SiteServer(graph) as normal, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        seeds = [server.url(addresses[n], seed) for n, (seed, _) in table.items()]
        seeds += normal.seeds()
        write_site(tmp / "sites", "hostile", "[urls]\nmax_depth = 200\n")
        cmd = crawl_command(
            tmp,
            "hostile",
            seeds=seeds,
            sites_dir=tmp / "sites",
            settings={
                "ALLOW_PRIVATE_ADDRESSES": True,
                "FRONTIER_MIN_DELAY": args.delay,
                "LOG_LEVEL": "INFO",
            },
        )
        code, rss, wall = run_crawl_measured(cmd, args.timeout)
        server.wait_idle()
        stats = (
            json.loads((tmp / "stats.json").read_text()) if (tmp / "stats.json").exists() else {}
        )
        wanted = graph.reachable(normal.seeds())
        fetched = set(normalized(normal.records))
        rows = []
        for name, address in addresses.items():
            hits = server.hits_of(address)
            if not hits:
                rows.append({"case": name, "requests": 0})
                continue
            rows.append(
                {
                    "case": name,
                    "requests": len(hits),
                    "held_s": round(max(x.end for x in hits) - min(x.start for x in hits), 1),
                    "sent_MB": round(sum(x.sent for x in hits) / MB, 2),
                    "statuses": sorted({x.status for x in hits}),
                }
            )
    result = {
        "returncode": code,
        "peak_rss_mb": round(rss, 1),
        "wall_s": round(wall, 1),
        "normal_site_complete": wanted <= fetched,
        "normal_site": f"{len(wanted & fetched)}/{len(wanted)} pages",
        "finish_reason": stats.get("finish_reason"),
        "limits": {k: v for k, v in sorted(stats.items()) if k.startswith("limits/")},
        "retry_after": {k: v for k, v in sorted(stats.items()) if k.startswith("retry_after/")},
        "rejected": {k: v for k, v in sorted(stats.items()) if k.startswith("frontier/rejected/")},
        "cases": rows,
    }
    print(f"{'case':28} {'requests':>8} {'held s':>7} {'sent MB':>8}  statuses")
    for row in rows:
        print(f"{row['case']:28} {row['requests']:>8} {row.get('held_s', '-'):>7} "
              f"{row.get('sent_MB', '-'):>8}  {row.get('statuses', '')}")
    for key in ("returncode", "peak_rss_mb", "wall_s", "normal_site", "normal_site_complete",
                "finish_reason", "limits", "retry_after", "rejected"):
        print(f"{key}: {result[key]}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if code == 0 and result["normal_site_complete"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
