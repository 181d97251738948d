"""A CDXJ index of a crawl's WARC files (the format pywb and OutbackCDX read), made with
cdxj-indexer (Webrecorder's indexer, on PyPI) when the crawl closes its files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_cdxj(files: Sequence[Path], target: Path) -> Path:
    """Index ``files`` into ``target`` (sorted, as a CDXJ file must be); the path written."""
    # imported here: cdxj-indexer pulls in pyamf, which warns at import (pkg_resources) and
    # would add a line to every crawl's start-up, WARC or not
    from cdxj_indexer.main import CDXJIndexer

    tmp = target.with_name(target.name + ".open")
    # dir_root: the index names each file relative to the WARC directory, as pywb expects
    root = str(Path(files[0]).parent) if files else None
    CDXJIndexer(
        output=str(tmp), inputs=[str(f) for f in files], sort=True, dir_root=root
    ).process_all()
    tmp.replace(target)
    return target
