"""Resolve names with the crawl's DNS service in a process of its own (it needs a reactor), and
print what it found: ``python -m tests.dns_probe SPEC.json``. The spec names the DNS server, the
service's settings, names to look up ahead (``prefetch``, then a pause), the names to ask (all
at once, in ``rounds`` with a pause between) and, optionally, a Redis crawl to share answers
through."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy.settings import Settings  # noqa: E402
from twisted.internet import defer, reactor, task  # noqa: E402

from crawler.download.dns import DnsService, ttl_bounds  # noqa: E402
from crawler.net.dns import DnsCache, NoSharedDns  # noqa: E402


class _Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


def main(spec: dict) -> None:
    settings = Settings(spec.get("settings", {}))
    stats = _Stats()
    shared = NoSharedDns()
    if spec.get("redis_url"):
        from crawler.backends.redis.connection import redis_client
        from crawler.backends.redis.dns import RedisDnsCache

        shared = RedisDnsCache(redis_client(Settings({"REDIS_URL": spec["redis_url"]})), "dnscrawl")
    service = DnsService(
        servers=[spec["server"]],
        timeout=settings.getfloat("DNS_TIMEOUT", 2.0),
        cache=DnsCache(ttl_bounds(settings)),
        shared=shared,
        stats=stats,
        concurrency=spec.get("concurrency", 100),
        prefetch=spec.get("prefetch_max", 0),
    )
    out: dict = {"rounds": [], "answered": []}
    service.on_answer = lambda name, address: out["answered"].append(name)

    async def run() -> None:
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
