"""Where the frontier keeps its queued URLs and its seen-set.

The Mercator logic (``mercator.py``) is the same whatever the store: a store only holds the K
front queues (FIFO per priority), the per-host back queues (FIFO per host) and the seen-set of
64-bit URL keys. ``MemoryQueueStore`` is the embedded default; ``SqliteQueueStore`` (``sqlite.py``)
keeps
the same queues on disk under ``JOBDIR`` in bounded memory.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from struct import Struct
from typing import Any

from crawler.frontier.api import Entry


def url_key(url: str) -> int:
    """A stable 64-bit key of a canonical URL (stable across processes, unlike ``hash``).

    At 10 million URLs the chance of any collision is about 3 in a million. (The 8-byte
    blake2b digest read as a signed big-endian integer; a copy of a ready hash object and a
    precompiled ``struct`` read cost ~5.0k instructions a key against ~6.9k for
    ``blake2b(..., digest_size=8)`` and ``int.from_bytes``, whose keyword arguments are parsed
    at every call: a worker hashes every link it finds.) The last ``KEYS_CACHED`` URLs'
    keys are kept (a look-up ~0.3k instructions): a page links to the same URL more than
    once, and a site's pages to the same menus.
    """
    key = _KEYS.get(url)
    if key is None:
        h = _KEY_HASH.copy()
        h.update(url.encode())
        key = _INT64(h.digest())[0]
        if len(_KEYS) >= KEYS_CACHED:
            _KEYS.clear()
        _KEYS[url] = key
    return key


KEYS_CACHED = 16_384  # URLs whose key url_key keeps (~150 B each); when full, all forgotten
_KEYS: dict[str, int] = {}
_KEY_HASH = blake2b(digest_size=8)  # url_key's: copied, never updated itself
_INT64 = Struct(">q").unpack


def identity(entry: Entry) -> str | int:
    """What the URL of ``entry`` is known by (OPIC's cash record, a credit to it): its
    request URL when that is its canonical form, else its seen key. Equal for two links with
    one canonical form, and costs no hash for most links."""
    return entry.key or entry.url


def entry_key(entry: Entry) -> int:
    """The seen-test key of a queued URL (``Entry.key``, computed when not stored)."""
    return entry.key or url_key(entry.url)


def identity_key(identity: str | int) -> int:
    """The seen key of what :func:`identity` gives."""
    return identity if isinstance(identity, int) else url_key(identity)


def link_identity(url: str, canonical: str) -> str | int:
    """:func:`identity` of a link: its request URL ``url`` when that is its
    ``canonical`` form, else the canonical form's key."""
    return url if canonical == url else url_key(canonical)


@dataclass
class SavedHost:
    """What a persistent store keeps of a host across runs. ``free_at``: when the host may be
    fetched again, on the frontier's clock (0: now). A store on disk does not keep it (its
    times were on a process's monotonic clock, gone with the process); a shared store keeps
    it on the server's clock, so a worker taking a partition over keeps the host's pace."""

    name: str
    admitted: int = 0
    crawl_delay: float | None = None
    dead: bool = False
    skipped: bool = False
    free_at: float = 0.0
    failures: int = 0
    failure_bits: int = 0


class QueueStore(abc.ABC):
    """Storage for the frontier's queues. ``front_sizes[p]`` is kept up to date by the store."""

    front_sizes: list[int]
    # True when ``seen_add_many`` costs one round trip, not one per key: the frontier then
    # tests a whole batch of links at once (a shared store)
    batched_seen = False
    # True when the frontier reads every queued URL back at start to rebuild OPIC's ledger (a
    # store on disk: a resumed crawl); a shared store that may hold millions of a partition's
    # URLs does not: a URL queued before a takeover keeps the cash it was stored with, and the
    # cash that arrives for it afterwards goes to its page's history instead
    rebuilds_cash = True

    @abc.abstractmethod
    def front_push(self, entry: Entry) -> None:
        """Append to front queue ``entry.priority``."""

    @abc.abstractmethod
    def front_pop(self, priority: int) -> Entry: ...

    @abc.abstractmethod
    def back_push(self, host: str, entry: Entry) -> None: ...

    @abc.abstractmethod
    def back_pop(self, host: str) -> Entry: ...

    @abc.abstractmethod
    def back_len(self, host: str) -> int: ...

    @abc.abstractmethod
    def back_drop(self, host: str) -> list[Entry]:
        """Empty a host's back queue (the host was given up); the entries are returned so the
        caller can ``forget`` them."""

    @abc.abstractmethod
    def seen_add(self, key: int) -> bool:
        """Add to the seen-set; True if the key was new."""

    def seen_add_many(self, keys: Sequence[int]) -> list[bool]:
        """``seen_add`` of each key, in order (a key repeated in ``keys`` is new once)."""
        return [self.seen_add(k) for k in keys]

    @abc.abstractmethod
    def seen_count(self) -> int: ...

    def save_host(self, host: Any) -> None:  # noqa: B027 - nothing to do in memory
        """A host's admitted count, Crawl-delay, status or next fetch time changed (a
        HostState)."""

    def load_hosts(self) -> list[SavedHost]:
        """Hosts kept from an earlier run."""
        return []

    def first_push(self, entry: Entry) -> None:  # noqa: B027 - nothing to do in memory
        """A host's first request (its robots.txt), which the frontier holds apart: a shared
        store keeps it, so the next owner of the host sends it first too."""

    def load_firsts(self) -> list[Entry]:
        """The first requests a shared store kept from the last owner, in order."""
        return []

    def stale_copies(self) -> dict[tuple[str | int, int], int] | None:
        """OPIC's older copies of raised URLs still in the front queues, ``(identity,
        queue) -> how many``, if the store keeps them (a shared store: see
        ``CashLedger.on_stale``); None: the store does not."""
        return None

    def note_stale(self, identity: str | int, queue: int, delta: int) -> None:  # noqa: B027
        """An older copy of a raised URL was left in front queue ``queue`` (+1) or met (-1)."""

    def forget(self, entry: Entry) -> None:  # noqa: B027 - nothing to do in memory
        """The entry was acknowledged or dropped: a persistent store deletes it for good."""

    def tick(self, now: float, *, durable: bool = False) -> None:  # noqa: B027
        """A point where a persistent store may commit (``durable``: must commit now)."""

    def close(self) -> None:  # noqa: B027
        """Write everything out and release files."""

    @abc.abstractmethod
    def iter_queued(self) -> Iterator[Entry]:
        """Every queued entry (for reports; may be slow on disk)."""


class MemoryQueueStore(QueueStore):
    """Deques and a set of 64-bit keys: about 190 bytes per queued URL of 50 characters and
    about 60 bytes per seen URL (see ``bench/frontier.py``)."""

    def __init__(self, front_queues: int) -> None:
        self._front: list[deque[Entry]] = [deque() for _ in range(front_queues)]
        self.front_sizes = [0] * front_queues
        self._back: dict[str, deque[Entry]] = {}
        self._seen: set[int] = set()

    def front_push(self, entry: Entry) -> None:
        self._front[entry.priority].append(entry)
        self.front_sizes[entry.priority] += 1

    def front_pop(self, priority: int) -> Entry:
        self.front_sizes[priority] -= 1
        return self._front[priority].popleft()

    def back_push(self, host: str, entry: Entry) -> None:
        queue = self._back.get(host)
        if queue is None:
            queue = self._back[host] = deque()
        queue.append(entry)

    def back_pop(self, host: str) -> Entry:
        queue = self._back[host]
        entry = queue.popleft()
        if not queue:
            del self._back[host]
        return entry

    def back_len(self, host: str) -> int:
        queue = self._back.get(host)
        return len(queue) if queue is not None else 0

    def back_drop(self, host: str) -> list[Entry]:
        return list(self._back.pop(host, ()))

    def seen_add(self, key: int) -> bool:
        seen = self._seen
        if key in seen:
            return False
        seen.add(key)
        return True

    def seen_count(self) -> int:
        return len(self._seen)

    def iter_queued(self) -> Iterator[Entry]:
        for queue in self._front:
            yield from queue
        for queue in self._back.values():
            yield from queue
