"""URL normalization, scope, URL filters and spider-trap defenses, applied before the seen-test."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url

SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_RE = re.compile(r"^[a-z0-9_\-.:]+$")  # after IDNA; ':' for IPv6 literals


class InvalidUrl(ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def normalize_url(url: str) -> tuple[str, str]:
    """Canonical form of ``url`` for the seen-test, and its host (lower-case, no port).

    w3lib sorts the query, fixes percent-encoding and drops the fragment; on top of that the
    scheme's default port and any ``user:password@`` are removed, so ``http://a.com:80/`` and
    ``http://A.com/`` are one URL.
    Raises InvalidUrl with a reason ("scheme" or "invalid_url").
    """
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in SCHEMES:
        raise InvalidUrl("scheme", f"not an http(s) URL: {url[:200]!r}")
    try:
        canonical = canonicalize_url(url)
        parts = urlsplit(canonical)
        host = parts.hostname or ""
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: {exc}") from None
    if not host or not _HOST_RE.match(host):
        raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: bad host {host!r}")
    if "@" in parts.netloc or (port is not None and port == _DEFAULT_PORTS[parts.scheme]):
        # credentials in a link are never sent on (nor logged, stored or indexed), and the
        # scheme's default port is dropped
        netloc = f"[{host}]" if ":" in host else host
        if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
            netloc = f"{netloc}:{port}"
        canonical = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return canonical, host


def url_problem(url: str) -> str | None:
    """Why :func:`normalize_url` refuses ``url``, in words for a person; ``None`` if it takes it.

    The verdict is :func:`normalize_url`'s own, so a URL a user gives (a seed in a site config or
    a seeds file) is refused exactly when the frontier would refuse it; this only puts the
    refusal in words ("has no host" rather than ``InvalidUrl("invalid_url", ...)``).
    """
    try:
        normalize_url(url)
    except InvalidUrl as exc:
        if exc.reason == "scheme":
            return "must be an http:// or https:// URL"
        try:
            parts = urlsplit(url.strip())
            host = parts.hostname
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError as err:
            return f"cannot be parsed as a URL ({err})"
        if not host:
            return "has no host"
        return f"has an invalid host ({exc})"
    return None


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` as the scheduler's ``origin_discovered`` names it (lower-case,
    default port dropped); None for a URL without a usable host."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not host or scheme not in _DEFAULT_PORTS:
        return None
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def host_in(host: str, hosts: Iterable[str], domains: Iterable[str]) -> bool:
    if host in hosts:
        return True
    return any(host == d or host.endswith("." + d) for d in domains)


class UrlPolicy:
    """Decides whether a discovered URL may enter the frontier.

    Scope: the configured hosts and domains, plus the hosts of the seeds and of any host a seed
    redirects to (a site with no configured scope, like ``web``, is exactly its seeds' hosts).
    Trap defenses: a depth limit, a URL length limit and a limit on how often one path segment
    may repeat (``/a/b/a/b/a/b/...`` calendars and relative-link loops).
    """

    def __init__(
        self,
        *,
        hosts: Iterable[str] = (),
        domains: Iterable[str] = (),
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        max_depth: int | None = None,
        max_url_length: int = 2048,
        max_repeated_segments: int = 3,
        any_host: bool = False,
    ) -> None:
        self.any_host = any_host
        self.hosts: set[str] = {h.lower() for h in hosts}
        self.domains: tuple[str, ...] = tuple(d.lower().lstrip(".") for d in domains)
        self.allow = [re.compile(p) for p in allow]
        self.deny = [re.compile(p) for p in deny]
        self.max_depth = max_depth
        self.max_url_length = max_url_length
        self.max_repeated_segments = max_repeated_segments

    def add_host(self, host: str) -> None:
        """Bring a host into scope (a seed's host, or where a seed redirected to)."""
        self.hosts.add(host.lower())

    def check(self, url: str, depth: int = 0, *, filters: bool = True) -> tuple[str, str, str]:
        """``(reason, normalized_url, host)``; ``reason`` is "" when the URL is admitted.

        ``filters=False`` checks only that the URL is a well-formed http(s) URL.
        """
        if len(url) > self.max_url_length:
            return "too_long", url, ""
        try:
            normalized, host = normalize_url(url)
        except InvalidUrl as exc:
            return exc.reason, url, ""
        if not filters:
            return "", normalized, host
        if not self.any_host and not host_in(host, self.hosts, self.domains):
            return "out_of_scope", normalized, host
        if self.max_depth is not None and depth > self.max_depth:
            return "too_deep", normalized, host
        if self.deny and any(p.search(normalized) for p in self.deny):
            return "denied", normalized, host
        if self.allow and not any(p.search(normalized) for p in self.allow):
            return "not_allowed", normalized, host
        if self.max_repeated_segments and _repeats(normalized, self.max_repeated_segments):
            return "repeated_segments", normalized, host
        return "", normalized, host


def _repeats(url: str, limit: int) -> bool:
    path = url.split("://", 1)[-1]
    path = path[path.find("/") :] if "/" in path else ""
    path = path.split("?", 1)[0]
    segments = [s for s in path.split("/") if s]
    if len(segments) <= limit:
        return False
    seen: dict[str, int] = {}
    for s in segments:
        n = seen[s] = seen.get(s, 0) + 1
        if n > limit:
            return True
    return False
