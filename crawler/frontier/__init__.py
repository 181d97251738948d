"""The Mercator URL frontier, free of Scrapy so it can be tested and reused directly.

``api`` defines the interface every backend implements; ``mercator`` is the algorithm, over a
queue store: ``store.MemoryQueueStore`` (the embedded default) or ``sqlite.SqliteQueueStore``
(JOBDIR);
``politeness``, ``selector``, ``prioritizer`` and ``urls`` are the policies it is built from.
"""

from crawler.frontier.api import (
    AddResult,
    Clock,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
)
from crawler.frontier.mercator import MercatorFrontier
from crawler.frontier.politeness import PolitenessPolicy
from crawler.frontier.prioritizer import POLICIES, Prioritizer
from crawler.frontier.selector import BiasedSelector
from crawler.frontier.store import MemoryQueueStore, QueueStore, url_key
from crawler.frontier.urls import InvalidUrl, UrlPolicy, normalize_url

__all__ = [
    "POLICIES",
    "AddResult",
    "BiasedSelector",
    "Clock",
    "Entry",
    "Frontier",
    "FrontierCounts",
    "HostReport",
    "InvalidUrl",
    "Lease",
    "MemoryQueueStore",
    "MercatorFrontier",
    "Outcome",
    "PolitenessPolicy",
    "Prioritizer",
    "QueueStore",
    "UrlPolicy",
    "normalize_url",
    "url_key",
]
