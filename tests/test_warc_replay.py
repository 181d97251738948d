"""Replay: a crawl's WARC files loaded into pywb (from PyPI, in its own venv ``.venv-pywb``: it
pins redis-py 2.10) on loopback, and the home page opened in Debian's chromium through
Playwright: it renders from the archive with its stylesheet and its image while the live site
is stopped, and every request it makes goes to pywb. The stylesheet and the image are linked
from nowhere: the crawl archives them because the site config asks for page requisites
(``[requisites] fetch = true``). Identical-payload revisit records resolve
in pywb to the original payload; a 304 of a second crawl (a server-not-modified revisit) is
resolved and replayed by pywb as the 304 it was (status line and headers, no body).

Without pywb's venv or chromium the test is skipped, except under CI (``CI=true``), where it
fails (``.ci/run`` makes the venv)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.crawling import PROJECT, loopback_settings, run_crawl, write_site
from tests.test_report import CHROMIUM, _browser
from tests.warc_support import all_records, serve_site, site_pages, warc_files

PYWB_BIN = Path(os.environ.get("PYWB_VENV", PROJECT / ".venv-pywb")) / "bin"

pytestmark = pytest.mark.integration


def _pywb() -> Path:
    if (PYWB_BIN / "wayback").exists():
        return PYWB_BIN
    missing = f"pywb is not installed in {PYWB_BIN.parent} (.ci/run makes it)"
    if os.environ.get("CI") == "true":
        pytest.fail(missing + ": required under CI")
    pytest.skip(missing)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def pywb(root: Path, files: list[Path]) -> Iterator[str]:
    """pywb serving ``files`` as collection ``crawl`` from ``root`` on a free loopback port;
    yields its base URL."""
    bin_dir = _pywb()
    root.mkdir(parents=True, exist_ok=True)
    # frameless replay: the page is the top document (the framed one reloads itself in a frame)
    (root / "config.yaml").write_text("framed_replay: false\n")
    subprocess.run([bin_dir / "wb-manager", "init", "crawl"], cwd=root, check=True,
                   capture_output=True)  # fmt: skip
    # a WACZ is added unpacked (its WARC files and index; pywb 2.10 reads no WACZ in place)
    unpack = ["--unpack-wacz"] if any(str(f).endswith(".wacz") for f in files) else []
    subprocess.run([bin_dir / "wb-manager", "add", *unpack, "crawl", *map(str, files)],
                   cwd=root, check=True, capture_output=True)  # fmt: skip
    port = _free_port()
    log = (root / "pywb.log").open("wb")
    proc = subprocess.Popen(
        [bin_dir / "wayback", "-p", str(port), "-b", "127.0.0.1", "-d", str(root)],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a guard against a pywb that never starts
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((root / "pywb.log").read_text()[-3000:]) from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()


def _raw_get(base: str, path: str) -> bytes:
    """Everything pywb sends for ``path`` until it closes the connection."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _captures(pywb_base: str, url: str) -> list[dict[str, Any]]:
    text = _get(f"{pywb_base}/crawl/cdx?url={url}&output=json").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _render(pywb_base: str, url: str, timestamp: str) -> dict[str, Any]:
    """Open ``url`` from the archive in chromium (pywb's frameless replay); every request the
    page made, and those that did not go to pywb."""
    sync_playwright = _browser()
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"{pywb_base}/crawl/{timestamp}/{url}", wait_until="load")
            page.wait_for_function("document.getElementById('logo').complete")
            seen = page.evaluate(
                """() => ({
                  color: getComputedStyle(document.getElementById('title')).color,
                  background: getComputedStyle(document.body).backgroundColor,
                  logo: document.getElementById('logo').naturalWidth,
                  title: document.title,
                })"""
            )
        finally:
            browser.close()
    outside = [u for u in requests if not u.startswith(pywb_base + "/")]
    return {**seen, "outside": outside, "requests": requests}


def test_a_crawl_replays_in_pywb_from_the_archive_alone(tmp_path: Path) -> None:
    _pywb()
    warc_dir = tmp_path / "warc"
    db = tmp_path / "crawldb.sqlite"
    settings = loopback_settings(
        WARC_ENABLED=True,
        WARC_DIR=warc_dir,
        TUNING={"warc_revisit_min_size": 1},
        CRAWLDB_PATH=db,
        RECRAWL_INTERVAL=3600,
    )
    pages = site_pages(embeds_linked=False)  # the stylesheet and image: requisites only
    sites = tmp_path / "sites"
    write_site(sites, "archive", "[requisites]\nfetch = true\n")
    with serve_site(pages=pages) as server:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        for run in ("one", "two"):
            (tmp_path / run).mkdir()
            result = run_crawl(
                tmp_path / run, "archive", seeds=[site + "/"], settings=settings,
                sites_dir=sites,
            )
            assert result.returncode == 0, result.log[-3000:]
            with sqlite3.connect(db) as conn:  # everything due again: the refetch is a 304
                conn.execute("UPDATE pages SET next_fetch = 0")
    # the live site is gone from here on
    records = all_records(warc_dir)
    profiles = {r["headers"].get("WARC-Profile", "").rsplit("/", 1)[-1] for r in records}
    assert {"identical-payload-digest", "server-not-modified"} <= profiles
    with pywb(tmp_path / "pywb", warc_files(warc_dir)) as base:
        home = _captures(base, site + "/")
        [first] = [c for c in home if c.get("mime") == "text/html"]
        [not_modified] = [c for c in home if c.get("mime") == "warc/revisit"]
        # the first crawl's capture, its stylesheet and image the ones closest to it
        seen = _render(base, site + "/", first["timestamp"])
        assert seen["title"] == "Archive home"
        assert seen["color"] == "rgb(200, 10, 10)"  # the archived stylesheet
        assert seen["background"] == "rgb(1, 2, 3)"
        assert seen["logo"] == 4  # the archived image, decoded
        assert seen["outside"] == []  # nothing left for the live site (stopped anyway)
        assert any("/style.css" in u for u in seen["requests"])

        # identical payload: /copy and /copy2 replay the one payload archived
        copy, second = pages["/copy"][1], not_modified["timestamp"]
        copies = [c for c in _captures(base, f"{site}/copy*")
                  if c["timestamp"] < second and c["mime"] != "text/markdown"]  # not the text
        assert sorted(c["mime"] for c in copies) == ["text/html", "warc/revisit"], copies
        for capture in copies:
            assert _get(f"{base}/crawl/{capture['timestamp']}id_/{capture['url']}") == copy
        # the second crawl's 304 (a server-not-modified revisit) replays in pywb as the 304 it
        # was: resolved (pywb answers 404/500 for a revisit whose original it cannot load), with
        # no body (HTTP allows none after a 304); a browser opens the 200 capture, as above
        raw = _raw_get(base, f"/crawl/{not_modified['timestamp']}id_/{site}/")
        assert raw.startswith(b"HTTP/1.1 304 Not Modified\r\n"), raw[:300]
        assert b"Memento-Datetime: " in raw
