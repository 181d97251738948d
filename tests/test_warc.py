"""WARC output: the archive's cores (records, names, rotation, revisits, the digest index) and a
real ``scrapy crawl`` writing files that warcio checks and indexes."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crawler.archive.archiver import Archiver
from crawler.archive.digests import MemoryDigestIndex
from crawler.archive.files import RotatingWarcFiles
from crawler.archive.naming import OPEN_SUFFIX, WarcNamer
from crawler.archive.records import (
    IDENTICAL_PAYLOAD,
    SERVER_NOT_MODIFIED,
    Capture,
    Exchange,
    sha1_digest,
    warcinfo,
)
from crawler.backends.sqlite.warc_digests import SqliteDigestIndex
from tests.crawling import loopback_settings, run_crawl
from tests.warc_support import all_records, read_records, readable_records, serve_site, warc_files

WARCIO = str(Path(sys.executable).with_name("warcio"))


def _exchange(url: str, body: bytes, status: int = 200) -> Exchange:
    head = b"HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % (
        status,
        len(body),
    )
    return Exchange(
        url,
        b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        head,
        body,
        status,
        datetime.now(UTC),
        "127.0.0.1",
    )


def _files(tmp_path: Path, max_size: int = 10**9, prefix: str = "t") -> RotatingWarcFiles:
    return RotatingWarcFiles(
        tmp_path,
        WarcNamer(prefix),
        lambda name, date: warcinfo(name, [("software", "test")], date),
        max_size=max_size,
    )


def warcio_check(path: Path) -> None:
    done = subprocess.run([WARCIO, "check", "-v", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([WARCIO, "index", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


# -- cores ------------------------------------------------------------------------------------


def test_names_never_collide_and_sort_by_time() -> None:
    a, b = WarcNamer("crawl", host="h1", pid=7), WarcNamer("crawl", host="h2", pid=7)
    moment = datetime(2026, 11, 27, 12, 0, 0, 123000, UTC)
    names = {a.next_name(moment), a.next_name(moment), b.next_name(moment)}
    assert len(names) == 3
    assert a.next_name(moment) == "crawl-20261127120000123-00002-h1-7.warc.gz"
    assert WarcNamer("my site/x").prefix == "my_site_x"


def test_every_file_starts_with_warcinfo_rotates_by_size_and_is_renamed(tmp_path: Path) -> None:
    files = _files(tmp_path, max_size=2000)
    archiver = Archiver(files, MemoryDigestIndex())
    for i in range(8):
        archiver.archive(_exchange(f"http://a.test/{i}", bytes(range(256)) * (i + 1)))
        assert files.current is not None and files.current.name.endswith(OPEN_SUFFIX)
    finished = archiver.close()
    assert len(finished) > 2 and finished == warc_files(tmp_path)
    assert not list(tmp_path.glob("*" + OPEN_SUFFIX))
    for path in finished:
        warcio_check(path)
        records = read_records(path)
        assert records[0]["type"] == "warcinfo"
        assert records[0]["headers"]["WARC-Filename"] == path.name
        assert [r["type"] for r in records[1:]] in (["request", "response"] * (len(records) // 2),)


def test_request_and_response_records_link_and_carry_digests(tmp_path: Path) -> None:
    archiver = Archiver(_files(tmp_path), MemoryDigestIndex())
    exchange = _exchange("http://a.test/x", b"payload bytes")
    archiver.archive(exchange)
    [path] = archiver.close()
    _, request, response = read_records(path)
    assert request["headers"]["WARC-Concurrent-To"] == response["headers"]["WARC-Record-ID"]
    assert response["headers"]["WARC-Payload-Digest"] == sha1_digest(b"payload bytes")
    assert response["headers"]["WARC-IP-Address"] == "127.0.0.1"
    assert "WARC-Block-Digest" in request["headers"]
    assert response["payload"] == b"payload bytes"


def test_a_repeated_payload_and_a_304_are_revisits(tmp_path: Path) -> None:
    archiver = Archiver(_files(tmp_path), MemoryDigestIndex())
    first = _exchange("http://a.test/one", b"same payload")
    archiver.archive(first)
    assert archiver.archive(_exchange("http://a.test/two", b"same payload")) == "revisit"
    assert archiver.archive(_exchange("http://a.test/one", b"", status=304)) == "revisit"
    assert archiver.archive(_exchange("http://a.test/404", b"same payload", 404)) == "response"
    [path] = archiver.close()
    warcio_check(path)
    revisits = [r for r in read_records(path) if r["type"] == "revisit"]
    identical, not_modified = revisits
    assert identical["headers"]["WARC-Profile"] == IDENTICAL_PAYLOAD
    assert identical["headers"]["WARC-Refers-To-Target-URI"] == "http://a.test/one"
    assert identical["headers"]["WARC-Refers-To"] == first.response_id
    assert identical["payload"] == b""  # the header section only
    assert not_modified["headers"]["WARC-Profile"] == SERVER_NOT_MODIFIED
    assert archiver.counts["revisit/identical"] == archiver.counts["revisit/not_modified"] == 1
    # the identical revisit went without its request record; the 304 kept its own
    assert archiver.counts["request/skipped"] == 1 and archiver.counts["request"] == 3


def test_revisit_requests_can_be_kept(tmp_path: Path) -> None:
    archiver = Archiver(_files(tmp_path), MemoryDigestIndex(), revisit_requests=True)
    archiver.archive(_exchange("http://a.test/one", b"same payload"))
    archiver.archive(_exchange("http://a.test/two", b"same payload"))
    [path] = archiver.close()
    kinds = [r["type"] for r in read_records(path)]
    assert kinds == ["warcinfo", "request", "response", "request", "revisit"]


def test_the_sqlite_digest_index_outlives_the_crawl_and_the_first_claim_wins(
    tmp_path: Path,
) -> None:
    path = tmp_path / "digests.sqlite"
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, UTC)
    first = SqliteDigestIndex(path)
    assert first.claim("sha1:A", Capture("http://a.test/", when, "<urn:uuid:1>")) is None
    other = SqliteDigestIndex(path)  # another worker on the same file
    later = Capture("http://b.test/", when + timedelta(days=1), "<urn:uuid:2>")
    assert other.claim("sha1:A", later) == Capture("http://a.test/", when, "<urn:uuid:1>")
    first.close()
    other.close()
    again = SqliteDigestIndex(path)  # the next crawl
    assert again.claim("sha1:A", later) == Capture("http://a.test/", when, "<urn:uuid:1>")
    assert len(again) == 1


def test_an_open_file_cut_mid_record_reads_up_to_its_last_whole_record(tmp_path: Path) -> None:
    files = _files(tmp_path)
    archiver = Archiver(files, MemoryDigestIndex())
    for i in range(3):
        archiver.archive(_exchange(f"http://a.test/{i}", os.urandom(5000)))
    current = files.current
    assert current is not None
    data = current.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[: len(data) - 40])  # the last member loses its end
    records = readable_records(cut)
    whole = [kind for kind, ok in records if ok]
    assert whole[:6] == ["warcinfo", "request", "response", "request", "response", "request"]
    assert all(ok for _, ok in records[:-1]) and not records[-1][1]
    archiver.close()


# -- a real crawl -----------------------------------------------------------------------------


def _crawl(tmp_path: Path, base: str, warc_dir: Path, **extra: object):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(parents=True, exist_ok=True)
    return run_crawl(
        tmp_path,
        seeds=[base + "/"],
        settings=loopback_settings(
            WARC_ENABLED=True, WARC_DIR=warc_dir, TUNING={"warc_revisit_min_size": 1}, **extra
        ),
    )


def test_a_crawl_writes_checked_indexed_files_with_every_response_as_sent(
    tmp_path: Path,
) -> None:
    warc_dir = tmp_path / "warc"
    with serve_site() as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        result = _crawl(tmp_path, base, warc_dir)
    assert result.returncode == 0, result.log[-3000:]
    files = warc_files(warc_dir)
    assert files and not list(warc_dir.glob("*" + OPEN_SUFFIX))
    for path in files:
        warcio_check(path)
    [cdxj] = list(warc_dir.glob("*.cdxj"))
    assert "/zipped" in cdxj.read_text()
    records = all_records(warc_dir)
    responses = {
        r["headers"]["WARC-Target-URI"]: r for r in records if r["type"] in ("response", "revisit")
    }
    assert set(responses) >= {
        f"{base}/robots.txt",
        f"{base}/",
        f"{base}/style.css",
        f"{base}/logo.png",
        f"{base}/zipped",
        f"{base}/moved",
        f"{base}/copy",
        f"{base}/copy2",
    }
    home = responses[f"{base}/"]
    assert home["headers"]["WARC-IP-Address"] == "127.0.0.1"
    assert home["http"].get_statuscode() == "200"
    zipped = responses[f"{base}/zipped"]
    assert zipped["http"].get_header("Content-Encoding") == "gzip"
    assert zipped["http"].get_header("Transfer-Encoding") is None
    assert gzip.decompress(zipped["payload"]).startswith(b"<html>")  # as sent: still gzip
    assert responses[f"{base}/moved"]["http"].get_statuscode() == "301"
    copies = [responses[f"{base}/copy"], responses[f"{base}/copy2"]]
    assert sorted(r["type"] for r in copies) == ["response", "revisit"]
    requests = [r for r in records if r["type"] == "request"]
    assert all(r["headers"].get("WARC-Concurrent-To") for r in requests)
    metadata = [r for r in records if r["type"] == "metadata"]
    home_meta = [m for m in metadata if m["headers"]["WARC-Target-URI"] == f"{base}/"]
    assert home_meta and b"outlink: " + f"{base}/zipped".encode() in home_meta[0]["payload"]
    assert result.stats["warc/records/response"] >= 7


def test_a_second_crawl_of_an_unchanged_site_writes_revisits(tmp_path: Path) -> None:
    warc_dir = tmp_path / "warc"
    with serve_site() as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        first = _crawl(tmp_path / "one", base, warc_dir)
        assert first.returncode == 0, first.log[-3000:]
        before = set(warc_files(warc_dir))
        second = _crawl(tmp_path / "two", base, warc_dir)
    assert second.returncode == 0, second.log[-3000:]
    new = [p for p in warc_files(warc_dir) if p not in before]
    assert new
    records = [r for p in new for r in read_records(p)]
    for path in new:
        warcio_check(path)
    full = [r["headers"]["WARC-Target-URI"] for r in records if r["type"] == "response"]
    # 301 and 404 answers have no payload worth a revisit; every 200 is one
    assert all(not u.endswith(("/", ".css", ".png", "zipped", "copy", "copy2")) for u in full), full
    revisits = [r for r in records if r["type"] == "revisit"]
    assert len(revisits) >= 6
    assert all(r["headers"]["WARC-Profile"] == IDENTICAL_PAYLOAD for r in revisits)
