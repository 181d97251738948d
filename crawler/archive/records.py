"""WARC 1.1 records of one fetch, built from the HTTP message as the server sent it.

Written with FastWARC (``fastwarc.warc.WarcRecord``, gzip by ``fastwarc.stream_io.GzipWriter``):
measured against warcio (``bench/warc.py records``) it costs 0.5-0.75 of the CPU per record at
the same gzip level, and both are maintained (FastWARC by the ChatNoir/Webis team, new major
release in 2026; warcio by Webrecorder, which the tests and the CDXJ indexer use to read). The
digests are computed here (SHA-1, base 32, as every WARC tool writes them), once: the payload
digest decides whether a response becomes a revisit before any record is built.

Each record is its own gzip member (WARC 1.1 annex D), so a reader can seek to any record and a
file cut short by a crash is readable up to its last whole record.
"""

from __future__ import annotations

import base64
import hashlib
import io
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fastwarc import stream_io, warc

# The WARC 1.1 revisit profiles (section 6.7.2 and 6.7.3).
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
HTTP_REQUEST_TYPE = "application/http; msgtype=request"
HTTP_RESPONSE_TYPE = "application/http; msgtype=response"
WARC_FIELDS_TYPE = "application/warc-fields"

_TYPES = {
    "warcinfo": warc.warcinfo,
    "request": warc.request,
    "response": warc.response,
    "revisit": warc.revisit,
    "metadata": warc.metadata,
    "resource": warc.resource,
    "conversion": warc.conversion,
}
MARKDOWN_TYPE = "text/markdown; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


def sha1_digest(data: bytes) -> str:
    """``sha1:<base 32>``, the form WARC tools write and compare."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def warc_date(moment: datetime) -> str:
    """WARC 1.1's W3C-ISO8601 date in UTC, to the microsecond (1.1 allows the fraction)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def head_as_stored(raw: bytes, body_length: int, *, rewrite_length: bool = False) -> bytes:
    """A response's header section as the server sent it (``raw``: status line and header
    lines, each ending in LF or CRLF as sent, and the blank line), as the record stores it:
    byte for byte, except when the body is stored other than it came: sent with the chunked
    transfer coding (WARC 1.1 stores it de-chunked) or cut short (``rewrite_length``). Then
    its ``Transfer-Encoding`` and ``Content-Length`` lines give way to one ``Content-Length``
    of the body as stored, at the end, so that a reader does not de-chunk or wait for bytes
    that are not there."""
    lines = raw.split(b"\n")
    header_lines = []
    for line in lines[1:]:
        if line in (b"", b"\r"):
            break
        header_lines.append(line)
    chunked = any(
        line.split(b":", 1)[0].strip().lower() == b"transfer-encoding"
        and b"chunked" in line.lower()
        for line in header_lines
    )
    if not (chunked or rewrite_length):
        return raw
    eol = b"\r" if lines[0].endswith(b"\r") else b""
    out = [lines[0]]
    dropping = False
    for line in header_lines:
        if line[:1] in (b" ", b"\t"):  # a folded line belongs to the header above it
            if not dropping:
                out.append(line)
            continue
        name = line.split(b":", 1)[0].strip().lower()
        dropping = name in (b"transfer-encoding", b"content-length")
        if not dropping:
            out.append(line)
    out.append(b"Content-Length: %d" % body_length + eol)
    return b"\n".join(out) + b"\n" + eol + b"\n"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP exchange as it went over the wire: the request as sent, the response as
    received (status line and header section as bytes, ``body`` with its Content-Encoding kept
    and the chunked transfer coding removed), when it arrived and from which address."""

    url: str
    request_head: bytes  # request line and header section, ending with the blank line
    response_head: bytes  # status line and header section, ending with the blank line
    body: bytes
    status: int
    date: datetime
    ip: str | None = None
    request_body: bytes = b""
    # why the body is cut short (WARC 1.1 section 5.13, ``WARC-Truncated``: "length", "time",
    # "disconnect", "unspecified"), "" when it came whole
    truncated: str = ""
    # the record ids, given by the capturing side so that later records (metadata) can
    # point at them before the writer has run
    response_id: str = field(default_factory=new_record_id)
    request_id: str = field(default_factory=new_record_id)

    @property
    def payload_digest(self) -> str:
        return sha1_digest(self.body)


@dataclass(slots=True)
class Record:
    """A record before it is written: its type, WARC headers beyond the mandatory ones, and
    its block."""

    kind: str
    record_id: str
    date: datetime
    block: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def gzip_member(self, level: int = 3) -> bytes:
        """The record as one gzip member, ready to append to a ``.warc.gz`` file."""
        record = warc.WarcRecord()
        record.init_headers(_TYPES[self.kind], self.record_id[5:-1].encode("ascii"))
        record.headers["WARC-Date"] = warc_date(self.date)
        for name, value in self.headers:
            record.headers.append(name, value)
        record.headers.append("WARC-Block-Digest", sha1_digest(self.block))
        record.set_bytes_content(self.block)
        out = io.BytesIO()
        writer = stream_io.GzipWriter(out, compression_level=level)
        record.write(writer)
        writer.finish()
        return out.getvalue()


def warc_fields(fields: Iterable[tuple[str, str]]) -> bytes:
    """An ``application/warc-fields`` block (warcinfo, metadata): ``name: value`` lines."""
    lines = []
    for name, value in fields:
        value = " ".join(str(value).split())  # one line each: no CR/LF can break the block
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("utf-8")


def warcinfo(filename: str, fields: Sequence[tuple[str, str]], date: datetime) -> Record:
    """The first record of every file: what wrote it and how (WARC 1.1 section 6.2)."""
    return Record(
        "warcinfo",
        new_record_id(),
        date,
        warc_fields(fields),
        [("WARC-Filename", filename), ("Content-Type", WARC_FIELDS_TYPE)],
    )


def _target(exchange: Exchange, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    headers = [("WARC-Target-URI", exchange.url)]
    if exchange.ip:
        headers.append(("WARC-IP-Address", exchange.ip))
    return headers + extra


def request_record(exchange: Exchange) -> Record:
    return Record(
        "request",
        exchange.request_id,
        exchange.date,
        exchange.request_head + exchange.request_body,
        _target(
            exchange,
            [("Content-Type", HTTP_REQUEST_TYPE), ("WARC-Concurrent-To", exchange.response_id)],
        ),
    )


def response_record(exchange: Exchange, payload_digest: str) -> Record:
    """The response as received; one cut short says so (``WARC-Truncated``), so a reader
    knows the payload is not the whole resource though its length adds up."""
    extra = [("Content-Type", HTTP_RESPONSE_TYPE), ("WARC-Payload-Digest", payload_digest)]
    if exchange.truncated:
        extra.append(("WARC-Truncated", exchange.truncated))
    return Record(
        "response",
        exchange.response_id,
        exchange.date,
        exchange.response_head + exchange.body,
        _target(exchange, extra),
    )


@dataclass(frozen=True, slots=True)
class Capture:
    """Where a payload was first archived: the digest index's answer."""

    uri: str
    date: datetime
    record_id: str


def identical_payload_revisit(exchange: Exchange, payload_digest: str, original: Capture) -> Record:
    """A response whose payload was archived before: its header section only, pointing at the
    original (WARC 1.1 6.7.2). Replay tools (pywb) take the payload from the original."""
    return Record(
        "revisit",
        exchange.response_id,
        exchange.date,
        exchange.response_head,
        _target(
            exchange,
            [
                ("Content-Type", HTTP_RESPONSE_TYPE),
                ("WARC-Profile", IDENTICAL_PAYLOAD),
                ("WARC-Payload-Digest", payload_digest),
                ("WARC-Refers-To", original.record_id),
                ("WARC-Refers-To-Target-URI", original.uri),
                ("WARC-Refers-To-Date", warc_date(original.date)),
            ],
        ),
    )


def not_modified_revisit(exchange: Exchange, previous: Capture | None) -> Record:
    """A 304 answer to a conditional GET (WARC 1.1 6.7.3): the server said the page is as it
    was; the record holds the 304's header section."""
    extra = [("Content-Type", HTTP_RESPONSE_TYPE), ("WARC-Profile", SERVER_NOT_MODIFIED)]
    if previous is not None:
        extra += [
            ("WARC-Refers-To-Target-URI", previous.uri),
            ("WARC-Refers-To-Date", warc_date(previous.date)),
        ]
    return Record(
        "revisit",
        exchange.response_id,
        exchange.date,
        exchange.response_head,
        _target(exchange, extra),
    )


def metadata_record(
    url: str, refers_to: str, date: datetime, fields: Sequence[tuple[str, str]]
) -> Record:
    """What the crawler learnt of a fetch (outlinks, fetch time, politeness delay,
    near-duplicate verdict), tied to its response record (WARC 1.1 6.8)."""
    return Record(
        "metadata",
        new_record_id(),
        date,
        warc_fields(fields),
        [
            ("WARC-Target-URI", url),
            ("WARC-Concurrent-To", refers_to),
            ("Content-Type", WARC_FIELDS_TYPE),
        ],
    )


def conversion_record(
    url: str, refers_to: str, date: datetime, text: str, content_type: str = MARKDOWN_TYPE
) -> Record:
    """A page's extracted text or Markdown, tied to its response record (WARC 1.1 6.9: "an
    alternative version of another record's content"), as Common Crawl's WET files hold the
    text of each page beside its WARC: with its ``WARC-Target-URI``, so the CDXJ finds it."""
    return Record(
        "conversion",
        new_record_id(),
        date,
        text.encode("utf-8"),
        [
            ("WARC-Target-URI", url),
            ("WARC-Refers-To", refers_to),
            ("Content-Type", content_type),
        ],
    )
