"""``scrapy neardup A B``: explain the near-duplicate decision for two pages.

A and B are HTML files or URLs (fetched once, with the project's user agent). For each page it
prints the size of the extracted main text, then the estimated (MinHash) and exact (shingle
set) similarities, whether the LSH would make B a candidate of A, and whether the pipeline,
having seen A, would flag B, with the settings in effect (``NEARDUP_*``, ``-s`` to try others).
``--text`` also prints the extracted main texts, so an operator can see what was compared.
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands import pipe_safe
from crawler.content.config import NeardupConfig

if TYPE_CHECKING:
    from crawler.content.neardup_explain import Explanation

_MAX_BYTES = 16 * 1024 * 1024


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] <file-or-url-A> <file-or-url-B>"

    def short_desc(self) -> str:
        return "Explain whether page B would be flagged as a near-duplicate of page A"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--text", action="store_true", help="print the extracted main texts")
        parser.add_argument("--encoding", help="encoding of the HTML files (default: detect)")

    @pipe_safe
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        # Imported here: Scrapy imports every command module on every start, and datasketch
        # with numpy would add most of a second to each `scrapy` call.
        from crawler.content.html import parse_html
        from crawler.content.neardup_explain import explain

        assert self.settings is not None
        if len(args) != 2:
            raise UsageError("give exactly two HTML files or URLs")
        texts = []
        for source in args:
            try:
                body, encoding = self._load(source, opts.encoding)
            except (OSError, ValueError) as exc:
                print(f"error: cannot read {source}: {exc}", file=sys.stderr)
                self.exitcode = 1
                return
            # the spider's own parse: the near-duplicate pipeline compares exactly this text
            texts.append(parse_html(body, encoding).main_text)
        s = self.settings
        result = explain(
            texts[0],
            texts[1],
            threshold=NeardupConfig.from_settings(s).threshold,
        )
        print(format_explanation(args[0], args[1], result))
        if opts.text:
            for label, text in zip("AB", texts, strict=True):
                print(f"\n--- main text of {label} ---\n{text}")

    def _load(self, source: str, encoding: str | None) -> tuple[bytes, str | None]:
        if source.startswith(("http://", "https://")):
            assert self.settings is not None
            request = urllib.request.Request(
                source, headers={"User-Agent": self.settings.get("USER_AGENT", "crawler")}
            )
            timeout = self.settings.getfloat("DOWNLOAD_TIMEOUT", 20)
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(_MAX_BYTES)
                return body, encoding or response.headers.get_content_charset()
        return Path(source).read_bytes(), encoding


def format_explanation(name_a: str, name_b: str, e: Explanation) -> str:
    """The report printed by the command (kept separate so tests can check it)."""
    verdict = (
        f"FLAGGED: B would be recorded as a duplicate of A ({e.kind}: "
        + ("same normalized main text)" if e.kind == "exact" else
           f"estimated similarity {e.estimated:.3f} >= threshold {e.threshold:.2f})")
        if e.flagged
        else "not flagged: B would be kept as a page of its own"
        + (" (B has no main text)" if e.kind == "empty" else
           f" (estimated similarity {e.estimated:.3f} < threshold {e.threshold:.2f})"
           if e.candidate else " (no LSH band in common: never compared)")
    )
    lines = [
        f"A: {name_a}",
        f"   main text: {e.words[0]} words, {e.chars[0]} characters, {e.shingles[0]} distinct "
        f"{e.shingle_size}-word shingles, fingerprint {e.fingerprints[0][:16]}",
        f"B: {name_b}",
        f"   main text: {e.words[1]} words, {e.chars[1]} characters, {e.shingles[1]} distinct "
        f"{e.shingle_size}-word shingles, fingerprint {e.fingerprints[1][:16]}",
        "",
        f"settings: shingle size {e.shingle_size}, {e.num_perm} permutations, threshold "
        f"{e.threshold:.2f}, LSH {e.bands} bands x {e.rows} rows",
        f"exact duplicate (same normalized main text): {'yes' if e.exact_duplicate else 'no'}",
        f"estimated similarity (MinHash):       {e.estimated:.3f}",
        f"exact similarity (Jaccard, shingles): {e.exact:.3f}",
        f"LSH candidate: {'yes' if e.candidate else 'no'} "
        f"({e.shared_bands} of {e.bands} bands identical)",
        f"decision: {verdict}",
    ]
    if e.only_a or e.only_b:
        lines.append("")
        lines.append("some shingles only in A: " + "; ".join(e.only_a or ["-"]))
        lines.append("some shingles only in B: " + "; ".join(e.only_b or ["-"]))
    return "\n".join(lines)
