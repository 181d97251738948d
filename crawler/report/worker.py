"""Who a worker is, in the crawl record, the heartbeats, the leases and the metrics: one name
for one crawl across its stops and resumes, so a process stopped and resumed from its JOBDIR
is one worker in ``scrapy report`` and ``scrapy frontier``, not two.

The rule: ``RECORD_WORKER_ID`` when given; else, with a ``JOBDIR``, the name kept in
``JOBDIR/worker-id`` (written by the first run: its ``host:pid``), held with an ``flock`` while
the process runs, so a second process started on the same JOBDIR at the same time is not taken
for the first (it gets its own ``host:pid``); else ``host:pid``: a crawl without a JOBDIR
cannot be resumed, so each run is a new worker.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import IO

__all__ = ["worker_id"]

FILE = "worker-id"
_claimed: dict[str, tuple[str, IO[str]]] = {}  # JOBDIR -> (id, the locked file, kept open)


def _this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_id(jobdir: str | os.PathLike[str] | None = None, given: str | None = None) -> str:
    """This process's worker name (see the module docstring); the same for every caller."""
    if given:
        return str(given)
    if not jobdir:
        return _this_process()
    key = os.path.abspath(os.fspath(jobdir))
    if key in _claimed:
        return _claimed[key][0]
    path = Path(key) / FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the process's life
    except OSError:
        return _this_process()
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return _this_process()  # another live process runs on this JOBDIR
    f.seek(0)
    name = f.read().strip()
    if not name:
        name = _this_process()
        f.write(name + "\n")
        f.flush()
    _claimed[key] = (name, f)
    return name
