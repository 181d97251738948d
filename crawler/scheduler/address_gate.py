"""The scheduler's second gate: a lease the frontier handed out waits for its server's address.

The frontier is polite per host name; :class:`AddressGate` asks the address budget
(:mod:`crawler.frontier.addresses`) of the address the host resolves to before the request
leaves. Refused: the lease goes back and the host is held until its turn in the address's line
(the best priority, then the longest waiting, first). A host whose address is not known yet is
held briefly while it is resolved (signal ``host_address_wanted``; the answer comes back as
``host_resolved``), so a thousand new names on one server do not all send their first request
at once. A host that is an IP address is its own address, and the frontier is already polite to
it: it passes the gate alone unless a host name resolved to the same address (then they share
its budget). Addresses are learnt per worker; the budgets themselves are the crawl's (shared in
Redis for a fleet).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Callable

from crawler.frontier import Frontier
from crawler.frontier.addresses import AddressBudget

UNRESOLVED_HOLD = 0.05  # seconds a host waits for its address before it is asked again
MAX_ADDRESSES = 200_000  # hosts whose address a worker remembers (least recently used out)


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class AddressGate:
    """See the module docstring. ``want(host)`` asks for a host's address."""

    def __init__(
        self,
        frontier: Frontier,
        budget: AddressBudget,
        want: Callable[[str], None],
        inc: Callable[[str], None],
    ) -> None:
        self.frontier = frontier
        self.budget = budget
        self.want = want
        self.inc = inc
        self.on = budget.policy.concurrency > 0
        self._addresses: OrderedDict[str, str] = OrderedDict()
        self._named: set[str] = set()  # addresses some host name resolved to
        self._wanted: set[str] = set()
        self._taken: dict[str, str] = {}  # lease token -> the address it took a slot of

    def resolved(self, host: str, address: str) -> None:
        """A host's address, as DNS answered (``host_resolved``); "" when it did not resolve
        (its requests go on, to fail and be held by the DNS middleware)."""
        self._addresses[host] = address
        self._addresses.move_to_end(host)
        if address:
            self._named.add(address)
        self._wanted.discard(host)
        while len(self._addresses) > MAX_ADDRESSES:
            self._addresses.popitem(last=False)

    def address_of(self, host: str) -> str | None:
        """The address ``host``'s budget is kept under; "" for none (the host passes alone),
        None when it is not known yet."""
        if _ip_literal(host):
            address = host.strip("[]")
            return address if address in self._named else ""
        return self._addresses.get(host)

    def admit(self, token: str, host: str, now: float, priority: int = 0) -> bool:
        """True: the lease's request may leave now. False: it went back to the frontier, its
        host held until its turn at the address (``priority``: the URL's front queue, which
        ranks the host in the address's line)."""
        if not self.on:
            return True
        address = self.address_of(host)
        if address is None:
            if host not in self._wanted:
                self._wanted.add(host)
                self.want(host)
            self._hand_back(token, host, UNRESOLVED_HOLD)
            self.inc("frontier/address/unresolved_waits")
            return False
        if not address:
            return True
        wait = self.budget.take(address, token, now, host, priority)
        if wait > 0:
            self._hand_back(token, host, wait)
            self.inc("frontier/address/refused")
            return False
        self._taken[token] = address
        return True

    def _hand_back(self, token: str, host: str, seconds: float) -> None:
        self.frontier.hold_host(host, seconds)
        self.frontier.release([token])

    def ended(self, token: str | None, now: float, duration: float | None) -> None:
        """The fetch of ``token`` ended (``duration`` None: it never reached the server)."""
        address = self._taken.pop(token, None) if token else None
        if address is not None:
            self.budget.done(address, token or "", now, duration)

    def close(self) -> None:
        self.budget.close()
