"""A web-shaped graph, its PageRank, and a server for thousands of loopback hosts at once.

The judge of crawl orderings (issue 25, ``bench/webgraph.py``): a graph with the shape of the
real web, deterministic by a seed, and the PageRank of every page computed over the whole graph,
so the value a crawl fetched first can be summed.

Shape (:func:`build_webgraph`):

* host sizes follow a Pareto law (a few big sites, many small ones);
* every host is a tree from its home page (``/``), every page links back home and to a few
  pages of its own host, so each host is crawlable from its home;
* links between hosts follow a copying model (Kleinberg et al. 1999): a new link copies the
  target of an existing inter-host link with probability ``copy``, else points at a uniform
  page (half of the time a home page); in-degrees come out power-law;
* link farms: groups of hosts whose pages link densely to each other, reachable from one spam
  seed only (``comment_spam``: that many good pages link into the farms too), with a few links
  out of the farm to popular good pages and to a few good hosts no good page links to;
* page texts are paragraphs of the real documentation under ``/usr/share/doc``.

:class:`WebGraphServer` serves it: one selector loop in one thread, one listening socket per
host address (``127.x.y.z``, one port for all), robots.txt per host, ``Connection: close``.
"""

from __future__ import annotations

import contextlib
import gzip
import html
import os
import random
import selectors
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DOC_ROOT = Path("/usr/share/doc")
_FALLBACK_TEXT = (
    "A frontier decides what a crawler fetches next. Politeness keeps one host from being "
    "fetched too often. A link farm is a set of pages that link to each other to look popular."
)


@dataclass
class WebGraph:
    """Pages ``0..n-1``; host ``h`` owns pages ``first[h] .. first[h+1]-1``, the first being
    its home page. ``indptr``/``indices``: out-links (CSR). ``farm[h]``: the farm of host ``h``
    or -1. ``seeds``: good seeds' page ids; ``spam_seed``: the farm's seed."""

    seed: int
    hosts: list[str]
    first: np.ndarray
    host_of: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    farm: np.ndarray
    seeds: list[int]
    spam_seed: int
    farm_only_hosts: list[int] = field(default_factory=list)
    port: int = 0
    _pagerank: np.ndarray | None = None

    @property
    def pages(self) -> int:
        return len(self.host_of)

    def links(self, page: int) -> np.ndarray:
        return self.indices[self.indptr[page] : self.indptr[page + 1]]

    def path(self, page: int) -> str:
        local = page - int(self.first[self.host_of[page]])
        return "/" if local == 0 else f"/p/{local}.html"

    def url(self, page: int) -> str:
        host = self.hosts[self.host_of[page]]
        return f"http://{host}:{self.port}{self.path(page)}" if self.port else (
            f"http://{host}{self.path(page)}"
        )

    def page_of(self, host: str, path: str) -> int | None:
        """The page at ``path`` of ``host``, or None."""
        h = self._host_index().get(host)
        if h is None:
            return None
        if path == "/":
            local = 0
        elif path.startswith("/p/") and path.endswith(".html") and path[3:-5].isdigit():
            local = int(path[3:-5])
            if local == 0 or path[3] == "0":
                return None
        else:
            return None
        page = int(self.first[h]) + local
        return page if page < int(self.first[h + 1]) else None

    def _host_index(self) -> dict[str, int]:
        cache = self.__dict__.get("_hidx")
        if cache is None:
            cache = self.__dict__["_hidx"] = {name: i for i, name in enumerate(self.hosts)}
        return cache

    def in_farm(self, page: int) -> bool:
        return bool(self.farm[self.host_of[page]] >= 0)

    def pagerank(self, damping: float = 0.85, tol: float = 1e-10) -> np.ndarray:
        """PageRank by power iteration, uniform teleport (every page has out-links)."""
        if self._pagerank is not None:
            return self._pagerank
        n = self.pages
        out_deg = np.diff(self.indptr).astype(np.float64)
        src = np.repeat(np.arange(n), np.diff(self.indptr))
        rank = np.full(n, 1.0 / n)
        for _ in range(200):
            contrib = (rank / out_deg)[src]
            new = np.bincount(self.indices, weights=contrib, minlength=n) * damping
            new += (1.0 - damping) / n
            if np.abs(new - rank).sum() < tol:
                rank = new
                break
            rank = new
        self._pagerank = rank / rank.sum()
        return self._pagerank

    def reachable(self, seeds: list[int]) -> np.ndarray:
        """A boolean mask of the pages reachable from ``seeds``."""
        seen = np.zeros(self.pages, dtype=bool)
        stack = list(seeds)
        seen[seeds] = True
        indptr, indices = self.indptr, self.indices
        while stack:
            p = stack.pop()
            for q in indices[indptr[p] : indptr[p + 1]]:
                if not seen[q]:
                    seen[q] = True
                    stack.append(int(q))
        return seen


def build_webgraph(
    seed: int = 1,
    *,
    hosts: int = 2000,
    pages: int = 100_000,
    farms: int = 3,
    farm_hosts: int = 20,
    farm_pages: int = 3000,
    good_seeds: int = 19,
    copy: float = 0.7,
    external_links: float = 3.0,
    farm_only: int = 5,
    comment_spam: int = 0,
) -> WebGraph:
    """A web-shaped graph, the same for the same arguments (see the module docstring)."""
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    n_farm_hosts = farms * farm_hosts
    n_good_hosts = hosts - n_farm_hosts
    n_good_pages = pages - farms * farm_pages
    if n_good_hosts < good_seeds + farm_only + 1 or n_good_pages < 3 * n_good_hosts:
        raise ValueError("too few good hosts or pages for this many farms")
    # good host sizes: Pareto, at least 3 pages, capped at 5 % of the good pages
    w = rng.pareto(1.1, n_good_hosts) + 1.0
    w = np.minimum(w / w.sum() * n_good_pages, 0.05 * n_good_pages)
    sizes = np.maximum(3, np.floor(w)).astype(np.int64)
    diff = n_good_pages - int(sizes.sum())
    order_by_size = np.argsort(-sizes)
    i = 0
    while diff != 0:  # spread the rounding over the biggest hosts
        h = order_by_size[i % n_good_hosts]
        step = 1 if diff > 0 else -1
        if sizes[h] + step >= 3:
            sizes[h] += step
            diff -= step
        i += 1
    farm_size = [farm_pages // farm_hosts] * farm_hosts
    farm_size[-1] += farm_pages - sum(farm_size)
    # host kinds in a shuffled order of addresses: ("good", size) or ("farm", farm, size)
    kinds: list[tuple[int, int]] = [(-1, int(s)) for s in sizes]
    kinds += [(f, farm_size[j]) for f in range(farms) for j in range(farm_hosts)]
    rnd.shuffle(kinds)
    farm_of = np.array([k[0] for k in kinds], dtype=np.int16)
    size_of = np.array([k[1] for k in kinds], dtype=np.int64)
    first = np.zeros(hosts + 1, dtype=np.int64)
    first[1:] = np.cumsum(size_of)
    host_of = np.repeat(np.arange(hosts), size_of).astype(np.int32)
    names = [f"127.{20 + h // 62500}.{1 + (h // 250) % 250}.{1 + h % 250}" for h in range(hosts)]

    good = [h for h in range(hosts) if farm_of[h] < 0]
    by_size = sorted(good, key=lambda h: -int(size_of[h]))
    seed_hosts = rnd.sample(by_size[:100], good_seeds)
    small = [h for h in by_size[-200:] if h not in seed_hosts]
    farm_only_hosts = rnd.sample(small, farm_only)
    linkable = [h for h in good if h not in farm_only_hosts]  # good pages' link targets
    linkable_pages = np.concatenate([np.arange(first[h], first[h + 1]) for h in linkable])

    out: list[list[int]] = [[] for _ in range(pages)]
    # hosts: a tree from the home page, every page links home and to two pages of its host
    for h in range(hosts):
        base, n = int(first[h]), int(size_of[h])
        for local in range(1, n):
            out[base + (local - 1) // 3].append(base + local)
            out[base + local].append(base)
        if farm_of[h] < 0:
            for local in range(n):
                for r in rng.integers(0, n, 2):
                    if r != local:
                        out[base + local].append(base + int(r))
    # good hosts reachable from the seeds: each gets a link from a page of an earlier host
    chain = seed_hosts + [h for h in rnd.sample(linkable, len(linkable)) if h not in seed_hosts]
    for k, h in enumerate(chain[len(seed_hosts) :], start=len(seed_hosts)):
        src_host = chain[rnd.randrange(k)]
        out[int(first[src_host]) + rnd.randrange(int(size_of[src_host]))].append(int(first[h]))
    # inter-host links on good pages: the copying model
    targets: list[int] = []
    good_pages = np.concatenate([np.arange(first[h], first[h + 1]) for h in linkable])
    n_ext = rng.poisson(external_links, len(good_pages))
    homes = [int(first[h]) for h in linkable]
    for p, k in zip(rng.permutation(good_pages).tolist(), n_ext.tolist(), strict=False):
        p_host = host_of[p]
        for _ in range(k):
            if targets and rnd.random() < copy:
                t = targets[rnd.randrange(len(targets))]
            elif rnd.random() < 0.5:
                t = homes[rnd.randrange(len(homes))]
            else:
                t = int(linkable_pages[rnd.randrange(len(linkable_pages))])
            if host_of[t] != p_host:
                out[p].append(t)
                targets.append(t)
    # link farms: dense links inside the farm, across farms, a few out to good pages
    farm_hosts_of = [[h for h in range(hosts) if farm_of[h] == f] for f in range(farms)]
    farm_pages_of = [
        np.concatenate([np.arange(first[h], first[h + 1]) for h in fh]) for fh in farm_hosts_of
    ]
    popular = np.bincount(np.array(targets, dtype=np.int64), minlength=pages)
    top_good = np.argsort(-popular)[:200].tolist()
    for f in range(farms):
        fp = farm_pages_of[f]
        for p in fp.tolist():
            for t in rng.choice(fp, 15).tolist():
                if t != p:
                    out[p].append(t)
            for g in range(farms):
                if g != f:
                    out[p].append(int(rng.choice(farm_pages_of[g])))
            if rnd.random() < 0.01:
                out[p].append(top_good[rnd.randrange(len(top_good))])
        for h in farm_only_hosts:  # good hosts only the farms link to
            out[int(rnd.choice(fp.tolist()))].append(int(first[h]))
        for _ in range(farm_hosts):  # the farm's homes linked from one another
            a, b = rnd.sample(farm_hosts_of[f], 2)
            out[int(first[a])].append(int(first[b]))
    for _ in range(comment_spam):  # comment spam: good pages that link into the farms
        p = int(good_pages[rnd.randrange(len(good_pages))])
        out[p].append(int(rnd.choice(farm_pages_of[rnd.randrange(farms)].tolist())))
    spam_host = farm_hosts_of[0][0]
    for fh in farm_hosts_of:  # the spam seed's home leads into every farm
        for h in fh[:5]:
            out[int(first[spam_host])].append(int(first[h]))
    indptr = np.zeros(pages + 1, dtype=np.int64)
    dedup = [list(dict.fromkeys(links)) for links in out]
    indptr[1:] = np.cumsum([len(links) for links in dedup])
    indices = np.fromiter((t for links in dedup for t in links), dtype=np.int32,
                          count=int(indptr[-1]))
    return WebGraph(
        seed=seed,
        hosts=names,
        first=first,
        host_of=host_of,
        indptr=indptr,
        indices=indices,
        farm=farm_of,
        seeds=[int(first[h]) for h in seed_hosts],
        spam_seed=int(first[spam_host]),
        farm_only_hosts=farm_only_hosts,
    )


def doc_paragraphs(limit: int = 4000, root: Path = DOC_ROOT) -> list[str]:
    """Paragraphs of real documentation text (plain and gzipped files under ``root``), in a
    stable order; a fixed text when none is found."""
    paragraphs: list[str] = []
    files: list[Path] = []
    if root.is_dir():
        for dirpath, _, filenames in sorted(os.walk(root)):
            for name in sorted(filenames):
                if name.startswith(("README", "changelog", "NEWS")) or name.endswith(
                    (".txt", ".md", ".txt.gz", ".md.gz")
                ):
                    files.append(Path(dirpath) / name)
    for path in files:
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        text = raw.decode("utf-8", "replace")
        for block in text.split("\n\n"):
            block = " ".join(block.split())
            if 200 <= len(block) <= 2000:
                paragraphs.append(block)
                if len(paragraphs) >= limit:
                    return paragraphs
    return paragraphs or [_FALLBACK_TEXT]


def render_page(graph: WebGraph, page: int, paragraphs: list[str]) -> bytes:
    """A page's HTML: a title, two paragraphs of documentation, its links."""
    n = len(paragraphs)
    text = paragraphs[(page * 7919) % n], paragraphs[(page * 104729 + 1) % n]
    title = html.escape(text[0][:60])
    parts = [f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>"]
    parts += [f"<p>{html.escape(t)}</p>" for t in text]
    parts.append("<ul>")
    own = graph.host_of[page]
    for t in graph.links(page).tolist():
        href = graph.path(t) if graph.host_of[t] == own else graph.url(t)
        parts.append(f'<li><a href="{href}">page {t}</a></li>')
    parts.append("</ul></body></html>")
    return "".join(parts).encode()


class WebGraphServer:
    """Serves a :class:`WebGraph`: one thread, one selector, one listening socket per host.

    ``with WebGraphServer(graph) as server:`` binds every host address on one port (chosen
    by the system for the first address), sets ``graph.port`` and serves until the block ends.
    ``requests`` counts answered requests per host address.
    """

    def __init__(self, graph: WebGraph, *, port: int = 0, paragraphs: list[str] | None = None):
        self.graph = graph
        self.paragraphs = paragraphs or doc_paragraphs()
        self._port = port
        self._selector = selectors.DefaultSelector()
        self._listeners: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests: dict[str, int] = {}
        self.robots_requests: dict[str, int] = {}

    def __enter__(self) -> WebGraphServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        port = self._port
        for name in self.graph.hosts:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((name, port))
            port = sock.getsockname()[1]
            sock.listen(128)
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, (name, None))
            self._listeners.append(sock)
        self.graph.port = port
        self._thread = threading.Thread(target=self._serve, name="webgraph-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def _serve(self) -> None:
        sel = self._selector
        while not self._stop.is_set():
            for key, _ in sel.select(0.2):
                host, buf = key.data
                sock = key.fileobj
                if buf is None:  # a listener
                    try:
                        conn, _ = sock.accept()  # type: ignore[union-attr]
                    except OSError:
                        continue
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ, (host, bytearray()))
                    continue
                try:
                    chunk = sock.recv(65536)  # type: ignore[union-attr]
                except OSError:
                    chunk = b""
                if chunk:
                    buf += chunk
                    if b"\r\n\r\n" not in buf:
                        continue
                    self._answer(sock, host, bytes(buf))  # type: ignore[arg-type]
                sel.unregister(sock)
                sock.close()

    def _answer(self, conn: socket.socket, host: str, request: bytes) -> None:
        line = request.split(b"\r\n", 1)[0].decode("latin-1").split()
        path = line[1] if len(line) >= 2 else "/"
        self.requests[host] = self.requests.get(host, 0) + 1
        if path == "/robots.txt":
            self.robots_requests[host] = self.robots_requests.get(host, 0) + 1
            status, ctype, body = 200, "text/plain", b"User-agent: *\nDisallow: /private/\n"
        else:
            page = self.graph.page_of(host, path)
            if page is None:
                status, ctype, body = 404, "text/plain", b"not found"
            else:
                status, ctype = 200, "text/html; charset=utf-8"
                body = render_page(self.graph, page, self.paragraphs)
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        conn.setblocking(True)
        conn.settimeout(5)
        with contextlib.suppress(OSError):
            conn.sendall(head + body)
