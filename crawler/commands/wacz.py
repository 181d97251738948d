"""``scrapy wacz DIR``: package the finished WARC files of a directory as one WACZ.

A crawl can write its own package when it ends (``WARC_WACZ``), but a fleet's workers each
close on their own and several crawls may write into one directory: this packages every
finished ``*.warc.gz`` of ``DIR`` (``.open`` files of a running or killed crawl are left out:
the next crawl on that host finishes them) into ``-o FILE`` (default ``DIR/<dir name>.wacz``),
with one CDXJ index of all of them (``crawler/archive/wacz.py``): the crawls' own ``.cdxj``
files merged when they cover every WARC file, else a fresh index.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.archive.naming import WARC_SUFFIX


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] <warc-directory>"

    def short_desc(self) -> str:
        return "Package a directory's finished WARC files as a WACZ (index, pages, manifest)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", metavar="FILE", help="the .wacz to write")
        parser.add_argument("--title", default="", help="the package's title")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        # imported here: the indexer is not needed by any other command
        from crawler.archive.cdxj import covering_indexes
        from crawler.archive.wacz import package_wacz

        if len(args) != 1:
            raise UsageError("give one directory of WARC files")
        directory = Path(args[0])
        warcs = sorted(directory.glob("*" + WARC_SUFFIX))
        if not warcs:
            print(f"error: no finished *{WARC_SUFFIX} files in {directory}", file=sys.stderr)
            self.exitcode = 1
            return
        name = directory.resolve().name
        target = Path(opts.output) if opts.output else directory / f"{name}.wacz"
        started = time.monotonic()
        # the crawls' own indexes when they cover every file (merged: no second reading)
        indexes = covering_indexes(directory, [w.name for w in warcs]) or ()
        summary = package_wacz(warcs, target, title=opts.title or name, indexes=indexes)
        print(
            f"{summary.path}: {summary.warcs} WARC files, {summary.pages} pages, "
            f"{summary.bytes:,} bytes in {time.monotonic() - started:.1f} s"
        )
