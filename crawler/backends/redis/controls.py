"""The operator's controls over a shared crawl (``scrapy frontier <site> block|unblock|pause|
resume|deadline|budget``), kept in Redis so they outlast every worker; the deadline is on
Redis's clock (the workers' clocks never meet).

Each act is announced with ``PUBLISH ctl`` on the wake channel; a worker reads them all at each
beat and when it hears ``ctl``, and obeys them from memory: nothing per URL asks Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from redis.cluster import RedisCluster

from crawler.backends.redis.keys import CrawlKeys
from crawler.frontier.api import Clock

CONTROLS = ("paused", "deadline", "budget")
BLOCK_WAIT = 3.0  # seconds the operator waits for a live owner to say what a block dropped
_POLL = 0.05


class CrawlControls:
    """Both sides of the controls of crawl ``crawl``: the operator's acts, and a worker's view
    as of its last :meth:`refresh` (read by any thread; written by the frontier's)."""

    def __init__(self, client: Any, crawl: str, *, clock: Clock = time.monotonic) -> None:
        self.client = client
        self.keys = CrawlKeys(crawl)
        self.clock = clock
        self._ctl: dict[str, str] = {}
        self._blocked: frozenset[str] = frozenset()
        self._offset = 0.0  # Redis's time minus this clock, as of the last refresh
        self._spent = 0  # bytes downloaded here and not yet added to the crawl's
        self._reported: set[str] = set()  # blocks this worker has said it obeys
        self.blocks = 0  # bumped whenever the blocked names changed: the owners obey again
        self.epoch = 0  # bumped at every act heard on the wake channel
        self.heard = False  # an act was announced since the last refresh

    # -- the operator's side -----------------------------------------------------------------

    def block(self, name: str, *, domain: bool = False, wait: float = BLOCK_WAIT) -> int | None:
        """Block a host, or a domain with all its hosts: no worker admits or hands out a URL of
        it again, and its partition's owner drops its queued URLs. Returns how many, as the
        owner says within ``wait`` seconds, or None (the next owner drops them)."""
        field = ("d:" if domain else "h:") + host_name(name)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.keys.blocked, field, repr(redis_time(self.client, self.keys.controls)))
        pipe.hdel(self.keys.dropped, field)
        pipe.execute()
        self._announce()
        end = time.monotonic() + wait
        while True:
            dropped = self.client.hget(self.keys.dropped, field)
            if dropped is not None or time.monotonic() >= end:
                return None if dropped is None else int(dropped)
            time.sleep(_POLL)

    def unblock(self, name: str, *, domain: bool = False) -> int:
        """Lift a block (1; 0: there was none). The URLs dropped stay dropped (they are seen)."""
        field = ("d:" if domain else "h:") + host_name(name)
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(self.keys.blocked, field)
        pipe.hdel(self.keys.dropped, field)
        lifted, _ = pipe.execute()
        self._announce()
        return int(lifted)

    def set_control(self, name: str, value: float | None, *, relative: bool = False) -> str:
        """Set (None: clear) one control: ``paused`` (1), ``deadline`` (Redis time, or seconds
        from now with ``relative``), ``budget`` (bytes). Returns the crawl's halt now."""
        if name not in CONTROLS:
            raise ValueError(f"no such control: {name}")
        if value is None:
            self.client.hdel(self.keys.controls, name)
        else:
            text = str(int(value))
            if name == "deadline":
                now = redis_time(self.client, self.keys.controls) if relative else 0.0
                text = repr(float(value) + now)
            self.client.hset(self.keys.controls, name, text)
        self._announce()
        self.refresh()
        return self.halted()

    def _announce(self) -> None:  # apart: a cluster's pipeline refuses PUBLISH
        self.client.publish(self.keys.wake, "ctl")

    def controls(self) -> dict[str, Any]:
        """The controls as stored (a :meth:`refresh`), and what each block dropped."""
        self.refresh()
        ctl, names = self._ctl, sorted(self._blocked)
        dropped = self.client.hgetall(self.keys.dropped)
        return {
            "paused": ctl.get("paused") == "1",
            "deadline": float(ctl["deadline"]) if "deadline" in ctl else None,
            "byte_budget": int(ctl["budget"]) if "budget" in ctl else None,
            "bytes": int(ctl.get("bytes", 0)),
            "blocked_hosts": [n[2:] for n in names if n.startswith("h:")],
            "blocked_domains": [n[2:] for n in names if n.startswith("d:")],
            "dropped": {k.decode(): int(v) for k, v in dropped.items()},
        }

    # -- a worker's side ---------------------------------------------------------------------

    def refresh(self) -> None:
        """Send the bytes downloaded since the last refresh and read the controls and blocks in
        one pipelined call; and Redis's clock, apart (a cluster's pipeline refuses ``TIME``),
        while a deadline is set."""
        spent = self._spent
        pipe = self.client.pipeline(transaction=False)
        if spent:
            pipe.hincrby(self.keys.controls, "bytes", spent)
        pipe.hgetall(self.keys.controls)
        pipe.hkeys(self.keys.blocked)
        ctl, blocked = pipe.execute()[-2:]
        self._spent -= spent
        self.heard = False
        ctl = {k.decode(): v.decode() for k, v in ctl.items()}
        if "deadline" in ctl:
            self._offset = redis_time(self.client, self.keys.controls) - self.clock()
        self._ctl = ctl
        names = frozenset(b.decode() for b in blocked)
        if names != self._blocked:
            self._blocked = names
            self._reported &= names
            self.blocks += 1

    def halted(self) -> str:
        """"" (hand out work), "paused", or why the crawl is over: "deadline" or "byte_budget".
        From memory."""
        ctl = self._ctl
        deadline = ctl.get("deadline")
        if deadline is not None and self.clock() + self._offset >= float(deadline):
            return "deadline"
        budget = ctl.get("budget")
        if budget is not None and int(ctl.get("bytes", 0)) + self._spent >= int(budget):
            return "byte_budget"
        return "paused" if ctl.get("paused") == "1" else ""

    def block_of(self, host: str) -> str:
        """The block that holds ``host`` (``h:<host>``, or ``d:<domain>`` for it or one of its
        parent domains, its registered domain among them), or ""."""
        names = self._blocked
        if not names:
            return ""
        if "h:" + host in names:
            return "h:" + host
        domain = host
        while domain:
            if "d:" + domain in names:
                return "d:" + domain
            domain = domain.partition(".")[2]
        return ""

    def blocked(self, host: str) -> bool:
        return bool(self.block_of(host))

    def spend(self, nbytes: int) -> None:  # added to the crawl's at the next refresh
        self._spent += nbytes

    def heard_act(self) -> None:
        """The wake channel said ``ctl`` (an operator acted): the next beat comes at once, and
        :attr:`epoch` moves (the caller hands its read-ahead back)."""
        self.heard = True
        self.epoch += 1

    def obey(
        self,
        parts: Mapping[int, Any],
        guarded: Callable[[Any, Callable[[], Any]], Any],
        shard: Callable[[str], int],
    ) -> None:
        """A partitioned frontier's beat: refresh, then each owned partition (index ->
        :class:`~crawler.backends.redis.partitioned.Partition`) that has not obeyed the blocks
        as they are now obeys them, through ``guarded``. The operator hears what each block
        dropped, and at once that a new block of an owned name is obeyed (0 dropped)."""
        self.refresh()
        counts: dict[str, int] = {}
        for part in list(parts.values()):
            if part.blocks != self.blocks:
                part.blocks = self.blocks
                dropped = guarded(part, lambda p=part: p.frontier.obey_blocks(self.blocked))
                guarded(part, part.store.flush)
                for host, n in (dropped or {}).items():
                    name = self.block_of(host)
                    counts[name] = counts.get(name, 0) + n
        for name in self._blocked - self._reported:
            if shard(name[2:]) in parts:
                counts.setdefault(name, 0)
                self._reported.add(name)
        if counts:
            pipe = self.client.pipeline(transaction=False)
            for name, n in counts.items():
                pipe.hincrby(self.keys.dropped, name, n)
            pipe.execute()


def redis_time(client: Any, key: str | None = None) -> float:
    """Redis's clock in seconds, the one clock of a fleet; with ``key``, on a cluster, that of
    the node serving it (each node keeps its own: what is written with one node's time is
    compared with the same node's, so the crawl-wide controls and heartbeats read the node of
    the crawl's ``{crawl}`` keys, and a partition's times its own node's)."""
    node = client.get_node_from_key(key) if key and isinstance(client, RedisCluster) else None
    seconds, micros = client.time(target_nodes=node) if node else client.time()
    return seconds + micros / 1e6


def host_name(text: str) -> str:
    """The name the frontier keys a host by, whatever the port: ``http://Example.org:8080/a``
    and ``example.org.`` are ``example.org``."""
    text = text.strip()
    if "://" not in text:
        text = "//" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        host = ""
    return (host or text.lstrip("/")).lower().rstrip(".")
