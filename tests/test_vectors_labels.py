"""Other projects' encoding-label and Content-Type vectors, as data, run against the crawler.

* The Encoding Standard's labels: ``whatwg/encoding``, ``encodings.json`` (its current edition,
  with ``unicode11utf8``, ``koi8-ru``, ``ms932``, ``replacement``, ``unicodefffe``..., as
  ``web-platform-tests/wpt`` ``encoding/resources/encodings.js`` copies it), and how WPT's
  ``encoding/textdecoder-labels.any.js`` and ``api-invalid-label.any.js`` vary them: every
  label, upper-cased and with ASCII whitespace around it, names its encoding; with NUL, VT,
  NBSP or LINE SEPARATOR around it, none. The verdict: :func:`label_codec` gives the Python
  codec that decodes like the encoding, checked on bytes that tell it from its neighbours
  (windows-1252 is not latin-1 at 0x80-0x9F; GBK is gb18030; Shift_JIS is windows-31j, EUC-KR
  windows-949, Big5 Big5-HKSCS; ``replacement`` decodes anything to one U+FFFD).
* The ``Content-Type`` charset: ``web-platform-tests/wpt`` ``mimesniff/mime-types/resources/
  mime-types.json`` (every case: the encoding a browser takes from the header, ``null`` where
  the charset is no label or the type does not parse), the charset cases derived from
  ``generated-mime-types.json`` (each code point that is no token, where a type, a name or a
  value has it: does a ``charset`` after it still count?), and ``fetch/content-type/resources/
  content-types.json`` (several values of the header). The verdict: the codec
  :func:`transport_encoding` gives, as the spider calls it.

A case where the crawler deliberately differs carries its verdict and why, in ``DIFFERS``.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler.content.encoding import label_codec, mime_type, transport_encoding
from crawler.sites import load_site_config
from crawler.spiders.site import SiteSpider
from crawler.spiders.site_items import PageItem

ENCODINGS_JSON = "whatwg/encoding encodings.json"
MIME_TYPES = "wpt mimesniff/mime-types/resources/mime-types.json"
GENERATED = "wpt mimesniff/mime-types/resources/generated-mime-types.json"
CONTENT_TYPES = "wpt fetch/content-type/resources/content-types.json"

# Each encoding of encodings.json: the Python codec that decodes like it, its labels (the
# file's), and bytes with what the encoding decodes them to, chosen where the candidate codecs
# differ; for the single-byte ones where Python's codec and the Standard's index differ
# (crawler.content.webcodecs), those bytes (WPT encoding/single-byte-decoder.any.js's indexes:
# windows-1252's 0x81 is U+0081, its 0xAA in windows-1253 no character).
ENCODINGS: dict[str, tuple[str, str, tuple[tuple[bytes, str], ...]]] = {
    "UTF-8": (
        "utf-8",
        "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
        ((b"\xc3\xa9", "\u00e9"),),
    ),
    "IBM866": ("cp866", "866 cp866 csibm866 ibm866", ((b"\x80\xf0", "\u0410\u0401"),)),
    "ISO-8859-2": (
        "iso8859-2",
        "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
        ((b"\xa1\x80", "\u0104\x80"),),
    ),
    "ISO-8859-3": (
        "iso8859-3",
        "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
        ((b"\xa1", "\u0126"),),
    ),
    "ISO-8859-4": (
        "iso8859-4",
        "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
        ((b"\xa2", "\u0138"),),
    ),
    "ISO-8859-5": (
        "iso8859-5",
        "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 "
        "iso_8859-5:1988",
        ((b"\xb0", "\u0410"),),
    ),
    "ISO-8859-6": (
        "iso8859-6",
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
        "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
        ((b"\xc7", "\u0627"),),
    ),
    "ISO-8859-7": (
        "iso8859-7",
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 "
        "iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
        ((b"\xa4\xc1", "\u20ac\u0391"),),
    ),
    "ISO-8859-8": (
        "iso8859-8",
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 "
        "iso88598 iso_8859-8 iso_8859-8:1988 visual",
        ((b"\xe0\xfd", "\u05d0\u200e"),),
    ),
    # Logical order: the same characters as ISO-8859-8, in the order they are stored.
    "ISO-8859-8-I": (
        "iso8859-8",
        "csiso88598i iso-8859-8-i logical",
        ((b"\xe0\xfd", "\u05d0\u200e"),),
    ),
    "ISO-8859-10": (
        "iso8859-10",
        "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
        ((b"\xbd", "\u2015"),),
    ),
    "ISO-8859-13": (
        "iso8859-13",
        "iso-8859-13 iso8859-13 iso885913",
        ((b"\xa1", "\u201d"),),
    ),
    "ISO-8859-14": (
        "iso8859-14",
        "iso-8859-14 iso8859-14 iso885914",
        ((b"\xa1", "\u1e02"),),
    ),
    "ISO-8859-15": (
        "iso8859-15",
        "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
        ((b"\xa4", "\u20ac"),),
    ),
    "ISO-8859-16": ("iso8859-16", "iso-8859-16", ((b"\xa4\xaa", "\u20ac\u0218"),)),
    "KOI8-R": ("koi8-r", "cskoi8r koi koi8 koi8-r koi8_r", ((b"\xc1\xa4", "\u0430\u2553"),)),
    # The Standard's KOI8-U is KOI8-RU: 0xAE and 0xBE are letters, not box drawings.
    "KOI8-U": (
        "whatwg-koi8-u",
        "koi8-ru koi8-u",
        ((b"\xc1\xa4\xae\xbe", "\u0430\u0454\u045e\u040e"),),
    ),
    "macintosh": (
        "mac-roman",
        "csmacintosh mac macintosh x-mac-roman",
        ((b"\x80\xdb", "\u00c4\u20ac"),),
    ),
    "windows-874": (
        "whatwg-windows-874",
        "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
        ((b"\x80\xa1\x81\xdb", "\u20ac\u0e01\x81\ufffd"),),
    ),
    "windows-1250": (
        "whatwg-windows-1250",
        "cp1250 windows-1250 x-cp1250",
        ((b"\x8a\x81\x83\x88\x90\x98", "\u0160\x81\x83\x88\x90\x98"),),
    ),
    "windows-1251": (
        "whatwg-windows-1251",
        "cp1251 windows-1251 x-cp1251",
        ((b"\xc0\x80\x98", "\u0410\u0402\x98"),),
    ),
    "windows-1252": (
        "whatwg-windows-1252",
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 "
        "iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
        ((b"\x80\x9f\xe9\x81\x8d\x8f\x90\x9d", "\u20ac\u0178\u00e9\x81\x8d\x8f\x90\x9d"),),
    ),
    "windows-1253": (
        "whatwg-windows-1253",
        "cp1253 windows-1253 x-cp1253",
        ((b"\xc1\x81\xaa", "\u0391\x81\ufffd"),),
    ),
    "windows-1254": (
        "whatwg-windows-1254",
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
        "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
        ((b"\xd0\x80\x8e", "\u011e\u20ac\x8e"),),
    ),
    "windows-1255": (
        "whatwg-windows-1255",
        "cp1255 windows-1255 x-cp1255",
        ((b"\xe0\xa4\xca\x81\xd9", "\u05d0\u20aa\u05ba\x81\ufffd"),),
    ),
    "windows-1256": (
        "cp1256",
        "cp1256 windows-1256 x-cp1256",
        ((b"\xc7\x81", "\u0627\u067e"),),
    ),
    "windows-1257": (
        "whatwg-windows-1257",
        "cp1257 windows-1257 x-cp1257",
        ((b"\xc0\x81\xa1", "\u0104\x81\ufffd"),),
    ),
    "windows-1258": (
        "whatwg-windows-1258",
        "cp1258 windows-1258 x-cp1258",
        ((b"\xd2\x8a", "\u0309\x8a"),),
    ),
    "x-mac-cyrillic": (
        "mac-cyrillic",
        "x-mac-cyrillic x-mac-ukrainian",
        ((b"\x80\xa2\xb6\xff", "\u0410\u0490\u0491\u20ac"),),
    ),
    # The Standard's GBK decoder is its gb18030 decoder: four-byte sequences included.
    "GBK": (
        "whatwg-gb18030",
        "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
        ((b"\xb0\xa1\x81\x30\x81\x30\x80", "\u554a\x80\u20ac"),),
    ),
    "gb18030": ("whatwg-gb18030", "gb18030", ((b"\x81\x30\x81\x30\x80", "\x80\u20ac"),)),
    "Big5": (
        "big5hkscs",
        "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
        ((b"\xa4\x40\x88\x62", "\u4e00\u00ca\u0304"),),
    ),
    # The Standard's EUC-JP (crawler.content.webcodecs_cjk): NEC's row 13 (0xADA1 is U+2460),
    # index jis0208's U+FF5E for 0xA1C1 (Python's euc_jp: U+FFFD twice, U+301C).
    "EUC-JP": (
        "whatwg-euc-jp",
        "cseucpkdfmtjapanese euc-jp x-euc-jp",
        ((b"\xa4\xa2\x8e\xb1\xad\xa1\xa1\xc1", "\u3042\uff71\u2460\uff5e"),),
    ),
    # Half-width katakana (ESC ( I), row 13; not JIS X 0212 (ESC $ ( D: an error, then ASCII).
    "ISO-2022-JP": (
        "whatwg-iso-2022-jp",
        "csiso2022jp iso-2022-jp",
        (
            (b'\x1b$B$"-!\x1b(I1\x1b(B', "\u3042\u2460\uff71"),
            (b"\x1b$(D", "\ufffd$(D"),
        ),
    ),
    # Windows-31J: NEC's row 13 (0x8740) and 0x815F as U+FF3C, not Shift_JIS's; a lone 0xA0 is
    # no character (Python's cp932: U+F8F0).
    "Shift_JIS": (
        "whatwg-shift-jis",
        "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
        ((b"\x82\xa0\x87\x40\x81\x5f\xa0", "\u3042\u2460\uff3c\ufffd"),),
    ),
    # Windows-949 (Unified Hangul Code): 0x8141 is none of EUC-KR's.
    "EUC-KR": (
        "cp949",
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 "
        "ksc_5601 windows-949",
        ((b"\xb0\xa1\x81\x41", "\uac00\uac02"),),
    ),
    "replacement": (
        "replacement",
        "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement",
        ((b"\x1b$)C\x0e!!\x0f<p>", "\ufffd"), (b"", "")),
    ),
    "UTF-16BE": ("utf-16-be", "unicodefffe utf-16be", ((b"\x00a\x30\x42", "a\u3042"),)),
    # "utf-16" is UTF-16LE: no byte order sniffing (a BOM is read before any label).
    "UTF-16LE": (
        "utf-16-le",
        "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
        ((b"a\x00\x42\x30", "a\u3042"),),
    ),
    "x-user-defined": (
        "x-user-defined",
        "x-user-defined",
        ((b"a\x80\xff", "a\uf780\uf7ff"),),
    ),
}

LABELS = [(label, name) for name, (_, labels, _) in ENCODINGS.items() for label in labels.split()]
WHITESPACE = (" ", "\t", "\n", "\x0c", "\r")  # ASCII whitespace: stripped from a label
NOT_WHITESPACE = ("\x00", "\x0b", "\xa0", "\u2028", "\u2029")  # not: no label then


def test_the_file_has_its_number_of_labels() -> None:
    assert (len(ENCODINGS), len(LABELS), len(set(LABELS))) == (40, 228, 228)


@pytest.mark.parametrize(("label", "name"), LABELS, ids=[label for label, _ in LABELS])
def test_every_label_names_its_encoding(label: str, name: str) -> None:
    expected = codecs.lookup(ENCODINGS[name][0]).name
    assert label_codec(label) == expected
    assert label_codec(label.upper()) == expected
    for space in WHITESPACE:
        assert label_codec(space + label) == expected, repr(space)
        assert label_codec(label + space) == expected, repr(space)
        assert label_codec(space + label + space) == expected, repr(space)
    for other in NOT_WHITESPACE:
        assert label_codec(other + label) is None, repr(other)
        assert label_codec(label + other) is None, repr(other)


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_the_codec_decodes_as_the_encoding(name: str) -> None:
    """The bytes that tell the encoding from its neighbours, decoded with the codec its first
    label gives, by the whole and a byte at a time (the incremental decoder)."""
    codec = label_codec(ENCODINGS[name][1].split()[0])
    assert codec is not None
    for data, text in ENCODINGS[name][2]:
        assert data.decode(codec, "replace") == text
        decoder = codecs.getincrementaldecoder(codec)("replace")
        pieces = [decoder.decode(data[i : i + 1]) for i in range(len(data))]
        assert "".join(pieces) + decoder.decode(b"", final=True) == text


def test_invalid_labels_name_nothing() -> None:
    """WPT's ``invalid-invalidLabel``, and a non-ASCII letter that lower-cases to ASCII."""
    for label in ("invalid-invalidLabel", "\u212aoi8-r", "utf-8\x00", 'iso-8859-9"', ""):
        assert label_codec(label) is None, repr(label)


def test_x_user_defined_and_replacement_encode() -> None:
    """Encoders too (a form or a URL query encoded in the page's codec): x-user-defined's
    inverts its decoder, replacement's is UTF-8 (its "output encoding")."""
    assert "a\uf780\uf7ff".encode("x-user-defined") == b"a\x80\xff"
    assert "\u00e9".encode("replacement") == b"\xc3\xa9"


# -- the Content-Type charset --------------------------------------------------------------------

D130 = "0123456789" * 13  # the file's name and type of 130 digits: longer than 127
VALID = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
VALID_LOWER = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
# Every code point a quoted value may have: tab, space to "~", 0x80 to 0xFF.
QUOTABLE = "\t" + "".join(map(chr, range(0x20, 0x7F))) + "".join(map(chr, range(0x80, 0x100)))
QUOTED = '"' + QUOTABLE.replace("\\", "\\\\").replace('"', '\\"') + '"'

# (input, output: the MIME type serialized, None where it does not parse, encoding: what a
# browser decodes the page with by the header, None for none), in the file's order.
MIME_TYPE_CASES: list[tuple[str, str | None, str | None]] = [
    ("text/html;charset=gbk", "text/html;charset=gbk", "GBK"),
    ("TEXT/HTML;CHARSET=GBK", "text/html;charset=GBK", "GBK"),
    ("text/html;charset=gbk(", 'text/html;charset="gbk("', None),
    ("text/html;x=(;charset=gbk", 'text/html;x="(";charset=gbk', "GBK"),
    ("text/html;charset=gbk;charset=windows-1255", "text/html;charset=gbk", "GBK"),
    ("text/html;charset=();charset=GBK", 'text/html;charset="()"', None),
    ("text/html;charset =gbk", "text/html", None),
    ("text/html ;charset=gbk", "text/html;charset=gbk", "GBK"),
    ("text/html; charset=gbk", "text/html;charset=gbk", "GBK"),
    ("text/html;charset= gbk", 'text/html;charset=" gbk"', "GBK"),
    ('text/html;charset= "gbk"', 'text/html;charset=" \\"gbk\\""', None),
    ("text/html;charset=\x0bgbk", "text/html", None),
    ("text/html;charset=\x0cgbk", "text/html", None),
    ("text/html;\x0bcharset=gbk", "text/html", None),
    ("text/html;\x0ccharset=gbk", "text/html", None),
    ("text/html;charset='gbk'", "text/html;charset='gbk'", None),
    ("text/html;charset='gbk", "text/html;charset='gbk", None),
    ("text/html;charset=gbk'", "text/html;charset=gbk'", None),
    ("text/html;charset=';charset=GBK", "text/html;charset='", None),
    ("text/html;test;charset=gbk", "text/html;charset=gbk", "GBK"),
    ("text/html;test=;charset=gbk", "text/html;charset=gbk", "GBK"),
    ("text/html;';charset=gbk", "text/html;charset=gbk", "GBK"),
    ('text/html;";charset=gbk', "text/html;charset=gbk", "GBK"),
    ("text/html ; ; charset=gbk", "text/html;charset=gbk", "GBK"),
    ("text/html;;;;charset=gbk", "text/html;charset=gbk", "GBK"),
    ('text/html;charset= "\x7f;charset=GBK', "text/html;charset=GBK", "GBK"),
    ('text/html;charset="\x7f;charset=foo";charset=GBK', "text/html;charset=GBK", "GBK"),
    ('text/html;charset="gbk"', "text/html;charset=gbk", "GBK"),
    ('text/html;charset="gbk', "text/html;charset=gbk", "GBK"),
    ('text/html;charset=gbk"', 'text/html;charset="gbk\\""', None),
    ('text/html;charset=" gbk"', 'text/html;charset=" gbk"', "GBK"),
    ('text/html;charset="gbk "', 'text/html;charset="gbk "', "GBK"),
    ('text/html;charset="\\ gbk"', 'text/html;charset=" gbk"', "GBK"),
    ('text/html;charset="\\g\\b\\k"', "text/html;charset=gbk", "GBK"),
    ('text/html;charset="gbk"x', "text/html;charset=gbk", "GBK"),
    ('text/html;charset="";charset=GBK', 'text/html;charset=""', None),
    ('text/html;charset=";charset=GBK', 'text/html;charset=";charset=GBK"', None),
    ("text/html;charset={gbk}", 'text/html;charset="{gbk}"', None),
    (f"text/html;{D130}=x;charset=gbk", f"text/html;{D130}=x;charset=gbk", "GBK"),
    (f"{D130}/{D130}", f"{D130}/{D130}", None),
    (
        f"{VALID}/{VALID};{VALID}={VALID}",
        f"{VALID_LOWER}/{VALID_LOWER};{VALID_LOWER}={VALID}",
        None,
    ),
    (f"x/x;x={QUOTED}", f"x/x;x={QUOTED}", None),
    ("x/x;test", "x/x", None),
    ('x/x;test="\\', 'x/x;test="\\\\"', None),
    ("x/x;x= ", "x/x", None),
    ("x/x;x=\t", "x/x", None),
    ("x/x\n\r\t ;x=x", "x/x;x=x", None),
    ("\n\r\t x/x;x=x\n\r\t ", "x/x;x=x", None),
    ("x/x;\n\r\t x=x\n\r\t ;x=y", "x/x;x=x", None),
    ("text/html;test=\u00ff;charset=gbk", 'text/html;test="\u00ff";charset=gbk', "GBK"),
    ("x/x;test=\ufffd;x=x", "x/x;x=x", None),
    *(
        (failure, None, None)
        for failure in (
            "\x0bx/x",
            "\x0cx/x",
            "x/x\x0b",
            "x/x\x0c",
            "",
            "\t",
            "/",
            "bogus",
            "bogus/",
            "bogus/ ",
            "bogus/bogus/;",
            "</>",
            "(/)",
            "\u00ff/\u00ff",
            "text/html(;doesnot=matter",
            "{/}",
            "\u0100/\u0100",
            "text /html",
            "text/ html",
            '"text/html"',
        )
    ),
]

# (the header's values, the encoding a browser decodes with), in the file's order.
CONTENT_TYPE_CASES: list[tuple[tuple[str, ...], str | None]] = [
    (("", "text/plain"), None),
    (("text/plain", ""), None),
    (("text/html", "text/plain"), None),
    (("text/plain;charset=gbk", "text/html"), None),
    (("text/plain;charset=gbk", "text/html;charset=windows-1254"), "windows-1254"),
    (("text/plain;charset=gbk", "text/plain"), "GBK"),
    (("text/plain;charset=gbk", "text/plain;charset=windows-1252"), "windows-1252"),
    (("text/html;charset=gbk", 'text/html;x=",text/plain'), "GBK"),
    (("text/html;charset=gbk", "text/plain", "text/html"), None),
    (("text/plain", "*/*"), None),
    (("text/html", "*/*"), None),
    (("*/*", "text/html"), None),
    (("text/plain", "*/*;charset=gbk"), None),
    (("text/html", "*/*;charset=gbk"), None),
    (('text/html;x="', "text/plain"), None),
    (('text/html;"', "text/plain"), None),
]


def _codec(encoding: str | None) -> str | None:
    return codecs.lookup(ENCODINGS[encoding][0]).name if encoding else None


def _serialized(parsed: tuple[str, dict[str, str]] | None) -> str | None:
    """MIME Sniffing's "serialize a MIME type": a value that is no token is quoted."""
    if parsed is None:
        return None
    out = parsed[0]
    for name, value in parsed[1].items():
        if not value or any(c not in VALID for c in value):
            value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out += f";{name}={value}"
    return out


def test_the_files_have_their_number_of_cases() -> None:
    assert (len(MIME_TYPE_CASES), len(CONTENT_TYPE_CASES)) == (71, 16)


@pytest.mark.parametrize(("value", "output", "encoding"), MIME_TYPE_CASES)
def test_a_mime_type_parses_as_whatwg_parses_it(
    value: str, output: str | None, encoding: str | None
) -> None:
    assert _serialized(mime_type(value)) == output


@pytest.mark.parametrize(("value", "output", "encoding"), MIME_TYPE_CASES)
def test_the_content_type_charset_is_whatwgs(
    value: str, output: str | None, encoding: str | None
) -> None:
    """What the crawler decodes with by the header: as a string and as bytes (isomorphic)."""
    assert transport_encoding(value) == _codec(encoding)
    if max(value, default="\x00") <= "\xff":
        assert transport_encoding(value.encode("latin-1")) == _codec(encoding)


def _generated() -> list[tuple[str, str | None]]:
    """generated-mime-types.json's cases as its generator makes them, (input, output): for each
    code point up to 0xFF that is no token code point, a type and a subtype of it fail, a
    parameter name of it is dropped, and a value of it, bare or quoted, too unless a quoted
    value may have it."""
    cases: list[tuple[str, str | None]] = []
    for char in map(chr, range(0x100)):
        if char in VALID:
            continue
        if char != "/":
            cases += [(f"{char}/x", None), (f"x/{char}", None)]
        if char not in ";=":
            cases.append((f"x/x;{char}=x;bonus=x", "x/x;bonus=x"))
        if char not in '\t "\\;':
            kept = f'x/x;x="{char}";bonus=x' if char in QUOTABLE else "x/x;bonus=x"
            cases += [(f"x/x;x={char};bonus=x", kept), (f'x/x;x="{char}";bonus=x', kept)]
    return cases


GENERATED_CASES = _generated()
# The same as Content-Type headers, charset=gbk for bonus=x: does the charset after the odd code
# point count? Not after a bare comma: Fetch splits the header's value there ("text/html;" and
# "=x;charset=gbk", which does not parse).
CHARSET_AFTER = [
    (
        value.replace("x/x;", "text/html;", 1).replace("bonus=x", "charset=gbk"),
        "GBK" if output is not None and "," not in value.replace('","', "") else None,
    )
    for value, output in GENERATED_CASES
    if value.endswith("bonus=x")
]


@pytest.mark.parametrize(("value", "output"), GENERATED_CASES, ids=map(ascii, GENERATED_CASES))
def test_a_generated_mime_type_parses_as_whatwg_parses_it(value: str, output: str | None) -> None:
    assert _serialized(mime_type(value)) == output


@pytest.mark.parametrize(("value", "encoding"), CHARSET_AFTER, ids=map(ascii, CHARSET_AFTER))
def test_a_charset_after_an_odd_code_point(value: str, encoding: str | None) -> None:
    assert transport_encoding(value) == _codec(encoding)


@pytest.mark.parametrize(("values", "encoding"), CONTENT_TYPE_CASES)
def test_the_charset_of_several_content_type_values(
    values: tuple[str, ...], encoding: str | None
) -> None:
    """One header line of them joined by ", " (the file's way), or a line each."""
    assert transport_encoding(", ".join(values)) == _codec(encoding)
    assert transport_encoding([v.encode("latin-1") for v in values]) == _codec(encoding)


def test_the_spider_reads_every_content_type_line(tmp_path: Path) -> None:
    """Two header lines, the charset on the first (content-types.json's ``text/plain;charset=
    gbk``, ``text/plain``): the page is GBK, not what its ``<meta>`` says; the last line
    alone (``response.headers.get``) declares no charset."""
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\n', encoding="utf-8")
    cls = SiteSpider.for_site(load_site_config(path))
    spider = cls.from_crawler(get_crawler(cls))
    body = '<meta charset="windows-1252"><title>中文</title><p>中文的页面</p>'.encode("gbk")
    headers = {"Content-Type": [b"text/html;charset=gbk", b"text/html"]}
    url = "http://a.test/"
    response = HtmlResponse(url, body=body, headers=headers, request=Request(url), status=200)
    items = [out for out in spider.parse(response) if isinstance(out, PageItem)]
    assert [item["title"] for item in items] == ["中文"]


# web-platform-tests encoding/single-byte-decoder.any.js: the Standard's indexes (the code points
# of bytes 0x80-0xFF, "-" for no character), for the encodings whose Python codec differs most.
SINGLE_BYTE_INDEXES = {
    "windows-1250": (
        "8364 129 8218 131 8222 8230 8224 8225 136 8240 352 8249 346 356 381 377 144 8216 8217 "
        "8220 8221 8226 8211 8212 152 8482 353 8250 347 357 382 378 160 711 728 321 164 260 "
        "166 167 168 169 350 171 172 173 174 379 176 177 731 322 180 181 182 183 184 261 351 "
        "187 317 733 318 380 340 193 194 258 196 313 262 199 268 201 280 203 282 205 206 270 "
        "272 323 327 211 212 336 214 215 344 366 218 368 220 221 354 223 341 225 226 259 228 "
        "314 263 231 269 233 281 235 283 237 238 271 273 324 328 243 244 337 246 247 345 367 "
        "250 369 252 253 355 729"
    ),
    "windows-1252": (
        "8364 129 8218 402 8222 8230 8224 8225 710 8240 352 8249 338 141 381 143 144 8216 8217 "
        "8220 8221 8226 8211 8212 732 8482 353 8250 339 157 382 376 160 161 162 163 164 165 "
        "166 167 168 169 170 171 172 173 174 175 176 177 178 179 180 181 182 183 184 185 186 "
        "187 188 189 190 191 192 193 194 195 196 197 198 199 200 201 202 203 204 205 206 207 "
        "208 209 210 211 212 213 214 215 216 217 218 219 220 221 222 223 224 225 226 227 228 "
        "229 230 231 232 233 234 235 236 237 238 239 240 241 242 243 244 245 246 247 248 249 "
        "250 251 252 253 254 255"
    ),
    "windows-1255": (
        "8364 129 8218 402 8222 8230 8224 8225 710 8240 138 8249 140 141 142 143 144 8216 8217 "
        "8220 8221 8226 8211 8212 732 8482 154 8250 156 157 158 159 160 161 162 163 8362 165 "
        "166 167 168 169 215 171 172 173 174 175 176 177 178 179 180 181 182 183 184 185 247 "
        "187 188 189 190 191 1456 1457 1458 1459 1460 1461 1462 1463 1464 1465 1466 1467 1468 "
        "1469 1470 1471 1472 1473 1474 1475 1520 1521 1522 1523 1524 - - - - - - - 1488 1489 "
        "1490 1491 1492 1493 1494 1495 1496 1497 1498 1499 1500 1501 1502 1503 1504 1505 1506 "
        "1507 1508 1509 1510 1511 1512 1513 1514 - - 8206 8207 -"
    ),
    "KOI8-U": (
        "9472 9474 9484 9488 9492 9496 9500 9508 9516 9524 9532 9600 9604 9608 9612 9616 9617 "
        "9618 9619 8992 9632 8729 8730 8776 8804 8805 160 8993 176 178 183 247 9552 9553 9554 "
        "1105 1108 9556 1110 1111 9559 9560 9561 9562 9563 1169 1118 9566 9567 9568 9569 1025 "
        "1028 9571 1030 1031 9574 9575 9576 9577 9578 1168 1038 169 1102 1072 1073 1094 1076 "
        "1077 1092 1075 1093 1080 1081 1082 1083 1084 1085 1086 1087 1103 1088 1089 1090 1091 "
        "1078 1074 1100 1099 1079 1096 1101 1097 1095 1098 1070 1040 1041 1062 1044 1045 1060 "
        "1043 1061 1048 1049 1050 1051 1052 1053 1054 1055 1071 1056 1057 1058 1059 1046 1042 "
        "1068 1067 1047 1064 1069 1065 1063 1066"
    ),
    # index-x-mac-cyrillic.txt: Python's mac-cyrillic is the Standard's, byte for byte.
    "x-mac-cyrillic": (
        "1040 1041 1042 1043 1044 1045 1046 1047 1048 1049 1050 1051 1052 1053 1054 1055 1056 "
        "1057 1058 1059 1060 1061 1062 1063 1064 1065 1066 1067 1068 1069 1070 1071 8224 176 "
        "1168 163 167 8226 182 1030 174 169 8482 1026 1106 8800 1027 1107 8734 177 8804 8805 "
        "1110 181 1169 1032 1028 1108 1031 1111 1033 1113 1034 1114 1112 1029 172 8730 402 8776 "
        "8710 171 187 8230 160 1035 1115 1036 1116 1109 8211 8212 8220 8221 8216 8217 247 8222 "
        "1038 1118 1039 1119 8470 1025 1105 1103 1072 1073 1074 1075 1076 1077 1078 1079 1080 "
        "1081 1082 1083 1084 1085 1086 1087 1088 1089 1090 1091 1092 1093 1094 1095 1096 1097 "
        "1098 1099 1100 1101 1102 8364"
    ),
}


@pytest.mark.parametrize("name", list(SINGLE_BYTE_INDEXES))
def test_a_single_byte_encoding_decodes_by_the_standards_index(name: str) -> None:
    """Every byte: ASCII below 0x80, the index above, U+FFFD where it has no character."""
    index = SINGLE_BYTE_INDEXES[name].split()
    assert len(index) == 128
    expected = "".join(map(chr, range(0x80))) + "".join(
        "\ufffd" if point == "-" else chr(int(point)) for point in index
    )
    for label in ENCODINGS[name][1].split():
        codec = label_codec(label)
        assert codec is not None
        assert bytes(range(256)).decode(codec, "replace") == expected, label
