"""A worker that went silent hands its leases back at once, not after the lease TTL.

A killed worker (SIGKILL, a lost machine) leaves its leases open: each one holds its host's
slot, and only ``FRONTIER_LEASE_TTL`` brings them back. Every worker already beats into
``{crawl}:workers`` (``crawler.backends.redis.status.Fleet``); after its own beat a worker looks
at the others' and, for one running or paused whose last beat is older than
``FLEET_WORKER_LOST_AFTER``, claims it lost (one script on the crawl's tag: only one worker
claims it, and not if it beat meanwhile) and marks every lease it holds, in every shard, as
expired now. The frontier's next call by any worker requeues them as an expired lease is
requeued (the host's slot rests its delay first: the server may have seen the request).

A worker that was only stalled (not dead) beats again and is "running" again; its reaped pages
may then be fetched twice, the price of not waiting minutes. Right after an outage of Redis
every beat is old, so a worker reaps only when its own previous beat was recent: the others
have had the same chance to beat since Redis came back.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from crawler.backends.redis.keys import CrawlKeys

logger = logging.getLogger(__name__)

# KEYS: workers. ARGV: worker id, Redis time before which its last beat means lost.
# 1 when this call claimed it (its state now "lost").
CLAIM = r"""
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local beat = cjson.decode(raw)
if (beat.state ~= 'running' and beat.state ~= 'paused') or beat.beat >= tonumber(ARGV[2]) then
  return 0
end
beat.state = 'lost'
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(beat))
return 1
"""

# KEYS: one shard's lease hash and lease deadlines. ARGV: worker id. The leases it holds
# expire now (deadline 0): the shard's next call requeues them. Returns how many.
REAP = r"""
local n = 0
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local rec = cmsgpack.unpack(flat[i + 1])
  if rec[7] == ARGV[1] and redis.call('ZSCORE', KEYS[2], flat[i]) then
    redis.call('ZADD', KEYS[2], 0, flat[i])
    n = n + 1
  end
end
return n
"""


class LostWorkers:
    """See the module docstring. ``lost_after``: seconds of silence (0: never reap)."""

    def __init__(self, client: Any, keys: CrawlKeys, worker_id: str, lost_after: float) -> None:
        self.keys = keys
        self.client = client
        self.worker_id = worker_id
        self.lost_after = lost_after
        self._claim = client.register_script(CLAIM)
        self._reap = client.register_script(REAP)
        self._last_beat: float | None = None

    def after_beat(self, now: float, interval: float) -> dict[str, int]:
        """Called after each successful beat (``now``: Redis's time): the workers reaped now,
        with how many leases each held."""
        previous, self._last_beat = self._last_beat, now
        if self.lost_after <= 0 or previous is None or now - previous > 2 * interval + 1:
            return {}  # first beat, or this worker was cut off too: the others may be fine
        reaped: dict[str, int] = {}
        for wid, raw in self.client.hgetall(self.keys.workers).items():
            name = wid.decode() if isinstance(wid, bytes) else wid
            if name == self.worker_id:
                continue
            beat = json.loads(raw)
            if beat.get("state") not in ("running", "paused"):
                continue
            silent = now - float(beat.get("beat", now))
            if silent <= self.lost_after:
                continue
            if not self._claim(keys=[self.keys.workers], args=[name, repr(now - self.lost_after)]):
                continue
            leases = sum(
                int(self._reap(keys=[shard.lease, shard.leases], args=[name]))
                for shard in self.keys.shards()
            )
            reaped[name] = leases
            logger.warning(
                "Worker %s silent for %.0f s (FLEET_WORKER_LOST_AFTER %.0f s): taken for lost, "
                "its %d leases handed to the other workers now",
                name, silent, self.lost_after, leases,
            )  # fmt: skip
        return reaped
