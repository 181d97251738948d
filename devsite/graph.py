"""Deterministic link graph and page content for the multi-host test site.

The graph is pure data: it knows which pages exist on which host, what each
page looks like and where its links point, so tests can compute the expected
crawl result (``reachable``) without fetching anything. The server in
``server.py`` only adds transport behaviour (delays, errors, hangs) on top.
"""

from __future__ import annotations

import html
import ipaddress
import random
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin, urlsplit

Mode = Literal["ok", "error", "hang", "refuse", "redirect"]
MODES: tuple[str, ...] = ("ok", "error", "hang", "refuse", "redirect")

PRIVATE_PAGES = 3
BIG_BIN_SIZE = 64 * 1024
HTML_TYPE = "text/html; charset=utf-8"

_PAGE_RE = re.compile(r"/p/(0|[1-9][0-9]*)\.html")
_PRIVATE_RE = re.compile(r"/private/(0|[1-9][0-9]*)\.html")
_TRAP_RE = re.compile(r"/trap/(?:a/)+")
_CAL_RE = re.compile(r"/cal/([0-9]+)/([1-9]|1[0-2])")

_VOCABULARY = (
    "crawler frontier politeness queue host robots sitemap anchor fetch parse render "
    "archive index shard bloom filter delay backoff token bucket canonical fragment "
    "query scheme authority path segment redirect status header payload charset "
    "encoding latin unicode spider trap calendar month year depth breadth graph edge "
    "vertex seed harvest mirror snapshot lattice meadow river harbor lantern orchard "
    "granite willow ember cobalt saffron quartz velvet thistle juniper marble cedar"
)
_WORDS = tuple(_VOCABULARY.split())

_BAD_ENCODING_BODY = (
    b'<!DOCTYPE html>\n<html lang="fr"><head><meta charset="utf-8">'
    b"<title>Caf\xe9 cr\xe8me</title></head>\n<body><h1>Caf\xe9 na\xefve</h1>"
    b"<p>Cr\xe8me br\xfbl\xe9e \xe0 la fran\xe7aise, d\xe9clar\xe9e utf-8 mais "
    b'encod\xe9e en latin-1.</p>\n<p><a href="/">Home</a></p></body></html>\n'
)
_BIG_BIN_BODY = bytes(range(256)) * (BIG_BIN_SIZE // 256)


@dataclass(frozen=True)
class HostSpec:
    """One simulated host: a loopback address plus how its server behaves.

    ``mode`` selects the failure being simulated: ``ok`` serves the site,
    ``error`` answers 500 to everything, ``hang`` reads the request and never
    answers, ``refuse`` leaves the address without a listener and ``redirect``
    answers 301 to the same path on ``redirect_to``.
    """

    address: str
    pages: int = 10
    delay: float = 0.0
    mode: Mode = "ok"
    redirect_to: str | None = None
    robots: str | None = None

    def __post_init__(self) -> None:
        if not ipaddress.ip_address(self.address).is_loopback:
            raise ValueError(f"{self.address!r} is not a loopback address")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {MODES}")
        if self.mode == "redirect":
            if self.redirect_to is None:
                raise ValueError("mode 'redirect' needs redirect_to")
            if not ipaddress.ip_address(self.redirect_to).is_loopback:
                raise ValueError(f"{self.redirect_to!r} is not a loopback address")
        if self.pages < 0 or self.delay < 0:
            raise ValueError("pages and delay must not be negative")


@dataclass(frozen=True)
class Document:
    """A resolved resource: what the server writes for a 200 response."""

    content_type: str
    body: bytes


@dataclass(frozen=True)
class _CrossLink:
    address: str
    path: str


def page_path(index: int) -> str:
    """Path of normal page ``index``; one place so graph and tests agree."""
    return f"/p/{index}.html"


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, so raw request paths like ``/p/../p/1.html`` still resolve."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result


class SiteGraph:
    """The whole multi-host site: pages, links and the expected reachability.

    URLs carry the server port, which is only known once a server is bound, so
    ``port`` is filled in by ``SiteServer`` (or passed to ``build_site``);
    everything that renders a URL raises if it is still unset.
    """

    def __init__(
        self,
        hosts: Sequence[HostSpec],
        same_links: dict[str, dict[str, list[str]]],
        cross_links: dict[str, dict[str, list[_CrossLink]]],
        *,
        extras: bool,
        seed: int,
        port: int | None = None,
    ) -> None:
        self.hosts: tuple[HostSpec, ...] = tuple(hosts)
        self.extras = extras
        self.seed = seed
        self.port = port
        self._by_address = {spec.address: spec for spec in self.hosts}
        self._same = same_links
        self._cross = cross_links

    def host(self, address: str) -> HostSpec:
        """Spec of the host at ``address``; KeyError for foreign addresses."""
        return self._by_address[address]

    def _port(self) -> int:
        if self.port is None:
            raise RuntimeError("SiteGraph.port is not set; start a SiteServer first")
        return self.port

    def base(self, address: str) -> str:
        """``http://ADDRESS:PORT`` of one host."""
        return f"http://{address}:{self._port()}"

    def url(self, address: str, path: str = "/") -> str:
        """Absolute URL of ``path`` on ``address``."""
        return self.base(address) + path

    def seeds(self) -> list[str]:
        """The ``/`` URL of every host, whatever its mode, in spec order."""
        return [self.url(spec.address) for spec in self.hosts]

    def page_urls(self, host_address: str) -> list[str]:
        """Canonical URLs of ``/`` and every ``/p/N.html`` of one host."""
        spec = self.host(host_address)
        return [self.url(spec.address)] + [
            self.url(spec.address, page_path(i)) for i in range(spec.pages)
        ]

    def private_urls(self, host_address: str) -> list[str]:
        """Canonical URLs of the ``/private/`` pages, which site configs deny."""
        self.host(host_address)
        return [self.url(host_address, f"/private/{i}.html") for i in range(PRIVATE_PAGES)]

    def links(self, url: str) -> list[str]:
        """Outgoing hrefs of an HTML page, as an HTML parser yields them, in order."""
        return [href for href, _ in self.anchors(url)]

    def anchors(self, url: str) -> list[tuple[str, str]]:
        """``(href, anchor text)`` pairs of an HTML page; KeyError if it is no page."""
        address, path = self._split_own(url)
        anchors = self._anchors(address, path)
        if anchors is None:
            raise KeyError(url)
        return anchors

    def _split_own(self, url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        address = parts.hostname or ""
        if address not in self._by_address or parts.port != self._port():
            raise KeyError(url)
        return address, remove_dot_segments(parts.path or "/")

    def _nav(self, address: str) -> list[tuple[str, str]]:
        nav = [("/", "Home")]
        if self.host(address).pages:
            nav.append((page_path(0), "First page"))
        return nav

    def _anchors(self, address: str, path: str) -> list[tuple[str, str]] | None:
        spec = self.host(address)
        if path == "/" or _PAGE_RE.fullmatch(path):
            match = _PAGE_RE.fullmatch(path)
            if match and int(match.group(1)) >= spec.pages:
                return None
            body = [(href, _anchor_text(href)) for href in self._same[address][path]]
            body += [
                (self.url(c.address, c.path), f"{_anchor_text(c.path)} on {c.address}")
                for c in self._cross[address][path]
            ]
            if path == "/" and self.extras:
                body += self._extras(spec)
            return self._nav(address) + body
        if match := _PRIVATE_RE.fullmatch(path):
            i = int(match.group(1))
            if i >= PRIVATE_PAGES:
                return None
            nxt = (i + 1) % PRIVATE_PAGES
            return [*self._nav(address), (f"/private/{nxt}.html", f"Private page {nxt}")]
        if _TRAP_RE.fullmatch(path):
            return [*self._nav(address), ("a/", "One level deeper")]
        if match := _CAL_RE.fullmatch(path):
            year, month = int(match.group(1)), int(match.group(2))
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            return [*self._nav(address), (f"/cal/{year}/{month}", "Next month")]
        return None

    def _extras(self, spec: HostSpec) -> list[tuple[str, str]]:
        port = self._port()
        target = page_path(1 if spec.pages > 1 else 0) if spec.pages else "/"
        first = page_path(0) if spec.pages else "/"
        extras = [
            (f"{first}#section-2", "Same page with a fragment"),
            (f".{target}", "Same page via ./"),
            (f"/p/..{target}" if target != "/" else "/p/../", "Same page via /p/../"),
            (f"HTTP://{spec.address}:{port}{target}", "Same page, upper-case scheme"),
        ]
        if port == 80:
            extras.append((f"http://{spec.address}:80{target}", "Same page, explicit :80"))
        extras += [
            (f"{target}?b=2&a=1", "Same page, query b then a"),
            (f"{target}?a=1&b=2", "Same page, query a then b"),
        ]
        extras += [(f"/private/{i}.html", f"Private page {i}") for i in range(PRIVATE_PAGES)]
        extras += [
            ("http://[::1", "Malformed IPv6 URL"),
            ("http://exa mple.com/", "Host with a space"),
            ("javascript:void(0)", "JavaScript link"),
            ("mailto:someone@example.com", "Mail link"),
            (f"ftp://{spec.address}/file", "FTP link"),
            ("data:text/plain,hi", "Data URL"),
            ("", "Empty href"),
            ("file:///etc/passwd", "File URL"),
            ("/trap/a/", "Endless directory trap"),
            ("/cal/2024/1", "Endless calendar"),
            ("/big.bin", "Binary download"),
            ("/bad-encoding.html", "Mis-declared encoding"),
        ]
        return extras

    def resolve(self, address: str, path: str) -> Document | None:
        """What an "ok" host serves at ``path`` (query already stripped); None is 404."""
        spec = self.host(address)
        path = remove_dot_segments(path or "/")
        if path == "/robots.txt":
            if spec.robots is None:
                return None
            return Document("text/plain; charset=utf-8", spec.robots.encode("utf-8"))
        if path == "/big.bin":
            return Document("application/octet-stream", _BIG_BIN_BODY)
        if path == "/bad-encoding.html":
            return Document(HTML_TYPE, _BAD_ENCODING_BODY)
        anchors = self._anchors(address, path)
        if anchors is None:
            return None
        return Document(HTML_TYPE, self._render(spec, path, anchors).encode("utf-8"))

    def _render(self, spec: HostSpec, path: str, anchors: list[tuple[str, str]]) -> str:
        rng = random.Random(f"text:{self.seed}:{spec.address}:{path}")
        site = f"Test site {spec.address}"
        heading = " ".join(rng.choice(_WORDS) for _ in range(3)).capitalize()
        words = [rng.choice(_WORDS) for _ in range(rng.randint(30, 60))]
        text = " ".join(words).capitalize() + "."
        nav_len = len(self._nav(spec.address))
        esc = html.escape
        nav = "".join(f'<a href="{esc(h)}">{esc(t)}</a> ' for h, t in anchors[:nav_len])
        items = "".join(f'<li><a href="{esc(h)}">{esc(t)}</a></li>\n' for h, t in anchors[nav_len:])
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
            f"<title>{esc(heading)} | {esc(site)}</title></head>\n<body>\n"
            f"<header><h1>{esc(site)}</h1><nav>{nav}</nav></header>\n"
            f"<main>\n<h2>{esc(heading)}</h2>\n<p>{esc(text)}</p>\n<ul>\n{items}</ul>\n</main>\n"
            f"<footer><p>{esc(site)} &middot; {esc(path)} &middot; generated test page</p>"
            "</footer>\n</body>\n</html>\n"
        )

    def normal_url(
        self, href: str, base: str | None = None, *, private: bool = False
    ) -> str | None:
        """Canonical URL of a normal page (``/``, ``/p/N.html``; ``/private/`` if asked)
        that ``href`` points to, resolved against ``base``; None for anything else.

        Query string and fragment are dropped because the server ignores them.
        """
        try:
            absolute = urljoin(base, href) if base else href
            parts = urlsplit(absolute)
            port = parts.port
        except ValueError:
            return None
        address = parts.hostname
        if parts.scheme != "http" or address not in self._by_address or port != self._port():
            return None
        spec = self._by_address[address]
        path = remove_dot_segments(parts.path or "/")
        if path != "/":
            match = _PAGE_RE.fullmatch(path)
            ok = match is not None and int(match.group(1)) < spec.pages
            if not ok and private:
                match = _PRIVATE_RE.fullmatch(path)
                ok = match is not None and int(match.group(1)) < PRIVATE_PAGES
            if not ok:
                return None
        return self.url(address, path)

    def _final(self, url: str) -> str | None:
        """Follow redirect hosts; None when the URL ends on a host that serves nothing."""
        seen: set[str] = set()
        while url not in seen:
            seen.add(url)
            parts = urlsplit(url)
            spec = self._by_address[parts.hostname or ""]
            if spec.mode == "ok":
                return url
            if spec.mode != "redirect" or spec.redirect_to not in self._by_address:
                return None
            url = self.url(spec.redirect_to, parts.path)
        return None

    def reachable(
        self,
        from_urls: Iterable[str],
        *,
        follow_private: bool = False,
        max_depth: int | None = None,
    ) -> set[str]:
        """Canonical URLs of normal pages a perfect crawler fetches successfully from
        ``from_urls``: BFS across hosts, through redirect hosts (without a depth step),
        never into error/hang/refuse hosts, traps, non-HTTP or malformed links.
        ``max_depth`` counts link hops; seeds are depth 0.
        """
        found: set[str] = set()
        queue: deque[tuple[str, int]] = deque()
        for url in from_urls:
            canon = self.normal_url(url, private=follow_private)
            if canon is not None:
                queue.append((canon, 0))
        seen = {url for url, _ in queue}
        while queue:
            url, depth = queue.popleft()
            final = self._final(url)
            if final is not None:
                final = self.normal_url(final, private=follow_private)
            if final is None or final in found:
                continue
            found.add(final)
            if max_depth is not None and depth >= max_depth:
                continue
            for href in self.links(final):
                target = self.normal_url(href, final, private=follow_private)
                if target is not None and target not in seen:
                    seen.add(target)
                    queue.append((target, depth + 1))
        return found


def _anchor_text(href: str) -> str:
    if href == "/":
        return "Home"
    match = re.search(r"(\d+)\.html$", href)
    return f"Page {match.group(1)}" if match else href


def build_site(
    specs: Sequence[HostSpec],
    *,
    links_per_page: int = 5,
    cross_host_links: int = 1,
    seed: int = 0,
    extras: bool = True,
    port: int | None = None,
) -> SiteGraph:
    """Build the link graph; the same arguments always give the same site.

    Every page of a host is reachable from its ``/`` because page N always links
    to N+1 (and ``/`` to page 0); the other same-host links are pseudo-random.
    Cross-host links only point at other "ok" hosts so they are fetchable.
    """
    addresses = [spec.address for spec in specs]
    if len(set(addresses)) != len(addresses):
        raise ValueError("host addresses must be distinct")
    ok_hosts = [spec for spec in specs if spec.mode == "ok"]
    same: dict[str, dict[str, list[str]]] = {}
    cross: dict[str, dict[str, list[_CrossLink]]] = {}
    for spec in specs:
        rng = random.Random(f"graph:{seed}:{spec.address}")
        nodes = ["/"] + [page_path(i) for i in range(spec.pages)]
        others = [h for h in ok_hosts if h.address != spec.address]
        same[spec.address] = {}
        cross[spec.address] = {}
        for index, path in enumerate(nodes):
            targets = [nodes[index + 1]] if index + 1 < len(nodes) else []
            pool = [n for n in nodes if n != path and n not in targets]
            extra = min(max(links_per_page - len(targets), 0), len(pool))
            targets += rng.sample(pool, extra)
            hrefs = []
            for target in targets:
                relative = path != "/" and target != "/" and rng.random() < 0.5
                hrefs.append(target.rsplit("/", 1)[1] if relative else target)
            same[spec.address][path] = hrefs
            links = []
            for _ in range(cross_host_links if others else 0):
                other = rng.choice(others)
                other_nodes = ["/"] + [page_path(i) for i in range(other.pages)]
                links.append(_CrossLink(other.address, rng.choice(other_nodes)))
            cross[spec.address][path] = links
    return SiteGraph(specs, same, cross, extras=extras, seed=seed, port=port)
