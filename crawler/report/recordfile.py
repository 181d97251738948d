"""The crawl record: its file format, written during a crawl and read by ``scrapy report``.

A record file is JSON lines, appended to (a resumed crawl, a restarted worker add sessions). Each
line is an array whose first element says what it is; times are milliseconds since the
session's start (``t0``, wall-clock seconds in the session line), so a line stays short:

* ``["session", {worker, site, t0, interval, snapshot_fields, politeness...}]`` opens a session;
  host numbers restart with each session.
* ``["h", n, "host"]`` names host number ``n`` (written before its first use).
* ``["f", host, start, duration, status, bytes, asked, depth]``: one fetch; ``status`` 0 is a
  failed fetch (no answer); ``asked`` is the delay the frontier applied after it (its
  ``fetch_completed``; null when the frontier never said), so the real gap to the host's next
  fetch can be held against it.
* ``["a", host, bucket, n, errors, dur_sum, dur_max, bytes, gaps, gap_sum, gap_min, short,
  asked_sum, asked_n]``: fetches of one host during one aggregate interval starting at
  ``bucket``, once the session has written ``record_max_fetches`` ``f`` lines, with the gaps
  the worker's tally measured (``crawler.report.tally``; ``short``: gaps below the delay
  applied; ``asked_n``: fetches whose delay is known, all of them when left out).
* ``["s", t, ...]``: a snapshot, fields as named by the session's ``snapshot_fields``.
* ``["ip", host, "address"]``: the server address DNS gave the host (again when it changes).
* ``["hold", host, t, ms]``: the host was held (Retry-After, robots.txt unavailable).
* ``["b", t, url, status, referer]``: a broken link (``status`` 0: no answer).
* ``["c", t, {content_types, depth, broken, stats}]``: cumulative counters so far (the last one
  of a session wins: a killed crawl keeps what it had).
* ``["end", t, reason, stats]``: the session's final stats.

Free of Scrapy: the extension (``crawler/extensions/recorder.py``) writes through
``RecordWriter``, the report reads with ``read_records``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

FORMAT = 1
SNAPSHOT_FIELDS = (
    "t",
    "pages",
    "bytes",
    "items",
    "queued",
    "seen",
    "in_flight",
    "hosts_ready",
    "hosts_waiting",
    "hosts_busy",
    "failed",
    "http_errors",
    "rejected",
)
AGGREGATE_FIELDS = (
    "host",
    "bucket",
    "n",
    "errors",
    "dur_sum",
    "dur_max",
    "bytes",
    "gaps",
    "gap_sum",
    "gap_min",
    "short",
    "asked_sum",
    "asked_n",
)
# Stats the report charts, kept in the periodic counters line (the end line has them all).
STATS_PREFIXES = (
    "downloader/response_status_count/",
    "downloader/exception_type_count/",
    "frontier/rejected/",
    "frontier/dropped/",
    "frontier/hosts_given_up/",
    "frontier/links_repeated",
    "robotstxt/",
    "neardup/",
    "soft404/",
    "limits/",
    "retry_after/",
    "retry/gave_up/",
    "response_received_count",
    "item_scraped_count",
    "downloader/response_bytes",
)


def _dump(line: list[Any]) -> str:
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n"


class RecordWriter:
    """Appends one session to a record file. Lines are buffered and reach the disk at each
    ``flush`` (the extension flushes with every snapshot), so the file lags the crawl by at
    most a snapshot interval and a fetch costs a ``json.dumps`` and a buffered write."""

    def __init__(self, path: Path, header: dict[str, Any], t0: float) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.t0 = t0
        self._file: IO[str] = open(path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        self._hosts: dict[str, int] = {}
        header = {"format": FORMAT, "t0": t0, "snapshot_fields": SNAPSHOT_FIELDS, **header}
        self._file.write(_dump(["session", header]))

    def ms(self, t: float) -> int:
        """A wall-clock time as milliseconds since the session's start."""
        return round((t - self.t0) * 1000)

    def host(self, name: str) -> int:
        n = self._hosts.get(name)
        if n is None:
            n = self._hosts[name] = len(self._hosts)
            self._file.write(_dump(["h", n, name]))
        return n

    def write(self, line: list[Any]) -> None:
        self._file.write(_dump(line))

    def write_text(self, text: str) -> None:
        """A line already formatted as JSON (the per-fetch line, on the crawl's hot path)."""
        self._file.write(text)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def set_aside(path: Path) -> Path | None:
    """Move the record of an earlier, separate crawl out of the way of a new one: to
    ``<name>.<its last write, YYYYmmdd-HHMMSS>`` beside it (a name ``scrapy report`` never
    picks up by itself, and can still be given). Returns where it went; None when there was
    no record (or an empty one) at ``path``.

    A record file is appended to because a resumed crawl (JOBDIR) or a restarted worker of a
    shared crawl adds a session to the same crawl; a crawl that cannot be resumed is a new
    crawl each run, and its sessions appended to the last run's were merged into one report
    ("2 workers, sessions: 2" for two runs of one process each)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == 0:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(stat.st_mtime))
    target = path.with_name(f"{path.name}.{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{stamp}-{n}")
    path.rename(target)
    return target


# -- reading ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Fetch:
    """One fetch, in absolute wall-clock seconds."""

    host: str
    start: float
    end: float
    status: int
    bytes: int
    asked: float | None
    depth: int
    worker: str


@dataclass(slots=True)
class Aggregate:
    host: str
    start: float
    seconds: float
    n: int
    errors: int
    dur_sum: float
    dur_max: float
    bytes: int
    gaps: int
    gap_sum: float
    gap_min: float | None
    short: int
    asked_sum: float
    asked_n: int
    worker: str


@dataclass
class Session:
    worker: str
    site: str
    t0: float
    header: dict[str, Any]
    snapshots: list[dict[str, float]] = field(default_factory=list)
    counters: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] | None = None  # the end line's; None if the session never ended
    reason: str = ""
    end: float | None = None
    addresses: dict[str, str] = field(default_factory=dict)  # host -> its server address


@dataclass
class CrawlRecord:
    """Every session of every record file given, merged: one crawl, however many workers."""

    sessions: list[Session] = field(default_factory=list)
    fetches: list[Fetch] = field(default_factory=list)
    aggregates: list[Aggregate] = field(default_factory=list)
    holds: list[tuple[str, float, float]] = field(default_factory=list)
    broken: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0

    @property
    def workers(self) -> list[str]:
        return sorted({s.worker for s in self.sessions})


class RecordError(ValueError):
    """A file that is not a crawl record."""


def read_records(paths: Iterable[Path]) -> CrawlRecord:
    """Read and merge record files. A torn last line (a killed crawl) is skipped and counted."""
    record = CrawlRecord()
    for path in paths:
        _read_one(Path(path), record)
    record.fetches.sort(key=lambda f: f.start)
    record.sessions.sort(key=lambda s: s.t0)
    return record


def _read_one(path: Path, record: CrawlRecord) -> None:
    session: Session | None = None
    hosts: dict[int, str] = {}
    fields: list[str] = list(SNAPSHOT_FIELDS)
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, text in enumerate(f):
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if not isinstance(line, list) or not line:
                if n == 0:
                    raise RecordError(f"{path}: not a crawl record")
                record.bad_lines += 1
                continue
            kind = line[0]
            if kind == "session":
                header = line[1]
                if not isinstance(header, dict) or header.get("format") != FORMAT:
                    raise RecordError(f"{path}: not a crawl record of format {FORMAT}")
                session = Session(
                    worker=str(header.get("worker", path.stem)),
                    site=str(header.get("site", "")),
                    t0=float(header["t0"]),
                    header=header,
                )
                record.sessions.append(session)
                hosts = {}
                fields = list(header.get("snapshot_fields", SNAPSHOT_FIELDS))
                continue
            if session is None:
                if n == 0:
                    raise RecordError(f"{path}: not a crawl record (no session line)")
                record.bad_lines += 1
                continue
            try:
                _read_line(kind, line, session, hosts, fields, record)
            except (ValueError, IndexError, TypeError, KeyError):
                record.bad_lines += 1


def _read_line(
    kind: str,
    line: list[Any],
    session: Session,
    hosts: dict[int, str],
    fields: list[str],
    record: CrawlRecord,
) -> None:
    t0, worker = session.t0, session.worker
    if kind == "h":
        hosts[int(line[1])] = str(line[2])
    elif kind == "f":
        _, h, start, dur, status, size, asked, depth = line
        begin = t0 + start / 1000
        record.fetches.append(
            Fetch(hosts[h], begin, begin + dur / 1000, status, size,
                  None if asked is None else asked / 1000, depth, worker)
        )
    elif kind == "s":
        snap = dict(zip(fields, line[1:], strict=False))
        snap["t"] = t0 + snap["t"] / 1000
        session.snapshots.append(snap)
    elif kind == "a":
        if len(line) not in (len(AGGREGATE_FIELDS), len(AGGREGATE_FIELDS) + 1):
            raise ValueError(line)
        a = dict(zip(AGGREGATE_FIELDS, line[1:], strict=False))
        record.aggregates.append(
            Aggregate(
                host=hosts[a["host"]],
                start=t0 + a["bucket"] / 1000,
                seconds=float(session.header.get("aggregate_interval", 60.0)),
                n=a["n"],
                errors=a["errors"],
                dur_sum=a["dur_sum"] / 1000,
                dur_max=a["dur_max"] / 1000,
                bytes=a["bytes"],
                gaps=a["gaps"],
                gap_sum=a["gap_sum"] / 1000,
                gap_min=None if a["gap_min"] is None else a["gap_min"] / 1000,
                short=a["short"],
                asked_sum=a["asked_sum"] / 1000,
                asked_n=a.get("asked_n", a["n"]),
                worker=worker,
            )
        )
    elif kind == "ip":
        session.addresses[hosts[line[1]]] = str(line[2])
    elif kind == "hold":
        record.holds.append((hosts[line[1]], t0 + line[2] / 1000, line[3] / 1000))
    elif kind == "b":
        _, t, url, status, referer = line
        record.broken.append(
            {"t": t0 + t / 1000, "url": url, "status": status, "referer": referer,
             "worker": worker}
        )
    elif kind == "c":
        session.counters = line[2]
    elif kind == "end":
        session.end = t0 + line[1] / 1000
        session.reason = str(line[2])
        session.stats = line[3]
    else:
        raise ValueError(kind)
