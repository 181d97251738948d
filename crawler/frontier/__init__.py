"""The Mercator URL frontier, free of Scrapy so it can be tested and reused directly.

``api`` defines the interface every backend implements; ``memory`` is the embedded default;
``politeness``, ``selector``, ``prioritizer`` and ``urls`` are the policies it is built from.
"""

from .api import AddResult, Entry, Frontier, FrontierCounts, HostReport, Lease, Outcome
from .memory import MemoryFrontier
from .politeness import PolitenessPolicy
from .prioritizer import POLICIES, Prioritizer
from .selector import BiasedSelector
from .urls import InvalidUrl, UrlPolicy, normalize_url

__all__ = [
    "POLICIES",
    "AddResult",
    "BiasedSelector",
    "Entry",
    "Frontier",
    "FrontierCounts",
    "HostReport",
    "InvalidUrl",
    "Lease",
    "MemoryFrontier",
    "Outcome",
    "PolitenessPolicy",
    "Prioritizer",
    "UrlPolicy",
    "normalize_url",
]
