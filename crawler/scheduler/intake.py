"""Link intake: a page's links on their way into the frontier, in bulk and never as Requests.

On real sites most links of a page were seen before, on this page or another: a link seen
before as written (after joining) costs one set lookup in the raw-link cache; only new ones are
normalized (unless the content thread already did: ``forms``), filtered and tested against the
frontier's seen-set, and none becomes a Request until it is due.

A page of thousands of new links costs the reactor 30-200 ms in one piece; over ``link_slice``
links (a ``TUNING`` knob), a page's links are taken one slice per reactor turn, after the
links of the pages before it (the order of the seen-test stays the pages'), so due hosts are
served in between. Meanwhile the crawl is not idle, and the page is not acknowledged to the
frontier: a stop or a lost worker never forgets a page whose links were not queued.

Seeds come in bulk too (:meth:`LinkIntake.take_seeds`): a seeds file's or
``<site>:start_urls``' URLs in batches, each normalized once, their hosts brought into scope in
one write, and queued as plain entries flagged :data:`~crawler.frontier.api.SEED` (no Request,
no serialized payload) in one ``add_many``: a pipeline of script calls to a shared frontier.

Free of Scrapy: the next reactor turn comes from the ``later`` callable it is given.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawler.config.tuning import knob_default
from crawler.frontier import Entry, Frontier
from crawler.frontier.api import SEED
from crawler.frontier.store import link_identity
from crawler.frontier.urls import LinkForm, origin_of, url_problem
from crawler.scheduler.admission import Admission
from crawler.scheduler.stats import FrontierStats
from crawler.sites.analysis import LINK_CACHE_SIZE

logger = logging.getLogger(__name__)

# Decisions that depend on where a link was found: not remembered by the raw-link cache.
_DEPTH_DEPENDENT = frozenset({"too_deep"})

# ``later(seconds, fn)``: call ``fn`` in a later reactor turn; returns something to ``cancel``.
Later = Callable[[float, Callable[[], None]], Any]


@dataclass(slots=True)
class LinkBatch:
    """A page's links on their way into the frontier (taken whole, or in slices)."""

    urls: list[str]
    depth: int
    forms: dict[str, LinkForm]
    token: str | None  # the page's lease
    pos: int = 0  # links taken so far
    share: float = 0.0  # OPIC: the cash each link gets (the page's cash over its links)
    policy: str = ""  # the crawl policy the page's links inherit
    host: str = ""  # the page's host (crawl policies: does a link leave its domain?)
    page: str = ""  # the page's URL: its links' referrer (one string shared by all of them)


class LinkIntake:
    """Takes pages' links into ``frontier`` through ``admission``; see the module docstring.
    Without ``later`` (no reactor runs: unit tests) every page is taken whole."""

    def __init__(
        self,
        admission: Admission,
        frontier: Frontier,
        stats: FrontierStats,
        *,
        slice_size: int | None = None,
        cache_size: int = LINK_CACHE_SIZE,
        later: Later | None = None,
    ) -> None:
        self.admission = admission
        self.frontier = frontier
        self.stats = stats
        self.slice_size = max(1, knob_default("link_slice") if slice_size is None else slice_size)
        self.cache_size = cache_size
        self.later = later
        self._raw_seen: set[int] = set()  # hashes of links as written, decided already
        # OPIC: the admitted ones, hash -> (identity, host, canonical form): a repeated link
        # still brings its cash
        self._raw_urls: dict[int, tuple[str | int, str, str]] = {}
        self._backlog: deque[LinkBatch] = deque()
        self._backlog_pages: dict[str, int] = {}  # page lease -> its batches still waiting
        self._ack_waiting: set[str] = set()  # pages acknowledged once their links are in
        self._drain_call: Any = None

    @property
    def pending(self) -> bool:
        """Links still to take: the crawl is not idle."""
        return bool(self._backlog)

    def take(
        self,
        urls: list[str],
        depth: int,
        forms: dict[str, LinkForm] | None,
        token: str | None,
        *,
        cash: float = 0.0,
        policy: str = "",
        page: str = "",
    ) -> None:
        """Take a page's links, at ``depth``; ``token``: the page's lease, if it has one;
        ``cash``: the page's OPIC cash, split among its links; ``policy``: the crawl policy
        they inherit; ``page``: its URL."""
        batch = LinkBatch(urls, depth, forms or {}, token, page=page)
        if urls and (cash or self.admission.book is not None):
            batch.share = cash / len(urls)
            batch.policy = policy
            batch.host = (urlsplit(page).hostname or "") if page else ""
        if not self._backlog and (self.later is None or len(urls) <= self.slice_size):
            self._take(batch, len(urls))
            return
        self._backlog.append(batch)
        if token is not None:
            self._backlog_pages[token] = self._backlog_pages.get(token, 0) + 1
        if self._drain_call is None:
            self._drain()

    def take_seeds(self, seeds: Sequence[tuple[str, str]], *, counted: bool = True) -> None:
        """Queue a batch of seeds, ``(url, where it came from)``, as plain seed entries.

        Each URL is normalized once (``link_form``: its host comes with it), the batch's new
        hosts join the scope in one write, and the batch goes to the frontier in one
        ``add_many``. An unusable URL is logged with its source and skipped; ``counted``: the
        seeds count in ``seeds/valid`` and ``seeds/invalid`` (a seeds file's, as the spider
        counts them; not seeds pushed to ``<site>:start_urls``, which are counted apart)."""
        admission, stats = self.admission, self.stats
        policy = admission.policy
        link_form = policy.link_form
        forms: list[tuple[str, LinkForm]] = []
        hosts: set[str] = set()
        invalid = 0
        for raw, source in seeds:
            form = link_form(raw)
            if form[0]:
                invalid += 1
                if counted:
                    logger.warning(
                        "Skipping invalid seed %r (from %s): %s", raw, source, url_problem(raw)
                    )
                else:
                    stats.rejected(form[0], raw, True)
                continue
            forms.append((raw, form))
            hosts.add(form[2])
        if counted:
            if invalid:
                stats.inc("seeds/invalid", invalid)
            if forms:
                stats.inc("seeds/valid", len(forms))
        if admission.admit_seed_hosts(hosts):
            self.forget()
        check, entry, ranking = policy.check, admission.entry, admission.seed_ranking
        admitted = []
        for raw, form in forms:
            reason, url, host, canonical = check(raw, 0, form=form)
            if reason:
                stats.rejected(reason, raw, True)
                continue
            admitted.append((url, host, form[3], canonical))
        # the batch's new origins announced together first (robots.txt read in one go)
        admission.prepare(a[2] for a in admitted)
        entries = []
        for url, host, origin, canonical in admitted:
            # OPIC: a seed starts with its cash (without it, every link of the crawl had none)
            cash, label = ranking(host)
            entries.append(
                entry(
                    url, host, 0, SEED, origin=origin, cash=cash, crawl_policy=label,
                    canonical=canonical,
                )
            )
        if entries:
            for e, result in zip(entries, self.frontier.add_many(entries), strict=True):
                stats.submitted(e, result)

    def forget(self) -> None:
        """The scope grew: links remembered as out of scope may be in it now."""
        self._raw_seen.clear()
        self._raw_urls.clear()

    def ack(self, token: str) -> None:
        """Acknowledge a page to the frontier now, or once its waiting links are in."""
        if token in self._backlog_pages:
            self._ack_waiting.add(token)
        else:
            self.frontier.ack(token)

    def flush(self) -> None:
        """Take the whole backlog now (the crawl closes: nothing may stay behind)."""
        if self._drain_call is not None:
            self._drain_call.cancel()
            self._drain_call = None
        if self._backlog:
            self._drain(everything=True)

    def _take(self, batch: LinkBatch, budget: int) -> int:
        """Take up to ``budget`` of ``batch``'s links from where it stands; returns how many."""
        raw_seen = self._raw_seen
        if batch.pos == 0 and len(raw_seen) > self.cache_size:
            raw_seen.clear()  # once a page, as when pages were taken whole
            self._raw_urls.clear()
        urls, depth, forms = batch.urls, batch.depth, batch.forms
        part = urls[batch.pos : batch.pos + budget] if batch.pos or budget < len(urls) else urls
        batch.pos += len(part)
        check = self.admission.policy.check
        entry = self.admission.entry
        stats = self.stats
        repeated = 0
        entries: list[Entry] = []
        admitted: list[tuple[str, str, str, str]] = []
        page = batch.page
        share, book = batch.share, self.admission.book
        if share or book is not None:
            return self._take_ranked(batch, part)
        for raw in part:
            h = hash(raw)
            if h in raw_seen:
                repeated += 1
                continue
            form = forms.get(raw)
            reason, url, host, canonical = check(raw, depth, form=form)
            if reason not in _DEPTH_DEPENDENT:
                raw_seen.add(h)
            if reason:
                stats.rejected(reason, raw)
                continue
            origin = form[3] if form is not None else origin_of(url) or url
            admitted.append((url, host, origin, canonical))
        if admitted:  # the new origins announced together first (robots.txt read in one go)
            self.admission.prepare(a[2] for a in admitted)
            entries = [
                entry(url, host, depth, origin=origin, referrer=page, canonical=canonical)
                for url, host, origin, canonical in admitted
            ]
        self._submit(entries, repeated)
        return len(part)

    def _take_ranked(self, batch: LinkBatch, part: list[str]) -> int:
        """``_take`` for links that carry OPIC cash or a crawl policy: a repeated link still
        hands its cash on (``Frontier.credit``), and the crawl policy decides each link."""
        raw_seen, raw_urls = self._raw_seen, self._raw_urls
        depth, forms, share = batch.depth, batch.forms, batch.share
        check = self.admission.policy.check
        entry = self.admission.entry
        book = self.admission.book
        stats = self.stats
        repeated = 0
        entries: list[Entry] = []
        admitted: list[tuple[str, str, str, float, str, str]] = []
        credits = []
        label, factor = batch.policy, 1.0
        for raw in part:
            h = hash(raw)
            if h in raw_seen:
                repeated += 1
                known = raw_urls.get(h)
                if known is None:
                    continue
                if book is not None:
                    decided = book.link(batch.policy, batch.host, depth, known[2], known[1])
                    if decided is None:
                        continue
                    credits.append((known[0], share * decided.factor, decided.label, known[1]))
                elif share:
                    credits.append((known[0], share, label, known[1]))
                continue
            form = forms.get(raw)
            reason, url, host, canonical = check(raw, depth, form=form)
            if reason not in _DEPTH_DEPENDENT:
                raw_seen.add(h)
            if reason:
                stats.rejected(reason, raw)
                continue
            if book is not None:
                decided = book.link(batch.policy, batch.host, depth, canonical, host)
                if decided is None:
                    raw_seen.discard(h)  # another page's policy may follow it
                    stats.rejected("crawl_policy", raw)
                    continue
                label, factor = decided.label, decided.factor
            # a repeated link is known by its identity (crawler.frontier.store.identity)
            raw_urls[h] = (link_identity(url, canonical), host, canonical)
            origin = form[3] if form is not None else origin_of(url) or url
            admitted.append((url, host, origin, share * factor, label, canonical))
        if admitted:  # the new origins announced together first (robots.txt read in one go)
            self.admission.prepare(a[2] for a in admitted)
            entries = [
                entry(
                    url,
                    host,
                    depth,
                    origin=origin,
                    cash=cash,
                    crawl_policy=label,
                    referrer=batch.page,
                    canonical=canonical,
                )
                for url, host, origin, cash, label, canonical in admitted
            ]
        if credits:
            self.frontier.credit(credits)
        self._submit(entries, repeated)
        return len(part)

    def _submit(self, entries: list[Any], repeated: int) -> None:
        stats = self.stats
        if entries:
            # one call for the page's links: one round trip (per 1,000) to a shared frontier
            results = self.frontier.add_many(entries)
            for e, result in zip(entries, results, strict=True):
                stats.submitted(e, result)
            if self.admission.book is not None:  # per-policy counts of the URLs queued
                for e, result in zip(entries, results, strict=True):
                    if result.added:
                        stats.inc(f"frontier/policy/{e.policy.partition('@')[0] or 'default'}")
        if repeated:
            stats.inc("frontier/links_repeated", repeated)

    def _drain(self, everything: bool = False) -> None:
        """Take ``slice_size`` links of the backlog (all of it with ``everything``) and come
        back in the next reactor turn for the rest."""
        self._drain_call = None
        backlog = self._backlog
        budget = self.slice_size
        while backlog and (everything or budget > 0):
            batch = backlog[0]
            budget -= self._take(batch, len(batch.urls) if everything else budget)
            if batch.pos >= len(batch.urls):
                backlog.popleft()
                self._batch_done(batch.token)
        if backlog and self.later is not None:
            self._drain_call = self.later(0, self._drain)

    def _batch_done(self, token: str | None) -> None:
        """One of a page's batches is all in the frontier: once the last is, the page may be
        acknowledged."""
        if token is None:
            return
        left = self._backlog_pages.pop(token, 1) - 1
        if left:
            self._backlog_pages[token] = left
        elif token in self._ack_waiting:
            self._ack_waiting.discard(token)
            self.frontier.ack(token)
