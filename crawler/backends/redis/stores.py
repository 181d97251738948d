"""The Redis backends: several ``scrapy crawl`` workers, one polite crawl.

``FRONTIER_BACKEND=redis`` with ``REDIS_URL`` (and ``REDIS_PARAMS``, as in scrapy-redis) makes
every process a worker of one crawl. What it shares, all under one hash tag ``{<site>}``
(``FRONTIER_REDIS_KEY`` overrides the site name), so a crawl lives on one Redis Cluster slot
and two crawls share a Redis without touching each other:

* the frontier (:class:`crawler.backends.redis.frontier.RedisFrontier`), served to the reactor by a
  :class:`crawler.frontier.buffered.BufferedFrontier`, so no Redis round trip ever runs on the
  reactor thread while the crawl runs;
* the scope: hosts seeds brought in (redirects included), in ``{key}:scope``;
* robots.txt files (:class:`RedisRobotsCache`, ``{key}:robots``);
* seeds pushed while the crawl runs to the list ``<site>:start_urls`` (scrapy-redis's key, no
  hash tag): every worker takes its share.

State stays after the crawl, like scrapy-redis's ``SCHEDULER_PERSIST``: running a finished
crawl again fetches only what is queued or due; ``FRONTIER_RESET=True`` starts it afresh.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack
import redis
from scrapy.settings import BaseSettings
from scrapy_redis.connection import get_redis_from_settings

from crawler.backends.memory import FrontierCallbacks, MemoryFrontierStore
from crawler.backends.redis.frontier import RedisFrontier, bloom_params
from crawler.config import defaults
from crawler.frontier import Frontier
from crawler.frontier.buffered import BufferedFrontier
from crawler.frontier.politeness import politeness_from_settings
from crawler.frontier.scope import ScopeRegistry
from crawler.net.credentials import without_password
from crawler.robots.cache import RobotsCache, SharedOrigin
from crawler.robots.rules import DISALLOW_ALL, RobotsRecord

if TYPE_CHECKING:
    from crawler.backends.redis.neardup import RedisNearDuplicateDetector

logger = logging.getLogger(__name__)

START_URLS_KEY = "%(name)s:start_urls"  # scrapy-redis's key for seeding a running crawl
SEED_BATCH = 100  # seeds one worker takes from the list at a time
# B for a shared crawl when FRONTIER_BACK_QUEUES is 0: Mercator's 3 x fetches in flight, for up
# to about 20 workers of 16 concurrent requests. Every worker must use the same B.
SHARED_BACK_QUEUES = 1024


def redis_password(settings: BaseSettings) -> str | None:
    """The Redis password from ``REDIS_PASSWORD_FILE`` (a file's first line) or the environment
    variable named by ``REDIS_PASSWORD_ENV``, so it need not be in ``REDIS_URL``: scrapyd logs a
    job's arguments and ``ps`` shows a command line. None when neither is set."""
    path = settings.get("REDIS_PASSWORD_FILE", defaults.REDIS_PASSWORD_FILE)
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"REDIS_PASSWORD_FILE: cannot read {path}: {exc.strerror}") from None
    name = settings.get("REDIS_PASSWORD_ENV", defaults.REDIS_PASSWORD_ENV)
    if name:
        if name not in os.environ:
            raise ValueError(f"REDIS_PASSWORD_ENV: the environment has no variable {name}")
        return os.environ[name]
    return None


def redis_client(settings: BaseSettings) -> redis.Redis:
    """A client as scrapy-redis builds it from ``REDIS_URL`` / ``REDIS_PARAMS`` (``rediss://``
    for TLS), returning bytes (the frontier's entries are msgpack); the password, if it comes
    from a file or the environment (:func:`redis_password`), joins ``REDIS_PARAMS``."""
    password = redis_password(settings)
    if password is not None:
        settings = settings.copy()
        settings.frozen = False  # a copy of the crawl's (frozen) settings, for this client only
        settings.set(
            "REDIS_PARAMS", {**settings.getdict("REDIS_PARAMS"), "password": password}, "cmdline"
        )
    client = get_redis_from_settings(settings)
    if client.get_connection_kwargs().get("decode_responses"):
        raise ValueError("REDIS_PARAMS: decode_responses must be off for the Redis frontier")
    return client


def safe_url(settings: BaseSettings) -> str:
    """``REDIS_URL`` without its password, for messages and logs."""
    url = settings.get("REDIS_URL") or (
        f"redis://{settings.get('REDIS_HOST') or 'localhost'}:{settings.get('REDIS_PORT') or 6379}"
    )
    return without_password(url)


def worker_name() -> str:
    """This worker's name in leases and heartbeats: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def crawl_key(settings: BaseSettings, site: str) -> str:
    return settings.get("FRONTIER_REDIS_KEY") or site


def _from_thread(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A callback the frontier's worker thread may call: it runs on the reactor thread."""
    if fn is None:
        return None
    from twisted.internet import reactor  # the one Scrapy installed, imported once it runs

    return lambda *args: reactor.callFromThread(fn, *args)  # type: ignore[attr-defined]


class RedisFrontierStore(MemoryFrontierStore):
    """``FRONTIER_STORE_CLASS`` of the ``redis`` backend."""

    persistent = True  # queued requests travel as msgpack through Redis

    def __init__(self, settings: BaseSettings, site: str) -> None:
        super().__init__(settings)
        self.site = site
        self.key = crawl_key(settings, site)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisFrontierStore:
        return cls(crawler.settings, getattr(crawler.spidercls, "name", None) or "crawl")

    @classmethod
    def preflight(cls, crawler: Any) -> list[str]:
        """Refuse a crawl that cannot work: Redis unreachable, a policy that may evict the
        frontier, another layout, or politeness settings that differ from the crawl's."""
        return cls.from_crawler(crawler).check()

    def scope(self) -> ScopeRegistry:
        return RedisScopeRegistry(redis_client(self.settings), self.key)

    def check(self) -> list[str]:
        where = safe_url(self.settings)
        try:
            client = redis_client(self.settings)
            client.ping()
        except (redis.RedisError, OSError, ValueError) as exc:
            return [f"Redis at {where} is not reachable: {exc}"]
        problems = []
        try:
            reply = client.config_get("maxmemory-policy")
            policy = next(iter(reply.values()), b"") if reply else b""
            policy = policy.decode() if isinstance(policy, bytes) else str(policy)
        except redis.ResponseError:
            policy = None  # CONFIG is disabled (a managed Redis): the operator's word counts
        if policy is not None and policy != "noeviction":
            problems.append(
                f"Redis at {where} has maxmemory-policy {policy or '?'}: eviction would "
                "silently drop queued URLs; set it to noeviction"
            )
        if self.settings.getbool("FRONTIER_RESET"):
            return problems  # the stored crawl goes: nothing to compare with
        try:
            frontier = self._redis_frontier(
                client, lease_ttl=defaults.FRONTIER_LEASE_TTL, max_pages_per_host=None
            )
        except RuntimeError as exc:  # another layout
            return [*problems, str(exc)]
        mismatches = frontier.check_compatible(self.scope_fingerprint())
        problems += [f"crawl {self.key!r} was started with other settings: {m}" for m in mismatches]
        return problems

    def scope_fingerprint(self) -> dict[str, str]:
        """What every worker's URL scope must agree on besides politeness."""
        s = self.settings
        return {
            "max_url_length": str(s.getint("URL_MAX_LENGTH", defaults.URL_MAX_LENGTH)),
            "max_repeated_segments": str(s.getint(
                "URL_MAX_REPEATED_SEGMENTS", defaults.URL_MAX_REPEATED_SEGMENTS
            )),
            "priority_policy": str(s.get(
                "FRONTIER_PRIORITY_POLICY", defaults.FRONTIER_PRIORITY_POLICY
            )),
            "seen_bloom": str(_seen_bloom(s)),
        }

    def _redis_frontier(
        self,
        client: redis.Redis,
        *,
        lease_ttl: float,
        max_pages_per_host: int | None,
        on_give_up: Callable[[str, str, int], None] | None = None,
    ) -> RedisFrontier:
        s = self.settings
        return RedisFrontier(
            client,
            self.key,
            politeness_from_settings(s),
            front_queues=s.getint("FRONTIER_FRONT_QUEUES", defaults.FRONTIER_FRONT_QUEUES),
            back_queues=s.getint(
                "FRONTIER_BACK_QUEUES", defaults.FRONTIER_BACK_QUEUES
            ) or SHARED_BACK_QUEUES,
            max_pages_per_host=max_pages_per_host,
            lease_ttl=lease_ttl,
            worker_id=worker_name(),
            seen_bloom=_seen_bloom(s),
            on_give_up=on_give_up,
        )

    def operator_frontier(self) -> RedisFrontier:
        """The crawl's frontier for ``scrapy frontier`` (reports and controls): no worker
        thread, no read-ahead, nothing leased."""
        return self._redis_frontier(
            redis_client(self.settings),
            lease_ttl=defaults.FRONTIER_LEASE_TTL,
            max_pages_per_host=None,
        )

    def open_frontier(
        self,
        *,
        lease_ttl: float = defaults.FRONTIER_LEASE_TTL,
        max_pages_per_host: int | None = None,
        callbacks: FrontierCallbacks | None = None,
    ) -> Frontier:
        cb = callbacks or FrontierCallbacks()
        client = redis_client(self.settings)
        on_give_up = _from_thread(cb.on_give_up)  # the scripts run on the worker thread
        inner = self._redis_frontier(
            client,
            lease_ttl=lease_ttl,
            max_pages_per_host=max_pages_per_host,
            on_give_up=on_give_up,
        )
        if self.settings.getbool("FRONTIER_RESET"):
            removed = inner.reset()
            logger.warning(
                "FRONTIER_RESET: crawl %r starts afresh (%d keys removed)", self.key, removed
            )
            inner = self._redis_frontier(
                client,
                lease_ttl=lease_ttl,
                max_pages_per_host=max_pages_per_host,
                on_give_up=on_give_up,
            )
        inner.check_compatible(self.scope_fingerprint())  # the first worker stores them
        inbox = SharedInbox(
            client,
            START_URLS_KEY % {"name": self.site},
            RedisScopeRegistry(client, self.key),
            on_seeds=_from_thread(cb.on_seeds),
            on_scope=_from_thread(cb.on_scope),
        )
        logger.info(
            "Frontier: Redis at %s, crawl %r (%d URLs queued, %d leases open)",
            safe_url(self.settings),
            self.key,
            len(inner),
            inner.in_flight(),
        )
        return BufferedFrontier(
            inner,
            read_ahead=self.settings.getint("FRONTIER_READ_AHEAD", defaults.FRONTIER_READ_AHEAD),
            refresh=self.settings.getfloat(
                "FRONTIER_REFRESH_INTERVAL", defaults.FRONTIER_REFRESH_INTERVAL
            ),
            max_wait=self.settings.getfloat(
                "FRONTIER_LEASE_MAX_WAIT", defaults.FRONTIER_LEASE_MAX_WAIT
            ),
            notify=_from_thread(cb.notify),
            on_added=_from_thread(cb.on_added),
            on_completed=_from_thread(cb.on_completed),
            on_error=_from_thread(_log_redis_error),
            poll=inbox.poll,
            transient=(redis.ConnectionError, redis.TimeoutError),
        )


def _seen_bloom(settings: BaseSettings) -> tuple[int, int] | None:
    """``FRONTIER_SEEN_BLOOM_CAPACITY`` > 0: the seen-set is a Bloom filter of that capacity
    at ``FRONTIER_SEEN_BLOOM_ERROR`` (bits, probes); else None (an exact SET)."""
    capacity = settings.getint(
        "FRONTIER_SEEN_BLOOM_CAPACITY", defaults.FRONTIER_SEEN_BLOOM_CAPACITY
    )
    if capacity <= 0:
        return None
    error = settings.getfloat("FRONTIER_SEEN_BLOOM_ERROR", defaults.FRONTIER_SEEN_BLOOM_ERROR)
    return bloom_params(capacity, error)


def _log_redis_error(exc: BaseException) -> None:
    logger.error("Redis frontier call failed: %s", exc)


class RedisScopeRegistry(ScopeRegistry):
    """The crawl's scope hosts in ``{key}:scope``: a seed given to any worker, and the host it
    redirects to, are in scope for all of them."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.set = "{" + key + "}:scope"

    def load(self) -> set[str]:
        return {h.decode() for h in self.client.smembers(self.set)}

    def add(self, host: str) -> None:
        self.client.sadd(self.set, host)  # rare (seeds): one round trip is fine

    def size(self) -> int:
        return int(self.client.scard(self.set))


class SharedInbox:
    """What other workers and operators put in Redis for every worker, read on the frontier's
    worker thread at each housekeeping: seeds pushed to ``<site>:start_urls`` (popped, so each
    goes to one worker; the frontier's seen-test decides as for any seed) and hosts other
    workers brought into scope."""

    def __init__(
        self,
        client: redis.Redis,
        seeds_key: str,
        scope: RedisScopeRegistry,
        *,
        on_seeds: Callable[[list[str]], None] | None,
        on_scope: Callable[[set[str]], None] | None,
    ) -> None:
        self.client = client
        self.seeds_key = seeds_key
        self.scope = scope
        self.on_seeds = on_seeds
        self.on_scope = on_scope
        self._scope_size = -1

    def poll(self) -> bool:
        """Hand over news; True while seeds are still waiting in the list (work to come)."""
        pipe = self.client.pipeline(transaction=False)  # one round trip for the news
        pipe.scard(self.scope.set)
        if self.on_seeds is not None:
            pipe.lpop(self.seeds_key, SEED_BATCH)
            pipe.llen(self.seeds_key)
        replies = pipe.execute()
        if self.on_scope is not None and replies[0] != self._scope_size:
            self._scope_size = replies[0]
            self.on_scope(self.scope.load())
        if self.on_seeds is None:
            return False
        raw, left = replies[1], replies[2]
        if raw:
            urls = [u.decode("utf-8", "replace").strip() for u in raw]
            self.on_seeds([u for u in urls if u])
        return bool(left)


# An origin's shared fetch state, ``{key}:robots_state`` field origin -> msgpack
# [claim_until, retry_at, failures, gave_up], in Redis's own time (the workers' clocks never
# meet). Each script returns [state, seconds, failures]: state "claimed", "fetching" (seconds
# until that claim lapses), "unreachable" (seconds until the retry is due), "gave_up", "none".
_ROBOTS_PRELUDE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local st = {0, 0, 0, 0}
if raw then st = cmsgpack.unpack(raw) end
local function fmt(x) return string.format('%.17g', x) end
local function verdict()
  if st[4] == 1 then return {'gave_up', '0', st[3]} end
  if st[1] > now then return {'fetching', fmt(st[1] - now), st[3]} end
  if raw and st[2] > 0 then return {'unreachable', fmt(math.max(0, st[2] - now)), st[3]} end
  return nil
end
"""
_ROBOTS_SCRIPTS = {
    "claim": _ROBOTS_PRELUDE + r"""
local v = verdict()
if v and (v[1] ~= 'unreachable' or st[2] > now) then return v end
st[1] = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st))
return {'claimed', '0', st[3]}
""",
    "peek": _ROBOTS_PRELUDE + r"""
return verdict() or {'none', '0', st[3]}
""",
    "failed": _ROBOTS_PRELUDE + r"""
if ARGV[2] == '' then st = {0, 0, tonumber(ARGV[3]), 1}
else st = {0, now + tonumber(ARGV[2]), tonumber(ARGV[3]), 0} end
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st))
return {'unreachable', ARGV[2], st[3]}
""",
    "unclaim": _ROBOTS_PRELUDE + r"""
if raw and st[1] > 0 then
  st[1] = 0
  if st[2] == 0 and st[3] == 0 and st[4] == 0 then redis.call('HDEL', KEYS[1], ARGV[1])
  else redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(st)) end
end
return {'none', '0', st[3]}
""",
}


def _shared_origin(reply: list[Any]) -> SharedOrigin:
    state, seconds, failures = reply[0].decode(), float(reply[1] or 0), int(reply[2])
    if state == "claimed":
        return SharedOrigin(True, failures=failures)
    if state == "fetching":
        return SharedOrigin(False, fetching_for=max(seconds, 1e-3), failures=failures)
    if state == "unreachable":
        return SharedOrigin(False, retry_in=seconds, failures=failures)
    if state == "gave_up":
        return SharedOrigin(False, failures=failures, gave_up=True)
    return SharedOrigin(False, failures=failures)


class RedisRobotsCache(RobotsCache):
    """``ROBOTS_CACHE_CLASS`` of the ``redis`` backend: one HASH of records for the crawl, so
    robots.txt is fetched once per host whichever worker gets there first, and one HASH of
    each origin's fetch state (claimed by a worker, unreachable until a retry, failures, given
    up), so a failing robots.txt is fetched once per retry period for the whole crawl and
    every worker holds the host meanwhile.

    Read once per origin and worker (the robots book keeps what it read), plus a claim per
    fetch and a look per retry; each is one round trip on the reactor thread (~0.1 ms), rare
    enough not to matter next to the fetch it saves.

    While Redis is away (a restart), each worker acts alone rather than failing the page that
    asked: no copy is found, a claim is granted, a fetched copy is kept only locally (one line
    when Redis goes away, one when it is back)."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.hash = "{" + key + "}:robots"
        self.state_hash = "{" + key + "}:robots_state"
        self._scripts = {n: client.register_script(src) for n, src in _ROBOTS_SCRIPTS.items()}
        self._away = False  # Redis was unreachable at the last call

    def _safe(self, fn: Callable[[], Any], default: Any) -> Any:
        try:
            value = fn()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if not self._away:
                self._away = True
                logger.warning("robots.txt state in Redis unreachable (%s): acting alone", exc)
            return default
        if self._away:
            self._away = False
            logger.warning("robots.txt state in Redis reachable again")
        return value

    def _run(self, name: str, *args: Any) -> SharedOrigin | None:
        script = self._scripts[name]
        reply = self._safe(lambda: script(keys=[self.state_hash], args=list(args)), None)
        return None if reply is None else _shared_origin(reply)

    def claim(self, origin: str, seconds: float) -> SharedOrigin:
        return self._run("claim", origin, repr(float(seconds))) or SharedOrigin(True)

    def peek(self, origin: str) -> SharedOrigin | None:
        shared = self._run("peek", origin)
        if shared is None or not (
            shared.fetching_for or shared.gave_up or shared.retry_in is not None
        ):
            return None
        return shared

    def failed(self, origin: str, retry_in: float | None, failures: int) -> None:
        self._run("failed", origin, "" if retry_in is None else repr(float(retry_in)), failures)

    def unclaim(self, origin: str) -> None:
        self._run("unclaim", origin)

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> RedisRobotsCache:
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        return cls(redis_client(crawler.settings), crawl_key(crawler.settings, site))

    def get(self, origin: str) -> RobotsRecord | None:
        raw = self._safe(lambda: self.client.hget(self.hash, origin), None)
        if raw is None:
            return None
        try:
            return RobotsRecord(*msgpack.unpackb(raw, raw=False))
        except (ValueError, TypeError):
            return None

    def put(self, record: RobotsRecord) -> None:
        if record.kind == DISALLOW_ALL:
            return
        packed = msgpack.packb(
            [
                record.origin,
                record.kind,
                record.status,
                record.fetched_at,
                record.expires_at,
                record.body,
            ]
        )
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.hash, record.origin, packed)
        pipe.hdel(self.state_hash, record.origin)  # read: no claim, no failure left
        self._safe(pipe.execute, None)

    def __len__(self) -> int:
        return int(self.client.hlen(self.hash))

    def close(self) -> None:
        self.client.close()


class RedisNearDuplicateStore:
    """``NEARDUP_STORE_CLASS`` of the ``redis`` backend: builds the shared near-duplicate
    detector (:class:`crawler.backends.redis.neardup.RedisNearDuplicateDetector`) of the crawl,
    under the crawl's hash tag, from the crawl's ``REDIS_URL`` and ``NEARDUP_*`` settings."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisNearDuplicateDetector:
        # imported here: the frontier's workers need not load the near-duplicate module
        from crawler.backends.redis.neardup import RedisNearDuplicateDetector

        s = crawler.settings
        site = getattr(crawler.spidercls, "name", None) or "crawl"
        return RedisNearDuplicateDetector(
            redis_client(s),
            crawl_key(s, site),
            shingle_size=s.getint("NEARDUP_SHINGLE_SIZE", defaults.NEARDUP_SHINGLE_SIZE),
            num_perm=s.getint("NEARDUP_NUM_PERM", defaults.NEARDUP_NUM_PERM),
            threshold=s.getfloat("NEARDUP_THRESHOLD", defaults.NEARDUP_THRESHOLD),
            capacity=s.getint("NEARDUP_SHARED_CAPACITY", defaults.NEARDUP_SHARED_CAPACITY),
        )
