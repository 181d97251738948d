"""Page requisites (``[requisites]`` in a site config): what counts as one
(``crawler.content.requisites``), the config's checks, and a real crawl of two loopback hosts:
a page's stylesheet, images, frame and the stylesheet's fonts and images are fetched (one from
a host outside the site's scope, robots.txt obeyed there), each once, none of them is a page
(no item, not in the page counts or CLOSESPIDER_PAGECOUNT) and nothing in them is followed as
a link. The replay of requisites from the archive is tests/test_warc_replay.py."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crawler.content.requisites import (
    absolute_requisites,
    css_references,
    html_requisites,
    srcset_references,
)
from crawler.sites import SiteConfigError, load_site_config
from tests.crawling import loopback_settings, run_crawl, write_site
from tests.redis_support import fresh_key, redis_server  # noqa: F401
from tests.warc_support import all_records


def test_css_references_skip_comments_and_data_uris() -> None:
    css = """@import "base.css"; @import url('print.css') print;
    /* url(commented.png) */ body { background: url( "bg.png" ) }
    @font-face { src: url(fonts/a.woff2) format("woff2"), url(data:font/woff;base64,AA) }"""
    assert css_references(css) == ["base.css", "print.css", "bg.png", "fonts/a.woff2"]


def test_srcset_keeps_every_candidate() -> None:
    assert srcset_references("a.png 1x, b.png 2x,c,d.png 3x") == ["a.png", "b.png", "c,d.png"]
    assert srcset_references("/w/a.png 480w, /w/b.png 800w") == ["/w/a.png", "/w/b.png"]


def test_html_requisites_in_render_order_anchors_left_out() -> None:
    html = b"""<html><head><base href="/sub/">
    <script src="app.js"></script><link rel="stylesheet" href="s.css">
    <link rel="icon" href="/favicon.ico"><link rel="canonical" href="/c">
    <style>h1 { background: url(h1.png) }</style></head>
    <body background="paper.gif"><a href="/page">a page</a><img src="i.png" srcset="i2.png 2x">
    <picture><source srcset="p.webp"></picture><iframe src="f.html"></iframe>
    <div style="background-image: url('d.png')"></div><video poster="v.jpg" src="v.mp4"></video>
    <img src="data:image/png;base64,AA"><input type="image" src="go.png"></body></html>"""
    refs, base = html_requisites(html)
    assert base == "/sub/"
    assert refs[:3] == ["s.css", "h1.png", "app.js"]  # stylesheets, then scripts
    assert "f.html" in refs and "/page" not in refs and "/c" not in refs
    urls, over = absolute_requisites("http://h.test/x/page.html", refs, 0, base)
    assert over == 0
    assert set(urls) == {
        f"http://h.test{p}"
        for p in ["/sub/s.css", "/sub/h1.png", "/sub/app.js", "/sub/f.html", "/sub/paper.gif",
                  "/sub/i.png", "/sub/i2.png", "/sub/p.webp", "/sub/d.png", "/sub/v.jpg",
                  "/sub/go.png", "/sub/v.mp4", "/favicon.ico"]
    }
    kept, over = absolute_requisites("http://h.test/", ["a.png", "b.png#x", "b.png", "c.png"], 2)
    assert kept == ["http://h.test/a.png", "http://h.test/b.png"] and over == 1


def test_wrong_requisites_keys_are_refused_naming_file_and_key(tmp_path: Path) -> None:
    path = write_site(
        tmp_path, "arch",
        '[requisites]\nfetch = "yes"\nmax_per_page = 0\nmax_hops = 9\ndeny = ["("]\nextra = 1\n',
    )
    with pytest.raises(SiteConfigError) as caught:
        load_site_config(path)
    text = str(caught.value)
    for key in ("requisites.fetch", "requisites.max_per_page", "requisites.max_hops",
                "requisites.deny[0]", "requisites.extra"):
        assert f"{path}: {key}: " in text, text
    good = write_site(tmp_path, "ok", "[requisites]\nfetch = true\nmax_hops = 2\n")
    rule = load_site_config(good).requisites
    assert rule.fetch and rule.max_hops == 2 and rule.max_per_page == 200


# --- a real crawl ----------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


@contextmanager
def _host(address: str, pages: dict[str, tuple[str, bytes]]) -> Iterator[tuple[int, Counter[str]]]:
    """A loopback server answering ``pages`` (path -> (type, body)), 404 otherwise; yields its
    port and the paths asked, counted."""
    asked: Counter[str] = Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked[self.path] += 1
            kind, body = pages.get(self.path, ("", b""))
            self.send_response(200 if kind else 404)
            self.send_header("Content-Type", kind or "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()


def _site(cdn: str) -> dict[str, tuple[str, bytes]]:
    html = "text/html; charset=utf-8"
    home = f"""<html><head><title>Home</title><link rel="stylesheet" href="/s.css"></head>
    <body><p>The home page of a small site with enough words to be a page.</p>
    <img src="/img.png"><img src="{cdn}/cdn.png"><img src="{cdn}/private/x.png">
    <iframe src="/frame.html"></iframe><a href="/about">about</a></body></html>"""
    about = """<html><head><title>About</title><link rel="stylesheet" href="/s.css"></head>
    <body><p>About this small site, in other words than the home page has.</p>
    <img src="/img.png"></body></html>"""
    frame = """<html><body><a href="/frame-link">not followed</a>
    <img src="/frame-img.png"></body></html>"""
    css = f"""@font-face {{ src: url(/font.woff) }} body {{ background: url({cdn}/bg.png) }}
    /* a stylesheet is no page: <a href="/css-link">x</a> */"""
    return {
        "/": (html, home.encode()),
        "/about": (html, about.encode()),
        "/frame.html": (html, frame.encode()),
        "/frame-link": (html, b"<html><body>never asked</body></html>"),
        "/s.css": ("text/css", css.encode()),
        "/img.png": ("image/png", PNG),
        "/frame-img.png": ("image/png", PNG),
        "/font.woff": ("font/woff", b"wOFF" + b"\x00" * 20),
        "/robots.txt": ("text/plain", b""),
    }


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_requisites_are_fetched_once_archived_and_never_pages(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    shared: dict[str, Any] = {}
    if backend == "redis":  # mark_seen and a forced add through the buffered shared frontier
        redis = request.getfixturevalue("redis_server")
        shared = {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
            "FRONTIER_REDIS_KEY": fresh_key(),
        }
    cdn_pages = {
        "/cdn.png": ("image/png", PNG),
        "/bg.png": ("image/png", PNG),
        "/private/x.png": ("image/png", PNG),
        "/robots.txt": ("text/plain", b"User-agent: *\nDisallow: /private/\n"),
    }
    with _host("127.0.0.2", cdn_pages) as (cdn_port, cdn_asked):
        cdn = f"http://127.0.0.2:{cdn_port}"
        with _host("127.0.0.1", _site(cdn)) as (port, asked):
            sites = tmp_path / "sites"
            write_site(sites, "archive", "[requisites]\nfetch = true\n")
            result = run_crawl(
                tmp_path, "archive", seeds=[f"http://127.0.0.1:{port}/"], sites_dir=sites,
                # stock CloseSpider would stop at the 6th response (requisites included); the
                # pages are 2
                settings=loopback_settings(
                    CLOSESPIDER_PAGECOUNT=6, WARC_ENABLED=True, WARC_DIR=tmp_path / "warc",
                    **shared,
                ),
            )
    assert result.returncode == 0, result.log[-3000:]
    stats = result.stats
    assert stats["finish_reason"] == "finished", stats
    assert stats["response_received_count"] > 6  # what stock CloseSpider counts
    for path in ("/", "/about", "/s.css", "/img.png", "/frame.html", "/frame-img.png",
                 "/font.woff"):
        assert asked[path] == 1, (path, asked)  # /s.css and /img.png: embedded twice
    assert asked["/frame-link"] == 0 and not [p for p in asked if "css-link" in p]
    assert cdn_asked["/cdn.png"] == 1 and cdn_asked["/bg.png"] == 1  # outside the scope
    assert cdn_asked["/private/x.png"] == 0  # its own host's robots.txt holds
    # pages: the two HTML pages of the scope, nothing else
    assert sorted(item["url"].rsplit("/", 1)[-1] for item in result.items) == ["", "about"]
    assert stats["pages/ok"] == 2 and stats["item_scraped_count"] == 2
    assert stats["index/documents"] == 2 and stats["neardup/new"] == 2  # pages only
    assert stats["requisites/fetched"] == 7
    # 8 queued (robots.txt then refused /private/x.png); s.css and img.png asked twice
    assert stats["requisites/queued"] == 8 and stats["requisites/seen"] == 2
    assert stats.get("frontier/rejected/out_of_scope", 0) == 0
    archived = {
        r["headers"]["WARC-Target-URI"] for r in all_records(tmp_path / "warc")
        if r["type"] == "response"
    }
    assert f"{cdn}/bg.png" in archived and f"http://127.0.0.1:{port}/font.woff" in archived
