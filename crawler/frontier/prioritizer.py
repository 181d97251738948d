"""The prioritizer: which of the K front queues a URL joins."""

from __future__ import annotations

POLICIES = ("depth", "breadth_first", "fifo", "request", "opic")


class Prioritizer:
    """Maps a URL's facts to a front queue, 0 (most important) .. K-1.

    * ``depth`` / ``breadth_first``: shallower pages first, so a site's hubs are fetched before its
      deep pages (depth 0 -> queue 0, depth K-1 or more -> queue K-1); a positive request
      priority (the recrawl's boost for pages that change often) moves a URL up that many.
    * ``fifo``: one queue for everything, in discovery order.
    * ``request``: the request's own priority (Scrapy's convention: higher is more important),
      centred on the middle queue.
    * ``opic``: the URL's OPIC cash decides (``crawler.frontier.opic``, in the frontier: the
      cash keeps arriving after the URL is queued); here every URL gets the middle queue.

    A host's penalty (:meth:`set_penalty`: a host whose pages are mostly near-duplicates, as its
    judge announces) pushes its URLs down by that many queues.
    """

    def __init__(self, policy: str, queues: int) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown priority policy {policy!r}; expected one of {POLICIES}")
        self.policy = "depth" if policy == "breadth_first" else policy
        self.queues = queues
        self.penalties: dict[str, int] = {}  # host -> queues lower; only hosts with one

    def set_penalty(self, host: str, levels: int) -> None:
        """From now on ``host``'s URLs go ``levels`` queues lower (0: none)."""
        if levels > 0:
            self.penalties[host] = levels
        else:
            self.penalties.pop(host, None)

    def priority(self, *, depth: int, host: str, request_priority: int = 0) -> int:
        last = self.queues - 1
        if self.policy == "fifo":
            p = 0
        elif self.policy == "opic":
            p = self.queues // 2
        elif self.policy == "request":
            p = self.queues // 2 - request_priority
        else:
            p = depth - request_priority if request_priority > 0 else depth
        if self.penalties:
            p += self.penalties.get(host, 0)
        return 0 if p < 0 else last if p > last else p
