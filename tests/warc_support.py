"""A small real site for the WARC tests: a page with a stylesheet and an image, a gzip page sent
chunked, a redirect, robots.txt; and readers of what a crawl wrote (warcio, the archive's
reference reader)."""

from __future__ import annotations

import gzip
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

LAST_MODIFIED = "Mon, 02 Nov 2026 10:00:00 GMT"
CSS = b"body { background: rgb(1, 2, 3); } h1 { color: rgb(200, 10, 10); }\n"


def png(width: int = 4, height: int = 3) -> bytes:
    """A real (tiny, red) PNG, so a browser draws it with its natural size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def site_pages(
    prose: str = "An archived page", *, embeds_linked: bool = True
) -> dict[str, tuple[str, bytes]]:
    """path -> (content type, body). ``embeds_linked``: the home page also links its stylesheet
    and image (``<a href>``), so a crawl fetches them without ``[requisites]``; without it they
    are reachable only as the page's requisites."""
    links = '<a href="/style.css">style</a> <a href="/logo.png">logo</a> ' if embeds_linked else ""
    index = f"""<!doctype html><html><head><title>Archive home</title>
<link rel="stylesheet" href="/style.css"></head><body><h1 id="title">{prose}</h1>
<img id="logo" src="/logo.png" alt="logo">
<p>{links}<a href="/zipped">zipped</a>
<a href="/moved">moved</a> <a href="/copy">copy</a> <a href="/copy2">copy 2</a></p></body></html>"""
    zipped = "<html><head><title>Zipped</title></head><body>" + "zipped words " * 400
    copy = "<html><head><title>Copy</title></head><body>" + "the same words " * 300
    return {
        "/": ("text/html; charset=utf-8", index.encode()),
        "/style.css": ("text/css", CSS),
        "/logo.png": ("image/png", png()),
        "/zipped": ("text/html; charset=utf-8", zipped.encode()),
        # the same payload at another URL: an identical-payload-digest revisit
        "/copy": ("text/html; charset=utf-8", copy.encode()),
        "/copy2": ("text/html; charset=utf-8", copy.encode()),
        "/robots.txt": ("text/plain", b"User-agent: *\nDisallow: /private\n"),
    }


class SiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    pages: dict[str, tuple[str, bytes]] = {}

    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(301)
            self.send_header("Location", "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        page = self.pages.get(self.path)
        if page is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        kind, body = page
        if self.headers.get("If-Modified-Since") == LAST_MODIFIED and self.path != "/zipped":
            self.send_response(304)
            self.send_header("Last-Modified", LAST_MODIFIED)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if self.path == "/zipped":  # gzip, sent with the chunked transfer coding
            data = gzip.compress(body, mtime=0)  # the same bytes every time
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(data), 100):
                piece = data[start : start + 100]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Last-Modified", LAST_MODIFIED)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_site(
    host: str = "127.0.0.1", pages: dict[str, tuple[str, bytes]] | None = None
) -> Iterator[ThreadingHTTPServer]:
    handler = type("Handler", (SiteHandler,), {"pages": pages or site_pages()})
    server = ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a WARC file, read with warcio: type, headers, HTTP status and the raw
    stream's bytes (payload as stored, Content-Encoding kept)."""
    records = []
    with path.open("rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            http = record.http_headers
            records.append(
                {
                    "type": record.rec_type,
                    "headers": dict(record.rec_headers.headers),
                    "status": http.get_statuscode()
                    if http is not None and record.rec_type in ("response", "revisit")
                    else None,
                    "http": http,
                    "payload": record.raw_stream.read(),
                }
            )
    return records


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.warc.gz"))


def all_records(directory: Path) -> list[dict[str, Any]]:
    return [r for f in warc_files(directory) for r in read_records(f)]


def readable_records(path: Path) -> list[tuple[str, bool]]:
    """(type, digests valid) of each record warcio reads from ``path``, for a file that may end
    in a cut record (a kill -9): every record before a cut one must be whole."""
    out = []
    with path.open("rb") as fh:
        try:
            for record in ArchiveIterator(fh, check_digests=True):
                record.content_stream().read()
                passed = record.digest_checker.passed
                out.append((record.rec_type, passed is True))
        except Exception:  # warcio's error on a cut gzip member: the end of what is readable
            out.append(("cut", False))
    return out
