"""Near-duplicates shared by every worker of a crawl: the in-process detector's decisions, its
state in Redis, check-and-insert atomic across workers.

:class:`RedisNearDuplicateDetector` decides with the very functions of the in-process detector
(:func:`~crawler.content.neardup_features.compute_features` and
:mod:`crawler.content.neardup_decide`'s :func:`~crawler.content.neardup_decide.rank_candidates`,
:func:`~crawler.content.neardup_decide.pick_best`, :func:`~crawler.content.neardup_decide.decide`)
and learns each host's template with
:class:`crawler.content.template.HostTemplates` itself; only the state lives in Redis, under the
crawl's hash tag: the URL and fingerprint tables, the stored originals (sketch, the block of each
entry, cover, title, host, URL), the index of their anchors, every host's template model and the
per-host duplicate counts the frontier's penalty uses.

Each page is two round trips, optimistic like a compare-and-set:

1. ``READ`` (one Lua call, read only): the page's host template length (a worker keeps a copy
   of each host's template, which only grows, so a length is its version; if the copy is behind,
   the script returns what is missing and the worker computes the features again), what this
   worker's copies of the host's model and of the anchor index lack (below), the URL's id, the
   fingerprint's owner and, for the candidates the worker ranked, the records it has not decoded
   yet and their hosts' template lengths.
2. The worker ranks the candidates (:func:`~crawler.content.neardup_decide.rank_candidates` over its
   copy of the index, now current; if that changed the ranking, it reads again) and decides; a
   page that teaches its host's model is learned into the worker's copy of it
   (:meth:`HostTemplates.learn`, undone if the commit is refused). Then ``COMMIT`` (one Lua call)
   checks that nothing the decision depended on changed (nothing at all if no commit happened
   since ``READ``, the usual case; else the URL id, the fingerprint owner, the template lengths
   used, the host's pages learned, a counter bumped whenever a stored original is replaced, and
   whether an original indexed since took a posting of one of the page's anchors) and records
   the page (id, record, index entry, what it taught, host counts); otherwise it answers
   ``retry`` and the worker starts again from 1.

So the decisions are those of the in-process detector run over the pages in the order their
commits happened, and two workers racing on one page index it once: the second commit finds the
fingerprint taken and retries into "exact duplicate".

Each piece is kept in Redis in the form that costs Redis least per page: appends of packed bytes,
few commands, no per-block or per-anchor fields.

**Anchor index.** Each original appends one entry to the crawl's *index log*: its id, where its
record is, and its anchors (those whose posting lists are not full yet). A worker keeps a copy of
the index (:class:`~crawler.backends.redis.neardup_copies.IndexCopy`: the first
:data:`~crawler.content.neardup_index.MAX_POSTING` postings of
each anchor, in commit order, and which originals are live), brought up to date from the log's
tail in every ``READ`` (or, far behind, in plain reads of its pieces), so ranking the candidates
costs Redis nothing and indexing an original one append instead of 16 hash writes.

**Template models.** Counting every block of every original in Redis (one hash field per block,
~12 bytes and ~1 us of server time each, ~90 blocks per real page) was most of the store's bytes
and time. A host's model lives in Redis as a log: each page that taught it, as its distinct
blocks not yet template (sorted, gap-packed), and at every pruning of the model (each
:data:`~crawler.content.template.PRUNE_EVERY` pages, where the model is smallest) a *snapshot*
of the model (the blocks counted and their counts) that replaces the log so far. A worker keeps
its own copy of the models of the hosts it checks and brings it up to date from the ``READ``
reply (the log entries since its copy's version, or the snapshot and the log); it learns a page
there and sends ``COMMIT`` the page's log entry, the blocks it made template and, at a pruning,
the new snapshot. Redis does a few appends per page whatever the page's size; a worker replays
the pages other workers taught of the hosts it checks.

**Records.** An original's record is packed (gaps of its sketch in the bits the largest needs,
each entry's block as an index into the page's table of blocks in as few bits, the URL without
``scheme://host``) and appended to a heap of fixed-size strings, allocated whole so nothing is
lost to a string's doubling or to a hash table's per-entry overhead; a table of 8 bytes per id
(offset and length) finds it. A worker keeps the records it decoded (the heap never changes what
it holds) and asks ``READ`` only for the others.
Every key is named by :class:`crawler.backends.redis.keys.NeardupKeys` (the layout table is
there); the scripts are ``neardup_lua``'s, the packed formats ``neardup_codec``'s, and what a
worker keeps of the state ``neardup_copies``'s.


``bench/shared.py`` measures the decisions against the in-process detector, Redis server time
per page and bytes per document.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import time
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.calls import ScriptCall, script_runner
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.neardup_codec import decode_sketch, encode_sketch, url_part
from crawler.backends.redis.neardup_copies import (
    EMPTY,
    NO_LESSON,
    HostCopies,
    IndexCopy,
    Lesson,
    RecordCache,
    TemplateCopy,
)
from crawler.backends.redis.neardup_lua import CHUNK, SCRIPT_KEYS, SCRIPTS
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.config import defaults
from crawler.content.neardup_decide import Candidate, Decision, decide, pick_best, rank_candidates
from crawler.content.neardup_features import (
    ANCHORS,
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    Features,
    block_hash,
    compute_features,
    title_hash,
)
from crawler.content.neardup_index import MAX_POSTING
from crawler.content.normalize import normalize_lines
from crawler.content.template import MAX_TEMPLATE, MIN_PAGES, MIN_SHARE, PRUNE_EVERY

__all__ = ["RedisNearDuplicateDetector", "decode_sketch", "encode_sketch"]

LAYOUT = 3
DEFAULT_CAPACITY = defaults.NEARDUP_SHARED_CAPACITY
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
MAX_ATTEMPTS = 64  # commits refused in a row before giving up (each means another worker won)
_FILL = 64  # entries aimed at per listpack bucket (a lookup reads it all; Redis converts one
# past 512, so a bucket stays compact up to 8 times the capacity)
_TAIL = 1 << 18  # index log bytes READ sends at most; a worker further behind reads pieces


def _bits(entries: float) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(24, math.ceil(math.log2(max(2.0, entries / _FILL)))))


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.backends.redis.neardup_store.RedisNearDuplicateStore``): the detector's interface,
    its state in Redis, shared by every worker. Two round trips per page (more when a host's
    template grew since this worker last looked, or other workers' commits changed the
    candidates). Not thread-safe: one thread at a time; ``runs_in_thread`` lets the pipeline
    (and the spider's link-demotion question) use the crawl's content thread, so the round trips
    do not hold up the reactor."""

    runs_in_thread: ClassVar[bool] = True

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        key: str,
        shingle_size: int = DEFAULT_SHINGLE_SIZE,
        num_perm: int = DEFAULT_NUM_PERM,
        threshold: float = DEFAULT_THRESHOLD,
        capacity: int = DEFAULT_CAPACITY,
        outage_wait: float = defaults.REDIS_OUTAGE_WAIT,
    ) -> None:
        """``outage_wait``: how long a check waits for Redis once it went away, counted from
        the outage's start, before pages are judged alone (see :meth:`check`)."""
        if num_perm < ANCHORS or num_perm > 0xFFFF:
            raise ValueError(f"num_perm must be between {ANCHORS} and 65535")
        self.client = client
        self.keys = CrawlKeys(key).neardup()
        self.prefix = self.keys.prefix
        self.shingle_size, self.num_perm, self.threshold = shingle_size, num_perm, threshold
        self.capacity = capacity
        self.table_bits = _bits(capacity)
        self._scripts = {n: client.register_script(src) for n, src in SCRIPTS.items()}
        self._script_keys = SCRIPT_KEYS.keys(self.keys)
        # on a cluster, never through an ASK: the scripts touch keys they do not declare (calls);
        # a node away longer than a MOVED takes to follow is the outage's to wait out and log
        self._runner = script_runner(client, patience=0.5)
        self._copies = HostCopies()  # this worker's copies of the hosts' templates and models
        self._index = IndexCopy()  # this worker's copy of the index log
        self._records = RecordCache()  # the records this worker decoded
        self._hosts: dict[str, tuple[int, int, float]] = {}  # host -> (pages, dups, when)
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
        params = (
            f"layout={LAYOUT} shingles={shingle_size} perm={num_perm} threshold={threshold} "
            f"capacity={capacity} template={MIN_PAGES},{MIN_SHARE},{PRUNE_EVERY},{MAX_TEMPLATE}"
        )
        stored = self.outage.call(  # at the spider's start, maybe on the reactor: no wait
            lambda: client.set(self.keys.params, params, nx=True, get=True), wait=0
        )
        if stored is not None and stored.decode() != params:
            raise ValueError(
                f"the crawl's shared near-duplicate index was built with {stored.decode()}; "
                f"this worker has {params} (NEARDUP_* settings must match)"
            )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("shared", LAYOUT, self.shingle_size, self.num_perm, self.threshold)

    @property
    def replayed(self) -> int:
        """Pages other workers taught that this worker learned from the log."""
        return self._copies.replayed

    def _run(self, script: str, *args: Any) -> Any:
        return self._runner.run(
            ScriptCall(
                self._scripts[script],
                self._script_keys,
                [self.table_bits, self.table_bits, *args],
            )
        )

    # --- the decision ---------------------------------------------------------------------

    def check(
        self, url: str, text: str, *, add: bool = True, title: str | None = None
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
        try:
            return self.outage.call(lambda: self._check(url, text, add, title))
        except RedisUnavailable:
            self.unjudged += 1
            return self._judged_alone(url, text)

    def _judged_alone(self, url: str, text: str) -> Decision:
        """The decision on a page Redis could not be asked about: its fingerprint and words as
        the shared check would compute them (with this worker's copy of the host's template),
        ``unjudged`` unless it has no words (``empty`` needs no store)."""
        hid = self._copies.hids.get(_host(url), 0)
        template = self._copies.templates.get(hid) if hid else None
        f = compute_features(text, template.blocks if template else set(),
                             self.shingle_size, self.num_perm)
        if not f.words:
            return Decision(f.fingerprint, kind="empty")
        return Decision(f.fingerprint, kind="unjudged", words=f.words)

    def _unjudged_note(self) -> str:
        n = self.unjudged
        return f"{n} pages judged alone so far (neardup/unjudged)" if n else ""

    def _check_copies(self) -> None:
        """After an outage, this worker's copies may be ahead of Redis (a restart without
        persistence, a cluster failover that lost the last writes) or behind another worker's
        commits made on a replica promoted meanwhile: they are dropped once per outage and read
        again from Redis as pages need them (the index log in plain reads, a host's template and
        model with its next check)."""
        if self._synced == self.outage.outages:
            return
        self._synced = self.outage.outages
        self._copies = HostCopies()
        self._index = IndexCopy()
        self._records = RecordCache()
        self._hosts.clear()

    def _check(self, url: str, text: str, add: bool, title: str | None) -> Decision:
        self._check_copies()
        host = _host(url)
        title_id = title_hash(title)
        uh = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
        f: Features | None = None
        f_version = -1
        for _ in range(MAX_ATTEMPTS):
            hid = self._copies.hids.get(host, 0)
            template = self._copies.templates.get(hid) if hid else None
            version = len(template) if template is not None else 0
            if f is None or f_version != version:
                f = compute_features(text, template.blocks if template else set(),
                                     self.shingle_size, self.num_perm)
                f_version = version
            fp = bytes.fromhex(f.fingerprint)[:8] if f.words else b""
            anchors = f.sketch[:ANCHORS]
            compares = bool(f.words and len(f.sketch))
            # the candidates as this worker's copy of the index ranks them (the page's own id
            # unknown yet: one more); READ sends the records this worker lacks
            ranked = (rank_candidates(self._index.postings(anchors), None, self._index.alive)
                      if compares else [])
            wants, hosts, offsets = self._records.wants(self._index, ranked)
            reply = self._run("read", uh, fp, host, hid, version, self._copies.models.pages(host),
                              self._index.position, wants, hosts, _TAIL)
            if self._out_of_date(reply, host):
                continue
            (_, hid_now, own, seq, forget, loglen, tail, owner, owner_rec, records, lengths,
             model) = reply
            hid = int(hid_now)
            if hid:
                self._copies.hids[host] = hid
            if int(loglen) < self._index.position:  # Redis went back in time unnoticed
                self._synced = -1  # (restarted without persistence between two checks)
                self._check_copies()
                continue
            self._copies.follow(host, hid, model)
            self._index.apply(tail)
            if self._index.position != int(loglen):
                raise RuntimeError("index log copy out of step")
            for off, rec in zip(offsets if not int(owner) else [], records, strict=True):
                self._records.keep(off, rec)  # (none when the fingerprint has an owner)
            own, owner = int(own), int(owner)
            candidates: list[Candidate] = []
            checks = b""
            heads: dict[int, bytes] = {owner: owner_rec}
            postings: list[list[int]] = []
            if compares and not owner:
                postings = self._index.postings(anchors)
                ranked = rank_candidates(postings, own or None, self._index.alive)
                found = self._candidates(hid, ranked, lengths)
                if found is None:  # other workers' commits changed the ranking: read again
                    continue
                candidates, checks = found
                heads.update((c.doc, self._head(c.doc)) for c in candidates)
            own_template = self._copies.template(hid)
            outcome = decide(
                f, own or None, owner or None,
                lambda doc, heads=heads: self._url(heads[doc]),  # type: ignore[misc]
                functools.partial(_best, f, title_id, candidates, own_template, self.threshold),
                self.threshold,
            )
            if not add:
                return outcome.decision
            action = outcome.action
            lesson = (self._copies.learn(host, f.blocks)
                      if action == "new" or outcome.teaches else None)
            lens = bytes(min(len(p), MAX_POSTING) for p in postings)
            try:
                result = self._run(
                    "commit", action, uh, url_part(url, host), host, fp, own, owner,
                    int(forget), int(loglen), anchors.astype(">u4").tobytes() if lens else b"",
                    lens, checks, version,
                    encode_sketch(title_id, f.sketch, f.sketch_blocks, f.cover)
                    if action == "new" else b"", MAX_POSTING, *_lesson_args(lesson), hid,
                    int(seq),
                )
            except BaseException:  # Redis went away: the copy learns only what Redis kept
                self._copies.undo(lesson)
                raise
            if result[0] == b"retry":
                self._copies.undo(lesson)
                self.retries += 1
                continue
            self._committed(host, result, lesson)
            return outcome.decision
        raise RuntimeError(
            f"shared near-duplicate check of {url} refused {MAX_ATTEMPTS} times in a row"
        )

    def observe(self, url: str, text: str) -> None:
        """Learn ``url``'s blocks into its host's shared template model without recording the
        page (for warming a model up, as :meth:`NearDuplicateDetector.observe`)."""
        host = _host(url)
        blocks = [block_hash(x) for x in normalize_lines(text)]
        for _ in range(MAX_ATTEMPTS):
            hid = self._copies.hids.get(host, 0)
            template = self._copies.templates.get(hid) if hid else None
            version = len(template) if template is not None else 0
            reply = self._run("read", b"\0" * 8, b"", host, hid, version,
                              self._copies.models.pages(host), self._index.position, b"", b"",
                              _TAIL)
            if self._out_of_date(reply, host):
                continue
            hid = int(reply[1])
            if hid:
                self._copies.hids[host] = hid
            self._copies.follow(host, hid, reply[11])
            self._index.apply(reply[6])
            lesson = self._copies.learn(host, blocks)
            result = self._run(
                "commit", "observe", b"\0" * 8, b"", host, b"", 0, 0, 0, 0, b"", b"", b"",
                version, b"", MAX_POSTING, *_lesson_args(lesson), hid, int(reply[3]),
            )
            if result[0] == b"retry":
                self._copies.undo(lesson)
                self.retries += 1
                continue
            self._committed(host, result, lesson)
            return
        raise RuntimeError(f"shared template learning of {url} refused {MAX_ATTEMPTS} times")

    def _committed(self, host: str, result: list[Any], lesson: Lesson | None) -> None:
        """Keep what a commit answered: the host's counts and id; the template blocks the page
        made go to this worker's copy of the template (which the commit found current)."""
        if int(result[1]):
            self._hosts[host] = (int(result[1]), int(result[2]), time.monotonic())
        self.last_commit = int(result[3])
        self._copies.committed(host, int(result[4]), lesson)

    # --- candidates -------------------------------------------------------------------------

    def _out_of_date(self, reply: list[Any], host: str) -> bool:
        """True when the script refused to read because this worker's copy is behind (the
        host's template model is stale, or the anchor log has moved on); the copy is brought up
        to date here and the read must be asked again."""
        if reply[0] == b"stale":
            self._copies.catch_up(host, int(reply[1]), int(reply[2]), reply[3])
            return True
        if reply[0] == b"behind":
            self._catch_up(int(reply[1]))
            return True
        return False

    def _catch_up(self, length: int) -> None:
        """Read the index log up to ``length`` bytes in pieces (plain reads, not one long
        script): a worker that starts late, or was idle long."""
        start = self._index.position
        pipe = self.client.pipeline(transaction=False)
        pieces = range(start // CHUNK, (length + CHUNK - 1) // CHUNK)
        for k in pieces:
            lo = max(start, k * CHUNK) - k * CHUNK
            hi = min(length, (k + 1) * CHUNK) - k * CHUNK
            pipe.getrange(self.keys.log(k), lo, hi - 1)
        self._index.apply(b"".join(pipe.execute()))

    def _candidates(
        self, hid: int, ranked: list[int], lengths: bytes
    ) -> tuple[list[Candidate], bytes] | None:
        """The ranked candidates from the decoded records, their hosts' templates brought up
        to date (one pipelined round trip when some grew), and which lengths the decision used;
        None if a record or a host's template length is missing."""
        tlens = dict(struct.iter_unpack(">II", lengths))
        picked = []
        for doc in ranked:
            off = self._index.where(doc)[0]
            rec = self._records.peek(off)
            if rec is None or (rec.hid != hid and rec.hid not in tlens):
                return None
            self._records.get(off)  # now the most recently used
            picked.append((doc, rec))
        templates = self._copies.templates
        stale = {}
        for _, rec in picked:
            other = rec.hid
            have = len(templates[other]) if other in templates else 0
            if other != hid and have < tlens[other]:
                stale[other] = have
        if stale:
            pipe = self.client.pipeline(transaction=False)
            for other, have in stale.items():
                pipe.getrange(self.keys.template(other), have * 4, -1)
            for (other, have), rest in zip(stale.items(), pipe.execute(), strict=True):
                templates.setdefault(other, TemplateCopy())
                if len(templates[other]) == have:
                    templates[other].extend(rest)
        candidates, used = [], {}
        for doc, rec in picked:
            template = None
            if rec.hid != hid:
                copy = templates.get(rec.hid)
                template = copy.array() if copy is not None else EMPTY
                used[rec.hid] = len(copy) if copy is not None else 0
            candidates.append(Candidate(doc, rec.sketch, rec.blocks, rec.cover, rec.title,
                                        template))
        checks = b"".join(struct.pack(">II", h, n) for h, n in used.items())
        return candidates, checks

    def _head(self, doc: int) -> bytes:
        """The head of original ``doc``'s decoded record (fingerprint, host id, URL)."""
        rec = self._records.peek(self._index.where(doc)[0])
        assert rec is not None  # a candidate's record was decoded to compare it
        return rec.head

    def _url(self, head: bytes) -> str:
        """The URL of a record (from its head: fingerprint, host id, URL)."""
        hid = int.from_bytes(head[8:12], "big")
        n = int.from_bytes(head[12:14], "big")
        code, rest = head[14], head[15 : 14 + n].decode("utf-8")
        if code == 0:
            return rest
        host = self._copies.names.get(hid)
        if host is None:
            host = (self.client.hget(self.keys.host_names, hid) or b"").decode("utf-8")
            self._copies.names[hid] = host
        return ("http://" if code == 1 else "https://") + host + rest

    # --- queries --------------------------------------------------------------------------

    def host_duplicate_ratio(
        self, host: str, min_pages: int = defaults.NEARDUP_HOST_MIN_PAGES
    ) -> float:
        """Share of ``host``'s checked pages that were duplicates, counted by every worker; a
        worker's copy is refreshed by its own checks and at most every ``HOST_TTL`` seconds."""
        cached = self._hosts.get(host)
        if cached is None or time.monotonic() - cached[2] > HOST_TTL:
            try:  # while Redis is away: the last counts read, without waiting
                packed = int(self.outage.call(
                    lambda: self.client.hget(self.keys.host_counts, host), wait=0) or 0)
            except RedisUnavailable:
                return _ratio(cached, min_pages)
            cached = (packed >> 26, packed & ((1 << 26) - 1), time.monotonic())
            self._hosts[host] = cached
        return _ratio(cached, min_pages)

    def template(self, host: str) -> set[int]:
        """``host``'s template blocks as Redis has them now (for tests and benchmarks)."""
        hid = int(self.client.hget(self.keys.host_ids, host) or 0)
        if not hid:
            return set()
        raw = self.client.get(self.keys.template(hid)) or b""
        return set(np.frombuffer(raw, ">u4").tolist())

    def __len__(self) -> int:
        """Number of URLs recorded by every worker (originals and duplicates)."""
        return int(self.client.get(self.keys.last_id) or 0)

    @property
    def originals(self) -> int:
        return sum(
            self.client.hlen(key)
            for key in self.client.scan_iter(match=self.keys.pattern("f"), count=1000)
        )

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


def _ratio(cached: tuple[int, int, float] | None, min_pages: int) -> float:
    """A host's share of duplicates from its (pages, duplicates, when) counts."""
    if cached is None or cached[0] < min_pages:
        return 0.0
    return cached[1] / cached[0]


def _lesson_args(lesson: Lesson | None) -> list[Any]:
    return NO_LESSON if lesson is None else lesson.commit_args()


def _best(
    f: Features, title_id: int, candidates: list[Candidate], own_template: np.ndarray,
    threshold: float,
) -> tuple[int | None, float]:
    best, similarity = pick_best(f, title_id, candidates, own_template, threshold)
    return (best.doc if best is not None else None), similarity


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""

