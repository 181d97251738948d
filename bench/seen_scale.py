"""The Redis frontier's seen-set at scale: fill one shard's seen-set to 30 million URLs of real
documentation link shapes and report, at checkpoints, its bytes per seen URL, its measured
false-positive rate and the seen-add rate.

    .venv/bin/python bench/seen_scale.py [--urls 30000000] [--hosts 10000] [--port N]
    .venv/bin/python bench/seen_scale.py --quick      # 3 million URLs
    .venv/bin/python bench/seen_scale.py --bulk       # past the limit, most bits bulk-written
    .venv/bin/python bench/seen_scale.py --micro      # the seen-test's primitives in a script

Starts its own ``redis-server`` on a free loopback port (or uses ``--port``: a fresh key,
deleted at the end). The URLs: every link of the HTML files under /usr/share/doc, resolved
against its page (the path shapes of real documentation sites), on ``--hosts`` host names, with
a version prefix that varies once hosts x shapes are used up, so every URL is distinct. The
held-out URLs share the shapes and hosts but carry a prefix no added URL has: none was added,
so each one the seen-test calls seen is a false positive (measured with the read-only test on
20,000 of them per checkpoint). Settings are the defaults (``FRONTIER_SEEN_EXACT_LIMIT``,
``FRONTIER_SEEN_ERROR``) unless given.

Reported per checkpoint: the seen-set's own keys (``MEMORY USAGE`` of each bucket, layer and
counter) per seen URL, Redis's ``used_memory`` growth per seen URL, the Bloom layers begun, the
measured and the estimated false-positive rate, ``mark_seen`` rate (1,000 keys per script
call, 20 calls pipelined, one client) over the last stretch and the Redis time per URL of
its scripts (``INFO commandstats``; and redis-server's CPU time per URL, which a loaded
machine does not inflate), the ``add`` script's rate (pages of 50 links, which also queues
them) on 20,000 fresh links, and the crawl's cycle: ``--cycles`` times lease a URL, finish it
and add its page's 50 fresh links (cycles/s, Redis CPU per cycle), then where the cycles' Redis
time went, by command (``INFO commandstats``). The last checkpoint below the exact limit stops
short of it by the links its probes and cycles add, so that they still run on the exact set.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.frontier import RedisFrontier
from crawler.backends.redis.seen import SeenConfig, seen_key, seen_memory, seen_state
from crawler.config import defaults
from crawler.frontier import Entry, PolitenessPolicy
from tests.redis_support import start_redis

HREF = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'#][^"'\s]*)["']""", re.I)
WORDS = ("docs", "www", "wiki", "help", "manual", "dev", "api", "lists", "blog", "pkg")
TLDS = ("org", "net", "com", "io", "de", "fr")


def doc_shapes(root: str = "/usr/share/doc", limit: int = 60_000) -> list[str]:
    """Distinct paths (with queries) of the links in the HTML files under ``root``, each
    resolved against its page's path: the URL shapes of real documentation sites."""
    shapes: dict[str, None] = {}
    for page in sorted(Path(root).rglob("*.htm*")):
        try:
            html = page.read_bytes()
        except OSError:
            continue
        base = "http://x.test/" + str(page.relative_to(root))
        for raw in HREF.findall(html):
            href = raw.decode("utf-8", "replace")
            if href.startswith(("mailto:", "javascript:")):
                continue
            parts = urlsplit(urljoin(base, href))
            if parts.netloc != "x.test":
                parts = urlsplit(urljoin("http://x.test/", parts.path or "/"))
            path = parts.path + ("?" + parts.query if parts.query else "")
            shapes[path] = None
            if len(shapes) >= limit:
                return list(shapes)
    return list(shapes) or ["/index.html"]


class UrlShapes:
    """URL ``i`` of a crawl: host ``i % hosts``, shape ``i // hosts % shapes``, version prefix
    ``i // (hosts * shapes)``: all distinct; ``held`` gives URLs none of them is."""

    def __init__(self, shapes: list[str], hosts: int) -> None:
        self.shapes = shapes
        self.hosts = [
            f"{WORDS[h % len(WORDS)]}{h // len(WORDS)}.{('proj', 'lib', 'site')[h % 3]}{h % 97}"
            f".{TLDS[h % len(TLDS)]}"
            for h in range(hosts)
        ]

    def url(self, i: int, tag: str = "v") -> str:
        h = len(self.hosts)
        s = len(self.shapes)
        host = self.hosts[i % h]
        version = i // (h * s)
        prefix = f"/{tag}{version}" if version or tag != "v" else ""
        return f"https://{host}{prefix}{self.shapes[i // h % s]}"

    def urls(self, start: int, stop: int, tag: str = "v") -> Iterator[str]:
        return (self.url(i, tag) for i in range(start, stop))

    def held(self, n: int) -> list[str]:
        return [self.url(i * 7919, "held") for i in range(n)]


def mark_seen(frontier: RedisFrontier, urls: list[str]) -> None:
    """``frontier.mark_seen``, its script calls of 1,000 keys pipelined 20 at a time (one
    round trip), so the fill measures Redis, not the loopback's latency."""
    calls = [
        frontier._script_call("mark_seen", *[seen_key(u) for u in urls[i : i + 1000]])
        for i in range(0, len(urls), 1000)
    ]
    frontier.runner.run_many(calls)


def bulk_fill(client: redis.Redis, frontier: RedisFrontier, urls: list[str]) -> None:
    """Past the exact limit, write the bits the add script would write for ``urls`` (the
    script's own arithmetic, vectorized: ``SeenConfig.layer`` and the enhanced double hashing
    of ``seen_lua``), layer by layer in order, and the layers' counts. Only the fill: every
    figure is then read through the scripts, and a sample of the URLs filled this way must
    test seen there (the check that this fill is the script's)."""
    config: SeenConfig = frontier.seen
    keys = frontier.keys
    state = seen_state(client, keys, config)
    assert state.layers, "the bulk fill starts past the exact limit"
    digests = np.frombuffer(b"".join(seen_key(u) for u in urls), dtype=">u4").astype(np.uint64)
    h1, h2 = digests[0::2], digests[1::2]
    layer, taken, start = len(state.layers) - 1, state.layers[-1], 0
    while start < len(urls):
        cap, bits, probes = config.layer(layer)
        room = int(cap) - taken
        if room <= 0:
            layer, taken = layer + 1, 0
            continue
        stop = min(len(urls), start + room)
        name = keys.seen_layer_prefix + str(layer)
        have = client.get(name) or b""
        plane = np.zeros(bits + (-bits) % 8, dtype=np.uint8)
        if have:
            plane[: len(have) * 8] = np.unpackbits(np.frombuffer(have, dtype=np.uint8))
        for lo in range(start, stop, 1_000_000):
            hi = min(stop, lo + 1_000_000)
            a, b = h1[lo:hi], h2[lo:hi]
            for i in range(probes):
                plane[(a + np.uint64(i) * b + np.uint64((i**3 - i) // 6)) % np.uint64(bits)] = 1
        packed = np.packbits(plane)
        # the script's string ends at the last byte it touched: so does this one
        last = int(np.flatnonzero(packed)[-1]) + 1 if packed.any() else 0
        client.set(name, packed[:last].tobytes())
        taken += stop - start
        full = taken >= cap
        client.hset(keys.seen_info, mapping={f"n{layer}": taken, "l": layer + 1 + int(full)})
        if full:
            layer, taken = layer + 1, 0
        start = stop


def redis_cpu(client: redis.Redis) -> float:
    """CPU seconds redis-server has used (user + system): its cost on a loaded machine,
    where the wall clock and ``INFO commandstats`` also count the time it waited for a core."""
    info = client.info("cpu")
    return float(info["used_cpu_user"] + info["used_cpu_sys"])


def checkpoints(total: int, exact_limit: int, probe_links: int) -> list[int]:
    """Seen URLs to stop at; with the defaults, 29.95 and 30.25 million fall either side of
    the moment the fourth Bloom layer begins (2 million exact + 4 + 8 + 16 million in layers):
    the best and the worst point of the filter's cycle (the last stretch longer than the
    links each checkpoint's probes add). The last exact checkpoint stops ``probe_links``
    short of the exact limit, so that its probes and cycles still run on the exact set (at
    2,000,000 itself they ran on the first layer, which the limit begins: that, not the
    queues, was the cycle's growth "while still exact" in the first runs)."""
    marks = [100_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 29_950_000]
    if exact_limit > probe_links:
        marks = [m for m in marks if m < exact_limit] + [exact_limit - probe_links]
        marks += [m for m in (5_000_000, 10_000_000, 20_000_000, 29_950_000) if m > exact_limit]
    return sorted({m for m in marks if m < total} | {total})


CYCLE_COMMANDS = (
    "evalsha",
    "sadd",
    "sismember",
    "getbit",
    "bitfield",
    "hincrby",
    "hgetall",
    "rpush",
    "hset",
)


def print_breakdown(rows: list[tuple[int, dict[str, tuple[float, float]]]]) -> None:
    """Where a cycle's Redis time goes (``INFO commandstats`` over the cycles: ``evalsha`` is
    the three scripts whole, the others the commands they call), per checkpoint."""
    print("\nRedis us per cycle by command (calls per cycle):\n")
    print("| seen URLs | " + " | ".join(CYCLE_COMMANDS) + " |")
    print("|" + " ---: |" * (len(CYCLE_COMMANDS) + 1))
    for count, stats in rows:
        cells = [
            f"{stats[c][0]:,.0f} ({stats[c][1]:.0f})" if c in stats else "-" for c in CYCLE_COMMANDS
        ]
        print(f"| {count:,} | " + " | ".join(cells) + " |")


MICRO_PRELUDE = r"""
local fmt, n, seed = string.format, tonumber(ARGV[1]), 12345
local BITS, MASK = 456000000, {[0] = 128, 64, 32, 16, 8, 4, 2, 1}
local function rnd() seed = (seed * 1103515245 + 12345) % 2147483648; return seed end
"""

# what one URL's seen-test could cost per layer, each as an EVAL loop over a 57 MB string
MICRO = {
    "loop + 9 offsets (Lua only)": "for i=1,n do for j=1,9 do local o=rnd()%BITS end end",
    "SISMEMBER": "redis.call('SADD','S',1,2,3) "
    "for i=1,n do redis.call('SISMEMBER','S',rnd()%9) end",
    "HINCRBY": "for i=1,n do redis.call('HINCRBY','I','n0',1) end",
    "GETBIT x2": "for i=1,n do for j=1,2 do redis.call('GETBIT','L',fmt('%d',rnd()%BITS)) end end",
    "BITFIELD GET of 2": "for i=1,n do redis.call('BITFIELD','L','GET','u1',fmt('%d',rnd()%BITS),"
    "'GET','u1',fmt('%d',rnd()%BITS)) end",
    "GETRANGE 64 B + 9 bits tested (bit lib)": "for i=1,n do local b=rnd()%100000*64 "
    "local s=redis.call('GETRANGE','L',b,b+63) for j=1,9 do local p=rnd()%512 "
    "local x=bit.band(string.byte(s,math.floor(p/8)+1),MASK[p%8]) end end",
    "GETRANGE 512 B + 9 bits tested (bit lib)": "for i=1,n do local b=rnd()%100000*512 "
    "local s=redis.call('GETRANGE','L',b,b+511) for j=1,9 do local p=rnd()%4096 "
    "local x=bit.band(string.byte(s,math.floor(p/8)+1),MASK[p%8]) end end",
    "SETBIT x9": "for i=1,n do for j=1,9 do "
    "redis.call('SETBIT','L',fmt('%d',rnd()%BITS),1) end end",
    "BITFIELD SET of 9": "for i=1,n do local o={} for j=0,8 do o[4*j+1]='SET' o[4*j+2]='u1' "
    "o[4*j+3]=fmt('%d',rnd()%BITS) o[4*j+4]='1' end "
    "redis.call('BITFIELD','L',unpack(o,1,36)) end",
    "GETRANGE + SETRANGE 64 B, 9 bits set in Lua": "for i=1,n do local b=rnd()%100000*64 "
    "local t={string.byte(redis.call('GETRANGE','L',b,b+63),1,64)} for j=1,9 do "
    "local p=rnd()%512 local k=math.floor(p/8)+1 t[k]=bit.bor(t[k],MASK[p%8]) end "
    "redis.call('SETRANGE','L',b,string.char(unpack(t))) end",
    "GETRANGE + SETRANGE 512 B, 9 bits set in Lua": "for i=1,n do local b=rnd()%100000*512 "
    "local t={string.byte(redis.call('GETRANGE','L',b,b+511),1,512)} for j=1,9 do "
    "local p=rnd()%4096 local k=math.floor(p/8)+1 t[k]=bit.bor(t[k],MASK[p%8]) end "
    "redis.call('SETRANGE','L',b,string.char(unpack(t))) end",
}


def micro(client: redis.Redis, loops: int = 20_000) -> None:
    """Redis CPU per iteration of each ``MICRO`` loop (the best of three): the primitives a
    seen-test can be built of, inside a script, on a 57 MB string of random bits."""
    client.setrange("L", 57_000_000, b"\0")
    client.setrange("L", 0, np.random.default_rng(1).bytes(1_000_000))
    print("| inside a script, per iteration | Redis CPU us |\n| --- | ---: |")
    for name, body in MICRO.items():
        best = float("inf")
        for _ in range(3):
            cpu = redis_cpu(client)
            client.eval(MICRO_PRELUDE + body, 0, loops)
            best = min(best, (redis_cpu(client) - cpu) / loops * 1e6)
        print(f"| {name} | {best:.2f} |", flush=True)
    client.delete("L", "S", "I")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=30_250_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--exact-limit", type=int, default=defaults.FRONTIER_SEEN_EXACT_LIMIT)
    parser.add_argument("--error", type=float, default=defaults.FRONTIER_SEEN_ERROR)
    parser.add_argument("--sample", type=int, default=20_000, help="held-out URLs tested")
    parser.add_argument(
        "--cycles",
        type=int,
        default=2_000,
        help="lease + finish + add of 50 fresh links, per checkpoint",
    )
    parser.add_argument("--quick", action="store_true", help="3 million URLs")
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="past the exact limit, write all but the last 100,000 URLs of each stretch with "
        "bulk_fill (the script's bits, vectorized) instead of the script: minutes, not hours",
    )
    parser.add_argument("--port", type=int, default=0, help="an existing Redis (default: own)")
    parser.add_argument(
        "--micro",
        action="store_true",
        help="only the cost of the seen-test's primitives inside a script",
    )
    args = parser.parse_args()
    total = 3_000_000 if args.quick else args.urls

    tmp = tempfile.TemporaryDirectory()
    server = None
    if args.port:
        client = redis.Redis(port=args.port)
    else:
        server = start_redis(Path(tmp.name))
        client = server.client()
    if args.micro:
        try:
            micro(client)
        finally:
            if server is not None:
                server.stop()
            tmp.cleanup()
        return
    config = SeenConfig(exact_limit=args.exact_limit, error=args.error)
    key = "seenbench-" + uuid.uuid4().hex[:8]
    frontier = RedisFrontier(
        client, key, PolitenessPolicy(min_delay=0.0), back_queues=1024, seen=config
    )
    shapes = doc_shapes()
    gen = UrlShapes(shapes, args.hosts)
    held = gen.held(args.sample)
    try:
        print(
            f"redis {client.info('server')['redis_version']}, {len(shapes):,} link shapes from "
            f"/usr/share/doc over {args.hosts:,} hosts, one client on loopback; exact limit "
            f"{config.exact_limit:,} ({2**config.bucket_bits:,} buckets), error bound "
            f"{config.error:g}, first layer {config.first_capacity:,}, growth {config.growth}, "
            f"tightening {config.tightening}"
        )
        print(
            "| seen URLs | seen-set B/URL | used_memory B/URL | layers | fp measured | "
            "fp estimated | mark_seen URLs/s | Redis us/URL | Redis CPU us/URL | add links/s | "
            "cycles/s | Redis CPU us/cycle |"
        )
        print("|" + " ---: |" * 12)
        base = client.info("memory")["used_memory"]
        done = 0
        breakdown: list[tuple[int, dict[str, tuple[float, float]]]] = []
        extra = 0  # links queued by the add-rate probes (fresh URLs, also seen)
        for target in checkpoints(total, config.exact_limit, 20_000 + 50 * args.cycles):
            # the add probes' and the cycles' links are seen URLs too
            mark = max(done + 1_000, target - extra)
            start = time.perf_counter()
            stretch = mark - done
            scripted = stretch
            if (
                args.bulk
                and seen_state(client, frontier.keys, config).exact >= max(0, config.exact_limit)
                and config.exact_limit >= 0
                and stretch > 200_000
            ):
                scripted = 100_000  # the rest written by bulk_fill
                mark_seen(frontier, list(gen.urls(done, done + 1000)))  # a layer begun
                bulk = list(gen.urls(done + 1000, mark - scripted))
                bulk_fill(client, frontier, bulk)
                sample = bulk[:: max(1, len(bulk) // 20_000)]
                assert all(frontier.has_seen(sample)), "bulk fill differs from the script"
                start = time.perf_counter()
            client.config_resetstat()
            cpu_start = redis_cpu(client)
            batch: list[str] = []
            for url in gen.urls(mark - scripted, mark):
                batch.append(url)
                if len(batch) == 20_000:
                    mark_seen(frontier, batch)
                    batch = []
            if batch:
                mark_seen(frontier, batch)
            rate = scripted / (time.perf_counter() - start)
            server_us = client.info("commandstats")["cmdstat_evalsha"]["usec"] / scripted
            cpu_us = (redis_cpu(client) - cpu_start) / scripted * 1e6
            done = mark
            state = seen_state(client, frontier.keys, config)
            seen_bytes = seen_memory(client, frontier.keys)
            used = client.info("memory")["used_memory"] - base
            fp = sum(frontier.has_seen(held)) / len(held)
            # the add script on fresh links (pages of 50): seen-test + queueing
            probe = [
                Entry(url=u, host=urlsplit(u).hostname or "")
                for u in gen.urls(extra, extra + 20_000, tag="add")
            ]
            extra += len(probe)
            t0 = time.perf_counter()
            for i in range(0, len(probe), 50):
                frontier.add_many(probe[i : i + 50])
            add_rate = len(probe) / (time.perf_counter() - t0)
            # the crawl's cycle: lease a URL, complete it, add its page's 50 fresh links
            cycle_links = list(gen.urls(extra, extra + 50 * args.cycles, tag="cycle"))
            extra += len(cycle_links)
            client.config_resetstat()
            cpu0, t0 = redis_cpu(client), time.perf_counter()
            for c in range(args.cycles):
                lease = frontier.next()
                assert lease is not None, "the add probes queued the URLs the cycles lease"
                frontier.finish(lease.token, 0.0)
                frontier.add_many(
                    [
                        Entry(url=u, host=urlsplit(u).hostname or "")
                        for u in cycle_links[50 * c : 50 * c + 50]
                    ]
                )
            cycle_rate = args.cycles / (time.perf_counter() - t0)
            cycle_cpu = (redis_cpu(client) - cpu0) / args.cycles * 1e6
            stats, n = client.info("commandstats"), args.cycles
            breakdown.append(
                (
                    state.count,
                    {
                        name.removeprefix("cmdstat_"): (v["usec"] / n, v["calls"] / n)
                        for name, v in stats.items()
                    },
                )
            )
            count = state.count + 0  # before the probe's links
            print(
                f"| {count:,} | {seen_bytes / count:.2f} | {used / count:.2f} | "
                f"{len(state.layers)} | {fp:.4%} | {state.false_positive_rate():.4%} | "
                f"{rate:,.0f} | {server_us:.1f} | {cpu_us:.1f} | {add_rate:,.0f} | "
                f"{cycle_rate:,.0f} | {cycle_cpu:,.0f} |",
                flush=True,
            )
        print_breakdown(breakdown)
        state = seen_state(client, frontier.keys, config)
        nxt = config.layer(len(state.layers))[1] / 8
        print(
            f"\nlayers: {state.layers}; probable refusals counted: "
            f"{frontier.counts().extra.get('seen_probable', 0):,}; "
            f"the next layer, when it begins, adds {nxt / 2**20:,.0f} MiB at once "
            f"(+{nxt / state.count:.2f} B per seen URL until it fills)"
        )
    finally:
        if server is not None:
            server.stop()
        else:
            frontier.reset()
        tmp.cleanup()


if __name__ == "__main__":
    main()
