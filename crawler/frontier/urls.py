"""URL normalization, scope, URL filters and spider-trap defenses, applied before the seen-test."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable
from datetime import date
from urllib.parse import urlsplit, urlunsplit

import idna
from w3lib.url import canonicalize_url

from crawler.config import defaults
from crawler.net.weburl import InvalidUrl, request_url

_DEFAULT_PORTS = {"http": 80, "https": 443}


# Session ids in URLs: every visit mints new URLs for the same pages. Names that mean nothing
# else are always stripped; "sid" and "s" also name story ids and search terms, so they are
# stripped only when the value looks like a session token (long hex, or long letters+digits).
_SESSION_NAMES = frozenset({"sessionid", "session_id", "phpsessid", "jsessionid", "sessid"})
_AMBIGUOUS_SESSION_NAMES = frozenset({"sid", "s"})
_SESSION_HINT = re.compile(r"(?:^|&)(?:s|sid|session_?id|phpsessid|jsessionid|sessid)=", re.I)
_SESSION_TOKEN = re.compile(r"^(?:[0-9a-f]{16,}|(?=[a-z]*\d)(?=\d*[a-z])[0-9a-z]{20,})$", re.I)
_PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sessionid|sid)=[^/;]*", re.I)


def _is_session_param(pair: str) -> bool:
    name, _, value = pair.partition("=")
    name = name.lower()
    if name in _SESSION_NAMES:
        return True
    return name in _AMBIGUOUS_SESSION_NAMES and bool(_SESSION_TOKEN.match(value))


def strip_session_ids(path: str, query: str) -> tuple[str, str]:
    """``path`` without ``;jsessionid=...`` parameters, ``query`` without session-id fields."""
    if ";" in path:
        path = _PATH_SESSION.sub("", path)
    if query and _SESSION_HINT.search(query):
        query = "&".join(p for p in query.split("&") if not _is_session_param(p))
    return path, query


# A request URL already in the form normalize_url gives (an http(s) URL with a lower-case host
# of letters, digits and hyphens, no port, query or parameters, a path of unreserved characters
# without dot or empty segments) is its own canonical form, without w3lib's 20-40 us:
# canonicalize_url would return it unchanged (tests/test_seeds_bulk.py compares the two on real
# documentation URLs and on the cases this pattern turns away).
_CANONICAL = re.compile(
    r"https?://((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)"
    r"/(?:(?!\.\.?/)[A-Za-z0-9._~-]+/)*(?:(?!\.\.?\Z)[A-Za-z0-9._~-]+)?\Z"
)


def url_forms(url: str) -> tuple[str, str, str]:
    """``(request URL, canonical form, host)`` of ``url``, an absolute link as found.

    The request URL is the link made safe and nothing more (:func:`crawler.net.weburl.
    request_url`: what the server, its robots.txt, the WARC and the index see). The canonical
    form is only the seen-test key (and OPIC's cash key): w3lib's ``canonicalize_url`` of the
    request URL (query sorted, percent-encoding fixed) less session-id parameters
    (``?sid=<token>``, ``;jsessionid=...``; see :func:`strip_session_ids`), so a session trap
    is one URL per page. The host is the request URL's (lower-case, IDNA, no port, no trailing
    dot, an IPv4 address dotted-decimal): one server, one politeness queue. The canonical form
    is the request URL's own string when the two are equal (most links). Raises InvalidUrl with
    a reason ("scheme" or "invalid_url").
    """
    plain = _plain(url)
    if plain is not None:
        return url, url, plain.group(1)
    request, host = request_url(url)
    if _CANONICAL.match(request) is not None:
        return request, request, host
    try:
        canonical = canonicalize_url(request)
        parts = urlsplit(canonical)
    except ValueError as exc:
        raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: {exc}") from None
    if ";" in parts.path or parts.query:
        path, query = strip_session_ids(parts.path, parts.query)
        if path != parts.path or query != parts.query:
            canonical = urlunsplit(parts._replace(path=path, query=query))
    return request, (request if canonical == request else canonical), host


def _plain(url: str) -> re.Match[str] | None:
    """The match of ``_CANONICAL`` when ``url`` is its own request URL and canonical form: no
    A-label to check, a host that is not an IPv4 number (its last label starts with a
    letter). Most links are so: one match, no parsing."""
    m = _CANONICAL.match(url)
    if m is None:
        return None
    host = m.group(1)
    if host[host.rfind(".") + 1].isalpha() and "xn--" not in host:
        return m
    return None


def normalize_url(url: str) -> tuple[str, str]:
    """Canonical form of ``url`` for the seen-test, and its host (see :func:`url_forms`)."""
    _, canonical, host = url_forms(url)
    return canonical, host


# What a link is, whatever the crawl has seen: (reason, request URL, host, origin, verdict,
# canonical form). reason is "" (a well-formed http(s) URL), "scheme" or "invalid_url" (then the
# URL is as given and the rest ""); verdict is the fixed filters' (see UrlPolicy.link_form).
LinkForm = tuple[str, str, str, str, str, str]


def link_problem(url: str) -> str | None:
    """:func:`url_forms`' verdict on ``url``: ``"scheme"``, ``"invalid_url"`` (the reasons of
    :class:`InvalidUrl`) or ``None`` when it takes it.

    The spider checks every link of every page with this, so that a link it keeps is one the
    frontier accepts and one it drops is one the frontier would refuse: one rule for a valid
    URL, not two. The verdict is the request URL's (one regular expression for most links);
    canonicalization takes any URL that has one.
    """
    try:
        request_url(url)
    except InvalidUrl as exc:
        return exc.reason
    return None


def url_problem(url: str) -> str | None:
    """Why :func:`normalize_url` refuses ``url``, in words for a person; ``None`` if it takes it.

    The verdict is :func:`normalize_url`'s own, so a URL a user gives (a seed in a site config or
    a seeds file) is refused exactly when the frontier would refuse it; this only puts the
    refusal in words ("has no host" rather than ``InvalidUrl("invalid_url", ...)``).
    """
    try:
        url_forms(url)
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


# Bounds of the trap budgets' memory in a worker (see UrlPolicy): ~100 B an entry.
MAX_VARIANT_PATHS = 500_000
MAX_BUDGET_HOSTS = 500_000
# Sites one ICANN registered domain may hold under its private suffixes (github.io's users,
# herokuapp.com's apps), as a multiple of max_hosts_per_domain: each user's site has a budget
# of its own, but sites minted without end under one hosting domain share this one.
HOSTING_SITES_FACTOR = 100


class UrlPolicy:
    """Decides whether a discovered URL may enter the frontier.

    Scope: the configured hosts and domains, plus the hosts of the seeds and of any host a seed
    redirects to (a site with no configured scope, like ``web``, is exactly its seeds' hosts).
    Trap defenses: a depth limit, a URL length limit and a limit on how often one path segment
    may repeat (``/a/b/a/b/a/b/...`` calendars and relative-link loops). Then, on by default:

    - dates in the path (``/2031/04``, ``/2031-04-05``) or in a query value more than
      ``max_date_future_days`` ahead of today or ``max_date_past_days`` back: an event calendar
      links the next month for ever; an archive 30 years back is real, one in 2090 is not;
    - at most ``max_query_variants`` distinct queries per path (``?a=1&b=2`` facet
      permutations, sort orders, tracking parameters);
    - at most ``max_hosts_per_domain`` hosts per registered domain (tldextract, with its
      bundled public-suffix list, private rules included: no network), so endless generated
      subdomains share one budget, and each user's site under a hosting suffix (github.io,
      blogspot.com) has its own; the hosts of all the sites under one ICANN registered
      domain at most :data:`HOSTING_SITES_FACTOR` times that (sites minted without end).

    Each limit is off at 0. The two budgets are the only state; they count admitted URLs only,
    in memory. The hosts per domain come back on a resumed crawl through :meth:`restore_hosts`
    (from the frontier's host table); the query variants start again.

    A broad crawl's worker meets millions of hosts and paths, so the budgets' memory is bounded
    (~100 B an entry): past :data:`MAX_VARIANT_PATHS` paths only those that used more than one
    variant are kept (the suspicious ones), and past :data:`MAX_BUDGET_HOSTS` hosts the host
    budget starts a new generation. A trap then gets at most one more budget per generation:
    its damage stays a fixed share of the crawl, never unbounded.
    """

    def __init__(
        self,
        *,
        hosts: Iterable[str] = (),
        domains: Iterable[str] = (),
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        max_depth: int | None = None,
        max_url_length: int = defaults.URL_MAX_LENGTH,
        max_repeated_segments: int = defaults.URL_MAX_REPEATED_SEGMENTS,
        any_host: bool = False,
        max_query_variants: int = 0,
        max_date_future_days: int = 0,
        max_date_past_days: int = 0,
        max_hosts_per_domain: int = 0,
        today: date | None = None,
    ) -> None:
        self.any_host = any_host
        self.hosts: set[str] = {h.lower() for h in hosts}
        self.domains: tuple[str, ...] = tuple(d.lower().lstrip(".") for d in domains)
        self.allow = [re.compile(p) for p in allow]
        self.deny = [re.compile(p) for p in deny]
        self.max_depth = max_depth
        self.max_url_length = max_url_length
        self.max_repeated_segments = max_repeated_segments
        self.max_query_variants = max_query_variants
        self.max_hosts_per_domain = max_hosts_per_domain
        self._dates = _DateWindow(today or date.today(), max_date_future_days, max_date_past_days)
        self._variants: dict[int, set[int] | int] = {}
        self._known_hosts: set[str] = set()
        self._domain_hosts: dict[str, int] = {}
        self._hosting_hosts: dict[str, int] = {}  # ICANN domain -> hosts of its private sites
        self._domain_of: Callable[[str], str] | None = None
        self._icann_of: Callable[[str], str] | None = None

    def add_host(self, host: str) -> None:
        """Bring a host into scope (a seed's host, or where a seed redirected to)."""
        self.hosts.add(host.lower())

    def check(
        self, url: str, depth: int = 0, *, filters: bool = True, form: LinkForm | None = None
    ) -> tuple[str, str, str, str]:
        """``(reason, request_url, host, canonical)``; ``reason`` is "" when the URL is admitted
        (:func:`url_forms`: the request URL is what is fetched, the canonical form only the
        seen-test's key; the URL filters read the canonical form).

        ``filters=False`` checks only that the URL is a well-formed http(s) URL. ``form``:
        :func:`link_form` of ``url`` when it was computed before (on another thread); the
        verdict is the same, only the canonicalization is not done again.
        """
        if len(url) > self.max_url_length:
            return "too_long", url, "", url
        if form is None:
            try:
                request, canonical, host = url_forms(url)
            except InvalidUrl as exc:
                return exc.reason, url, "", url
        else:
            reason, request, host, _, verdict, canonical = form
            if reason:
                return reason, url, "", url
        if not filters:
            return "", request, host, canonical
        if not self.any_host and not host_in(host, self.hosts, self.domains):
            return "out_of_scope", request, host, canonical
        if self.max_depth is not None and depth > self.max_depth:
            return "too_deep", request, host, canonical
        if form is None:
            verdict = self._fixed_filters(canonical)
        if verdict:
            return verdict, request, host, canonical
        if self.max_hosts_per_domain and not self._host_allowed(host):
            return "domain_hosts", request, host, canonical
        if self.max_query_variants and not self._variant_allowed(canonical):
            return "query_variants", request, host, canonical
        return "", request, host, canonical

    def _fixed_filters(self, normalized: str) -> str:
        """The verdict of the filters that depend on the URL alone (deny, allow, repeated
        segments, dates: the policy's configuration and today's date, fixed for the crawl)."""
        if self.deny and any(p.search(normalized) for p in self.deny):
            return "denied"
        if self.allow and not any(p.search(normalized) for p in self.allow):
            return "not_allowed"
        if self.max_repeated_segments and _repeats(normalized, self.max_repeated_segments):
            return "repeated_segments"
        if self._dates.active and self._dates.out_of_range(normalized):
            return "date_distance"
        return ""

    def link_form(self, url: str) -> LinkForm:
        """What :meth:`check` finds in ``url`` that does not depend on what the crawl has seen:
        its request URL, host and canonical form (:func:`url_forms`, without raising), its
        origin (:func:`origin_of`) and the fixed filters' verdict.

        Safe on any thread (it reads only the policy's fixed configuration), so the content
        thread that parsed a page computes it for the page's new links and the reactor is left
        the stateful part: canonicalization alone costs 20-40 us a link, a page of 5,000 new
        links 100-200 ms on whichever thread does it. ``check(url, depth, form=...)`` then gives
        the verdict it gives without ``form``.
        """
        plain = _plain(url)
        if plain is not None:  # url_forms' fast path; the origin is its start
            origin = url[: plain.end(1)]
            return "", url, plain.group(1), origin, self._fixed_filters(url), url
        try:
            request, canonical, host = url_forms(url)
        except InvalidUrl as exc:
            return exc.reason, url, "", "", "", url
        cut = request.find("/", request.find("//") + 2)
        origin = request[:cut] if cut > 0 else request
        return "", request, host, origin, self._fixed_filters(canonical), canonical

    def restore_hosts(self, hosts: Iterable[str]) -> None:
        """Hosts admitted before (a resumed crawl, the shared frontier of other workers): they
        stay admitted and count against their registered domain's budget, even beyond it (the
        budget may have been raised since)."""
        if not self.max_hosts_per_domain:
            return
        for host in hosts:
            if host in self._known_hosts:
                continue
            self._known_hosts.add(host)
            if host not in self.hosts:
                domain, hosting = self._domains(host)
                self._domain_hosts[domain] = self._domain_hosts.get(domain, 0) + 1
                if hosting is not None:
                    self._hosting_hosts[hosting] = self._hosting_hosts.get(hosting, 0) + 1

    def _domains(self, host: str) -> tuple[str, str | None]:
        """The host's site (the whole public suffix list's registered domain) and, when that
        sits under a private suffix, the ICANN registered domain above it (else None)."""
        if self._domain_of is None:
            self._domain_of = registered_domain_function(private=True)
            self._icann_of = registered_domain_function()
        domain = self._domain_of(host)
        icann = self._icann_of(host)  # type: ignore[misc]
        return domain, (icann if icann != domain and domain.endswith("." + icann) else None)

    def _host_allowed(self, host: str) -> bool:
        """A host already admitted, or a new one while its registered domain has budget left.
        Hosts in the configured scope and seed hosts are always allowed."""
        if host in self._known_hosts:
            return True
        if host in self.hosts:
            self._known_hosts.add(host)
            return True
        domain, hosting = self._domains(host)
        n = self._domain_hosts.get(domain, 0)
        if n >= self.max_hosts_per_domain:
            return False
        if hosting is not None and (
            self._hosting_hosts.get(hosting, 0)
            >= HOSTING_SITES_FACTOR * self.max_hosts_per_domain
        ):
            return False
        if len(self._known_hosts) >= MAX_BUDGET_HOSTS:
            self._known_hosts.clear()
            self._domain_hosts.clear()
            self._hosting_hosts.clear()
            n = 0
        self._domain_hosts[domain] = n + 1
        if hosting is not None:
            self._hosting_hosts[hosting] = self._hosting_hosts.get(hosting, 0) + 1
        self._known_hosts.add(host)
        return True

    def _forget_single_variants(self) -> None:
        kept = {k: v for k, v in self._variants.items() if not isinstance(v, int)}
        self._variants = kept if len(kept) < MAX_VARIANT_PATHS // 2 else {}

    def _variant_allowed(self, url: str) -> bool:
        """The URL's query is one already seen for its path, or the path has budget left."""
        base, sep, query = url.partition("?")
        if not sep:
            return True
        key, value = hash(base), hash(query)
        seen = self._variants.get(key)
        if seen is None:
            if len(self._variants) >= MAX_VARIANT_PATHS:
                self._forget_single_variants()
            self._variants[key] = value  # one variant: an int, not a set (most paths)
            return True
        if isinstance(seen, int):
            if seen == value:
                return True
            self._variants[key] = seen = {seen}
        if value in seen:
            return True
        if len(seen) >= self.max_query_variants:
            return False
        seen.add(value)
        return True


def registered_domain_function(*, private: bool = False) -> Callable[[str], str]:
    """host -> registered domain ("a.b.example.co.uk" -> "example.co.uk"; an IPv4 or IPv6
    address, bracketed or not, -> itself, in both lookups), from tldextract's bundled
    public-suffix snapshot: never fetched, never cached on disk.

    ``private=False`` (the host splitter; the hosting domain whose sites share a second host
    budget): the list's ICANN rules only ("alice.github.io" -> "github.io"), and a name under
    no listed suffix gives its last label ("www.site1.test" -> "test"). Fixed: where a stored
    crawl's hosts live rests on it.

    ``private=True`` (a "same site" rule: the canonical scope, a crawl policy leaving its
    site, the per-site host budget): the whole list, as browsers, cookies, Nutch and
    StormCrawler read it. The private rules count ("alice.github.io" and "bob.github.io" are
    two sites), and a name under no listed suffix takes the list's implicit ``*`` rule
    ("www.site1.test" -> "site1.test").

    The answer is tldextract's (``top_domain_under_public_suffix``, else ``domain``, else the
    host), from the walk its call makes, but for a name a wildcard rule makes a public suffix
    on the way to a longer rule ("svc.firenet.ch": ``*.firenet.ch``, ``*.svc.firenet.ch``),
    which its walk misses and the list's algorithm does not (the host itself here, as for
    any public suffix); over the flat table of :func:`_suffix_table` instead of its tries:
    each ``TLDExtract`` builds two (with and without the private rules), ~20,000 objects
    together, each walked by every full garbage collection of a long crawl, and a crawl made
    three lookups (``bench/registered_domain_gc.py``); its call also costs ~34k instructions
    a host (URL parsing, a result object). A plain lowercase name (the normalized host:
    ASCII letters, digits, hyphens, non-empty labels, no ``xn--`` label) is walked as it is;
    an IPv6 address is itself (tldextract reads "2001:db8::1" as the host "2001" and a port:
    all of 2001::/16 would be one domain); anything else is first read as tldextract reads it
    (its lenient host parsing, ideographic dots, a bracketed IPv6 address with a port,
    punycode labels decoded and lowercased for the walk). ``tests/test_registered_domain.py``
    holds the two equal on a labelled list and a host under every rule, and
    ``tests/test_vectors_psl.py`` runs the list's own test vectors and its algorithm under
    every rule."""
    from tldextract.remote import lenient_netloc, looks_like_ip, looks_like_ipv6

    nodes, ends = _suffix_table(private)

    def domain_of(host: str) -> str:
        if "xn--" in host or not _PLAIN_HOST(host):
            if ":" in host and _is_ipv6(host):  # tldextract: "2001" and a port
                return host
            netloc = lenient_netloc(host)
            for dot in "\u3002\uff0e\uff61":
                netloc = netloc.replace(dot, ".")
            if netloc[:1] == "[" and netloc[-1:] == "]" and looks_like_ipv6(netloc[1:-1]):
                return netloc
            labels = netloc.split(".")
            keys = [_label_key(label) for label in labels]
        else:
            netloc = host
            labels = keys = host.split(".")
        # the trie walk: labels from the right while the path so far is a node of the rules'
        # trie; a wildcard rule takes the label that left it (unless an exception names it),
        # and the label it goes on down by too ("svc.firenet.ch": *.firenet.ch, on the way to
        # *.svc.firenet.ch), which tldextract's walk misses: the list's longest matching rule
        at = suffix_at = len(labels)
        path = ""
        for key in reversed(keys):
            if (child := key + path) in nodes:
                at -= 1
                if child in ends or ("*" + path in nodes and "!" + child not in nodes):
                    suffix_at = at
                path = "." + child
                continue
            if "*" + path in nodes:
                suffix_at = at if "!" + key + path in nodes else at - 1
            break
        if suffix_at == len(labels):  # no public suffix: an IPv4 address is itself, else
            if len(labels) == 4 and looks_like_ip(netloc):  # its last label (its last two,
                return netloc  # by the implicit "*" rule)
            if private and len(labels) > 1 and labels[-2]:
                return f"{labels[-2]}.{labels[-1]}"
            return labels[-1] or host
        domain = labels[suffix_at - 1] if suffix_at > 0 else ""
        suffix = ".".join(labels[suffix_at:])
        return f"{domain}.{suffix}" if domain and suffix else domain or host

    return domain_of


@functools.cache
def _suffix_table(private: bool) -> tuple[frozenset[str], frozenset[str]]:
    """The public-suffix list as two sets of strings, built once per process: every node of
    tldextract's trie as the path from its root ("uk", "co.uk", "*.ck", "!www.ck"), and the
    nodes a rule ends at. A set of strings is one object to the garbage collector; a trie of
    the same rules is thousands (a node and its dict each)."""
    import pkgutil

    from tldextract.suffix_list import extract_tlds_from_suffix_list

    text = (pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"").decode("utf-8")
    public, private_rules = extract_tlds_from_suffix_list(text)
    rules = frozenset(public + private_rules if private else public)
    nodes = {rule.split(".", i)[-1] for rule in rules for i in range(rule.count(".") + 1)}
    return frozenset(nodes), rules


def _label_key(label: str) -> str:
    """A label as the trie walk compares it (tldextract's reading): lowercase, a punycode label
    decoded when it decodes."""
    lowered = label.lower()
    if lowered.startswith("xn--"):
        try:
            return idna.decode(lowered)
        except (UnicodeError, IndexError):
            pass
    return lowered


def _is_ipv6(host: str) -> bool:
    """An IPv6 address, bracketed or not (normalize_url gives it without brackets)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:
        return False


_PLAIN_HOST = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)*").fullmatch


_DATE_SEGMENTS = re.compile(
    r"(?:^|[/=])((?:19|20|21)\d\d)(?:/|-)(0?[1-9]|1[0-2])(?:(?:/|-)(0?[1-9]|[12]\d|3[01]))?"
    r"(?=$|[/?&#.;_-])"
)


class _DateWindow:
    """Is there a year-month(-day) in the URL's path or query outside [today - past, today +
    future]? Only years 1900-2199 followed by a valid month count as a date, so
    ``/docs/1234/5`` is not one."""

    def __init__(self, today: date, future_days: int, past_days: int) -> None:
        self.today = today.toordinal()
        self.future_days = future_days
        self.past_days = past_days
        self.active = bool(future_days or past_days)

    def out_of_range(self, url: str) -> bool:
        if "19" not in url and "20" not in url and "21" not in url:
            return False  # no year 1900-2199: most URLs, told without the regular expression
        rest = url.split("://", 1)[-1]
        slash = rest.find("/")
        if slash < 0:
            return False
        rest = rest[slash:]
        for m in _DATE_SEGMENTS.finditer(rest):
            year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
            try:
                when = date(year, month, min(day, 28)).toordinal()
            except ValueError:
                continue
            if self.future_days and when - self.today > self.future_days:
                return True
            if self.past_days and self.today - when > self.past_days:
                return True
        return False


def _repeats(url: str, limit: int) -> bool:
    if url.count("/") <= limit + 2 and "://" in url:
        return False  # at most ``limit`` slashes after the scheme's two: too few segments
    path = url.split("://", 1)[-1]
    path = path[path.find("/") :] if "/" in path else ""
    path = path.split("?", 1)[0]
    segments = [s for s in path.split("/") if s]
    if len(segments) <= limit or len(set(segments)) == len(segments):
        return False
    seen: dict[str, int] = {}
    for s in segments:
        n = seen[s] = seen.get(s, 0) + 1
        if n > limit:
            return True
    return False
