"""When a host the address refused is told to come back: never after the address frees for it
(a worse host asking then would take its turn), and never every loop turn while a fetch runs
long; and a waiter keeps its place through a stall of the whole process, out of the line only
after an ask, LATE past its turn, by a host in line told a turn LATE after it, and back in its
place when it comes. The same answers from one worker's budget and from the fleet's (a real
Redis), on a clock the test sets."""

from __future__ import annotations

from typing import Any

import pytest

from crawler.backends.redis.addresses import RedisAddressBudget
from crawler.backends.redis.keys import CrawlKeys
from crawler.frontier.addresses import (
    LATE,
    MISSED_KEPT,
    SCAN,
    AddressBudget,
    AddressPolicy,
    LocalAddressBudget,
)
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401

GAP = 0.3
POLICY = AddressPolicy(concurrency=1, delay=GAP, factor=0, ttl=60)
IP = "192.0.2.7"


class Clocked:
    """A budget asked at the times the test says (Redis's own clock replaced by the same)."""

    def __init__(self, kind: str, server: RedisServer, policy: AddressPolicy = POLICY) -> None:
        self.now = 1000.0
        self.budget: AddressBudget
        if kind == "memory":
            self.budget = LocalAddressBudget(policy)
        else:
            keys = CrawlKeys(fresh_key(), "web", 1)
            self.budget = RedisAddressBudget(server.client(), keys, policy, lambda: self.now)

    def take(self, at: float, host: str, priority: int = 1) -> float:
        self.now = at
        return self.budget.take(IP, f"{host}@{at!r}", at, host, priority)

    def done(self, at: float, host: str, started: float, duration: float) -> None:
        self.now = at
        self.budget.done(IP, f"{host}@{started!r}", at, duration)


@pytest.fixture(params=["memory", "redis"])
def clocked(request: pytest.FixtureRequest, redis_server: RedisServer) -> Any:  # noqa: F811
    budget = Clocked(request.param, redis_server)
    yield budget
    budget.budget.close()


@pytest.fixture(params=["memory", "redis"])
def clocked_by(request: pytest.FixtureRequest, redis_server: RedisServer) -> Any:  # noqa: F811
    """``clocked_by(policy)``: a :class:`Clocked` budget of that policy."""
    made: list[Clocked] = []

    def make(policy: AddressPolicy) -> Clocked:
        made.append(Clocked(request.param, redis_server, policy))
        return made[-1]

    yield make
    for budget in made:
        budget.budget.close()


def take_turns(
    clocked: Clocked, joins: dict[str, float], away: dict[str, float]
) -> list[tuple[float, str]]:
    """Hosts of one URL each (one priority) ask at the times in ``joins`` and, refused, again at
    their turns, except that a host in ``away`` cannot ask again before the time it gives (its
    worker stalled, or was busy with other fetches, while another worker's hosts asked); each
    fetch takes 0.01 s. When each host fetched, in order."""
    asks = dict(joins)
    fetched: list[tuple[float, str]] = []
    while asks:
        host = min(asks, key=lambda h: (asks[h], h))
        at = asks.pop(host)
        wait = clocked.take(at, host)
        if wait > 0:
            asks[host] = max(at + wait, away.get(host, 0.0))
            continue
        fetched.append((at, host))
        clocked.done(at + 0.01, host, at, 0.01)
    return fetched


def test_a_slow_first_fetch_does_not_send_the_best_waiter_back_late(clocked: Clocked) -> None:
    """The first fetch at an address is cold (0.25 s), the next ones quick (0.04 s): the
    robots.txt waiting for the address is told to come back by the time it is free, so the
    home page that asks just after does not take its turn."""
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.25, "a.test", t, 0.25)  # the address rests until t + 0.55
    assert clocked.take(t + 0.55, "b.test") == 0
    wait = clocked.take(t + 0.56, "robots.test", priority=0)
    clocked.done(t + 0.59, "b.test", t + 0.55, 0.04)  # free again at t + 0.89
    assert t + 0.56 + wait <= t + 0.89 + 1e-6, wait
    assert clocked.take(t + 0.90, "home.test", priority=4) > 0  # robots.txt's turn
    back = t + 0.56 + wait
    while (wait := clocked.take(back, "robots.test", priority=0)) > 0:
        assert wait < 1, wait
        back += wait
    assert back <= t + 0.90  # no later than it was free when the home page asked


def test_a_fetch_running_long_costs_the_next_waiter_a_look_per_gap(clocked: Clocked) -> None:
    """A fetch takes 2 s where the address's fetches took 0.04 s: the host next in line asks
    again about once a gap while it runs, not every loop turn, and still gets the address the
    moment its rest ends."""
    t = 1000.0
    for i in range(3):  # quick fetches teach the address its fetch time
        start = t + i * (GAP + 0.05)
        assert clocked.take(start, "warm.test") == 0
        clocked.done(start + 0.04, "warm.test", start, 0.04)
    t += 3 * (GAP + 0.05)
    assert clocked.take(t, "slow.test") == 0
    asks, back = 0, t + 0.01
    while (wait := clocked.take(back, "next.test")) > 0:
        asks += 1
        assert asks < 50, back - t
        back += wait
        if back >= t + 2.0 and clocked.now < t + 2.0:
            clocked.done(t + 2.0, "slow.test", t, 2.0)  # rests until t + 2.3
    assert asks <= 2.0 / GAP + 2, asks
    assert t + 2.3 - 1e-6 <= back <= t + 2.3 + GAP / 2, back - t


def test_a_stall_of_the_worker_does_not_cost_a_waiter_its_turn(clocked: Clocked) -> None:
    """The process stalls (CPU starved) past the best waiter's turn by more than LATE: the
    worse host that asks first after it (not in line: it just fetched there) finds the waiter
    still in line, and the waiter then gets the address."""
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.05, "a.test", t, 0.05)  # the address rests until t + 0.35
    wait = clocked.take(t + 0.1, "home.test", priority=0)
    assert t + 0.1 + wait <= t + 0.35 + 1e-6, wait
    assert clocked.take(t + 1.0, "a.test", priority=1) > 0  # its turn was 0.65 s ago
    assert clocked.take(t + 1.01, "home.test", priority=0) == 0


def test_waiters_gone_lose_their_place_at_the_second_ask_after_their_turn(
    clocked: Clocked,
) -> None:
    """The three best waiters never come back: the first ask after their turns is refused (it
    may follow a stall of the process) and told to come back LATE later, not three gaps later;
    at that ask, told a turn LATE after theirs, they are out and it gets the address."""
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.05, "a.test", t, 0.05)  # the address rests until t + 0.35
    for i in range(3):  # told to come back at t + 0.35, 0.65, 0.95
        assert clocked.take(t + 0.1 + i / 100, f"gone{i}.test", priority=0) > 0
    wait = clocked.take(t + 2.0, "a.test", priority=1)
    assert 0 < wait <= LATE + 1e-6, wait
    assert clocked.take(t + 2.0 + wait, "a.test", priority=1) == 0


def test_waiters_asking_together_after_a_stall_keep_their_places(clocked: Clocked) -> None:
    """The process stalls past the turns of three waiters; when it wakes, the hosts due ask
    one after the other within milliseconds, as the frontier hands them out (in turn order,
    a host that just fetched there among them). None loses its place for being late: every
    waiter fetches in the order it joined the line, before the host that asked after them."""
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.05, "a.test", t, 0.05)  # the address rests until t + 0.35
    backs: dict[str, float] = {}
    for i in range(3):  # told to come back at t + 0.35, 0.65, 0.95
        backs[f"w{i}.test"] = t + 0.1 + i / 100 + clocked.take(t + 0.1 + i / 100, f"w{i}.test")
    backs["a.test"] = t + 0.36  # its own rest after its fetch
    now = t + 2.0  # the stall ends: w0, a.test, w1, w2 ask, in that order
    order = ["w0.test", "a.test", "w1.test", "w2.test"]
    fetched: list[str] = []
    while len(fetched) < len(order):
        host = min((h for h in order if h not in fetched), key=lambda h: (backs[h], h))
        now = max(now + 0.001, backs[host])
        wait = clocked.take(now, host)
        if wait == 0:
            fetched.append(host)
            clocked.done(now + 0.01, host, now, 0.01)
            now += 0.01
        else:
            backs[host] = now + wait
    assert fetched == order[:1] + order[2:] + order[1:2], fetched


def test_a_fetch_a_stall_made_long_does_not_send_the_waiters_back_late(
    clocked: Clocked,
) -> None:
    """The fetches at the address take 0.01 s; the worker stalls 0.9 s during one, which
    then ends as two waiters ask (told their turns by the quick fetches) and before a third
    does. The waiters still fetch in turn, each home page (0) before the next page (1) of a
    name that just fetched, which asks as the address frees: the one long fetch does not push
    the third waiter's turn past it."""
    t = 1000.0
    for i in range(3):  # quick fetches teach the address its fetch time
        start = t + i * (GAP + 0.05)
        assert clocked.take(start, "warm.test") == 0
        clocked.done(start + 0.01, "warm.test", start, 0.01)
    t += 3 * (GAP + 0.05)
    assert clocked.take(t, "slow.test") == 0
    asks = {}  # host -> (when it asks, its URL's priority)
    for i, at in enumerate((t + 0.9, t + 0.901)):  # the stall ends: two ask, then the end
        asks[f"w{i}.test"] = (at + clocked.take(at, f"w{i}.test", 0), 0)
    clocked.done(t + 0.902, "slow.test", t, 0.902)
    asks["w2.test"] = (t + 0.903 + clocked.take(t + 0.903, "w2.test", 0), 0)
    order: list[tuple[str, int]] = []
    while len(order) < 4:
        host = min(asks, key=lambda h: (asks[h], h))
        at, priority = asks.pop(host)
        wait = clocked.take(at, host, priority)
        if wait > 0:
            asks[host] = (at + wait, priority)
            continue
        order.append((host, priority))
        clocked.done(at + 0.01, host, at, 0.01)
        if priority == 0:  # its next page, as its own rest ends (the address's too)
            asks[host] = (at + 0.01 + GAP + 1e-4, 1)
    assert order[:3] == [("w0.test", 0), ("w1.test", 0), ("w2.test", 0)], order


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_waiter_late_for_cause_comes_back_to_its_place(
    clocked_by: Any, concurrency: int
) -> None:
    """w.test joins the line first, then nine names; w.test cannot come at its turn (its
    worker stalled while the fleet's other worker asked), and the address goes on to the
    others meanwhile (it is out of the line: it holds the address no more). Back 1.1 s later,
    it takes the place its wait gives it, ahead of the names that joined after it and still
    wait, not behind them all."""
    clocked = clocked_by(AddressPolicy(concurrency=concurrency, delay=GAP, factor=0, ttl=60))
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.05, "a.test", t, 0.05)
    joins = {"w.test": t + 0.1} | {f"n{i}.test": t + 0.11 + i / 100 for i in range(9)}
    back = t + 1.2
    fetched = take_turns(clocked, joins, {"w.test": back})
    assert sorted(host for _, host in fetched) == sorted(joins)
    waiting = [host for at, host in fetched if at >= back]
    assert waiting and waiting[0] == "w.test", fetched


def test_the_waits_of_the_latest_joined_missed_waiters_are_kept(clocked: Clocked) -> None:
    """MISSED_KEPT + 2 waiters miss their turns (an asker drops at most SCAN of them): the
    MISSED_KEPT that joined the line last come back to their places, the two that joined first
    (most likely gone for good) at the back, as a new name would."""
    t = 1000.0
    assert clocked.take(t, "a.test") == 0
    clocked.done(t + 0.05, "a.test", t, 0.05)
    missed = MISSED_KEPT + 2
    for i in range(missed):  # told turns a gap apart from t + 0.35; none of them comes
        assert clocked.take(t + 0.1 + i / 10_000, f"g{i}.test") > 0
    askers = [f"x{j}.test" for j in range(-(-missed // SCAN))]
    for j, host in enumerate(askers):  # behind them all
        assert clocked.take(t + 0.2 + j / 10_000, host) > 0
    for j, host in enumerate(askers):  # long past every turn: each drops SCAN waiters
        assert (clocked.take(t + 100 + j / 10_000, host) == 0) == (j == 0)
    kept = clocked.take(t + 100.01, "g2.test")  # ahead of x1.. (it joined before them)
    assert kept <= GAP + 0.01, kept
    forgotten = clocked.take(t + 100.02, "g0.test")  # behind x1.. and g2.test
    assert forgotten >= len(askers) * GAP, forgotten


def test_the_kept_waits_expire_when_the_asker_that_dropped_them_takes_the_address(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The ask that drops the waiters gone (their waits kept in ``{s}:ipm:<address>``) takes
    the address: that key, made by this very ask, expires with the line's keys all the same,
    not kept forever once the address has no one left to refuse."""
    keys = CrawlKeys(fresh_key(), "web", 1)
    client = redis_server.client()
    now = [1000.0]
    budget = RedisAddressBudget(client, keys, POLICY, lambda: now[0])

    def take(at: float, host: str, priority: int) -> float:
        now[0] = at
        return budget.take(IP, f"{host}@{at!r}", at, host, priority)

    t = 1000.0
    assert take(t, "a.test", 1) == 0
    budget.done(IP, f"a.test@{t!r}", t + 0.05, 0.05)
    for i in range(3):  # never come back
        assert take(t + 0.1 + i / 100, f"gone{i}.test", 0) > 0
    wait = take(t + 2.0, "a.test", 1)
    assert take(t + 2.0 + wait, "a.test", 1) == 0  # it drops them, and takes the address
    missed = f"{keys.shard_prefixes()[0]}:ipm:{IP}"
    assert client.zcard(missed) == 3
    assert 0 < client.pttl(missed) <= POLICY.ttl * 4000
    budget.close()
