"""Other projects' encoding-sniffing test vectors, as data, run against the crawler's decoding.

Source: ``html5lib/html5lib-tests``, ``encoding/tests1.dat``, ``encoding/tests2.dat`` and
``encoding/preparsed/tests1.dat`` (each ``#data``/``#encoding`` pair is a case; a case names its
file and its position there, counted from 1). They are the WHATWG encoding sniffing algorithm (HTML
13.2.3): a byte order mark, then the transport's charset, then the prescan of the first 1,024
bytes for ``<meta charset>`` or an ``http-equiv`` content type, else the default
(windows-1252, the files' "control test"). Their long cases (a comment of 511 to 8,193
characters, a script test padded with ``+``, a run of spaces) are generated here at the length
the file states: only where the declaration lies relative to the 1,024-byte window matters.

The verdict is the encoding a browser decodes the page with: the file's name read as an Encoding
Standard label (``ISO-8859-9`` names windows-1254, ``ISO-8859-1`` windows-1252). Ours is the
codec the crawler decodes the page's bytes with: :func:`crawler.content.document.page_encoding`
given what the crawl gives it (the ``Content-Type`` charset of the response). A few cases of our
own (``WHATWG``: the labels the Encoding Standard names, the transport's charset) follow the
files'. A case where ours is not the file's name, or not what a browser uses, carries ours and,
in ``differs``, why.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import pytest
from scrapy.http import HtmlResponse
from w3lib.encoding import resolve_encoding

from crawler.content.document import decode_html, page_encoding
from crawler.content.encoding import _LABELS, label_codec, transport_encoding
from crawler.content.html import parse_page

T1 = "html5lib-tests encoding/tests1.dat"
T2 = "html5lib-tests encoding/tests2.dat"
PRE = "html5lib-tests encoding/preparsed/tests1.dat"
WHATWG = "WHATWG HTML 13.2.3.2-3 / Encoding 4.2"
DOCTYPE = "<!DOCTYPE HTML>\n"

# Encoding Standard names (the files' spelling) to the Python codec that decodes them.
CODECS = {
    "windows-1252": "whatwg-windows-1252",  # cp1252 with the Standard's 0x81, 0x8D...
    "windows-1254": "whatwg-windows-1254",
    "iso-8859-2": "iso8859-2",
    "utf-8": "utf-8",
    "utf-16le": "utf-16-le",
    "utf-16be": "utf-16-be",
    "euc-jp": "whatwg-euc-jp",
    "macintosh": "mac-roman",
}
# The files' names read as labels (Encoding Standard 4.2): ISO-8859-9 is windows-1254.
LABELS = {"iso-8859-9": "windows-1254", "iso8859-2": "iso-8859-2", "euc_jp": "euc-jp"}


@dataclass(frozen=True)
class Case:
    source: str  # file and the case's position in it
    data: bytes  # the page's bytes
    expected: str  # ours: the encoding the crawler decodes with (Encoding Standard name)
    content_type: str | None = None  # the transport's Content-Type, if any
    differs: str = ""  # why ours is not the file's, or not a browser's
    file: str = ""  # the file's name, read as a label (ours if none is given)


def _b(text: str) -> bytes:
    """The file's bytes: its text is UTF-8 (a ``ñ``), a BOM written as U+FEFF."""
    return text.encode("utf-8")


def _comment(length: int, fill: str = "x") -> str:
    """``<!-- N characters xxx...z-->``, ``length`` characters long, as the files write it."""
    head, tail = f"<!-- {length} characters ", "z-->"
    return head + fill * (length - len(head) - len(tail)) + tail


def _name(label: str) -> str:
    return LABELS.get(label.lower(), label.lower())


def _cases(source: str, *pairs: tuple) -> list[Case]:
    """The file's ``(data, encoding[, ours, why])`` pairs, numbered from 1."""
    cases = []
    for number, (data, label, *browser) in enumerate(pairs, 1):
        name = _name(label)
        expected, differs = (_name(browser[0]), browser[1]) if browser else (name, "")
        data_bytes = data if isinstance(data, bytes) else _b(data)
        cases.append(Case(f"{source} #{number}", data_bytes, expected, None, differs, name))
    return cases


W = "Windows-1252"
I9 = "ISO-8859-9"
META9 = '<meta charset="ISO-8859-9">'
# Ours is the file's, not a browser's: "euc_jp" is no Encoding Standard label (its labels are
# "euc-jp", "x-euc-jp", "cseucpkdfmtjapanese"), a browser finds no declaration and uses its
# default; the crawler, like html5lib, honours the name Python gives the encoding.
EUC_JP = "html5lib's and ours, not a browser's: Python's name for EUC-JP is honoured"
# The file's, not a browser's: the prescan (HTML 13.2.3.2) and the tree builder's <meta> rule
# (13.2.6.4.4) take a content="...charset=" only beside http-equiv="content-type", exactly;
# html5lib's expectations here are an older, looser reading (w3lib's too: "Content-Type ",
# "Content-Type>" or no http-equiv at all).
PRAGMA = "a browser: content's charset only with http-equiv exactly content-type"
# HTML lets a browser stop the prescan at 1,024 bytes; the crawler reads 4,096, as w3lib does
# (crawler.content.encoding: a crawler decodes the page its author declared).
WINDOW = "the crawler's prescan reads 4,096 bytes, HTML's 1,024 (w3lib's window)"
# The page declares nothing in reach and its bytes are UTF-8 (the file's "þ"): a browser
# uses its default, the crawler detects UTF-8 as Scrapy does.
DETECTED = "undeclared bytes that decode as UTF-8 are UTF-8 (Scrapy's detection)"
# HTML's "extracting a character encoding from a meta element": an unmatched quote after
# "charset=" is no encoding (Chromium's ExtractCharset agrees); html5lib reads on to the end.
UNMATCHED = "HTML: charset='utf-8 with no closing quote declares nothing"
SPACES = " " * 4200  # the file's runs of spaces: past the prescan's window
PLUSES = "+" * 8000  # the files' comment of "+": some 8,000, past the prescan's window
SCRIPT_STEPS = (
    "<!-- multi-script test -->\n<script>alert('step 1 of 3 (\"\u00fe\")')</script>\n"
    f"<!-- {PLUSES} -->\n<script>alert('step 2 of 3 (\"\u00fe\")')</script>\n"
    "{meta}\n<script>alert('step 3 of 3 (\"\u00fe\")')</script>"
)

TESTS1 = _cases(
    T1,
    (
        DOCTYPE + "<!-- (control test - for the other tests to work, this should pass - you may "
        "have to set your defaults appropriately) -->",
        W,
    ),
    (DOCTYPE + '<meta charset="ISO-8859-1">', W),
    (DOCTYPE + META9, I9),
    (DOCTYPE + "<meta charset='ISO-8859-9'>", I9),
    (DOCTYPE + "<meta charset=ISO-8859-9>", I9),
    (DOCTYPE + "<meta\ncharset=ISO-8859-9>", I9),
    (DOCTYPE + "<metacharset=ISO-8859-9>", W),
    (DOCTYPE + '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-9">', I9),
    (DOCTYPE + '<meta content="text/html; charset=ISO-8859-9" http-equiv="Content-Type">', I9),
    (DOCTYPE + '<meta http-equiv="Content-Type" content=text/html; charset=ISO-8859-9>', I9),
    (DOCTYPE + '<meta http-equiv="Content-Type content="text/html; charset=ISO-8859-9">', W),
    (
        DOCTYPE + '<meta http-equiv="Content-Type " content="text/html; charset=ISO-8859-9">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta content="text/html; charset=ISO-8859-9" http-equiv="Content-Type ">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta http-equiv="Content-Type>" content="text/html; charset=ISO-8859-9">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta content="text/html; charset=ISO-8859-9" http-equiv="Content-Type>">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta http-equiv="Content-Style-Type" content="text/html; charset=ISO-8859-9">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta content="text/html; charset=ISO-8859-9" http-equiv="Content-Style-Type">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta name="Content-Style-Type" content="text/html; charset=ISO-8859-9">',
        I9,
        W,
        PRAGMA,
    ),
    (
        DOCTYPE + '<meta content="text/html; charset=ISO-8859-9" name="Content-Style-Type">',
        I9,
        W,
        PRAGMA,
    ),
    (DOCTYPE + '<meta content="text/html; charset=ISO-8859-9">', I9, W, PRAGMA),
    (DOCTYPE + '<meta content=" text/html; charset = ISO-8859-9 ">', I9, W, PRAGMA),
    (DOCTYPE + '<meta content="\ntext/html; charset=ISO-8859-9\n">', I9, W, PRAGMA),
    (DOCTYPE + '<meta charset="\nISO-8859-9\n">', I9),
    (DOCTYPE + "<meta charset=\nISO-8859-9\n>", I9),
    (DOCTYPE + '<meta charset="ISO-8859-9>\n<p>"</p>', W),
    (DOCTYPE + '<meta charset=ISO-8859-9">\n<p>"</p>', W),
    (DOCTYPE + '<meta " charset=ISO-8859-9>\n<p>"</p>', I9),
    (DOCTYPE + '<meta test" charset=ISO-8859-9>\n<p>"</p>', I9),
    (DOCTYPE + '<meta test=" charset=ISO-8859-9>\n<p>"</p>', W),
    (DOCTYPE + "<meta test=\"' charset=ISO-8859-9>\n<p>\"'</p>", W),
    (DOCTYPE + "<meta test='\" charset=ISO-8859-9>\n<p>'\"</p>", W),
    (DOCTYPE + '<meta test="" charset=ISO-8859-9>', I9),
    (DOCTYPE + '<meta test=x" charset=ISO-8859-9>\n<p>"</p>', I9),
    (DOCTYPE + '<head></head><p title="x>\n<meta test=x" charset=ISO-8859-9>\n<p>"</p>', W),
    (DOCTYPE + '<head></head><p title="x>\n<meta test=x charset=ISO-8859-9>\n<p>"</p>', W),
    (DOCTYPE + '<head></head><p title="x>\n<meta charset=ISO-8859-9>\n<p>"</p>', W),
    (DOCTYPE + '<head></head><p title="x>">\n<meta charset=ISO-8859-9>\n<p>"</p>', I9),
    (DOCTYPE + '<meta charset="ISO-8859-1">\n' + META9, W),
    (DOCTYPE + META9 + '\n<meta charset="ISO-8859-1">', I9),
    (DOCTYPE + '<!--<meta charset="ISO-8859-1">-->\n' + META9, I9),
    (DOCTYPE + '<!--<meta charset="ISO-8859-9">-->\n<meta charset="ISO-8859-1">', W),
    ("\ufeff" + DOCTYPE + "<!-- Starts with UTF-8 BOM -->", "UTF-8"),
    ("\ufeff" + DOCTYPE + '<meta charset="ISO-8859-1">\n<!-- Starts with UTF-8 BOM -->', "UTF-8"),
    (_comment(511) + "\n" + META9, I9),
    (_comment(512) + "\n" + META9, I9),
    (_comment(1024) + "\n" + META9, W, I9, WINDOW),
    (_comment(1025) + "\n" + META9, W, I9, WINDOW),
    (_comment(2048) + "\n" + META9, W, I9, WINDOW),
    (_comment(2049) + "\n" + META9, W, I9, WINDOW),
    (_comment(4096) + "\n" + META9, W),
    (_comment(4097) + "\n" + META9, W),
    (_comment(8192) + "\n" + META9, W),
    (_comment(8193) + "\n" + META9, W),
    (SCRIPT_STEPS.format(meta=META9), W, "utf-8", DETECTED),
    (DOCTYPE + "<script>document.write('<meta charset=\"ISO-8859-' + '9\">')</script>", W),
    (DOCTYPE + "<script>document.write('<meta charset=\"ISO-8859-9\">')</script>", I9),
    (DOCTYPE + '<script type="text/plain"><meta charset="ISO-8859-9"></script>', I9),
    (DOCTYPE + '<style type="text/plain"><meta charset="ISO-8859-9"></style>', I9),
    (DOCTYPE + '<p><meta charset="ISO-8859-9"></p>', I9),
    (DOCTYPE + '<meta charset="bogus">\n' + META9, I9),
)

TESTS2 = _cases(
    T2,
    ("<meta", W),
    ("<", W),
    ("<!", W),
    ('<meta charset = "', W),
    ("<meta charset=euc_jp", W),
    ("<meta <meta charset='euc_jp'>", "euc_jp", "euc_jp", EUC_JP),
    ("<meta       charset    =     'euc_jp'>", "euc_jp", "euc_jp", EUC_JP),
    ('<!-- -->\n<meta http-equiv="Content-Type" content="text/html; charset=utf-8">', "utf-8"),
    ('<!-- -->\n<meta http-equiv="Content-Type" content="text/html; charset=utf', W),
    ('<meta http-equiv="Content-Type<meta charset="utf-8">', W),
    ('<meta http-equiv="Content-Type" content="text/html; charset=\'utf-8\'">', "utf-8"),
    (
        '<meta http-equiv="Content-Type" content="text/html; charset=\'utf-8">',
        "utf-8",
        W,
        UNMATCHED,
    ),
    ("<meta" + SPACES, W),
    ("<meta charset" + SPACES[:20] + "=" + SPACES, W),
    ("<meta charset=" + SPACES + "utf-8", W),
    ('<meta content = "text/html;', W),
    ('<meta charset="UTF-16">', "utf-8"),
    ('<meta charset="UTF-16LE">', "utf-8"),
    ('<meta charset="UTF-16BE">', "utf-8"),
    ('<html a=\u00f1>\n<meta charset="utf-8">', "utf-8"),
    ('<html \u00f1>\n<meta charset="utf-8">', "utf-8"),
    ('<html>\u00f1\n<meta charset="utf-8">', "utf-8"),
)

PREPARSED = _cases(
    PRE,
    *[
        (_comment(length) + '\n<meta charset="iso8859-2">', W, "iso8859-2", WINDOW)
        for length in (1025, 2048, 2049)
    ],
    *[
        (_comment(length) + '\n<meta charset="iso8859-2">', W)
        for length in (4096, 4097, 8192, 8193)
    ],
    (SCRIPT_STEPS.format(meta='<meta charset="iso8859-2">'), W, "utf-8", DETECTED),
)

OURS = [
    Case(f"{WHATWG}: latin1 is windows-1252", _b('<meta charset="latin1">'), "windows-1252"),
    Case(
        f"{WHATWG}: x-user-defined in meta", _b('<meta charset="x-user-defined">'), "windows-1252"
    ),
    Case(
        f"{WHATWG}: iso-8859-1 in the header",
        b"<p>x</p>",
        "windows-1252",
        "text/html; charset=iso-8859-1",
    ),
    Case(
        f"{WHATWG}: the header beats meta", _b(META9), "iso-8859-2", "text/html; charset=iso-8859-2"
    ),
    Case(
        f"{WHATWG}: the BOM beats the header",
        _b("\ufeff<p>x</p>"),
        "utf-8",
        "text/html; charset=iso-8859-2",
    ),
    Case(f"{WHATWG}: a UTF-16LE BOM", "\ufeff<p>x</p>".encode("utf-16-le"), "utf-16le"),
    Case(
        f"{WHATWG}: x-mac-roman, a label Python lacks",
        _b("<meta charset=x-mac-roman>"),
        "macintosh",
    ),
    Case(
        f"{WHATWG}: '<!-->' is a whole comment", _b("<!--><meta charset=iso-8859-2>"), "iso-8859-2"
    ),
    Case(
        f"{WHATWG}: an attribute value whose quote never closes hides what follows",
        _b('<p title="x><meta charset=iso-8859-2> y'),
        "windows-1252",
    ),
    Case(
        f"{WHATWG}: a comment that never ends hides what follows, '>' or not",
        _b("<!-- a > b <meta charset=iso-8859-2>"),
        "windows-1252",
    ),
    Case(
        f"{WHATWG}: an unknown header label: the page says",
        _b(META9),
        "windows-1254",
        "text/html; charset=bogus",
    ),
]

CASES = TESTS1 + TESTS2 + PREPARSED + OURS


def crawler_encoding(case: Case) -> str:
    """The codec the crawler decodes ``case``'s page with, as the spider calls it."""
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    response = HtmlResponse("http://example.com/", body=case.data, headers=headers)
    return page_encoding(case.data, transport_encoding(response.headers.get(b"Content-Type")))


@pytest.mark.parametrize("case", CASES, ids=[c.source for c in CASES])
def test_the_encoding_a_browser_uses(case: Case) -> None:
    expected = codecs.lookup(CODECS[case.expected]).name
    assert codecs.lookup(crawler_encoding(case)).name == expected, case


@pytest.mark.parametrize("case", CASES, ids=[c.source for c in CASES])
def test_the_text_is_decoded_with_it(case: Case) -> None:
    """``decode_html``, which every reader of a page goes through, decodes with that codec."""
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    response = HtmlResponse("http://example.com/", body=case.data, headers=headers)
    data = case.data
    for bom in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE):
        data = data.removeprefix(bom)
    expected = data.decode(CODECS[case.expected], "replace")
    assert (
        decode_html(case.data, transport_encoding(response.headers.get(b"Content-Type")))
        == expected
    )


def test_a_difference_is_explained_and_only_a_difference() -> None:
    """Ours is the file's unless the case says why not (euc_jp: the file's, not a browser's)."""
    for case in TESTS1 + TESTS2 + PREPARSED:
        assert (case.expected != case.file) == (case.differs not in ("", EUC_JP)), case.source


def test_the_files_have_their_number_of_cases() -> None:
    assert (len(TESTS1), len(TESTS2), len(PREPARSED)) == (60, 22, 8)


def test_an_undeclared_utf8_page_cut_inside_a_character_stays_utf8() -> None:
    """PAGE_MAX_HTML cuts a long page at a byte count (``crawler.sites.analysis``), often inside
    a UTF-8 character: a page that declares no charset is still UTF-8, not windows-1252 (every
    character of its text and links mis-decoded) for want of its last bytes."""
    words = "日本語のページです。"
    body = f"<title>T</title><a href='/記事'>記事</a><p>{words * 400}</p>".encode()
    cut = body.index(words.encode(), len(body) // 2) + 1  # inside the "日"
    page = parse_page(body[:cut]).page
    assert page.title == "T" and page.links == [("/記事", "記事")]
    assert page.text.startswith(f"記事\n{words}") and page.text.endswith(f"{words}\ufffd")


def test_the_crawlers_own_labels_are_only_those_w3lib_lacks() -> None:
    """``crawler.content.encoding`` keeps a label of its own only where w3lib's
    ``resolve_encoding`` knows it not or names another codec: the rest are w3lib's."""
    for label, codec in _LABELS.items():
        theirs = resolve_encoding(label)
        assert theirs is None or codecs.lookup(theirs).name != codecs.lookup(codec).name, label
        assert label_codec(label) == codecs.lookup(codec).name, label
