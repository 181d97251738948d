"""Which encoding a page's bytes are in: the WHATWG encoding sniffing algorithm (HTML 13.2.3).

A browser decodes a page with, in order: the encoding of a byte order mark; the transport's
(the ``Content-Type`` charset); the one a ``<meta>`` declares, found by the *prescan* of the
page's first bytes; else a guess. Labels are the Encoding Standard's: ``latin1`` and
``iso-8859-1`` name windows-1252, ``iso-8859-9`` windows-1254, ``x-user-defined`` in a
``<meta>`` windows-1252, and a ``<meta>`` that says UTF-16 means UTF-8 (the bytes the prescan
read as ASCII cannot be UTF-16).

w3lib, which Scrapy's ``response.encoding`` (so ``response.text`` and ``response.css``) uses,
finds a ``<meta>`` with a regular expression rather than the prescan, and so decodes pages no
browser decodes that way (w3lib 2.5): a ``<meta>`` inside another tag's attribute
(``<p title="x><meta charset=...>"``), the first of two ``<meta>`` even when its label is
unknown, a ``<meta charset="utf-16">``, and a ``<meta>`` shown in a text that is no HTML
(``text/plain``). The crawler therefore asks w3lib only for the ``Content-Type`` charset and
runs the prescan itself (html5lib-tests ``encoding/`` in ``tests/test_vectors_encoding.py``);
its readers decode with :mod:`crawler.content.document` (``tests/test_crawl_decoding.py``).

Where the crawler deliberately reads more than a browser: the prescan looks at the first 4,096
bytes, as w3lib does, where HTML lets a browser stop at 1,024 (Firefox does, and warns that the
declaration came "too late"; Chromium reads on while in the head): a crawler decodes the page
its author declared. And a label Python knows but the Encoding Standard lacks (``euc_jp``) is
honoured, as html5lib does.

Every label of the Standard names the codec that decodes as its encoding does
(``tests/test_vectors_labels.py``): Python's, or one of :mod:`crawler.content.webcodecs` where
Python has none (``x-user-defined``, ``replacement``) or decodes otherwise (windows-1252's 0x81,
EUC-JP's NEC row 13: :mod:`crawler.content.webcodecs_cjk`).
The ``Content-Type`` charset is the one Fetch and MIME Sniffing parse (:func:`transport_encoding`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from w3lib.encoding import read_bom, resolve_encoding

from crawler.content.webcodecs import EXACT

__all__ = [
    "declared_encoding",
    "exact_codec",
    "label_codec",
    "mime_type",
    "prescan",
    "stylesheet_encoding",
    "text_encoding",
    "transport_encoding",
]

# How much of a page the prescan reads (HTML says 1,024: see the module's docstring).
PRESCAN_BYTES = 4096

# Encoding Standard labels that w3lib's ``resolve_encoding`` (Python's codec registry and
# w3lib's translation table) does not know, or resolves to another codec (``utf-16``: UTF-16LE,
# not a BOM-sniffing UTF-16; ``iso-2022-kr``: the replacement encoding, not Python's ISO-2022-KR),
# to the codec of the encoding they name; every other label is w3lib's
# (tests/test_vectors_encoding.py keeps it so, tests/test_vectors_labels.py checks them all).
_LABELS = {
    **dict.fromkeys(
        ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"), "utf-8"
    ),
    **dict.fromkeys(("x-mac-cyrillic", "x-mac-ukrainian"), "mac-cyrillic"),
    **dict.fromkeys(("x-mac-roman", "mac", "csmacintosh"), "mac-roman"),
    **dict.fromkeys(("iso-8859-8-i", "csiso88598i", "logical", "visual"), "iso8859-8"),
    **dict.fromkeys(("iso-8859-8-e", "csiso88598e"), "iso8859-8"),
    **dict.fromkeys(("iso-8859-6-e", "iso-8859-6-i", "csiso88596e", "csiso88596i"), "iso8859-6"),
    **dict.fromkeys(("x-gbk", "gb_2312", "csgb2312"), "gb18030"),
    **dict.fromkeys(("x-x-big5", "cn-big5"), "big5hkscs"),
    **dict.fromkeys(("x-euc-jp", "cseucpkdfmtjapanese"), "euc_jp"),
    **dict.fromkeys(
        ("cseuckr", "csksc56011987", "iso-ir-149", "ks_c_5601-1989", "ksc_5601", "windows-949"),
        "cp949",
    ),
    **dict.fromkeys(("koi", "koi8"), "koi8-r"),
    **dict.fromkeys(("csisolatin9", "iso885915"), "iso8859-15"),
    # ISO-2022-KR, HZ and ISO-2022-CN can hide markup in ASCII bytes: the Standard decodes them
    # as one U+FFFD, as w3lib refuses UTF-7.
    **dict.fromkeys(
        ("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr"),
        "replacement",
    ),
    "koi8-ru": "koi8-u",
    "sun_eu_greek": "iso8859-7",
    "dos-874": "cp874",
    "iso88591": "cp1252",
    "iso88599": "cp1254",
    "iso885911": "cp874",
    **{f"iso8859{n}": f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14)},
    **{f"x-cp125{n}": f"cp125{n}" for n in range(9)},
    **dict.fromkeys(
        ("utf-16", "ucs-2", "unicode", "csunicode", "iso-10646-ucs-2", "unicodefeff"), "utf-16-le"
    ),
    "unicodefffe": "utf-16-be",
}
_LABELS = {label: EXACT.get(codec, codec) for label, codec in _LABELS.items()}
_UTF16 = frozenset({"utf-16", "utf-16-le", "utf-16-be"})

_SPACE = b"\t\n\x0c\r "
# MIME Sniffing's and Fetch's: HTTP whitespace, token and quoted-string code points.
_HTTP_SPACE = "\t\n\r "
_HTTP_SPACES = re.compile(r"[\t\n\r ]*")
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_QUOTED = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_NAME_END = re.compile(r"[^;=]*")
_UNTIL_SEMICOLON = re.compile(r"[^;]*")
_UNQUOTED = re.compile(r'[^"\\]*')
_UNTIL_QUOTE_OR_COMMA = re.compile(r'[^",]*')
_CHARSET = re.compile(r"charset", re.IGNORECASE)
_NAME = re.compile(rb"[^\t\n\x0c\r >]*")
# "get an attribute" (HTML 13.2.3.2): spaces and slashes, then ">" (no attribute) or a name (its
# first byte may be "="), then optionally "=" and a quoted, an empty (before ">") or an
# unquoted value; spaces may surround the "=".
_ATTRIBUTE = re.compile(
    rb"[\t\n\x0c\r /]*(?:(?P<end>>)|(?P<name>[^\t\n\x0c\r />][^\t\n\x0c\r />=]*)"
    rb"(?:[\t\n\x0c\r ]*=[\t\n\x0c\r ]*"
    rb"(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<uq>[^\t\n\x0c\r >\"'][^\t\n\x0c\r >]*)|(?=>)))?)?"
)
# A whole tag of attributes as _ATTRIBUTE reads them, up to its ">" (atomic groups: an attribute
# is read one way only, so a tag that does not end in reach fails fast). An "=" must be followed
# by a value: one whose quote does not close in reach fails the tag, not the value alone.
_WHOLE_TAG = re.compile(
    rb"</?[a-zA-Z][^\t\n\x0c\r >]*+"
    rb"(?>[\t\n\x0c\r /]*+[^\t\n\x0c\r />][^\t\n\x0c\r />=]*+"
    rb"(?>[\t\n\x0c\r ]*+=[\t\n\x0c\r ]*+"
    rb"(?>\"[^\"]*+\"|'[^']*+'|[^\t\n\x0c\r >\"'][^\t\n\x0c\r >]*+|(?=>))"
    rb"|(?![\t\n\x0c\r ]*+=)))*+"
    rb"[\t\n\x0c\r /]*+>"
)
# One step of the prescan: a comment, a <meta>, a whole other tag, or markup to skip to its ">"
# (each as HTML says), or the start of one that does not end in reach; a "<" that starts none of
# them is passed over. A comment ends only at "-->": one that does not end in reach is not
# markup to skip to its first ">", it hides the rest.
_SCAN = re.compile(
    rb"<!--(?:>|->|.*?-->)|(?P<meta><meta[\t\n\x0c\r /])|"
    + _WHOLE_TAG.pattern
    + rb"|(?P<tag></?[a-zA-Z])"
    rb"|<(?!!--)[!/?][^>]*>|(?P<open><[!/?])",
    re.DOTALL | re.IGNORECASE,
)
# CSS Syntax 3.2: 40 63 68 61 72 73 65 74 20 22 (not 22)* 22 3B, byte for byte.
_CSS_CHARSET = re.compile(rb'@charset "([^"]*)";')
_LABEL = re.compile(r"[a-z0-9._:-]+")  # what every Encoding Standard label is made of
# Python codecs that are text codecs but no character encoding a page can be in: "undefined"
# fails every decoding, IDNA and Punycode are host-name forms, and the escapes hide markup in
# ASCII bytes as UTF-7 does. (The bytes-to-bytes ones, base64 and zlib, are no text codec.)
_NOT_CHARSETS = frozenset(
    {"undefined", "idna", "punycode", "unicode-escape", "raw-unicode-escape", "utf-7"}
)


def label_codec(label: str) -> str | None:
    """The Python codec of the encoding an Encoding Standard ``label`` names, or ``None``."""
    label = label.strip("\t\n\x0c\r ")
    if not label.isascii():  # an ASCII lower-casing: "\u212a" (Kelvin) is no "k"
        return None
    label = label.lower()
    if not _LABEL.fullmatch(label):  # Python's lookup forgives 'iso-8859-9"', a browser not
        return None
    codec = _LABELS.get(label) or resolve_encoding(label)
    if not codec:
        return None
    info = codecs.lookup(codec)
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None  # base64, zlib, undefined...: a browser knows no such label, nor do we
    return exact_codec(codec)


def exact_codec(codec: str) -> str:
    """The codec that decodes as the Encoding Standard does in place of Python's ``codec`` (a
    codec's name), where they differ (:mod:`crawler.content.webcodecs`): windows-1252's 0x81 is
    U+0081, not U+FFFD."""
    name = codecs.lookup(codec).name
    return EXACT.get(name, name)


def transport_encoding(content_type: bytes | str | Iterable[bytes | str] | None) -> str | None:
    """The codec of a ``Content-Type`` header's charset, or ``None`` if it names none we know.

    The header is read as Fetch reads it ("extract a MIME type"): its values (several header
    lines, or one split at its commas outside quotes) each parsed as MIME Sniffing parses a MIME
    type, the last one that parses (and is not ``*/*``) deciding, with the charset of an earlier
    one of the same type if it has none. The first ``charset`` of a type counts; its value may
    be quoted, with backslash escapes; one that does not parse (``text/html;charset='gbk'``,
    ``text/html;charset= "gbk"``) or a type that does not (``text/html(;charset=gbk``) declares
    nothing. w3lib's regular expression read some of those (web-platform-tests
    ``mimesniff/mime-types``, ``fetch/content-type`` in ``tests/test_vectors_labels.py``)."""
    if content_type is None:
        return None
    if isinstance(content_type, (bytes, str)):
        content_type = [content_type]
    # Several header lines are one value, joined by ", " (Fetch's "get").
    text = ", ".join(v.decode("latin-1") if isinstance(v, bytes) else v for v in content_type)
    charset, essence, found = None, None, None
    for value in _header_values(text):
        parsed = mime_type(value)
        if parsed is None or parsed[0] == "*/*":
            continue
        found = parsed
        if parsed[0] != essence:
            charset, essence = parsed[1].get("charset"), parsed[0]
        elif "charset" not in parsed[1] and charset is not None:
            parsed[1]["charset"] = charset
    label = found[1].get("charset") if found is not None else None
    return label_codec(label) if label is not None else None


def mime_type(value: str) -> tuple[str, dict[str, str]] | None:
    """MIME Sniffing's "parse a MIME type": the type/subtype (lower-cased) and its parameters
    (names lower-cased, the first of a name kept), or ``None`` where it fails."""
    value = value.strip(_HTTP_SPACE)
    slash = value.find("/")
    end = value.find(";", slash + 1)
    end = len(value) if end < 0 else end
    kind, subtype = value[:slash], value[slash + 1 : end].rstrip(_HTTP_SPACE)
    if slash < 0 or not _TOKEN.fullmatch(kind) or not _TOKEN.fullmatch(subtype):
        return None
    parameters: dict[str, str] = {}
    pos, size = end, len(value)
    while pos < size:
        pos = _HTTP_SPACES.match(value, pos + 1).end()  # type: ignore[union-attr]  # past ";"
        name_end = _NAME_END.match(value, pos).end()  # type: ignore[union-attr]
        name, pos = value[pos:name_end], name_end
        if pos < size:
            if value[pos] == ";":
                continue
            pos += 1  # past "="
        if pos >= size:
            break
        if value[pos] == '"':
            parameter, pos = _quoted_string(value, pos)
            pos = _UNTIL_SEMICOLON.match(value, pos).end()  # type: ignore[union-attr]
        else:
            end = _UNTIL_SEMICOLON.match(value, pos).end()  # type: ignore[union-attr]
            parameter, pos = value[pos:end].rstrip(_HTTP_SPACE), end
            if not parameter:
                continue
        name = name.lower() if name.isascii() else name  # an ASCII lower-casing
        if _TOKEN.fullmatch(name) and _QUOTED.fullmatch(parameter) and name not in parameters:
            parameters[name] = parameter
    return f"{kind}/{subtype}".lower(), parameters


def _quoted_string(value: str, pos: int) -> tuple[str, int]:
    """Fetch's "collect an HTTP quoted string" from the '"' at ``pos``: its value (escapes
    undone; it may end unclosed) and the position after it."""
    out, size = [], len(value)
    pos += 1
    while True:
        end = _UNQUOTED.match(value, pos).end()  # type: ignore[union-attr]
        out.append(value[pos:end])
        pos = end
        if pos >= size:
            break
        char, pos = value[pos], pos + 1
        if char != "\\":
            break
        if pos >= size:
            out.append("\\")
            break
        out.append(value[pos])
        pos += 1
    return "".join(out), pos


def _header_values(text: str) -> list[str]:
    """Fetch's "get, decode, and split": a header's value split at its commas, except in a
    quoted string, each stripped of spaces and tabs."""
    # A value is a slice of the text from its start: no string grows by concatenation (a
    # header of thousands of quoted strings was quadratic, 0.1 s for 256 KiB of them).
    values, start, pos, size = [], 0, 0, len(text)
    while True:
        pos = _UNTIL_QUOTE_OR_COMMA.match(text, pos).end()  # type: ignore[union-attr]
        if pos < size and text[pos] == '"':
            pos = _quoted_string(text, pos)[1]
            if pos < size:
                continue
        values.append(text[start:pos].strip("\t "))
        if pos >= size:
            return values
        pos += 1  # past ","
        start = pos


def declared_encoding(body: bytes, transport: str | None = None) -> str | None:
    """The codec a browser decodes ``body`` with, short of guessing: the byte order mark's, else
    ``transport`` (the ``Content-Type`` charset, a codec or label) if known, else the page's
    ``<meta>`` (:func:`prescan`). ``None``: nothing declared, the caller guesses."""
    return text_encoding(body, transport) or prescan(body)


def text_encoding(body: bytes, transport: str | None = None) -> str | None:
    """What declares the encoding of any text, markup or not: the byte order mark's codec, else
    ``transport`` (the ``Content-Type`` charset, a codec or label) if known; else ``None``.
    A text that is not HTML (``text/plain``) has no ``<meta>``: one it shows declares nothing."""
    bom = read_bom(body)[0]
    if bom is not None:
        # The Encoding Standard knows no UTF-32: its BOM begins with UTF-16LE's.
        return "utf-16-le" if bom == "utf-32-le" else bom
    return label_codec(transport) if transport else None


def stylesheet_encoding(body: bytes, transport: str | None = None) -> str | None:
    """The codec a browser decodes a stylesheet with, short of guessing (CSS Syntax 3.2,
    "determine the fallback encoding"): the byte order mark's, else ``transport``'s, else an
    ``@charset "label";`` that the first 1,024 bytes begin with, exactly so (a UTF-16 label
    there means UTF-8, as in a ``<meta>``). ``None``: the caller guesses (a browser takes the
    referring page's encoding, which a fetched stylesheet does not know)."""
    declared = text_encoding(body, transport)
    if declared is not None:
        return declared
    rule = _CSS_CHARSET.match(body[:1024])
    codec = label_codec(rule[1].decode("latin-1")) if rule is not None else None
    return "utf-8" if codec in _UTF16 else codec


class _End(Exception):
    """The prescan ran past the bytes it reads: it stops without an answer."""


def prescan(body: bytes) -> str | None:
    """The codec a ``<meta>`` in the first :data:`PRESCAN_BYTES` of ``body`` declares, by
    HTML's "prescan a byte stream to determine its encoding" (13.2.3.2), or ``None``."""
    data = body[:PRESCAN_BYTES]
    pos = 0
    try:
        while (found := _SCAN.search(data, pos)) is not None:
            kind, pos = found.lastgroup, found.end()
            if kind == "meta":
                codec, pos = _meta(data, pos - 1)
                if codec is not None:
                    return codec
            elif kind == "tag":  # a tag that does not end in reach: where does it stop?
                pos = _skip_name(data, pos)
                while (attribute := _attribute(data, pos))[0] is not None:
                    pos = attribute[2]
                pos = attribute[2]
            elif kind == "open":  # a comment or "<!", "</", "<?" that never ends
                return None
    except _End:
        return None
    return None


def _skip_name(data: bytes, pos: int) -> int:
    """Past a tag's name: to the first space or ``>``."""
    pos = _NAME.match(data, pos).end()  # type: ignore[union-attr]  # matches an empty string
    if pos >= len(data):
        raise _End
    return pos


def _meta(data: bytes, pos: int) -> tuple[str | None, int]:
    """The codec a ``<meta>`` whose attributes begin at ``pos`` declares, and where it ends."""
    seen: set[bytes] = set()
    got_pragma, need_pragma, charset = False, None, None
    while True:
        name, value, pos = _attribute(data, pos)
        if name is None:
            break
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            got_pragma = got_pragma or value == b"content-type"
        elif name == b"content" and charset is None:
            label = _content_charset(value.decode("latin-1"))
            if label is not None and (codec := _meta_codec(label)):
                charset, need_pragma = codec, True
        elif name == b"charset" and charset is None:
            # an unknown label is a failure, not a null: a later content= does not count
            charset, need_pragma = _meta_codec(value.decode("latin-1")) or "", False
    if need_pragma is None or (need_pragma and not got_pragma) or not charset:
        return None, pos
    if charset in _UTF16:
        return "utf-8", pos
    return charset, pos


def _meta_codec(label: str) -> str | None:
    """A ``<meta>``'s label: x-user-defined there means windows-1252 (HTML 13.2.3.2)."""
    if label.strip("\t\n\x0c\r ").lower() == "x-user-defined":
        return EXACT["cp1252"]
    return label_codec(label)


def _attribute(data: bytes, pos: int) -> tuple[bytes | None, bytes, int]:
    """HTML's "get an attribute": its name (``None`` at the tag's end), value and the position
    after it, both lower-cased. One regular expression per attribute, not a loop per byte."""
    match = _ATTRIBUTE.match(data, pos)
    assert match is not None  # the pattern matches an empty string
    if match["end"] is not None:
        return None, b"", match.start("end")
    end = match.end()
    if end >= len(data):
        raise _End  # past the bytes read: the prescan aborts
    name = match["name"]
    value = match["dq"] if match["dq"] is not None else match["sq"]
    if value is None:
        value = match["uq"]
    if value is None:
        if data[end:].lstrip(_SPACE).startswith(b"="):
            raise _End  # "=" then an unclosed quote, or nothing: the prescan aborts
        value = b""
    return name.lower(), value.lower(), end


def _content_charset(content: str) -> str | None:
    """HTML's "extracting a character encoding from a meta element": the label after
    ``charset=`` in a ``content`` attribute, or ``None``."""
    pos = 0
    while match := _CHARSET.search(content, pos):
        pos = match.end()
        rest = content[pos:].lstrip("\t\n\x0c\r ")
        if not rest.startswith("="):
            continue
        rest = rest[1:].lstrip("\t\n\x0c\r ")
        if not rest:
            return None
        if rest[0] in "\"'":
            close = rest.find(rest[0], 1)
            return rest[1:close] if close > 0 else None
        return re.split(r"[\t\n\x0c\r ;]", rest, maxsplit=1)[0]
    return None
