"""Crawl policies: what a seed hands down the tree of pages it leads to.

A *policy* is named in the site config (``[policies.NAME]``) and given to seeds (a seed's
``policy``, or ``URL<TAB>policy`` in a seeds file); a page found by following a link inherits
the policy of the page that linked it, so a known good source is favoured, a known spammer and
everything it leads to distrusted, down the whole tree. A policy says:

* ``allow`` / ``deny``: URL filters (regular expressions searched in the URL), applied to the
  links found under it;
* ``multiplier``: the score multiplier: the OPIC cash a link carries under this policy is
  multiplied by it (``0.01``: distrust, ``2``: favour);
* ``dampening``: the share of a page's cash handed on to its links per hop (trust decays the
  further a page is from its seed; 1: none);
* ``on_leave``: a link that leaves the registered domain of the page that found it:
  ``inherit`` (keeps the policy), ``default`` (the target starts afresh under the default
  policy), ``drop`` (not followed), ``trusted`` (followed only to a trusted domain, which
  starts afresh under the default policy);
* ``max_depth``: hops under this policy (from its seed, or from the page that switched to it)
  beyond which links are not followed;
* a content rule (``switch_to`` with ``switch_words`` and/or ``switch_selector``, or a Python
  hook ``module:function`` given the page): a page that matches switches to that policy, and
  its links inherit the new one.

Trusted and distrusted domains come from files, one domain per line (``#`` comments): a URL
of a distrusted domain takes the ``distrusted_policy`` whatever linked it; a URL of a trusted
domain never takes a policy that ranks lower than the default. A line names a site
(``spam.blogspot.com``: sites are read with the public suffix list's private rules, so each
hosted user's is one) or any name above it (``blogspot.com``: every site under it).

**Several policies, one URL** (the documented rule): a URL's cash is the sum of what every
linking page sent, each share under its own policy's multiplier and dampening; its policy (what
its own links inherit) is the policy of the link that brought it the largest share of cash (a
tie: the first found; ``crawler.frontier.opic.CashLedger.credit``). So a good page that a spam
farm links to takes the good policy once a good page links to it, and is fetched as early as
its good in-links make it; a page only the farm links to stays distrusted.

Free of Scrapy: the spider asks :meth:`PolicyBook.page_policy` for a page's policy (content
rule) and the scheduler :meth:`PolicyBook.link` for each link.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT = "default"
LEAVE_RULES = ("inherit", "default", "drop", "trusted")

# hook(url, text, policy) -> the name of the policy to switch to, or None
ContentHook = Callable[[str, str, str], str | None]


@dataclass(frozen=True)
class CrawlPolicy:
    """One named policy (see the module docstring)."""

    name: str
    multiplier: float = 1.0
    dampening: float = 1.0
    on_leave: str = "inherit"
    max_depth: int | None = None
    allow: tuple[re.Pattern[str], ...] = ()
    deny: tuple[re.Pattern[str], ...] = ()
    switch_to: str = ""
    switch_words: tuple[str, ...] = ()
    switch_selector: str = ""
    switch_hook: ContentHook | None = None

    def admits(self, url: str) -> bool:
        """The URL filters: every ``allow`` pattern must not all miss, no ``deny`` may hit."""
        if self.allow and not any(p.search(url) for p in self.allow):
            return False
        return not any(p.search(url) for p in self.deny)

    @property
    def has_content_rule(self) -> bool:
        return bool(self.switch_to and (self.switch_words or self.switch_selector)) or bool(
            self.switch_hook
        )


@dataclass(frozen=True)
class LinkPolicy:
    """What a link gets: its policy (as an entry carries it: ``name`` or ``name@start``, the
    depth where the policy began) and the factor its share of cash is multiplied by."""

    label: str
    factor: float


def split_label(label: str) -> tuple[str, int]:
    """``"name@3"`` -> ("name", 3); ``""`` -> (DEFAULT, 0)."""
    if not label:
        return DEFAULT, 0
    name, _, start = label.partition("@")
    return name, int(start) if start else 0


def make_label(name: str, start: int) -> str:
    if name == DEFAULT and start == 0:
        return ""
    return f"{name}@{start}" if start else name


class PolicyError(ValueError):
    """A policy configuration that cannot work; the message names the key."""


@dataclass
class PolicyBook:
    """The policies of a crawl, the trusted and distrusted domains, and the rules between."""

    policies: dict[str, CrawlPolicy] = field(default_factory=dict)
    trusted: frozenset[str] = frozenset()
    distrusted: frozenset[str] = frozenset()
    distrusted_policy: str = ""
    domain_of: Callable[[str], str] = lambda host: host
    counts: dict[str, int] = field(default_factory=dict)  # links admitted per policy

    def __post_init__(self) -> None:
        self.policies.setdefault(DEFAULT, CrawlPolicy(DEFAULT))
        for policy in self.policies.values():
            if policy.switch_to and policy.switch_to not in self.policies:
                raise PolicyError(
                    f"policies.{policy.name}.switch_to: no policy named {policy.switch_to!r}"
                )
        if self.distrusted_policy and self.distrusted_policy not in self.policies:
            raise PolicyError(f"distrusted_policy: no policy named {self.distrusted_policy!r}")
        self._rank = {name: p.multiplier for name, p in self.policies.items()}

    @property
    def active(self) -> bool:
        """More than the default policy, or domain lists: links need deciding one by one."""
        return len(self.policies) > 1 or bool(self.trusted or self.distrusted)

    def policy(self, label: str) -> CrawlPolicy:
        return self.policies.get(split_label(label)[0]) or self.policies[DEFAULT]

    @staticmethod
    def listed(names: frozenset[str], host: str, site: str) -> bool:
        """``host`` (of the site ``site``) is in a domain list: by its site, or by any name
        above it, so ``blogspot.com`` lists every user's site under it while
        ``spam.blogspot.com`` lists that one only (a site is read with the private rules of
        the public suffix list: each hosted user's is a site of its own). A line below a site
        (``shop.example.com``) lists that host and every name under it."""
        if not names:
            return False
        if site in names or host in names:
            return True
        at = host.find(".")
        while at >= 0:
            host = host[at + 1 :]
            if host in names:
                return True
            at = host.find(".")
        return False

    def seed(self, host: str, name: str = "") -> LinkPolicy:
        """A seed's policy: the one it names, or its domain's (distrusted), or the default."""
        if not name:
            name = DEFAULT
            if self.distrusted_policy and self.listed(self.distrusted, host, self.domain_of(host)):
                name = self.distrusted_policy
        if name not in self.policies:
            raise PolicyError(f"seed policy: no policy named {name!r}")
        return LinkPolicy(make_label(name, 0), self.policies[name].multiplier)

    def link(
        self, parent: str, parent_host: str, depth: int, url: str, host: str
    ) -> LinkPolicy | None:
        """The policy of a link found at ``depth`` on a page (of ``parent_host``) under the
        policy ``parent``, or None when the policy does not follow it."""
        name, start = split_label(parent)
        policy = self.policies.get(name) or self.policies[DEFAULT]
        if policy.max_depth is not None and depth - start > policy.max_depth:
            return None
        if not policy.admits(url):
            return None
        domain_of = self.domain_of
        if host != parent_host:
            domain = domain_of(host)
            if self.distrusted_policy and self.listed(self.distrusted, host, domain):
                name, start = self.distrusted_policy, depth
            elif domain != domain_of(parent_host):
                rule = policy.on_leave
                if rule == "drop":
                    return None
                trusted = self.listed(self.trusted, host, domain)
                if rule == "trusted" and not trusted:
                    return None
                if rule in ("default", "trusted") or (
                    trusted and self._rank[name] < self._rank[DEFAULT]
                ):
                    name, start = DEFAULT, depth
        target = self.policies[name]
        label = make_label(name, start)
        self.counts[name] = self.counts.get(name, 0) + 1
        return LinkPolicy(label, policy.dampening * target.multiplier)

    def page_policy(
        self,
        label: str,
        url: str,
        text: str,
        select: Callable[[str], bool] | None = None,
        depth: int = 0,
    ) -> str:
        """The policy a fetched page's links inherit: its own, or the one its content rule
        switches to (words found in ``text``, ``select(css)`` true, or the hook's answer)."""
        name, _ = split_label(label)
        policy = self.policies.get(name) or self.policies[DEFAULT]
        if not policy.has_content_rule:
            return label
        target = ""
        if policy.switch_hook is not None:
            target = policy.switch_hook(url, text, name) or ""
        elif policy.switch_to:
            lowered = text.lower()
            words = policy.switch_words
            hit = bool(words) and any(w in lowered for w in words)
            if not hit and policy.switch_selector and select is not None:
                hit = select(policy.switch_selector)
            if hit:
                target = policy.switch_to
        if not target or target == name:
            return label
        if target not in self.policies:
            return label
        return make_label(target, depth)


def read_domains(path: str | Path) -> frozenset[str]:
    """A domain list: one registered domain per line, ``#`` starts a comment."""
    domains = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip().lower()
        if line:
            domains.add(line.rstrip("."))
    return frozenset(domains)


_KEYS = {
    "multiplier", "dampening", "on_leave", "max_depth", "allow", "deny", "switch_to",
    "switch_words", "switch_selector", "switch_hook",
}  # fmt: skip


def _load_hook(dotted: str, where: str) -> ContentHook:
    module, _, attr = dotted.partition(":")
    try:
        hook = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PolicyError(f"{where}.switch_hook: cannot import {dotted!r} ({exc})") from exc
    if not callable(hook):
        raise PolicyError(f"{where}.switch_hook: {dotted!r} is not callable")
    return hook


def policy_from_mapping(name: str, raw: Mapping[str, Any]) -> CrawlPolicy:
    """A policy from its site-config table; errors name the key (``policies.NAME.KEY``)."""
    where = f"policies.{name}"
    unknown = set(raw) - _KEYS
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")

    def number(key: str, default: float, low: float, high: float | None = None) -> float:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PolicyError(f"{where}.{key}: must be a number, got {value!r}")
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f">= {low}"
            raise PolicyError(f"{where}.{key}: must be {bound}, got {value!r}")
        return float(value)

    def patterns(key: str) -> tuple[re.Pattern[str], ...]:
        value = raw.get(key, [])
        if isinstance(value, str):
            value = [value]
        out = []
        for p in value:
            try:
                out.append(re.compile(p))
            except (re.error, TypeError) as exc:
                raise PolicyError(f"{where}.{key}: bad pattern {p!r} ({exc})") from exc
        return tuple(out)

    on_leave = raw.get("on_leave", "inherit")
    if on_leave not in LEAVE_RULES:
        raise PolicyError(f"{where}.on_leave: must be one of {', '.join(LEAVE_RULES)}")
    max_depth = raw.get("max_depth")
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0
    ):
        raise PolicyError(f"{where}.max_depth: must be an integer >= 0, got {max_depth!r}")
    words = raw.get("switch_words", [])
    if isinstance(words, str):
        words = [words]
    hook = raw.get("switch_hook")
    return CrawlPolicy(
        name=name,
        multiplier=number("multiplier", 1.0, 0.0),
        dampening=number("dampening", 1.0, 0.0, 1.0),
        on_leave=on_leave,
        max_depth=max_depth,
        allow=patterns("allow"),
        deny=patterns("deny"),
        switch_to=str(raw.get("switch_to", "")),
        switch_words=tuple(str(w).lower() for w in words),
        switch_selector=str(raw.get("switch_selector", "")),
        switch_hook=_load_hook(hook, where) if hook else None,
    )


def book_from_config(
    policies: Mapping[str, Mapping[str, Any]] | None,
    *,
    trusted_file: str | Path | None = None,
    distrusted_file: str | Path | None = None,
    distrusted_policy: str = "",
    domain_of: Callable[[str], str] | None = None,
    base: Path | None = None,
) -> PolicyBook:
    """A :class:`PolicyBook` from a site config's ``[policies]`` tables and domain-list files
    (relative paths are read from ``base``, the config's directory)."""

    def resolve(path: str | Path) -> Path:
        p = Path(path)
        return p if p.is_absolute() or base is None else base / p

    built = {name: policy_from_mapping(name, raw) for name, raw in (policies or {}).items()}
    try:
        trusted = read_domains(resolve(trusted_file)) if trusted_file else frozenset()
        distrusted = read_domains(resolve(distrusted_file)) if distrusted_file else frozenset()
    except OSError as exc:
        raise PolicyError(f"trusted_domains / distrusted_domains: {exc}") from exc
    if distrusted and not distrusted_policy:
        distrusted_policy = "distrust" if "distrust" in built else ""
        if not distrusted_policy:
            raise PolicyError(
                "distrusted_domains: needs distrusted_policy (or a policy named 'distrust')"
            )
    return PolicyBook(
        built,
        trusted=trusted,
        distrusted=distrusted,
        distrusted_policy=distrusted_policy,
        domain_of=domain_of or (lambda host: host),
    )


def policy_counts(entries: Iterable[str]) -> dict[str, int]:
    """Counts per policy name of entries' policy labels (for reports)."""
    out: dict[str, int] = {}
    for label in entries:
        name = split_label(label)[0]
        out[name] = out.get(name, 0) + 1
    return out
