"""The biased front-queue selector."""

from __future__ import annotations

from collections.abc import Sequence


class BiasedSelector:
    """Smooth weighted round robin over the non-empty front queues.

    Queue 0 is the highest priority. With the default weights ``K - i``, queue 0 is chosen K times
    as often as queue K-1 while both have URLs, so high priorities go first and low priorities
    still progress. Deterministic (no randomness), which keeps crawl order reproducible.
    """

    def __init__(self, count: int, weights: Sequence[int] | None = None) -> None:
        if count < 1:
            raise ValueError("at least one front queue is needed")
        self.weights = list(weights) if weights else [count - i for i in range(count)]
        if len(self.weights) != count or min(self.weights) < 1:
            raise ValueError("one positive weight per front queue is needed")
        self._current = [0] * count

    def pick(self, sizes: Sequence[int]) -> int:
        """Index of the queue to take from next; ``sizes`` must have a non-empty queue."""
        best = -1
        total = 0
        current = self._current
        for i, size in enumerate(sizes):
            if size:
                w = self.weights[i]
                current[i] += w
                total += w
                if best < 0 or current[i] > current[best]:
                    best = i
        if best < 0:
            raise LookupError("all front queues are empty")
        current[best] -= total
        return best
