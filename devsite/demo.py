"""A real crawl on a fresh machine with nothing else running: ``python -m devsite.demo``.

Serves the bundled multi-host test site on loopback addresses (127.0.0.2, 127.0.0.3, ...), then
runs ``scrapy crawl web`` on it exactly as a user would, on the embedded default (in-memory
frontier; no Redis, no other server), and prints what it fetched and how politely.

The demo keeps its pages apart from the user's: its own index (``demo-index.sqlite``), which a
rerun replaces (the test site's ports change on every run, so keeping the old pages would pile
up dead URLs), and its own feed (``demo-pages.jsonl``), both in the current directory.
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
    parser.add_argument(
        "--index", default="demo-index.sqlite", help="the demo's index (replaced on every run)"
    )
    parser.add_argument("--record", default="demo-record.jsonl", help="the crawl record")
    args = parser.parse_args(argv)
    output = Path(args.output).resolve()
    index = Path(args.index).resolve()
    for stale in (index, *(Path(f"{index}{suffix}") for suffix in ("-wal", "-shm"))):
        stale.unlink(missing_ok=True)  # the previous demo's pages, at ports long gone

    # a record is appended to (a resumed crawl adds a session): each demo starts a new one
    record = Path(args.record).resolve()
    record.unlink(missing_ok=True)
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
            "-O", str(output),
            "-s", f"INDEX_PATH={index}",
            "-s", "ALLOW_PRIVATE_ADDRESSES=True",  # the demo site lives on loopback
            "-s", f"FRONTIER_MIN_DELAY={args.min_delay}",
            "-s", f"STATS_FILE={stats_path}",
            "-s", f"RECORD_PATH={record}",  # kept: the stats file's folder is removed
        ]
        print("demo: " + " ".join(cmd[2:]))
        crawl = subprocess.run(cmd, check=False, cwd=_REPO)
        if crawl.returncode != 0 or not stats_path.exists():
            print(f"demo: the crawl failed (exit {crawl.returncode})", file=sys.stderr)
            return 1
        stats = json.loads(stats_path.read_text())
        print(
            f"demo: crawled {stats.get('pages/ok', 0)} pages of "
            f"{stats.get('frontier/hosts', 0)} hosts in {stats.get('elapsed_time_seconds', 0):.1f}s"
            f", {stats.get('item_scraped_count', 0)} items written to {_shown(output)}; "
            f"rejected: {_rejections(stats)}"
        )
        print(
            "demo: now search what was crawled:  .venv/bin/scrapy search "
            f'--index {_shown(index)} "harvest saffron"'
        )
        print(
            f"demo: and see it in charts:  .venv/bin/scrapy report {_shown(record)} "
            "-o demo-report.html"
        )
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


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is inside it (the README's case)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _rejections(stats: dict[str, object]) -> str:
    prefix = "frontier/rejected/"
    parts = [f"{k[len(prefix):]}={v}" for k, v in sorted(stats.items()) if k.startswith(prefix)]
    return ", ".join(parts) or "none"


if __name__ == "__main__":
    sys.exit(main())
