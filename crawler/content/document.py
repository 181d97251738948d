"""Bytes to text to tree: the one way the crawler decodes and parses a page.

Every reader of a page (the spider, hence the near-duplicate and index pipelines that get its
items, and ``scrapy neardup``) goes through :func:`parse_document`, so they all see the same
text. Two paths used to exist: libxml2 decoding the bytes itself (sniffing ``<meta charset>``
when no encoding was given) and Python decoding them. They disagree on real pages: libxml2
takes ``iso-8859-1`` literally where browsers and Scrapy read windows-1252 (curly quotes and
the euro sign become control characters), and stops decoding a ``gb2312`` page at the first
GBK character, dropping the rest of its text.

So decoding follows Scrapy's :class:`~scrapy.http.TextResponse`, which is what browsers do
(WHATWG encoding labels): a byte order mark first, then the given encoding (the HTTP header's,
or ``response.encoding``), then ``<meta charset>``, then detection; undecodable bytes become
U+FFFD. libxml2 then always parses UTF-8 with its own sniffing turned off.
"""

from __future__ import annotations

import lxml.html
from scrapy.http import TextResponse

__all__ = ["decode_html", "parse_document"]

# Any absolute URL: TextResponse needs one, and decoding never looks at it.
_NO_URL = "data:,"
# huge_tree: without it libxml2 silently stops at 256 levels of nesting (broken pages with
# unclosed tags) or a 10 MB text node, and the page loses its links and text. A fixed encoding
# keeps libxml2 from acting on a <meta charset> or an XML declaration in text already decoded.
_PARSER = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)


def decode_html(body: bytes | str, encoding: str | None = None) -> str:
    """The text of an HTML page, decoded exactly as Scrapy decodes ``response.text``.

    ``encoding`` is what the transport said (``response.encoding``, a ``Content-Type`` charset,
    an operator's ``--encoding``); without it the page's own declaration or detection decides.
    An encoding name nobody knows never raises: the page's declaration, then UTF-8, decide.
    """
    if isinstance(body, str):
        return body
    return TextResponse(_NO_URL, body=body, encoding=encoding).text


def parse_document(body: bytes | str, encoding: str | None = None) -> lxml.html.HtmlElement:
    """The lxml tree of a page decoded by :func:`decode_html`.

    Raises ``lxml.etree.ParserError`` or ``ValueError`` on input lxml cannot make a document of
    (empty after decoding, or only whitespace).
    """
    return lxml.html.document_fromstring(
        decode_html(body, encoding).encode("utf-8", "replace"), parser=_PARSER
    )
