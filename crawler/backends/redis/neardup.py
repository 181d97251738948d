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

No worker holds the crawl's index: a page costs a few round trips, optimistic like a
compare-and-set, and a worker keeps only a bounded cache (``NEARDUP_CACHE_BYTES``) of what it
read, so a new worker decides its first page at once, without replaying anything.

1. ``READ`` (one Lua call on the crawl's tag) and the postings of the page's
   :data:`~crawler.content.neardup_features.ANCHORS` anchors (on a single Redis read by
   ``READ`` itself; on a cluster by ``GET`` after it, one call per anchor tag,
   ``neardup_anchors``): the page's
   host template length (a worker keeps a copy of each host's template it met, which only
   grows, so a length is its version; if the copy is behind, the script returns what is missing
   and the worker computes the features again), what this worker's copy of the host's model
   lacks (below), the URL's id, the fingerprint's owner and its record, the crawl's last id
   (``next``: every original stored later has a greater store key) and the *pending* originals:
   those committed whose postings may not be written yet (``:pend``, a few per worker).
2. The worker merges the pending originals into the postings read (both in store-key order,
   as a sequential index would list them), ranks the originals by votes
   (:func:`~crawler.content.neardup_decide.rank_candidates`'s order) and asks ``PICK`` for the
   first :data:`~crawler.content.neardup_decide.VERIFY` live ones: their record table entries,
   the records the worker has not decoded (or decoded before the original was stored again)
   and their hosts' template lengths. It decides; a page that teaches its host's model is
   learned into the worker's copy of it (:meth:`HostTemplates.learn`, undone if the commit is
   refused).
3. ``COMMIT`` checks that nothing the decision depended on changed (nothing at all if no commit
   happened since ``READ``, the usual case; else the URL id, the fingerprint owner, the template
   lengths used, the host's pages learned, a counter bumped whenever a stored original is
   replaced, and whether an original stored since ``READ`` (``:recent``: the last
   :data:`~crawler.backends.redis.neardup_lua.RECENT`, newest first) took a posting of one of
   the page's anchors that had fewer than ``MAX_POSTING``) and records the page (id, record,
   what it taught, host counts; an original also goes to ``:pend`` and ``:recent``); otherwise
   it answers ``retry`` and the worker starts again from 1.
4. A new original's postings are written and it is taken off ``:pend``: on a single Redis by
   the worker's next ``READ`` itself (``neardup_anchors.WRITE``, ``PUT``'s code); on a cluster
   by ``PUT`` (one call per anchor tag), and taken off ``:pend`` by the worker's next ``READ``,
   once the ``PUT`` was answered.

**Why that is atomic across tags.** A Lua script touches one cluster slot, so the anchor
postings cannot be written in the ``COMMIT`` that orders the decisions. They need not be: the
crawl's own tag stays the one place decisions are ordered (``COMMIT``), and the postings are a
copy of what the commits decided, written after, idempotently, sorted by store key whatever
order they arrive in. A worker reads ``:pend`` *before* the postings (in one script, or one
after the other on a cluster): an original committed before that ``READ`` is either still
pending (merged from ``:pend``) or taken off it by a ``READ`` that came after its ``PUT`` was
answered, so it is in the postings read; one committed after is in ``:recent`` under a store key
above the ``next`` read, which ``COMMIT`` checks. So two workers judging copies of one page at
once (or two near-duplicates) decide as one detector would in their commit order: the second
commit finds the fingerprint taken, or an original on one of its anchors, and retries into
"duplicate". A worker that dies between ``COMMIT`` and ``PUT`` leaves its original pending: every
worker still merges it, and the first to see it ``REPAIR_LAG`` ids old writes its postings.

**Bytes.** Per original the anchors cost ~16 listpack fields (2-4 bytes of field, 6 of value);
``:pend`` and ``:recent`` are bounded; the worker's copies are bounded by
``NEARDUP_CACHE_BYTES``.

**Layout.** A crawl's state written by an older layout is refused with a message naming it
(``neardup_codec.OLD_LAYOUTS``: layout 3 kept its anchors in an index log every worker replayed,
layout 4 its records' sketches in fixed-width gaps, layout 5 its anchor postings bucketed by the
anchor's own top bits, not spread); finish such a crawl with the version that
started it or start its near-duplicate state afresh (delete ``{crawl}:nd:*``).

Every key on the crawl's tag is named by :class:`crawler.backends.redis.keys.NeardupKeys` (the
layout table is there), the anchor buckets by
:class:`~crawler.backends.redis.neardup_anchors.AnchorKeys`; the scripts are ``neardup_lua``'s
and ``neardup_anchors``'s, the packed formats ``neardup_codec``'s, and what a worker keeps of the
state ``neardup_copies``'s (the template models' and records' layout too).

``bench/shared.py`` and ``bench/neardup_scale.py`` measure it (decisions, bytes, time, memory).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import struct
import time
from collections import OrderedDict
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import redis
from redis.cluster import RedisCluster

from crawler.backends.redis.calls import ScriptCall, script_runner
from crawler.backends.redis.keys import CrawlKeys
from crawler.backends.redis.neardup_anchors import AnchorKeys, AnchorPostings, merge, ranked
from crawler.backends.redis.neardup_codec import (
    LAYOUT,
    decode_sketch,
    encode_sketch,
    refusal,
    url_part,
)
from crawler.backends.redis.neardup_copies import (
    EMPTY,
    NO_LESSON,
    DecodedRecord,
    HostCopies,
    Lesson,
    RecordCache,
)
from crawler.backends.redis.neardup_lua import SCRIPT_KEYS, SCRIPTS
from crawler.backends.redis.outage import RedisOutage, RedisUnavailable
from crawler.config import defaults
from crawler.content.neardup_decide import VERIFY, Candidate, Decision, decide, pick_best
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

DEFAULT_CAPACITY = defaults.NEARDUP_SHARED_CAPACITY
DEFAULT_CACHE_BYTES = defaults.NEARDUP_CACHE_BYTES
HOST_TTL = 10.0  # seconds a worker trusts its copy of a host's duplicate counts
MAX_ATTEMPTS = 64  # commits refused in a row before giving up (each means another worker won)
_FILL = 64  # entries aimed at per listpack bucket (a lookup reads it all; Redis converts one
# past hash-max-listpack-entries: 128 in the stock redis.conf, the crawler cannot set it, so a
# bucket stays compact up to twice the capacity; 512 built in: 8 times)
ASK = 64  # candidates sent to PICK at once (it stops at VERIFY live ones)
HOST_COUNTS = 4096  # hosts whose duplicate counts a worker keeps


def _bits(entries: float, most: int = 24) -> int:
    """Bits of bucket number for ``entries`` fields at about ``_FILL`` per bucket."""
    return max(1, min(most, math.ceil(math.log2(max(2.0, entries / _FILL)))))


class RedisNearDuplicateDetector:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend (built by
    ``crawler.backends.redis.neardup_store.RedisNearDuplicateStore``): the detector's interface,
    its state in Redis, shared by every worker. Three round trips per page, two without
    candidates (more when a host's template grew since this worker last looked, or other
    workers' commits changed the candidates). Not thread-safe: one thread at a time;
    ``runs_in_thread`` lets the pipeline (and the spider's link-demotion question) use the
    crawl's content thread, so the round trips do not hold up the reactor."""

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
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        groups: int = 1,
    ) -> None:
        """``outage_wait``: how long a check waits for Redis once it went away, counted from
        the outage's start, before pages are judged alone (see :meth:`check`);
        ``cache_bytes``: what this worker keeps of what it read (records, hosts' templates and
        models), at most; ``groups``: hash tags the anchor postings spread over
        (``FRONTIER_SHARDS``: on a cluster, one per master)."""
        if num_perm < ANCHORS or num_perm > 0xFFFF:
            raise ValueError(f"num_perm must be between {ANCHORS} and 65535")
        self.client = client
        crawl = CrawlKeys(key)
        self.keys = crawl.neardup()
        self.prefix = self.keys.prefix
        self.shingle_size, self.num_perm, self.threshold = shingle_size, num_perm, threshold
        self.capacity = capacity
        self.table_bits = _bits(capacity)
        anchor_keys = AnchorKeys(crawl.name, groups, _bits(capacity * ANCHORS, 28))
        self._scripts = {n: client.register_script(src) for n, src in SCRIPTS.items()}
        self._script_keys = SCRIPT_KEYS.keys(self.keys)
        # on a cluster, never through an ASK: the scripts touch keys they do not declare (calls);
        # a node away longer than a MOVED takes to follow is the outage's to wait out and log
        self._runner = script_runner(client, patience=0.5)
        self.anchors = AnchorPostings(client, anchor_keys, self._runner, MAX_POSTING,
                                      self.keys.pending)
        self.cache_bytes = cache_bytes
        # this worker's copies of the hosts' templates and models, and the records it decoded
        self._copies = HostCopies(cache_bytes // 2)
        self._records = RecordCache(cache_bytes // 2)
        self._hosts: OrderedDict[str, tuple[int, int, float]] = OrderedDict()  # host counts
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
            f" groups={groups}"
        )
        stored = self.outage.call(  # at the spider's start, maybe on the reactor: no wait
            lambda: client.set(self.keys.params, params, nx=True, get=True), wait=0
        )
        if stored is not None and stored.decode() != params:
            old = stored.decode()
            if not old.startswith(f"layout={LAYOUT} "):
                raise ValueError(refusal(old, self.prefix))
            raise ValueError(
                f"the crawl's shared near-duplicate index was built with {old}; "
                f"this worker has {params} (NEARDUP_* settings must match, and FRONTIER_SHARDS)"
            )

    @property
    def params(self) -> tuple[Any, ...]:
        return ("shared", LAYOUT, self.shingle_size, self.num_perm, self.threshold)

    @property
    def replayed(self) -> int:
        """Pages other workers taught that this worker learned from the log."""
        return self._copies.replayed

    @property
    def cache_used(self) -> int:
        """Bytes this worker's cache takes (its estimate of them), at most ``cache_bytes``."""
        return self._copies.used + self._records.used

    def _call(self, script: str, *args: Any, write: bool = True) -> ScriptCall:
        return ScriptCall(self._scripts[script], self._script_keys,
                          [self.table_bits, self.table_bits, *args], write)

    def _run(self, script: str, *args: Any) -> Any:
        return self._runner.run(self._call(script, *args))

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
        again from Redis as pages need them (a host's template and model with its next
        check)."""
        if self._synced == self.outage.outages:
            return
        self._synced = self.outage.outages
        self._copies = HostCopies(self.cache_bytes // 2)
        self._records = RecordCache(self.cache_bytes // 2)
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
            reply, stored = self.anchors.read(
                self._call("read", uh, fp, host, hid, version, self._copies.models.pages(host),
                           self.anchors.take_done()),
                anchors.tolist() if compares else [],
            )
            if self._out_of_date(reply, host):
                continue
            (_, hid_now, own, seq, forget, next_id, pending, owner, owner_rec, model) = reply[:10]
            hid = int(hid_now)
            if hid:
                self._copies.hids[host] = hid
                self._copies.names[hid] = host
            self._copies.follow(host, hid, model)
            own, owner = int(own), int(owner)
            candidates: list[Candidate] = []
            checks = b""
            heads: dict[int, bytes] = {owner: owner_rec}
            lens = b""
            if compares and not owner:
                postings = merge(stored, anchors.tolist(),
                                 self.anchors.pending(pending, int(next_id)), MAX_POSTING)
                lens = bytes(len(p) for p in postings)
                found = self._pick(hid, ranked(postings, own))
                if found is None:  # other workers' commits changed a host's template: again
                    continue
                candidates, checks, picked = found
                heads.update((doc, rec.head) for doc, rec in picked.items())
            own_template = self._copies.template(hid)
            outcome = decide(
                f, own or None, owner or None,
                lambda doc, heads=heads: self._url(heads[doc]),  # type: ignore[misc]
                functools.partial(_best, f, title_id, candidates, own_template, self.threshold),
                self.threshold,
            )
            if not add:
                self._settle(hid)
                return outcome.decision
            action = outcome.action
            lesson = (self._copies.learn(host, f.blocks)
                      if action == "new" or outcome.teaches else None)
            try:
                result = self._run(
                    "commit", action, uh, url_part(url, host), host, fp, own, owner,
                    int(forget), int(next_id), anchors.astype(">u4").tobytes() if lens else b"",
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
            if int(result[5]):  # a new original: its postings
                self.anchors.write(int(result[5]), result[6], anchors.tolist(),
                                   [n == 0 for n in lens])
            self._settle(int(result[4]) or hid)
            return outcome.decision
        raise RuntimeError(
            f"shared near-duplicate check of {url} refused {MAX_ATTEMPTS} times in a row"
        )

    def _settle(self, hid: int) -> None:
        """The end of a check: the host's copies are the most recent, the cache within its
        bound."""
        self._copies.touch(hid)
        self._copies.evict(keep=hid)

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
                              self._copies.models.pages(host), self.anchors.take_done())
            if self._out_of_date(reply, host):
                continue
            hid = int(reply[1])
            if hid:
                self._copies.hids[host] = hid
                self._copies.names[hid] = host
            self._copies.follow(host, hid, reply[9])
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
            self._settle(int(result[4]) or hid)
            return
        raise RuntimeError(f"shared template learning of {url} refused {MAX_ATTEMPTS} times")

    def _committed(self, host: str, result: list[Any], lesson: Lesson | None) -> None:
        """Keep what a commit answered: the host's counts and id; the template blocks the page
        made go to this worker's copy of the template (which the commit found current)."""
        if int(result[1]):
            self._count(host, (int(result[1]), int(result[2]), time.monotonic()))
        self.last_commit = int(result[3])
        self._copies.committed(host, int(result[4]), lesson)

    def _count(self, host: str, counts: tuple[int, int, float]) -> None:
        self._hosts[host] = counts
        self._hosts.move_to_end(host)
        if len(self._hosts) > HOST_COUNTS:
            self._hosts.popitem(last=False)

    # --- candidates -------------------------------------------------------------------------

    def _out_of_date(self, reply: list[Any], host: str) -> bool:
        """True when the script refused to read because this worker's copy of the host's
        template is behind; the copy is brought up to date here and the read must be asked
        again."""
        if reply[0] == b"stale":
            self._copies.catch_up(host, int(reply[1]), int(reply[2]), reply[3])
            if int(reply[1]):
                self._copies.names[int(reply[1])] = host
            return True
        return False

    def _pick(
        self, hid: int, ranked: list[int]
    ) -> tuple[list[Candidate], bytes, dict[int, DecodedRecord]] | None:
        """The first :data:`VERIFY` live originals of ``ranked`` (``PICK``), their records
        decoded, their hosts' templates brought up to date (one pipelined round trip when some
        grew); which template lengths the decision used; None if a template moved meanwhile."""
        picked: dict[int, DecodedRecord] = {}
        tlens: dict[int, int] = {}
        at = 0
        while len(picked) < VERIFY and at < len(ranked):
            batch = ranked[at : at + ASK]
            at += len(batch)
            kept = {doc: rec for doc in batch if (rec := self._records.get(doc)) is not None}
            out, lengths = self._run("pick", self._records.ask(batch), VERIFY - len(picked))
            for doc, entry, rec in out:
                doc = int(doc)
                picked[doc] = (self._records.keep(doc, entry, rec) if rec else kept[doc])
            tlens.update(struct.iter_unpack(">II", lengths))
        if not self._copies.refresh(self.client, self.keys, hid, picked.values(), tlens):
            return None
        templates = self._copies.templates
        candidates, used = [], {}
        for doc, rec in picked.items():
            template = None
            if rec.hid != hid:
                copy = templates.get(rec.hid)
                template = copy.array() if copy is not None else EMPTY
                used[rec.hid] = len(copy) if copy is not None else 0
            candidates.append(Candidate(doc, rec.sketch, rec.blocks, rec.cover, rec.title,
                                        template))
        for other in used:
            self._copies.touch(other)
        checks = b"".join(struct.pack(">II", h, n) for h, n in used.items())
        return candidates, checks, picked

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
            self._count(host, cached)
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
        """Take this worker's written postings off ``:pend``, stop the outage's probe and close
        the connection (the state stays in Redis)."""
        # if Redis is away they stay pending: every worker merges them, harmlessly
        with contextlib.suppress(redis.RedisError):
            done = self.anchors.flush()
            if done:
                self.client.hdel(self.keys.pending, *(int.from_bytes(done[i : i + 4], "big")
                                                      for i in range(0, len(done), 4)))
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
        tags = tuple(self.anchors.keys.tags)
        for pattern in (self.keys.pattern(), *self.anchors.keys.patterns()):
            for key in self.client.scan_iter(match=pattern, count=1000):
                text = key.decode() if isinstance(key, bytes) else key
                kind = "a" if text.startswith(tags) else self.keys.kind(key)
                size = int(self.client.memory_usage(key, samples=0) or 0)
                total[kind] = total.get(kind, 0) + size
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

