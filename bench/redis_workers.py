"""Many workers on Redis: an equal-work crawl of real documentation HTML served by nginx.

    .venv/bin/python bench/redis_workers.py [--runs 2] [--port 8080] [--host-concurrency 2]
                                            [--min-delay 0] [--configs memory,redis1,redis2]
                                            [--skip TREE] [--set KEY=VALUE] [--json out.json]
                                            [--persistence none,everysec,always]

Starts its own ``nginx`` (one server per documentation tree, each on its own loopback address
127.0.0.2, 127.0.0.3, ... as its own host; only the tree's folder is served, everything else is
404) and its own ``redis-server``, then crawls the same finite site set to completion with

* ``memory``: the default memory backend, one ``scrapy crawl`` process;
* ``redis1``: ``FRONTIER_BACKEND=redis``, one worker;
* ``redis2``: two workers on one Redis (the first with the seeds, the second joining once
  ``{key}:seen`` is non-empty),

alternating the three ``--runs`` times. ``--persistence`` runs each Redis configuration once per
Redis persistence mode (``none``: no AOF, no snapshots; ``everysec`` / ``always``: AOF on with
that ``appendfsync``), each mode on its own redis-server whose files are on the disk of the
temporary folder (``--redis-dir`` to choose another; not a tmpfs, where fsync costs nothing).
Every run is checked for equal work against nginx's access log (page fetches, distinct URLs,
statuses). Measured per run: pages, wall time, worker CPU (user + sys of the scrapy processes,
``os.wait4``), Redis server CPU (``INFO cpu`` delta), nginx CPU (``/proc`` of its master and
workers), Redis ``used_memory`` per seen URL at the end (after ``FLUSHALL`` and a baseline) and
per queued URL at the mid-crawl sample with the most URLs queued (``used_memory`` less the
baseline and the seen set's ``MEMORY USAGE``), the AOF's size, Redis's write calls and bytes
written to disk (``INFO persistence``, ``/proc/<redis>/io``), and the load average.

Nothing leaves loopback. Needs ``nginx`` and ``redis-server`` on the PATH (apt-get install
nginx-light redis-server) and, for the default trees, the Rust docs of a stable rustup toolchain.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from tests.redis_support import RedisServer, start_redis  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SITE = "docs"
KEY = "bench-docs"


def rust_html() -> str:
    found = sorted(
        glob.glob(os.path.expanduser("~/.rustup/toolchains/stable-*/share/doc/rust/html"))
    )
    return found[0] if found else ""


def default_trees() -> list[tuple[str, str]]:
    """(served root, URL prefix): the host serves ``root/prefix/`` at ``/prefix/``."""
    rust = rust_html()
    trees = [
        (rust, p)
        for p in (
            "book",
            "rust-by-example",
            "error_codes",
            "reference",
            "cargo",
            "edition-guide",
            "nomicon",
            "rustc",
            "std",
            "unstable-book",
        )
    ]
    trees += [("/usr/share/doc", "nodejs/api"), ("/usr/share/doc", "valgrind/html")]
    return [(r, p) for r, p in trees if r and os.path.isfile(os.path.join(r, p, "index.html"))]


# ---------------------------------------------------------------- nginx


class Nginx:
    def __init__(self, root: Path, trees: list[tuple[str, str]], port: int) -> None:
        self.root = root
        self.hosts = [f"127.0.0.{i + 2}" for i in range(len(trees))]
        self.port = port
        self.access_log = root / "access.log"
        servers = []
        for host, (served, prefix) in zip(self.hosts, trees, strict=True):
            servers.append(
                f"""
    server {{
        listen {host}:{port};
        root {served};
        location = /robots.txt {{ return 200 "User-agent: *\\nDisallow:\\n"; }}
        location ^~ /{prefix}/ {{ }}
        location / {{ return 404; }}
    }}"""
            )
        conf = root / "nginx.conf"
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (root / d).mkdir(exist_ok=True)
        conf.write_text(
            f"""user root;
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ text/html html; text/css css; application/javascript js; }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 30;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    log_format bench '$msec $server_addr $status $body_bytes_sent $request_uri';
    access_log {self.access_log} bench buffer=64k flush=1s;
{"".join(servers)}
}}
"""
        )
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.process = subprocess.Popen(
            [binary, "-p", str(root), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=open(root / "nginx.stderr", "wb"),  # noqa: SIM115
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((self.hosts[-1], port), timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "nginx did not start: " + (root / "nginx.stderr").read_text()
                    ) from None
                time.sleep(0.05)

    def pids(self) -> list[int]:
        master = self.process.pid
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        return [master, *map(int, children)]

    def cpu(self) -> float:
        total = 0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        return total / TICK

    def log_offset(self) -> int:
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def requests(self, offset: int) -> list[list[str]]:
        time.sleep(1.5)  # the access log buffer flushes every second
        with self.access_log.open("rb") as f:
            f.seek(offset)
            # [msec, address, status, bytes, uri]
            return [line.decode().split(" ", 4) for line in f.read().splitlines()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# ---------------------------------------------------------------- crawl


def write_site(sites_dir: Path, nginx: Nginx, trees: list[tuple[str, str]], args: Any) -> Path:
    sites_dir.mkdir(parents=True, exist_ok=True)
    allow = [
        f"'^http://{h.replace('.', '[.]')}:{nginx.port}/{p}/'"
        for h, (_, p) in zip(nginx.hosts, trees, strict=True)
    ]
    (sites_dir / f"{SITE}.toml").write_text(
        f'''name = "{SITE}"
allow_private_addresses = true
[scope]
hosts = [{", ".join(f'"{h}"' for h in nginx.hosts)}]
[urls]
allow = [{", ".join(allow)}]
max_depth = 10000
[politeness]
min_delay = {args.min_delay}
delay_factor = 0
host_concurrency = {args.host_concurrency}
'''
    )
    seeds = sites_dir / "seeds.txt"
    seeds.write_text(
        "".join(
            f"http://{h}:{nginx.port}/{p}/index.html\n"
            for h, (_, p) in zip(nginx.hosts, trees, strict=True)
        )
    )
    return seeds


class Worker:
    def __init__(
        self, run_dir: Path, sites_dir: Path, settings: dict[str, Any], seeds: Path | None
    ) -> None:
        run_dir.mkdir(parents=True)
        self.dir = run_dir
        cmd = [sys.executable, "-m", "scrapy", "crawl", SITE]
        if seeds is not None:
            cmd += ["-a", f"seeds={seeds}"]
        all_settings = {
            "SITES_DIR": sites_dir,
            "STATS_FILE": run_dir / "stats.json",
            "LOG_FILE": run_dir / "crawl.log",
            "INDEX_PATH": run_dir / "index.sqlite",  # one per worker
            "LOG_LEVEL": "INFO",
            **settings,
        }
        for k, v in all_settings.items():
            cmd += ["-s", f"{k}={v}"]
        self.cmd = cmd
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=PROJECT,
            env=dict(os.environ, PYTHONPATH=str(PROJECT)),
            stdout=open(run_dir / "stdout", "wb"),  # noqa: SIM115
            stderr=open(run_dir / "stderr", "wb"),  # noqa: SIM115
        )
        self.rusage: Any = None
        self.status = -1
        self.end = 0.0
        self.runqueue_wait = 0.0  # seconds its threads were runnable but not running
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()
        threading.Thread(target=self._schedstat, daemon=True).start()

    def _schedstat(self) -> None:
        """/proc/<pid>/task/*/schedstat: run time, run-queue wait (ns), timeslices per thread;
        the last reading before exit (threads that ended earlier are missed: the main thread
        and the Redis thread live to the end)."""
        tasks = Path(f"/proc/{self.proc.pid}/task")
        waits: dict[str, float] = {}
        while not self.done.wait(0.25):
            try:
                for task in tasks.iterdir():
                    waits[task.name] = int((task / "schedstat").read_text().split()[1]) / 1e9
            except (OSError, IndexError, ValueError):
                continue
            self.runqueue_wait = sum(waits.values())

    def _wait(self) -> None:
        _, status, self.rusage = os.wait4(self.proc.pid, 0)
        self.done.set()
        self.end = time.monotonic()
        self.status = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.status

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.proc.kill()
            self.thread.join()
            raise RuntimeError(f"worker timed out: {self.dir}")

    @property
    def cpu(self) -> float:
        return self.rusage.ru_utime + self.rusage.ru_stime

    @property
    def stats(self) -> dict[str, Any]:
        path = self.dir / "stats.json"
        return json.loads(path.read_text()) if path.exists() else {}


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


SAMPLER_COMMANDS = ("memory", "scan", "info", "hget", "scard")


def breakdown(client: redis.Redis) -> dict[str, int]:
    """Bytes of the crawl's keys by kind (MEMORY USAGE of every key, SAMPLES 0)."""
    prefix = "{" + KEY + "}:"
    kinds: dict[str, int] = Counter()
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.memory_usage(k, samples=0)
    for k, size in zip(keys, pipe.execute(), strict=True):
        name = k.decode(errors="replace")[len(prefix) :]
        kind = name.split(":", 1)[0] if ":" in name else name
        kinds[kind] += int(size or 0)
    return dict(kinds)


class Sampler(threading.Thread):
    """Every 0.5 s: queued and seen counts, used_memory (less scripts and client buffers) and
    the crawl's keys by kind."""

    def __init__(self, client: redis.Redis, base: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.base = base
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        stats = "{" + KEY + "}:stats"
        while not self.stop.wait(0.5):
            queued = int(self.client.hget(stats, "queued") or 0)
            seen = int(self.client.scard("{" + KEY + "}:seen"))
            kinds = breakdown(self.client)
            self.samples.append(
                {"queued": queued, "seen": seen, "kinds": kinds}
                | data_memory(self.client, self.base)
            )


def data_memory(client: redis.Redis, base: dict[str, int]) -> dict[str, int]:
    """used_memory over the baseline, and the same less the script cache and client buffers."""
    mem = client.info("memory")
    used = int(mem["used_memory"]) - base["used"]
    scripts = int(mem.get("used_memory_scripts", 0)) - base["scripts"]
    clients = int(mem.get("mem_clients_normal", 0)) - base["clients"]
    return {"used": used, "data": used - scripts - clients}


def sampler_usec(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in SAMPLER_COMMANDS)


PERSISTENCE = ("none", "everysec", "always")


def redis_io(server: RedisServer) -> dict[str, int]:
    """The redis-server process's write syscalls and bytes written to disk (``/proc/<pid>/io``):
    what ``appendfsync`` changes is how often those bytes are forced to the disk."""
    text = Path(f"/proc/{server.process.pid}/io").read_text()
    fields = dict(line.split(": ", 1) for line in text.splitlines())
    return {"syscw": int(fields["syscw"]), "write_bytes": int(fields["write_bytes"])}


def run_config(
    name: str,
    i: int,
    root: Path,
    sites_dir: Path,
    seeds: Path,
    nginx: Nginx,
    server: RedisServer | None,
    args: Any,
    mode: str = "none",
) -> dict[str, Any]:
    workers_n = {"memory": 1, "redis1": 1, "redis2": 2}[name]
    label = name if server is None or mode == "none" else f"{name}/{mode}"
    settings: dict[str, Any] = dict(kv.split("=", 1) for kv in args.set)
    client = sampler = None
    base: dict[str, int] = {}
    if server is not None:
        client = server.client()
        client.flushall()
        time.sleep(0.2)
        mem = client.info("memory")
        base = {
            "used": int(mem["used_memory"]),
            "scripts": int(mem.get("used_memory_scripts", 0)),
            "clients": int(mem.get("mem_clients_normal", 0)),
        }
        client.config_resetstat()
        settings |= {
            "FRONTIER_BACKEND": "redis",
            "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
            "FRONTIER_REDIS_KEY": KEY,
        }
        r_cpu0 = redis_cpu(client)
        io0 = redis_io(server)
        aof0 = int(client.info("persistence").get("aof_current_size", 0))
    load0 = os.getloadavg()[0]
    n_cpu0 = nginx.cpu()
    offset = nginx.log_offset()
    t0 = time.monotonic()
    run_dir = root / f"{label.replace('/', '-')}-{i}"
    workers = [Worker(run_dir / "w0", sites_dir, settings, seeds)]
    if server is not None:
        sampler = Sampler(server.client(), base)
        sampler.start()
    if workers_n > 1:
        assert client is not None
        while client.scard("{" + KEY + "}:seen") == 0:
            time.sleep(0.02)
        workers += [
            Worker(run_dir / f"w{k}", sites_dir, settings, None) for k in range(1, workers_n)
        ]
    for w in workers:
        w.join(args.timeout)
    wall = max(w.end for w in workers) - t0
    n_cpu = nginx.cpu() - n_cpu0
    load1 = os.getloadavg()[0]
    result: dict[str, Any] = {"config": label, "run": i, "wall": wall, "load": (load0, load1)}
    if client is not None and sampler is not None and server is not None:
        sampler.stop.set()
        sampler.join()
        result["redis_cpu"] = redis_cpu(client) - r_cpu0
        io1 = redis_io(server)
        persistence = client.info("persistence")
        result["persistence"] = mode
        result["aof_bytes"] = int(persistence.get("aof_current_size", 0)) - aof0  # this run's
        result["aof_delayed_fsync"] = int(persistence.get("aof_delayed_fsync", 0))
        result["redis_write_calls"] = io1["syscw"] - io0["syscw"]
        result["redis_disk_bytes"] = io1["write_bytes"] - io0["write_bytes"]
        result["redis_cpu_sampler"] = sampler_usec(client) / 1e6  # the sampler's own commands
        seen = int(client.scard("{" + KEY + "}:seen"))
        end = data_memory(client, base)
        kinds = breakdown(client)
        result["seen"] = seen
        result["bytes_per_seen"] = end["data"] / seen if seen else None
        result["bytes_per_seen_raw"] = end["used"] / seen if seen else None
        result["end_kinds"] = kinds
        result["seen_set_bytes_per_seen"] = kinds.get("seen", 0) / seen if seen else None
        peak = max(sampler.samples, key=lambda s: s["queued"], default=None)
        if peak and peak["queued"]:
            q = peak["queued"]
            queues = sum(v for k, v in peak["kinds"].items() if k in ("f", "q", "fq"))
            result["peak"] = peak
            # everything but the seen set, per queued URL (as bench/redis_frontier.py counts it)
            result["bytes_per_queued"] = (peak["data"] - peak["kinds"].get("seen", 0)) / q
            result["queue_bytes_per_queued"] = queues / q  # the queue lists alone
        client.close()
    requests = nginx.requests(offset)
    pages = [r for r in requests if r[4] != "/robots.txt"]
    statuses = Counter(r[2] for r in pages)
    urls = Counter((r[1], r[4]) for r in pages)
    # the crawl's tail: how long the last host was crawled alone, after every other had finished
    last: dict[str, float] = {}
    for r in requests:
        last[r[1]] = max(last.get(r[1], 0.0), float(r[0]))
    ends = sorted(last.values())
    result["tail_one_host"] = ends[-1] - ends[-2] if len(ends) > 1 else 0.0
    result["last_host"] = max(last, key=last.__getitem__) if last else ""
    result["pages_last_host"] = sum(
        1 for r in pages if r[1] == result["last_host"] and r[2] == "200"
    )
    result.update(
        {
            "worker_cpu": sum(w.cpu for w in workers),
            "worker_cpus": [round(w.cpu, 2) for w in workers],
            "worker_walls": [round(w.end - w.start, 2) for w in workers],
            "worker_runqueue_wait": [round(w.runqueue_wait, 2) for w in workers],
            "nginx_cpu": n_cpu,
            "fetches": len(pages),
            "pages": statuses.get("200", 0),
            "statuses": dict(statuses),
            "distinct": len(urls),
            "twice": sum(1 for n in urls.values() if n > 1),
            "robots": sum(1 for r in requests if r[4] == "/robots.txt"),
            "items": [w.stats.get("item_scraped_count", 0) for w in workers],
            "finish": [w.stats.get("finish_reason") for w in workers],
            "exit": [w.status for w in workers],
        }
    )
    return result


def summarize(results: list[dict[str, Any]]) -> None:
    def med(name: str, f: Any) -> float:
        vals = [f(r) for r in results if r["config"] == name]
        return statistics.median(vals)

    print("\nper run:")
    for r in results:
        print(
            f"{r['config']:7} #{r['run']} pages {r['pages']} (fetches {r['fetches']}, distinct "
            f"{r['distinct']}, twice {r['twice']}, items {r['items']}) wall {r['wall']:.1f}s "
            f"worker CPU {r['worker_cpu']:.1f}s {r['worker_cpus']} "
            f"(runqueue wait {r['worker_runqueue_wait']}s) "
            f"({1000 * r['worker_cpu'] / r['pages']:.2f} ms/page) "
            f"redis CPU {r.get('redis_cpu', 0):.2f}s "
            f"({1000 * r.get('redis_cpu', 0) / r['pages']:.3f} ms/page, sampler "
            f"{r.get('redis_cpu_sampler', 0):.2f}s) "
            f"nginx CPU {r['nginx_cpu']:.2f}s B/seen {r.get('bytes_per_seen') or 0:.0f} "
            f"B/queued {r.get('bytes_per_queued') or 0:.0f} "
            f"(lists {r.get('queue_bytes_per_queued') or 0:.0f}; "
            f"peak {r.get('peak', {}).get('queued', 0)}) "
            f"tail {r.get('tail_one_host', 0):.1f}s on {r.get('last_host')} "
            f"load {r['load'][0]:.2f}->{r['load'][1]:.2f} finish {r['finish']} exit {r['exit']}"
            + (
                f" AOF {r['aof_bytes'] / 1e6:.1f} MB, redis write calls {r['redis_write_calls']},"
                f" disk {r['redis_disk_bytes'] / 1e6:.1f} MB, delayed fsyncs"
                f" {r['aof_delayed_fsync']}"
                if "aof_bytes" in r
                else ""
            )
        )
    names = list(dict.fromkeys(r["config"] for r in results))
    print("\nmedians:")
    for n in names:
        print(
            f"{n:7} pages/s {med(n, lambda r: r['pages'] / r['wall']):.1f} "
            f"worker ms/page {med(n, lambda r: 1000 * r['worker_cpu'] / r['pages']):.2f} "
            f"pages/worker-CPU-s {med(n, lambda r: r['pages'] / r['worker_cpu']):.1f} "
            f"redis ms/page {med(n, lambda r: 1000 * r.get('redis_cpu', 0) / r['pages']):.3f} "
            f"wall {med(n, lambda r: r['wall']):.1f}s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host-concurrency", type=int, default=2)
    parser.add_argument("--min-delay", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--configs", default="memory,redis1,redis2")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Scrapy setting for every worker of every configuration",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="PREFIX",
        help="leave out a tree (e.g. unstable-book: a chain of next-page links)",
    )
    parser.add_argument(
        "--persistence",
        default="none",
        help="Redis persistence modes to compare, comma-separated: none, everysec, always",
    )
    parser.add_argument(
        "--redis-dir", default="", help="where the redis-servers keep their files (AOF)"
    )
    parser.add_argument("--json", default="")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    trees = [t for t in default_trees() if t[1] not in args.skip]
    root = Path(tempfile.mkdtemp(prefix="bench-redis-workers-"))
    (root / "nginx").mkdir()
    nginx = Nginx(root / "nginx", trees, args.port)
    modes = args.persistence.split(",")
    if unknown := set(modes) - set(PERSISTENCE):
        parser.error(f"--persistence: unknown {', '.join(sorted(unknown))}")
    redis_root = Path(args.redis_dir or root) / f"redis-{os.getpid()}"
    servers: dict[str, RedisServer] = {}
    for mode in modes:
        (redis_root / mode).mkdir(parents=True)
        servers[mode] = start_redis(
            redis_root / mode, timeout=30, aof=None if mode == "none" else mode
        )
    results = []
    try:
        sites_dir = root / "sites"
        seeds = write_site(sites_dir, nginx, trees, args)
        hosts = zip(nginx.hosts, trees, strict=True)
        print("trees:", ", ".join(f"{h}=/{p}/" for h, (_, p) in hosts))
        for i in range(args.runs):
            for name in args.configs.split(","):
                for mode in ["none"] if name == "memory" else modes:
                    r = run_config(
                        name,
                        i,
                        root,
                        sites_dir,
                        seeds,
                        nginx,
                        None if name == "memory" else servers[mode],
                        args,
                        mode,
                    )
                    results.append(r)
                    print(json.dumps(r), flush=True)
        summarize(results)
        with servers[modes[0]].client() as c:
            print("redis", c.info("server")["redis_version"], "redis-py", redis.__version__)
    finally:
        for server in servers.values():
            server.stop()
        nginx.stop()
        if args.redis_dir:
            shutil.rmtree(redis_root, ignore_errors=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("kept", root)


if __name__ == "__main__":
    main()
