"""The Mercator URL frontier, free of Scrapy so it can be tested and reused directly.

``api`` defines the interface every backend implements; ``mercator`` is the algorithm, over a
queue store: ``store.MemoryStore`` (the embedded default) or ``sqlite.SqliteStore`` (JOBDIR);
``politeness``, ``selector``, ``prioritizer`` and ``urls`` are the policies it is built from.
"""

from .api import (
    AddResult,
    Clock,
    Entry,
    Frontier,
    FrontierCounts,
    HostReport,
    Lease,
    Outcome,
)
from .mercator import MercatorFrontier
from .politeness import PolitenessPolicy
from .prioritizer import POLICIES, Prioritizer
from .selector import BiasedSelector
from .store import MemoryStore, QueueStore, url_key
from .urls import InvalidUrl, UrlPolicy, normalize_url

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
    "MemoryStore",
    "MercatorFrontier",
    "Outcome",
    "PolitenessPolicy",
    "Prioritizer",
    "QueueStore",
    "UrlPolicy",
    "normalize_url",
    "url_key",
]
