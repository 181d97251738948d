"""Records handed to a writer thread: what the SQLite and PostgreSQL crawl databases share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from crawler.crawldb.api import PageRecord


class HandedOverRecords:
    """A crawl database whose ``commit`` hands batches of records to a writer thread
    (``self._writer``: ``submit``, ``flush``, ``close``, ``failed``) and returns at once. A
    handed-over record stays readable from ``self._written`` until its batch has landed, so a
    read on the reactor never sees an older copy than the one it recorded."""

    _lock: threading.Lock
    _written: dict[str, PageRecord]
    _writer: Any
    _db: Any

    commit: Callable[[], None]  # the backend's: hands the queued records over

    def _hand_over(self, batch: dict[str, PageRecord]) -> Callable[[], None]:
        """Make ``batch`` readable until written; returns what the writer calls once it is."""
        with self._lock:
            self._written.update(batch)

        def landed() -> None:
            with self._lock:
                for url, rec in batch.items():
                    if self._written.get(url) is rec:  # not replaced by a later record
                        del self._written[url]

        return landed

    def flush(self) -> None:
        """Commit and wait until every record is written."""
        self.commit()
        self._writer.flush()

    @property
    def failed_batches(self) -> int:
        return self._writer.failed

    def close(self) -> None:
        """Write everything recorded, then close the connections."""
        try:
            self.commit()
            self._writer.close()
        finally:
            self._db.close()
