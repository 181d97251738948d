"""Servers, not names: politeness per IP address and DNS, on real crawls of many host names
served by a few loopback addresses and resolved by a real DNS server (``devsite.dnsserver``).

    .venv/bin/python bench/addresses.py [--names 50] [--pages 4] [--dns-names 1000]
        [--only one|many|dns] [--stalls [--seed 1]] [--ip-concurrency 1]

1. 50 names on ONE address, host delay 0.5 s, FRONTIER_IP_CONCURRENCY 1 (IP delay = the host
   delay): overlapping requests and gaps below the IP delay at that address, with 1 worker and
   with 2 Redis workers; and the same crawl with the address gate off (today's behaviour:
   politeness per name only) for the requests/s and the most requests at once it sends there;
   and whether the names take turns (home pages before any second page, names asked in the
   first 60 s, seconds until every name was asked), and the budget's takes per request.
   With ``--stalls`` the gate-on crawls run under load: each worker is stopped (SIGSTOP) for
   a moment at random short intervals (seeded by ``--seed``; workers independently, so one
   stalls while the other goes on), and the same figures say whether the turns still hold
   (home pages first, one request at once, no gap below the delay). ``--ip-concurrency 2``:
   two at once at the address, a gap being then the time between two starts (delay / 2).
2. The same 50 names over 50 addresses: pages/s with the gate on and off (the gate must not
   slow a crawl whose names are on different servers).
3. DNS: a crawl of ``--dns-names`` names (one page each, one address each) with the DNS server
   answering after 200 ms, against the same crawl with instant answers; lookups per name.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devsite.named import NamedSites, Visit
from tests.crawling import finish_crawl, loopback_settings, start_crawl
from tests.dns_support import dns_server
from tests.redis_support import free_port

ZONE_SUFFIX = ".bench.test"


def at_once(visits: list[Visit]) -> int:
    events = sorted([(v.start, 1) for v in visits] + [(v.end, -1) for v in visits])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def turns(visits: list[Visit]) -> dict[str, Any]:
    """Whether names of one server take turns: how many names had their home page fetched
    before the first second page of any name, how many were asked anything in the first 60 s,
    and how long until every name had been asked something."""
    ordered = sorted(visits, key=lambda v: v.start)
    t0 = ordered[0].start
    second = next((i for i, v in enumerate(ordered) if v.path.startswith("/p/")), len(ordered))
    first_ask: dict[str, float] = {}
    for v in ordered:
        first_ask.setdefault(v.name, v.start - t0)
    return {
        "names": len(first_ask),
        "home_pages_before_any_second_page": len(
            {v.name for v in ordered[:second] if v.path == "/"}
        ),
        "names_asked_in_first_60s": sum(1 for t in first_ask.values() if t <= 60),
        "seconds_until_every_name_asked": round(max(first_ask.values()), 1),
    }


def address_figures(visits: list[Visit], delay: float, concurrency: int = 1) -> dict[str, Any]:
    """``concurrency`` above 1: requests may overlap at an address, and a gap is the time
    between two starts there, at least ``delay`` split over ``concurrency``."""
    by_address: dict[str, list[Visit]] = {}
    for v in visits:
        by_address.setdefault(v.address, []).append(v)
    overlaps = below = gaps = 0
    worst = 0
    shortest = float("inf")
    for vs in by_address.values():
        vs.sort(key=lambda v: v.start)
        worst = max(worst, at_once(vs))
        for a, b in pairwise(vs):
            gaps += 1
            overlaps += b.start < a.end
            gap = b.start - a.start if concurrency > 1 else b.start - a.end
            shortest = min(shortest, gap)
            below += gap < delay / concurrency - 0.005
    span = max(v.end for v in visits) - min(v.start for v in visits)
    per_address_rate = max(len(vs) for vs in by_address.values()) / span
    return turns(visits) | {
        "requests": len(visits),
        "seconds": round(span, 2),
        "requests_per_s": round(len(visits) / span, 2),
        "busiest_address_requests_per_s": round(per_address_rate, 2),
        "most_at_once_at_an_address": worst,
        "overlapping": overlaps,
        "gaps_below_ip_delay": below,
        "shortest_gap": round(shortest, 3) if gaps else None,
        "gaps": gaps,
    }


STALL = (0.05, 0.6)  # seconds a worker is stopped, drawn uniformly
BETWEEN = (0.2, 2.0)  # seconds it runs between two stalls, drawn uniformly


class Stalls:
    """Stop and go on (SIGSTOP, SIGCONT) one worker at random short intervals until
    :meth:`close`: a stall of the whole process (CPU starved, a long GC, a swapped-out page) as
    a loaded machine makes them, to re-check the turns under load. Seeded: the same draws each
    run (the crawl's own timing still varies). ``stalled`` counts them, ``seconds`` their sum."""

    def __init__(self, pid: int, seed: int) -> None:
        self.pid, self.rng = pid, random.Random(seed)
        self.stalled, self.seconds = 0, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.rng.uniform(*BETWEEN)):
            pause = self.rng.uniform(*STALL)
            try:
                os.kill(self.pid, signal.SIGSTOP)
            except ProcessLookupError:
                return
            try:
                self._done.wait(pause)
            finally:
                os.kill(self.pid, signal.SIGCONT)  # never left stopped, even at the end
            self.stalled += 1
            self.seconds += pause

    def close(self) -> dict[str, Any]:
        self._done.set()
        self._thread.join()
        return {"stalls": self.stalled, "stalled_seconds": round(self.seconds, 1)}


def crawl(
    root: Path,
    sites: NamedSites,
    dns_address: str,
    *,
    workers: int = 1,
    redis_port: int | None = None,
    stall_seed: int | None = None,
    stalled: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> list[dict[str, Any]]:
    """The crawl's stats per worker; ``stall_seed``: each worker stalls (:class:`Stalls`, seeded
    by it and the worker's number), what each suffered appended to ``stalled``."""
    procs = []
    key = f"bench{time.monotonic_ns()}"
    for i in range(workers):
        d = root / f"w{i}"
        d.mkdir(parents=True)
        s = loopback_settings(DNS_SERVERS=dns_address, LOG_LEVEL="INFO", **settings)
        if redis_port is not None:
            s |= {
                "FRONTIER_BACKEND": "redis",
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "FRONTIER_REDIS_KEY": key,
                "INDEX_PATH": d / "index.sqlite",
            }
        seeds = [sites.url(n) for n in sites.names] if i == 0 else None
        procs.append((start_crawl(d, seeds=seeds, settings=s), d))
    stalls = [] if stall_seed is None else [Stalls(p.pid, stall_seed + i) for i, (p, _) in
                                            enumerate(procs)]
    try:
        results = [finish_crawl(p, d, timeout=1800) for p, d in procs]
    finally:
        for stall in stalls:
            suffered = stall.close()
            if stalled is not None:
                stalled.append(suffered)
    for r in results:
        if r.returncode not in (0,):
            print(r.log[-3000:], file=sys.stderr)
    return [r.stats for r in results]


def bench_one_address(args: argparse.Namespace, root: Path, redis_port: int) -> dict[str, Any]:
    names = [f"n{i}{ZONE_SUFFIX}" for i in range(args.names)]
    zone = {"suffixes": {ZONE_SUFFIX: {"a": "127.0.0.1", "ttl": 300}}}
    out: dict[str, Any] = {}
    # depth order: the web site's own policy is OPIC, where a home page has no claim to go first
    polite = {"FRONTIER_MIN_DELAY": args.delay, "FRONTIER_IP_CONCURRENCY": args.ip_concurrency,
              "FRONTIER_PRIORITY_POLICY": "depth"}
    cases = [
        ("gate_off_1_worker", 1, None, {**polite, "FRONTIER_IP_CONCURRENCY": 0}),
        ("gate_on_1_worker", 1, None, polite),
        ("gate_on_2_redis_workers", 2, redis_port, polite),
    ]
    if args.stalls:  # the gate off has no turns to re-check
        cases = [(f"{name}_stalled", *rest) for name, *rest in cases[1:]]
    with dns_server(root / "dns1", zone) as dns:
        for name, workers, port, settings in cases:
            with NamedSites(names, pages=args.pages, latency=args.response) as sites:
                stalled: list[dict[str, Any]] = []
                stats = crawl(root / name, sites, dns.address, workers=workers,
                              redis_port=port, stall_seed=args.seed if args.stalls else None,
                              stalled=stalled, **settings)
                conc = settings["FRONTIER_IP_CONCURRENCY"] or 1
                out[name] = address_figures(sites.visits, args.delay, conc)
                if args.stalls:
                    out[name]["stalls_per_worker"] = stalled
                refused = sum(s.get("frontier/address/refused", 0) for s in stats)
                out[name]["refused"] = refused
                # the budget's polling cost: every take is granted (a request) or refused
                out[name]["takes_per_request"] = round(
                    (refused + len(sites.visits)) / len(sites.visits), 2
                )
                # each worker's share: a worker that ended at once would make it a 1-worker run
                out[name]["responses_per_worker"] = [
                    s.get("response_received_count", 0) for s in stats
                ]
            print(name, json.dumps(out[name]), flush=True)
    return out


def bench_many_addresses(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    names = [f"m{i}{ZONE_SUFFIX}" for i in range(args.names)]
    addresses = [f"127.0.3.{i + 1}" for i in range(args.names)]
    zone = {"names": {n: {"a": a, "ttl": 300} for n, a in zip(names, addresses, strict=True)}}
    out: dict[str, Any] = {}
    with dns_server(root / "dns2", zone) as dns:
        for name, conc in (("gate_off", 0), ("gate_on", 1)):
            runs = []
            for rep in range(args.repeat):
                with NamedSites(names, addresses, pages=args.pages, latency=args.response) as s:
                    crawl(root / f"{name}{rep}", s, dns.address,
                          FRONTIER_MIN_DELAY=args.delay, FRONTIER_IP_CONCURRENCY=conc)
                    runs.append(address_figures(s.visits, args.delay)["requests_per_s"])
            out[name] = {"requests_per_s": runs, "median": statistics.median(runs)}
            print(name, json.dumps(out[name]), flush=True)
    out["ratio_on_vs_off"] = round(out["gate_on"]["median"] / out["gate_off"]["median"], 3)
    return out


def bench_dns(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    names = [f"d{i}{ZONE_SUFFIX}" for i in range(args.dns_names)]
    addresses = [f"127.4.{i // 250}.{i % 250 + 1}" for i in range(len(names))]
    zone_names = {n: {"a": a, "ttl": 300} for n, a in zip(names, addresses, strict=True)}
    out: dict[str, Any] = {}
    for label, latency in (("instant_dns", 0.0), ("dns_200ms", 0.2)):
        zone = {"names": zone_names, "latency": latency}
        with (
            dns_server(root / f"dns-{label}", zone) as dns,
            NamedSites(names, addresses, pages=0, fan_out=0, latency=args.response) as s,
        ):
            started = time.monotonic()
            (stats,) = crawl(root / label, s, dns.address, FRONTIER_MIN_DELAY=args.delay,
                             CONCURRENT_REQUESTS=64)
            elapsed = time.monotonic() - started
            queries = dns.queries()
            out[label] = {
                "requests": len(s.visits),
                "fetch_seconds": address_figures(s.visits, 0)["seconds"],
                "requests_per_s": address_figures(s.visits, 0)["requests_per_s"],
                "wall_seconds": round(elapsed, 1),
                "dns_lookups": stats.get("dns/lookups"),
                "names_asked_more_than_once": sum(1 for c in queries.values() if c > 1),
            }
        print(label, json.dumps(out[label]), flush=True)
    out["rate_ratio_200ms_vs_instant"] = round(
        out["dns_200ms"]["requests_per_s"] / out["instant_dns"]["requests_per_s"], 3
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=50)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--response", type=float, default=0.01)
    parser.add_argument("--dns-names", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=["one", "many", "dns"], default=None)
    parser.add_argument("--stalls", action="store_true",
                        help="one address: stop each worker at random short intervals")
    parser.add_argument("--seed", type=int, default=1, help="the stalls' seed")
    parser.add_argument("--ip-concurrency", type=int, default=1,
                        help="one address: FRONTIER_IP_CONCURRENCY of the gate-on crawls")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-addresses-"))
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        report: dict[str, Any] = {}
        if args.only in (None, "one"):
            report["one_address"] = bench_one_address(args, root, port)
        if args.only in (None, "many"):
            report["many_addresses"] = bench_many_addresses(args, root)
        if args.only in (None, "dns"):
            report["dns"] = bench_dns(args, root)
        print(json.dumps(report, indent=2))
    finally:
        redis.terminate()


if __name__ == "__main__":
    main()
