"""Checks of the crawler's own settings, by their own names, before a crawl starts.

Scrapy converts a setting only where a component reads it (``getfloat`` deep inside a
constructor), so ``-s FRONTIER_MIN_DELAY=abc`` used to surface as four tracebacks and the
last line did not name the setting. Here every setting of :mod:`crawler.config.defaults` is checked
once, up front, against the type of its default and the range below, and the message names the
setting as the user wrote it. A misspelt name with one of the project's prefixes gets a "did you
mean" warning; Scrapy's and scrapy-redis's own settings are not ours to judge.

Free of Scrapy: the crawl command and the site-config loader both call it with plain values.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from crawler.config import defaults

OUR_SETTINGS: dict[str, Any] = {name: getattr(defaults, name) for name in defaults.__all__}

# Settings that are ours but not in crawler.config.defaults (their default is Scrapy's).
_BORROWED = {"ROBOTSTXT_USER_AGENT"}

# Prefixes under which a name that is not a known setting is probably a typo of ours.
PREFIXES = (
    "FRONTIER_", "ROBOTSTXT_", "RECRAWL_", "CRAWLDB_", "INDEX_", "NEARDUP_", "URL_",
    "PAGE_", "CONTENT_", "RETRY_AFTER_", "ALLOWED_", "ALLOW_",
)  # fmt: skip

_POLICIES = ("depth", "breadth_first", "fifo", "request")
_BACKENDS = ("memory", "redis")

# (lowest allowed, strictly above it?) for numbers; the default rule is ">= 0".
_RANGES: dict[str, tuple[float, bool]] = {
    "FRONTIER_HOST_CONCURRENCY": (1, False),
    "FRONTIER_FRONT_QUEUES": (1, False),
    "FRONTIER_HOST_MAX_FAILURES": (1, False),
    "FRONTIER_REFILL_BATCH": (1, False),
    "FRONTIER_COMMIT_INTERVAL": (0, True),
    "FRONTIER_LEASE_TTL": (0, True),
    "FRONTIER_READ_AHEAD": (1, False),
    "FRONTIER_REFRESH_INTERVAL": (0, True),
    "CRAWLDB_COMMIT_INTERVAL": (0, True),
    "RECRAWL_BATCH": (1, False),
    "DOWNLOAD_MAX_HEADERS": (1, False),
    "DOWNLOAD_MAX_HEADER_BYTES": (1, False),
    "PAGE_MAX_HTML": (1, False),
    "NEARDUP_SHINGLE_SIZE": (1, False),
    "NEARDUP_NUM_PERM": (2, False),
    "NEARDUP_THRESHOLD": (0, True),
    "INDEX_BATCH_SIZE": (1, False),
    "INDEX_COMMIT_INTERVAL": (0, True),
}
# Seconds and rates whose default happens to be written as an integer: any number will do.
_FLOATS = {
    "ROBOTSTXT_CACHE_EXPIRY", "ROBOTSTXT_WAIT_TIMEOUT", "RECRAWL_INTERVAL", "DOWNLOAD_MIN_RATE",
}  # fmt: skip
_AT_MOST_ONE = {
    "NEARDUP_THRESHOLD", "RECRAWL_INC_RATE", "RECRAWL_DEC_RATE", "RECRAWL_SYNC_DELTA_RATE",
}  # fmt: skip
_CHOICES: dict[str, tuple[str, ...]] = {
    "FRONTIER_PRIORITY_POLICY": _POLICIES,
    "FRONTIER_BACKEND": _BACKENDS,
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _show(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("must be true or false")


def _as_number(value: object, integer: bool) -> float:
    if isinstance(value, bool):
        raise ValueError("is a boolean")
    if integer:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return int(value)  # type: ignore[call-overload]
    return float(value)  # type: ignore[arg-type]


def _range_problem(name: str, number: float, kind: str) -> str | None:
    low, strict = _RANGES.get(name, (0, False))
    if number < low or (strict and number == low):
        return f"must be {kind} {'>' if strict else '>='} {low:g}, got {number:g}"
    if name in _AT_MOST_ONE and number > 1:
        return f"must be {kind} <= 1, got {number:g}"
    return None


def value_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` for our setting ``name`` (None: fine or not ours)."""
    if name not in OUR_SETTINGS or value is None:
        return None
    default = OUR_SETTINGS[name]
    if name in _CHOICES:
        text = str(value).strip().lower()
        return None if text in _CHOICES[name] else (
            f"must be one of {', '.join(_CHOICES[name])}, got {_show(value)}"
        )
    try:
        if isinstance(default, bool):
            _as_bool(value)
            return None
        if isinstance(default, int | float):
            integer = isinstance(default, int) and name not in _FLOATS
            number = _as_number(value, integer)
            return _range_problem(name, number, "an integer" if integer else "a number")
    except (TypeError, ValueError):
        if isinstance(default, bool):
            return f"must be true or false, got {_show(value)}"
        integer = isinstance(default, int) and name not in _FLOATS
        kind = "an integer" if integer else "a number"
        low, strict = _RANGES.get(name, (0, False))
        return f"must be {kind} {'>' if strict else '>='} {low:g}, got {_show(value)}"
    return None


def unknown_setting_hint(name: str, known: Iterable[str] = ()) -> str | None:
    """A warning for a name that looks like one of ours but is no setting at all."""
    if name in OUR_SETTINGS or name in _BORROWED or not name.startswith(PREFIXES):
        return None
    known = set(known)
    if name in known:
        return None
    close = difflib.get_close_matches(name, [*OUR_SETTINGS, *known], n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown setting {name}, ignored{hint}"


def check_settings(
    names: Iterable[str], get: Callable[[str], Any], known: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """Problems (refuse the crawl) and warnings for the settings ``names``, read with ``get``.

    ``known`` are other libraries' setting names (Scrapy's defaults, scrapy-redis's), which
    are never warned about.
    """
    known = set(known)
    problems, warnings = [], []
    for name in sorted(set(names)):
        problem = value_problem(name, get(name)) if name in OUR_SETTINGS else None
        if problem:
            problems.append(f"{name}: {problem}")
        hint = unknown_setting_hint(name, known)
        if hint:
            warnings.append(hint)
    return problems, warnings
