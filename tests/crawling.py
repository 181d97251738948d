"""Helpers for tests that run real crawls: ``scrapy crawl`` in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from crawler.frontier import normalize_url
from devsite.server import RequestRecord

PROJECT = Path(__file__).resolve().parent.parent


def loopback_settings(**extra: Any) -> dict[str, Any]:
    """The project's settings as shipped (middlewares, extensions, pipelines), plus what a
    loopback test site needs: private addresses allowed and short politeness delays."""
    return {
        "ALLOW_PRIVATE_ADDRESSES": True,
        "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0,
        **extra,
    }


@dataclass
class CrawlResult:
    returncode: int
    log: str
    stats: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)


def crawl_command(
    tmp_path: Path,
    site: str = "web",
    *,
    seeds: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    sites_dir: Path | None = None,
    args: dict[str, str] | None = None,
) -> list[str]:
    """``scrapy crawl SITE`` with its log, stats and items written under ``tmp_path``."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", site]
    cmd += ["-o", f"{tmp_path / 'items.jsonl'}:jsonlines"]
    if seeds is not None:
        seeds_file = tmp_path / "seeds.txt"
        seeds_file.write_text("".join(f"{s}\n" for s in seeds), encoding="utf-8")
        cmd += ["-a", f"seeds={seeds_file}"]
    for key, value in (args or {}).items():
        cmd += ["-a", f"{key}={value}"]
    all_settings: dict[str, Any] = {
        "STATS_FILE": tmp_path / "stats.json",
        "LOG_FILE": tmp_path / "crawl.log",
        # the shipped default is the working directory, which for a test is the checkout
        "INDEX_PATH": tmp_path / "index.sqlite",
        "LOG_LEVEL": "DEBUG",
    }
    if sites_dir is not None:
        all_settings["SITES_DIR"] = sites_dir
    all_settings.update(settings or {})
    for key, value in all_settings.items():
        cmd += ["-s", f"{key}={setting_text(value)}"]
    return cmd


def setting_text(value: Any) -> str:
    """A setting's value as ``-s`` takes it: a table (``TUNING``) as JSON."""
    return json.dumps(value) if isinstance(value, dict) else str(value)


def scrapy_frontier(settings: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """``scrapy frontier web <args>`` with these ``-s`` settings, run to its end."""
    cmd = [sys.executable, "-m", "scrapy", "frontier", "web", *args]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={setting_text(value)}"]
    return subprocess.run(
        cmd,
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# Crawls started by the running test: a test that fails before it collects them leaves them
# running (a worker waiting on a shared crawl never ends), so conftest's reaper kills what is
# still running when the test ends.
STARTED: list[subprocess.Popen[str]] = []


def start_crawl(tmp_path: Path, site: str = "web", **kwargs: Any) -> subprocess.Popen[str]:
    """Start a crawl in the background (to stop or kill it mid-way)."""
    for stale in ("stats.json", "items.jsonl", "crawl.log"):
        (tmp_path / stale).unlink(missing_ok=True)
    proc = subprocess.Popen(
        crawl_command(tmp_path, site, **kwargs),
        cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    STARTED.append(proc)
    return proc


def reap_crawls() -> list[int]:
    """Kill the crawls started since the last call that are still running; their pids."""
    left = [proc for proc in STARTED if proc.poll() is None]
    for proc in left:
        proc.kill()
        proc.communicate()
    STARTED.clear()
    return [proc.pid for proc in left]


def finish_crawl(
    proc: subprocess.Popen[str], tmp_path: Path, timeout: float = 120
) -> CrawlResult:
    """Wait for a crawl started with ``start_crawl`` and collect its log, stats and items."""
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise
    log_path = tmp_path / "crawl.log"
    log = stderr + (log_path.read_text(errors="replace") if log_path.exists() else "")
    result = CrawlResult(proc.returncode, log)
    stats_path, items_path = tmp_path / "stats.json", tmp_path / "items.jsonl"
    if stats_path.exists():
        result.stats = json.loads(stats_path.read_text())
    if items_path.exists():
        result.items = [json.loads(line) for line in items_path.read_text().splitlines() if line]
    return result


def run_crawl(
    tmp_path: Path, site: str = "web", *, timeout: float = 120, **kwargs: Any
) -> CrawlResult:
    """Run ``scrapy crawl SITE`` from the project root and collect its log, stats and items."""
    return finish_crawl(start_crawl(tmp_path, site, **kwargs), tmp_path, timeout)


def write_site(sites_dir: Path, name: str, body: str) -> Path:
    sites_dir.mkdir(parents=True, exist_ok=True)
    path = sites_dir / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}', encoding="utf-8")
    return path


def record_url(r: RequestRecord) -> str:
    return f"http://{r.host}:{r.port}{r.path}"


def per_host(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    hosts: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.start):
        hosts[r.host].append(r)
    return hosts


def normalized(records: list[RequestRecord]) -> list[str]:
    """Normalized URLs of the page requests (robots.txt fetches left out)."""
    return [normalize_url(record_url(r))[0] for r in records if r.path != "/robots.txt"]


@contextmanager
def serve_pages(
    host: str,
    pages: dict[str, str],
    content_type: str = "text/html; charset=utf-8",
    delay: float = 0.0,
    headers: dict[str, dict[str, str]] | None = None,
) -> Iterator[int]:
    """A real HTTP server on ``host`` (a free port, yielded) answering each path of ``pages``
    with its text in UTF-8 (``delay`` seconds late), and 404 for any other path. ``headers``:
    more response headers of a path (``{"/": {"Refresh": "0; url=/next"}}``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            time.sleep(delay)
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).get(self.path, {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
