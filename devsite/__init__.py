"""Multi-host test web site on loopback addresses, for tests, benchmarks and demos.

A top-level package, not part of ``crawler``: no crawl imports it, so it stays out of the
scrapyd egg (``setup.py`` packs ``crawler`` only). The demo (``python -m devsite.demo``) and the
labelled near-duplicate set (``devsite.testset``) live here for the same reason.

Each simulated host is its own 127.x.y.z address, so per-host politeness can be
checked from the server side without any real network access.
"""

from devsite.graph import MODES, PRIVATE_PAGES, Document, HostSpec, SiteGraph, build_site, page_path
from devsite.server import RequestRecord, SiteServer

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
