"""Per-site crawl configs: one TOML file per site in ``crawler/sites/``, checked before any request.

A site config is user input that drives a long, unattended crawl, so it is validated strictly and
up front: a wrong type, an out-of-range number, a regex that does not compile, a seed that is not
an http(s) URL or a key that does not exist (a typo that would otherwise silently do nothing) is
refused with ``<file>: <key>: <what is wrong>``.

The configs live inside the ``crawler.sites`` package so they travel inside a scrapyd egg; they are
found with :func:`importlib.resources.files`, never relative to the current directory. This module
does not import Scrapy: the frontier and its tests use the same dataclasses without it.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
import re
import tomllib
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any
from urllib.parse import urlsplit

__all__ = [
    "PRIORITY_POLICIES",
    "Scope",
    "SeedsFileError",
    "SiteConfig",
    "SiteConfigError",
    "iter_seeds_file",
    "load_all_sites",
    "load_site_config",
    "read_seeds_file",
    "seed_url_problem",
    "sites_root",
]

SITES_PACKAGE = "crawler.sites"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
SETTING_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_HOST_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
#: Accepted ``[priority] policy`` values; ``breadth_first`` is stored as its alias ``depth``.
PRIORITY_POLICIES = ("depth", "breadth_first", "fifo", "request")
_POLICY_ALIASES = {"breadth_first": "depth"}
FOLLOWED_SCHEMES = frozenset({"http", "https"})
# Characters no host name may contain (WHATWG's forbidden host code points, less "%", which a
# percent-encoded host may use); urlsplit lets them through ("http://exa mple.com/").
_BAD_HOST_CHAR = re.compile(r"[\x00-\x20#/<>?@\[\\\]^|\x7f]")


def bad_host(host: str) -> bool:
    """Whether ``host`` (as ``urlsplit(...).hostname`` gives it) cannot be a real host name."""
    if ":" in host:  # an IPv6 literal; urlsplit has checked its brackets
        return False
    return _BAD_HOST_CHAR.search(host) is not None


class SiteConfigError(ValueError):
    """A site config (or a seeds file) that cannot be used, as ``<file>: <key>: <problem>``.

    ``file``, ``key`` and ``problem`` are kept apart so callers (the spider loader, tests) can
    report or match them without parsing the message. ``key`` is a dotted path such as
    ``politeness.min_delay`` or ``urls.allow[2]``, or ``None`` when the whole file is at fault.
    """

    def __init__(self, file: str, key: str | None, problem: str) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        super().__init__(f"{file}: {key}: {problem}" if key else f"{file}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``; ours has three, so say how to rebuild it.
        return (type(self), (self.file, self.key, self.problem))


class SeedsFileError(SiteConfigError):
    """A seeds file that is missing or unreadable; the message names the file."""


@dataclass(frozen=True)
class Scope:
    """Which hosts a site's crawl may enter.

    Both empty means "the hosts of the seeds" (the ``web`` site's rule); the scheduler supplies
    the seed hosts, since a scope alone cannot know them.
    """

    hosts: tuple[str, ...] = ()  # exact host names (lower-case, no port)
    domains: tuple[str, ...] = ()  # a domain and all its subdomains

    @property
    def is_empty(self) -> bool:
        return not self.hosts and not self.domains

    def contains(self, host: str) -> bool:
        """Whether ``host`` (a URL's lower-case host name) is in the configured hosts/domains.

        An empty scope contains nothing here: its hosts come from the seeds, which the caller
        must check itself.
        """
        host = host.rstrip(".")
        if host in self.hosts:
            return True
        return any(host == d or host.endswith("." + d) for d in self.domains)


@dataclass(frozen=True)
class SiteConfig:
    """One site's crawl policy as loaded from its TOML file (``crawler/sites/example.toml``)."""

    name: str
    path: str  # the file it came from (for messages)
    seeds: tuple[str, ...] = ()
    seeds_file: str | None = None  # absolute path of a seeds file named in the config
    scope: Scope = Scope()
    allow: tuple[str, ...] = ()  # regexes (re.search on the full URL); if any, one must match
    deny: tuple[str, ...] = ()  # regexes; a match excludes the URL
    max_depth: int | None = None
    max_pages_per_host: int | None = None
    max_url_length: int = 2048
    max_repeated_segments: int = 3
    priority_policy: str = "depth"  # "depth" (also given as "breadth_first"), "fifo", "request"
    user_agent: str | None = None
    allow_private_addresses: bool = False
    # Scrapy settings this site sets (spider priority). Read-only; excluded from the hash
    # because a mapping is not hashable.
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __post_init__(self) -> None:
        # Frozen means frozen: a plain dict given by a caller becomes a read-only view of a copy.
        if not isinstance(self.settings, MappingProxyType):
            object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))


# --- Seeds ---------------------------------------------------------------------------------------


def seed_url_problem(url: object) -> str | None:
    """What is wrong with ``url`` as a URL to fetch, or ``None`` if it is a usable http(s) URL.

    Shared by config validation and the spider's seeds files, so both refuse the same things.
    """
    if not isinstance(url, str):
        return f"must be a string, got {_show(url)}"
    if not url:
        return "must not be empty"
    if any(c.isspace() for c in url):
        return "must not contain whitespace"
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return f"cannot be parsed as a URL ({exc})"
    if parts.scheme not in FOLLOWED_SCHEMES:
        return "must be an http:// or https:// URL"
    if not host:
        return "has no host"
    if bad_host(host):
        return f"has an invalid host {_show(host)}"
    return None


def _zip_member(path: str) -> zipfile.Path | None:
    """``path`` as a member of a zip archive on the way (a seeds file inside a zipped egg)."""
    parent = os.path.dirname(path)
    inner = [os.path.basename(path)]
    while parent and parent != os.path.dirname(parent):
        if os.path.isfile(parent):
            if not zipfile.is_zipfile(parent):
                return None
            member = zipfile.Path(parent, at="/".join(reversed(inner)))
            return member if member.is_file() else None
        inner.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    return None


def _open_seeds(path: str | os.PathLike[str] | Traversable) -> IO[str]:
    """Open a seeds file for reading, raising :class:`SeedsFileError` naming it if we cannot."""
    shown = _display(path)
    try:
        if not isinstance(path, (str, os.PathLike)):
            return path.open("r", encoding="utf-8-sig")
        try:
            return open(path, encoding="utf-8-sig")  # the caller closes it
        except (FileNotFoundError, NotADirectoryError):
            member = _zip_member(os.path.abspath(os.fspath(path)))
            if member is None:
                raise
            return member.open("r", encoding="utf-8-sig")
    except IsADirectoryError:
        raise SeedsFileError(shown, None, "cannot read seeds file: it is a directory") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SeedsFileError(shown, None, f"cannot read seeds file: {reason}") from None


def check_seeds_file(path: str | os.PathLike[str] | Traversable) -> None:
    """Raise :class:`SeedsFileError` now if the seeds file cannot be opened.

    The spider calls this before the crawl starts, and reads the file lazily later, so a
    million-line seeds file is never held in memory.
    """
    _open_seeds(path).close()


def iter_seeds_file(path: str | os.PathLike[str] | Traversable) -> Iterator[str]:
    """The URLs in a seeds file, one per line, in order, without validating them.

    Blank lines and lines starting with ``#`` are skipped; so is anything after whitespace and
    a ``#`` on a line (a URL never contains whitespace, so that is a comment, not a fragment).
    """
    shown = _display(path)
    with _open_seeds(path) as fh:
        try:
            for line in fh:
                url = line.strip()
                if not url or url.startswith("#"):
                    continue
                yield re.split(r"\s+#", url, maxsplit=1)[0]
        except UnicodeDecodeError as exc:
            raise SeedsFileError(shown, None, f"seeds file is not UTF-8 text ({exc})") from None


def read_seeds_file(path: str | os.PathLike[str] | Traversable) -> list[str]:
    """All URLs of a seeds file (see :func:`iter_seeds_file`); raises :class:`SeedsFileError`."""
    return list(iter_seeds_file(path))


# --- Loading -------------------------------------------------------------------------------------


def sites_root(directory: str | os.PathLike[str] | Traversable | None = None) -> Traversable:
    """The folder holding the site configs: ``directory`` if given, else the ``crawler.sites``
    package (a real folder in a checkout, a folder inside the zip in a scrapyd egg)."""
    if directory is None:
        return files(SITES_PACKAGE)
    if isinstance(directory, (str, os.PathLike)):
        return Path(directory).absolute()
    return directory


def load_all_sites(
    directory: str | os.PathLike[str] | Traversable | None = None,
) -> tuple[dict[str, SiteConfig], dict[str, SiteConfigError]]:
    """Load every ``*.toml`` in the sites folder: the valid configs by name, the errors by file.

    One broken file must not hide the others (``scrapy list`` still lists the good ones, and
    ``scrapy crawl good`` still works), so errors are collected instead of raised.
    """
    root = sites_root(directory)
    sites: dict[str, SiteConfig] = {}
    errors: dict[str, SiteConfigError] = {}
    try:
        entries = sorted(
            (e for e in root.iterdir() if e.name.endswith(".toml") and not e.name.startswith(".")),
            key=lambda e: e.name,
        )
    except OSError as exc:
        shown = _display(root)
        errors[shown] = SiteConfigError(
            shown, None, f"cannot list site configs: {exc.strerror or exc}"
        )
        return sites, errors
    for entry in entries:
        if not entry.is_file():
            continue
        try:
            site = load_site_config(entry, base=root)
        except SiteConfigError as exc:
            errors[exc.file] = exc
        else:
            sites[site.name] = site
    return sites, errors


def load_site_config(
    source: str | os.PathLike[str] | Traversable,
    base: Traversable | None = None,
) -> SiteConfig:
    """Load and validate one site config; :class:`SiteConfigError` names the file and key.

    ``base`` is the folder a relative ``seeds_file`` is resolved against; it defaults to the
    config's own folder (pass it for a resource without a ``parent``).
    """
    entry: Traversable = (
        Path(source).absolute() if isinstance(source, (str, os.PathLike)) else source
    )
    shown = _display(entry)
    try:
        text = entry.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SiteConfigError(shown, None, f"not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise SiteConfigError(shown, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SiteConfigError(shown, None, f"invalid TOML: {exc}") from None
    if base is None:
        base = getattr(entry, "parent", None)
    stem = entry.name[: -len(".toml")] if entry.name.endswith(".toml") else entry.name
    return _Validator(shown, stem, base).build(data)


# --- Validation ----------------------------------------------------------------------------------

_TOP_KEYS = (
    "name",
    "seeds",
    "seeds_file",
    "user_agent",
    "allow_private_addresses",
    "scope",
    "urls",
    "limits",
    "politeness",
    "priority",
    "settings",
)
_TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "scope": ("hosts", "domains"),
    "urls": ("allow", "deny", "max_depth", "max_url_length", "max_repeated_segments"),
    "limits": ("max_pages_per_host",),
    "politeness": ("min_delay", "delay_factor", "max_delay", "host_concurrency", "max_crawl_delay"),
    "priority": ("policy",),
}
# [politeness] key -> (Scrapy setting, smallest value, integer?)
_POLITENESS: dict[str, tuple[str, float, bool]] = {
    "min_delay": ("FRONTIER_MIN_DELAY", 0, False),
    "delay_factor": ("FRONTIER_DELAY_FACTOR", 0, False),
    "max_delay": ("FRONTIER_MAX_DELAY", 0, False),
    "host_concurrency": ("FRONTIER_HOST_CONCURRENCY", 1, True),
    "max_crawl_delay": ("FRONTIER_MAX_CRAWL_DELAY", 0, False),
}
# Settings that a dedicated key sets: giving them in [settings] too would make two sources of
# truth (the scheduler reads the SiteConfig fields), so they are refused there.
_RESERVED_SETTINGS: dict[str, str] = {
    **{setting: f"politeness.{key}" for key, (setting, _, _) in _POLITENESS.items()},
    "USER_AGENT": "user_agent",
    "ALLOW_PRIVATE_ADDRESSES": "allow_private_addresses",
    "FRONTIER_PRIORITY_POLICY": "priority.policy",
    "URL_MAX_LENGTH": "urls.max_url_length",
    "URL_MAX_REPEATED_SEGMENTS": "urls.max_repeated_segments",
    "DEPTH_LIMIT": "urls.max_depth",
}


def _show(value: object) -> str:
    """A value as the user wrote it in TOML (strings quoted, ``true``), cut short if long."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _display(source: object) -> str:
    """A file name for messages: relative to the current directory when it is below it."""
    text = str(source)
    if not os.path.isabs(text):
        return text
    try:
        rel = os.path.relpath(text)
    except ValueError:  # another drive on Windows
        return text
    return text if rel.startswith("..") else rel


class _Validator:
    """Checks one parsed TOML document and builds the :class:`SiteConfig`; raises on the first
    problem, so the message is about one key the user can go and fix."""

    def __init__(self, file: str, stem: str, base: Traversable | None) -> None:
        self.file = file
        self.stem = stem
        self.base = base

    def fail(self, key: str | None, problem: str) -> SiteConfigError:
        return SiteConfigError(self.file, key, problem)

    # --- generic checks ---

    def check_keys(self, table: Mapping[str, Any], prefix: str, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in table:
            if key in allowed:
                continue
            full = f"{prefix}.{key}" if prefix else key
            raise self.fail(full, "unknown key" + self.suggest(prefix, key, allowed))

    @staticmethod
    def suggest(prefix: str, key: str, allowed: tuple[str, ...]) -> str:
        close = difflib.get_close_matches(key, allowed, n=1)
        if close:
            return f" (did you mean {close[0]}?)"
        # The classic TOML slip: a key meant for another table (or for the top level, written
        # after a [table] header, which makes it part of that table).
        for table, keys in _TABLE_KEYS.items():
            if key in keys and table != prefix:
                return f" (did you mean {table}.{key}, in the [{table}] table?)"
        if prefix and key in _TOP_KEYS:
            return f" (top-level keys such as {key} must come before the first [table] header)"
        return f" (known keys: {', '.join(allowed)})"

    def table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table ([{key}]), got {_show(value)}")
        return value

    def string(self, key: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {_show(value)}")
        return value

    def string_list(self, key: str, value: object) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list of strings, got {_show(value)}")
        for i, item in enumerate(value):
            self.string(f"{key}[{i}]", item)
        return value

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {_show(value)}")
        return value

    def integer(self, key: str, value: object, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, f"must be an integer >= {minimum}, got {_show(value)}")
        return value

    def number(self, key: str, value: object, minimum: float) -> float:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= minimum
        )
        if not ok:
            raise self.fail(key, f"must be a number >= {minimum:g}, got {_show(value)}")
        return float(value)  # type: ignore[arg-type]

    def host(self, key: str, value: object, *, domain: bool) -> str:
        text = self.string(key, value).strip().lower()
        if domain:
            text = text.removeprefix(".")
        text = text.rstrip(".")
        try:
            addr = ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
        except ValueError:
            pass
        else:
            if domain:
                raise self.fail(
                    key,
                    f"must be a domain name, not an IP address, got {_show(value)}"
                    f" (put addresses in scope.hosts)",
                )
            return addr.compressed
        if any(c in text for c in ":/@?#") or not text:
            raise self.fail(
                key, f"must be a bare host name (no scheme, port or path), got {_show(value)}"
            )
        if not text.isascii():
            try:
                text = text.encode("idna").decode("ascii")
            except UnicodeError:
                raise self.fail(key, f"is not a valid host name, got {_show(value)}") from None
        if not _HOST_RE.match(text):
            raise self.fail(key, f"is not a valid host name, got {_show(value)}")
        return text

    def hosts(self, key: str, value: object, *, domain: bool) -> tuple[str, ...]:
        items = self.string_list(key, value)
        out = [self.host(f"{key}[{i}]", item, domain=domain) for i, item in enumerate(items)]
        return tuple(dict.fromkeys(out))

    def patterns(self, key: str, value: object) -> tuple[str, ...]:
        items = self.string_list(key, value)
        for i, pattern in enumerate(items):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise self.fail(
                    f"{key}[{i}]", f"invalid regular expression {_show(pattern)}: {exc}"
                ) from None
        return tuple(items)

    # --- the document ---

    def build(self, data: Mapping[str, Any]) -> SiteConfig:
        self.check_keys(data, "", _TOP_KEYS)
        for table, keys in _TABLE_KEYS.items():
            self.check_keys(self.table(data, table), table, keys)
        settings: dict[str, Any] = {}

        if "name" not in data:
            raise self.fail("name", f'is required (name = "{self.stem}")')
        name = self.string("name", data["name"])
        if not NAME_RE.match(name):
            raise self.fail("name", f"must match {NAME_RE.pattern}, got {_show(name)}")
        if name != self.stem:
            raise self.fail(
                "name",
                f"must equal the file name without .toml ({_show(self.stem)}), got {_show(name)}"
                " (scrapy crawl finds a site by its file name)",
            )

        seeds = self.string_list("seeds", data.get("seeds", []))
        for i, url in enumerate(seeds):
            problem = seed_url_problem(url)
            if problem:
                raise self.fail(f"seeds[{i}]", f"{problem}, got {_show(url)}")

        seeds_file = None
        if "seeds_file" in data:
            seeds_file = self.seeds_file(self.string("seeds_file", data["seeds_file"]))

        user_agent = None
        if "user_agent" in data:
            user_agent = self.string("user_agent", data["user_agent"])
            if any(ord(c) < 32 or ord(c) == 127 for c in user_agent):
                raise self.fail("user_agent", "must not contain control characters (newlines)")
            settings["USER_AGENT"] = user_agent

        allow_private = self.boolean(
            "allow_private_addresses", data.get("allow_private_addresses", False)
        )
        if allow_private:
            settings["ALLOW_PRIVATE_ADDRESSES"] = True

        scope_t = self.table(data, "scope")
        scope = Scope(
            hosts=self.hosts("scope.hosts", scope_t.get("hosts", []), domain=False),
            domains=self.hosts("scope.domains", scope_t.get("domains", []), domain=True),
        )

        urls = self.table(data, "urls")
        max_depth = None
        if "max_depth" in urls:
            max_depth = self.integer("urls.max_depth", urls["max_depth"], 0)
        limits = self.table(data, "limits")
        max_pages = None
        if "max_pages_per_host" in limits:
            max_pages = self.integer("limits.max_pages_per_host", limits["max_pages_per_host"], 1)

        self.politeness(self.table(data, "politeness"), settings)

        policy = self.string("priority.policy", self.table(data, "priority").get("policy", "depth"))
        if policy not in PRIORITY_POLICIES:
            raise self.fail(
                "priority.policy",
                f"must be one of {', '.join(PRIORITY_POLICIES)}, got {_show(policy)}",
            )
        policy = _POLICY_ALIASES.get(policy, policy)
        settings["FRONTIER_PRIORITY_POLICY"] = policy

        for key, value in self.table(data, "settings").items():
            full = f"settings.{key}"
            if not SETTING_NAME_RE.match(key):
                raise self.fail(full, "Scrapy setting names are UPPER_CASE")
            if key in _RESERVED_SETTINGS:
                raise self.fail(full, f"set it with {_RESERVED_SETTINGS[key]} instead")
            settings[key] = value

        return SiteConfig(
            name=name,
            path=self.file,
            seeds=tuple(seeds),
            seeds_file=seeds_file,
            scope=scope,
            allow=self.patterns("urls.allow", urls.get("allow", [])),
            deny=self.patterns("urls.deny", urls.get("deny", [])),
            max_depth=max_depth,
            max_pages_per_host=max_pages,
            max_url_length=self.integer("urls.max_url_length", urls.get("max_url_length", 2048), 1),
            max_repeated_segments=self.integer(
                "urls.max_repeated_segments", urls.get("max_repeated_segments", 3), 0
            ),
            priority_policy=policy,
            user_agent=user_agent,
            allow_private_addresses=allow_private,
            settings=MappingProxyType(settings),
        )

    def seeds_file(self, value: str) -> str:
        """Resolve ``seeds_file`` against the config's folder and check it is there now."""
        if os.path.isabs(value):
            target: Traversable = Path(value)
        elif self.base is None:
            raise self.fail("seeds_file", "cannot resolve a relative path for this config source")
        else:
            target = self.base.joinpath(*value.replace("\\", "/").split("/"))
        if not target.is_file():
            raise self.fail("seeds_file", f"no such file: {_display(target)}")
        return str(target)

    def politeness(self, table: Mapping[str, Any], settings: dict[str, Any]) -> None:
        values: dict[str, float] = {}
        for key, (setting, minimum, integral) in _POLITENESS.items():
            if key not in table:
                continue
            full = f"politeness.{key}"
            value = (
                self.integer(full, table[key], int(minimum))
                if integral
                else self.number(full, table[key], minimum)
            )
            values[key] = value
            settings[setting] = value
        if "min_delay" in values or "max_delay" in values:
            # One bound alone is checked against the project default of the other, so
            # "min_delay = 60" does not end up silently capped by the default max of 30 s.
            lo = values.get("min_delay", _project_default("FRONTIER_MIN_DELAY", 1.0))
            hi = values.get("max_delay", _project_default("FRONTIER_MAX_DELAY", 30.0))
            if lo > hi:
                key = "politeness.min_delay" if "min_delay" in values else "politeness.max_delay"
                raise self.fail(
                    key,
                    f"min_delay ({lo:g}) must not exceed max_delay ({hi:g})"
                    + (
                        ""
                        if len(values.keys() & {"min_delay", "max_delay"}) == 2
                        else "; the other one is the project default"
                    ),
                )


def _project_default(setting: str, fallback: float) -> float:
    """A FRONTIER_* default from ``crawler.settings`` (plain constants, no Scrapy import)."""
    try:
        from crawler import settings as project  # only needed for this check
    except ImportError:
        return fallback
    value = getattr(project, setting, fallback)
    return float(value) if isinstance(value, (int, float)) else fallback
