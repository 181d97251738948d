"""Codecs for the Encoding Standard's encodings that Python decodes otherwise, or not at all.

Registered with :mod:`codecs` on import (:mod:`crawler.content.encoding` imports this module),
under names Python does not know, and given by its label lookup:

* ``x-user-defined``: bytes 0x00-0x7F are ASCII, 0x80-0xFF the private-use U+F780-U+F7FF.
* ``replacement`` (the labels ``iso-2022-kr``, ``hz-gb-2312``, ``iso-2022-cn``...): any input
  decodes to one U+FFFD, none to nothing. Python's codecs for those read ASCII bytes as other
  characters and other bytes as ASCII, so markup a browser never sees (WHATWG's reason; w3lib
  refuses UTF-7 for the same one).
* The single-byte encodings whose Python codec leaves bytes undefined (U+FFFD) that the
  Standard's index maps: windows-874 and windows-1250 to -1258 map them among 0x80-0x9F to the
  C1 control of the same number (0x81 is U+0081), windows-1255's 0xCA is U+05BA; and KOI8-U,
  the Standard's being KOI8-RU: 0xAE is U+045E, 0xBE U+040E, not box drawings
  (web-platform-tests ``encoding/single-byte-decoder.any.js``). Their names are
  ``whatwg-`` and the encoding's (Python's own names, ``windows-1252``, name its codec).
* gb18030 (and GBK), EUC-JP, ISO-2022-JP and Shift_JIS: :mod:`crawler.content.webcodecs_cjk`.
"""

from __future__ import annotations

import codecs

from crawler.content.webcodecs_cjk import CODECS as MULTI_BYTE

__all__ = ["EXACT", "USER_DEFINED"]

USER_DEFINED = "x-user-defined"
_USER_DEFINED = "".join(map(chr, range(0x80))) + "".join(map(chr, range(0xF780, 0xF800)))

# Python's single-byte codec to the one that decodes as the Standard does, where they differ.
_SINGLE_BYTE = {
    **{f"cp{n}": f"whatwg-windows-{n}" for n in (874, 1250, 1251, 1252, 1253, 1254, 1255)},
    **{f"cp{n}": f"whatwg-windows-{n}" for n in (1257, 1258)},
    "koi8-u": "whatwg-koi8-u",
}
# Python's codec to the one that decodes as the Standard does, where they differ.
EXACT = {
    **_SINGLE_BYTE,
    "gb18030": "whatwg-gb18030",
    # The Standard's multi-byte decoders (crawler.content.webcodecs_cjk).
    "euc_jp": "whatwg-euc-jp",
    "iso2022_jp": "whatwg-iso-2022-jp",
    "cp932": "whatwg-shift-jis",
}
# Bytes the Standard maps where Python's codec does not, or to another character.
_PATCHES = {"cp1255": {0xCA: "\u05ba"}, "koi8-u": {0xAE: "\u045e", 0xBE: "\u040e"}}


def _single_byte(codec: str) -> str:
    """The Standard's decoding table of a single-byte encoding, from Python's ``codec``:
    U+FFFE where the byte is no character."""
    table = []
    for byte in range(256):
        try:
            char = bytes([byte]).decode(codec)
        except UnicodeDecodeError:
            windows = codec.startswith("cp") and 0x80 <= byte <= 0x9F
            char = chr(byte) if windows else "\ufffe"
        table.append(_PATCHES.get(codec, {}).get(byte, char))
    return "".join(table)


def _charmap(name: str, table: str) -> codecs.CodecInfo:
    """A codec decoding by ``table`` (a character per byte) and encoding by its inverse."""
    encoding_map = codecs.charmap_build(table)

    class Encoder(codecs.IncrementalEncoder):
        def encode(self, text: str, final: bool = False) -> bytes:
            return codecs.charmap_encode(text, self.errors, encoding_map)[0]

    class Decoder(codecs.IncrementalDecoder):
        def decode(self, data: bytes, final: bool = False) -> str:  # type: ignore[override]
            return codecs.charmap_decode(data, self.errors, table)[0]

    return codecs.CodecInfo(
        name=name,
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, encoding_map),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, table),
        incrementalencoder=Encoder,
        incrementaldecoder=Decoder,
    )


def _replaced(data: bytes, errors: str) -> str:
    """The replacement decoder's output for ``data``: one decoding error, whatever its length
    (U+FFFD with ``errors="replace"``), nothing for no bytes."""
    if not data:
        return ""
    error = UnicodeDecodeError("replacement", bytes(data), 0, len(data), "never decodes")
    return codecs.lookup_error(errors)(error)[0]  # type: ignore[return-value]


class _ReplacementDecoder(codecs.IncrementalDecoder):
    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self._done = False

    def decode(self, data: bytes, final: bool = False) -> str:  # type: ignore[override]
        if self._done or not data:
            return ""
        self._done = True
        return _replaced(data, self.errors)

    def reset(self) -> None:
        self._done = False


_CODECS = {
    "x_user_defined": _charmap(USER_DEFINED, _USER_DEFINED),
    # The replacement encoding encodes as UTF-8 (its "output encoding").
    "replacement": codecs.CodecInfo(
        name="replacement",
        encode=codecs.utf_8_encode,
        decode=lambda data, errors="strict": (_replaced(data, errors), len(data)),
        incrementaldecoder=_ReplacementDecoder,
    ),
    **{
        exact.replace("-", "_"): _charmap(exact, _single_byte(codec))
        for codec, exact in _SINGLE_BYTE.items()
    },
    **MULTI_BYTE,
}
codecs.register(lambda name: _CODECS.get(name.replace("-", "_")))
