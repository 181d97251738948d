"""One SQLite file per worker: several crawl processes in one directory never wait on each other.

SQLite lets one writer at a time hold a file; a second crawl process writing the same
``crawl-index.sqlite`` or ``crawldb-<site>.sqlite`` (two Redis workers, two scrapyd jobs
started in one directory) would wait up to 30 s for the lock, inside its reactor. So a writer
*claims* its file: the first process takes the file itself, the next ones
``<stem>.w1<suffix>``, ``<stem>.w2<suffix>``... each marked by an exclusive ``flock`` on
``<file>.lock`` held for the life of the process (released by the kernel even after kill -9,
so the next run takes the same slots again and keeps its recrawl history). Readers
(``scrapy search``) read the file and its siblings together (:func:`worker_siblings`).

When the workers must *share* one crawl database and one index (a page fetched by one worker
known to all), that is PostgreSQL (``DATABASE_URL``); these files are the embedded fallback.
Free of Scrapy; a leaf the cores may use.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from pathlib import Path

__all__ = ["claim_worker_file", "worker_siblings"]

MAX_WORKERS = 256
_claimed: dict[str, tuple[str, int]] = {}  # requested path -> (claimed path, lock fd)
_guard = threading.Lock()


def _slot_path(path: Path, n: int) -> Path:
    return path if n == 0 else path.with_name(f"{path.stem}.w{n}{path.suffix}")


def claim_worker_file(path: str | os.PathLike[str]) -> str:
    """The file this process writes for ``path``: ``path`` itself unless another live process
    holds it, else the first free ``.wN`` sibling. The same answer for every call of a process.
    ``:memory:`` is returned as it is."""
    text = str(path)
    if text == ":memory:":
        return text
    with _guard:
        if text in _claimed:
            return _claimed[text][0]
        base = Path(text)
        base.parent.mkdir(parents=True, exist_ok=True)
        for n in range(MAX_WORKERS):
            candidate = _slot_path(base, n)
            fd = os.open(f"{candidate}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _claimed[text] = (str(candidate), fd)  # held until the process ends
            return str(candidate)
    raise RuntimeError(f"more than {MAX_WORKERS} processes write {text}")


def worker_siblings(path: str | os.PathLike[str]) -> list[str]:
    """``path`` (if it exists) and every ``.wN`` sibling other workers wrote, in slot order."""
    base = Path(path)
    pattern = re.compile(re.escape(base.stem) + r"\.w(\d+)" + re.escape(base.suffix) + "$")
    found = [(0, str(base))] if base.exists() else []
    if base.parent.is_dir():
        for entry in base.parent.iterdir():
            m = pattern.match(entry.name)
            if m and int(m.group(1)) > 0:
                found.append((int(m.group(1)), str(entry)))
    return [p for _, p in sorted(found)]
