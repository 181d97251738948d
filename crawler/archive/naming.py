"""WARC file names that never collide across workers and machines.

``{prefix}-{UTC timestamp to the millisecond}-{serial}-{host}-{pid}.warc.gz``, the shape
Heritrix and the IIPC recommend: the timestamp orders files in time, the serial orders one
writer's files even within a millisecond, host and pid keep two workers (on one machine or many)
apart. A file is written as ``<name>.open`` and renamed when it is complete, so anything
without that suffix is a whole, finished file.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import UTC, datetime

OPEN_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"
_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


def safe_part(text: str) -> str:
    """``text`` as one part of a file name: no dash (the separator), slash or space."""
    return _UNSAFE.sub("_", text).strip("_") or "x"


class WarcNamer:
    """Names one writer's files: ``next_name()`` for each new file, serials from 0."""

    def __init__(
        self, prefix: str, host: str | None = None, pid: int | None = None, serial: int = 0
    ) -> None:
        self.prefix = safe_part(prefix)
        self.host = safe_part(host or socket.gethostname())
        self.pid = os.getpid() if pid is None else pid
        self.serial = serial

    def next_name(self, now: datetime | None = None) -> str:
        moment = (now or datetime.now(UTC)).strftime("%Y%m%d%H%M%S%f")[:17]
        name = f"{self.prefix}-{moment}-{self.serial:05d}-{self.host}-{self.pid}{WARC_SUFFIX}"
        self.serial += 1
        return name
