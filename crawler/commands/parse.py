"""``scrapy parse --spider <site> URL``: fetch and parse the one URL given, print what it makes.

Scrapy's own command, run without the frontier: under the crawler's scheduler the site spider
hands a page's links straight to the frontier, which then crawls the whole site (and the item
pipelines write every page into the index). Here Scrapy's plain scheduler runs, so the links come
back as requests that the command prints and follows only as deep as ``--depth`` asks; the item
pipelines (near-duplicates, the index) run only with ``--pipelines``; no progress line, no
end-of-crawl summary. robots.txt and address safety still apply.

Its output is what it parsed: the log shows warnings and errors only unless ``-L``/``--loglevel``
or ``-s LOG_LEVEL`` asks for more (Scrapy's start-up dump and stats dump were ~80 lines around
a one-page answer), and it exits with 1 when nothing was downloaded (unreachable, refused by
robots.txt or by address safety), so a script can tell.
"""

from __future__ import annotations

import argparse

from scrapy.commands.parse import Command as ScrapyParseCommand

from crawler.commands import pipe_safe

_SUMMARY = "crawler.extensions.summary.CrawlSummary"
# What a one-URL parse sets unless the command line sets it (-s wins).
_ONE_URL = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "TUNING": {"progress_interval": 0},  # no progress line
    "RECORD_ENABLED": False,  # no crawl record (crawl-record-<site>.jsonl) for one page
}


class Command(ScrapyParseCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        given = {item.split("=", 1)[0] for item in (getattr(opts, "set", None) or [])}
        for key, value in _ONE_URL.items():
            if key not in given:
                self.settings.set(key, value, priority="cmdline")
        # no end-of-crawl summary for one page
        extensions = {**self.settings.getdict("EXTENSIONS"), _SUMMARY: None}
        self.settings.set("EXTENSIONS", extensions, priority="cmdline")
        if not opts.pipelines and "ITEM_PIPELINES" not in given:
            self.settings.set("ITEM_PIPELINES", {}, priority="cmdline")
        if "LOG_LEVEL" not in given and not opts.loglevel:
            self.settings.set("LOG_LEVEL", "WARNING", priority="cmdline")

    @pipe_safe
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)
        if self.spidercls is not None and self.first_response is None:
            self.exitcode = self.exitcode or 1  # Scrapy logged "No response downloaded"
