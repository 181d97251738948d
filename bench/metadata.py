"""Markdown, metadata and language: their CPU per page, and the language model's accuracy.

Run from the project root::

    .venv/bin/python bench/metadata.py                  # both sections
    .venv/bin/python bench/metadata.py --pages 60 --repeat 3

1. **CPU per page** on real HTML under ``/usr/share/doc`` (the documentation subset
   ``bench/maintext.py`` reads: up to ``--pages`` files of 1 to 200 KB, round robin over the
   packages), through :func:`crawler.content.html.parse_page` as the spider calls it, with the
   crawl's limits: today's parse (main text on, as near-duplicate detection wants it), then with
   Markdown, with metadata and language, with both. CPU time of this process, the best of
   ``--repeat`` passes (the machine is shared); the model is loaded before timing.
2. **Language-ID accuracy** on the labelled paragraphs of the translated manual pages
   (``devsite.manpages.labelled_paragraphs``: prose by human translators, 16 languages on this
   machine), a held-out part apart: ``crc32(text) % 4 == 0``, never looked at while choosing
   ``SAMPLE_CHARS``/``MIN_LETTERS`` (which were chosen from the model's documentation, not
   from this set). Whole paragraphs, and their first 80 characters (a short page: where the
   declared language takes over in a crawl), and the six pages of the test site through the
   whole parse.
3. ``--crawl N``: **whole-crawl CPU per page**: ``/usr/share/doc`` served by ``http.server`` on
   loopback (its pages and directory listings), ``scrapy crawl web`` to N pages with Markdown
   and metadata off, then on, twice; the crawl process's user+sys CPU (``os.wait4``), start-up
   and the model's load (~0.5 s) included.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.config import defaults
from crawler.content.html import parse_page
from crawler.content.language import identify_language
from devsite.manpages import PAGES, labelled_paragraphs, multilingual_pages

CONFIGS = {
    "today (main text)": {},
    "+ markdown": {"markdown": True},
    "+ metadata, language": {"metadata": True},
    "+ both": {"markdown": True, "metadata": True},
}


def doc_pages(root: Path, limit: int, max_kb: int = 200) -> list[bytes]:
    """Up to ``limit`` HTML files of 1 to ``max_kb`` KB under ``root``, round robin over its
    packages (as ``bench/maintext.py`` picks them)."""
    by_tree: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*.htm*")):
        if path.is_file() and 1024 < path.stat().st_size <= max_kb * 1024:
            by_tree.setdefault(path.relative_to(root).parts[0], []).append(path)
    chosen: list[Path] = []
    while len(chosen) < limit and any(by_tree.values()):
        for tree in sorted(by_tree):
            if by_tree[tree] and len(chosen) < limit:
                chosen.append(by_tree[tree].pop(0))
    return [p.read_bytes() for p in chosen]


def section_cpu(pages: list[bytes], repeat: int) -> None:
    identify_language("Le modèle est chargé avant la mesure, une fois par processus. " * 3)
    size = statistics.fmean(len(p) for p in pages) / 1024
    print(f"== 1. CPU per page: {len(pages)} pages of ~{size:.0f} KB under /usr/share/doc, "
          f"best of {repeat}")
    base = 0.0
    for name, options in CONFIGS.items():
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            for body in pages:
                page = parse_page(
                    body, "utf-8", main_text=True, max_links=defaults.PAGE_MAX_LINKS,
                    max_text=defaults.CONTENT_MAX_TEXT, url="http://docs.example/a/",
                    **options,
                ).page
                if options.get("metadata"):  # as crawler.sites.analysis does
                    identify_language(page.main_text, page.metadata.get("html_lang", ""))
            best = min(best, time.process_time() - start)
        ms = 1000 * best / len(pages)
        base = base or ms
        print(f"  {name:24s} {ms:7.2f} ms/page  {100 * (ms / base - 1):+6.1f} %")


def _score(
    labelled: dict[str, list[str]], held_out: bool, chars: int
) -> tuple[int, int, Counter[str]]:
    right = total = 0
    misses: Counter[str] = Counter()
    for code, texts in labelled.items():
        for text in texts:
            if (zlib.crc32(text.encode()) % 4 == 0) != held_out:
                continue
            found = identify_language(text[:chars]).code if chars else identify_language(text).code
            total += 1
            if found == code:
                right += 1
            else:
                misses[f"{code}->{found or '?'}"] += 1
    return right, total, misses


def section_accuracy(per_language: int) -> None:
    labelled = labelled_paragraphs(per_language)
    count = sum(len(t) for t in labelled.values())
    print(f"\n== 2. Language ID: {count} paragraphs in {len(labelled)} languages "
          f"({', '.join(sorted(labelled))})")
    for chars, label in ((0, "whole paragraphs"), (80, "first 80 characters")):
        for held_out in (False, True):
            right, total, misses = _score(labelled, held_out, chars)
            part = "held-out" if held_out else "tuning"
            top = ", ".join(f"{k} {v}" for k, v in misses.most_common(4))
            print(f"  {label:20s} {part:8s} {right}/{total} = {right / max(total, 1):.3f}"
                  f"  misses: {top or '-'}")
    pages = multilingual_pages()
    right = 0
    for path, code, _ in PAGES:
        page = parse_page(pages[path].encode(), "utf-8", metadata=True).page
        found = identify_language(page.main_text, page.metadata.get("html_lang", ""))
        right += found.code == code
    print(f"  test site pages (whole parse)  {right}/{len(PAGES)}")
    start = time.process_time()
    texts = [t for ts in labelled.values() for t in ts]
    for text in texts:
        identify_language(text)
    print(f"  cost: {1000 * (time.process_time() - start) / len(texts):.3f} ms per paragraph")


def section_crawl(pages: int, root: str) -> None:
    project = Path(__file__).resolve().parents[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
         root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    print(f"\n== 3. Whole crawl of {root} over http.server, {pages} pages")
    try:
        time.sleep(1.0)  # (a benchmark: the server is up long before the crawl asks)
        for run in range(2):
            for label, on in (("off", False), ("on", True)):
                with tempfile.TemporaryDirectory() as tmp:
                    out = Path(tmp)
                    (out / "seeds.txt").write_text(f"http://127.0.0.1:{port}/\n")
                    cmd = [sys.executable, "-m", "scrapy", "crawl", "web",
                           "-a", f"seeds={out / 'seeds.txt'}", "-o", f"{out / 'i.jsonl'}:jsonlines"]
                    for key, value in {
                        "ALLOW_PRIVATE_ADDRESSES": True, "FRONTIER_MIN_DELAY": 0,
                        "FRONTIER_DELAY_FACTOR": 0, "STATS_FILE": out / "stats.json",
                        "INDEX_PATH": out / "index.sqlite", "LOG_LEVEL": "WARNING",
                        "CONTENT_MARKDOWN": on, "CONTENT_METADATA": on,
                        "CLOSESPIDER_PAGECOUNT": pages,
                    }.items():
                        cmd += ["-s", f"{key}={value}"]
                    proc = subprocess.Popen(cmd, cwd=project, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL,
                                            env=dict(os.environ, PYTHONPATH=str(project)))
                    _, _, usage = os.wait4(proc.pid, 0)
                    fetched = json.loads((out / "stats.json").read_text())[
                        "response_received_count"]
                cpu = usage.ru_utime + usage.ru_stime
                print(f"  run {run} {label:3s} {fetched} pages, {cpu:.2f} CPU s, "
                      f"{1000 * cpu / fetched:.2f} ms/page")
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-language", type=int, default=60)
    parser.add_argument("--root", default="/usr/share/doc")
    parser.add_argument("--crawl", type=int, default=0, metavar="N",
                        help="also crawl N pages of --root with everything off, then on")
    args = parser.parse_args()
    pages = doc_pages(Path(args.root), args.pages)
    if pages:
        section_cpu(pages, args.repeat)
    else:
        print(f"== 1. no HTML under {args.root}")
    section_accuracy(args.per_language)
    if args.crawl:
        section_crawl(args.crawl, args.root)


if __name__ == "__main__":
    main()
