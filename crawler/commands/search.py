"""``scrapy search "query"``: the top results of the crawl's full-text index.

Each result shows its title, URL and a snippet with the matching words in [brackets]. A page
found only through the anchor text of links to it is marked, and says what others call it;
``--site`` keeps one site's pages. The index is the one the crawl wrote (``INDEX_PATH``, or
``crawl-index.sqlite`` under ``JOBDIR`` or in the current directory; ``--index`` overrides).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.backends.registry import BackendError, open_index
from crawler.commands import pipe_safe
from crawler.index import IndexAccessError, QuerySyntaxError, SearchResult


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return '[options] "query"'

    def short_desc(self) -> str:
        return "Search the pages of the crawl's full-text index"

    def long_desc(self) -> str:
        return (
            "Search the crawl's full-text index (BM25 over titles, text and the anchor text of "
            'links). Query syntax: words (all must match), "exact phrases", OR and NOT between '
            "terms, parentheses, prefix*, and title:, body: or anchor: before a word to search "
            "one field."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--site", help="only pages of this site (its config name)")
        parser.add_argument(
            "-n", "--limit", type=int, default=10, help="number of results (default: 10)"
        )
        parser.add_argument("--index", metavar="PATH", help="index file (default: INDEX_PATH)")
        parser.add_argument("--json", action="store_true", help="one JSON object per result")

    @pipe_safe
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if not args:
            raise UsageError("give a query, e.g. scrapy search \"web crawler\"")
        if opts.limit < 1:
            raise UsageError("--limit must be at least 1")
        if opts.index:
            self.settings.set("INDEX_PATH", opts.index, priority="cmdline")
        query = " ".join(args)
        try:
            index = open_index(self.settings, readonly=True)
        except (IndexAccessError, BackendError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        try:
            results = index.search(query, site=opts.site, limit=opts.limit)
        except QuerySyntaxError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        finally:
            index.close()
        if opts.json:
            for result in results:
                print(json.dumps(asdict(result), ensure_ascii=False))
            return
        print(format_results(query, results, site=opts.site))


def format_results(query: str, results: list[SearchResult], site: str | None = None) -> str:
    """The human-readable listing (kept separate so tests can check it without a process)."""
    where = f" on site {site!r}" if site else ""
    if not results:
        return f"No results for {query!r}{where}."
    lines = [f"Top {len(results)} results for {query!r}{where}:", ""]
    for rank, r in enumerate(results, 1):
        marks = []
        if not r.fetched:
            marks.append("not fetched: found by anchor text only")
        elif r.matched_anchor and not r.matched_text:
            marks.append("matched by anchor text")
        if r.status is not None and r.status >= 400:
            marks.append(f"HTTP {r.status}")
        title = r.title or "(no title)"
        lines.append(f"{rank:2d}. {title}" + (f"  [{'; '.join(marks)}]" if marks else ""))
        lines.append(f"    {r.url}" + (f"  ({r.site})" if r.site else ""))
        if r.snippet:
            lines.append(f"    {r.snippet}")
        if r.anchors:
            lines.append("    linked as: " + ", ".join(f'"{a}"' for a in r.anchors))
        if r.aliases:
            lines.append("    duplicates: " + ", ".join(r.aliases))
        lines.append("")
    return "\n".join(lines).rstrip()
