"""The Encoding Standard's multi-byte decoders where Python's codecs decode otherwise.

Registered with :mod:`codecs` by :mod:`crawler.content.webcodecs` as ``whatwg-euc-jp``,
``whatwg-iso-2022-jp``, ``whatwg-shift-jis`` (section 14) and ``whatwg-gb18030`` (section 12,
gb18030 and GBK), the codecs the Standard's labels name. Python's own decode what pages hold
otherwise than browsers do:

* ``euc_jp`` is JIS X 0208 alone: NEC's row 13 (0xADA1 is U+2460, the circled digits, Roman
  numerals and U+3231 that Japanese pages use often) and the IBM extensions (0xF9A1...) are
  U+FFFD, and six symbols are JIS's, not the browsers' (0xA1C1 is U+FF5E, not U+301C; the cent,
  pound and not signs are the full-width ones); its JIS X 0212 0x8FA2B7 is U+FF5E, not "~".
* ``iso2022_jp_ext`` reads JIS X 0212 (``ESC $ ( D``), which the Standard does not, with the
  same JIS X 0208 as ``euc_jp``; and two escapes with nothing between them are no error there.
* ``cp932`` decodes the lone bytes 0xA0 and 0xFD-0xFF to private-use characters, the Standard's
  Shift_JIS to errors.
* ``gb18030`` is GB18030-2005's but for 0xA8BC and 0x8135F437, which it decodes as
  GB18030-2000 does (swapped); the Standard takes GB18030-2022's 18 two-byte characters that
  left the private use area (0xA6D9 is U+FE10, 0xFE59 U+9FB4); it decodes 0xA3A0 to U+E5E5,
  index gb18030 to U+3000 (the ideographic space, as deployed content means it); and its lone
  0x80 is the euro sign, an invalid four-byte sequence one error, not four.

"Index jis0208" is Windows-31J's table (``cp932``) read by pointer, rows 13 and 89-92 included;
"index jis0212" is Python's JIS X 0212 but for pointer 116; "index gb18030" and its ranges are
Python's gb18030 with the changes above. The decoders follow the Standard's algorithms; EUC-JP,
Shift_JIS and gb18030 run on Python's C decoders, the Standard's steps taking over where those
fail and the characters that differ mapped after (each comes from one byte sequence only, in
either decoder), and on the step-by-step decoder only where that cannot be exact: EUC-JP bytes
that hold 0x8FA2B7, Shift_JIS bytes with a lone 0xA0 or 0xFD-0xFF (or a strict error, which
may come after one of those).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from functools import cache

__all__ = ["CODECS"]

EUC_JP = "whatwg-euc-jp"
ISO_2022_JP = "whatwg-iso-2022-jp"
SHIFT_JIS = "whatwg-shift-jis"
GB18030 = "whatwg-gb18030"

# Python's euc_jp's JIS X 0208 symbols that index jis0208 maps otherwise (its pointers 32, 33,
# 60, 80, 81, 137). No other sequence decodes to them, in Python's codec or the Standard's.
_EUC_JP_SYMBOLS = dict(
    zip("\u301c\u2016\u2212\u00a2\u00a3\u00ac", "\uff5e\u2225\uff0d\uffe0\uffe1\uffe2", strict=True)
)
# Found by a regular expression: str.translate costs 30x the decoding on a Japanese page.
_EUC_JP_SYMBOL = re.compile(f"[{''.join(_EUC_JP_SYMBOLS)}]")


def _sjis(pointer: int) -> bytes:
    """The Shift_JIS bytes of an index jis0208 pointer (the inverse of 14.3.1's arithmetic)."""
    lead, trail = divmod(pointer, 188)
    return bytes([lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41)])


@cache
def _jis0208() -> tuple[str | None, ...]:
    """Index jis0208 for the pointers EUC-JP and ISO-2022-JP reach (0-8835)."""
    return tuple(_or_none(_sjis(pointer), "cp932") for pointer in range(94 * 94))


@cache
def _jis0212() -> tuple[str | None, ...]:
    """Index jis0212: Python's (through euc_jp's 0x8F), but pointer 116 is U+FF5E."""
    table = [
        _or_none(bytes([0x8F, 0xA1 + p // 94, 0xA1 + p % 94]), "euc_jp") for p in range(94 * 94)
    ]
    table[116] = "\uff5e"
    return tuple(table)


def _or_none(data: bytes, codec: str) -> str | None:
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        return None


def _fail(errors: str, name: str, data: bytes, start: int, end: int) -> tuple[str, int]:
    """The ``errors`` handler's answer to ``data[start:end]`` not decoding (raises if strict)."""
    error = UnicodeDecodeError(name, data, start, end, "no character in the Encoding Standard")
    return codecs.lookup_error(errors)(error)  # type: ignore[return-value]


# -- EUC-JP (14.1.1) ------------------------------------------------------------------------------


def _euc_jp_step(data: bytes, pos: int) -> tuple[str | None, int]:
    """One turn of the EUC-JP decoder from its initial state at ``pos``: the character (``None``
    for an error) and where the next begins (an ASCII byte after a lead is not consumed)."""
    byte = data[pos]
    if byte < 0x80:
        return chr(byte), pos + 1
    if byte not in (0x8E, 0x8F) and not 0xA1 <= byte <= 0xFE:
        return None, pos + 1
    if pos + 1 >= len(data):
        return None, pos + 1  # end of queue with a lead: an error
    lead, byte, pos = byte, data[pos + 1], pos + 2
    if lead == 0x8E and 0xA1 <= byte <= 0xDF:
        return chr(0xFF61 - 0xA1 + byte), pos
    index = _jis0208()
    if lead == 0x8F and 0xA1 <= byte <= 0xFE:
        if pos >= len(data):
            return None, pos
        lead, byte, pos, index = byte, data[pos], pos + 1, _jis0212()
    if 0xA1 <= lead <= 0xFE and 0xA1 <= byte <= 0xFE:
        char = index[(lead - 0xA1) * 94 + byte - 0xA1]
        if char is not None:
            return char, pos
    return None, pos - 1 if byte < 0x80 else pos


def euc_jp_reference(data: bytes, errors: str = "strict") -> str:
    """The Standard's EUC-JP decoder, a step at a time: for bytes with 0x8FA2B7, and the
    tests."""
    out, pos, size = [], 0, len(data)
    while pos < size:
        char, end = _euc_jp_step(data, pos)
        if char is None:
            char, end = _fail(errors, EUC_JP, data, pos, end)
        out.append(char)
        pos = end
    return "".join(out)


def _euc_jp_handler(errors: str) -> str:
    """An error handler for Python's euc_jp: the Standard's step where Python's fails."""
    name = f"whatwg-euc-jp-{errors}"
    try:
        codecs.lookup_error(name)
    except LookupError:

        def handler(error: UnicodeError) -> tuple[str, int]:
            assert isinstance(error, UnicodeDecodeError)
            char, end = _euc_jp_step(error.object, error.start)
            if char is None:
                return _fail(errors, EUC_JP, error.object, error.start, end)
            return char, end

        codecs.register_error(name, handler)
    return name


def _euc_jp(data: bytes, errors: str) -> str:
    if b"\x8f\xa2\xb7" in data:  # Python's JIS X 0212 0x2237 is "~", the Standard's U+FF5E
        return euc_jp_reference(data, errors)
    text = codecs.decode(data, "euc_jp", _euc_jp_handler(errors))
    return _EUC_JP_SYMBOL.sub(lambda match: _EUC_JP_SYMBOLS[match[0]], text)


class _SyncDecoder(codecs.IncrementalDecoder):
    """An incremental decoder that holds back the bytes after the last one that leaves the
    decoder with no lead pending (any byte no lead can be), and decodes the rest at once."""

    _leads: bytes
    _decode: Callable[[bytes, str], str]

    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self._pending = b""

    def decode(self, data: bytes, final: bool = False) -> str:  # type: ignore[override]
        data = self._pending + bytes(data)
        cut = len(data) if final else len(data.rstrip(self._leads))
        self._pending = data[cut:]
        return type(self)._decode(data[:cut], self.errors)

    def reset(self) -> None:
        self._pending = b""

    def getstate(self) -> tuple[bytes, int]:
        return self._pending, 0

    def setstate(self, state: tuple[bytes, int]) -> None:
        self._pending = state[0]


class _EucJpDecoder(_SyncDecoder):
    _leads = bytes([0x8E, 0x8F, *range(0xA1, 0xFF)])
    _decode = staticmethod(_euc_jp)


# -- ISO-2022-JP (14.2.1) -------------------------------------------------------------------------

_ASCII, _ROMAN, _KATAKANA, _LEAD, _TRAIL, _ESCAPE_START, _ESCAPE = range(7)
# The escape sequences' last two bytes, and the state each switches to.
_ESCAPES = {b"(B": _ASCII, b"(J": _ROMAN, b"(I": _KATAKANA, b"$@": _LEAD, b"$B": _LEAD}
_END = -1  # end of queue
_ASCII_RUN = re.compile(rb"[\x00-\x0d\x10-\x1a\x1c-\x7f]+")
_PAIRS = re.compile(rb"(?:[\x21-\x7e]{2})+")
_HIGH = bytes((byte | 0x80) for byte in range(256))


class _Iso2022JpDecoder(codecs.IncrementalDecoder):
    """The Standard's ISO-2022-JP decoder (rare on the web: email's), a byte at a time but
    for runs of ASCII and of JIS X 0208 pairs. A sequence a chunk ends inside of (a lead, an
    escape) is held back for the next, so that each error is of bytes of the input given."""

    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self.reset()

    def reset(self) -> None:
        self._state = self._output_state = _ASCII
        self._lead = 0
        self._output_flag = False
        self._held = b""
        self._start = 0  # where the sequence begins that the decoder is inside of

    def getstate(self) -> tuple[bytes, int]:
        flags = self._state << 12 | self._output_state << 9 | self._lead << 1
        return self._held, flags | self._output_flag

    def setstate(self, state: tuple[bytes, int]) -> None:
        self._held, flags = state
        self._state, self._output_state = flags >> 12, (flags >> 9) & 7
        self._lead, self._output_flag = (flags >> 1) & 0xFF, bool(flags & 1)

    def decode(self, data: bytes, final: bool = False) -> str:  # type: ignore[override]
        data, self._held = self._held + bytes(data), b""
        out: list[str] = []
        pos, size = 0, len(data)
        back: list[tuple[int, int]] = []  # bytes given back ("prepend") and where they are
        while True:
            if back:
                byte, at = back.pop()
            elif pos < size:
                run = self._run(data, pos)
                if run is not None:
                    out.append(run[0])
                    pos = run[1]
                    continue
                byte, at, pos = data[pos], pos, pos + 1
            elif final:
                byte, at, final = _END, size, False
            else:
                if self._state in (_TRAIL, _ESCAPE_START, _ESCAPE):
                    # Read again with the next bytes, from the state it began in (no output).
                    self._held, self._state, self._lead = data[self._start :], self._output_state, 0
                return "".join(out)
            result = self._handle(byte, at, back)
            if isinstance(result, str):
                out.append(result)
            elif result is not None:
                out.append(_fail(self.errors, ISO_2022_JP, data, *result)[0])

    def _run(self, data: bytes, pos: int) -> tuple[str, int] | None:
        """What the handler gives for the bytes from ``pos`` on, decoded at once where it can
        be (a run of ASCII's bytes, of jis0208's pairs, an escape sequence that switches),
        and where they end; ``None`` where a byte at a time must go."""
        state = self._state
        if data[pos] == 0x1B and state in (_ASCII, _ROMAN, _KATAKANA, _LEAD):
            new = _ESCAPES.get(data[pos + 1 : pos + 3])
            if new is None:
                return None
            self._state = self._output_state = new
            output, self._output_flag = self._output_flag, True
            text = _fail(self.errors, ISO_2022_JP, data, pos, pos + 3)[0] if output else ""
            return text, pos + 3
        if state == _ASCII:
            run = _ASCII_RUN.match(data, pos)
            text = run and run[0].decode("ascii")
        elif state == _LEAD:
            run = _PAIRS.match(data, pos)
            text = run and self._pairs(data, pos, run.end())
        else:
            return None
        if not run:
            return None
        self._output_flag = False
        return text, run.end()  # type: ignore[return-value]

    def _pairs(self, data: bytes, start: int, end: int) -> str:
        """Index jis0208's characters for the pairs of ``data[start:end]`` (bytes 0x21-0x7E),
        one for each: read as EUC-JP's bytes, whose pointers are the same; where it has none,
        the ``errors`` handler's answer for the pair's own bytes (U+FFFD is no index's)."""
        text = _euc_jp(data[start:end].translate(_HIGH), "replace")
        if self.errors == "replace" or "\ufffd" not in text:
            return text
        return "".join(
            _fail(self.errors, ISO_2022_JP, data, start + 2 * i, start + 2 * i + 2)[0]
            if char == "\ufffd"
            else char
            for i, char in enumerate(text)
        )

    def _handle(
        self, byte: int, at: int, back: list[tuple[int, int]]
    ) -> str | tuple[int, int] | None:
        """The handler for ``byte`` (at ``at``): a character, an error (where its bytes begin
        and end), or ``None`` (continue, finished)."""
        state, start = self._state, self._start
        if state in (_ASCII, _ROMAN, _KATAKANA, _LEAD):
            if byte == 0x1B:
                self._state, self._start = _ESCAPE_START, at
                return None
            if byte == _END:
                return None
            self._output_flag = False
            if state == _ASCII and byte < 0x80 and byte not in (0x0E, 0x0F):
                return chr(byte)
            if state == _ROMAN and byte < 0x80 and byte not in (0x0E, 0x0F):
                return {0x5C: "\u00a5", 0x7E: "\u203e"}.get(byte, chr(byte))
            if state == _KATAKANA and 0x21 <= byte <= 0x5F:
                return chr(0xFF61 - 0x21 + byte)
            if state == _LEAD and 0x21 <= byte <= 0x7E:
                self._lead, self._state, self._start = byte, _TRAIL, at
                return None
            return at, at + 1
        if state == _TRAIL:
            if byte == 0x1B:
                self._state, self._start = _ESCAPE_START, at
                return start, at
            self._state = _LEAD
            if 0x21 <= byte <= 0x7E:
                char = _jis0208()[(self._lead - 0x21) * 94 + byte - 0x21]
                return (start, at + 1) if char is None else char
            if byte == _END:
                back.append((byte, at))
                return start, at
            return start, at + 1
        if state == _ESCAPE_START:
            if byte in (0x24, 0x28):
                self._lead, self._state = byte, _ESCAPE
                return None
            back.append((byte, at))
            self._output_flag, self._state = False, self._output_state
            return start, start + 1
        lead, self._lead = self._lead, 0  # _ESCAPE
        new = _ESCAPES.get(bytes((lead, byte))) if byte != _END else None
        if new is not None:
            self._state = self._output_state = new
            output, self._output_flag = self._output_flag, True
            return (start, at + 1) if output else None
        back += ((byte, at), (lead, start + 1))
        self._output_flag, self._state = False, self._output_state
        return start, start + 1


def iso_2022_jp(data: bytes, errors: str = "strict") -> str:
    return _Iso2022JpDecoder(errors).decode(data, final=True)


# -- Shift_JIS (14.3.1) ---------------------------------------------------------------------------

# cp932's characters for the lone bytes 0xA0, 0xFD, 0xFE, 0xFF: errors in the Standard.
_CP932_LONE = ("\uf8f0", "\uf8f1", "\uf8f2", "\uf8f3")


def _shift_jis_step(data: bytes, pos: int) -> tuple[str | None, int]:
    """One turn of the Shift_JIS decoder from its initial state at ``pos``."""
    byte = data[pos]
    if byte <= 0x80:
        return chr(byte), pos + 1
    if 0xA1 <= byte <= 0xDF:
        return chr(0xFF61 - 0xA1 + byte), pos + 1
    if not (0x81 <= byte <= 0x9F or 0xE0 <= byte <= 0xFC):
        return None, pos + 1
    if pos + 1 >= len(data):
        return None, pos + 1
    lead, byte = byte, data[pos + 1]
    if 0x40 <= byte <= 0x7E or 0x80 <= byte <= 0xFC:
        offset = 0x81 if lead < 0xA0 else 0xC1
        pointer = (lead - offset) * 188 + byte - (0x40 if byte < 0x7F else 0x41)
        if 8836 <= pointer <= 10715:
            return chr(0xE000 - 8836 + pointer), pos + 2
        char = _or_none(data[pos : pos + 2], "cp932")
        if char is not None:
            return char, pos + 2
    return None, pos + 1 if byte < 0x80 else pos + 2


def shift_jis_reference(data: bytes, errors: str = "strict") -> str:
    """The Standard's Shift_JIS decoder, a step at a time: where cp932's output has a lone
    byte's private-use character, and the tests."""
    out, pos, size = [], 0, len(data)
    while pos < size:
        char, end = _shift_jis_step(data, pos)
        if char is None:
            char, end = _fail(errors, SHIFT_JIS, data, pos, end)
        out.append(char)
        pos = end
    return "".join(out)


def _shift_jis_handler(errors: str) -> str:
    name = f"whatwg-shift-jis-{errors}"
    try:
        codecs.lookup_error(name)
    except LookupError:

        def handler(error: UnicodeError) -> tuple[str, int]:
            assert isinstance(error, UnicodeDecodeError)
            char, end = _shift_jis_step(error.object, error.start)
            if char is None:
                return _fail(errors, SHIFT_JIS, error.object, error.start, end)
            return char, end

        codecs.register_error(name, handler)
    return name


def _shift_jis(data: bytes, errors: str) -> str:
    try:
        text = codecs.decode(data, "cp932", _shift_jis_handler(errors))
    except UnicodeDecodeError:
        # A strict error: the Standard's first may be a lone byte cp932 decoded before it.
        return shift_jis_reference(data, errors)
    if any(char in text for char in _CP932_LONE):
        return shift_jis_reference(data, errors)
    return text


class _ShiftJisDecoder(_SyncDecoder):
    _leads = bytes([*range(0x81, 0xA0), *range(0xE0, 0xFD)])
    _decode = staticmethod(_shift_jis)


# -- gb18030 (12.2.1) ----------------------------------------------------------------------------

# Python's gb18030's characters that the Standard's decoder gives otherwise for the same bytes:
# 0xA8BC and 0x8135F437 (swapped since the Standard followed GB18030-2005), 0xA3A0 (index
# gb18030's pointer 6555 is U+3000; no byte sequence decodes to U+E5E5 there), and the two-byte
# sequences GB18030-2022 moved out of the private use area (0xA6D9-0xA6DF, 0xA6EC, 0xA6ED,
# 0xA6F3; 0xFE59, 0xFE61, 0xFE66, 0xFE67, 0xFE6D, 0xFE7E, 0xFE90, 0xFEA0), whose private-use
# characters no byte sequence decodes to now.
_GB18030_CHANGED = {
    "\ue7c7": "\u1e3f",
    "\u1e3f": "\ue7c7",
    "\ue5e5": "\u3000",
    **dict(
        zip(
            map(chr, range(0xE78D, 0xE797)),
            "\ufe10\ufe12\ufe11\ufe13\ufe14\ufe15\ufe16\ufe17\ufe18\ufe19",
            strict=True,
        )
    ),
    **dict(
        zip(
            "\ue81e\ue826\ue82b\ue82c\ue832\ue843\ue854\ue864",
            map(chr, range(0x9FB4, 0x9FBC)),
            strict=True,
        )
    ),
}
_GB18030_CHANGE = re.compile(f"[{''.join(_GB18030_CHANGED)}]")


def _gb18030_step(data: bytes, pos: int) -> tuple[str | None, int]:
    """One turn of the gb18030 decoder from its initial state at ``pos``."""
    byte, size = data[pos], len(data)
    if byte < 0x80:
        return chr(byte), pos + 1
    if byte == 0x80:
        return "\u20ac", pos + 1
    if byte == 0xFF or pos + 1 >= size:
        return None, pos + 1
    second = data[pos + 1]
    if 0x30 <= second <= 0x39:  # a four-byte sequence, or an error that gives back its bytes
        if pos + 2 >= size:
            return None, pos + 2  # end of queue: one error for the two
        if not 0x81 <= data[pos + 2] <= 0xFE:
            return None, pos + 1
        if pos + 3 >= size:
            return None, pos + 3  # end of queue: one error for the three
        if not 0x30 <= data[pos + 3] <= 0x39:
            return None, pos + 1
        return _gb18030_python(data[pos : pos + 4]), pos + 4
    if 0x40 <= second <= 0x7E or 0x80 <= second <= 0xFE:
        char = _gb18030_python(data[pos : pos + 2])
        if char is not None:
            return char, pos + 2
    return None, pos + 1 if second < 0x80 else pos + 2


def _gb18030_python(data: bytes) -> str | None:
    """Index gb18030 (two bytes) or its ranges (four): Python's, with the Standard's changes."""
    char = _or_none(data, "gb18030")
    return None if char is None else _GB18030_CHANGED.get(char, char)


def gb18030_reference(data: bytes, errors: str = "strict") -> str:
    """The Standard's gb18030 decoder, a step at a time: for the tests."""
    out, pos, size = [], 0, len(data)
    while pos < size:
        char, end = _gb18030_step(data, pos)
        if char is None:
            char, end = _fail(errors, GB18030, data, pos, end)
        out.append(char)
        pos = end
    return "".join(out)


def _gb18030_handler(errors: str) -> str:
    name = f"whatwg-gb18030-{errors}"
    try:
        codecs.lookup_error(name)
    except LookupError:

        def handler(error: UnicodeError) -> tuple[str, int]:
            assert isinstance(error, UnicodeDecodeError)
            char, end = _gb18030_step(error.object, error.start)
            if char is None:
                return _fail(errors, GB18030, error.object, error.start, end)
            return char, end

        codecs.register_error(name, handler)
    return name


def _gb18030(data: bytes, errors: str) -> str:
    text = codecs.decode(data, "gb18030", _gb18030_handler(errors))
    return _GB18030_CHANGE.sub(lambda match: _GB18030_CHANGED[match[0]], text)


class _Gb18030Decoder(_SyncDecoder):
    # ASCII bytes but digits leave no sequence pending (a digit may be a four-byte's second)
    _leads = bytes([*range(0x30, 0x3A), *range(0x80, 0x100)])
    _decode = staticmethod(_gb18030)


def _codec(
    name: str, decode: Callable[[bytes, str], str], decoder: type, encoding: str
) -> codecs.CodecInfo:
    """A codec decoding by ``decode`` and encoding as Python's ``encoding`` does."""
    python = codecs.lookup(encoding)
    return codecs.CodecInfo(
        name=name,
        encode=python.encode,
        decode=lambda data, errors="strict": (decode(bytes(data), errors), len(data)),
        incrementalencoder=python.incrementalencoder,
        incrementaldecoder=decoder,
    )


CODECS = {
    "whatwg_euc_jp": _codec(EUC_JP, _euc_jp, _EucJpDecoder, "euc_jp"),
    "whatwg_iso_2022_jp": _codec(ISO_2022_JP, iso_2022_jp, _Iso2022JpDecoder, "iso2022_jp"),
    "whatwg_shift_jis": _codec(SHIFT_JIS, _shift_jis, _ShiftJisDecoder, "cp932"),
    "whatwg_gb18030": _codec(GB18030, _gb18030, _Gb18030Decoder, "gb18030"),
}
