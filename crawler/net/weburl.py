"""A link as a browser reads it: joining (WHATWG URL Standard) and the URL a request is sent to.

A link is requested as it is found, made safe and nothing more (:func:`request_url`): the server
and its robots.txt see the path and query the page wrote (``index.php?/blog/post/1``,
``show.php?article300``, ``?b=2&a=1`` in that order, ``//`` in a path, ``%20``). The canonical
form (w3lib's sorted, re-encoded query; ``crawler.frontier.urls.normalize_url``) is only the
key of the seen-test, never sent.

What :func:`request_url` does, as the WHATWG URL Standard's basic URL parser does for the special
schemes http and https:

* leading and trailing C0 controls and spaces are stripped, tabs and newlines removed;
* ``\\`` is ``/`` before the query, and any number of slashes after ``http:`` starts the host
  (``http:\\\\a.test\\x``, ``http:///a.test/x``);
* user and password are dropped (never sent, logged or stored), and so is the fragment;
* the host is percent-decoded, then IDNA-mapped by UTS #46, non-transitional
  (``faß.example`` -> ``xn--fa-hia.example``), lower-cased; a host whose last label is a number
  is an IPv4 address in any of its forms (``0x7f.1``, ``2130706433``, ``127.1``, ``0177.0.0.1``)
  and is written dotted-decimal; the scheme's default port is dropped;
* ``.`` and ``..`` segments (``%2e`` too) are resolved in the path; ``//`` is kept;
* what may not stand in a request line is percent-encoded as UTF-8: controls, space, non-ASCII
  and ``"<>`{}``; existing escapes are kept as written (``%2F`` stays ``%2F``).

Deliberate differences from WHATWG (each keeps one server one host, or the URL a fixed point of
Scrapy's ``Request``, which re-encodes a URL with w3lib's ``safe_url_string``):

* a trailing dot is dropped from the host (``www.example.org.`` is ``www.example.org``): WHATWG
  keeps it, but DNS names one server with both, and one server is one politeness queue, one
  robots.txt and one seen key here;
* a ``%`` not followed by two hex digits is written ``%25`` (WHATWG leaves it, making a request
  line RFC 3986 calls invalid; some servers answer it with 400);
* ``|``, ``^``, ``[`` and ``]`` in the path and query, and ``'`` and ``\\`` in the query, are
  percent-encoded (WHATWG leaves them; Scrapy's Request would encode them anyway);
* an empty query (a lone ``?``) is dropped: Scrapy's ``Request`` sends none, and the request
  URL is what is sent;
* a non-ASCII query is encoded as UTF-8, not in the page's encoding;
* only http and https: any other scheme is not a link to crawl;
* a host of other characters than letters, digits, ``-``, ``_`` and dots after IDNA (WHATWG
  allows ``!$&'()*+,;=``) is refused: no DNS name has them.

Why not ``ada-url`` (PyPI's binding of Ada, the WHATWG parser Node.js uses): on one core of
the development machine its ``normalize_url`` costs 1.3-1.5 us a link, this module 1.5 us on
plain links (one regular expression) and ~5 us on links it must parse (upper case, a port, a
space); the differences above would still be applied after it, and a link's real cost is its
canonical form (w3lib, ~25 us when the query must be sorted), which Ada does not give. Not
worth a compiled dependency.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote, urljoin

import idna

_DEFAULT_PORTS = {"http": "80", "https": "443"}


class InvalidUrl(ValueError):
    """A URL that no request can be made of; ``reason`` is ``scheme`` or ``invalid_url``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


# A URL that is already its own request form: a lower-case http(s) host of letters, digits and
# hyphens whose last label starts with a letter (not an IPv4 number), an optional port, then a
# path and query of characters that need no encoding, escapes of two hex digits, no dot
# segment. Most links are so; they cost one match (``request_url``'s fast path).
_SEGMENT = r"(?:[!$&-.0-;=@-Z_a-z~]|%[0-9A-Fa-f]{2})"  # no "/", no "%" but escapes
_QUERY = r"(?:[!$&(-;=?-Z_a-z~]|%[0-9A-Fa-f]{2})"  # "/" and "?" too; no "'"
_FAST = re.compile(
    r"(https?)://((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z](?:[a-z0-9-]*[a-z0-9])?)"
    r"(?::([1-9][0-9]{0,4}))?"
    rf"((?:/(?!(?:\.|%2[eE]){{1,2}}(?:[/?#]|\Z)){_SEGMENT}*)*)"
    rf"(\?{_QUERY}*)?(?:#.*)?\Z",
    re.S,
)

_STRIP = "".join(chr(c) for c in range(0x21))  # C0 controls and space, at either end
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")

# What is percent-encoded (as UTF-8) in the path and in the query: see the module docstring.
_PATH_ENCODE = frozenset(range(0x21)) | {0x7F} | set(b'"<>`{}|^[]')
_QUERY_ENCODE = _PATH_ENCODE | {ord("'"), ord("\\")}
_HEX = frozenset(b"0123456789abcdefABCDEF")
# A host after IDNA: letters, digits, "-", "_" and dots. WHATWG allows a few more ASCII
# characters (``!$&'()*+,;=``); no DNS name has them, so such a link is refused.
_ASCII_HOST = re.compile(r"[a-z0-9_.-]+")


def _encode(text: str, unsafe: frozenset[int]) -> str:
    """``text`` with the bytes of ``unsafe`` and every non-ASCII character percent-encoded as
    UTF-8, and each ``%`` that does not start an escape written ``%25``."""
    raw = text.encode("utf-8", "surrogatepass")
    out = []
    n = len(raw)
    for i, b in enumerate(raw):
        if b == 0x25:  # "%"
            if i + 2 < n and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
                out.append("%")
            else:
                out.append("%25")
        elif b > 0x7E or b in unsafe:
            out.append(f"%{b:02X}")
        else:
            out.append(chr(b))
    return "".join(out)


def _ipv4_number(part: str) -> int | None:
    """A part of a WHATWG IPv4 host as a number (``0x`` hex, ``0`` octal, else decimal);
    None when it is not one."""
    if not part:
        return None
    base = 10
    if part[:2] in ("0x", "0X"):
        part, base = part[2:], 16
        if not part:
            return 0
    elif len(part) > 1 and part[0] == "0":
        part, base = part[1:], 8
    try:
        return int(part, base) if part.isascii() and part.isalnum() else None
    except ValueError:
        return None


def _ends_in_number(host: str) -> bool:
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last.isascii() and last.isdigit():
        return True
    return last[:2] in ("0x", "0X") and all(c in "0123456789abcdefABCDEF" for c in last[2:])


def _ipv4(host: str) -> str:
    """The dotted-decimal form of a host that ends in a number (WHATWG's IPv4 parser)."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise InvalidUrl("invalid_url", f"not an IPv4 address: {host!r}")
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        raise InvalidUrl("invalid_url", f"not an IPv4 address: {host!r}")
    values: list[int] = numbers  # type: ignore[assignment]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise InvalidUrl("invalid_url", f"IPv4 address out of range: {host!r}")
    address = values[-1]
    for i, n in enumerate(values[:-1]):
        address += n << (8 * (3 - i))
    return ".".join(str(address >> s & 255) for s in (24, 16, 8, 0))


def web_host(host: str) -> str:
    """A host as WHATWG's host parser gives it (see the module docstring), without a trailing
    dot; an IPv6 literal in brackets, compressed."""
    if host.startswith("["):
        try:
            if not host.endswith("]") or "%" in host:
                raise ValueError(host)
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            raise InvalidUrl("invalid_url", f"bad IPv6 literal: {host!r}") from None
    if "%" in host:
        host = unquote(host, errors="strict")
    if host.isascii():
        host = host.lower()
        if "xn--" in host:
            host = _idna(host)
    else:
        host = _idna(host)
    if not _ASCII_HOST.fullmatch(host):
        raise InvalidUrl("invalid_url", f"bad host: {host!r}")
    if _ends_in_number(host):  # asked of the host as written: "foo.09.." is a name
        return _ipv4(host)
    if host.endswith(".") and len(host) > 1:
        host = host[:-1]  # a deliberate difference: one server, one host
    return host


def _idna(host: str) -> str:
    """UTS #46 processing as WHATWG's domain-to-ASCII does it: the whole name mapped,
    non-transitional (``ß`` stays ``ß``, so ``xn--fa-hia``; a full-width dot is a dot), without
    STD3 rules (``_`` is a host character) or DNS length checks; each label that is not ASCII
    then Punycode, and an ``xn--`` label must decode to a label the mapping leaves alone."""
    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidUrl("invalid_url", f"bad international host {host!r}: {exc}") from None
    out = []
    for label in mapped.split("."):
        if not label.isascii():
            out.append("xn--" + label.encode("punycode").decode("ascii"))
            continue
        if label.startswith("xn--") and not _valid_a_label(label):
            raise InvalidUrl("invalid_url", f"bad international host {host!r}: {label!r}")
        out.append(label)
    return ".".join(out)


def _valid_a_label(label: str) -> bool:
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
        remapped = idna.uts46_remap(decoded, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError):
        return False
    return bool(decoded) and not decoded.isascii() and remapped == decoded


def _resolve_dots(path: str) -> str:
    """``.`` and ``..`` segments (also written ``%2e``) resolved as WHATWG's path state does;
    empty segments kept."""
    segments = path.split("/")
    out: list[str] = []
    last = len(segments) - 1
    for i, seg in enumerate(segments[1:], 1):
        low = seg.lower()
        if low in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if i == last:
                out.append("")
        elif low in (".", "%2e"):
            if i == last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def request_url(url: str) -> tuple[str, str]:
    """``(request URL, host)`` of an absolute http(s) URL, as the module docstring says; the host
    is the request URL's, without the port. Raises :class:`InvalidUrl`."""
    fast = _FAST.match(url)
    if fast is not None:
        scheme, host, port, path, query = fast.groups()
        if query == "?":
            query = None  # an empty query is not sent (the module docstring)
        if (port is None or (port != _DEFAULT_PORTS[scheme] and int(port) <= 65535)) and (
            "xn--" not in host  # an A-label must be valid: checked on the way below
        ):
            end = fast.end(5) if query is not None else fast.end(4)
            if path and end == len(url):
                return url, host  # most links: already their request form
            return url[: fast.start(4)] + (path or "/") + (query or ""), host
    return _parse(url)


def _parse(url: str) -> tuple[str, str]:
    """:func:`request_url`, step by step (anything its fast path does not take)."""
    url = _TAB_NEWLINE.sub("", url.strip(_STRIP))
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in _DEFAULT_PORTS:
        raise InvalidUrl("scheme", f"not an http(s) URL: {url[:200]!r}")
    rest = url[match.end() :]  # type: ignore[union-attr]
    rest = rest.partition("#")[0]
    before, _, query = rest.partition("?")
    before = before.replace("\\", "/")
    authority_and_path = before.lstrip("/")
    slash = authority_and_path.find("/")
    if slash < 0:
        authority, path = authority_and_path, "/"
    else:
        authority, path = authority_and_path[:slash], authority_and_path[slash:]
    authority = authority.rpartition("@")[2]  # credentials are never sent
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        host, tail = authority[: end + 1], authority[end + 1 :]
        if end < 0 or (tail and not tail.startswith(":")):
            raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: bad host")
        port = tail[1:]
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
    if port:
        if not port.isascii() or not port.isdigit() or int(port) > 65535:
            raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: bad port {port!r}")
        port = str(int(port))
        if port == _DEFAULT_PORTS[scheme]:
            port = ""
    if not host:
        raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: no host")
    try:
        host = web_host(host)
    except UnicodeDecodeError:
        raise InvalidUrl("invalid_url", f"malformed URL {url[:200]!r}: bad host") from None
    path = _encode(path, _PATH_ENCODE)
    if "." in path or "%2" in path:
        path = _resolve_dots(path)
    netloc = f"{host}:{port}" if port else host
    request = f"{scheme}://{netloc}{path}"
    if query:
        request += "?" + _encode(query, _QUERY_ENCODE)
    return request, host.strip("[]")


def join(base: str, href: str) -> str:
    """``href`` resolved against ``base`` (an http(s) URL) as WHATWG does where it differs from
    RFC 3986's ``urljoin``: a backslash before the query is a slash (``\\\\cdn.test\\a``),
    after ``//`` any number of slashes lead to the host (``///cdn.test/a``), and so they do after
    another scheme's name (``https:cdn.test``, ``https:/cdn.test`` from an http page); the page's
    own scheme's name followed by fewer than two slashes is a relative reference (``http:a``,
    ``http:/a`` on an http page is the path ``/a`` of the page's host: WHATWG's "special
    relative or authority state"). Leading and trailing controls and spaces are stripped, tabs
    and newlines removed. The result is not yet made safe: :func:`request_url` does that."""
    href = _TAB_NEWLINE.sub("", href.strip(_STRIP))
    match = _SCHEME.match(href)
    base_scheme = base[: base.find(":")].lower()
    if match is not None:
        scheme = match.group(1).lower()
        if scheme not in _DEFAULT_PORTS:
            return href  # another scheme (mailto:, javascript:): not joined
        rest = href[match.end() :]
        before, sep, after = _split_query(rest)
        before = before.replace("\\", "/")
        if scheme == base_scheme and not before.startswith("//"):
            return urljoin(base, before + sep + after)  # "http:a", "http:/a" on an http page
        return f"{scheme}://{before.lstrip('/')}{sep}{after}"
    before, sep, after = _split_query(href)
    if "\\" in before:
        before = before.replace("\\", "/")
    if before.startswith("//"):
        return f"{base_scheme}://{before.lstrip('/')}{sep}{after}"
    return urljoin(base, before + sep + after)


def _split_query(href: str) -> tuple[str, str, str]:
    """``href`` cut before its first ``?`` or ``#``: (before, the separator, after)."""
    for i, c in enumerate(href):
        if c in "?#":
            return href[:i], c, href[i + 1 :]
    return href, "", ""
