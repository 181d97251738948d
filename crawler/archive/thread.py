"""The archive's writer thread: building records (SHA-1, gzip) and writing them costs about
1.35 ms of CPU for an 88 KB page (BENCHMARKS.md) and the digest index may be a Redis round
trip, so none of it runs on the reactor. zlib and hashlib release the GIL, so most of it runs
beside the reactor, on the other core."""

from __future__ import annotations

from typing import Any

from crawler.archive.archiver import Archiver
from crawler.threads.jobs import JobThread


class ArchiveThread(JobThread):
    """Runs the :class:`Archiver`'s calls in order; ``close`` writes what is queued, then
    closes the files (renamed to their final names)."""

    def __init__(self, archiver: Archiver, name: str = "warc-writer") -> None:
        self.archiver = archiver
        super().__init__(name)

    def _disconnect(self) -> None:
        self.archiver.close()

    def _dropped(self, job: Any, exc: Exception) -> None:
        super()._dropped(job, exc)
        self.archiver.counts["failed"] += 1
