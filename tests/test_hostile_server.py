"""The hostile test server itself: each case does what the crawler's tests rely on."""

from __future__ import annotations

import gzip
import http.client
import socket
import time
import zlib

import brotli
import pytest

from tests import hostile as h

A, B = "127.0.0.61", "127.0.0.62"


def raw_get(server: h.HostileServer, address: str, path: str, *, read: int = 1 << 20,
            timeout: float = 5) -> bytes:
    """Send a GET and read up to ``read`` bytes (or until the server closes)."""
    with socket.create_connection((address, server.port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n".encode())
        data = b""
        while len(data) < read:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
        return data


def get(server: h.HostileServer, address: str, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(address, server.port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


@pytest.fixture
def server():
    srv = h.HostileServer(max_connections=8)
    h.normal_site(srv, A, pages=3)
    srv.route(B, "/silent", h.silent())
    srv.route(B, "/trickle", h.trickled_body(size=20, interval=0.1))
    srv.route(B, "/headers", h.endless_headers())
    srv.route(B, "/endless", h.endless_body())
    srv.route(B, "/reset", h.reset_mid_body())
    srv.route(B, "/bomb/gzip", h.bomb("gzip", 8 << 20))
    srv.route(B, "/bomb/deflate", h.bomb("deflate", 8 << 20))
    srv.route(B, "/bomb/br", h.bomb("br", 8 << 20))
    srv.route(B, "/loop/", h.redirect_loop(), prefix=True)
    srv.route(B, "/chain/", h.redirect_chain(length=3), prefix=True)
    srv.route(B, "/busy", h.retry_after(429, "7", h.page("ok"), times=2))
    srv.route(B, "/cal/", h.calendar(), prefix=True)
    srv.route(B, "/s/", h.session_ids(), prefix=True)
    srv.route(B, "/shop", h.facets())
    with srv:
        yield srv


def test_normal_site_and_records(server: h.HostileServer) -> None:
    status, _, body = get(server, A, "/")
    assert status == 200 and b"/p/2.html" in body
    assert get(server, A, "/nothing")[0] == 404
    assert server.wait_idle()
    hits = server.hits_of(A)
    assert [x.path for x in hits] == ["/", "/nothing"]
    assert hits[0].status == 200 and hits[0].sent > len(body) and hits[0].end >= hits[0].start


def test_slow_and_endless(server: h.HostileServer) -> None:
    start = time.monotonic()
    data = raw_get(server, B, "/trickle")
    assert data.endswith(b"x" * 14) and time.monotonic() - start >= 20 * 0.1 * 0.9
    head = raw_get(server, B, "/headers", read=1 << 20)
    assert head.count(b"\r\nX-Junk-") > 10_000 and b"\r\n\r\n" not in head
    body = raw_get(server, B, "/endless", read=4 << 20)
    assert len(body) >= 4 << 20
    reset = raw_get(server, B, "/reset")
    assert b"Content-Length: 100000" in reset and len(reset) < 100_000


def test_silent_connection_is_cut_by_stop() -> None:
    srv = h.HostileServer()
    srv.route(B, "/", h.silent())
    srv.start()
    sock = socket.create_connection((B, srv.port), timeout=30)
    sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
    time.sleep(0.3)
    srv.stop()
    assert sock.recv(10) == b""  # closed, nothing sent
    sock.close()
    [hit] = srv.hits
    assert hit.status == 0 and hit.sent == 0


def test_connections_are_bounded(server: h.HostileServer) -> None:
    socks = [socket.create_connection((B, server.port)) for _ in range(8)]
    for s in socks:
        s.sendall(b"GET /silent HTTP/1.1\r\n\r\n")
    time.sleep(0.3)
    extra = socket.create_connection((B, server.port), timeout=5)
    assert extra.recv(10) == b""
    assert server.overloaded >= 1
    for s in [extra, *socks]:
        s.close()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_bombs_expand(server: h.HostileServer, encoding: str) -> None:
    _, headers, body = get(server, B, f"/bomb/{encoding}")
    assert headers["content-encoding"] == encoding and len(body) < 100_000
    plain = {"gzip": gzip.decompress, "deflate": zlib.decompress, "br": brotli.decompress}
    assert len(plain[encoding](body)) == 8 << 20


def test_redirects_and_retry_after(server: h.HostileServer) -> None:
    assert get(server, B, "/loop/a")[1]["location"] == "/loop/b"
    assert get(server, B, "/loop/b")[1]["location"] == "/loop/a"
    assert get(server, B, "/chain/2")[1]["location"] == "/chain/3"
    assert get(server, B, "/chain/3")[0] == 200
    first, second, third = (get(server, B, "/busy") for _ in range(3))
    assert first[0] == second[0] == 429 and first[1]["retry-after"] == "7"
    assert third[0] == 200


def test_traps_are_endless(server: h.HostileServer) -> None:
    body = get(server, B, "/cal/2026/12")[2]
    assert b"/cal/2026/11" in body and b"/cal/2027/01" in body
    one, two = get(server, B, "/s/1")[2], get(server, B, "/s/1")[2]
    assert b"?sid=" in one and b";jsessionid=" in one and one != two
    assert b"/shop?a=0&b=1" in get(server, B, "/shop?a=0")[2]
