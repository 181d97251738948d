"""Resolve names with the crawl's DNS service in a process of its own (it needs a reactor), and
print what it found: ``python -m tests.dns_probe SPEC.json``. The spec names the DNS server, the
service's settings, names to look up ahead (``prefetch``, then a pause), the names to ask (all
at once, in ``rounds`` with a pause between) and, optionally, a Redis crawl to share answers
through.

With ``held`` (a name), the spec plays two workers in this process instead: the first's only
lookup slot is held busy after it claims the name, longer than a claim's term; the second then
asks for the name, and the slot is freed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy.settings import Settings  # noqa: E402
from twisted.internet import defer, reactor, task  # noqa: E402

from crawler.backends.redis.connection import redis_client  # noqa: E402
from crawler.download.dns import DnsService, ttl_bounds  # noqa: E402
from crawler.net.dns import DnsCache, NoSharedDns  # noqa: E402


class _Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


def worker(spec: dict, stats: _Stats) -> DnsService:
    """The DNS service of a worker, sharing answers through ``redis_url`` if given."""
    settings = Settings(spec.get("settings", {}))
    shared = NoSharedDns()
    if spec.get("redis_url"):
        from crawler.backends.redis.dns import RedisDnsCache

        shared = RedisDnsCache(redis_client(Settings({"REDIS_URL": spec["redis_url"]})), "dnscrawl")
    return DnsService(
        servers=[spec["server"]],
        timeout=settings.getfloat("DNS_TIMEOUT", 2.0),
        cache=DnsCache(ttl_bounds(settings)),
        shared=shared,
        stats=stats,
        concurrency=spec.get("concurrency", 100),
        prefetch=spec.get("prefetch_max", 0),
    )


async def held(spec: dict, first: DnsService, out: dict) -> None:
    """See the module docstring: the claim must outlive the wait for a slot, so the second
    worker waits for the first's answer rather than asking too."""
    name, stats = spec["held"], _Stats()
    second = worker(spec, stats)
    claim = f"{{dnscrawl}}:dns:{name}:claim"
    with redis_client(Settings({"REDIS_URL": spec["redis_url"]})) as client:
        await first.limit.acquire()  # its only slot is busy
        asked = first.resolve(name)  # claimed, then waiting for the slot
        since = time.monotonic()
        # until the claim lapsed or outlived its term (a poll, not a pause: the claim's end)
        while client.pttl(claim) > 0 and time.monotonic() < since + 1.5 * first.timeout:
            await task.deferLater(reactor, 0.02, lambda: None)
        out["claim_outlived_its_term"] = client.pttl(claim) > 0
    waiting = second.resolve(name)  # its first look is made now, the slot still busy
    first.limit.release()
    answers = await defer.gatherResults([asked, waiting])
    out["rounds"].append([[a.address, a.ttl, a.error] for a in answers])
    out["second_stats"] = stats.values
    second.close()


def main(spec: dict) -> None:
    stats = _Stats()
    service = worker(spec, stats)
    out: dict = {"rounds": [], "answered": []}
    service.on_answer = lambda name, address: out["answered"].append(name)

    async def run() -> None:
        if spec.get("held"):
            return await held(spec, service, out)
        for name in spec.get("prefetch", []):
            service.prefetch(name)
        while service.prefetching():  # the lookups ahead are done: the event, not a pause
            await task.deferLater(reactor, 0.02, lambda: None)
        for i, names in enumerate(spec["rounds"]):
            if i:
                await task.deferLater(reactor, spec.get("pause", 0), lambda: None)
            answers = await defer.gatherResults([service.resolve(n) for n in names])
            out["rounds"].append([[a.address, a.ttl, a.error] for a in answers])

    def done(result: object) -> None:
        if not isinstance(result, type(None)):
            out["error"] = str(result)
        out["stats"] = stats.values
        service.close()
        print(json.dumps(out), flush=True)
        reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(run()).addBoth(done))
    reactor.run()


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
