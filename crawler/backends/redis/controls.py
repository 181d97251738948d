"""The operator's controls over a shared crawl (``scrapy frontier <site> block|unblock|pause|
resume|deadline|budget``): every worker obeys them inside the frontier's scripts and hears of
them at once on the wake channel.

A part of :class:`crawler.backends.redis.frontier.RedisFrontier` (a mixin), kept apart because
it is the operator's side of the frontier, not the crawl's.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import redis

from crawler.backends.redis.keys import FrontierKeys


class OperatorControls:
    """Blocks of hosts and domains, pause, deadline and byte budget. Needs the frontier's
    client, keys, script call, clock and host walk."""

    client: redis.Redis
    keys: FrontierKeys
    _call: Callable[..., Any]
    _now: Callable[[], float]
    _iter_hosts: Callable[[], Iterable[list[str]]]

    def block(self, name: str, *, domain: bool = False) -> int:
        """Block a host, or a domain with all its hosts: their queued URLs are dropped
        (returned, and counted in ``drop:host_blocked``), no URL of theirs is admitted or
        handed out again, by any worker. A domain block is recorded first (hosts met later
        are blocked as they come), then the known hosts are walked with SSCAN, one script
        call per matching host: no script walks the host set. ``name`` is read as
        :func:`host_name` reads it (a port or a URL around it is dropped)."""
        name = host_name(name)
        if not domain:
            return int(self._call("block", name, "1"))
        self.client.hset(self.keys.blocked, "d:" + name, repr(self._now()))
        dropped = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    dropped += int(self._call("block", host, "0"))
        self.client.publish(self.keys.wake, "ctl")
        return dropped

    def unblock(self, name: str, *, domain: bool = False) -> int:
        """Lift a block; returns how many hosts may be crawled again (a host also blocked by
        name or by another domain stays blocked). URLs dropped by the block stay dropped."""
        name = host_name(name)
        if not domain:
            return int(self._call("unblock", name, "1"))
        self.client.hdel(self.keys.blocked, "d:" + name)
        lifted = 0
        for hosts in self._iter_hosts():
            for host in hosts:
                if _in_domain(host, name):
                    lifted += int(self._call("unblock", host, "0"))
        return lifted

    def set_control(self, name: str, value: float | None, *, relative: bool = False) -> str:
        """Set (None: clear) one control: ``paused`` (1), ``deadline`` (Redis time, or
        seconds from now with ``relative``), ``budget`` (bytes). Every worker hears of it at
        once (the wake channel) and obeys it inside the scripts. Returns the crawl's halt."""
        if name not in ("paused", "deadline", "budget"):
            raise ValueError(f"no such control: {name}")
        text = "" if value is None else repr(float(value)) if name == "deadline" else str(
            int(value)
        )
        _, halt = self._call("control", name, text, "rel" if relative else "abs")
        return halt.decode()

    def controls(self) -> dict[str, Any]:
        """The operator's controls as stored: paused, deadline (Redis time), byte budget and
        bytes so far, blocked hosts and domains."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.controls)
        pipe.hget(self.keys.stats, "bytes")
        pipe.hkeys(self.keys.blocked)
        ctl, size, blocked = pipe.execute()
        ctl = {k.decode(): v.decode() for k, v in ctl.items()}
        names = sorted(b.decode() for b in blocked)
        return {
            "paused": ctl.get("paused") == "1",
            "deadline": float(ctl["deadline"]) if "deadline" in ctl else None,
            "byte_budget": int(ctl["budget"]) if "budget" in ctl else None,
            "bytes": int(size or 0),
            "blocked_hosts": [n[2:] for n in names if n.startswith("h:")],
            "blocked_domains": [n[2:] for n in names if n.startswith("d:")],
        }


def host_name(text: str) -> str:
    """The name the frontier keys a host by (politeness, blocks and reports are per host
    name, whatever the port): ``127.0.1.3:8080``, ``http://Example.org:8080/a`` and
    ``example.org.`` are ``127.0.1.3``, ``example.org`` and ``example.org``."""
    text = text.strip()
    if "://" not in text:
        text = "//" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        host = ""
    return (host or text.lstrip("/")).lower().rstrip(".")


def closest_hosts(name: str, hosts: Iterable[list[str]], n: int = 3,
                  limit: int = 200_000) -> tuple[bool, list[str]]:
    """Whether ``name`` is one of ``hosts`` (batches, as the frontier's SSCAN walk gives them),
    and else the known names closest to it (a did-you-mean), looking at ``limit`` at most."""
    seen: list[str] = []
    for batch in hosts:
        for host in batch:
            if host == name:
                return True, []
            seen.append(host)
        if len(seen) >= limit:
            break
    return False, difflib.get_close_matches(name, seen, n=n, cutoff=0.6)


def _in_domain(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)
