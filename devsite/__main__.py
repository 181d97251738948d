"""Run the test site standalone: ``python -m devsite --hosts 3 --pages 20``.

Demos start this as a subprocess and wait for ``--seeds-file`` to appear, so the
file is written atomically and only once every host is listening.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import threading
from pathlib import Path

from devsite.graph import HostSpec, build_site
from devsite.server import SiteServer


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devsite",
        description="Serve a deterministic multi-host test site on loopback addresses.",
    )
    parser.add_argument("--hosts", type=int, default=3, help="number of hosts (default 3)")
    parser.add_argument("--pages", type=int, default=20, help="pages per host (default 20)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--first-address", default="127.0.0.2", help="address of host 1")
    parser.add_argument("--port", type=int, default=0, help="common port (default: any free)")
    parser.add_argument("--links-per-page", type=int, default=5)
    parser.add_argument("--cross-host-links", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="graph seed")
    parser.add_argument("--no-extras", action="store_true", help="omit tricky links on /")
    parser.add_argument("--seeds-file", type=Path, help="write seed URLs here, one per line")
    args = parser.parse_args(argv)
    if args.hosts < 1:
        parser.error("--hosts must be at least 1")
    first = ipaddress.IPv4Address(args.first_address)
    last = first + args.hosts - 1
    if not (first.is_loopback and last.is_loopback):
        parser.error("all host addresses must lie in 127.0.0.0/8")
    args.addresses = [str(first + i) for i in range(args.hosts)]
    return args


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM."""
    args = _parse_args(argv)
    specs = [HostSpec(address, pages=args.pages, delay=args.delay) for address in args.addresses]
    graph = build_site(
        specs,
        links_per_page=args.links_per_page,
        cross_host_links=args.cross_host_links,
        seed=args.seed,
        extras=not args.no_extras,
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with SiteServer(graph, port=args.port) as server:
        seeds = server.seeds()
        print(f"devsite: {len(specs)} hosts on port {server.port}", flush=True)
        for seed in seeds:
            print(seed, flush=True)
        if args.seeds_file is not None:
            tmp = args.seeds_file.with_name(args.seeds_file.name + f".{os.getpid()}.tmp")
            tmp.write_text("".join(f"{seed}\n" for seed in seeds), encoding="utf-8")
            os.replace(tmp, args.seeds_file)
        while not stop.wait(0.5):
            pass
    print("devsite: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
