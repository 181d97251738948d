"""Admission: whether a URL may join the frontier, and in which front queue.

Built once per crawl (:meth:`Admission.build`): the site's URL policy (scope, URL filters, trap
budgets; the one the content analysis prepares links with, ``crawler.sites.policy``), the hosts
brought into scope by seeds, this run's or an earlier one's, and the prioritizer (the front
queue of a URL, hosts' penalties included). Free of Scrapy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from crawler.frontier import Entry, Frontier, Prioritizer, UrlPolicy
from crawler.frontier.policies import PolicyBook
from crawler.frontier.scope import ScopeRegistry
from crawler.frontier.store import url_key
from crawler.frontier.urls import origin_of
from crawler.sites.policy import policy_book_for, url_policy_for

# Origins remembered as met (~170 B each with the string: 17 MB): those met longest ago are
# forgotten, and announced again if met again. A second announcement is harmless to every
# receiver (robots.txt asks its book, which keeps its own bound; the sitemap reader skips files
# it asked for; DNS looks in its cache; the soft-404 prober remembers its own recent origins),
# and rare: an origin whose links keep coming stays recent.
ORIGINS_KEPT = 100_000


class Admission:
    """The URL policy, the scope and the prioritizer of a crawl; ``discovered(origin, host)``
    hears of each origin the first time one of its URLs is admitted, before that URL is
    queued (so that robots.txt can go first): once per origin among the ``max_origins``
    met most recently (:data:`ORIGINS_KEPT`)."""

    def __init__(
        self,
        policy: UrlPolicy,
        prioritizer: Prioritizer,
        scope: ScopeRegistry,
        discovered: Callable[[str, str], None],
        book: PolicyBook | None = None,
        discovering: Callable[[list[str]], None] | None = None,
        max_origins: int = ORIGINS_KEPT,
    ) -> None:
        self.policy = policy
        self.prioritizer = prioritizer
        self.scope = scope
        self.discovered = discovered
        self.discovering = discovering
        # crawl policies (crawler.frontier.policies): None when the site has none
        self.book = book if book is not None and book.active else None
        self.opic = prioritizer.policy == "opic"  # links carry OPIC cash
        self.max_origins = max_origins
        self._origins: OrderedDict[str, None] = OrderedDict()  # least recently met first

    @classmethod
    def build(
        cls,
        spider: Any,
        settings: Any,
        frontier: Frontier,
        scope: ScopeRegistry,
        prioritizer: Prioritizer,
        discovered: Callable[[str, str], None],
        discovering: Callable[[list[str]], None] | None = None,
        *,
        shared: bool = False,
    ) -> Admission:
        """The site's URL policy, widened to the hosts seeds brought into scope and restored
        to the hosts ``frontier`` admitted before (an earlier run, other workers). A
        ``shared`` frontier's are not read here (a round trip to Redis, which may be away):
        they come from its worker thread (its scope's news; ``policy.restore_hosts``)."""
        policy = url_policy_for(spider, settings)
        if not shared:
            for host in scope.load():
                policy.add_host(host)
            policy.restore_hosts(frontier.hosts())  # they count against the per-domain budget
        return cls(
            policy,
            prioritizer,
            scope,
            discovered,
            policy_book_for(spider, settings),
            discovering,
        )

    def prepare(self, origins: Iterable[str]) -> None:
        """Origins of a batch about to be admitted: the new ones are announced together
        (``discovering``) before :meth:`entry` announces each, so that receivers read what
        they need of them at once."""
        if self.discovering is None:
            return
        known = self._origins
        new = [o for o in dict.fromkeys(origins) if o not in known]
        if new:
            self.discovering(new)

    def entry(
        self,
        url: str,
        host: str,
        depth: int,
        payload: Any = None,
        request_priority: int = 0,
        first: bool = False,
        origin: str | None = None,
        cash: float = 0.0,
        crawl_policy: str = "",
        referrer: str = "",
        canonical: str = "",
    ) -> Entry:
        """The frontier entry of an admitted URL: ``url`` is its request URL, ``canonical``
        its canonical form (:meth:`UrlPolicy.check`: the seen key's; "" the URL itself).
        ``origin``: ``origin_of(url) or url`` when :meth:`UrlPolicy.link_form` computed it
        already; ``referrer``: the page it was found on."""
        if not first:
            if origin is None:
                origin = origin_of(url) or url
            origins = self._origins
            if origin in origins:
                origins.move_to_end(origin)
            else:
                origins[origin] = None
                if len(origins) > self.max_origins:
                    origins.popitem(last=False)
                self.discovered(origin, host)
        # a host's first request (robots.txt) gates its pages: the best rank at its address
        priority = 0 if first else self.prioritizer.priority(
            depth=depth, host=host, request_priority=request_priority
        )
        key = url_key(canonical) if canonical and canonical != url else 0
        return Entry(url, host, priority, depth, payload, 0, cash, crawl_policy, referrer, key)

    def seed_ranking(self, host: str, named: str = "") -> tuple[float, str]:
        """A seed's OPIC cash (1, times its policy's multiplier) and policy label."""
        if self.book is None:
            return (1.0 if self.opic else 0.0), ""
        decided = self.book.seed(host, named)
        return (decided.factor if self.opic else 0.0), decided.label

    def admit_seed_host(self, url: str) -> bool:
        """A seed's host is in scope, and so is the host a seed redirects to. True when the
        scope grew."""
        policy = self.policy
        if policy.any_host:  # an open scope: nothing to widen, nothing to share
            return False
        host = policy.check(url)[2]
        if not host or host in policy.hosts:
            return False
        policy.add_host(host)
        self.scope.add(host)
        return True

    def admit_seed_hosts(self, hosts: set[str]) -> bool:
        """A batch of seeds' hosts joins the scope (one write to a shared scope). True when
        the scope grew."""
        policy = self.policy
        if policy.any_host:
            return False
        new = {host for host in hosts if host and host not in policy.hosts}
        for host in new:
            policy.add_host(host)
        self.scope.add_many(new)
        return bool(new)

    def widen(self, hosts: set[str]) -> bool:
        """Hosts other workers brought into scope (their seeds and seed redirects). True when
        the scope grew."""
        new = hosts - set(self.policy.hosts)
        for host in new:
            self.policy.add_host(host)
        return bool(new)
