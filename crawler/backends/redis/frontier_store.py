"""``frontier_store`` of the ``redis`` backend: several ``scrapy crawl`` workers, one polite
crawl, whose workers own partitions of its hosts.

It wires the partitioned frontier (behind a :class:`~crawler.frontier.buffered.BufferedFrontier`,
so no Redis round trip runs on the reactor thread), the scope and the seeds pushed while the
crawl runs, and refuses before a crawl starts a Redis or settings that cannot work. State stays
after the crawl, like scrapy-redis's ``SCHEDULER_PERSIST``; ``FRONTIER_RESET=True`` starts afresh.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable
from functools import partial
from itertools import islice
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoPermissionError, RedisClusterException, TryAgainError
from scrapy.settings import BaseSettings

from crawler.backends.memory import MemoryFrontierStore
from crawler.backends.redis.connection import Refusal, redis_client, refused_commands, safe_url
from crawler.backends.redis.inbox import RedisScopeRegistry, SharedInbox
from crawler.backends.redis.keys import CrawlKeys, PartitionKeys, crawl_key, glob_escape
from crawler.backends.redis.outage import FIRST_BACKOFF, MAX_BACKOFF, is_transient
from crawler.backends.redis.partitioned import PartitionedFrontier
from crawler.backends.redis.seenset import SeenSetConfig, has_bloom_module
from crawler.frontier import Frontier
from crawler.frontier.api import FrontierCallbacks
from crawler.frontier.buffered import LEASE_MAX_WAIT, REFRESH, BufferedFrontier
from crawler.frontier.config import SharedFrontierConfig
from crawler.frontier.mercator import FRONT_QUEUES
from crawler.frontier.scope import ScopeRegistry
from crawler.report.worker import worker_id

logger = logging.getLogger(__name__)

# How long a partition stays a dead worker's: how long a killed worker's hosts wait.
PARTITION_TTL = 10.0
PARTITIONS = 16  # partitions of a crawl's hosts: at most this many workers share its work
LAYOUT = "8"  # of the keys: a crawl stored by another version is refused, never converted
# The seen-set's false positives at most, past FRONTIER_SEEN_EXACT_LIMIT with RedisBloom (a URL
# wrongly taken for seen is a page never fetched: one in a hundred of those past the limit).
SEEN_ERROR = 0.01
# FRONTIER_SEEN_EXACT_LIMIT=-1 (exact whatever the size): buckets laid out for this many URLs
EXACT_LAYOUT_SIZE = 2_000_000
# Seconds a worker's writes wait for more before they go to Redis (group commit): a busy worker
# sends a few pages' worth in one call
BATCH_LINGER = 0.01


# Every command the crawl runs on its keys (tests/test_acl_probes.py finds them in the code),
# with arguments that make a valid call: Redis checks arity before the user's rights.
KEY_COMMANDS: dict[str, tuple[Any, ...]] = {
    "APPEND": ("",), "DECR": (), "DEL": (), "EXISTS": (), "GET": (), "GETEX": (),
    "GETRANGE": (0, 0),
    "HDEL": ("f",), "HGET": ("f",), "HGETALL": (), "HINCRBY": ("f", 1), "HINCRBYFLOAT": ("f", 1),
    "HKEYS": (), "HLEN": (), "HMGET": ("f",), "HSCAN": (0,), "HSET": ("f", ""),
    "HSETNX": ("f", ""), "HVALS": (), "INCR": (), "INCRBY": (1,), "LLEN": (), "LPOP": (),
    "LPUSH": ("",), "LRANGE": (0, 0), "LTRIM": (0, -1), "MEMORY USAGE": (), "MGET": (),
    "PEXPIRE": (1,), "PTTL": (), "RPOP": (), "RPUSH": ("",), "SADD": ("",), "SCARD": (),
    "SET": ("",),
    "SETRANGE": (0, ""), "SMEMBERS": (), "SMISMEMBER": ("",), "SREM": ("",), "STRLEN": (),
    "UNLINK": (), "WATCH": (), "XACK": ("g", "0-1"), "XADD": ("*", "f", ""),
    "XAUTOCLAIM": ("g", "c", 0, "0-0"), "XDEL": ("0-1",), "XGROUP CREATE": ("g", "0"),
    "XLEN": (), "ZADD": (0, ""), "ZCARD": (), "ZCOUNT": (0, 0), "ZRANGE": (0, 0),
    "ZRANK": ("",), "ZREM": ("",), "ZREMRANGEBYRANK": (0, 0), "ZREMRANGEBYSCORE": (0, 0),
    "ZSCORE": ("",),
}  # fmt: skip
# The commands on no key: each as probed
KEYLESS_COMMANDS: tuple[tuple[Any, ...], ...] = (
    ("PING",), ("TIME",), ("COMMAND", "INFO", "BF.MADD"), ("INFO", "server"),
    ("CONFIG", "GET", "maxmemory-policy"), ("SCRIPT", "LOAD", "return 1"),
    ("SCAN", 0, "COUNT", 1), ("UNWATCH",),
)


def check_crawl(client: Any, meta: str, crawl: str, wanted: dict[str, str]) -> list[str]:
    """Store the crawl's layout and the settings every worker must share, if this is the
    crawl's first worker; else compare. One message per problem."""
    pipe = client.pipeline(transaction=False)
    pipe.hsetnx(meta, "layout", LAYOUT)
    for name, value in wanted.items():
        pipe.hsetnx(meta, "fp:" + name, value)
    pipe.hgetall(meta)
    stored = {k.decode(): v.decode() for k, v in pipe.execute()[-1].items()}
    if stored.get("layout") != LAYOUT:
        return [
            f"crawl {crawl!r} in Redis was stored by another version of the crawler (layout "
            f"{stored.get('layout')}, this one reads {LAYOUT}): start it afresh with -s "
            "FRONTIER_RESET=True, or name another with FRONTIER_REDIS_KEY"
        ]
    return [
        f"crawl {crawl!r} was started with other settings: {name}: crawl has "
        f"{stored.get('fp:' + name)}, this worker has {value}"
        for name, value in wanted.items()
        if stored.get("fp:" + name) != value
    ]


def _from_thread(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A callback the frontier's worker thread may call: it runs on the reactor thread."""
    if fn is None:
        return None
    from twisted.internet import reactor  # the one Scrapy installed, imported once it runs

    return lambda *args: reactor.callFromThread(fn, *args)  # type: ignore[attr-defined]


class RedisFrontierStore(MemoryFrontierStore):
    """``frontier_store`` of the ``redis`` backend."""

    persistent = True  # queued requests travel as msgpack through Redis
    shared = True
    config_class = SharedFrontierConfig
    config: SharedFrontierConfig

    partition_count = PARTITIONS

    def __init__(self, settings: BaseSettings, site: str) -> None:
        super().__init__(settings)
        self.site = site
        self.key = crawl_key(settings, site)

    @property
    def keys(self) -> CrawlKeys:
        return CrawlKeys(self.key, self.site, self.config.shards)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisFrontierStore:
        return cls(crawler.settings, getattr(crawler.spidercls, "name", None) or "crawl")

    @classmethod
    def preflight(cls, crawler: Any) -> list[str]:
        """Refuse a crawl that cannot work (:meth:`check_server`); a Redis that is not there
        (yet) is waited for (:meth:`wait_for_server`)."""
        store = cls.from_crawler(crawler)
        stopped = store.wait_for_server()
        return [stopped] if stopped else store.check_server()

    def wait_for_server(self) -> str:
        """Before the crawl starts: while Redis is away (:func:`away`), say so in one line and
        wait, with backoff, until it answers; other failures are left to the checks, which
        refuse the crawl. Returns why the wait stopped short: SIGINT or SIGTERM (the main
        thread's handlers, before Scrapy installs its own), else ""."""
        backoff, since, where, error = FIRST_BACKOFF, None, safe_url(self.settings), None
        main = threading.current_thread() is threading.main_thread()
        old = {sig: signal.signal(sig, signal.default_int_handler)
               for sig in (signal.SIGINT, signal.SIGTERM) if main}
        try:
            while True:
                try:
                    # reached, if only refused PING: the checks' probes name what is refused
                    with redis_client(self.settings) as c, contextlib.suppress(NoPermissionError):
                        c.ping()
                    break
                except Exception as exc:
                    if not away(exc):
                        break
                    if since is None:
                        since = time.monotonic()
                        logger.warning("Redis at %s is not reachable (%s): waiting for it "
                                       "(Ctrl-C stops)", where, exc)
                    error = exc
                    time.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)
        except KeyboardInterrupt:
            return f"stopped while waiting for Redis at {where}" + (f": {error}" if error else "")
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        if since is not None:
            logger.warning("Redis at %s is there after %.1fs", where, time.monotonic() - since)
        return ""

    def scope(self) -> ScopeRegistry:
        return RedisScopeRegistry(redis_client(self.settings), self.keys.scope)

    def check_server(self) -> list[str]:
        """Redis unreachable, the login refused, a command, key or channel the crawl will use
        that its ACL user may not (the crawl would crash or lose its wake-ups), a policy that
        may evict the frontier, another layout, or settings that differ from the crawl's."""
        where = safe_url(self.settings)
        try:
            with redis_client(self.settings) as client:
                try:  # the first command: a login refused is refused here
                    bloom: bool | None = self._seen_config(client).bloom
                except NoPermissionError:
                    bloom = None  # COMMAND refused: its probe names it
                refused = refused_commands(client, self._acl_probes(bloom, client))
                if refused:
                    return [self._acl_refusal(client, where, refused, bloom)]
                try:  # (redis-py decodes CONFIG GET's reply)
                    policy = next(iter(client.config_get("maxmemory-policy").values()), "?")
                except redis.ResponseError:  # CONFIG disabled (a managed Redis): the operator's
                    policy = "noeviction"  # word counts
                if policy != "noeviction":
                    return [f"Redis at {where} has maxmemory-policy {policy}: eviction would "
                            "silently drop queued URLs; set it to noeviction"]
                if self.config.reset:
                    return []
                return check_crawl(client, self.keys.meta, self.key, self.fingerprint(client))
        except redis.AuthenticationError as exc:  # no login, a wrong one, a user disabled
            return [f"Redis at {where} refused the crawl's login: {exc}"]
        except RedisClusterException as exc:  # (no RedisError) no node reached, and why
            if isinstance(exc.__cause__, redis.AuthenticationError):
                return [f"Redis at {where} refused the crawl's login: {exc.__cause__}"]
            return [f"Redis at {where} cannot be used as a Redis Cluster: {exc}"]
        except (redis.ConnectionError, redis.TimeoutError, OSError, ValueError) as exc:
            return [f"Redis at {where} is not reachable: {exc}"]
        except redis.ReadOnlyError:  # (Redis away for a running crawl: a failover's demotion)
            return [f"Redis at {where} is a read-only replica: REDIS_URL must name the master "
                    "(or the endpoint that follows it through failovers)"]
        except redis.RedisError as exc:  # reached: an error reply (a key of another type...)
            return [f"Redis at {where} answered the start-up checks with an error: {exc}"]

    def _acl_probes(self, bloom: bool | None, client: Any) -> list[tuple[Any, ...]]:
        """What the crawl will run, one of each kind on each kind of key and channel."""
        k, part = self.keys, PartitionKeys(self.key, 0, self.partition_count)
        no_script = "0" * 40  # EVALSHA is checked like the frontier's scripts, none run
        probes: list[tuple[Any, ...]] = [
            *KEYLESS_COMMANDS,
            ("HGETALL", k.meta),
            ("HSETNX", k.meta, "layout", LAYOUT),
            ("EVALSHA", no_script, 1, k.meta),
            ("GET", part.lease),
            ("SET", part.lease, "probe"),
            ("EVALSHA", no_script, 1, part.inbox),  # lua/post.lua
            ("XADD", part.inbox, "*", "probe", ""),
            ("XREADGROUP", "GROUP", "probe", "probe", "STREAMS", part.inbox, ">"),
            ("WATCH", k.seeds),  # (SharedInbox: seeds read, then trimmed off)
            ("LRANGE", k.seeds, 0, 0),
            ("LLEN", k.seeds),
            ("LTRIM", k.seeds, 0, -1),
            *((*name.split(), part.out, *tail) for name, tail in KEY_COMMANDS.items()),
        ]
        if self.config.replica_wait:  # a fenced write waits for its replicas
            probes += [("ROLE",), ("WAIT", 0, 0)]
        if isinstance(client, RedisCluster):
            probes.append(("CLUSTER", "SLOTS"))
        for channel in (k.wake, k.handover):
            probes += [("SUBSCRIBE", channel), ("PUBLISH", channel, "")]
        if bloom:
            probes += [
                ("BF.RESERVE", part.seen, SEEN_ERROR, 1, "EXPANSION", 2),
                ("BF.MADD", part.seen, "probe"),
                ("BF.MEXISTS", part.seen, "probe"),
                ("BF.CARD", part.seen),
            ]
        return probes

    def _acl_refusal(
        self, client: Any, where: str, refused: list[Refusal], bloom: bool | None
    ) -> str:
        """One line: what the crawl's user was refused, and the rules the docs give (``bloom``
        None: RedisBloom's unknown)."""
        # each command, key or channel refused (and the master, on a cluster): by which commands;
        # a probe's key or channel is its first word under the crawl's tags, or the seeds list
        by_thing: dict[tuple[str, str | None], list[str]] = {}
        for r in refused:
            name, words = str(r.command[0]).upper(), [str(w) for w in r.command[1:]]
            target = next((w for w in words if w[:1] == "{" or w == self.keys.seeds), None)
            if r.reason.rstrip().endswith("command") or target is None:
                by_thing.setdefault((f"the command {name}", r.node), [])
            else:
                kind = "channel" if "channel" in r.reason else "key"
                by_thing.setdefault((f"the {kind} {target}", r.node), []).append(name)
        what = [
            thing + (f" ({', '.join(names)})" if names else "") + (f" on {node}" if node else "")
            for (thing, node), names in by_thing.items()
        ]
        k = self.keys  # (the user's name, half of the login, stays out of the log)
        rules = [
            f"ACL SETUSER <user> on >... resetkeys ~{glob_escape(k.prefix)}:*",
            f"~{glob_escape(k.prefix[:-1])}:* ~{glob_escape(k.seeds.rsplit(':', 1)[0])}:*",
            f"resetchannels &{glob_escape(k.wake)} &{glob_escape(k.handover)}",
            "-@all +@read +@write +@transaction +@scripting +@pubsub +@connection +time",
            "-@dangerous +info +config|get",
        ]
        if bloom is not False:
            rules.append("+bf.reserve +bf.madd +bf.mexists +bf.card")
        if bloom is None:
            rules.append("(the +bf.* with RedisBloom)")
        if isinstance(client, RedisCluster):
            rules.append("+cluster|slots")
        if self.config.replica_wait:
            rules.append("+role")
        return (
            f"Redis at {where} refuses the crawl's user {', '.join(what)}: give it "
            f"what docs/topics/fleet.md (An ACL user) lists: {' '.join(rules)}"
        )

    def fingerprint(self, client: Any) -> dict[str, str]:
        """What every worker of the crawl must agree on: politeness, queue shape, URL scope,
        the seen-set's kind and size."""
        p, seen = self.politeness, self._seen_config(client)
        return {
            "min_delay": repr(float(p.min_delay)),
            "delay_factor": repr(float(p.delay_factor)),
            "max_delay": repr(float(p.max_delay)),
            "host_concurrency": str(p.host_concurrency),
            "max_crawl_delay": repr(float(p.max_crawl_delay)),
            "max_failures": str(p.max_failures),
            "failure_window": f"{p.failure_window}:{p.window_failures}",
            "front_queues": str(FRONT_QUEUES),
            "partitions": str(self.partition_count),
            "seen": f"{'bloom' if seen.bloom else 'exact'}:{seen.capacity}",
            "max_url_length": str(self.config.max_url_length),
            "max_repeated_segments": str(self.config.max_repeated_segments),
            "priority_policy": self.config.priority_policy,
        }

    def _seen_config(self, client: Any) -> SeenSetConfig:
        """Each partition's seen-set: its share of ``FRONTIER_SEEN_EXACT_LIMIT``; -1 keeps exact
        buckets even where the server has RedisBloom."""
        limit = self.config.seen_exact_limit
        exact = limit < 0
        if exact:
            limit = EXACT_LAYOUT_SIZE
        return SeenSetConfig(
            capacity=max(1, limit // self.partition_count),
            error=SEEN_ERROR,
            bloom=not exact and has_bloom_module(client),
        )

    def reset(self, client: Any) -> int:
        """Delete every key of the crawl (FRONTIER_RESET); returns how many. SCAN, so Redis
        is never blocked for long; UNLINK, so big keys are freed in the background."""
        patterns = self.keys.patterns() + [  # the crawl's, its shards' and near-duplicates'
            glob_escape(PartitionKeys(self.key, i, self.partition_count).prefix) + ":*"
            for i in range(self.partition_count)
        ]
        deleted = 0
        for pattern in patterns:
            found = client.scan_iter(match=pattern, count=1000)
            while batch := list(islice(found, 500)):
                deleted += client.unlink(*batch)
        return deleted

    def partitioned_frontier(
        self,
        client: Any,
        *,
        lease_ttl: float,
        max_pages_per_host: int | None,
        on_give_up: Any = None,
        clock: Any = None,
    ) -> PartitionedFrontier:
        config, s = self._seen_config(client), self.settings
        return PartitionedFrontier(
            client,
            self.key,
            self.partition_count,
            worker_id(s.get("JOBDIR"), s.get("RECORD_WORKER_ID")),
            build=partial(self.mercator, lease_ttl=lease_ttl, back_queues=self.back_queues,
                          max_pages_per_host=max_pages_per_host, on_give_up=on_give_up,
                          clock=clock),
            seen=config,
            front_queues=FRONT_QUEUES,
            lease_ttl=lease_ttl,
            partition_ttl=PARTITION_TTL,
            replicas=self.config.replica_wait,
            back_queues=self.back_queues,  # shared over the owned partitions at each beat
            keep_alive=True,
            clock=clock or time.monotonic,
        )

    def open_frontier(
        self,
        *,
        lease_ttl: float | None = None,
        max_pages_per_host: int | None = None,
        callbacks: FrontierCallbacks | None = None,
    ) -> Frontier:
        """The crawl's frontier for this worker, returned at once: its worker thread connects,
        checks the crawl and claims partitions, retried while Redis is away, so the reactor
        never waits for Redis; what the crawl queues meanwhile is sent once it is open."""
        cb = callbacks or FrontierCallbacks()
        ttl = lease_ttl or self.config.lease_ttl
        inboxes: list[SharedInbox] = []
        reset = [self.config.reset]

        def opening() -> Frontier:
            client = redis_client(self.settings)
            if reset[0]:  # once, even if the opening is retried
                logger.warning("FRONTIER_RESET: crawl %r starts afresh (%d keys removed)",
                               self.key, self.reset(client))
                reset[0] = False
            problems = check_crawl(client, self.keys.meta, self.key, self.fingerprint(client))
            if problems:
                raise RuntimeError(problems[0])
            inner = self.partitioned_frontier(
                client,
                lease_ttl=ttl,
                max_pages_per_host=max_pages_per_host,
                on_give_up=_from_thread(cb.on_give_up),
            )
            scope = RedisScopeRegistry(client, self.keys.scope)
            inboxes.append(SharedInbox(client, self.keys.seeds, scope,
                                       on_seeds=_from_thread(cb.on_seeds),
                                       on_scope=_from_thread(cb.on_scope)))
            logger.info(
                "Frontier: Redis at %s, crawl %r in %d partitions, %d owned by this worker",
                safe_url(self.settings), self.key, self.partition_count, len(inner.parts),
            )
            return inner

        return BufferedFrontier(
            opener=opening,
            lease_ttl=ttl,
            read_ahead=self.config.read_ahead,
            refresh=REFRESH,
            max_wait=LEASE_MAX_WAIT,
            notify=_from_thread(cb.notify),
            on_added=_from_thread(cb.on_added),
            on_completed=_from_thread(cb.on_completed),
            # said on the worker's thread (logging is thread-safe): no reactor needed to run
            on_error=lambda exc: logger.error("Redis frontier call failed: %s", exc),
            poll=lambda: poll_inbox(inboxes[-1]) if inboxes else False,
            transient=is_transient,
            linger=BATCH_LINGER,
        )


def poll_inbox(inbox: SharedInbox) -> bool:
    """The frontier's poll of ``inbox``. The seeds' list moved to another master by a
    reshard (``MOVED``, ``ASK``; ``TRYAGAIN`` too: the inbox's :class:`TryAgainError`, the
    map of slots read again) is not Redis away, which the frontier's worker would say of any
    error raised here: the poll goes again at once, to where the list is now (nothing was
    handed over). A second one is left to the worker's retries (a slot being moved for a
    while)."""
    try:
        return inbox.poll()
    except TryAgainError:
        return inbox.poll()


def away(exc: BaseException) -> bool:
    """Redis is not there for now (:func:`is_transient`), but not a certificate refused or a
    host name unknown (redis-py's error, a cluster's too, comes from an ``ssl.SSLError`` or a
    ``socket.gaierror``): a mistake more likely than a server on its way."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError | socket.gaierror):
            return False
        seen = seen.__cause__ or seen.__context__
    return is_transient(exc)
