"""WACZ 1.1.1: a crawl's WARC files, their CDXJ index, the list of its pages and a manifest with
SHA-256 hashes, in one zip file that replay tools open as is (ReplayWeb.page, pywb's
``wb-manager add --unpack-wacz``) and that an archive can check (``wacz validate``).

Written here with the standard library rather than with Webrecorder's packager (py-wacz, on
PyPI): py-wacz installs next to the crawler's pins, but brings ~40 packages into the crawler's
runtime (frictionless, typer, rich, jsonschema, ...) and reads every record again to find
pages, while the package is four kinds of zip member and a manifest, and the crawler has the
CDXJ indexer already. py-wacz's validator checks what this writes (``tests/test_wacz.py``).

Layout (https://specs.webrecorder.net/wacz/1.1.1/):

- ``archive/<name>.warc.gz``: the WARC files, stored (not deflated: they are gzip already,
  and a reader seeks into them by the index's offsets);
- ``indexes/index.cdx``: one CDXJ index of all of them, sorted (the uncompressed form the spec
  allows, ~300 bytes a record): the crawl's own indexes merged when they cover the files,
  else made afresh;
- ``pages/pages.jsonl``: the HTML pages answered 200 (a header line, then ``url``, ``ts`` and
  an ``id`` each), what a replay tool lists as entry points;
- ``datapackage.json``: every member's path, size and ``sha256:`` hash, the WACZ version, the
  creation time, the first page (``mainPageURL``); ``datapackage-digest.json``: its hash.

The package is written as ``<target>.open`` and renamed when complete, like the WARC files.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crawler.archive.cdxj import merge_cdxj, write_cdxj
from crawler.archive.naming import OPEN_SUFFIX

WACZ_VERSION = "1.1.1"
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
_HTML = ("text/html", "application/xhtml+xml")
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class WaczSummary:
    """What a package holds: its path, WARC files, pages and size."""

    path: Path
    warcs: int
    pages: int
    bytes: int


def pages_from_cdxj(lines: Sequence[str]) -> list[dict[str, str]]:
    """The pages of a CDXJ index: each URL answered 200 with HTML, at its first capture, in
    time order; robots.txt and everything else left out."""
    first: dict[str, tuple[str, str]] = {}
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) != 3:
            continue
        _, stamp, raw = parts
        try:
            fields = json.loads(raw)
        except ValueError:
            continue
        mime = str(fields.get("mime", "")).split(";")[0].strip().lower()
        url = fields.get("url")
        if str(fields.get("status")) != "200" or mime not in _HTML or not url:
            continue
        if url not in first or stamp < first[url][0]:
            first[url] = (stamp, url)
    return [
        {"id": hashlib.sha1(url.encode()).hexdigest()[:16], "url": url, "ts": _iso(stamp)}
        for stamp, url in sorted(first.values())
    ]


def package_wacz(
    warcs: Sequence[Path],
    target: Path,
    *,
    title: str = "",
    software: str = "crawler (Scrapy project)",
    indexes: Sequence[Path] = (),
) -> WaczSummary:
    """Package ``warcs`` (finished ``.warc.gz`` files with distinct names) into ``target``.
    ``indexes``: CDXJ files already written that cover them (the crawl's own, at its end;
    ``cdxj.covering_indexes``), merged instead of indexing the files again."""
    warcs = [Path(w) for w in warcs]
    if not warcs:
        raise ValueError("no WARC files to package")
    names = [w.name for w in warcs]
    if len(set(names)) != len(names):
        raise ValueError("two WARC files share a name: " + ", ".join(sorted(names)))
    target = Path(target)
    partial = target.with_name(target.name + OPEN_SUFFIX)
    resources: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="wacz-") as tmp:
        if indexes:
            index = merge_cdxj(indexes, Path(tmp) / "index.cdx", names)
        else:
            index = write_cdxj(warcs, Path(tmp) / "index.cdx")
        lines = index.read_text(encoding="utf-8").splitlines()
        pages = pages_from_cdxj(lines)
        pages_file = Path(tmp) / "pages.jsonl"
        with pages_file.open("w", encoding="utf-8") as out:
            for entry in [PAGES_HEADER, *pages]:
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
        with zipfile.ZipFile(partial, "w", allowZip64=True) as wacz:
            for warc in warcs:
                resources.append(_add(wacz, warc, f"archive/{warc.name}", zipfile.ZIP_STORED))
            resources.append(_add(wacz, index, "indexes/index.cdx", zipfile.ZIP_DEFLATED))
            resources.append(_add(wacz, pages_file, "pages/pages.jsonl", zipfile.ZIP_DEFLATED))
            package: dict[str, object] = {
                "profile": "data-package",
                "resources": resources,
                "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "wacz_version": WACZ_VERSION,
                "software": software,
            }
            if title:
                package["title"] = title
            if pages:
                package["mainPageURL"] = pages[0]["url"]
                package["mainPageDate"] = pages[0]["ts"]
            manifest = json.dumps(package, indent=2).encode("utf-8")
            wacz.writestr(_info("datapackage.json", zipfile.ZIP_DEFLATED), manifest)
            digest = {
                "path": "datapackage.json",
                "hash": "sha256:" + hashlib.sha256(manifest).hexdigest(),
            }
            wacz.writestr(
                _info("datapackage-digest.json", zipfile.ZIP_DEFLATED),
                json.dumps(digest, indent=2).encode("utf-8"),
            )
    partial.replace(target)
    return WaczSummary(target, len(warcs), len(pages), target.stat().st_size)


def _info(name: str, compression: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, datetime.now(UTC).timetuple()[:6])
    info.compress_type = compression
    info.external_attr = 0o644 << 16
    return info


def _add(wacz: zipfile.ZipFile, path: Path, name: str, compression: int) -> dict[str, object]:
    """Copy ``path`` into the package as ``name``, hashing it on the way (one read)."""
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as src, wacz.open(_info(name, compression), "w", force_zip64=True) as dst:
        while chunk := src.read(_CHUNK):
            sha.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    return {
        "name": Path(name).name.lower(),
        "path": name,
        "hash": "sha256:" + sha.hexdigest(),
        "bytes": size,
    }


def _iso(stamp: str) -> str:
    """A CDXJ timestamp (14 digits, or more) as ISO 8601 in UTC."""
    digits = (stamp + "00000000000000")[:14]
    moment = datetime.strptime(digits, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
