"""A site whose links are written as real sites write them, and whose access log keeps each
request line byte for byte: for tests that the crawl requests a link as it is found.

One HTTP server on 127.0.0.1 answers several names by the ``Host`` header (a test DNS server,
``devsite.dnsserver``, maps them to loopback). The home page of :data:`HOME` links, as written
in its HTML (:data:`LINKS`): raw ``?/path`` queries, a query without ``=``, unsorted queries, an
escaped space, ``//`` in a path, a backslash, a stray ``%``, an international host name and a
host with a trailing dot, links that its robots.txt (:data:`ROBOTS`) disallows as written
but not once their query is sorted, redirects (:data:`REDIRECTS`) and a ``rel="canonical"``
link. Every other page is a leaf. ``requests`` holds ``(host, request target)`` for each
request, in order.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer

HOME = "tricky.test"
IDN_HOST = "bücher.tricky.test"  # xn--bcher-kva.tricky.test in DNS and on the wire
IDN_WIRE = "xn--bcher-kva.tricky.test"
DOT_HOST = "www.tricky.test"  # linked as "www.tricky.test." (trailing dot)

ROBOTS = """User-agent: *
Disallow: /search?q=
Disallow: /*?sort=
Disallow: /go?url=http://
Disallow: /*?ref=
"""

# (href as the page writes it, the request target it must be fetched as, on which host).
# {port} is the server's port.
LINKS: list[tuple[str, str, str]] = [
    ("index.php?/blog/post/1", "/index.php?/blog/post/1", HOME),
    ("show.php?article300", "/show.php?article300", HOME),
    ("list?b=2&a=1&c", "/list?b=2&a=1&c", HOME),
    ("find?q=a%20b&lang=en", "/find?q=a%20b&lang=en", HOME),
    ("/docs//guide//intro.html", "/docs//guide//intro.html", HOME),
    ("/p?x=a b", "/p?x=a%20b", HOME),
    ("/pct/100%.html", "/pct/100%25.html", HOME),
    ("\\back\\slash.html", "/back/slash.html", HOME),
    ("/route?next=/a/./b&to=%2Fx", "/route?next=/a/./b&to=%2Fx", HOME),
    ("http://b\u00fccher.tricky.test:{port}/regal?b=1&a=2", "/regal?b=1&a=2", IDN_WIRE),
    ("http://www.tricky.test.:{port}/punkt?z=9&y=8", "/punkt?z=9&y=8", DOT_HOST),
]
# Links robots.txt disallows as written (their canonical forms, query sorted, it would allow),
# and a link whose canonical form is that of an earlier one (fetched once, as the first).
DISALLOWED = [
    "/search?q=shoes&lang=en",
    "/items?sort=price&page=2",
    "/go?url=http://x.test/&ref=1",
    "/news?ref=home&id=7",
]
SAME_AS_LIST = "list?a=1&c&b=2"
# The home page's <link rel="canonical">: queued as written, like a link.
CANONICAL = "/?home&b=2&a=1"
# Redirects the home page links to: path -> Location. The first leads to a URL robots.txt
# disallows as written (not once its query is sorted), the second to one fetched as written.
REDIRECTS = {
    "/moved": "/search?q=red&lang=en",
    "/moved-on": "/landing?z=1&a=2&a=0",
}


class TrickySite:
    """The site on a free loopback port (see the module docstring)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, host: str = HOME, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def home_page(self) -> str:
        hrefs = [href.format(port=self.port) for href, _, _ in LINKS]
        hrefs += [*DISALLOWED, SAME_AS_LIST, *REDIRECTS]
        anchors = "".join(f'<li><a href="{h}">link {i}</a></li>' for i, h in enumerate(hrefs))
        return (
            f'<html><head><title>Tricky links</title><link rel="canonical" href="{CANONICAL}">'
            f"</head><body><ul>{anchors}</ul></body>"
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                with site._lock:
                    site.requests.append((host, self.path))
                if self.path == "/robots.txt":
                    self._send(ROBOTS.encode(), "text/plain")
                elif self.path in REDIRECTS:
                    self.send_response(302)
                    self.send_header("Location", REDIRECTS[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/" and host == HOME:
                    self._send(site.home_page().encode(), "text/html; charset=utf-8")
                else:
                    body = f"<html><head><title>{self.path}</title></head><body>leaf</body>"
                    self._send(body.encode(), "text/html; charset=utf-8")

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def __enter__(self) -> TrickySite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # no reverse lookup of the address (no network here)
