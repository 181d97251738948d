"""A real DNS server for tests and benchmarks: Twisted's own (``twisted.names.server``) on a
loopback port, answering from a zone given as JSON, logging every query it gets.

Run it as a process (``python -m devsite.dnsserver ZONE.json QUERIES.log``): it prints
``PORT <n>`` once it listens (UDP and TCP on 127.0.0.1) and appends ``<name> <type>`` to the
query log for each query, so a test counts the lookups a crawl made.

The zone (JSON)::

    {"names": {"a.test": {"a": "127.0.0.1", "ttl": 5},
               "b.test": {"cname": "a.test", "ttl": 5},
               "bad.test": {"servfail": true},
               "slow.test": {"timeout": true}},
     "suffixes": {".farm.test": {"a": "127.0.0.1", "ttl": 300}},
     "latency": 0.2}

A name in neither ``names`` nor under a suffix gets NXDOMAIN; ``latency`` (seconds) delays every
answer, as a distant server would. The zone file is read again when it changes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.error import CannotListenError
from twisted.names import dns, error, server


class ZoneResolver:
    """Answers queries from the zone (see the module docstring)."""

    def __init__(self, zone_file: Path, log: Any) -> None:
        self.zone_file = zone_file
        self.mtime = -1.0
        self.log = log
        self._load()

    def _load(self) -> None:
        """(Re)read the zone when its file changed: a test moves a host to another address."""
        mtime = self.zone_file.stat().st_mtime
        if mtime == self.mtime:
            return
        self.mtime = mtime
        zone = json.loads(self.zone_file.read_text(encoding="utf-8"))
        self.names = {k.lower(): v for k, v in zone.get("names", {}).items()}
        self.suffixes = {k.lower(): v for k, v in zone.get("suffixes", {}).items()}
        self.latency = float(zone.get("latency", 0))

    def _entry(self, name: str) -> dict[str, Any] | None:
        if name in self.names:
            return self.names[name]
        for suffix, entry in self.suffixes.items():
            if name.endswith(suffix):
                return entry
        return None

    def _records(self, name: str) -> list[dns.RRHeader] | None:
        records: list[dns.RRHeader] = []
        for _ in range(16):
            entry = self._entry(name)
            if entry is None:
                return records or None
            ttl = int(entry.get("ttl", 300))
            if "cname" in entry:
                target = entry["cname"].lower()
                records.append(
                    dns.RRHeader(name, dns.CNAME, dns.IN, ttl, dns.Record_CNAME(target, ttl))
                )
                name = target
                continue
            if "a" in entry:
                records.append(
                    dns.RRHeader(name, dns.A, dns.IN, ttl, dns.Record_A(entry["a"], ttl))
                )
            return records
        return records

    def query(self, query: dns.Query, timeout: Any = None) -> defer.Deferred[Any]:
        self._load()
        name = str(query.name).lower().rstrip(".")
        self.log.write(f"{name} {dns.QUERY_TYPES.get(query.type, query.type)}\n")
        self.log.flush()
        entry = self._entry(name) or {}
        d: defer.Deferred[Any] = defer.Deferred()
        if entry.get("timeout"):
            return d  # never answered
        if entry.get("servfail"):
            result: Any = RuntimeError(f"servfail {name}")  # not a DomainError: SERVFAIL
        else:
            records = self._records(name)
            if records is None:
                result = error.DNSNameError(name)
            else:
                wanted = [r for r in records if query.type in (dns.A, dns.ALL_RECORDS)]
                result = (wanted, [], [])

        def fire() -> None:
            if isinstance(result, Exception):
                d.errback(result)
            else:
                d.callback(result)

        reactor.callLater(self.latency, fire)  # type: ignore[attr-defined]
        return d


def main(argv: list[str]) -> None:
    log = open(argv[1], "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    factory = server.DNSServerFactory(clients=[ZoneResolver(Path(argv[0]), log)])
    # a free UDP port, then TCP on the same number: another process may hold that TCP port
    # (tests run in parallel), so try again with another one
    for attempt in range(20):
        udp = reactor.listenUDP(0, dns.DNSDatagramProtocol(factory), interface="127.0.0.1")  # type: ignore[attr-defined]
        port = udp.getHost().port
        try:
            reactor.listenTCP(port, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
            break
        except CannotListenError:
            udp.stopListening()
            if attempt == 19:
                raise
    print(f"PORT {port}", flush=True)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(sys.argv[1:])
