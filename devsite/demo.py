"""A real crawl on a fresh machine with nothing else running: ``python -m devsite.demo``.

Serves the bundled multi-host test site on loopback addresses (127.0.0.2, 127.0.0.3, ...), then
runs ``scrapy crawl web`` on it exactly as a user would, on the embedded default (in-memory
frontier; no Redis, no other server), and prints what it fetched and how politely.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The checkout: ``scrapy crawl`` finds the project's scrapy.cfg there, ``-m devsite`` the package.
_REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devsite.demo", description=__doc__)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--min-delay", type=float, default=0.25, help="FRONTIER_MIN_DELAY")
    parser.add_argument("--output", default="demo-pages.jsonl", help="items feed (JSON lines)")
    parser.add_argument("--record", default="demo-record.jsonl", help="the crawl record")
    args = parser.parse_args(argv)

    # a record is appended to (a resumed crawl adds a session): each demo starts a new one
    (_REPO / args.record).unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="crawler-demo-"))
    seeds = work / "seeds.txt"
    stats_path = work / "stats.json"
    site = subprocess.Popen(
        [sys.executable, "-m", "devsite", "--hosts", str(args.hosts),
         "--pages", str(args.pages), "--seeds-file", str(seeds)],
        stdout=subprocess.DEVNULL,
        cwd=_REPO,  # devsite is not installed: it is importable from the checkout only
    )
    try:
        deadline = time.monotonic() + 20
        while not seeds.exists():
            if site.poll() is not None or time.monotonic() > deadline:
                print("demo: the test site did not start", file=sys.stderr)
                return 1
            time.sleep(0.05)
        print(f"demo: serving {args.hosts} hosts, seeds in {seeds}")
        cmd = [
            sys.executable, "-m", "scrapy", "crawl", "web",
            "-a", f"seeds={seeds}",
            "-O", args.output,
            "-s", "ALLOW_PRIVATE_ADDRESSES=True",  # the demo site lives on loopback
            "-s", f"FRONTIER_MIN_DELAY={args.min_delay}",
            "-s", f"STATS_FILE={stats_path}",
            "-s", f"RECORD_PATH={args.record}",  # kept: the stats file's folder is removed
        ]
        print("demo: " + " ".join(cmd[2:]))
        crawl = subprocess.run(cmd, check=False, cwd=_REPO)
        if crawl.returncode != 0 or not stats_path.exists():
            print(f"demo: the crawl failed (exit {crawl.returncode})", file=sys.stderr)
            return 1
        stats = json.loads(stats_path.read_text())
        print(
            f"demo: crawled {stats.get('response_received_count', 0)} pages of "
            f"{stats.get('frontier/hosts', 0)} hosts in {stats.get('elapsed_time_seconds', 0):.1f}s"
            f", {stats.get('item_scraped_count', 0)} items written to {args.output}; "
            f"rejected: {_rejections(stats)}"
        )
        print('demo: now search what was crawled:  .venv/bin/scrapy search "harvest saffron"')
        print(f"demo: and see it in charts:  .venv/bin/scrapy report {args.record} "
              "-o demo-report.html")
        return 0
    finally:
        site.send_signal(signal.SIGTERM)
        try:
            site.wait(timeout=10)
        except subprocess.TimeoutExpired:
            site.kill()
        for f in work.iterdir():
            f.unlink()
        os.rmdir(work)


def _rejections(stats: dict[str, object]) -> str:
    prefix = "frontier/rejected/"
    parts = [f"{k[len(prefix):]}={v}" for k, v in sorted(stats.items()) if k.startswith(prefix)]
    return ", ".join(parts) or "none"


if __name__ == "__main__":
    sys.exit(main())
