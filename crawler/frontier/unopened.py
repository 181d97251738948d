"""The shared frontier before it is open: what :class:`~crawler.frontier.buffered.BufferedFrontier`
serves while its worker thread connects to the shared frontier.

Opening a shared frontier takes round trips (connect, the crawl's layout and settings checks, the
first ownership beat) and, while Redis is away, as long as it is away. The reactor must not wait
for that: the buffered frontier is handed to the scheduler at once over an :class:`Unopened`
frontier, and its worker opens the real one as its first job, retried until Redis answers.
Everything the caller queued meanwhile runs after that job, on the real frontier. The
placeholder answers what a frontier with nothing yet would (no lease, nothing due, nothing
held) and drops what reaches it, which happens only when the crawl stopped before the shared
frontier could be opened: the work is then still in Redis (or in the seeds), not in this
process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from crawler.frontier.api import (
    AddResult,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
)

NOT_OPEN = "not_open"  # AddResult.reason of an add the shared frontier never received


class Unopened(Frontier):
    """A frontier with nothing in it, never open (see the module docstring)."""

    def __init__(self, lease_ttl: float) -> None:
        self.lease_ttl = lease_ttl

    def add(self, entry: Entry, *, force: bool = False, first: bool = False) -> AddResult:
        return AddResult(False, NOT_OPEN)

    def mark_seen(self, keys: Iterable[str]) -> int:
        return 0

    def next(self) -> Lease | None:
        return None

    def complete(
        self,
        token: str,
        duration: float | None,
        outcome: Outcome = Outcome.FETCHED,
        *,
        size: int = 0,
    ) -> float | None:
        return None

    def ack(self, token: str) -> None:
        pass

    def renew(self, tokens: Iterable[str]) -> int:
        return 0

    def release(self, tokens: Iterable[str], *, rest: bool = False) -> int:
        return 0

    def expire(self) -> int:
        return 0

    def due_in(self) -> float | None:
        return None

    def set_crawl_delay(self, host: str, seconds: float | None) -> bool:
        return False

    def hold_host(self, host: str, seconds: float) -> None:
        pass

    def has_work(self, horizon: float) -> bool:
        return False

    def in_flight(self) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def counts(self) -> FrontierCounts:
        return FrontierCounts()

    def waiting_hosts(self) -> list[HostReport]:
        return []

    def watch(self, on_change: Callable[[], None]) -> Callable[[], None] | None:
        return None
