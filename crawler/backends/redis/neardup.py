"""Near-duplicates shared by every worker of a crawl: the in-process detector's decisions, its
state in Redis, check-and-insert atomic across workers.

:class:`RedisNearDuplicateDetector` decides with the in-process detector's own functions
(``compute_features``, ``neardup_decide``) and learns each host's template with
:class:`crawler.content.template.HostTemplates`. Redis only stores (``neardup_state``) and
checks. No worker holds the index: it keeps a bounded cache of what it read
(``neardup_copies``), so a new worker decides its first page at once. A page costs a few round
trips, optimistic like a compare-and-set: **read** (``NeardupState.read``: the URL's and
fingerprint's ids, the anchors' postings), **pick** the first
:data:`~crawler.content.neardup_decide.VERIFY` live originals the postings vote for, decide,
**commit** (``NeardupState.commit``: one transaction, a new original's postings in it, refused
if anything the decision read changed, and the worker starts again). So workers decide as one
detector would in their commit order.

Everything is under the crawl's near-duplicate tag, one slot of a Redis Cluster, so a commit is
one transaction, its anchor postings in it. (They had tags of their own, spread over the
masters, written after the commit, with a list of those pending and their repair; but the
records, most of the store's bytes, were on the one slot anyway: 489 of 997 bytes a page
against the postings' 156 on ``bench/shared.py --only neardup --quick``'s real pages.)

``:params`` holds the layout and the settings every worker must share; a crawl stored otherwise
is refused, in one line. ``bench/shared.py`` and ``bench/neardup_scale.py`` measure it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import time
from collections import OrderedDict
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.neardup_codec import Record, decode_record, encode_record, record_url
from crawler.backends.redis.neardup_copies import HostCopies
from crawler.backends.redis.neardup_state import TLEN, Decided, NeardupState, Read
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.config import defaults
from crawler.content.neardup_decide import (
    VERIFY,
    Candidate,
    Decision,
    decide,
    pick_best,
    rank_candidates,
)
from crawler.content.neardup_features import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    HOST_MIN_PAGES,
    Features,
    compute_features,
    title_hash,
)
from crawler.content.normalize import normalize_lines
from crawler.content.template import MAX_TEMPLATE, MIN_PAGES, MIN_SHARE, PRUNE_EVERY

LAYOUT = 12  # of the shared detector's state (its ``:params`` say which wrote a crawl's)
# Constants, not settings (docs/decisions/0003-settings.md). Pages the index is sized for: its
# URL and fingerprint buckets (~64 entries each) stay in Redis's compact encoding up to ~8 times
# this, past it at ~3x the bytes. The bytes a worker keeps of what it read (~14,000 records and
# a few hundred hosts' models: its working set; less only costs reads, never another decision).
DEFAULT_CAPACITY = 100_000
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
MAX_ATTEMPTS = 64  # commits refused in a row before giving up (each means another worker won)
_FILL = 64  # entries aimed at per bucket (a lookup reads it all); a listpack hash's: Redis
# converts one past hash-max-listpack-entries: 128 in the stock redis.conf, the crawler cannot
# set it, so a bucket stays compact up to twice the capacity; 512 built in: 8 times
ASK = VERIFY + 4  # candidates looked up at once (most are live: the first VERIFY are kept)
HOST_COUNTS = 4096  # hosts whose duplicate counts a worker keeps
# what a record takes in a worker's cache: decoded ~1.6 KB, the record read (its key) ~0.75 KB
# (tracemalloc, bench/realpages.py's pages)
RECORD_BYTES = 2400


def _bits(entries: float, most: int = 24) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(most, math.ceil(math.log2(max(2.0, entries / _FILL)))))


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.backends.redis.neardup_store.RedisNearDuplicateStore``): the detector's interface,
    its state in Redis, shared by every worker. A few round trips per page (more when a host's
    template grew since this worker last looked, or other workers' commits changed the
    candidates). Not thread-safe: one thread at a time; ``runs_in_thread`` lets the pipeline
    (and the spider's link-demotion question) use the crawl's content thread, so the round
    trips do not hold up the reactor."""

    runs_in_thread: ClassVar[bool] = True

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        key: str,
        threshold: float = DEFAULT_THRESHOLD,
        capacity: int = DEFAULT_CAPACITY,
        outage_wait: float = defaults.REDIS_OUTAGE_WAIT,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        """``outage_wait``: how long a check waits for Redis once it went away, counted from
        the outage's start, before pages are judged alone (see :meth:`check`);
        ``cache_bytes``: what this worker keeps of what it read (records, hosts' templates and
        models), at most."""
        self.client = client
        self.keys = CrawlKeys(key).neardup()
        self.prefix = self.keys.prefix
        self.threshold = threshold
        self.store = NeardupState(client, self.keys, _bits(capacity), _bits(capacity * ANCHORS, 28))
        self.cache_bytes = cache_bytes
        # hosts' counts (pages << 26 | duplicates) as last read, and when
        self._hosts: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._drop_copies()  # its copies of the hosts' templates and models, records decoded
        self.retries = 0  # commits refused because another worker changed what was read
        self.last_commit = 0  # place of this worker's last commit in the crawl's commit order
        self.unjudged = 0  # pages judged alone: Redis stayed away past the outage's wait
        self.outage = RedisOutage(
            "shared near-duplicate store",
            lambda: client.exists(self.keys.versions),
            meanwhile=f"pages wait for it up to {outage_wait:g}s from now, then are judged "
            "alone as originals (neardup/unjudged)",
            wait=outage_wait,
            back_note=self._unjudged_note,
        )
        self._synced = 0  # the outages this worker's copies were checked against
        self._epoch: bytes | None = None  # of the state this worker's copies are of
        params = (
            f"layout={LAYOUT} shingles={DEFAULT_SHINGLE_SIZE} perm={DEFAULT_NUM_PERM} "
            f"threshold={threshold} capacity={capacity} "
            f"template={MIN_PAGES},{MIN_SHARE},{PRUNE_EVERY},{MAX_TEMPLATE}"
        )
        self._params: str | None = params  # checked against the crawl's at the first call
        # at the spider's start, maybe on the reactor: no wait (Redis may be away)
        with contextlib.suppress(RedisUnavailable):
            self.outage.call(self._check_params, wait=0)

    def _check_params(self) -> None:
        """Refuse the crawl's shared state if another version or other settings stored it."""
        params = self._params
        if params is None:
            return
        stored = self.client.set(self.keys.params, params, nx=True, get=True)
        self._params = None
        if stored is not None and stored.decode() != params:
            raise ValueError(
                f"the crawl's shared near-duplicate state was stored with {stored.decode()}; "
                f"this worker has {params}: NEARDUP_* settings must match (another version's "
                f"state: delete {self.prefix}:* to start it afresh)"
            )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("shared", LAYOUT, DEFAULT_SHINGLE_SIZE, DEFAULT_NUM_PERM, self.threshold)

    @property
    def replayed(self) -> int:
        """Pages other workers taught that this worker learned from the log."""
        return self._copies.replayed

    @property
    def cache_used(self) -> int:
        """Bytes this worker's cache takes (its estimate of them), at most ``cache_bytes``."""
        return self._copies.used + self._decode.cache_info().currsize * RECORD_BYTES

    # --- the decision ---------------------------------------------------------------------

    def check(
        self,
        url: str,
        text: str,
        *,
        add: bool = True,
        title: str | None = None,
        lines: list[str] | None = None,
    ) -> Decision:
        """As :meth:`NearDuplicateDetector.check`, against every worker's pages, atomically.

        While Redis is away the check waits for it (on the caller's thread: the crawl's content
        thread, never the reactor), up to the outage's wait counted from when it went away; a
        call cut by the outage is made again whole once Redis is back (a commit whose answer
        was lost is found done: the page is its own original). Past the wait, and until Redis
        is back, a page is **judged alone**: ``Decision.kind`` ``unjudged`` (the pipeline counts
        ``neardup/unjudged``), not a duplicate, its links not demoted, and nothing of it is
        recorded in the shared store (a later copy of it may become the original instead).
        The choice an operator expects: a crawl goes on through a long outage as it would
        without the detector, its index gets at worst a duplicate document (never loses a
        page to a verdict nobody could check), and how many pages went unjudged is counted,
        and said when Redis is back."""
        if lines is None:
            lines = normalize_lines(text)
        normalized = lines
        try:
            return self.outage.call(lambda: self._check(url, normalized, add, title))
        except RedisUnavailable:
            self.unjudged += 1
            return self._judged_alone(url, normalized)

    def _judged_alone(self, url: str, lines: list[str]) -> Decision:
        """The decision on a page Redis could not be asked about: its fingerprint and words as
        the shared check would compute them (with this worker's copy of the host's template),
        ``unjudged`` unless it has no words (``empty`` needs no store)."""
        f = self._features(lines, self._copies.hids.get(_host(url), 0))
        if not f.words:
            return Decision(f.fingerprint, kind="empty")
        return Decision(f.fingerprint, kind="unjudged", words=f.words)

    def _features(self, lines: list[str], hid: int) -> Features:
        """The features of a text's normalized ``lines`` with this worker's copy of host
        ``hid``'s template."""
        template = self._copies.models.template(hid)
        return compute_features(lines, template, DEFAULT_SHINGLE_SIZE, DEFAULT_NUM_PERM)

    def _unjudged_note(self) -> str:
        n = self.unjudged
        return f"{n} pages judged alone so far (neardup/unjudged)" if n else ""

    def _check_copies(self) -> None:
        """After an outage, this worker's copies may be ahead of Redis (a restart without
        persistence, a cluster failover that lost the last writes) or behind another worker's
        commits made on a replica promoted meanwhile: they are dropped once per outage and read
        again from Redis as pages need them (a host's template and model with its next
        check)."""
        if self._synced == self.outage.outages:
            return
        self._synced = self.outage.outages
        self._drop_copies()

    def _drop_copies(self) -> None:
        self._copies = HostCopies(self.cache_bytes // 2)
        # the records decoded, by the record read: one stored again reads otherwise
        self._decode = functools.lru_cache(self.cache_bytes // 2 // RECORD_BYTES)(decode_record)
        self._hosts.clear()

    def _check(self, url: str, lines: list[str], add: bool, title: str | None) -> Decision:
        self._check_params()  # if Redis was away at the start
        self._check_copies()
        try:
            return self._decide(url, lines, add, title)
        except _StoreLost:  # Redis lost what this worker copied, without an outage seen
            self._drop_copies()
            return self._decide(url, lines, add, title)

    def _decide(self, url: str, lines: list[str], add: bool, title: str | None) -> Decision:
        host = _host(url)
        hid = self._host_id(host)
        title_id = title_hash(title)
        uh = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
        f: Features | None = None
        f_version = -1
        for _ in range(MAX_ATTEMPTS):
            version = self._copies.version(hid)
            if f is None or f_version != version:
                f, f_version = self._features(lines, hid), version
            fp = bytes.fromhex(f.fingerprint)[:8] if f.words else b""
            compares = bool(f.words and len(f.sketch))
            anchors = f.sketch[:ANCHORS].tolist() if compares else []
            read = self._read(hid, uh, fp, anchors)
            if read is None:  # the host's template or model moved: caught up, read again
                continue
            own, owner = read.own, read.owner
            candidates: list[Candidate] = []
            checks: dict[int, int] = {}
            urls: dict[int, str] = {}
            if owner and owner != own:  # an exact copy: its original's URL
                rec = self.store.records([owner])[0]
                if rec is None:  # no original now
                    continue
                urls[owner] = record_url(rec)
            if compares and not owner:
                found = self._pick(hid, rank_candidates(read.postings, own))
                if found is None:  # other workers' commits changed a host's template: again
                    continue
                candidates, checks, urls = found
            best = functools.partial(
                pick_best, f, title_id, candidates, self._copies.template(hid), self.threshold
            )
            outcome = decide(f, own or None, owner or None, urls.__getitem__, best, self.threshold)
            if not add:
                self._settle(hid)
                return outcome.decision
            action = outcome.action
            lesson = self._copies.learn(hid, f.blocks) if action == "new" or outcome.teaches \
                else None  # fmt: skip
            record = encode_record(fp, hid, url, title_id, f) if action == "new" else b""
            page = Decided(
                action,
                host,
                hid,
                uh,
                fp,
                version,
                checks,
                lesson,
                record,
                anchors if compares and not owner else [],
            )
            try:
                result = self.store.commit(page, read)
            except BaseException:  # Redis went away: the copy learns only what Redis kept
                self._copies.undo(lesson)
                raise
            if result is None:  # refused: another worker changed what the decision read
                self._copies.undo(lesson)
                self.retries += 1
                continue
            counts, self.last_commit = result
            self._count(host, counts)
            self._settle(hid)
            return outcome.decision
        raise RuntimeError(
            f"shared near-duplicate check of {url} refused {MAX_ATTEMPTS} times in a row"
        )

    def _settle(self, hid: int) -> None:
        """The end of a check: the host's copies the most recent, the cache within bounds."""
        self._copies.touch(hid)
        self._copies.evict(keep=hid)

    def _count(self, host: str, counts: int) -> None:
        self._hosts[host] = counts, time.monotonic()
        self._hosts.move_to_end(host)
        if len(self._hosts) > HOST_COUNTS:
            self._hosts.popitem(last=False)

    # --- the state in Redis -----------------------------------------------------------------

    def _host_id(self, host: str) -> int:
        """``host``'s id in Redis (kept by this worker once read)."""
        hid = self._copies.hids.get(host) or self.store.host_id(host)
        self._copies.hids[host], self._copies.names[hid] = hid, host
        return hid

    def _read(self, hid: int, uh: bytes, fp: bytes, anchors: list[int]) -> Read | None:
        """The read (``NeardupState.read``); None when this worker's copy of the host's template or
        model was behind (it is brought up to date: compute the features again, read again)."""
        read = self.store.read(hid, uh, fp, anchors)
        # another epoch: Redis restarted without persistence (or the keys were deleted) and
        # every id and host id this worker copied may name another URL or host now
        seen, self._epoch = self._epoch, read.epoch
        if seen is not None and read.epoch != seen:
            raise _StoreLost
        if self._copies.current(hid, read.meta):
            return read
        self._copies.catch_up(self.store, hid)
        return None

    # --- candidates -------------------------------------------------------------------------

    def _pick(
        self, hid: int, ranked: list[int]
    ) -> tuple[list[Candidate], dict[int, int], dict[int, str]] | None:
        """The first :data:`VERIFY` live originals of ``ranked`` as candidates, their hosts'
        templates brought up to date; which template lengths the decision used; their URLs.
        None if a template moved meanwhile."""
        picked: dict[int, Record] = {}
        at = 0
        while len(picked) < VERIFY and at < len(ranked):
            batch = ranked[at : at + ASK]
            at += len(batch)
            records = zip(batch, self.store.records(batch), strict=True)
            live = [(doc, rec) for doc, rec in records if rec][: VERIFY - len(picked)]
            picked.update((doc, self._decode(rec)) for doc, rec in live)
        # the other hosts' template lengths (the page's own host's is the read's)
        others = sorted({rec.hid for rec in picked.values()} - {hid})
        metas = self.client.hmget(self.keys.versions, others) if others else []
        tlens = {h: int(m or 0) & TLEN for h, m in zip(others, metas, strict=True)}
        if not self._copies.refresh(self.store, others, tlens):
            return None
        candidates, used = [], {}
        for doc, rec in picked.items():
            template = None
            if rec.hid != hid:
                template = self._copies.template(rec.hid)
                used[rec.hid] = self._copies.version(rec.hid)
            candidates.append(
                Candidate(doc, rec.sketch, rec.blocks, rec.cover, rec.title, template)
            )
        for other in used:
            self._copies.touch(other)
        return candidates, used, {doc: rec.url for doc, rec in picked.items()}

    # --- queries --------------------------------------------------------------------------

    def host_duplicate_ratio(self, host: str, min_pages: int = HOST_MIN_PAGES) -> float:
        """Share of ``host``'s checked pages that were duplicates, counted by every worker; a
        worker's copy is refreshed by its own checks and at most every ``HOST_TTL`` seconds."""
        counts, when = self._hosts.get(host, (0, float("-inf")))
        if time.monotonic() - when > HOST_TTL:
            # while Redis is away: the last counts read, without waiting
            with contextlib.suppress(RedisUnavailable):
                counts = int(
                    self.outage.call(lambda: self.client.hget(self.keys.host_counts, host), wait=0)
                    or 0
                )
                self._count(host, counts)
        pages = counts >> 26
        return (counts & ((1 << 26) - 1)) / pages if pages >= max(1, min_pages) else 0.0

    def template(self, host: str) -> set[int]:
        """``host``'s template blocks as Redis has them now (for tests and benchmarks)."""
        hid = int(self.client.hget(self.keys.host_ids, host) or 0)
        if not hid:
            return set()
        raw = self.client.get(self.keys.template(hid)) or b""
        return set(np.frombuffer(raw, ">u4").tolist())

    def __len__(self) -> int:
        """Number of URLs recorded by every worker (originals and duplicates; for tests and
        reports: it scans the URL buckets)."""
        return self._fields("u")

    @property
    def originals(self) -> int:
        return self._fields("f")

    def _fields(self, kind: str) -> int:
        pattern = self.keys.pattern(kind)
        return sum(self.client.hlen(k) for k in self.client.scan_iter(match=pattern, count=1000))

    def close(self) -> None:
        """Stop the outage's probe and close the connection (the state stays in Redis)."""
        self.outage.close()
        self.client.close()

    def state(self) -> dict[str, Any]:
        """Nothing to save: the state is in Redis (a JOBDIR resume finds it there)."""
        return {"shared": self.prefix}

    def restore(self, state: dict[str, Any]) -> bool:
        return True

    def memory(self) -> dict[str, int]:
        """Bytes Redis uses for this index by kind of key (``MEMORY USAGE``; for benchmarks)."""
        total: dict[str, int] = {}
        for key in self.client.scan_iter(match=self.keys.pattern(), count=1000):
            kind = self.keys.kind(key)
            total[kind] = total.get(kind, 0) + int(self.client.memory_usage(key, samples=0) or 0)
        return total


class _StoreLost(Exception):
    """Redis has less than this worker read from it: its copies must go."""


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""
