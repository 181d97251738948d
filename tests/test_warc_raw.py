"""The WARC response record holds the header section as the server sent it: a server that writes
its own bytes (an unusual reason phrase, header names in its own case and order, a folded
header line, the connection headers) finds them byte for byte in the archive; a chunked body is
stored de-chunked, its ``Transfer-Encoding`` line replaced by the stored body's
``Content-Length``, and the record passes ``warcio check``."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scrapy.http import Response
from warcio.archiveiterator import ArchiveIterator

from crawler.archive.records import head_as_stored
from crawler.middlewares.warc import response_head
from tests.crawling import loopback_settings, run_crawl
from tests.test_wacz import _validate as validate_wacz
from tests.test_warc import warcio_check
from tests.warc_support import all_records, warc_files

HOME = b"<html><head><title>Raw</title></head><body><a href=/chunked>c</a></body></html>"
HOME_HEAD = (
    b"HTTP/1.1 200 Fine Thanks\r\n"
    b"x-lower-CASE: Kept As Sent\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n"
    b"X-Folded: first part\r\n"
    b"  second part\r\n"
    b"Connection: keep-alive\r\n"
    b"Content-Length: %d\r\n"
    b"\r\n" % len(HOME)
)
CHUNKED_BODY = b"<html><body>" + b"chunked words " * 50 + b"</body></html>"
CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/html\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"X-After: 1\r\n"
    b"\r\n"
)


def test_head_as_stored_changes_only_a_chunked_or_cut_body() -> None:
    assert head_as_stored(HOME_HEAD, len(HOME)) == HOME_HEAD
    assert head_as_stored(CHUNKED_HEAD, 42) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-After: 1\r\nContent-Length: 42\r\n\r\n"
    )
    cut = head_as_stored(HOME_HEAD, 10, rewrite_length=True)
    assert cut.endswith(b"Connection: keep-alive\r\nContent-Length: 10\r\n\r\n")
    assert b"  second part\r\n" in cut and cut.count(b"Content-Length") == 1
    bare = b"HTTP/1.0 200 OK\nTransfer-Encoding: chunked\n\n"  # LF alone, as some servers send
    assert head_as_stored(bare, 3) == b"HTTP/1.0 200 OK\nContent-Length: 3\n\n"


def test_a_body_whose_download_was_stopped_is_stored_with_its_own_length() -> None:
    """A robots.txt longer than 500 KiB is downloaded up to there (flag download_stopped):
    its record must not keep the server's Content-Length of bytes that never came."""
    body = b"User-agent: *\n" * 10
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 52428800\r\n\r\n"
    stopped = Response("http://a.example/robots.txt", body=body, flags=["download_stopped"])
    assert response_head(stopped, head).endswith(b"Content-Length: %d\r\n\r\n" % len(body))


def _answer(path: bytes) -> bytes:
    if path == b"/":
        return HOME_HEAD + HOME
    if path == b"/chunked":
        chunks = b"".join(
            b"%x\r\n" % len(CHUNKED_BODY[i : i + 100]) + CHUNKED_BODY[i : i + 100] + b"\r\n"
            for i in range(0, len(CHUNKED_BODY), 100)
        )
        return CHUNKED_HEAD + chunks + b"0\r\n\r\n"
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


@contextmanager
def raw_server(
    answer: Callable[[bytes], bytes] = _answer, drop_after: frozenset[bytes] = frozenset()
) -> Iterator[int]:
    """Answers each request on a connection with exact bytes (keep-alive); the connection
    drops after the answer to a path of ``drop_after``."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            data = b""
            while not stop.is_set():
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                try:
                    conn.sendall(answer(path))
                except OSError:  # the client stopped reading (a download stopped)
                    return
                if path in drop_after:
                    return

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_the_archive_keeps_the_header_section_as_sent(tmp_path: Path) -> None:
    warc_dir = tmp_path / "warc"
    with raw_server() as port:
        base = f"http://127.0.0.1:{port}"
        result = run_crawl(
            tmp_path, seeds=[base + "/"],
            settings=loopback_settings(WARC_ENABLED=True, WARC_DIR=warc_dir),
        )
    assert result.returncode == 0, result.log[-3000:]
    for path in warc_files(warc_dir):
        warcio_check(path)
    blocks = {}
    for record in all_records(warc_dir):
        if record["type"] == "response":
            http = record["http"]
            blocks[record["headers"]["WARC-Target-URI"]] = (http, record["payload"])
    home_http, home_body = blocks[base + "/"]
    assert home_body == HOME
    assert _blocks(warc_dir)[base + "/"] == HOME_HEAD + HOME  # byte for byte
    assert home_http.statusline == "200 Fine Thanks"
    assert home_http.headers[:2] == [
        ("x-lower-CASE", "Kept As Sent"), ("Content-Type", "text/html; charset=utf-8"),
    ]
    assert ("Connection", "keep-alive") in home_http.headers
    chunked_http, chunked_body = blocks[base + "/chunked"]
    assert chunked_body == CHUNKED_BODY  # de-chunked
    assert chunked_http.get_header("Transfer-Encoding") is None
    assert chunked_http.get_header("Content-Length") == str(len(CHUNKED_BODY))
    assert chunked_http.get_header("X-After") == "1"


def _blocks(warc_dir: Path) -> dict[str, bytes]:
    """Each response record's block as stored (no HTTP parsing by the reader)."""
    out = {}
    for path in warc_files(warc_dir):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh, no_record_parse=True):
                if record.rec_type == "response":
                    out[record.rec_headers.get_header("WARC-Target-URI")] = record.raw_stream.read()
    return out


CUT_HOME = b"<html><head><title>Cut</title></head><body><a href=/cut>c</a></body></html>"
CUT_SENT = b"<html><body>" + b"the first words only " * 4  # of the 5,000 bytes promised
ROBOTS = b"User-agent: *\nAllow: /\n" + b"# a comment line of a long robots.txt\n" * 16000


def _ok(kind: bytes, body: bytes, length: int | None = None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
    return head % (kind, len(body) if length is None else length) + body


def _cut_answer(path: bytes) -> bytes:
    if path == b"/robots.txt":  # 600 KiB: read up to 500 KiB, then the download stops
        return _ok(b"text/plain", ROBOTS)
    if path == b"/":
        return _ok(b"text/html", CUT_HOME)
    if path == b"/cut":  # the connection drops after these bytes (drop_after)
        return _ok(b"text/html", CUT_SENT, 5000)
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def test_a_record_cut_short_says_why(tmp_path: Path) -> None:
    """WARC 1.1 section 5.13: a robots.txt whose download stopped at 500 KiB carries
    ``WARC-Truncated: length``, a page whose connection dropped before its Content-Length
    came (kept: ``DOWNLOAD_FAIL_ON_DATALOSS`` off) ``disconnect``; a whole one none. Each
    is stored with the length it has; the files pass ``warcio check``, the WACZ ``wacz
    validate``."""
    warc_dir = tmp_path / "warc"
    with raw_server(_cut_answer, drop_after=frozenset({b"/cut"})) as port:
        base = f"http://127.0.0.1:{port}"
        result = run_crawl(
            tmp_path, seeds=[base + "/"],
            settings=loopback_settings(
                WARC_ENABLED=True, WARC_DIR=warc_dir, WARC_WACZ=True,
                DOWNLOAD_FAIL_ON_DATALOSS=False,
            ),
        )
    assert result.returncode == 0, result.log[-3000:]
    for path in warc_files(warc_dir):
        warcio_check(path)
    [package] = warc_dir.glob("*.wacz")
    validate_wacz(package)
    responses = {
        r["headers"]["WARC-Target-URI"]: r for r in all_records(warc_dir) if r["type"] == "response"
    }
    robots, cut = responses[base + "/robots.txt"], responses[base + "/cut"]
    assert robots["headers"].get("WARC-Truncated") == "length"
    assert ROBOTS.startswith(robots["payload"]) and len(robots["payload"]) < len(ROBOTS)
    assert robots["http"].get_header("Content-Length") == str(len(robots["payload"]))
    assert cut["headers"].get("WARC-Truncated") == "disconnect"
    assert cut["payload"] == CUT_SENT
    assert cut["http"].get_header("Content-Length") == str(len(CUT_SENT))
    home = responses[base + "/"]
    assert "WARC-Truncated" not in home["headers"] and home["payload"] == CUT_HOME
