"""WACZ packages (``WARC_WACZ`` at the end of a crawl, ``scrapy wacz DIR`` for a directory):
the layout of WACZ 1.1.1 (WARC files stored, not deflated; one CDXJ index; pages; a manifest
whose SHA-256 hashes and sizes match every member), checked here and by Webrecorder's own
validator (``wacz validate``, py-wacz, installed beside pywb in ``.venv-pywb``), and pywb
replays a page from the package alone (``wb-manager add --unpack-wacz``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.crawling import PROJECT, loopback_settings, run_crawl
from tests.test_warc_replay import PYWB_BIN, _get, pywb
from tests.warc_support import serve_site, site_pages, warc_files

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A crawl of the WARC test site with ``WARC_WACZ``; its WARC directory and site URL."""
    tmp = tmp_path_factory.mktemp("wacz")
    warc_dir = tmp / "warc"
    with serve_site(pages=site_pages()) as server:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        result = run_crawl(
            tmp, seeds=[site + "/"],
            settings=loopback_settings(WARC_ENABLED=True, WARC_DIR=warc_dir, WARC_WACZ=True),
        )
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["warc/wacz_bytes"] > 0
    return warc_dir, site


def _check_layout(path: Path, warcs: list[Path], site: str) -> None:
    with zipfile.ZipFile(path) as wacz:
        names = set(wacz.namelist())
        assert names == {
            *(f"archive/{w.name}" for w in warcs), "indexes/index.cdx", "pages/pages.jsonl",
            "datapackage.json", "datapackage-digest.json",
        }
        package = json.loads(wacz.read("datapackage.json"))
        assert package["wacz_version"] == "1.1.1" and package["profile"] == "data-package"
        listed = {r["path"]: r for r in package["resources"]}
        assert set(listed) == names - {"datapackage.json", "datapackage-digest.json"}
        for name, resource in listed.items():
            data = wacz.read(name)
            assert resource["hash"] == "sha256:" + hashlib.sha256(data).hexdigest(), name
            assert resource["bytes"] == len(data), name
        for w in warcs:  # stored as is: a reader seeks into them by the index's offsets
            info = wacz.getinfo(f"archive/{w.name}")
            assert info.compress_type == zipfile.ZIP_STORED
            assert wacz.read(info.filename) == w.read_bytes()
        digest = json.loads(wacz.read("datapackage-digest.json"))
        manifest = wacz.read("datapackage.json")
        assert digest["hash"] == "sha256:" + hashlib.sha256(manifest).hexdigest()
        header, *pages = [json.loads(x) for x in wacz.read("pages/pages.jsonl").splitlines()]
        assert header["format"] == "json-pages-1.0"
        urls = {p["url"] for p in pages}
        assert {f"{site}/", f"{site}/zipped", f"{site}/copy"} <= urls
        assert not any(u.endswith(("robots.txt", ".css", ".png")) for u in urls)
        assert package["mainPageURL"] in urls
        index = wacz.read("indexes/index.cdx").decode().splitlines()
        assert index == sorted(index) and any(f"{site}/zipped" in line for line in index)


def _validate(path: Path) -> None:
    """Webrecorder's validator, when its venv is there (required under CI)."""
    wacz = PYWB_BIN / "wacz"
    if not wacz.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"py-wacz is not installed in {PYWB_BIN.parent} (.ci/run makes it)")
        return
    done = subprocess.run([wacz, "validate", "-f", str(path)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0 and "is valid" in done.stdout, done.stdout + done.stderr


def test_a_crawl_writes_a_valid_wacz_when_it_ends(crawled: tuple[Path, str]) -> None:
    warc_dir, site = crawled
    [package] = warc_dir.glob("*.wacz")
    assert package.name.endswith("-finished.wacz") and not list(warc_dir.glob("*.open"))
    _check_layout(package, warc_files(warc_dir), site)
    _validate(package)


def test_scrapy_wacz_packages_a_directory(crawled: tuple[Path, str], tmp_path: Path) -> None:
    """The WARC files alone (no .cdxj beside them: indexed afresh) give the same index as the
    crawl's own package, which merged the index the crawl wrote."""
    warc_dir, site = crawled
    plain = tmp_path / "plain"
    plain.mkdir()
    for warc in warc_files(warc_dir):
        (plain / warc.name).write_bytes(warc.read_bytes())
    (plain / "stray.warc.gz.open").write_bytes(b"")  # a running crawl's: left out
    out = tmp_path / "all.wacz"
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "wacz", str(plain), "-o", str(out)],
        cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)), capture_output=True,
        text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARC files" in done.stdout and str(out) in done.stdout
    _check_layout(out, warc_files(warc_dir), site)  # the same packager: validated above
    [package] = warc_dir.glob("*.wacz")
    with zipfile.ZipFile(out) as fresh, zipfile.ZipFile(package) as merged:
        assert fresh.read("indexes/index.cdx") == merged.read("indexes/index.cdx")
    empty = subprocess.run(
        [sys.executable, "-m", "scrapy", "wacz", str(tmp_path)], cwd=PROJECT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)), capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert empty.returncode == 1 and "no finished" in empty.stderr


def test_pywb_replays_a_page_from_the_wacz_alone(crawled: tuple[Path, str], tmp_path: Path) -> None:
    warc_dir, site = crawled
    [package] = warc_dir.glob("*.wacz")
    copy = tmp_path / "only.wacz"  # nothing else of the crawl beside it
    copy.write_bytes(package.read_bytes())
    with pywb(tmp_path / "pywb", [copy]) as base:
        home = _get(f"{base}/crawl/2026id_/{site}/")
        assert b"Archive home" in home
        assert _get(f"{base}/crawl/2026id_/{site}/style.css") == site_pages()["/style.css"][1]


def test_the_crawls_own_indexes_are_reused_only_when_they_cover_every_file(
    crawled: tuple[Path, str],
) -> None:
    from crawler.archive.cdxj import covering_indexes

    warc_dir, _ = crawled
    names = [w.name for w in warc_files(warc_dir)]
    assert covering_indexes(warc_dir, names) == sorted(warc_dir.glob("*.cdxj"))
    assert covering_indexes(warc_dir, [*names, "other-00001.warc.gz"]) is None
