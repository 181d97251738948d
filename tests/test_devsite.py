"""Tests for the loopback multi-host test site that other tests rely on."""

from __future__ import annotations

import http.client
import itertools
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from devsite import HostSpec, SiteServer, build_site

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ROBOTS = "User-agent: *\nDisallow: /private/\n"
SLOW, ERROR, REFUSE = "127.0.0.2", "127.0.0.3", "127.0.0.4"
REPO = Path(__file__).resolve().parents[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def fetch(url: str, *, method: str = "GET", timeout: float = 5) -> tuple[int, dict, bytes, str]:
    """(status, headers, body, final URL); HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, method=method)
    try:
        with OPENER.open(request, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read(), resp.geturl()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read(), url


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value or "" for name, value in attrs if name == "href"]


def hrefs_of(body: bytes) -> list[str]:
    parser = _Hrefs()
    parser.feed(body.decode("utf-8"))
    return parser.hrefs


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    specs = [
        HostSpec(SLOW, pages=4, delay=0.2, robots=ROBOTS),
        HostSpec(ERROR, pages=4, mode="error"),
        HostSpec(REFUSE, pages=4, mode="refuse"),
    ]
    with SiteServer(build_site(specs)) as srv:
        yield srv


def test_serves_pages_and_records_requests(site: SiteServer) -> None:
    site.reset()
    status, headers, body, _ = fetch(site.url(SLOW, "/p/1.html?b=2&a=1"))
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"<title>" in body and b"<nav>" in body and b"<footer>" in body
    status, headers, head_body, _ = fetch(site.url(SLOW, "/p/1.html"), method="HEAD")
    assert (status, head_body, int(headers["Content-Length"])) == (200, b"", len(body))
    assert fetch(site.url(SLOW, "/robots.txt"))[2].decode() == ROBOTS
    assert fetch(site.url(SLOW, "/p/4.html"))[0] == 404

    records = site.records_for(SLOW)
    assert [(r.method, r.path, r.status) for r in records] == [
        ("GET", "/p/1.html?b=2&a=1", 200),
        ("HEAD", "/p/1.html", 200),
        ("GET", "/robots.txt", 200),
        ("GET", "/p/4.html", 404),
    ]
    assert site.fetched_paths(SLOW) == [r.path for r in records]
    assert records[0].bytes == len(body) and records[1].bytes == 0
    assert all(r.end - r.start >= 0.19 and r.port == site.port for r in records)
    assert all(a.end <= b.start for a, b in itertools.pairwise(records))
    assert records[0].headers["User-Agent"].startswith("Python-urllib")
    assert site.max_concurrency(SLOW) == 1


def test_pages_differ_but_share_template(site: SiteServer) -> None:
    one, two = (fetch(site.url(SLOW, f"/p/{i}.html"))[2].decode() for i in (1, 2))
    assert one != two
    header = re.compile(r"<header>.*</header>")
    assert header.search(one).group() == header.search(two).group()  # type: ignore[union-attr]
    assert len(re.search(r"<p>(.*?)</p>", one).group(1).split()) >= 30  # type: ignore[union-attr]


def test_tracks_concurrency(site: SiteServer) -> None:
    site.reset()
    barrier = threading.Barrier(3)
    statuses: list[int] = []

    def worker(i: int) -> None:
        barrier.wait()
        statuses.append(fetch(site.url(SLOW, f"/p/{i}.html"))[0])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200, 200, 200]
    assert site.max_concurrency(SLOW) == 3
    assert sorted(site.fetched_paths(SLOW)) == ["/p/0.html", "/p/1.html", "/p/2.html"]
    site.reset()
    assert site.max_concurrency(SLOW) == 0 and site.records == []


def test_error_and_refuse_hosts(site: SiteServer) -> None:
    assert fetch(site.url(ERROR, "/"))[0] == 500
    assert fetch(site.url(ERROR, "/robots.txt"))[0] == 500
    assert site.records_for(ERROR)[-1].status == 500
    with pytest.raises(urllib.error.URLError) as info:
        fetch(site.url(REFUSE, "/"))
    assert isinstance(info.value.reason, ConnectionRefusedError)
    assert site.records_for(REFUSE) == []


def test_redirect_mode() -> None:
    specs = [
        HostSpec("127.0.0.2", pages=3),
        HostSpec("127.0.0.9", mode="redirect", redirect_to="127.0.0.2"),
    ]
    with SiteServer(specs) as srv:
        conn = http.client.HTTPConnection("127.0.0.9", srv.port, timeout=5)
        conn.request("GET", "/p/2.html?x=1")
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 301
        assert resp.headers["Location"] == srv.url("127.0.0.2", "/p/2.html?x=1")
        status, _, _, final = fetch(srv.url("127.0.0.9", "/p/1.html"))
        assert (status, final) == (200, srv.url("127.0.0.2", "/p/1.html"))
        assert srv.fetched_paths("127.0.0.9") == ["/p/2.html?x=1", "/p/1.html"]
        assert srv.fetched_paths("127.0.0.2") == ["/p/1.html"]


def test_hang_mode_stops_cleanly() -> None:
    specs = [HostSpec("127.0.0.2", pages=2), HostSpec("127.0.0.10", mode="hang")]
    srv = SiteServer(specs)
    srv.start()
    try:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            fetch(srv.url("127.0.0.10", "/"), timeout=0.3)
        hung = socket.create_connection(("127.0.0.10", srv.port), timeout=3)
        hung.sendall(b"GET /p/0.html HTTP/1.1\r\nHost: x\r\n\r\n")
        idle = http.client.HTTPConnection("127.0.0.2", srv.port, timeout=3)
        idle.request("GET", "/")
        idle.getresponse().read()
        deadline = time.monotonic() + 2
        while srv.max_concurrency("127.0.0.10") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        srv.stop()
    # stop() aborted the hanging request and closed both connections, without an answer
    assert hung.recv(100) == b""
    assert idle.sock is not None and idle.sock.recv(100) == b""
    hung.close()
    idle.close()
    records = srv.records_for("127.0.0.10")
    assert [(r.path, r.status) for r in records] == [("/", 0), ("/p/0.html", 0)]


def test_extras_are_served() -> None:
    with SiteServer([HostSpec("127.0.0.2", pages=3)]) as srv:
        root = srv.url("127.0.0.2")
        links = srv.graph.links(root)
        for href in (
            "http://[::1",
            "javascript:void(0)",
            "",
            "file:///etc/passwd",
            "/p/1.html?b=2&a=1",
            "/p/1.html?a=1&b=2",
            "/p/0.html#section-2",
            "./p/1.html",
            "/p/../p/1.html",
            "ftp://127.0.0.2/file",
            "/private/0.html",
        ):
            assert href in links
        plain = fetch(srv.url("127.0.0.2", "/p/1.html"))[2]
        assert fetch(srv.url("127.0.0.2", "/p/1.html?b=2&a=1"))[2] == plain
        assert fetch(srv.url("127.0.0.2", "/private/2.html"))[0] == 200
        assert fetch(srv.url("127.0.0.2", "/private/3.html"))[0] == 404

        path = "/trap/a/"
        for _ in range(4):
            body = fetch(srv.url("127.0.0.2", path))[2]
            (deeper,) = [h for h in hrefs_of(body) if h not in ("/", "/p/0.html")]
            path = urljoin(path, deeper)
        assert path == "/trap/a/a/a/a/a/"
        december = fetch(srv.url("127.0.0.2", "/cal/2024/12"))[2]
        assert "/cal/2025/1" in hrefs_of(december)

        status, headers, body, _ = fetch(srv.url("127.0.0.2", "/big.bin"))
        assert (status, headers["Content-Type"], len(body)) == (
            200,
            "application/octet-stream",
            64 * 1024,
        )
        status, headers, body, _ = fetch(srv.url("127.0.0.2", "/bad-encoding.html"))
        assert status == 200 and "utf-8" in headers["Content-Type"]
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
        assert body.decode("latin-1").count("Caf\xe9") == 2


def _served_bfs(srv: SiteServer, seeds: list[str]) -> tuple[set[str], int]:
    """What a naive crawler finds over real HTTP; returns pages and pages checked."""
    page = re.compile(r"/(p/\d+\.html)?")
    hosts = {f"{spec.address}:{srv.port}" for spec in srv.graph.hosts}
    found: set[str] = set()
    seen = set(seeds)
    queue = deque(seeds)
    checked = 0
    while queue:
        status, _, body, final = fetch(queue.popleft())
        if status != 200 or final in found:
            continue
        found.add(final)
        hrefs = hrefs_of(body)
        assert hrefs == srv.graph.links(final)
        checked += 1
        for href in hrefs:
            try:
                parts = urlsplit(urljoin(final, href))
                netloc = f"{parts.hostname}:{parts.port}"
            except ValueError:
                continue
            if parts.scheme == "http" and netloc in hosts and page.fullmatch(parts.path):
                url = f"http://{netloc}{parts.path}"
                if url not in seen:
                    seen.add(url)
                    queue.append(url)
    return found, checked


def test_reachable_matches_served_html() -> None:
    specs = [
        HostSpec("127.0.0.2", pages=12),
        HostSpec("127.0.0.3", pages=6),
        HostSpec("127.0.0.4", pages=0),
        HostSpec("127.0.0.5", pages=5, mode="error"),
        HostSpec("127.0.0.6", mode="redirect", redirect_to="127.0.0.3"),
    ]
    graph = build_site(specs, links_per_page=3, cross_host_links=2, seed=7)
    with SiteServer(graph) as srv:
        expected = graph.reachable(srv.seeds())
        found, checked = _served_bfs(srv, srv.seeds())
        assert found == expected
        assert checked == len(expected)
        assert set(graph.page_urls("127.0.0.2")) <= expected
        assert not any(u.startswith(srv.base("127.0.0.5")) for u in expected)
        assert all("#" not in url and "?" not in url for url in expected)
        assert len(srv.fetched_paths("127.0.0.2")) == len(set(srv.fetched_paths("127.0.0.2")))

    one_hop = graph.reachable([graph.seeds()[0]], max_depth=1)
    assert graph.seeds()[0] in one_hop and len(one_hop) < len(expected)
    with_private = graph.reachable(graph.seeds(), follow_private=True)
    assert set(graph.private_urls("127.0.0.2")) <= with_private
    assert with_private - expected == {
        u for s in specs if s.mode == "ok" for u in graph.private_urls(s.address)
    }


def test_graph_is_deterministic() -> None:
    specs = [HostSpec("127.0.0.2", pages=30), HostSpec("127.0.0.3", pages=30)]

    def snapshot(seed: int) -> list[list[str]]:
        graph = build_site(specs, seed=seed, port=8000)
        return [graph.links(u) for s in specs for u in graph.page_urls(s.address)]

    assert snapshot(1) == snapshot(1)
    assert snapshot(1) != snapshot(2)
    graph = build_site(specs, port=8000, extras=False)
    for spec in specs:
        root = graph.url(spec.address)
        own = {u for u in graph.reachable([root]) if u.startswith(graph.base(spec.address))}
        assert own == set(graph.page_urls(spec.address))
        assert all(len(graph.links(u)) >= 5 for u in graph.page_urls(spec.address))


def test_cli_writes_seeds_and_stops_on_sigterm(tmp_path: Path) -> None:
    seeds_file = tmp_path / "seeds.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devsite",
            "--hosts",
            "2",
            "--pages",
            "3",
            "--first-address",
            "127.0.0.20",
            "--seeds-file",
            str(seeds_file),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not seeds_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        seeds = seeds_file.read_text().split()
        assert [urlsplit(s).hostname for s in seeds] == ["127.0.0.20", "127.0.0.21"]
        assert all(fetch(s)[0] == 200 for s in seeds)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=5)
    assert proc.returncode == 0
    assert seeds[0] in out.splitlines()
