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
name or key it is reported under. A name with one of the project's prefixes that is no
setting of ours is refused, with the closest real name ("did you mean"), from every source: run
without it, the crawl would not do what its operator asked. Scrapy's and scrapy-redis's own
settings are not ours to judge.

The bottom layer: free of Scrapy and of every other package of the crawler (the crawl command,
the site-config loader and the frontier's politeness policy all call it with plain values).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

from crawler.config import defaults
from crawler.config.agent import agent_problem
from crawler.config.removed import REMOVED
from crawler.config.rules import (
    BACKENDS,
    PRIORITY_POLICIES,
    PURPOSES,
    Boolean,
    Choice,
    ClassTable,
    Mailbox,
    Number,
    Origin,
    Purposes,
    Rule,
    SettingsError,
    SettingValueError,
    Show,
    StringList,
)
from crawler.config.tuning import TuningRule

__all__ = [  # the rules are used through this module, the one schema
    "BACKENDS", "PRIORITY_POLICIES", "PURPOSES", "REMOVED", "Boolean", "Choice", "Mailbox",
    "Number", "Origin", "Purposes", "Rule", "SettingValueError", "SettingsError", "Show",
    "StringList",
]  # fmt: skip

#: The plug points of BACKEND_CLASSES: each piece of crawl state and the class that keeps it
#: (crawler/backends/registry.py chooses them by FRONTIER_BACKEND and DATABASE_URL).
PLUG_POINTS = (
    "frontier_store", "robots_cache", "crawldb", "index", "neardup_store", "dns_shared",
    "address_budget", "warc_digest_index",
)  # fmt: skip

# Prefixes under which a name that is not a known setting is probably a typo of ours.
PREFIXES = (
    "FRONTIER_", "ROBOTSTXT_", "RECRAWL_", "CRAWLDB_", "INDEX_", "NEARDUP_", "URL_",
    "PAGE_", "CONTENT_", "RETRY_AFTER_", "ALLOWED_", "ALLOW_", "SITEMAPS_", "CANONICAL_",
    "WARC_", "DNS_", "SIGNATURE_", "SOFT404_", "REDIS_", "METRICS_", "RECORD_", "FLEET_",
    "CRAWL_", "CRAWLER_", "TUNING", "BACKEND_",
)  # fmt: skip

# Settings that are ours but not in crawler.config.defaults (their default is Scrapy's).
_BORROWED = {"ROBOTSTXT_USER_AGENT"}

#: Other libraries' settings under our prefixes, which are not ours to judge: Scrapy's (listed
#: here too, for the Scrapy-free site-config loader) and scrapy-redis's (its connection ones
#: are read by the Redis backend too).
LIBRARY_SETTINGS = frozenset({
    "DNS_RESOLVER", "DNS_TIMEOUT", "ROBOTSTXT_OBEY", "ROBOTSTXT_PARSER",
    "REDIS_URL", "REDIS_HOST", "REDIS_PORT", "REDIS_PARAMS", "REDIS_CLS", "REDIS_ENCODING",
    "REDIS_START_URLS_KEY", "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET",
    "REDIS_START_URLS_BATCH_SIZE", "REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER",
    "REDIS_CONCURRENT_REQUESTS", "REDIS_DECODE_RESPONSES",
})  # fmt: skip


# --- The schema ----------------------------------------------------------------------------------

# Settings whose range is not the default rule ("a number >= 0", or "an integer >= 0" for an
# integer default), and seconds or rates whose default happens to be written as an integer.
_RULES: dict[str, Rule] = {
    "FRONTIER_BACKEND": Choice(BACKENDS),
    "TUNING": TuningRule(),
    "BACKEND_CLASSES": ClassTable(PLUG_POINTS),
    "FRONTIER_PRIORITY_POLICY": Choice(PRIORITY_POLICIES, {"breadth_first": "depth"}),
    "FRONTIER_HOST_CONCURRENCY": Number(integer=True, low=1),
    "FRONTIER_IP_CONCURRENCY": Number(integer=True),  # 0: politeness per name only
    "FRONTIER_IP_DELAY": Number(blank=True),  # None or empty: FRONTIER_MIN_DELAY
    "FRONTIER_HOST_MAX_FAILURES": Number(integer=True, low=1),
    "FRONTIER_LEASE_TTL": Number(above=True),
    "FRONTIER_SHARDS": Number(integer=True, low=1, high=1024),
    "FRONTIER_SEEN_EXACT_LIMIT": Number(integer=True, low=-1),  # -1: exact whatever the size
    "FRONTIER_REPLICA_WAIT": Number(integer=True, low=0, high=16),
    "DATABASE_PARTITIONS": Number(integer=True, high=1024),
    "FRONTIER_MAX_BACKLOG": Number(integer=True),  # 0: no bound
    "REDIS_CLUSTER": Choice(("auto", "yes", "no")),
    "RECRAWL_INTERVAL": Number(),
    "ROBOTSTXT_CACHE_EXPIRY": Number(),
    "URL_MAX_LENGTH": Number(integer=True, low=1),
    "DOWNLOAD_MIN_RATE": Number(),
    "PAGE_MAX_HTML": Number(integer=True, low=1),
    "NEARDUP_THRESHOLD": Number(above=True, high=1),
    "CANONICAL_SCOPE": Choice(("host", "domain", "off")),
    "METRICS_PORT": Number(integer=True, high=65535),  # 0: off

    "WARC_MAX_SIZE": Number(integer=True, low=1),
    "FROM_ADDRESS": Mailbox(),
    "CRAWL_PURPOSE": Purposes(),
    "SIGNATURE_AGENT": Origin(),
}

#: Every setting of the crawler's own and its default (crawler/config/defaults.py).
OUR_SETTINGS: dict[str, Any] = {name: getattr(defaults, name) for name in defaults.__all__}

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
    more (:data:`REMOVED`), or a name that looks like ours but is none
    (:func:`unknown_problem`), is refused whatever its value."""
    if name in REMOVED:
        raise SettingValueError(REMOVED[name])
    rule = RULES.get(name)
    if rule is None:
        unknown = unknown_problem(name)
        if unknown:
            raise SettingValueError(unknown)
        return value
    if value is None:
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


def unknown_problem(name: str, known: Iterable[str] = ()) -> str | None:
    """Why ``name`` cannot be given: it looks like a setting of ours (one of :data:`PREFIXES`)
    but is none, with the closest real name. None for our settings, the removed ones (refused
    by :func:`removed_problem`), and other libraries' (``known``, :data:`LIBRARY_SETTINGS`)."""
    if name in OUR_SETTINGS or name in _BORROWED or name in REMOVED or name in LIBRARY_SETTINGS:
        return None
    known = set(known)
    if not name.startswith(PREFIXES) or name in known:
        return None
    close = difflib.get_close_matches(name, [*OUR_SETTINGS, *known], n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else " (docs/reference/settings.md lists them)"
    return f"unknown setting{hint}"


class SettingsCheck(NamedTuple):
    """What :func:`check_settings` found: our settings' values as read (by name), and the
    problems that refuse the crawl (``NAME: problem``)."""

    values: dict[str, Any]
    problems: list[str]


def check_settings(
    names: Iterable[str],
    get: Callable[[str], Any],
    known: Iterable[str] = (),
    given: Collection[str] | None = None,
    where: Callable[[str], str] = lambda name: "",
) -> SettingsCheck:
    """Read and check the settings ``names`` (values by ``get``): every problem at once, each
    under the setting's name (an unknown one followed by ``where`` it was given).

    ``known`` are other libraries' setting names (Scrapy's defaults), never called unknown
    (:func:`unknown_problem`); ``given`` are the names the user set (not left at the project
    default), which :func:`order_problems` blames first. Among ``names``, ``USER_AGENT`` and
    ``ROBOTSTXT_USER_AGENT`` are checked together too: robots.txt cannot name a crawler whose
    product token is a browser's (:func:`crawler.config.agent.agent_problem`).
    """
    known = set(known)
    wanted = set(names)
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    unknown: dict[str, str] = {}
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
        problem = unknown_problem(name, known)
        if problem:
            unknown[f"{name}{where(name)}"] = problem
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
    problems.update(unknown)
    return SettingsCheck(values, [f"{n}: {p}" for n, p in sorted(problems.items())])


def read_settings(names: Iterable[str], get: Callable[[str], Any]) -> dict[str, Any]:
    """Our settings ``names`` as read (a missing one: its default); raises
    :class:`SettingsError` with every problem."""
    names = list(names)
    found = check_settings(names, get)
    if found.problems:
        raise SettingsError(found.problems)
    return {name: found.values.get(name, OUR_SETTINGS[name]) for name in names}
