"""The schema of the crawler's own settings: each one's type, range and default, and the one
validation that every way of giving a value goes through.

A value reaches the crawler from ``-s KEY=VALUE``, scrapyd's ``setting=KEY=VALUE`` (both text),
a settings module (Python values), or a site config's tables (TOML values). Scrapy converts a
value only where a component reads it (``getfloat`` deep inside a constructor), so a bad value
used to surface as a traceback that did not name the setting, and each source had checks of its
own that disagreed (``-s FRONTIER_MIN_DELAY=60`` passed, the same value in a site config did
not; ``-s NEARDUP_ENABLED=yes`` passed, then Scrapy's ``getbool`` refused it mid-start). Here a
value is read once, whatever its source, into the type of the setting's default:

* a number or an integer from a number or its text (not from a boolean, not NaN or infinite,
  an integer not from ``1.5``), within the setting's range;
* a boolean from ``true``/``false`` or ``1``/``0`` (as text too: what Scrapy's ``getbool``
  takes);
* a list of strings from a list, from a JSON list (``'["a", "b"]'``) or from ``a,b``;
* a choice from one of its words, in any case;

and settings that depend on each other are checked together (``FRONTIER_MIN_DELAY`` may not
exceed ``FRONTIER_MAX_DELAY``). A problem reads ``must be <what the setting takes>, got
<value>``; the caller says how a value is shown (as the user wrote it in that source) and which
name or key it is reported under. A misspelt name with one of the project's prefixes gets a
"did you mean" warning; Scrapy's and scrapy-redis's own settings are not ours to judge.

The bottom layer: free of Scrapy and of every other package of the crawler (the crawl command,
the site-config loader and the frontier's politeness policy all call it with plain values).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from email import policy
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from crawler.config import defaults
from crawler.config.agent import agent_problem

Show = Callable[[object], str]

#: The FRONTIER_PRIORITY_POLICY words; ``breadth_first`` is read as its alias ``depth``.
PRIORITY_POLICIES = ("depth", "breadth_first", "fifo", "request", "opic")
BACKENDS = ("memory", "redis")
#: What a crawl may be for (CRAWL_PURPOSE; crawler/robots/usage.py enforces sites' preferences
#: by it).
PURPOSES = ("search", "archive", "ai-train", "ai-input")

# Prefixes under which a name that is not a known setting is probably a typo of ours.
PREFIXES = (
    "FRONTIER_", "ROBOTSTXT_", "RECRAWL_", "CRAWLDB_", "INDEX_", "NEARDUP_", "URL_",
    "PAGE_", "CONTENT_", "RETRY_AFTER_", "ALLOWED_", "ALLOW_", "SITEMAPS_", "CANONICAL_",
    "WARC_", "DNS_", "SIGNATURE_", "SOFT404_",
)  # fmt: skip

# Settings that are ours but not in crawler.config.defaults (their default is Scrapy's).
_BORROWED = {"ROBOTSTXT_USER_AGENT"}


class SettingValueError(ValueError):
    """A value that a setting cannot take; the message is the problem, without the name."""


class SettingsError(ValueError):
    """Settings that cannot be used: one ``NAME: problem`` line each, all of them at once."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


def _number_text(number: float) -> str:
    return f"{number:g}"


class Rule:
    """How one setting's value is read: :meth:`read` returns it in the setting's type or raises
    :class:`SettingValueError` saying what the setting takes."""

    def read(self, value: object, show: Show) -> Any:
        return value


@dataclass(frozen=True)
class Number(Rule):
    """A finite number (an integer with ``integer``), at least ``low`` (above it with
    ``above``) and at most ``high``."""

    integer: bool = False
    low: float = 0
    above: bool = False
    high: float | None = None

    @property
    def kind(self) -> str:
        return "an integer" if self.integer else "a number"

    @property
    def _lower(self) -> str:
        return f"{self.kind} {'>' if self.above else '>='} {self.low:g}"

    def read(self, value: object, show: Show) -> Any:
        number = self._parse(value)
        if number is None:
            raise SettingValueError(f"must be {self._lower}, got {show(value)}")
        if number < self.low or (self.above and number == self.low):
            raise SettingValueError(f"must be {self._lower}, got {_number_text(number)}")
        if self.high is not None and number > self.high:
            raise SettingValueError(
                f"must be {self.kind} <= {self.high:g}, got {_number_text(number)}"
            )
        return number

    def _parse(self, value: object) -> float | None:
        if isinstance(value, str):
            try:
                value = int(value) if self.integer else float(value)
            except ValueError:
                try:  # "1e3" or "2.0" for an integer, as TOML's 1e3 or 2.0 would be
                    value = float(value)
                except ValueError:
                    return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        if not self.integer:
            return float(value)
        if isinstance(value, float):
            return int(value) if value.is_integer() else None
        return value


@dataclass(frozen=True)
class Boolean(Rule):
    """``true``/``false``, ``1``/``0``, or their text in any case: what Scrapy's ``getbool``
    reads (``yes`` or ``on`` would pass here and stop the crawl there)."""

    _WORDS = {"true": True, "1": True, "false": False, "0": False}

    def read(self, value: object, show: Show) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in self._WORDS:
            return self._WORDS[value.strip().lower()]
        raise SettingValueError(f"must be true or false, got {show(value)}")


@dataclass(frozen=True)
class Choice(Rule):
    """One of ``words`` (any case, stored lower-case); an alias is stored as what it means."""

    words: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def read(self, value: object, show: Show) -> Any:
        word = value.strip().lower() if isinstance(value, str) else None
        if word not in self.words:
            raise SettingValueError(f"must be one of {', '.join(self.words)}, got {show(value)}")
        return self.aliases.get(word, word)


@dataclass(frozen=True)
class StringList(Rule):
    """A list of strings, from a list or from the text Scrapy users write on a command line:
    a JSON list (``'["a", "b"]'``) or ``a,b``. Stored as a tuple, without blank entries."""

    def read(self, value: object, show: Show) -> Any:
        items = _list_from_text(value) if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise SettingValueError(
                f"must be a list of strings (a JSON list or a,b), got {show(value)}"
            )
        return tuple(item.strip() for item in items if item.strip())


@dataclass(frozen=True)
class Purposes(Rule):
    """One or more of :data:`PURPOSES` (``search``, ``"search,archive"``, a list), stored as a
    tuple, in order, without repeats."""

    def read(self, value: object, show: Show) -> Any:
        items = _list_from_text(value) if isinstance(value, str) else value
        if isinstance(items, list | tuple):
            words = [i.strip().lower() if isinstance(i, str) else None for i in items]
            if words and all(w in PURPOSES for w in words):
                return tuple(dict.fromkeys(words))
        raise SettingValueError(
            f"must be one or more of {', '.join(PURPOSES)} (a list or a,b), got {show(value)}"
        )


@dataclass(frozen=True)
class Mailbox(Rule):
    """One mailbox (RFC 9110 10.1.2's From: RFC 5322's ``mailbox``, ``ops@example.org`` or
    ``Crawl Ops <ops@example.org>``), or empty for none. A header value must never carry a line
    break (it would add header lines of its own) nor a list of addresses."""

    def read(self, value: object, show: Show) -> Any:
        if not isinstance(value, str):
            raise SettingValueError(f"must be a mailbox such as ops@example.org, got {show(value)}")
        text = value.strip()
        if not text:
            return ""
        if not text.isascii() or not text.isprintable():
            raise SettingValueError(
                f"must be one line of ASCII (a mailbox such as ops@example.org), got {show(value)}"
            )
        header = policy.strict.header_factory("From", text)
        addresses = header.addresses  # type: ignore[attr-defined]
        if header.defects or len(addresses) != 1 or not addresses[0].domain:
            raise SettingValueError(
                f"must be one mailbox such as ops@example.org, got {show(value)}"
            )
        return text


@dataclass(frozen=True)
class Origin(Rule):
    """An https origin (``https://crawler.example.org``: scheme, host, port), or empty for none;
    stored without a trailing "/". What Web Bot Auth's Signature-Agent of type ``directory``
    must be (draft-ietf-webbotauth-httpsig-protocol-00 5.5: the ASCII serialization of an
    origin, its key directory at that origin's well-known path)."""

    def read(self, value: object, show: Show) -> Any:
        text = value.strip() if isinstance(value, str) else None
        if text is None:
            raise SettingValueError(f"must be an https origin, got {show(value)}")
        if not text:
            return ""
        problem = _origin_problem(text)
        if problem:
            raise SettingValueError(f"{problem}, got {show(value)}")
        return text.rstrip("/")


def _origin_problem(text: str) -> str | None:
    example = "must be an https origin such as https://crawler.example.org"
    if not text.isascii() or not text.isprintable():
        return f"{example} (a host in its xn-- form)"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - read to have a malformed port refused
    except ValueError:
        return example
    if parts.scheme != "https" or not parts.hostname:
        return example
    if parts.username is not None or parts.password is not None:
        return f"{example}, without a user or password"
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.endswith(("?", "#")):
        return f"{example}, without a path: the key directory is at its /.well-known/ path"
    return None


def _list_from_text(text: str) -> object:
    if text.lstrip().startswith("["):
        # A JSON list; text that only starts like one ("[::1]:443,10.0.0.0/8") is a,b.
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text.split(",")


# --- The schema ----------------------------------------------------------------------------------

# Settings whose range is not the default rule ("a number >= 0", or "an integer >= 0" for an
# integer default), and seconds or rates whose default happens to be written as an integer.
_RULES: dict[str, Rule] = {
    "FRONTIER_BACKEND": Choice(BACKENDS),
    "FRONTIER_PRIORITY_POLICY": Choice(PRIORITY_POLICIES, {"breadth_first": "depth"}),
    "FRONTIER_HOST_CONCURRENCY": Number(integer=True, low=1),
    "FRONTIER_IP_CONCURRENCY": Number(integer=True),  # 0: politeness per name only
    "DNS_MIN_TTL": Number(),
    "DNS_NEGATIVE_TTL": Number(),
    "DNS_HOLD_TIMES": Number(integer=True),
    "FRONTIER_FRONT_QUEUES": Number(integer=True, low=1),
    "FRONTIER_HOST_MAX_FAILURES": Number(integer=True, low=1),
    # 32: the window is a bit mask (a Lua number in the Redis frontier); 0 turns it off
    "FRONTIER_HOST_FAILURE_WINDOW": Number(integer=True, high=32),
    "FRONTIER_HOST_MAX_FAILURE_RATIO": Number(above=True, high=1),
    "FRONTIER_REFILL_BATCH": Number(integer=True, low=1),
    "FRONTIER_COMMIT_INTERVAL": Number(above=True),
    "FRONTIER_LEASE_TTL": Number(above=True),
    "FRONTIER_READ_AHEAD": Number(integer=True, low=1),
    "FRONTIER_SHARDS": Number(integer=True, low=1, high=1024),
    "FRONTIER_SEEN_EXACT_LIMIT": Number(integer=True, low=-1),  # -1: exact whatever the size
    "FRONTIER_REPLICA_WAIT": Number(integer=True, low=0, high=16),
    "FRONTIER_SEEN_ERROR": Number(above=True, high=0.5),
    "CRAWLDB_PARTITIONS": Number(integer=True, high=1024),
    "INDEX_PARTITIONS": Number(integer=True, high=1024),
    "FRONTIER_BATCH_LINGER": Number(high=1),
    "FRONTIER_MAX_BACKLOG": Number(integer=True),  # 0: no bound
    "FRONTIER_MAX_BACKLOG_BYTES": Number(integer=True),  # 0: no bound
    "FRONTIER_REFRESH_INTERVAL": Number(above=True),
    "REDIS_CLUSTER": Choice(("auto", "yes", "no")),
    "RECRAWL_INTERVAL": Number(),
    "ROBOTSTXT_CACHE_EXPIRY": Number(),
    "URL_MAX_LENGTH": Number(integer=True, low=1),
    "DOWNLOAD_MIN_RATE": Number(),
    "PAGE_MAX_HTML": Number(integer=True, low=1),
    "NEARDUP_SHINGLE_SIZE": Number(integer=True, low=1),
    "NEARDUP_NUM_PERM": Number(integer=True, low=2),
    "NEARDUP_THRESHOLD": Number(above=True, high=1),
    "SITEMAPS_MAX_URLS": Number(integer=True, low=1),
    "SITEMAPS_MAX_SIZE": Number(integer=True, low=1),
    "CANONICAL_SCOPE": Choice(("host", "domain", "off")),
    "RECORD_INTERVAL": Number(above=True),
    "METRICS_PORT": Number(integer=True, high=65535),  # 0: off

    "WARC_MAX_SIZE": Number(integer=True, low=1),
    "WARC_REVISIT_MIN_SIZE": Number(integer=True, low=0),
    "FROM_ADDRESS": Mailbox(),
    "CRAWL_PURPOSE": Purposes(),
    "SIGNATURE_AGENT": Origin(),
}

#: Every setting of the crawler's own and its default (crawler/config/defaults.py).
OUR_SETTINGS: dict[str, Any] = {name: getattr(defaults, name) for name in defaults.__all__}

_CONSTANT = "no longer a setting: a constant of "
#: Settings there are no more (docs/decisions/0003-settings.md) and what became of each. A crawl
#: given one is refused in one line that says so: run without it, it would not do what its
#: operator asked, and "unknown setting" would send them looking for a typo.
REMOVED: dict[str, str] = {
    "CRAWLER_CONTACT_URL": "no longer a setting: set USER_AGENT",
    "REACTOR_STALL_INTERVAL": _CONSTANT + "crawler/extensions/stall.py",
    "CONTENT_THREAD_SWITCH_INTERVAL": _CONSTANT + "crawler/offload/components.py",
    "FEED_THREAD_MIN_CHARS": _CONSTANT + "crawler/pipelines/feed.py",
    "GC_FREEZE_INTERVAL": _CONSTANT + "crawler/extensions/gcpace.py",
    "GC_FULL_INTERVAL": _CONSTANT + "crawler/extensions/gcpace.py",
    "ROBOTSTXT_MAX_SIZE": _CONSTANT + "crawler/robots/rules.py (RFC 9309's 500 KiB)",
    "ROBOTSTXT_MAX_RETRY_DELAY": _CONSTANT + "crawler/robots/book.py",
    "ROBOTSTXT_WAIT_TIMEOUT": "no longer a setting: it follows DOWNLOAD_TIMEOUT and RETRY_TIMES",
    "SITEMAPS_MAX_FILES": _CONSTANT + "crawler/sitemaps/limits.py",
    "RETRY_AFTER_DEFAULT": _CONSTANT + "crawler/middlewares/retry_after.py",
    "DNS_CONCURRENCY": _CONSTANT + "crawler/download/dns.py",
    "DNS_CACHE_SIZE": _CONSTANT + "crawler/download/dns.py",
    "DNS_MAX_TTL": _CONSTANT + "crawler/download/dns.py",
    "DNS_PREFETCH": _CONSTANT + "crawler/download/dns.py",
    "DNS_HOLD_MAX": _CONSTANT + "crawler/middlewares/dns.py",
    "CRAWLDB_COMMIT_INTERVAL": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_LEASE": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_BATCH": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_INC_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_DEC_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_SYNC_DELTA_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_PRIORITY_LEVELS": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_MIN_INTERVAL": "no longer a setting: it follows RECRAWL_INTERVAL",
    "RECRAWL_MAX_INTERVAL": "no longer a setting: it follows RECRAWL_INTERVAL",
    "DOWNLOAD_MAX_HEADERS": _CONSTANT + "crawler/download/handler.py",
    "DOWNLOAD_MAX_HEADER_BYTES": _CONSTANT + "crawler/download/handler.py",
    "NEARDUP_JOURNAL_INTERVAL": _CONSTANT + "crawler/content/analysis_neardup.py",
    "INDEX_BATCH_SIZE": _CONSTANT + "crawler/pipelines/index.py",
    "INDEX_COMMIT_INTERVAL": _CONSTANT + "crawler/pipelines/index.py",
    "RECORD_AGGREGATE_INTERVAL": _CONSTANT + "crawler/extensions/recorder.py",
    "RECORD_MAX_BROKEN": _CONSTANT + "crawler/extensions/recorder.py",
    "WARC_GZIP_LEVEL": _CONSTANT + "crawler/archive/files.py",
    "WARC_REVISIT_REQUESTS": _CONSTANT + "crawler/archive/archiver.py",
    # the Lua frontier's (issue 37): the partition-owned frontier has no use for them
    "FRONTIER_SEEN_BLOOM_CAPACITY": "no longer a setting: the seen-set grows with "
    "FRONTIER_SEEN_EXACT_LIMIT and FRONTIER_SEEN_ERROR",
    "FRONTIER_SEEN_BLOOM_ERROR": "no longer a setting: set FRONTIER_SEEN_ERROR",
    "FRONTIER_REPLICA_WAIT_TIMEOUT": "no longer a setting: a write waits 1 s at most for "
    "FRONTIER_REPLICA_WAIT replicas (a constant of crawler/backends/redis/fence.py)",
    "FRONTIER_SHARD_PATIENCE": "no longer a setting: a Redis call retries while Redis is away "
    "(REDIS_OUTAGE_WAIT)",
    "FLEET_WORKER_LOST_AFTER": "no longer a setting: a dead worker's partitions are taken over "
    "when their lease runs out (a constant of crawler/backends/redis/frontier_store.py)",
}


def _rule_of_default(default: object) -> Rule:
    if isinstance(default, bool):
        return Boolean()
    if isinstance(default, int):
        return Number(integer=True)
    if isinstance(default, float):
        return Number()
    if isinstance(default, tuple):
        return StringList()
    return Rule()  # text, paths, class names: any value, as Scrapy passes it on


#: How each setting of ours is read.
RULES: dict[str, Rule] = {
    name: _RULES.get(name) or _rule_of_default(default) for name, default in OUR_SETTINGS.items()
}

#: Settings that must not exceed another: (lower, upper).
ORDERED: tuple[tuple[str, str], ...] = (("FRONTIER_MIN_DELAY", "FRONTIER_MAX_DELAY"),)

#: A setting that, when set, needs another set too: (setting, needed, why).
NEEDS: tuple[tuple[str, str, str], ...] = (
    (
        "SIGNATURE_KEY_FILE",
        "SIGNATURE_AGENT",
        "the https origin that publishes the key directory (a signed request must carry "
        "Signature-Agent)",
    ),
)


def needs_problems(
    values: Mapping[str, Any], unread: Collection[str] = ()
) -> list[tuple[str, str]]:
    """``(setting, problem)`` for each setting of :data:`NEEDS` set without its partner (one
    ``unread``, refused already, is not reported twice)."""
    return [
        (name, f"needs {needed}: {why}")
        for name, needed, why in NEEDS
        if values.get(name) and not values.get(needed) and needed not in unread
    ]


def read_value(name: str, value: object, show: Show = repr) -> Any:
    """``value`` in the type of our setting ``name``; raises :class:`SettingValueError`.
    A setting that is not ours, and ``None``, come back as they are; a setting there is no
    more (:data:`REMOVED`) is refused whatever its value."""
    if name in REMOVED:
        raise SettingValueError(REMOVED[name])
    rule = RULES.get(name)
    if rule is None or value is None:
        return value
    return rule.read(value, show)


def value_problem(name: str, value: object, show: Show = repr) -> str | None:
    """What is wrong with ``value`` for our setting ``name`` (None: fine or not ours)."""
    try:
        read_value(name, value, show)
    except SettingValueError as exc:
        return str(exc)
    return None


def order_problems(
    values: Mapping[str, Any],
    given: Collection[str] | None = None,
    label: Callable[[str], str] = str,
    unread: Collection[str] = (),
) -> list[tuple[str, str]]:
    """``(setting, problem)`` for each pair of :data:`ORDERED` out of order in ``values`` (read
    values; a missing one is its default). The setting blamed is one that was ``given`` (all
    of ``values`` when None), the lower one when both were; ``label`` names a setting as its
    source does (``politeness.max_delay`` is ``max_delay`` in its own table). A pair with an
    ``unread`` value (one refused already) is not compared."""
    given = set(values) if given is None else set(given)
    out = []
    for low, high in ORDERED:
        if (low not in given and high not in given) or low in unread or high in unread:
            continue
        lo = values.get(low, OUR_SETTINGS[low])
        hi = values.get(high, OUR_SETTINGS[high])
        if lo is None or hi is None or lo <= hi:
            continue
        if low in given:
            other = "" if high in given else ", the project default"
            problem = f"must not exceed {label(high)} ({hi:g}{other}), got {lo:g}"
            out.append((low, problem))
        else:
            problem = f"must not be below {label(low)} ({lo:g}, the project default), got {hi:g}"
            out.append((high, problem))
    return out


def removed_problem(name: str) -> str | None:
    """Why ``name``, a setting there is no more (:data:`REMOVED`), cannot be given; None for
    any other name."""
    return REMOVED.get(name)


def unknown_setting_hint(name: str, known: Iterable[str] = ()) -> str | None:
    """A warning for a name that looks like one of ours but is no setting at all."""
    if name in OUR_SETTINGS or name in _BORROWED or name in REMOVED:
        return None
    if not name.startswith(PREFIXES):
        return None
    known = set(known)
    if name in known:
        return None
    close = difflib.get_close_matches(name, [*OUR_SETTINGS, *known], n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown setting {name}, ignored{hint}"


class SettingsCheck(NamedTuple):
    """What :func:`check_settings` found: our settings' values as read (by name), the problems
    that refuse the crawl (``NAME: problem``) and the warnings."""

    values: dict[str, Any]
    problems: list[str]
    warnings: list[str]


def check_settings(
    names: Iterable[str],
    get: Callable[[str], Any],
    known: Iterable[str] = (),
    given: Collection[str] | None = None,
) -> SettingsCheck:
    """Read and check the settings ``names`` (values by ``get``): every problem and warning at
    once, each under the setting's name.

    ``known`` are other libraries' setting names (Scrapy's defaults, scrapy-redis's), which are
    never warned about; ``given`` are the names the user set (not left at the project default),
    which :func:`order_problems` blames first. Among ``names``, ``USER_AGENT`` and
    ``ROBOTSTXT_USER_AGENT`` are checked together too: robots.txt cannot name a crawler whose
    product token is a browser's (:func:`crawler.config.agent.agent_problem`).
    """
    known = set(known)
    wanted = set(names)
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    warnings = []
    for name in sorted(wanted):
        removed = removed_problem(name)
        if removed:
            problems[name] = removed
            continue
        value = get(name) if name in RULES else None
        if value is not None:  # None: not set
            try:
                values[name] = read_value(name, value)
            except SettingValueError as exc:
                problems[name] = str(exc)
        hint = unknown_setting_hint(name, known)
        if hint:
            warnings.append(hint)
    for name, problem in order_problems(values, given, unread=problems):
        problems.setdefault(name, problem)
    if wanted & {"USER_AGENT", "ROBOTSTXT_USER_AGENT"} and values.get(
        "ROBOTSTXT_ENABLED", OUR_SETTINGS["ROBOTSTXT_ENABLED"]
    ):
        agent = agent_problem(get("USER_AGENT"), get("ROBOTSTXT_USER_AGENT"))
        if agent:
            name, _, problem = agent.partition(": ")
            problems.setdefault(name, problem)
    for name, problem in needs_problems(values, unread=problems):
        problems.setdefault(name, problem)
    return SettingsCheck(values, [f"{n}: {p}" for n, p in sorted(problems.items())], warnings)


def read_settings(names: Iterable[str], get: Callable[[str], Any]) -> dict[str, Any]:
    """Our settings ``names`` as read (a missing one: its default); raises
    :class:`SettingsError` with every problem."""
    names = list(names)
    found = check_settings(names, get)
    if found.problems:
        raise SettingsError(found.problems)
    return {name: found.values.get(name, OUR_SETTINGS[name]) for name in names}
