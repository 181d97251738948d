"""Bytes to text to tree: the one way the crawler decodes and parses a page.

Every reader of a page (the spider, hence the near-duplicate and index pipelines that get its
items, and ``scrapy neardup``) goes through :func:`parse_document`, so they all see the same
text. Two paths used to exist: libxml2 decoding the bytes itself (sniffing ``<meta charset>``
when no encoding was given) and Python decoding them. They disagree on real pages: libxml2
takes ``iso-8859-1`` literally where browsers and Scrapy read windows-1252 (curly quotes and
the euro sign become control characters), and stops decoding a ``gb2312`` page at the first
GBK character, dropping the rest of its text.

So decoding follows what browsers do (:mod:`crawler.content.encoding`, the WHATWG encoding
sniffing algorithm with the Encoding Standard's labels): a byte order mark first, then the given
encoding (the ``Content-Type`` charset), then the ``<meta>`` the prescan finds, then detection as
Scrapy detects (ASCII, UTF-8, then ``charset_normalizer``; windows-1252 if all fail); undecodable
bytes become U+FFFD. Not ``response.encoding``: Scrapy's (w3lib's) ``<meta>`` scan is looser than a
browser's. libxml2 then always parses UTF-8 with its own sniffing turned off.
"""

from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes
from lxml import etree
from w3lib.encoding import resolve_encoding, to_unicode

from crawler.content.encoding import (
    declared_encoding,
    exact_codec,
    stylesheet_encoding,
    text_encoding,
)

__all__ = [
    "decode_html",
    "decode_stylesheet",
    "decode_text",
    "page_encoding",
    "parse_document",
    "parse_document_checked",
]

# huge_tree: without it libxml2 silently stops at 256 levels of nesting (broken pages with
# unclosed tags) or a 10 MB text node, and the page loses its links and text. A fixed encoding
# keeps libxml2 from acting on a <meta charset> or an XML declaration in text already decoded.
# A plain etree parser, not lxml.html's: lxml.html looks up a Python element class for every
# element it hands out (a Python call each, ~15 % of parsing and main text on real pages), and
# nothing here needs HtmlElement's methods.
_PARSER = etree.HTMLParser(encoding="utf-8", huge_tree=True)


def decode_html(body: bytes | str, encoding: str | None = None) -> str:
    """The text of an HTML page, decoded as a browser decodes it.

    ``encoding`` is what the transport said (the ``Content-Type`` charset:
    :func:`crawler.content.encoding.transport_encoding`, an operator's ``--encoding``), not
    ``response.encoding``; without it the page's own declaration or detection decides. An
    encoding name nobody knows never raises: the page's declaration, then detection, decide.
    """
    if isinstance(body, str):
        return body
    return _decoded(body, page_encoding(body, encoding))


def decode_text(body: bytes, encoding: str | None = None) -> str:
    """The text of a body that is not HTML (``text/plain``) as a browser decodes it: by its byte
    order mark, else ``encoding`` (the ``Content-Type`` charset), else guessed as a page is;
    never by a ``<meta>`` it shows (Scrapy's ``response.text`` reads one even there)."""
    return _decoded(body, text_encoding(body, encoding) or _detect(body))


def decode_stylesheet(body: bytes, encoding: str | None = None) -> str:
    """The text of a stylesheet: by its byte order mark, else ``encoding`` (the
    ``Content-Type`` charset), else its ``@charset`` (CSS Syntax 3.2), else guessed as a page
    is."""
    return _decoded(body, stylesheet_encoding(body, encoding) or _detect(body))


def _decoded(body: bytes, codec: str) -> str:
    """``body`` in ``codec``, its byte order mark left out, bad bytes as U+FFFD."""
    return to_unicode(body.removeprefix(_BOMS.get(codec, b"")), codec)


# The byte order mark a page in each Unicode encoding may begin with: not text.
_BOMS = {
    "utf-8": codecs.BOM_UTF8,
    "utf-16-le": codecs.BOM_UTF16_LE,
    "utf-16-be": codecs.BOM_UTF16_BE,
}


def page_encoding(body: bytes, encoding: str | None = None) -> str:
    """The codec :func:`decode_html` decodes ``body`` with: the declared one
    (:func:`crawler.content.encoding.declared_encoding`), else Scrapy's guess."""
    return declared_encoding(body, encoding) or _detect(body)


def _detect(body: bytes) -> str:
    """Scrapy's guess for a page that declares nothing (``TextResponse._auto_detect_fun``):
    ASCII (read as windows-1252, as its label says), UTF-8 if it decodes, else
    ``charset_normalizer``'s best; windows-1252, a browser's default, if that has none.

    The bytes may end inside a character: ``PAGE_MAX_HTML`` cuts a long page at a byte count,
    and a UTF-8 page cut so is still UTF-8, not windows-1252 for want of its last bytes."""
    for name in ("ascii", "utf-8"):
        try:
            codecs.getincrementaldecoder(name)().decode(body, final=False)
        except UnicodeError:
            continue
        return exact_codec(resolve_encoding(name) or name)
    match = from_bytes(body).best()
    return exact_codec((resolve_encoding(match.encoding) if match else None) or "cp1252")


def parse_document(body: bytes | str, encoding: str | None = None) -> etree._Element:
    """The lxml tree (its ``<html>`` root) of a page decoded by :func:`decode_html`.

    Raises ``lxml.etree.ParserError`` or ``ValueError`` on input lxml cannot make a document of
    (empty after decoding, or only whitespace).
    """
    return _document(decode_html(body, encoding))


def _document(text: str) -> etree._Element:
    """``lxml.html.document_fromstring`` without lxml.html's element classes."""
    root = etree.fromstring(text.encode("utf-8", "replace"), parser=_PARSER)
    if root is None:
        raise etree.ParserError("Document is empty")
    return root


# Every tag but those a flat page still needs: links, <base>, <title>, <meta>, and the
# elements whose content must stay hidden (scripts, styles) or that frame the document.
_NESTING_TAG = re.compile(
    r"</?(?!(?:a|area|base|title|meta|script|style|noscript|template|head|body|html)\b)"
    r"[a-zA-Z][^>]*>"
)


def parse_document_checked(
    body: bytes | str, encoding: str | None = None
) -> tuple[etree._Element, bool]:
    """:func:`parse_document`, and whether the page had to be flattened.

    libxml2 gives up at 2,048 levels of nesting even with ``huge_tree`` (broken pages with
    thousands of unclosed ``<div>``/``<font>`` tags, or a hostile page), and everything below
    that level is lost: the page kept no text and not one link. Such a page is parsed again
    with every nesting tag but links (and ``base``, ``title``, ``meta``, scripts and styles)
    replaced by a space: its links, anchor texts and text survive, its layout does not (the
    main text is then the whole text, which is all a page like that has to offer).
    """
    text = decode_html(body, encoding)
    root = _document(text)
    error = _PARSER.error_log.last_error
    if error is None or error.type_name != "ERR_RESOURCE_LIMIT":
        return root, False
    return _document(_NESTING_TAG.sub(" ", text)), True
