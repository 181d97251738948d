"""Helpers for tests that run real crawls: ``scrapy crawl`` in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.devsite.server import RequestRecord
from crawler.frontier import normalize_url

PROJECT = Path(__file__).resolve().parent.parent


@dataclass
class CrawlResult:
    returncode: int
    log: str
    stats: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)


def run_crawl(
    tmp_path: Path,
    site: str = "web",
    *,
    seeds: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    sites_dir: Path | None = None,
    args: dict[str, str] | None = None,
    timeout: float = 120,
) -> CrawlResult:
    """Run ``scrapy crawl SITE`` from the project root and collect its log, stats and items."""
    stats_path = tmp_path / "stats.json"
    items_path = tmp_path / "items.jsonl"
    log_path = tmp_path / "crawl.log"
    cmd = [sys.executable, "-m", "scrapy", "crawl", site, "-O", f"{items_path}:jsonlines"]
    if seeds is not None:
        seeds_file = tmp_path / "seeds.txt"
        seeds_file.write_text("".join(f"{s}\n" for s in seeds), encoding="utf-8")
        cmd += ["-a", f"seeds={seeds_file}"]
    for key, value in (args or {}).items():
        cmd += ["-a", f"{key}={value}"]
    all_settings: dict[str, Any] = {
        "STATS_FILE": stats_path,
        "LOG_FILE": log_path,
        "LOG_LEVEL": "DEBUG",
    }
    if sites_dir is not None:
        all_settings["SITES_DIR"] = sites_dir
    all_settings.update(settings or {})
    for key, value in all_settings.items():
        cmd += ["-s", f"{key}={value}"]
    env = dict(os.environ, PYTHONPATH=str(PROJECT))
    proc = subprocess.run(
        cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    log = proc.stderr + (log_path.read_text(errors="replace") if log_path.exists() else "")
    result = CrawlResult(proc.returncode, log)
    if stats_path.exists():
        result.stats = json.loads(stats_path.read_text())
    if items_path.exists():
        result.items = [json.loads(line) for line in items_path.read_text().splitlines() if line]
    return result


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
    return [normalize_url(record_url(r))[0] for r in records]
