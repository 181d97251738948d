"""The near-duplicate part of the content analysis: a page's verdict, and the detector's journal.

The content analysis (``crawler.sites.analysis``) asks :class:`NearDuplicateJudge` once per page,
on the crawl's content thread, before the page's links are queued: a duplicate's links go
``neardup_link_demotion`` levels deeper. The :class:`Verdict` then rides with the page's item
to the near-duplicate pipeline, which counts it and turns the host's share of duplicates into
a priority penalty for the frontier; the index pipeline makes a duplicate an alias of its
original (``duplicate_of``).

The detector (``neardup_store``: :class:`crawler.content.neardup.NearDuplicateDetector`
or the shared one on Redis) is the judge's alone, so it is called from one thread only. With
``JOBDIR`` set, an in-process detector's records (originals with their sketches, duplicates,
template blocks) are appended to ``JOBDIR/neardup.journal`` (msgpack) at most every
:data:`JOURNAL_INTERVAL` seconds and at close, and replayed at open: a resumed crawl still
knows its originals, and a ``kill -9`` loses only the last interval's pages. A shared detector
keeps its own state (it has no ``drain``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgpack

from crawler.config.tuning import knob_default
from crawler.content.neardup_features import HOST_MIN_PAGES

__all__ = ["JOURNAL_FILE", "NearDuplicateJudge", "Verdict"]

logger = logging.getLogger(__name__)

JOURNAL_FILE = "neardup.journal"
JOURNAL_INTERVAL = 2.0  # seconds between appends to JOBDIR/neardup.journal


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the judge concluded about one page, and what its host's record is now."""

    fingerprint: str  # of the normalized main text (the item's content_fingerprint)
    duplicate_of: str | None = None  # the original's URL
    similarity: float | None = None  # estimated Jaccard to the original (1.0 when exact)
    # "new", "exact", "near", "empty" (the detector's Decision.kind); "unjudged": a shared
    # detector's store stayed unreachable, the page was judged alone (an original)
    kind: str = "new"
    host: str = ""
    # share of the host's checked pages that were duplicates, this one included (0 below
    # HOST_MIN_PAGES): the near-duplicate pipeline's penalty is made of it
    host_duplicates: float = 0.0
    demote: int = 0  # levels of depth added to the page's links

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None

    def item_fields(self) -> dict[str, Any]:
        """The item fields it sets, in the order a page item takes them."""
        fields: dict[str, Any] = {"content_fingerprint": self.fingerprint}
        if self.duplicate_of is not None:
            fields["duplicate_of"] = self.duplicate_of
            fields["similarity"] = self.similarity
        return fields


class NearDuplicateJudge:
    """The near-duplicate detector of a crawl with what it needs around it: the per-host
    minimum before a host's share counts, the links' demotion, the journal.

    Not thread-safe, like the detector: one thread at a time (the content thread in a crawl).
    """

    def __init__(
        self,
        detector: Any,
        *,
        host_min_pages: int = HOST_MIN_PAGES,
        link_demotion: int = knob_default("neardup_link_demotion"),
        journal: Path | None = None,
        journal_interval: float | None = None,
    ) -> None:
        self.detector = detector
        self.host_min_pages = host_min_pages
        self.link_demotion = link_demotion
        self.journal = journal
        # the module's constant as it is now (a test shortens it in a child process)
        self.journal_interval = JOURNAL_INTERVAL if journal_interval is None else journal_interval
        self._last_write = time.monotonic()

    def judge(
        self,
        url: str,
        text: str,
        *,
        title: str | None = None,
        noindex: bool = False,
        lines: list[str] | None = None,
    ) -> Verdict:
        """The verdict on the page at ``url`` (after redirects) whose main text is ``text``
        (``lines``: its ``normalize_lines``, when made already).

        A noindex page is compared but never becomes an original: its content will not be in
        the index, so it must not be what indexable copies are aliased to.
        """
        decision = self.detector.check(
            url, text, add=not noindex, title=title or None, lines=lines
        )
        host = urlsplit(url).hostname or ""
        duplicate = decision.duplicate_of is not None
        verdict = Verdict(
            decision.fingerprint,
            decision.duplicate_of,
            decision.similarity if duplicate else None,
            decision.kind,
            host,
            self.detector.host_duplicate_ratio(host, self.host_min_pages),
            self.link_demotion if duplicate else 0,
        )
        if time.monotonic() - self._last_write >= self.journal_interval:
            self.write_journal()
        return verdict

    # --- the journal --------------------------------------------------------------------------

    def open(self) -> None:
        """Replay the journal of an earlier run of this job, if there is one it can use."""
        path = self.journal
        drain = getattr(self.detector, "drain", None)
        if path is None or drain is None or not path.exists():
            return  # a shared store (Redis) keeps its own state
        try:
            with path.open("rb") as f:
                unpacker = msgpack.Unpacker(f, raw=False, use_list=False)
                header = next(unpacker, None)
                if header is None or tuple(header[1]) != tuple(self.detector.params):
                    logger.warning(
                        "Near-duplicate journal %s was made with other NEARDUP_* settings; "
                        "starting afresh", path,
                    )
                    path.unlink()
                    return
                good = [unpacker.tell()]
                applied = self.detector.replay(_complete(unpacker, good))
            size = path.stat().st_size
            if good[0] < size:  # a record cut short by a kill: cut it off before appending
                logger.warning("Near-duplicate journal %s ends with %d bytes of a partial "
                               "record (a kill?); dropped", path, size - good[0])
                with path.open("r+b") as f:
                    f.truncate(good[0])
        except (OSError, ValueError, msgpack.UnpackException) as exc:
            logger.warning("Ignoring unreadable near-duplicate journal %s: %s", path, exc)
            return
        drain()  # what replay recorded is on disk already
        logger.info(
            "Near-duplicate journal loaded from %s: %d records, %d URLs, %d originals",
            path, applied, len(self.detector), self.detector.originals,
        )

    def write_journal(self) -> None:
        """Append what the detector recorded since the last write (one ``write`` call)."""
        self._last_write = time.monotonic()
        drain = getattr(self.detector, "drain", None)
        if self.journal is None or drain is None:
            return
        records = drain()
        if not records:
            return
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        packer = msgpack.Packer(use_bin_type=True)
        chunk = b"".join(packer.pack(r) for r in records)
        if not self.journal.exists():
            chunk = packer.pack(("params", list(self.detector.params))) + chunk
        with self.journal.open("ab") as f:
            f.write(chunk)

    def close(self) -> None:
        self.write_journal()
        close = getattr(self.detector, "close", None)
        if close is not None:  # a shared detector's connection and outage probe
            close()


def _complete(unpacker: msgpack.Unpacker, good: list[int]) -> Iterator[Any]:
    """The journal's complete records; ``good[0]`` follows the end of the last one."""
    try:
        for record in unpacker:
            yield record
            good[0] = unpacker.tell()
    except (ValueError, msgpack.UnpackException):
        return
