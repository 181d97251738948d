"""The schema of a site config file (``crawler/sites/*.toml``): its tables, their keys, types,
limits and defaults, and the Scrapy setting each key sets.

The schema is written once, as the pydantic models below (:class:`SiteFile` and its tables). The
list of known keys (for "unknown key, did you mean ..."), the settings that ``[settings]`` may
not repeat, and the test that ``example.toml`` documents every key are all derived from them.
A key that stands for a setting of the crawler's own (``[politeness]``, ``priority.policy``,
``allow_private_addresses``, ``urls.max_url_length``, ...) and every such setting in
``[settings]`` is read by the settings schema (crawler/config/schema.py), so a value gets the
same verdict here as with ``-s``. :class:`SiteConfig` is the flat, hashable view of a loaded
file that the spider and the scheduler use.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainValidator,
    ValidationInfo,
    model_validator,
)

from crawler.config import defaults
from crawler.config.schema import (
    RULES,
    Boolean,
    Number,
    Rule,
    SettingValueError,
    order_problems,
    read_value,
)
from crawler.frontier.policies import DEFAULT as DEFAULT_POLICY
from crawler.frontier.policies import PolicyError, policy_from_mapping
from crawler.sites.content import Content
from crawler.sites.fields import FieldSpec, FieldSpecError, field_name_problem, parse_field_spec
from crawler.sites.messages import display, fail, fail_all, show
from crawler.sites.seeds import seed_url_problem

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
SETTING_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_HOST_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")


# --- Checks of single values ---------------------------------------------------------------------
#
# Each check raises a "site_config" error carrying the problem in our own words (pydantic's own
# messages, "Input should be a valid number", do not say what the key accepts); the "key" in its
# context, when there is one, names the key below the table the check runs on.


def _read(rule: Rule) -> PlainValidator:
    """A key read by a rule of the settings schema (types, limits and their messages)."""

    def check(value: object) -> Any:
        try:
            return rule.read(value, show)
        except SettingValueError as exc:
            raise fail(str(exc)) from None

    return PlainValidator(check)


def _our(setting: str) -> PlainValidator:
    """A key that stands for our ``setting``: read exactly as ``-s`` reads it."""
    return _read(RULES[setting])


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(f"must be a non-empty string, got {show(value)}")
    return value


def _name(value: object, info: ValidationInfo) -> str:
    name = _text(value)
    if not NAME_RE.match(name):
        raise fail(f"must match {NAME_RE.pattern}, got {show(name)}")
    stem = (info.context or {}).get("stem")
    if stem is not None and name != stem:
        raise fail(
            f"must equal the file name without .toml ({show(stem)}), got {show(name)}"
            " (scrapy crawl finds a site by its file name)"
        )
    return name


def _seed(value: object) -> str:
    url = _text(value)
    problem = seed_url_problem(url)
    if problem:
        raise fail(f"{problem}, got {show(url)}")
    return url


def _seeds_file(value: object, info: ValidationInfo) -> str:
    """Resolve ``seeds_file`` against the config's folder and check it is there now."""
    path = _text(value)
    if os.path.isabs(path):
        target: Traversable = Path(path)
    else:
        base: Traversable | None = (info.context or {}).get("base")
        if base is None:
            raise fail("cannot resolve a relative path for this config source")
        target = base.joinpath(*path.replace("\\", "/").split("/"))
    if not target.is_file():
        raise fail(f"no such file: {display(target)}")
    return str(target)


def _domains_file(value: object, info: ValidationInfo) -> str:
    """``trusted_domains`` / ``distrusted_domains``: a file of domains, resolved and checked
    like ``seeds_file``."""
    return _seeds_file(value, info)


def _policies(value: object) -> dict[str, dict[str, Any]]:
    """``[policies.NAME]`` tables: each read by the crawl-policy schema
    (``crawler.frontier.policies``), whose errors name the key; ``seeds`` lists the seeds
    that start under the policy."""
    if not isinstance(value, dict):
        raise fail(f"must be a table of policies, got {show(value)}")
    out: dict[str, dict[str, Any]] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise fail(f"a policy name must match {NAME_RE.pattern}, got {show(name)}")
        if not isinstance(raw, dict):
            raise fail(f"must be a table, got {show(raw)}", key=name)
        table = dict(raw)
        seeds = table.pop("seeds", [])
        if not isinstance(seeds, list):
            raise fail(f"must be a list of URLs, got {show(seeds)}", key=f"{name}.seeds")
        for i, seed in enumerate(seeds):
            problem = seed_url_problem(seed)
            if problem:
                raise fail(f"{problem}, got {show(seed)}", key=f"{name}.seeds[{i}]")
        try:
            policy_from_mapping(name, table)
        except PolicyError as exc:
            where, _, problem = str(exc).partition(": ")
            raise fail(problem, key=where.removeprefix("policies.")) from None
        out[name] = dict(raw)
    for name, raw in out.items():
        target = raw.get("switch_to")
        if target and target not in out and target != DEFAULT_POLICY:
            raise fail(f"no policy named {show(target)}", key=f"{name}.switch_to")
    return out


def _user_agent(value: object) -> str:
    text = _text(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise fail("must not contain control characters (newlines)")
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
            raise fail(
                f"must be a domain name, not an IP address, got {show(value)}"
                " (put addresses in scope.hosts)"
            )
        return addr.compressed
    if any(c in text for c in ":/@?#") or not text:
        raise fail(f"must be a bare host name (no scheme, port or path), got {show(value)}")
    if not text.isascii():
        try:
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            raise fail(f"is not a valid host name, got {show(value)}") from None
    if not _HOST_RE.match(text):
        raise fail(f"is not a valid host name, got {show(value)}")
    return text


def _pattern(value: object) -> str:
    pattern = _text(value)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise fail(f"invalid regular expression {show(pattern)}: {exc}") from None
    return pattern


def _setting_name(value: str) -> str:
    if not SETTING_NAME_RE.match(value):
        raise fail("Scrapy setting names are UPPER_CASE")
    if value in _RESERVED_SETTINGS:
        raise fail(f"set it with {_RESERVED_SETTINGS[value]} instead")
    return value


def _field_name(value: str) -> str:
    problem = field_name_problem(value)
    if problem:
        raise fail(problem)
    return value


def _field_spec(value: object) -> FieldSpec:
    try:
        return parse_field_spec(value)
    except FieldSpecError as exc:
        raise fail(exc.problem, key=exc.key) from None


def _settings_values(table: dict[str, Any]) -> dict[str, Any]:
    """``[settings]``: the crawler's own settings in it read by the settings schema, every
    problem at once; other libraries' settings pass as they are."""
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name, value in table.items():
        try:
            values[name] = read_value(name, value, show)
        except SettingValueError as exc:
            problems.append((name, str(exc)))
    problems += order_problems(values, unread=[name for name, _ in problems])
    if problems:
        raise fail_all(problems)
    return values


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


def _settings_of(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Setting]]:
    """``(dotted key, Setting)`` for every key of the schema that stands for a Scrapy setting."""
    for key, info in model.model_fields.items():
        for mark in info.metadata:
            if isinstance(mark, Setting):
                yield prefix + key, mark
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _settings_of(kind, f"{prefix}{key}.")


class _Table(BaseModel):
    """A TOML table: unknown keys are errors (a typo would otherwise silently do nothing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Scope(_Table):
    """``[scope]``: which hosts a site's crawl may enter.

    Both empty means "the hosts of the seeds" (the ``web`` site's rule); the scheduler supplies
    the seed hosts, since a scope alone cannot know them. ``open = true``: any host a link leads
    to (a broad crawl of the open web; the URL filters, ``max_depth``, the per-domain host budget,
    the crawl policies and robots.txt still decide), with no host or domain list beside it.
    """

    hosts: Annotated[tuple[Host, ...], AfterValidator(_unique)] = ()  # exact host names
    domains: Annotated[tuple[Domain, ...], AfterValidator(_unique)] = ()  # and their subdomains
    open: bool = False  # any host

    @model_validator(mode="after")
    def _open_alone(self) -> Scope:
        if self.open and (self.hosts or self.domains):
            raise ValueError(
                "open = true admits every host: drop hosts and domains, or set open = false"
            )
        return self

    @property
    def is_empty(self) -> bool:
        return not self.open and not self.hosts and not self.domains

    def contains(self, host: str) -> bool:
        """Whether ``host`` (a URL's lower-case host name) is in the configured hosts/domains
        (any host, for an open scope).

        An empty scope contains nothing here: its hosts come from the seeds, which the caller
        must check itself.
        """
        if self.open:
            return True
        host = host.rstrip(".")
        if host in self.hosts:
            return True
        return any(host == d or host.endswith("." + d) for d in self.domains)


class Urls(_Table):
    """``[urls]``: which URLs within the scope are fetched, and spider-trap defenses."""

    allow: tuple[Pattern, ...] = ()  # re.search on the full URL; if any, one must match
    deny: tuple[Pattern, ...] = ()  # a match excludes the URL
    max_depth: Annotated[
        int | None, _read(Number(integer=True)), Setting("DEPTH_LIMIT", forward=False)
    ] = None
    max_url_length: Annotated[
        int, _our("URL_MAX_LENGTH"), Setting("URL_MAX_LENGTH", forward=False)
    ] = defaults.URL_MAX_LENGTH
    max_repeated_segments: Annotated[
        int, _our("URL_MAX_REPEATED_SEGMENTS"), Setting("URL_MAX_REPEATED_SEGMENTS", forward=False)
    ] = defaults.URL_MAX_REPEATED_SEGMENTS


class Limits(_Table):
    """``[limits]``: budgets."""

    max_pages_per_host: Annotated[int | None, _read(Number(integer=True, low=1))] = None


class Politeness(_Table):
    """``[politeness]``: overrides of the project's FRONTIER_* settings (``None``: not given)."""

    min_delay: Annotated[
        float | None, _our("FRONTIER_MIN_DELAY"), Setting("FRONTIER_MIN_DELAY")
    ] = None
    delay_factor: Annotated[
        float | None, _our("FRONTIER_DELAY_FACTOR"), Setting("FRONTIER_DELAY_FACTOR")
    ] = None
    max_delay: Annotated[
        float | None, _our("FRONTIER_MAX_DELAY"), Setting("FRONTIER_MAX_DELAY")
    ] = None
    host_concurrency: Annotated[
        int | None, _our("FRONTIER_HOST_CONCURRENCY"), Setting("FRONTIER_HOST_CONCURRENCY")
    ] = None
    max_crawl_delay: Annotated[
        float | None, _our("FRONTIER_MAX_CRAWL_DELAY"), Setting("FRONTIER_MAX_CRAWL_DELAY")
    ] = None

    @model_validator(mode="after")
    def _in_order(self) -> Politeness:
        # The schema's rules between settings (min_delay <= max_delay). One bound alone is
        # checked against the project default of the other, so "min_delay = 60" does not end
        # up silently capped by the default max of 30 s.
        keys = {mark.name: key for key, mark in _settings_of(Politeness)}
        given = {name: v for name, key in keys.items() if (v := getattr(self, key)) is not None}
        problems = order_problems(given, label=keys.__getitem__)
        if problems:
            raise fail_all([(keys[name], problem) for name, problem in problems])
        return self


class Priority(_Table):
    """``[priority]``: which URLs go first."""

    policy: Annotated[
        str, _our("FRONTIER_PRIORITY_POLICY"), Setting("FRONTIER_PRIORITY_POLICY")
    ] = defaults.FRONTIER_PRIORITY_POLICY


class Requisites(_Table):
    """``[requisites]``: an archival crawl fetches each page's embedded resources with it
    (stylesheets, scripts, images, fonts, frames; ``crawler.content.requisites``), so the page
    replays as it looked.

    The requisites rule: a requisite may come from any host (a CDN, a font service), outside
    the site's scope, URL filters, depth and page budget; it still waits for its own host's
    politeness and robots.txt, is refused by the address safety rules and by an operator's
    block, is fetched once per crawl (the seen-set), and never counts as a page: no item, no
    index, no near-duplicate check, no links followed (a stylesheet and a frame are read for
    their own requisites only, up to ``max_hops`` from the page).
    """

    fetch: Annotated[bool, _read(Boolean())] = False
    max_per_page: Annotated[int, _read(Number(integer=True, low=1, high=10_000))] = 200
    max_hops: Annotated[int, _read(Number(integer=True, low=1, high=5))] = 3
    deny: tuple[Pattern, ...] = ()  # re.search on the full URL: never fetched as a requisite


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
        bool, _our("ALLOW_PRIVATE_ADDRESSES"), Setting("ALLOW_PRIVATE_ADDRESSES")
    ] = False
    purpose: Annotated[
        tuple[str, ...] | None, _our("CRAWL_PURPOSE"), Setting("CRAWL_PURPOSE")
    ] = None
    scope: Scope = Scope()
    urls: Urls = Urls()
    limits: Limits = Limits()
    politeness: Politeness = Politeness()
    priority: Priority = Priority()
    requisites: Requisites = Requisites()
    content: Content = Content()  # [content]: kinds read, languages kept (sites/content.py)
    # any other Scrapy setting, passed on as-is (ours read as -s reads them)
    settings: Annotated[dict[SettingName, Any], AfterValidator(_settings_values)] = {}
    # new item fields: CSS or XPath (crawler/sites/fields.py)
    fields: dict[FieldName, FieldValue] = {}
    # crawl policies (crawler/frontier/policies.py): [policies.NAME] tables
    policies: Annotated[dict[str, Any], PlainValidator(_policies)] = {}
    trusted_domains: Annotated[str | None, PlainValidator(_domains_file)] = None
    distrusted_domains: Annotated[str | None, PlainValidator(_domains_file)] = None
    distrusted_policy: str = ""

    @model_validator(mode="after")
    def _distrusted_policy_exists(self) -> SiteFile:
        name = self.distrusted_policy
        if name and name not in self.policies:
            raise fail(f"no policy named {show(name)} in [policies]", key="distrusted_policy")
        return self

    @model_validator(mode="after")
    def _seeds_pass_own_patterns(self) -> SiteFile:
        # A seed the file's own URL patterns refuse would be dropped at the first request.
        for i, seed in enumerate(self.seeds):
            if self.urls.allow and not any(re.search(p, seed) for p in self.urls.allow):
                raise fail(
                    "matches none of urls.allow, so it would never be fetched", key=f"seeds[{i}]"
                )
            denied = next((p for p in self.urls.deny if re.search(p, seed)), None)
            if denied is not None:
                raise fail(
                    f"matches urls.deny {denied!r}, so it would never be fetched", key=f"seeds[{i}]"
                )
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
            requisites=self.requisites,
            content=self.content,
            user_agent=self.user_agent,
            allow_private_addresses=self.allow_private_addresses,
            settings=MappingProxyType(self.scrapy_settings()),
            fields=MappingProxyType(dict(self.fields)),
            policies=MappingProxyType(
                {
                    n: {k: v for k, v in raw.items() if k != "seeds"}
                    for n, raw in self.policies.items()
                }
            ),
            policy_seeds=tuple(
                (url, name) for name, raw in self.policies.items() for url in raw.get("seeds", ())
            ),
            trusted_domains=self.trusted_domains,
            distrusted_domains=self.distrusted_domains,
            distrusted_policy=self.distrusted_policy,
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


def schema_tables() -> dict[str, tuple[str, ...]]:
    """The keys a site config may set, by table: ``""`` is the top level (tables included by
    name), ``[settings]`` is free-form (``()``). A copy, derived from :class:`SiteFile`."""
    return dict(_TABLES)


_TABLES = _tables(SiteFile)
# Settings that a dedicated key sets: giving them in [settings] too would make two sources of
# truth (the scheduler reads the SiteConfig fields), so they are refused there.
_RESERVED_SETTINGS: dict[str, str] = {s.name: key for key, s in _settings_of(SiteFile)}

_ANY_SCOPE = Scope()  # empty: the hosts of the seeds
_NO_REQUISITES = Requisites()  # fetch = false
_ALL_CONTENT = Content()  # every kind, every language


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
    requisites: Requisites = _NO_REQUISITES  # [requisites]: off unless fetch = true
    content: Content = _ALL_CONTENT  # [content]: kinds read, languages kept
    user_agent: str | None = None
    allow_private_addresses: bool = _default(SiteFile, "allow_private_addresses")
    # Scrapy settings this site sets (spider priority). Read-only; excluded from the hash
    # because a mapping is not hashable.
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    # New item fields ([fields]): name -> selector. Read-only, not hashed, like settings.
    fields: Mapping[str, FieldSpec] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    # Crawl policies ([policies.NAME], crawler/frontier/policies.py), the seeds that name one
    # ((url, policy)), and the domain lists. Not hashed, like settings.
    policies: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    policy_seeds: tuple[tuple[str, str], ...] = ()
    trusted_domains: str | None = None
    distrusted_domains: str | None = None
    distrusted_policy: str = ""

    def __post_init__(self) -> None:
        # Frozen means frozen: a plain dict given by a caller becomes a read-only view of a copy.
        if not isinstance(self.settings, MappingProxyType):
            object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        if not isinstance(self.fields, MappingProxyType):
            object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))
