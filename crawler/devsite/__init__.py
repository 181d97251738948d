"""Multi-host test web site on loopback addresses, for tests, benchmarks and demos.

Each simulated host is its own 127.x.y.z address, so per-host politeness can be
checked from the server side without any real network access.
"""

from .graph import MODES, PRIVATE_PAGES, Document, HostSpec, SiteGraph, build_site, page_path
from .server import RequestRecord, SiteServer

__all__ = [
    "MODES",
    "PRIVATE_PAGES",
    "Document",
    "HostSpec",
    "RequestRecord",
    "SiteGraph",
    "SiteServer",
    "build_site",
    "page_path",
]
