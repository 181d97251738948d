"""A CDXJ index of a crawl's WARC files (the format pywb and OutbackCDX read), made with
cdxj-indexer (Webrecorder's indexer, on PyPI) when the crawl closes its files; and the indexes
already written merged into one (a WACZ of a directory: indexing reads every record again and
costs ~40 s of CPU per GB, merging sorted lines almost nothing: BENCHMARKS.md).

Beside the responses and revisits, the index holds each page's ``conversion`` record (its text or
Markdown, ``crawler.archive.records.conversion_record``), under the page's URL with its own
``mime``, so a reader finds a page's text as it finds the page."""

from __future__ import annotations

import heapq
import json
import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any


def write_cdxj(files: Sequence[Path], target: Path) -> Path:
    """Index ``files`` into ``target`` (sorted, as a CDXJ file must be); the path written."""
    # imported here: cdxj-indexer pulls in pyamf, which warns at import (pkg_resources) and
    # would add a line to every crawl's start-up, WARC or not. That warning (setuptools
    # deprecating pkg_resources, which pyamf tries and does without) is silenced here: it
    # ended every WARC crawl with three lines about a dependency of a dependency.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
        from cdxj_indexer.main import CDXJIndexer

    class _Indexer(CDXJIndexer):  # type: ignore[misc]
        """cdxj-indexer's default records, and the conversion records (a page's text)."""

        def filter_record(self, record: Any) -> bool:
            return bool(record.rec_type == "conversion" or super().filter_record(record))

    tmp = target.with_name(target.name + ".open")
    # dir_root: the index names each file relative to the WARC directory, as pywb expects
    root = str(Path(files[0]).parent) if files else None
    _Indexer(
        output=str(tmp), inputs=[str(f) for f in files], sort=True, dir_root=root
    ).process_all()
    tmp.replace(target)
    return target


def _filename(line: str) -> str | None:
    """The WARC file a CDXJ line points into."""
    parts = line.split(" ", 2)  # key, timestamp, JSON
    try:
        return json.loads(parts[2]).get("filename") if len(parts) == 3 else None
    except (ValueError, AttributeError):
        return None


def covering_indexes(directory: Path, names: Collection[str]) -> list[Path] | None:
    """The ``.cdxj`` files of ``directory`` whose lines point into ``names`` (WARC file
    names), when together they cover every one of them; None when some file has no index (the
    caller indexes the files instead)."""
    wanted = set(names)
    covered: set[str] = set()
    found = []
    for index in sorted(Path(directory).glob("*.cdxj")):
        with index.open(encoding="utf-8") as lines:
            files = {name for line in lines if (name := _filename(line)) is not None}
        if files & wanted:
            found.append(index)
            covered |= files & wanted
    return found if covered == wanted else None


def merge_cdxj(indexes: Sequence[Path], target: Path, names: Collection[str]) -> Path:
    """Merge sorted CDXJ ``indexes`` into one sorted ``target``, keeping the lines that point
    into ``names``; streamed (a crawl of many GB has millions of lines)."""
    wanted = set(names)
    tmp = target.with_name(target.name + ".open")
    handles = [index.open(encoding="utf-8") for index in indexes]
    try:

        def kept(lines: Iterator[str]) -> Iterator[str]:
            for line in lines:
                if line.strip() and _filename(line) in wanted:
                    yield line if line.endswith("\n") else line + "\n"

        with tmp.open("w", encoding="utf-8") as out:
            out.writelines(heapq.merge(*(kept(iter(h)) for h in handles)))
    finally:
        for handle in handles:
            handle.close()
    tmp.replace(target)
    return target
