"""A test site whose hosts state usage preferences every way sites do (README "Usage
preferences"): robots.txt ``Content-Signal`` and ``Content-Usage`` lines, ``Content-Usage``,
``X-Robots-Tag`` and TDMRep headers, robots and TDMRep meta tags, ``/.well-known/tdmrep.json``,
values nobody defined, and combinations that conflict.

:data:`PAGES` lists each page and what a crawl declared for search, for archive and for AI
training must do with it; ``tests/test_usage_crawl.py`` crawls the site for each purpose and
checks the access log, the items, the index and the WARC files against it.
"""

from __future__ import annotations

from devsite.graph import HostSpec, build_site
from devsite.routed import Answer, Ask, RoutedSiteServer

SIGNALS_HOST = "127.0.0.2"  # robots.txt signals
PAGES_HOST = "127.0.0.3"  # header and meta signals
TDM_HOST = "127.0.0.4"  # tdmrep.json
HOSTS = (SIGNALS_HOST, PAGES_HOST, TDM_HOST)

ROBOTS = {
    SIGNALS_HOST: (
        "User-agent: *\n"
        "Content-Signal: search=yes, ai-train=no\n"
        "Allow: /\n"
        "Content-Usage: /nosearch/ search=n\n"
        "Content-Usage: /open/ train-ai=y\n"  # ai-train=no above wins: the stricter
    ),
    PAGES_HOST: "User-agent: *\nAllow: /\n",
    TDM_HOST: "User-agent: *\nAllow: /\n",
}

TDMREP_JSON = (
    b'[{"location": "/reserved/*", "tdm-reservation": 1,'
    b' "tdm-policy": "https://example.org/policy.json"},'
    b' {"location": "/", "tdm-reservation": 0},'
    b' {"location": "/odd/", "tdm-reservation": "perhaps"}]'
)

# What a crawl does with each page, per purpose: "fetched" (not kept), "item" (kept, not
# indexed, archived), ... as letters: f = fetched, k = kept (an item), i = indexed, a = archived.
# "" = not fetched.
FULL = "fkia"


# path -> (extra headers, extra <head> markup, {purpose: expected})
PAGES: dict[tuple[str, str], tuple[list[tuple[str, str]], str, dict[str, str]]] = {
    (SIGNALS_HOST, "/a.html"): ([], "", {"search": FULL, "archive": FULL, "ai-train": ""}),
    (SIGNALS_HOST, "/nosearch/b.html"): ([], "", {"search": "", "archive": "fka", "ai-train": ""}),
    (SIGNALS_HOST, "/open/c.html"): ([], "", {"search": FULL, "archive": FULL, "ai-train": ""}),
    (PAGES_HOST, "/xrt-noarchive.html"): (
        [("X-Robots-Tag", "noarchive")], "",
        {"search": "fki", "archive": "f", "ai-train": "fki"},
    ),
    (PAGES_HOST, "/meta-noai.html"): (
        [], '<meta name="robots" content="noai, noimageai">',
        {"search": FULL, "archive": FULL, "ai-train": "f"},
    ),
    (PAGES_HOST, "/content-usage.html"): (
        [("Content-Usage", "search=n, train-ai=y")], "",
        {"search": "f", "archive": "fka", "ai-train": "fka"},
    ),
    (PAGES_HOST, "/tdm-header.html"): (
        [("tdm-reservation", "1")], "", {"search": FULL, "archive": FULL, "ai-train": "f"},
    ),
    (PAGES_HOST, "/tdm-meta.html"): (
        [], '<meta name="tdm-reservation" content="1">'
        '<meta name="tdm-policy" content="https://example.org/policy.json">',
        {"search": FULL, "archive": FULL, "ai-train": "f"},
    ),
    # conflicts: the header allows training, the page's meta refuses it; an expired page (kept
    # as noindex: a search index drops its earlier copy)
    (PAGES_HOST, "/conflict.html"): (
        [("Content-Usage", "train-ai=y"),
         ("X-Robots-Tag", "unavailable_after: 2001-01-01T00:00:00Z")],
        '<meta name="robots" content="noai">',
        {"search": "fka", "archive": "fka", "ai-train": "f"},
    ),
    # values no vocabulary defines: kept, reported, never read as a refusal
    (PAGES_HOST, "/unknown.html"): (
        [("X-Robots-Tag", "noml"), ("Content-Usage", "train-ai=maybe"),
         ("tdm-reservation", "2")], "",
        {"search": FULL, "archive": FULL, "ai-train": FULL},
    ),
    (TDM_HOST, "/reserved/d.html"): ([], "", {"search": FULL, "archive": FULL, "ai-train": ""}),
    (TDM_HOST, "/free/e.html"): ([], "", {"search": FULL, "archive": FULL, "ai-train": FULL}),
    (TDM_HOST, "/odd/f.html"): ([], "", {"search": FULL, "archive": FULL, "ai-train": FULL}),
}


def _page(title: str, head: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    words = " ".join(f"{title.replace('/', ' ')} word{i}" for i in range(40))
    return (
        f"<html><head><title>{title}</title>{head}</head>"
        f"<body><main><p>{words}</p>{anchors}</main></body></html>"
    ).encode()


def usage_site() -> RoutedSiteServer:
    """The site (not started: ``with usage_site() as server``)."""
    server = RoutedSiteServer(
        build_site([HostSpec(h, pages=0) for h in HOSTS], links_per_page=1, extras=False),
        conditional=False,
    )
    for host in HOSTS:
        links = [path for (h, path) in PAGES if h == host]
        server.route(host, "/", _static(200, [], _page(f"home {host}", "", links)))
        server.route(host, "/robots.txt", _static(
            200, [("Content-Type", "text/plain")], ROBOTS[host].encode()))
    server.route(TDM_HOST, "/.well-known/tdmrep.json", _static(
        200, [("Content-Type", "application/json")], TDMREP_JSON))
    for (host, path), (headers, head, _) in PAGES.items():
        server.route(host, path, _static(200, headers, _page(path, head, [])))
    return server


def _static(status: int, headers: list[tuple[str, str]], body: bytes) -> object:
    def answer(ask: Ask) -> Answer:
        kind = [] if any(k == "Content-Type" for k, _ in headers) else [
            ("Content-Type", "text/html; charset=utf-8")]
        return status, [*kind, *headers], body

    return answer
