"""``scrapy report <site | JOBDIR | record file>...``: one self-contained HTML page of charts.

Reads the crawl record (``crawler/extensions/recorder.py``) from where the crawl wrote it: a
JOBDIR's ``record.jsonl``, a record file, or for a site name the place a crawl of that site
without JOBDIR writes it (``RECORD_PATH``, else ``crawl-record-<site>.jsonl`` here). Several
arguments (one per worker of a shared crawl) are merged into one report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands import counted
from crawler.extensions.recorder import record_path
from crawler.report.build import build_report
from crawler.report.recordfile import RecordError, read_records


def find_records(target: str, settings: Any) -> list[Path]:
    """The record files one argument names: a file, a directory's ``record*.jsonl`` (a JOBDIR,
    or a folder of workers' records), or a site's default record."""
    path = Path(target)
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(path.glob("record*.jsonl")) + sorted(path.glob("*.record.jsonl"))
    if "/" in target or target.endswith(".jsonl"):
        return []
    default = record_path(settings, target)
    return [default] if default.is_file() else []


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] <site | JOBDIR | record file> [...]"

    def short_desc(self) -> str:
        return "Write a crawl's report: one HTML file with charts, no network needed"

    def long_desc(self) -> str:
        return (
            "Write one self-contained HTML file with charts of a crawl: pages per second and "
            "frontier size over time, per-host gaps against the delay asked, response times, "
            "status codes, content types, depth, rejections and duplicates, top hosts, broken "
            "links, robots.txt outcomes and workers. Give a JOBDIR, record files (one per "
            "worker of a shared crawl: they are merged), or a site name."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "-o", "--output", metavar="FILE",
            help="the HTML file (default: crawl-report-<site>.html, or report.html in a JOBDIR)",
        )  # fmt: skip
        parser.add_argument("--title", help="the report's title")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if not args:
            raise UsageError("give a site, a JOBDIR or record files, e.g. scrapy report web")
        paths: list[Path] = []
        for target in args:
            found = find_records(target, self.settings)
            if not found:
                print(f"error: no crawl record for {target!r}", file=sys.stderr)
                self.exitcode = 1
                return
            paths += [p for p in found if p not in paths]
        try:
            record = read_records(paths)
        except (OSError, RecordError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if not record.sessions:
            print(f"error: {', '.join(map(str, paths))}: empty record", file=sys.stderr)
            self.exitcode = 1
            return
        out = Path(opts.output) if opts.output else _default_output(args[0], record)
        html = build_report(record, title=opts.title or "")
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(out)
        print(f"{out} ({counted(len(record.fetches), 'fetch', 'fetches')}, "
              f"{counted(len(record.workers), 'worker')}, {counted(len(paths), 'record file')})")


def _default_output(target: str, record: Any) -> Path:
    path = Path(target)
    if path.is_dir():
        return path / "report.html"
    site = next((s.site for s in record.sessions if s.site), "crawl")
    if path.is_file():
        return path.with_name(f"{path.name.split('.')[0]}-report.html")
    return Path(f"crawl-report-{site}.html")
