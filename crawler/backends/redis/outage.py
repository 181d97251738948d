"""Redis going away (a restart replaying its AOF, a failover, a blip), ridden out alike by
every Redis user of a crawl but the frontier (``crawler.frontier.buffered``): one log line when
it goes and one when it is back, a wait bounded by ``REDIS_OUTAGE_WAIT`` from the outage's
start for the callers that may wait, none for the reactor's (docs/topics/fleet.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    ClusterError,
    ReadOnlyError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from crawler.config import defaults

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Errors that mean "Redis is away for now": a lost or refused connection, a timeout, a Redis
#: loading its AOF (``BusyLoadingError`` is a ``ConnectionError``), a cluster without a master
#: for some slots (``CLUSTERDOWN``, a slot not covered) or moving one (``TRYAGAIN``), a master
#: demoted to a replica by a failover (``READONLY``: behind a DNS name or a managed endpoint
#: that names the new master, the connection is made again, see
#: ``crawler.backends.redis.connection.FailoverParser``). The exception types only: a retry
#: loop tells Redis away from real errors with :func:`is_transient` (the frontier's worker
#: does), which knows the cluster client's errors that say so too.
TRANSIENT: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ReadOnlyError,
    ClusterDownError,
    SlotNotCoveredError,
    TryAgainError,
)
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 2.0


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means Redis is away for now (see :data:`TRANSIENT`). A refused password
    is not (it will not come back by waiting); a cluster client that reached none of its nodes
    is, for the reason it gives (redis-py's error comes from the last node's: a lost
    connection is away, a refused password or a node that is no cluster node is a mistake
    waiting would not mend), and so is a slot's move that redis-py gave up following (an
    ``ASK`` it could not obey or ``TRYAGAIN`` to the end of its redirections: a slot's keys
    half moved by a reshard)."""
    if isinstance(exc, AuthenticationError | AuthorizationError):
        return False
    if isinstance(exc, (*TRANSIENT, AskError)):
        return True
    if isinstance(exc, ClusterError):
        return "TTL exhausted" in str(exc)
    if isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc):
        return exc.__cause__ is None or is_transient(exc.__cause__)
    return False


class RedisUnavailable(redis.ConnectionError):
    """Redis stayed away past the caller's wait; ``cause`` is the error that said so. A
    ``ConnectionError``, so a retry loop further out (the frontier's worker) takes it as one."""

    def __init__(self, component: str, cause: BaseException | None) -> None:
        self.cause = cause
        super().__init__(f"Redis unreachable for the {component}: {cause}")


class RedisOutage:
    """One component's view of Redis: reachable, or away since when. Its probe thread, not
    the callers, finds Redis back; callers on several threads share one state.

    ``component`` names it in the log lines; ``probe`` is a cheap call on the component's own
    key (a cluster client then asks the node that serves it); ``meanwhile`` says in the first
    line what the component does while Redis is away; ``back_note``, if given, adds to the
    line when Redis is back; ``on_back`` runs on the probe's thread once Redis answers again,
    before any waiting caller goes on (send what waited), and once more after (what a caller
    answered alone kept while it ran)."""

    def __init__(
        self,
        component: str,
        probe: Callable[[], Any],
        *,
        meanwhile: str = "",
        wait: float = defaults.REDIS_OUTAGE_WAIT,
        back_note: Callable[[], str] | None = None,
        on_back: Callable[[], None] | None = None,
        log: logging.Logger = logger,
    ) -> None:
        self.component = component
        self.probe = probe
        self.meanwhile = meanwhile
        self.wait = wait
        self.back_note = back_note
        self.on_back = on_back
        self.log = log
        self.outages = 0  # times Redis went away
        self.last_error: BaseException | None = None
        self._away_since: float | None = None
        # a READONLY outage the probe found over (its read answers on a replica too), not yet
        # confirmed by a call that went through: (when it began, the next probe's delay)
        self._doubted: tuple[float, float] | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._prober: threading.Thread | None = None

    @property
    def away(self) -> bool:
        return self._away_since is not None

    def call(self, fn: Callable[[], T], *, wait: float | None = None) -> T:
        """``fn()``'s result. While Redis is away (or once ``fn`` finds it so), wait for it to be
        back until ``wait`` seconds (default: the outage's ``wait``) after the outage began, or
        after ``fn`` first failed, whichever came first, then raise :class:`RedisUnavailable`.
        The latter bounds a call that fails again each time the probe finds Redis back: a
        replica where the master should be (``READONLY``) answers the probe's read and refuses
        the call's write. Other errors are ``fn``'s own."""
        limit = self.wait if wait is None else wait
        first: float | None = None  # when fn first failed
        while True:
            with self._cond:
                while self._away_since is not None:
                    since = self._away_since if first is None else min(first, self._away_since)
                    left = since + limit - time.monotonic()
                    if left <= 0 or self._closed:
                        raise RedisUnavailable(self.component, self.last_error)
                    self._cond.wait(left)
            try:
                result = fn()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                now = time.monotonic()
                first = now if first is None else first
                self.went_away(exc)
                if now - first >= limit:
                    raise RedisUnavailable(self.component, exc) from exc
                continue
            if self._doubted is not None:
                self._confirmed()
            return result

    def went_away(self, exc: BaseException) -> None:
        """Redis failed a call: say so once, and start the probe. A ``READONLY`` again after
        the probe found Redis back (its read answers on a replica too) is the same outage
        going on: not said again, and probed after a delay that doubles each time (without
        it, each call would fail, log two lines and start a probe thread in a loop)."""
        with self._cond:
            self.last_error = exc
            if self._away_since is not None:
                return
            delay = 0.0
            relapse = self._doubted is not None and isinstance(exc, ReadOnlyError)
            if relapse and self._doubted is not None:
                self._away_since, delay = self._doubted
                self._doubted = (self._away_since, min(delay * 2, MAX_BACKOFF))
            else:
                self._doubted = None
                self._away_since = time.monotonic()
                self.outages += 1
            closed = self._closed
        if not relapse:
            self.log.warning(
                "Redis unreachable for the %s (%s: %s)%s",
                self.component,
                type(exc).__name__,
                exc,
                f": {self.meanwhile}" if self.meanwhile else "",
            )
        if not closed:
            name = "redis-probe-" + self.component.replace(" ", "-")
            self._prober = threading.Thread(
                target=self._probe, args=(delay,), name=name, daemon=True
            )
            self._prober.start()

    def _confirmed(self) -> None:
        """A call went through after the probe found a ``READONLY`` outage over: it is."""
        with self._cond:
            doubted, self._doubted = self._doubted, None
        if doubted is not None:
            self._say_back(doubted[0])

    def _probe(self, delay: float = 0.0) -> None:
        """The outage's own thread: probe (after ``delay``) until Redis is back, with capped
        exponential backoff, or until closed."""
        backoff = FIRST_BACKOFF
        if delay > 0:
            with self._cond:
                if not self._closed:
                    self._cond.wait(delay)
                if self._closed:
                    return
        while not self._probe_once():
            with self._cond:
                if not self._closed:
                    self._cond.wait(backoff)
                if self._closed:
                    return
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _probe_once(self) -> bool:
        """Is Redis back? Says so, and frees the waiting callers."""
        try:
            self.probe()
        except Exception as exc:
            if not is_transient(exc):
                self.log.debug("Probe of Redis for the %s failed: %s", self.component, exc)
            self.last_error = exc
            return False
        failed = self._send_back()
        if failed is not None:
            self.last_error = failed
            return False
        with self._cond:
            since, self._away_since = self._away_since, None
            # (a replica answers the probe's read: a call going through says it is over)
            doubt = isinstance(self.last_error, ReadOnlyError) and since is not None
            if doubt and since is not None and self._doubted is None:
                self._doubted = (since, FIRST_BACKOFF)
            self._cond.notify_all()
        if not doubt:
            self._say_back(since)
        # once more: a caller answered alone while it ran (Redis away until just now) kept
        # what it had, and nothing else would send that before the next outage
        failed = self._send_back()
        if failed is not None and is_transient(failed):
            self.went_away(failed)  # (its probe sends it, once Redis is back again)
        return True

    def _say_back(self, since: float | None) -> None:
        seconds = time.monotonic() - since if since is not None else 0.0
        note = self.back_note() if self.back_note is not None else ""
        self.log.warning(
            "Redis back for the %s after %.1fs%s",
            self.component,
            seconds,
            f"; {note}" if note else "",
        )

    def _send_back(self) -> Exception | None:
        """Run ``on_back`` (send what waited); the error it met, if any, said unless it is
        Redis away again."""
        if self.on_back is None:
            return None
        try:
            self.on_back()
        except Exception as exc:
            if not is_transient(exc):
                self.log.warning("After Redis came back, the %s failed: %s", self.component, exc)
            return exc
        return None

    def close(self) -> None:
        """Stop probing; callers waiting now give up at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._prober is not None:
            self._prober.join(5)


class ActsAlone:
    """The part a Redis user called on the reactor thread holds to reach Redis: that thread
    must never wait, so while Redis is away each call answers the caller's default at once
    (counted in :attr:`answered`, which the line saying Redis is back reports) and the user
    acts alone. A part, not a base class: the user keeps its client and its own ``close``.

    ``component``, ``probe``, ``meanwhile``, ``on_back`` and ``log`` are the outage's (see
    :class:`RedisOutage`); ``back_note``, given the calls answered alone, adds to the line
    when Redis is back."""

    def __init__(
        self,
        component: str,
        probe: Callable[[], Any],
        *,
        meanwhile: str,
        back_note: Callable[[int], str] | None = None,
        on_back: Callable[[], None] | None = None,
        log: logging.Logger = logger,
    ) -> None:
        self.answered = 0  # calls answered without Redis
        note = None if back_note is None else (lambda: back_note(self.answered))
        self.outage = RedisOutage(
            component, probe, meanwhile=meanwhile, back_note=note, on_back=on_back, log=log
        )

    def call(self, fn: Callable[[], T], default: Any) -> Any:
        """``fn()``'s result, or ``default`` at once while Redis is away."""
        try:
            return self.outage.call(fn, wait=0)
        except RedisUnavailable:
            self.answered += 1
            return default

    def close(self) -> None:
        self.outage.close()
