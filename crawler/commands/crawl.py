"""``scrapy crawl``, with the checks that must refuse a crawl before it starts.

Scrapy's own command, plus a preflight: a malformed ``ALLOWED_NETWORKS`` entry, and the
frontier store the settings choose
(``FRONTIER_STORE_CLASS``) may refuse the crawl, e.g. a shared store whose server is unreachable
or whose stored crawl was made with other politeness settings. A refusal is one clear line on
stderr and exit status 2, before any request goes out; scrapyd shows that line in the job's log.
"""

from __future__ import annotations

import argparse
import sys

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from crawler.addresses import policy_from_settings
from crawler.backends import backend_class


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError(
                "give one site: scrapy crawl <site> (scrapy list shows the configured sites)"
            )
        assert self.crawler_process is not None
        crawler = self._create_crawler(args[0])
        try:
            policy_from_settings(crawler.settings)
            store = backend_class(crawler.settings, "FRONTIER_STORE_CLASS")
            problems = store.preflight(crawler) if hasattr(store, "preflight") else []
        except ValueError as exc:  # BackendError too
            problems = [str(exc)]
        if problems:
            for problem in problems:
                print(f"crawl {args[0]} refused: {problem}", file=sys.stderr)
            self.exitcode = 2
            return
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
