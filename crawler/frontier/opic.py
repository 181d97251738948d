"""OPIC: On-line Page Importance Computation (Abiteboul, Preda, Cobena 2003) for the frontier.

Every seed starts with some cash; a fetched page hands its cash to its outlinks (split among
them, optionally dampened by the crawl policy); a queued URL accumulates the cash of every page
that links to it, and its accumulated cash decides its front queue. Pages many good pages link to
collect cash fast: the crawl goes to them first, approximating PageRank order without ever
computing it.

:class:`CashLedger` is the bookkeeping the Mercator frontier needs: the cash of every queued URL
(keyed by :func:`crawler.frontier.store.identity`: the request URL the entry holds already, or
the seen key when the canonical form differs), which front queue its live copy
sits in, and the log-scale bucket of a cash value. A URL whose cash grows into a better bucket
while it waits in a front queue is queued again there; the older copy stays where it is, is
known stale by its ``(url, queue)``, and is skipped when the refill meets it. Counters keep the
cash accounted for: ``seeded + credited == queued + spent + to_fetched`` (``lost``: dampened
away by the caller, never reaches the ledger).
"""

from __future__ import annotations

from collections.abc import Callable
from math import frexp

from crawler.frontier.api import Entry
from crawler.frontier.store import identity

ROUTED = -1  # the URL left the front queues (a back queue, a returned lease)
# The floor queue holds URLs worth less than 2**-FLOOR_BITS of the mean (a distrusted source's:
# a thousandth of the cash); worth more, the last queue but one. A floor that took every URL
# under an eighth of the mean held most of a real crawl's URLs (cash is power-law: the mean is
# far above the median) and, waiting for the back queues to drain, starved the fetchers: ten
# times fewer pages a second than depth order (bench/webgraph.py --real).
FLOOR_BITS = 8


class CashLedger:
    """Cash per queued URL, and the front queue it deserves.

    Buckets are relative to the mean cash of the queued URLs: a URL holding the mean goes to the
    middle queue, each doubling moves it one queue up, each halving one down (0 .. K-1). Cash
    spreads thinner as the crawl grows, so an absolute scale would put every URL in the last
    queue after a few hops; the mean follows it.
    """

    __slots__ = (
        "_cash", "_queues", "credited", "on_stale", "seeded", "spent", "stale", "to_fetched",
        "total",
    )

    def __init__(self, queues: int) -> None:
        self._queues = queues
        # url -> [cash, front queue of its live copy or ROUTED, that copy, the largest share
        # of cash one link brought it (its policy is that link's)]
        self._cash: dict[str | int, list] = {}
        # (identity, queue) -> stale copies waiting there
        self.stale: dict[tuple[str | int, int], int] = {}
        # told of each stale copy made (+1) and met (-1): a store shared by workers keeps
        # them, so the next owner of a partition skips the older copies too
        self.on_stale: Callable[[str | int, int, int], None] | None = None
        self.total = 0.0  # cash of the queued URLs
        self.seeded = 0.0  # cash that entered with new URLs (seeds, first links)
        self.credited = 0.0  # cash that arrived for URLs known already
        self.spent = 0.0  # cash of URLs handed out (the page distributes it)
        self.to_fetched = 0.0  # cash arriving for URLs no longer queued: kept as their history

    def __len__(self) -> int:
        return len(self._cash)

    @property
    def queued(self) -> dict[str, list]:
        """The queued URLs (keys) and their records: ``url in ledger.queued`` is the cheap
        test a caller makes before :meth:`credit`."""
        return self._cash

    def bucket(self, cash: float) -> int:
        """The front queue of a URL holding ``cash`` (0: the most)."""
        last = self._queues - 1
        if cash <= 0.0:  # no cash known (a request the spider made): the last ordinary queue
            return last - 1 if last else 0
        n = len(self._cash)
        mean = self.total / n if n and self.total > 0 else cash
        # frexp: the binary exponent of mean / cash, i.e. floor(log2) + 1, without a log
        e = frexp(mean / cash)[1]
        q = self._queues // 2 + e - 1
        if q < last:
            return 0 if q < 0 else q
        # the last queue is the floor (see selector_weights): only URLs worth next to nothing
        return last if e > FLOOR_BITS or last == 0 else last - 1

    def admit(self, entry: Entry) -> int:
        """A new URL with ``entry.cash``; returns its front queue (and sets the entry's). A URL
        admitted again (forced: a retry, a seed given again) keeps the cash it had and gains
        this; its older copy becomes stale."""
        url, cash = identity(entry), entry.cash
        rec = self._cash.get(url)
        self.seeded += cash
        self.total += cash
        if rec is None:
            rec = self._cash[url] = [cash, 0, entry, cash]
        else:
            rec[0] += cash
            rec[2] = entry
            rec[3] = max(rec[3], cash)
            if rec[1] != ROUTED:
                self._mark_stale(url, rec[1])
        q = rec[1] = entry.priority = self.bucket(rec[0])
        return q

    def credit(self, url: str | int, cash: float, policy: str = "") -> Entry | None:
        """Cash for a URL seen before, found under crawl policy ``policy``. Returns a copy of
        its entry to queue in the better front queue it now deserves (its old copy is stale
        from now on), or None (not queued any more, already routed, or no better).

        A URL found under several policies takes the policy of the link that brought it the
        largest share of cash (a tie: the first): a good page a spam farm links to becomes
        good again once a good page links to it."""
        rec = self._cash.get(url)
        if rec is None:
            self.to_fetched += cash
            return None
        self.credited += cash
        self.total += cash
        rec[0] += cash
        if cash > rec[3]:
            rec[3] = cash
            if rec[2] is not None and rec[2].policy != policy:
                rec[2].policy = policy
        q = rec[1]
        if q == ROUTED:
            return None
        better = self.bucket(rec[0])
        if better >= q:
            return None
        self._mark_stale(url, q)
        old = rec[2]
        rec[1] = better
        rec[2] = copy = Entry(old.url, old.host, better, old.depth, old.payload, 0, rec[0],
                              old.policy, old.referrer, old.key)
        return copy

    def _mark_stale(self, url: str | int, queue: int) -> None:
        key = (url, queue)
        self.stale[key] = self.stale.get(key, 0) + 1
        if self.on_stale is not None:
            self.on_stale(url, queue, 1)

    def is_stale(self, url: str | int, queue: int) -> bool:
        """Called for each entry the refill takes from front queue ``queue``: True (and
        forgotten) for a copy left behind by a raise."""
        stale = self.stale
        if not stale:
            return False
        key = (url, queue)
        n = stale.get(key)
        if n is None:
            return False
        if n > 1:
            stale[key] = n - 1
        else:
            del stale[key]
        if self.on_stale is not None:
            self.on_stale(url, queue, -1)
        return True

    def routed(self, entry: Entry) -> None:
        """The URL's live copy moved to a back queue: cash still accrues, no more raises."""
        rec = self._cash.get(identity(entry))
        if rec is not None:
            rec[1] = ROUTED
            rec[2] = entry

    def requeue(self, entry: Entry) -> int:
        """A routed URL goes back to the front queues (its host gave its back queue up):
        returns (and sets) its front queue for the cash it holds now."""
        rec = self._cash.get(identity(entry))
        if rec is None:
            rec = self._cash[identity(entry)] = [entry.cash, 0, entry, entry.cash]
            self.total += entry.cash
            self.seeded += entry.cash
        entry.cash = rec[0]
        rec[2] = entry
        q = rec[1] = entry.priority = self.bucket(rec[0])
        return q

    def hand_back(self, entry: Entry) -> None:
        """A lease came back unfetched (released, expired): its cash is queued again, with
        what arrived for it meanwhile."""
        url, cash = identity(entry), entry.cash
        rec = self._cash.get(url)
        self.spent -= cash
        self.total += cash
        if rec is None:
            self._cash[url] = [cash, ROUTED, entry, cash]
        else:
            rec[0] += cash

    def restore(self, entry: Entry) -> None:
        """A URL a persistent store kept from an earlier run, in front queue
        ``entry.priority``."""
        if identity(entry) not in self._cash:
            self._cash[identity(entry)] = [entry.cash, entry.priority, entry, entry.cash]
            self.total += entry.cash
            self.seeded += entry.cash

    def cash(self, url: str | int) -> float | None:
        rec = self._cash.get(url)
        return None if rec is None else rec[0]

    def current(self, url: str | int) -> int | None:
        """The front queue of the URL's live copy (ROUTED when it left them), or None."""
        rec = self._cash.get(url)
        return None if rec is None else rec[1]

    def take(self, url: str | int) -> float | None:
        """The URL is handed out: its cash leaves the ledger for the page to distribute
        (None: the ledger did not know it)."""
        rec = self._cash.pop(url, None)
        if rec is None:
            return None
        self.total -= rec[0]
        self.spent += rec[0]
        if self.total < 0.0:  # rounding
            self.total = 0.0
        return rec[0]

    def drop(self, url: str | int) -> None:
        """The URL was dropped unfetched (its host was given up)."""
        rec = self._cash.pop(url, None)
        if rec is not None:
            self.total -= rec[0]
            self.spent += rec[0]


def selector_weights(queues: int) -> list[int]:
    """Front-queue weights for OPIC: Mercator's gentle ``K - i`` over all queues but the last,
    the last one a floor (URLs worth less than ``2**-FLOOR_BITS`` of the mean, and those of no
    value: a distrusted source's), which the refill draws only once nothing else is queued."""
    if queues < 2:
        return [1] * queues
    return [(queues - 1 - i) * 100 for i in range(queues - 1)] + [1]


def pick_above_floor(pick: Callable[[list[int]], int], sizes: list[int], backs_busy: bool) -> int:
    """The refill's pick under OPIC (``pick``: the selector's): the last front queue (the
    floor) is drawn only when no other front queue has URLs and no back queue is in use
    (``backs_busy``); -1 when only the floor has URLs and must wait."""
    floor = len(sizes) - 1
    if not floor or not sizes[floor]:
        return pick(sizes)
    if any(sizes[:floor]):
        return pick([*sizes[:floor], 0])
    return -1 if backs_busy else pick(sizes)
