"""Per-site crawl configs: one TOML file per site in ``crawler/sites/``, checked before any request.

A site config is user input that drives a long, unattended crawl, so it is validated strictly and
up front: a wrong type, an out-of-range number, a regex that does not compile, a seed that is not
an http(s) URL or a key that does not exist (a typo that would otherwise silently do nothing) is
refused with ``<file>: <key>: <what is wrong>``, and every such problem of a file is reported at
once, so one edit fixes them all.

The schema is written once, as the pydantic models below (:class:`SiteFile` and its tables): the
keys, their types, limits and defaults, and the Scrapy setting each key sets. The list of known
keys (for "unknown key, did you mean ..."), the settings that ``[settings]`` may not repeat, and
the test that ``example.toml`` documents every key are all derived from them.
:class:`SiteConfig` is the flat, hashable view of a loaded file that the spider and the scheduler
use.

The configs live inside the ``crawler.sites`` package so they travel inside a scrapyd egg; they are
found with :func:`importlib.resources.files`, never relative to the current directory. This module
does not import Scrapy: the frontier and its tests use the same classes without it.
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
from typing import IO, Annotated, Any, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from crawler.config import defaults
from crawler.config.checks import value_problem
from crawler.frontier.urls import url_problem
from crawler.sites.fields import FieldSpec, FieldSpecError, field_name_problem, parse_field_spec

__all__ = [
    "PRIORITY_POLICIES",
    "Limits",
    "Politeness",
    "Priority",
    "Scope",
    "SeedsFileError",
    "Setting",
    "SiteConfig",
    "SiteConfigError",
    "SiteFile",
    "Urls",
    "iter_seeds_file",
    "load_all_sites",
    "load_site_config",
    "read_seeds_file",
    "schema_tables",
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


class SiteConfigError(ValueError):
    """A site config (or a seeds file) that cannot be used, as ``<file>: <key>: <problem>``.

    ``file``, ``key`` and ``problem`` are kept apart so callers (the spider loader, tests) can
    report or match them without parsing the message. ``key`` is a dotted path such as
    ``politeness.min_delay`` or ``urls.allow[2]``, or ``None`` when the whole file is at fault.
    A file with several problems raises one error for all of them: ``key`` and ``problem`` are
    the first, ``problems`` lists every ``(key, problem)``, and the message has one line each.
    """

    def __init__(
        self,
        file: str,
        key: str | None,
        problem: str,
        more: Iterable[tuple[str | None, str]] = (),
    ) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        self.problems: tuple[tuple[str | None, str], ...] = ((key, problem), *more)
        super().__init__(
            "\n".join(f"{file}: {k}: {p}" if k else f"{file}: {p}" for k, p in self.problems)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``; ours has more, so say how to rebuild it.
        return (type(self), (self.file, self.key, self.problem, self.problems[1:]))


class SeedsFileError(SiteConfigError):
    """A seeds file that is missing or unreadable; the message names the file."""


# --- Checks of single values ---------------------------------------------------------------------
#
# Each check raises a "site_config" error carrying the problem in our own words (pydantic's own
# messages, "Input should be a valid number", do not say what the key accepts); the "key" in its
# context, when there is one, names the key below the table the check runs on.


def _fail(problem: str, key: str | None = None) -> PydanticCustomError:
    context = {"problem": problem} if key is None else {"problem": problem, "key": key}
    return PydanticCustomError("site_config", "{problem}", context)


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(f"must be a non-empty string, got {_show(value)}")
    return value


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(f"must be true or false, got {_show(value)}")
    return value


def _integer(minimum: int) -> PlainValidator:
    """An integer ``>= minimum``; TOML's ``true`` and ``1.5`` are refused, not converted."""

    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(f"must be an integer >= {minimum}, got {_show(value)}")
        return value

    return PlainValidator(check)


def _number(minimum: float) -> PlainValidator:
    """A finite number ``>= minimum`` (TOML has ``nan`` and ``inf``), stored as a float."""

    def check(value: object) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < minimum
        ):
            raise _fail(f"must be a number >= {minimum:g}, got {_show(value)}")
        return float(value)

    return PlainValidator(check)


def _name(value: object, info: ValidationInfo) -> str:
    name = _text(value)
    if not NAME_RE.match(name):
        raise _fail(f"must match {NAME_RE.pattern}, got {_show(name)}")
    stem = (info.context or {}).get("stem")
    if stem is not None and name != stem:
        raise _fail(
            f"must equal the file name without .toml ({_show(stem)}), got {_show(name)}"
            " (scrapy crawl finds a site by its file name)"
        )
    return name


def _seed(value: object) -> str:
    url = _text(value)
    problem = seed_url_problem(url)
    if problem:
        raise _fail(f"{problem}, got {_show(url)}")
    return url


def _seeds_file(value: object, info: ValidationInfo) -> str:
    """Resolve ``seeds_file`` against the config's folder and check it is there now."""
    path = _text(value)
    if os.path.isabs(path):
        target: Traversable = Path(path)
    else:
        base: Traversable | None = (info.context or {}).get("base")
        if base is None:
            raise _fail("cannot resolve a relative path for this config source")
        target = base.joinpath(*path.replace("\\", "/").split("/"))
    if not target.is_file():
        raise _fail(f"no such file: {_display(target)}")
    return str(target)


def _user_agent(value: object) -> str:
    text = _text(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise _fail("must not contain control characters (newlines)")
    return text


def _host(value: object, *, domain: bool) -> str:
    """A host name (lower-case, IDNA) or, for ``hosts`` only, an IP address."""
    text = _text(value).strip().lower()
    if domain:
        text = text.removeprefix(".")
    text = text.rstrip(".")
    try:
        addr = ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        pass
    else:
        if domain:
            raise _fail(
                f"must be a domain name, not an IP address, got {_show(value)}"
                " (put addresses in scope.hosts)"
            )
        return addr.compressed
    if any(c in text for c in ":/@?#") or not text:
        raise _fail(f"must be a bare host name (no scheme, port or path), got {_show(value)}")
    if not text.isascii():
        try:
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            raise _fail(f"is not a valid host name, got {_show(value)}") from None
    if not _HOST_RE.match(text):
        raise _fail(f"is not a valid host name, got {_show(value)}")
    return text


def _pattern(value: object) -> str:
    pattern = _text(value)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise _fail(f"invalid regular expression {_show(pattern)}: {exc}") from None
    return pattern


def _policy(value: object) -> str:
    if value not in PRIORITY_POLICIES:
        raise _fail(f"must be one of {', '.join(PRIORITY_POLICIES)}, got {_show(value)}")
    return _POLICY_ALIASES.get(value, value)  # type: ignore[arg-type]


def _setting_name(value: str) -> str:
    if not SETTING_NAME_RE.match(value):
        raise _fail("Scrapy setting names are UPPER_CASE")
    if value in _RESERVED_SETTINGS:
        raise _fail(f"set it with {_RESERVED_SETTINGS[value]} instead")
    return value


def _field_name(value: str) -> str:
    problem = field_name_problem(value)
    if problem:
        raise _fail(problem)
    return value


def _field_spec(value: object) -> FieldSpec:
    try:
        return parse_field_spec(value)
    except FieldSpecError as exc:
        raise _fail(exc.problem, key=exc.key) from None


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


Host = Annotated[str, PlainValidator(lambda v: _host(v, domain=False))]
Domain = Annotated[str, PlainValidator(lambda v: _host(v, domain=True))]
Pattern = Annotated[str, PlainValidator(_pattern)]
SeedUrl = Annotated[str, PlainValidator(_seed)]
SettingName = Annotated[str, PlainValidator(_setting_name)]
FieldName = Annotated[str, PlainValidator(_field_name)]
FieldValue = Annotated[FieldSpec, PlainValidator(_field_spec)]


# --- The schema ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """Marks a key that stands for a Scrapy setting, which ``[settings]`` may then not repeat.

    With ``forward`` the key's value is also handed to Scrapy as that setting (when given: not
    ``None``, not ``false``); without it the scheduler reads the key from :class:`SiteConfig`,
    and the marker only keeps a second source of truth out of ``[settings]``.
    """

    name: str
    forward: bool = True


class _Table(BaseModel):
    """A TOML table: unknown keys are errors (a typo would otherwise silently do nothing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Scope(_Table):
    """``[scope]``: which hosts a site's crawl may enter.

    Both empty means "the hosts of the seeds" (the ``web`` site's rule); the scheduler supplies
    the seed hosts, since a scope alone cannot know them.
    """

    hosts: Annotated[tuple[Host, ...], AfterValidator(_unique)] = ()  # exact host names
    domains: Annotated[tuple[Domain, ...], AfterValidator(_unique)] = ()  # and their subdomains

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


class Urls(_Table):
    """``[urls]``: which URLs within the scope are fetched, and spider-trap defenses."""

    allow: tuple[Pattern, ...] = ()  # re.search on the full URL; if any, one must match
    deny: tuple[Pattern, ...] = ()  # a match excludes the URL
    max_depth: Annotated[int | None, _integer(0), Setting("DEPTH_LIMIT", forward=False)] = None
    max_url_length: Annotated[int, _integer(1), Setting("URL_MAX_LENGTH", forward=False)] = (
        defaults.URL_MAX_LENGTH
    )
    max_repeated_segments: Annotated[
        int, _integer(0), Setting("URL_MAX_REPEATED_SEGMENTS", forward=False)
    ] = defaults.URL_MAX_REPEATED_SEGMENTS


class Limits(_Table):
    """``[limits]``: budgets."""

    max_pages_per_host: Annotated[int | None, _integer(1)] = None


class Politeness(_Table):
    """``[politeness]``: overrides of the project's FRONTIER_* settings (``None``: not given)."""

    min_delay: Annotated[float | None, _number(0), Setting("FRONTIER_MIN_DELAY")] = None
    delay_factor: Annotated[float | None, _number(0), Setting("FRONTIER_DELAY_FACTOR")] = None
    max_delay: Annotated[float | None, _number(0), Setting("FRONTIER_MAX_DELAY")] = None
    host_concurrency: Annotated[int | None, _integer(1), Setting("FRONTIER_HOST_CONCURRENCY")] = (
        None
    )
    max_crawl_delay: Annotated[float | None, _number(0), Setting("FRONTIER_MAX_CRAWL_DELAY")] = None

    @model_validator(mode="after")
    def _delays_in_order(self) -> Politeness:
        # One bound alone is checked against the project default of the other, so
        # "min_delay = 60" does not end up silently capped by the default max of 30 s.
        given = {k: v for k in ("min_delay", "max_delay") if (v := getattr(self, k)) is not None}
        if not given:
            return self
        lo = given.get("min_delay", defaults.FRONTIER_MIN_DELAY)
        hi = given.get("max_delay", defaults.FRONTIER_MAX_DELAY)
        if lo > hi:
            problem = f"min_delay ({lo:g}) must not exceed max_delay ({hi:g})"
            if len(given) == 1:
                problem += "; the other one is the project default"
            raise _fail(problem, key=next(iter(given)))
        return self


class Priority(_Table):
    """``[priority]``: which URLs go first."""

    policy: Annotated[str, PlainValidator(_policy), Setting("FRONTIER_PRIORITY_POLICY")] = (
        defaults.FRONTIER_PRIORITY_POLICY
    )


class SiteFile(_Table):
    """One site config file, as written: the schema of ``crawler/sites/*.toml``.

    Validate it with ``context={"stem": <file name without .toml>, "base": <its folder>}``: the
    name must equal the stem, and a relative ``seeds_file`` is resolved against the folder.
    """

    name: Annotated[str, PlainValidator(_name)]
    seeds: tuple[SeedUrl, ...] = ()
    seeds_file: Annotated[str | None, PlainValidator(_seeds_file)] = None  # resolved path
    user_agent: Annotated[str | None, PlainValidator(_user_agent), Setting("USER_AGENT")] = None
    allow_private_addresses: Annotated[
        bool, PlainValidator(_boolean), Setting("ALLOW_PRIVATE_ADDRESSES")
    ] = False
    scope: Scope = Scope()
    urls: Urls = Urls()
    limits: Limits = Limits()
    politeness: Politeness = Politeness()
    priority: Priority = Priority()
    settings: dict[SettingName, Any] = {}  # any other Scrapy setting, passed on as-is
    # new item fields: CSS or XPath (crawler/sites/fields.py)
    fields: dict[FieldName, FieldValue] = {}

    @model_validator(mode="after")
    def _seeds_pass_own_patterns(self) -> SiteFile:
        # A seed the file's own URL patterns refuse would be dropped at the first request.
        for i, seed in enumerate(self.seeds):
            if self.urls.allow and not any(re.search(p, seed) for p in self.urls.allow):
                raise _fail("matches none of urls.allow, so it would never be fetched",
                            key=f"seeds[{i}]")
            denied = next((p for p in self.urls.deny if re.search(p, seed)), None)
            if denied is not None:
                raise _fail(f"matches urls.deny {denied!r}, so it would never be fetched",
                            key=f"seeds[{i}]")
        return self

    @model_validator(mode="after")
    def _settings_values(self) -> SiteFile:
        # The crawler's own settings are checked here too, so the message names this file.
        for name, value in self.settings.items():
            problem = value_problem(name, value)
            if problem:
                raise _fail(problem, key=f"settings.{name}")
        return self

    def scrapy_settings(self) -> dict[str, Any]:
        """The Scrapy settings this file sets: the keys marked with a forwarded :class:`Setting`
        that were given, then ``[settings]``."""
        out: dict[str, Any] = {}
        for key, setting in _settings_of(type(self)):
            value = self._value(key)
            if setting.forward and value is not None and value is not False:
                out[setting.name] = value
        out.update(self.settings)
        return out

    def _value(self, dotted: str) -> Any:
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return node

    def site_config(self, path: str) -> SiteConfig:
        """The flat view the crawler uses; ``path`` is the file, for messages."""
        return SiteConfig(
            name=self.name,
            path=path,
            seeds=self.seeds,
            seeds_file=self.seeds_file,
            scope=self.scope,
            allow=self.urls.allow,
            deny=self.urls.deny,
            max_depth=self.urls.max_depth,
            max_pages_per_host=self.limits.max_pages_per_host,
            max_url_length=self.urls.max_url_length,
            max_repeated_segments=self.urls.max_repeated_segments,
            priority_policy=self.priority.policy,
            user_agent=self.user_agent,
            allow_private_addresses=self.allow_private_addresses,
            settings=MappingProxyType(self.scrapy_settings()),
            fields=MappingProxyType(dict(self.fields)),
        )


def _tables(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The keys of each table of the schema: ``""`` for the top level, ``()`` for a free-form one
    (``[settings]``)."""
    out: dict[str, tuple[str, ...]] = {"": tuple(model.model_fields)}
    for key, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out[key] = tuple(kind.model_fields)
        elif get_origin(kind) is dict:
            out[key] = ()
    return out


def _settings_of(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Setting]]:
    """``(dotted key, Setting)`` for every key of the schema that stands for a Scrapy setting."""
    for key, info in model.model_fields.items():
        for mark in info.metadata:
            if isinstance(mark, Setting):
                yield prefix + key, mark
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _settings_of(kind, f"{prefix}{key}.")


def schema_tables() -> dict[str, tuple[str, ...]]:
    """The keys a site config may set, by table: ``""`` is the top level (tables included by
    name), ``[settings]`` is free-form (``()``). A copy, derived from :class:`SiteFile`."""
    return dict(_TABLES)


_TABLES = _tables(SiteFile)
# Settings that a dedicated key sets: giving them in [settings] too would make two sources of
# truth (the scheduler reads the SiteConfig fields), so they are refused there.
_RESERVED_SETTINGS: dict[str, str] = {s.name: key for key, s in _settings_of(SiteFile)}


_ANY_SCOPE = Scope()  # empty: the hosts of the seeds


def _default(model: type[BaseModel], key: str) -> Any:
    return model.model_fields[key].default


@dataclass(frozen=True)
class SiteConfig:
    """One site's crawl policy: the flat, hashable view of a :class:`SiteFile` that the spider
    and the scheduler use (built by :meth:`SiteFile.site_config`; tests build it directly).

    It declares no rules of its own: its defaults are the schema's.
    """

    name: str
    path: str  # the file it came from (for messages)
    seeds: tuple[str, ...] = ()
    seeds_file: str | None = None  # absolute path of a seeds file named in the config
    scope: Scope = _ANY_SCOPE
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    max_depth: int | None = _default(Urls, "max_depth")
    max_pages_per_host: int | None = _default(Limits, "max_pages_per_host")
    max_url_length: int = _default(Urls, "max_url_length")
    max_repeated_segments: int = _default(Urls, "max_repeated_segments")
    priority_policy: str = _default(Priority, "policy")
    user_agent: str | None = None
    allow_private_addresses: bool = _default(SiteFile, "allow_private_addresses")
    # Scrapy settings this site sets (spider priority). Read-only; excluded from the hash
    # because a mapping is not hashable.
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    # New item fields ([fields]): name -> selector. Read-only, not hashed, like settings.
    fields: Mapping[str, FieldSpec] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )

    def __post_init__(self) -> None:
        # Frozen means frozen: a plain dict given by a caller becomes a read-only view of a copy.
        if not isinstance(self.settings, MappingProxyType):
            object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        if not isinstance(self.fields, MappingProxyType):
            object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))


# --- Seeds ---------------------------------------------------------------------------------------


def seed_url_problem(url: object) -> str | None:
    """What is wrong with ``url`` as a URL to fetch, or ``None`` if it is a usable http(s) URL.

    Shared by config validation and the spider's seeds files, so both refuse the same things;
    the verdict is the frontier's own (:func:`crawler.frontier.urls.url_problem`), so a seed is
    refused here exactly when the frontier would refuse it later.
    """
    if not isinstance(url, str):
        return f"must be a string, got {_show(url)}"
    return url_problem(url)


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
    """Raise :class:`SeedsFileError` now if the seeds file cannot be opened or is not UTF-8.

    The crawl command calls this before the crawl starts, and the spider reads the file lazily
    later, so a million-line seeds file is never held in memory; reading it through once here
    means a bad byte on its last line stops the crawl before any request, like a missing file.
    """
    for _ in iter_seeds_file(path):
        pass


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
    try:
        document = SiteFile.model_validate(data, context={"stem": stem, "base": base})
    except ValidationError as exc:
        first, *more = _problems(exc, stem)
        raise SiteConfigError(shown, *first, more=more) from None
    return document.site_config(shown)


# --- Messages ------------------------------------------------------------------------------------


def _problems(exc: ValidationError, stem: str) -> list[tuple[str | None, str]]:
    """Every error of a file as ``(dotted key, problem)``, in our words.

    Our checks already speak them (a "site_config" error); pydantic's structural errors (an
    unknown key, a missing one, a table or list of the wrong type) are put into them here.
    """
    out: list[tuple[str | None, str]] = []
    for error in exc.errors(include_url=False):
        context = error.get("ctx") or {}
        loc = [part for part in error["loc"] if part != "[key]"]  # a [settings] name's own error
        if "key" in context:
            loc.append(context["key"])
        key = _dotted(loc)
        kind = error["type"]
        value = error.get("input")
        if kind == "site_config":
            problem = context["problem"]
        elif kind == "extra_forbidden":
            table = _dotted(loc[:-1])
            problem = "unknown key" + _suggest(table, str(loc[-1]))
        elif kind == "missing":
            problem = f'is required (name = "{stem}")' if key == "name" else "is required"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            problem = f"must be a table ([{key}]), got {_show(value)}"
        elif kind in ("tuple_type", "list_type"):
            problem = f"must be a list of strings, got {_show(value)}"
        else:  # a case the schema does not word itself: pydantic's own message
            problem = f"{error['msg']}, got {_show(value)}"
        out.append((key or None, problem))
    return out


def _dotted(loc: Iterable[str | int]) -> str:
    """``("urls", "allow", 2)`` as ``urls.allow[2]``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _suggest(table: str, key: str) -> str:
    """The likely intended key for an unknown ``key`` in ``table`` (``""``: the top level)."""
    allowed = _TABLES.get(table, ())
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f" (did you mean {close[0]}?)"
    # The classic TOML slip: a key meant for another table (or for the top level, written
    # after a [table] header, which makes it part of that table).
    for other, keys in _TABLES.items():
        if other and other != table and key in keys:
            return f" (did you mean {other}.{key}, in the [{other}] table?)"
    if table and key in _TABLES[""]:
        return f" (top-level keys such as {key} must come before the first [table] header)"
    return f" (known keys: {', '.join(allowed)})"


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

