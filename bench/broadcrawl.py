"""A broad crawl holds its pace (issue 36): two Redis workers of the ``openweb`` site on a
loopback web of many hosts, with the failure mix of the open web; pages/s and worker CPU per
page by quarter, worker RSS sampled as it runs, and politeness judged from the server's side.

    .venv/bin/python bench/broadcrawl.py [--hosts 10000] [--minutes 5] [--workers 2]
                                         [--project DIR] [--json out.json]

The web (deterministic by ``--seed``): host sizes follow Zipf (rank r: ``--top / r`` pages, at
least ``--min-pages``), every page has 11 links, 3 of them (a quarter) to home pages of other
hosts: two picked by Zipf too (rank r with odds 1/r: popular hosts are linked most), one at
random: the crawl keeps meeting new hosts all along, more slowly as it goes, as the soak did
(links all at random meet the whole web in a minute; links to popular hosts only stop
meeting new ones; a chain of hosts ends at the ``openweb`` site's max_depth); the rest to pages
of its own host, a tree (page n links home and to pages 7n + 1 .. 7n + 7: a host is a few
levels deep, as a site is, so the site's max_depth of 20 is not what ends the crawl); 5 % of the
hosts are slow (each answer 2 s late), 2 % answer 503 to their odd pages (no Retry-After: a
minute holds the host), 1 % accept and never answer (closed after 30 s).
robots.txt varies: 10 % disallow ``/p/1``-prefixed paths, 3 % are 404, 2 % answer 500 (the
host must then get no page request).

One server thread (a selector loop, one listening socket per host address ``127.x.y.z``, one
port) records every request: it judges 1 request in flight per host, the gap from the end of a
host's answer to its next request (no shorter than ``--delay`` minus 10 ms), robots.txt at most
once per host, no request to a disallowed path or to a host whose robots.txt answers 500, and no
page answered 200 twice.

Both workers are timed from one start: the crawl is paused (``scrapy frontier openweb pause``)
before they start, worker 0 brings the seeds, and once every worker beats in the paused crawl
one resume starts the bench's clock; the bench stops every worker (SIGINT) ``--minutes`` later.
Each quarter of that window says how many workers ran through it (each worker used to stop at
its own ``CLOSESPIDER_TIMEOUT``: worker 0, started first, left the last quarter to the other).
``--project``: the checkout the workers run (a copy of an older commit,
to measure before a change: ``git archive COMMIT | tar -x -C DIR``; link its ``.venv``).
The robots.txt book is scaled with the web (``TUNING``'s ``robots_book_size`` = hosts / 10, as
10,000 is to the issue's 100,000-host soak), so its bound is crossed at this scale too.

Nothing leaves loopback. Needs ``redis-server`` on the PATH.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import heapq
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from tests.redis_support import start_redis  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
LINKS, ACROSS, AT_RANDOM = 11, 3, 1
SLOW_SECONDS, HANG_SECONDS = 2.0, 30.0
START_WAIT = 180.0  # seconds the workers have to open and beat in the paused crawl
NORMAL, SLOW, HALF_503, HANGING = "normal", "slow", "half_503", "hanging"
ROBOTS_ALLOW, ROBOTS_DISALLOW, ROBOTS_404, ROBOTS_500 = "allow", "disallow", "404", "500"
# Page texts: words drawn per page, so pages are not near-duplicates of each other (the
# near-duplicate filter demotes a duplicate's links, which then reach max_depth sooner).
VOCABULARY = [f"{a}{b}{c}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "si", "tu")
              for b in ("ban", "cel", "dor", "fim", "gur", "hal", "jok", "lem", "mur", "nop")
              for c in ("a", "e", "i", "o", "u", "ar", "en", "is", "on", "ul")]


@dataclass
class Web:
    """Host ``h`` is ``names[h]`` with ``sizes[h]`` pages ``/`` and ``/p/1.html`` ...; its kind
    and its robots.txt."""

    seed: int
    names: list[str]
    sizes: list[int]
    kinds: list[str]
    robots: list[str]
    index: dict[str, int] = field(default_factory=dict)
    by_rank: list[int] = field(default_factory=list)  # hosts, most popular first
    odds: list[float] = field(default_factory=list)  # cumulative 1/rank, for the cross links

    @classmethod
    def build(cls, hosts: int, top: int, seed: int, min_pages: int = 3) -> Web:
        rnd = random.Random(seed)
        ranks = list(range(1, hosts + 1))
        rnd.shuffle(ranks)
        sizes = [max(min_pages, top // r) for r in ranks]
        kinds, robots = [], []
        for _ in range(hosts):
            x = rnd.random()
            kinds.append(SLOW if x < 0.05 else HALF_503 if x < 0.07 else
                         HANGING if x < 0.08 else NORMAL)
            y = rnd.random()
            robots.append(ROBOTS_DISALLOW if y < 0.10 else ROBOTS_404 if y < 0.13 else
                          ROBOTS_500 if y < 0.15 else ROBOTS_ALLOW)
        names = [f"127.{30 + h // 62500}.{1 + (h // 250) % 250}.{1 + h % 250}"
                 for h in range(hosts)]
        web = cls(seed, names, sizes, kinds, robots)
        web.index = {n: h for h, n in enumerate(names)}
        web.by_rank = sorted(range(hosts), key=lambda h: ranks[h])
        total = 0.0
        for r in range(1, hosts + 1):
            total += 1.0 / r
            web.odds.append(total)
        return web

    def text(self, h: int, page: int) -> str:
        rnd = random.Random(self.seed * 999_983 + h * 10_009 + page)
        return " ".join(rnd.choices(VOCABULARY, k=200))

    def links(self, h: int, page: int, port: int) -> list[str]:
        rnd = random.Random(self.seed * 1_000_003 + h * 10_007 + page)
        size = self.sizes[h]
        fanout = LINKS - ACROSS - 1  # and a link home
        own = ["/", *(f"/p/{c}.html" for c in range(fanout * page + 1, fanout * (page + 1) + 1)
                      if c < size)]
        n = len(self.names)
        across = [rnd.randrange(n) for _ in range(AT_RANDOM)]
        across += [self._popular(rnd) for _ in range(ACROSS - AT_RANDOM)]
        return own + [f"http://{self.names[t]}:{port}/" for t in across]

    def _popular(self, rnd: random.Random) -> int:
        """A host picked with odds 1/rank."""
        return self.by_rank[bisect.bisect_left(self.odds, rnd.random() * self.odds[-1])]

    def disallowed(self, h: int, path: str) -> bool:
        return self.robots[h] == ROBOTS_DISALLOW and path.startswith("/p/1")


@dataclass
class HostLog:
    in_flight: int = 0
    max_in_flight: int = 0
    last_end: float | None = None
    short_gaps: int = 0
    min_gap: float | None = None
    robots: int = 0
    requests: int = 0
    ok_paths: set[str] = field(default_factory=set)
    duplicates: int = 0
    disallowed: int = 0
    after_robots_500: int = 0


class BroadWebServer:
    """Serves a :class:`Web` from one thread; records what politeness is judged on."""

    def __init__(self, web: Web, delay: float) -> None:
        self.web = web
        self.delay = delay
        self.port = 0
        self.sel = selectors.DefaultSelector()
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.hosts: dict[int, HostLog] = {}
        self.pages = 0  # page answers (robots.txt apart), any status
        self.pages_ok = 0
        self._timers: list[tuple[float, int, socket.socket, bytes, int]] = []
        self._seq = 0
        self.thread = threading.Thread(target=self._serve, name="broadweb", daemon=True)

    def start(self) -> None:
        port = 0
        for name in self.web.names:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((name, port))
            port = sock.getsockname()[1]
            sock.listen(64)
            sock.setblocking(False)
            self.sel.register(sock, selectors.EVENT_READ, (self.web.index[name], None))
        self.port = port
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return self.pages, self.pages_ok, len(self.hosts)

    def _serve(self) -> None:
        sel = self.sel
        while not self.stop_event.is_set():
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                _, _, conn, data, h = heapq.heappop(self._timers)
                self._send(conn, data, h)
            wait = min(0.2, max(0.0, self._timers[0][0] - now)) if self._timers else 0.2
            for key, _ in sel.select(wait):
                h, buf = key.data
                sock = key.fileobj
                if buf is None:
                    with contextlib.suppress(OSError):
                        conn, _ = sock.accept()  # type: ignore[union-attr]
                        conn.setblocking(False)
                        sel.register(conn, selectors.EVENT_READ, (h, bytearray()))
                    continue
                try:
                    chunk = sock.recv(65536)  # type: ignore[union-attr]
                except OSError:
                    chunk = b""
                if chunk:
                    buf += chunk
                    if b"\r\n\r\n" not in buf:
                        continue
                sel.unregister(sock)
                if chunk:
                    self._request(sock, h, bytes(buf))  # type: ignore[arg-type]
                else:
                    self._closed(sock, h)  # type: ignore[arg-type]

    def _closed(self, conn: socket.socket, h: int) -> None:
        """The client hung up before an answer (a hanging host's timeout)."""
        conn.close()
        self._ended(h)

    def _request(self, conn: socket.socket, h: int, request: bytes) -> None:
        line = request.split(b"\r\n", 1)[0].decode("latin-1").split()
        path = line[1] if len(line) >= 2 else "/"
        web, now = self.web, time.monotonic()
        with self.lock:
            log = self.hosts.setdefault(h, HostLog())
            log.requests += 1
            log.in_flight += 1
            log.max_in_flight = max(log.max_in_flight, log.in_flight)
            if log.last_end is not None and log.in_flight == 1:
                gap = now - log.last_end
                log.min_gap = gap if log.min_gap is None else min(log.min_gap, gap)
                if gap < self.delay - 0.01:
                    log.short_gaps += 1
            if path == "/robots.txt":
                log.robots += 1
            else:
                if web.disallowed(h, path):
                    log.disallowed += 1
                if web.robots[h] == ROBOTS_500:
                    log.after_robots_500 += 1
        kind = web.kinds[h]
        if path == "/robots.txt":
            status, body = self._robots(h)
        elif kind == HANGING:
            self._later(now + HANG_SECONDS, conn, b"", h)  # never answers; closed after
            return
        else:
            status, body = self._page(h, path)
            with self.lock:
                self.pages += 1
                if status == 200:
                    self.pages_ok += 1
                    if path in log.ok_paths:
                        log.duplicates += 1
                    log.ok_paths.add(path)
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: text/"
                f"{'plain' if path == '/robots.txt' else 'html'}; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        if kind == SLOW and path != "/robots.txt":
            self._later(now + SLOW_SECONDS, conn, head + body, h)
        else:
            self._send(conn, head + body, h)

    def _later(self, when: float, conn: socket.socket, data: bytes, h: int) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, conn, data, h))

    def _send(self, conn: socket.socket, data: bytes, h: int) -> None:
        if data:
            conn.setblocking(True)
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.sendall(data)
        with contextlib.suppress(OSError):
            conn.close()
        self._ended(h)

    def _ended(self, h: int) -> None:
        with self.lock:
            log = self.hosts[h]
            if log.in_flight > 0:
                log.in_flight -= 1
                log.last_end = time.monotonic()

    def _robots(self, h: int) -> tuple[int, bytes]:
        kind = self.web.robots[h]
        if kind == ROBOTS_404:
            return 404, b"not found"
        if kind == ROBOTS_500:
            return 500, b"error"
        if kind == ROBOTS_DISALLOW:
            return 200, b"User-agent: *\nDisallow: /p/1\n"
        return 200, b"User-agent: *\nAllow: /\n"

    def _page(self, h: int, path: str) -> tuple[int, bytes]:
        web = self.web
        n = 0 if path == "/" else _page_number(path)
        if n is None or n >= web.sizes[h]:
            return 404, b"<html><body>not found</body></html>"
        if web.kinds[h] == HALF_503 and n % 2:
            return 503, b"<html><body>busy</body></html>"
        anchors = "".join(f'<a href="{u}">link {i}</a> ' for i, u in
                          enumerate(web.links(h, n, self.port)))
        text = web.text(h, n)
        return 200, (f"<html><head><title>{web.names[h]} page {n}</title></head><body>"
                     f"<p>page {n} of host {h}: {text}</p>{anchors}</body></html>").encode()


def _page_number(path: str) -> int | None:
    if not (path.startswith("/p/") and path.endswith(".html")):
        return None
    digits = path[3:-5]
    return int(digits) if digits.isdigit() else None


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS bytes) of a running process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
        return cpu, float(rss)
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def start_worker(project: Path, run: Path, i: int, seeds: Path | None,
                 settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    wdir = run / f"w{i}"
    wdir.mkdir(parents=True)
    cmd = [str(project / ".venv" / "bin" / "python"), "-m", "scrapy", "crawl", "openweb"]
    if seeds is not None:
        cmd += ["-a", f"seeds={seeds}"]
    every = {"STATS_FILE": wdir / "stats.json", "LOG_FILE": wdir / "crawl.log",
             "INDEX_PATH": wdir / "index.sqlite", "RECORD_WORKER_ID": f"w{i}", **settings}
    for k, v in every.items():
        cmd += ["-s", f"{k}={v}"]
    return subprocess.Popen(cmd, cwd=project, env=dict(os.environ, PYTHONPATH=str(project)),
                            stdout=subprocess.DEVNULL, stderr=open(wdir / "stderr", "wb"))


def frontier(project: Path, settings: dict[str, Any], *args: str) -> str:
    """``scrapy frontier openweb ARGS`` of ``project`` with the crawl's settings: its output."""
    cmd = [str(project / ".venv" / "bin" / "python"), "-m", "scrapy", "frontier", "openweb", *args]
    for k, v in settings.items():
        cmd += ["-s", f"{k}={v}"]
    done = subprocess.run(cmd, cwd=project, env=dict(os.environ, PYTHONPATH=str(project)),
                          capture_output=True, check=True, timeout=START_WAIT)
    return done.stdout.decode()


def wait_ready(project: Path, settings: dict[str, Any], procs: list[subprocess.Popen[bytes]],
               seeds: int) -> None:
    """Until every worker beats in the paused crawl and the seeds are in it: then they all
    start fetching at one resume (a worker that opened later would lose the first seconds)."""
    end = time.monotonic() + START_WAIT
    while time.monotonic() < end:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a worker ended before the crawl started: see its crawl.log")
        try:
            status = json.loads(frontier(project, settings, "status", "--json"))
        except subprocess.CalledProcessError:  # exit status 2: no worker has beaten yet
            status = {}
        paused = [w for w in status.get("workers", []) if w.get("state") == "paused"]
        if len(paused) >= len(procs) and status.get("seen", 0) >= seeds:
            return
        time.sleep(1.0)
    raise SystemExit(f"the workers were not ready within {START_WAIT:.0f} s")


def stop(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGINT (Scrapy's clean stop: stats written), then SIGKILL after ``grace`` seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run(args: argparse.Namespace) -> dict[str, Any]:
    web = Web.build(args.hosts, args.top, args.seed, args.min_pages)
    server = BroadWebServer(web, args.delay)
    server.start()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.workdir is not None:  # kept: the workers' logs and stats
            root = args.workdir
            root.mkdir(parents=True)
        (root / "redis").mkdir()
        redis_server = start_redis(root / "redis")
        normal = [h for h in web.by_rank
                  if web.kinds[h] == NORMAL and web.robots[h] == ROBOTS_ALLOW][: args.seeds]
        seeds = root / "seeds.txt"
        seeds.write_text("".join(f"http://{web.names[h]}:{server.port}/\n" for h in normal))
        crawl = {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
            "FRONTIER_REDIS_KEY": "broad",
        }
        settings = {
            **crawl,
            "ALLOW_PRIVATE_ADDRESSES": True,
            "CONCURRENT_REQUESTS": args.concurrency,
            "FRONTIER_MIN_DELAY": args.delay,
            # a backstop only (the bench dies): the bench stops the workers at its deadline
            "CLOSESPIDER_TIMEOUT": seconds + START_WAIT + 120,
            "TUNING": json.dumps({"robots_book_size": max(100, args.hosts // 10)}),
            "LOG_LEVEL": "INFO",
        }
        # The crawl is paused before any worker starts: worker 0 brings the seeds, the others
        # join, and none fetches before the one resume that starts the bench's clock.
        frontier(args.project, crawl, "pause")
        launched = time.monotonic()
        procs = [start_worker(args.project, root, i, seeds if i == 0 else None, settings)
                 for i in range(args.workers)]
        try:
            wait_ready(args.project, crawl, procs, len(normal))
            ready = time.monotonic() - launched
            frontier(args.project, crawl, "resume")
            samples = watch(server, procs, seconds, args.sample)
        finally:
            stop(procs, 120)
        redis_server.stop()
        stats = []
        for i in range(len(procs)):
            path = root / f"w{i}" / "stats.json"
            stats.append(json.loads(path.read_text()) if path.exists() else {})
    server.stop()
    result = report(web, server, samples, stats, seconds)
    result["workers_ready_after_s"] = round(ready, 1)
    return result


def watch(server: BroadWebServer, procs: list[subprocess.Popen[bytes]], seconds: float,
          every: float) -> list[dict[str, float]]:
    """Samples from the resume (t 0) to the bench's deadline (t ``seconds``, sampled at that
    moment), every ``every`` seconds: the server's counts, the workers' CPU and largest RSS,
    and how many workers are running."""
    samples: list[dict[str, float]] = []
    start = time.monotonic()
    cpu = [0.0] * len(procs)  # the last reading of each (a worker that ended keeps it)
    while True:
        now = time.monotonic() - start
        pages, ok, hosts = server.snapshot()
        rss = []
        for i, p in enumerate(procs):
            c, r = proc_cpu_rss(p.pid)
            cpu[i] = max(cpu[i], c)
            rss.append(r)
        running = sum(p.poll() is None for p in procs)
        samples.append({"t": now, "pages": pages, "ok": ok, "hosts": hosts,
                        "cpu": sum(cpu), "rss": max(rss), "workers": running})
        if now >= seconds or not running:
            return samples
        time.sleep(max(0.0, min(every, seconds - (time.monotonic() - start))))


def report(web: Web, server: BroadWebServer, samples: list[dict[str, float]],
           stats: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Quarters of the bench's window (the resume to its deadline, ``seconds``), the same for
    every worker; each quarter from the sample nearest its start to the one nearest its end, so
    they tile the window; ``workers``: how many ran through all of it (a worker that ends
    inside a quarter, or did not start, shows as a lower count, not as a slower crawl)."""
    quarters = []
    for q in range(4):
        if not samples:
            break
        lo, hi = q * seconds / 4, (q + 1) * seconds / 4
        a = min(samples, key=lambda s: abs(s["t"] - lo))
        b = min(samples, key=lambda s: abs(s["t"] - hi))
        if b["t"] <= a["t"]:
            continue
        pages = b["pages"] - a["pages"]
        quarters.append({
            "quarter": q + 1, "pages_per_s": pages / (b["t"] - a["t"]),
            "cpu_ms_per_page": (b["cpu"] - a["cpu"]) / max(1, pages) * 1000,
            "hosts_met": b["hosts"], "rss_mb": b["rss"] / 2**20,
            "workers": int(min(s["workers"] for s in samples if a["t"] <= s["t"] <= b["t"])),
        })
    logs = list(server.hosts.values())
    by_kind: dict[str, list[int]] = {}
    given_up = {k: v for s in stats for k, v in s.items()
                if k.startswith(("frontier/hosts_given_up/", "retry/gave_up/"))}
    for h, log in server.hosts.items():
        by_kind.setdefault(web.kinds[h], []).append(log.requests)
    politeness = {
        "max_in_flight_per_host": max((x.max_in_flight for x in logs), default=0),
        "short_gaps": sum(x.short_gaps for x in logs),
        "min_gap": min((x.min_gap for x in logs if x.min_gap is not None), default=None),
        # robots.txt answering 500 is asked again (RFC 9309 2.3.1.4): apart
        "robots_more_than_once": sum(1 for h, x in server.hosts.items()
                                     if x.robots > 1 and web.robots[h] != ROBOTS_500),
        "disallowed_requests": sum(x.disallowed for x in logs),
        "requests_after_robots_500": sum(x.after_robots_500 for x in logs),
        "duplicates": sum(x.duplicates for x in logs),
    }
    first, last = (quarters[0], quarters[-1]) if quarters else ({}, {})
    rss_growth = (samples[-1]["rss"] - samples[0]["rss"]) if samples else 0.0
    hosts_met = samples[-1]["hosts"] if samples else 0
    return {
        "quarters": quarters,
        "pages_per_s_last_over_first": (last.get("pages_per_s", 0) /
                                        max(1e-9, first.get("pages_per_s", 0))),
        "cpu_per_page_last_over_first": (last.get("cpu_ms_per_page", 0) /
                                         max(1e-9, first.get("cpu_ms_per_page", 0))),
        "rss_mb_per_10k_hosts_met": rss_growth / 2**20 / max(1, hosts_met) * 10_000,
        "hosts_met": hosts_met,
        "pages": samples[-1]["pages"] if samples else 0,
        "given_up": given_up,
        "requests_by_host_kind": {k: (len(v), sum(v)) for k, v in by_kind.items()},
        "politeness": politeness,
        "error_lines": sum(int(s.get("log_count/ERROR", 0)) for s in stats),
        "rss_samples_mb": [round(s["rss"] / 2**20, 1) for s in samples[:: max(1, len(samples)
                                                                               // 20)]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=2_000, help="pages of the biggest host")
    parser.add_argument("--min-pages", type=int, default=30, help="pages of the smallest")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=10, help="the most popular hosts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--project", type=Path, default=PROJECT)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path, help="keep the workers' files there (new)")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
