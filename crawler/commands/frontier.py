"""``scrapy frontier <site> [subcommand]``: see a shared (Redis) crawl as one, and steer it.

The subcommands are listed in :data:`_HELP` (``scrapy frontier -h``). ``status`` is
:func:`crawler.backends.redis.status.crawl_report`; ``status --metrics-port`` serves it for
Prometheus, read at most once per ``metrics_interval`` (``TUNING``), so a dashboard needs no
per-worker sums. The controls live in Redis (:class:`crawler.backends.redis.controls.
CrawlControls`), so they survive worker restarts, and every worker obeys them from memory.
Settings are the crawl's: pass the same ``-s`` as to ``scrapy crawl``.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.backends.registry import backend_class
from crawler.commands import (
    counted,
    given_settings,
    keep_paragraphs,
    pipe_safe,
    redis_server_missing,
)

# What `scrapy frontier -h` says (the module's docstring is for the code's readers).
_HELP = """See a crawl shared in Redis as one, and steer every worker of it; or see a crawl kept
in a JOBDIR. Give the crawl's settings, as to scrapy crawl: -s FRONTIER_BACKEND=redis
-s REDIS_URL=redis://HOST:6379/0, or -s JOBDIR=DIR (status only).

Subcommands (none: status):

* status [--json] [--top N]: pages, hosts, queues, leases and each worker's state.
* status --metrics-port PORT: serve the crawl as one for Prometheus until Ctrl-C.
* block HOST, block --domain DOMAIN: drop the queued URLs of a host (or of every host of a
  domain) and admit no more of them (an abuse complaint).
* unblock HOST, unblock --domain DOMAIN: admit new URLs of it again.
* pause, resume: every worker stops handing out requests, then goes on.
* deadline +90m | +2h | 2026-12-01T18:00 | none: the crawl ends then (finish_reason deadline).
* budget 500MB | 2GB | none: the crawl ends once its workers have downloaded that much.

The controls live in Redis, so they outlast worker restarts, and every worker obeys them within
a second."""

_SUBCOMMANDS = ("status", "block", "unblock", "pause", "resume", "deadline", "budget")
_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
}
_SPANS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = True
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<site> [status|block|unblock|pause|resume|deadline|budget] [ARG] [options]"

    def short_desc(self) -> str:
        return "Show a shared (Redis) crawl as one, and steer every worker of it"

    def long_desc(self) -> str:
        return _HELP

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        keep_paragraphs(parser)
        parser.add_argument("--json", action="store_true", help="status as JSON, for scripts")
        parser.add_argument(
            "--domain", action="store_true", help="block/unblock a domain and all its hosts"
        )
        parser.add_argument(
            "--top", type=int, default=10, help="busiest hosts and leases shown (default 10)"
        )
        parser.add_argument(
            "--metrics-port", type=int, default=0, metavar="PORT",
            help="serve the crawl's metrics for Prometheus on PORT until stopped",
        )

    @pipe_safe
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("give a site: scrapy frontier <site> [subcommand]")
        site, sub, rest = args[0], (args[1] if len(args) > 1 else "status"), args[2:]
        if sub not in _SUBCOMMANDS:
            raise UsageError(f"unknown subcommand {sub!r}; one of: {', '.join(_SUBCOMMANDS)}")
        assert self.settings is not None
        jobdir = self.settings.get("JOBDIR")
        if jobdir and str(self.settings.get("FRONTIER_BACKEND") or "").lower() != "redis":
            self._jobdir(site, Path(jobdir), sub, opts)
            return
        crawl = self._crawl(site)
        if crawl is None:
            return
        try:
            self._act(crawl, sub, rest, opts)
        except ValueError as exc:
            self._fail(str(exc))
        finally:
            crawl.client.close()

    def _crawl(self, site: str) -> Any:
        """The crawl shared in Redis (a :class:`~crawler.backends.redis.status.SharedCrawl`),
        or None (said why, exit status 2)."""
        from crawler.backends.redis.connection import redis_client, safe_url
        from crawler.backends.redis.frontier_store import RedisFrontierStore
        from crawler.backends.redis.status import SharedCrawl
        from crawler.frontier.mercator import FRONT_QUEUES
        from crawler.frontier.politeness import politeness_from_settings

        assert self.crawler_process is not None
        try:
            crawler = self.crawler_process.create_crawler(site)
        except KeyError:
            sites = ", ".join(sorted(self.crawler_process.spider_loader.list())) or "none"
            self._fail(f"no site named {site!r}; the sites are: {sites}")
            return None
        missing = redis_server_missing(crawler.settings, given_settings(crawler.settings))
        if missing:
            self._fail(missing)
            return None
        store_cls = backend_class(crawler.settings, "frontier_store")
        if not issubclass(store_cls, RedisFrontierStore):
            self._fail(
                "give the crawl's settings: -s JOBDIR=DIR for a crawl kept in a folder, or "
                "-s FRONTIER_BACKEND=redis -s REDIS_URL=redis://HOST:6379/0 for a shared one"
            )
            return None
        store = store_cls.from_crawler(crawler)
        s = crawler.settings
        try:
            client = redis_client(s)
            client.ping()
        except Exception as exc:
            self._fail(f"Redis at {safe_url(s)} is not reachable: {exc}")
            return None
        return SharedCrawl(
            client,
            store.key,
            store.partition_count,
            FRONT_QUEUES,
            politeness_from_settings(s).max_delay,
            store.keys.shard_prefixes(),  # the address budgets' tags
        )

    def _jobdir(self, site: str, jobdir: Path, sub: str, opts: argparse.Namespace) -> None:
        """The status of a crawl kept in ``JOBDIR`` (its ``frontier.sqlite``, read-only: the
        crawl may be running; what it holds is as of the crawl's last commit). Its controls
        steer a fleet in Redis and have no JOBDIR form: a JOBDIR crawl is one process, stopped
        with Ctrl-C and resumed by running it again."""
        if sub != "status":
            self._fail(f"{sub} steers a crawl shared in Redis; a JOBDIR crawl is one process: "
                       "stop it with Ctrl-C, run it again to resume")
            return
        path = jobdir / "frontier.sqlite"
        if not path.is_file():
            self._fail(f"no crawl here: {jobdir} holds no frontier ({path.name}); a crawl "
                       f"started with -s JOBDIR={jobdir} keeps it there")
            return
        status = jobdir_status(path, opts.top)
        if opts.json:
            print(json.dumps({"crawl": site, "jobdir": str(jobdir), **status}, indent=2,
                             sort_keys=True))
            return
        state = "finished" if status["queued"] == 0 else "to go on"
        print(f"crawl {site} in JOBDIR {jobdir} ({state}, as of its last commit): "
              f"{counted(status['queued'], 'URL')} queued, {counted(status['seen'], 'URL')} "
              f"seen, {counted(status['hosts_total'], 'host')}")
        if status["queued_by_host"]:
            print("most queued: " + ", ".join(
                f"{row['host']} {counted(row['queued'], 'URL')}"
                for row in status["queued_by_host"]
            ))

    def _act(self, crawl: Any, sub: str, rest: list[str], opts: argparse.Namespace) -> None:
        from crawler.backends.redis.connection import safe_url
        from crawler.backends.redis.status import crawl_report
        from crawler.commands.frontier_report import format_report

        def one_arg(what: str) -> str:
            if len(rest) != 1:
                raise UsageError(f"{sub} takes one argument: {what}")
            return rest[0]

        controls = crawl.controls()
        if sub == "status" and not opts.metrics_port and crawl.is_empty():
            self._fail(
                f"no crawl here: crawl {crawl.crawl!r} in Redis at {safe_url(self.settings)} "
                "has no partition ever owned and no worker (another REDIS_URL, database or "
                "FRONTIER_REDIS_KEY?)"
            )
        elif sub == "status" and opts.metrics_port:
            self._serve_metrics(crawl, opts.metrics_port)
        elif sub == "status":
            from crawler.commands.frontier_report import format_partition_loads

            report = crawl_report(crawl, top=opts.top)
            if opts.json:
                print(json.dumps(report, indent=2, sort_keys=True))
            else:
                print(format_report(report))
                print(format_partition_loads(report["partitions"]))
        elif sub in ("block", "unblock"):
            from crawler.backends.redis.controls import host_name
            from crawler.commands.frontier_report import closest_hosts

            given = one_arg("a host name, or a domain with --domain")
            name = host_name(given)
            kind = "domain" if opts.domain else "host"
            if name != given.lower():
                print(f"{kind} {name} (given as {given}: hosts are named without port or "
                      "URL, as in scrapy frontier status)")
            known = True
            if not opts.domain:
                hosts = ([host for host, _ in batch] for batch in crawl.iter_records())
                known, close = closest_hosts(name, hosts)
                if not known:
                    print(f"host {name} is not one this crawl has met"
                          + (f"; did you mean {' or '.join(close)}?" if close else ""))
            if sub == "block":
                dropped = controls.block(name, domain=opts.domain)
                print(f"blocked {kind} {name}: "
                      + (f"{dropped} queued URLs dropped" if dropped is not None else
                         "no worker owns it now: its queued URLs are dropped by the next")
                      + ("" if known else "; blocked in advance: its URLs are refused when "
                         "they come"))
            elif controls.unblock(name, domain=opts.domain):
                print(f"unblocked {kind} {name}: its new URLs are admitted again")
            else:
                print(f"{kind} {name} was not blocked")
        elif sub in ("pause", "resume"):
            if rest:
                raise UsageError(f"{sub} takes no argument")
            halt = controls.set_control("paused", 1 if sub == "pause" else None)
            print(f"crawl {crawl.crawl!r} {sub}d" + (f" (halted: {halt})" if halt else ""))
        elif sub == "deadline":
            when = one_arg("+90m, +2h, a local time 2026-12-01T18:00, or none")
            if when == "none":
                controls.set_control("deadline", None)
                print(f"crawl {crawl.crawl!r}: no deadline")
            else:
                seconds = parse_deadline(when, time.time())
                halt = controls.set_control("deadline", seconds, relative=True)
                end = datetime.fromtimestamp(time.time() + seconds).isoformat(timespec="seconds")
                print(f"crawl {crawl.crawl!r} ends at {end}" + (f" ({halt})" if halt else ""))
        elif sub == "budget":
            size = one_arg("500MB, 2GB, a number of bytes, or none")
            if size == "none":
                controls.set_control("budget", None)
                print(f"crawl {crawl.crawl!r}: no byte budget")
            else:
                budget = parse_size(size)
                halt = controls.set_control("budget", budget)
                done = controls.controls()["bytes"]
                print(
                    f"crawl {crawl.crawl!r} ends after {budget} bytes ({done} downloaded so far)"
                    + (f" ({halt})" if halt else "")
                )

    def _serve_metrics(self, crawl: Any, port: int) -> None:
        """The crawl as one for Prometheus, until Ctrl-C (or SIGTERM)."""
        import signal
        import threading

        from crawler.backends.redis.status import crawl_report
        from crawler.metrics.config import MetricsConfig
        from crawler.metrics.exporter import MetricsServer
        from crawler.metrics.families import crawl_families, gauges

        assert self.settings is not None
        config = MetricsConfig.from_settings(self.settings)
        host, interval = config.bind_host, config.interval
        labels = {"crawl": crawl.crawl}
        lock = threading.Lock()
        last: list[Any] = [0.0, None]  # when, report

        def families() -> Any:
            with lock:
                up = 1.0
                if last[1] is None or time.monotonic() - last[0] >= interval:
                    try:
                        last[:] = [time.monotonic(), crawl_report(crawl)]
                    except Exception as exc:  # the last report stays served, flagged
                        up = 0.0
                        print(f"frontier: Redis not read: {exc}", file=sys.stderr, flush=True)
                out = list(gauges([("redis_up", "1 when Redis answered the last read", up)],
                                  labels))
                if last[1] is not None:
                    out += crawl_families(last[1], labels)
                return out

        server = MetricsServer(host, port, families, process=False)
        try:
            server.start()
        except OSError as exc:
            raise ValueError(f"cannot serve metrics on {host}:{port}: {exc}") from None
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        print(f"crawl {crawl.crawl!r}: metrics at http://{host}:{server.port}/metrics "
              "(Ctrl-C to stop)", flush=True)
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            server.close()

    def _fail(self, line: str) -> None:
        print(f"frontier: {line}", file=sys.stderr)
        self.exitcode = 2


def jobdir_status(path: Path, top: int) -> dict[str, Any]:
    """URLs queued (each once: a URL raised by OPIC leaves an older row behind until the
    frontier opens again), URLs seen, hosts known, and the hosts with the most queued URLs, from
    a JOBDIR's ``frontier.sqlite`` opened read-only."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        queued = db.execute("SELECT count(DISTINCT url) FROM queue").fetchone()[0]
        seen = db.execute("SELECT count(*) FROM seen").fetchone()[0]
        hosts = db.execute(
            "SELECT count(*) FROM (SELECT name FROM hosts UNION SELECT host FROM queue)"
        ).fetchone()[0]
        rows = db.execute(
            "SELECT host, count(DISTINCT url) AS n FROM queue GROUP BY host "
            "ORDER BY n DESC, host LIMIT ?", (top,),
        ).fetchall()
    finally:
        db.close()
    return {
        "queued": queued, "seen": seen, "hosts_total": hosts,
        "queued_by_host": [{"host": h, "queued": n} for h, n in rows],
    }


def parse_size(text: str) -> int:
    """``500MB``, ``2GB``, ``1.5gb``, ``123456`` -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?b?)\s*", text.lower())
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 500MB, 2GB, 123456)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def parse_deadline(text: str, now: float) -> float:
    """Seconds from ``now`` (this machine's clock) until ``+90m``/``+2h``/``+30s``/``+1d`` or a
    local ISO time. The frontier stores it in Redis's time, so workers' clocks never meet."""
    m = re.fullmatch(r"\+(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if m:
        return float(m.group(1)) * _SPANS[m.group(2) or "s"]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"not a deadline: {text!r} (e.g. +90m, +2h, 2026-12-01T18:00, none)"
        ) from None
    seconds = when.timestamp() - now
    if seconds <= 0:
        raise ValueError(f"the deadline {text} has passed")
    return seconds
