"""The Encoding Standard's multi-byte decoders, on bytes where Python's codecs decode otherwise.

Each case: bytes, the encoding's label, and what the Standard's algorithm gives
(https://encoding.spec.whatwg.org/, 12.2.1 "gb18030 decoder", 14.1.1 "EUC-JP decoder", 14.2.1
"ISO-2022-JP decoder", 14.3.1 "Shift_JIS decoder"; the indexes of section 5, as
``index-jis0208.txt``/``index-jis0212.txt`` list them, index gb18030 with GB18030-2022's
two-byte changes, whatwg/encoding pull request 336). The gb18030 cases first are
web-platform-tests' ``encoding/legacy-mb-schinese/gb18030/gb18030-decoder.any.js``, in its
order (the Standard's GBK decoder is its gb18030 decoder). The crawler's codec for the label
(:func:`crawler.content.encoding.label_codec`) must give the same, whole and a byte at a time,
and a strict decoding must fail exactly where the Standard returns an error.
"""

from __future__ import annotations

import codecs
import random

import pytest

from crawler.content.document import decode_html
from crawler.content.encoding import label_codec
from crawler.content.webcodecs_cjk import (
    euc_jp_reference,
    gb18030_reference,
    shift_jis_reference,
)

GB = "12.2.1 gb18030 decoder"
WPT = "wpt gb18030-decoder.any.js"
EUC = "14.1.1 EUC-JP decoder"
ISO = "14.2.1 ISO-2022-JP decoder"
SJIS = "14.3.1 Shift_JIS decoder"
E = "\ufffd"  # an error, decoded with errors="replace"

# (section: why, label, bytes, what the Standard's decoder gives)
CASES: list[tuple[str, str, bytes, str]] = [
    *(
        (f"{WPT}: {why}", "gb18030", data, text)
        for why, data, text in [
            ("ASCII", b"s", "s"),
            ("euro", b"\x80", "\u20ac"),
            ("initial byte out of accepted ranges", b"\xff", E),
            ("end of queue, gb18030 first not 0", b"\x81", E),
            ("two bytes 0x81 0x28", b"\x81\x28", f"{E}("),
            ("two bytes 0x81 0x40", b"\x81\x40", "\u4e02"),
            ("two bytes 0x81 0x7e", b"\x81\x7e", "\u4e8a"),
            ("two bytes 0x81 0x7f", b"\x81\x7f", f"{E}\x7f"),
            ("two bytes 0x81 0x80", b"\x81\x80", "\u4e90"),
            ("two bytes 0x81 0xFE", b"\x81\xfe", "\u4fa2"),
            ("two bytes 0x81 0xFF", b"\x81\xff", E),
            ("two bytes 0xFE 0x40", b"\xfe\x40", "\ufa0c"),
            ("two bytes 0xFE 0xFE", b"\xfe\xfe", "\ue4c5"),
            ("two bytes 0xFE 0xFF", b"\xfe\xff", E),
            ("two bytes 0x81 0x30", b"\x81\x30", E),
            ("three bytes 0x81 0x30 0xFE", b"\x81\x30\xfe", E),
            ("three bytes 0x81 0x30 0xFF", b"\x81\x30\xff", f"{E}0{E}"),
            ("four bytes 0x81 0x30 0xFE 0x29", b"\x81\x30\xfe\x29", f"{E}0{E})"),
            ("four bytes 0xFE 0x39 0xFE 0x39", b"\xfe\x39\xfe\x39", E),
            ("pointer 7458", b"\x81\x35\xf4\x36", "\u1e3e"),
            ("pointer 7457", b"\x81\x35\xf4\x37", "\ue7c7"),
            ("pointer 7459", b"\x81\x35\xf4\x38", "\u1e40"),
            ("pointer 39419", b"\x84\x31\xa4\x39", "\uffff"),
            ("pointer 39420", b"\x84\x31\xa5\x30", E),
            ("pointer 189999", b"\x8f\x39\xfe\x39", E),
            ("pointer 189000", b"\x90\x30\x81\x30", "\U00010000"),
            ("pointer 1237575", b"\xe3\x32\x9a\x35", "\U0010ffff"),
            ("pointer 1237576", b"\xe3\x32\x9a\x36", E),
            ("legacy ICU special case 1", b"\x83\x36\xc8\x30", "\ue7c8"),
            ("legacy ICU special case 2", b"\xa1\xad", "\u2026"),
            ("legacy ICU special case 3", b"\xa1\xab", "\uff5e"),
        ]
    ),
    (f"{GB}: index gb18030 pointer 7533 (GB18030-2005)", "gbk", b"\xa8\xbc", "\u1e3f"),
    (f"{GB}: index gb18030 pointer 6555 (not GB18030's U+E5E5)", "gbk", b"\xa3\xa0", "\u3000"),
    (
        f"{GB}: GB18030-2022's vertical forms in index gb18030",
        "gb18030",
        b"\xa6\xd9\xa6\xda\xa6\xdb\xa6\xdc\xa6\xdd\xa6\xde\xa6\xdf\xa6\xec\xa6\xed\xa6\xf3",
        "\ufe10\ufe12\ufe11\ufe13\ufe14\ufe15\ufe16\ufe17\ufe18\ufe19",
    ),
    (
        f"{GB}: GB18030-2022's ideographs in index gb18030",
        "gbk",
        b"\xfe\x59\xfe\x61\xfe\x66\xfe\x67\xfe\x6d\xfe\x7e\xfe\x90\xfe\xa0",
        "\u9fb4\u9fb5\u9fb6\u9fb7\u9fb8\u9fb9\u9fba\u9fbb",
    ),
    (f"{GB}: their four bytes are index gb18030 ranges'", "gb18030", b"\x84\x31\x82\x36", "\ufe10"),
    # EUC-JP: pointer (lead - 0xA1) * 94 + trail - 0xA1 into index jis0208, which holds NEC's
    # row 13 (pointers 1128-1221) and the NEC-selected IBM extensions (rows 89-92).
    (f"{EUC}: row 13, circled digits", "euc-jp", b"\xad\xa1\xad\xb4", "\u2460\u2473"),
    (f"{EUC}: row 13, Roman numeral, (kabu)", "euc-jp", b"\xad\xb5\xad\xea", "\u2160\u3231"),
    (f"{EUC}: row 89, an IBM extension", "euc-jp", b"\xf9\xa1", "\u7e8a"),
    (
        f"{EUC}: index jis0208's pointers 32, 33, 60, 80, 81, 137 (not JIS X 0208's)",
        "euc-jp",
        b"\xa1\xc1\xa1\xc2\xa1\xdd\xa1\xf1\xa1\xf2\xa2\xcc",
        "\uff5e\u2225\uff0d\uffe0\uffe1\uffe2",
    ),
    (f"{EUC}: 0x8E, half-width katakana", "euc-jp", b"\x8e\xa1\x8e\xdf", "\uff61\uff9f"),
    (f"{EUC}: 0x8F, index jis0212 pointer 116", "euc-jp", b"\x8f\xa2\xb7", "\uff5e"),
    (f"{EUC}: 0x8F, index jis0212 pointer 1410", "euc-jp", b"\x8f\xb0\xa1a", "\u4e02a"),
    (f"{EUC}: an ASCII byte after a lead is not consumed", "euc-jp", b"\xa4A", f"{E}A"),
    (f"{EUC}: a non-ASCII byte after a lead is", "euc-jp", b"\xa4\x8e\xa4\xa2", f"{E}\u3042"),
    (f"{EUC}: 0x8E then no katakana byte: one error", "euc-jp", b"\x8e\xe0a", f"{E}a"),
    (f"{EUC}: a pointer index jis0212 lacks: one error", "euc-jp", b"\x8f\xa1\xa1a", f"{E}a"),
    (f"{EUC}: 0x8F, a lead, then ASCII", "euc-jp", b"\x8f\xa1A", f"{E}A"),
    (f"{EUC}: rows 85-88 are empty", "euc-jp", b"\xf5\xa1", E),
    (f"{EUC}: bytes no sequence begins with", "euc-jp", b"\x80\xa0\xff", E * 3),
    (f"{EUC}: a lead at the end", "euc-jp", b"a\xa4", f"a{E}"),
    # ISO-2022-JP: ESC $ @ and ESC $ B are index jis0208, row 13 too; ESC ( I katakana;
    # ESC ( J Roman; no JIS X 0212; two escapes with nothing between them are an error.
    (f"{ISO}: jis0208 with row 13", "iso-2022-jp", b'\x1b$B$"-!\x1b(B', "\u3042\u2460"),
    (f"{ISO}: ESC $ @ is jis0208 too", "iso-2022-jp", b'\x1b$@$"\x1b(Ba', "\u3042a"),
    (f"{ISO}: katakana", "iso-2022-jp", b"\x1b(I1_\x1b(B", "\uff71\uff9f"),
    (f"{ISO}: Roman's yen and overline", "iso-2022-jp", b"\x1b(J\\~a\x1b(B\\~", "\u00a5\u203ea\\~"),
    (f"{ISO}: ESC $ ( D (JIS X 0212) is an error", "iso-2022-jp", b"\x1b$(DB!", f"{E}$(DB!"),
    (f"{ISO}: two escapes in a row", "iso-2022-jp", b"\x1b$B\x1b(Ba", f"{E}a"),
    (f"{ISO}: a lead then the end", "iso-2022-jp", b"\x1b$B$", E),
    (f"{ISO}: a lead then ESC", "iso-2022-jp", b"\x1b$B$\x1b(Ba", f"{E}a"),
    (f"{ISO}: a newline among jis0208", "iso-2022-jp", b'\x1b$B$"\n', f"\u3042{E}"),
    (f"{ISO}: rows 85-88 are empty", "iso-2022-jp", b"\x1b$Bu!", E),
    (f"{ISO}: SO, SI and non-ASCII bytes", "iso-2022-jp", b"\x0e\x0f\x80a", f"{E}{E}{E}a"),
    (f"{ISO}: a lone ESC", "iso-2022-jp", b"a\x1b", f"a{E}"),
    (f"{ISO}: katakana's range", "iso-2022-jp", b"\x1b(I`", E),
    # Shift_JIS: index jis0208 by pointer, whole; 8836-10715 the private use area.
    (f"{SJIS}: row 13", "shift_jis", b"\x87\x40\x87\x54\x87\x8a", "\u2460\u2160\u3231"),
    (f"{SJIS}: NEC's and IBM's IBM extensions", "shift_jis", b"\xed\x40\xfa\x40", "\u7e8a\u2170"),
    (f"{SJIS}: pointers 8836 and 10715", "shift_jis", b"\xf0\x40\xf9\xfc", "\ue000\ue757"),
    (f"{SJIS}: 0x80 and katakana", "shift_jis", b"\x80\xa1\xdf", "\x80\uff61\uff9f"),
    (f"{SJIS}: 0xA0, 0xFD-0xFF are no character", "shift_jis", b"\xa0\xfd\xfe\xff", E * 4),
    (f"{SJIS}: an ASCII trail that maps nothing stays", "shift_jis", b"\x85\x40", f"{E}@"),
    (f"{SJIS}: a byte no trail is, ASCII", "shift_jis", b"\x81\x20", f"{E} "),
    (f"{SJIS}: a byte no trail is, not ASCII", "shift_jis", b"\x81\xfda", f"{E}a"),
    (f"{SJIS}: a lead at the end", "shift_jis", b"a\x81", f"a{E}"),
]


def _codec(label: str) -> str:
    codec = label_codec(label)
    assert codec is not None
    return codec


@pytest.mark.parametrize(("why", "label", "data", "text"), CASES, ids=[c[0] for c in CASES])
def test_the_standards_decoder(why: str, label: str, data: bytes, text: str) -> None:
    codec = _codec(label)
    assert data.decode(codec, "replace") == text
    decoder = codecs.getincrementaldecoder(codec)("replace")
    pieces = [decoder.decode(data[i : i + 1]) for i in range(len(data))]
    assert "".join(pieces) + decoder.decode(b"", final=True) == text
    if E in text:
        with pytest.raises(UnicodeDecodeError):
            data.decode(codec)
    else:
        assert data.decode(codec) == text


def test_a_page_in_euc_jp_shows_row_13() -> None:
    """A page that declares EUC-JP, read as every reader reads it."""
    page = b'<meta charset="euc-jp"><p>\xad\xa1 \xa4\xa2'
    assert decode_html(page).endswith("<p>\u2460 \u3042")


@pytest.mark.parametrize(
    ("label", "reference"),
    [
        ("euc-jp", euc_jp_reference),
        ("shift_jis", shift_jis_reference),
        ("gb18030", gb18030_reference),
    ],
)
def test_the_fast_path_is_the_standards_step_by_step(label: str, reference: object) -> None:
    """EUC-JP, Shift_JIS and gb18030 run on Python's C decoders, the Standard's steps taking over
    where they fail: the same as the Standard's decoder run a step at a time, on every two
    bytes and every two bytes before an ASCII one."""
    codec = _codec(label)
    for pair in range(0x10000):
        data = pair.to_bytes(2, "big")
        for sample in (data, data + b"A"):
            assert sample.decode(codec, "replace") == reference(sample, "replace"), sample  # type: ignore[operator]


def test_iso_2022_jp_whole_is_a_byte_at_a_time() -> None:
    """ISO-2022-JP decodes runs at once (ASCII, jis0208 pairs, escapes) where a byte at a time
    is the Standard's handler itself: the two agree, on bytes of every state's kinds."""
    codec = _codec("iso-2022-jp")
    pieces = [b"\x1b$B", b"\x1b$@", b"\x1b(B", b"\x1b(J", b"\x1b(I", b"\x1b$(D", b"\x1b", b"$"]
    pieces += [b"(", b"B", b"-!", b'$"', b"u!", b"a", b"\\", b"~", b"\n", b"\x0e", b"\x80", b"1"]
    rng = random.Random(0)
    for _ in range(3000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 10)))
        decoder = codecs.getincrementaldecoder(codec)("replace")
        one = "".join(decoder.decode(data[i : i + 1]) for i in range(len(data)))
        assert data.decode(codec, "replace") == one + decoder.decode(b"", final=True), data


def test_gb18030_four_bytes_fast_path_is_the_standards() -> None:
    """Four-byte sequences (index gb18030 ranges, and the errors that give bytes back)."""
    codec = _codec("gb18030")
    for first in range(0x80, 0x100):
        for third in (0x29, 0x80, 0x81, 0x99, 0xD2, 0xFE, 0xFF):
            for second, fourth in ((0x30, 0x30), (0x35, 0x37), (0x39, 0x39), (0x31, 0x29)):
                data = bytes([first, second, third, fourth])
                assert data.decode(codec, "replace") == gb18030_reference(data, "replace"), data


@pytest.mark.parametrize(
    ("label", "data", "start", "end"),
    [
        ("shift_jis", b"a\xa0\x82\x0b", 1, 2),  # cp932 decodes the lone 0xA0, fails on 0x82 0x0B
        ("shift_jis", b"\xfe\x82\xa0\xeb", 0, 1),  # ... and on the lead at the end
        ("euc-jp", b"\x8f\xa2\xb7\xa4A", 3, 4),
        ("gb18030", b"\xa3\xa0\x81\x30\x81A", 2, 3),
    ],
)
def test_a_strict_decoding_fails_at_the_standards_first_error(
    label: str, data: bytes, start: int, end: int
) -> None:
    """The error a strict decoding raises is the Standard's first, where Python's decoder, on
    which the codec runs, decodes bytes the Standard does not (cp932's lone 0xA0 and 0xFD-0xFF)."""
    with pytest.raises(UnicodeDecodeError) as error:
        data.decode(_codec(label))
    assert (error.value.start, error.value.end) == (start, end)


def test_an_iso_2022_jp_error_is_of_its_own_bytes() -> None:
    """A jis0208 pair with no character, decoded with others at once: the error names the
    ISO-2022-JP bytes, which an error handler shows (not the EUC-JP bytes they are read as)."""
    codec = _codec("iso-2022-jp")
    data = b'\x1b$B$"u!$"\x1b(B'
    with pytest.raises(UnicodeDecodeError) as error:
        data.decode(codec)
    assert (error.value.encoding, error.value.object) == ("whatwg-iso-2022-jp", data)
    assert (error.value.start, error.value.end) == (5, 7)
    assert data.decode(codec, "backslashreplace") == "\u3042\\x75\\x21\u3042"


def test_an_iso_2022_jp_error_shows_its_bytes_whole_and_a_byte_at_a_time() -> None:
    """Each error is of the bytes it is for (a lead cut by an escape, a lone ESC at the end),
    in one chunk or many: a sequence a chunk ends inside of waits for the next."""
    codec = _codec("iso-2022-jp")
    data = b'a\x1b$B$"$\x1b(B~\x1b'
    want = "a\u3042\\x24~\\x1b"
    assert data.decode(codec, "backslashreplace") == want
    decoder = codecs.getincrementaldecoder(codec)("backslashreplace")
    pieces = [decoder.decode(data[i : i + 1]) for i in range(len(data))]
    assert "".join(pieces) + decoder.decode(b"", final=True) == want
    with pytest.raises(UnicodeDecodeError) as error:
        data.decode(codec)
    assert (error.value.start, error.value.end) == (6, 7)
