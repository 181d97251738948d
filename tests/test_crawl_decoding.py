"""Every reader on the crawl path decodes a page the crawler's way, not Scrapy's.

The crawler decodes a page as a browser does (``crawler.content.document``: byte order mark,
``Content-Type`` charset, the WHATWG prescan, a guess); Scrapy's ``response.text``,
``response.css`` and ``response.encoding`` decode through w3lib, which also reads a ``<meta>``
in a text that is no HTML and honours ``<meta charset="utf-16">``, and parsel given a charset
decodes with it alone. Each test is a response the two decode differently, read by one of the
spider's readers: a policy's content selector, a site's ``[fields]``, a plain-text document,
a stylesheet's references.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.test import get_crawler

from crawler.content.encoding import stylesheet_encoding
from crawler.meta import POLICY_META
from crawler.sites import load_site_config
from crawler.spiders.requisites import nested_requisites
from crawler.spiders.site import SiteSpider
from crawler.spiders.site_items import PageItem


def _spider(tmp_path: Path, toml: str) -> SiteSpider:
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\n' + toml, encoding="utf-8")
    cls = SiteSpider.for_site(load_site_config(path))
    return cls.from_crawler(get_crawler(cls))


def _item(spider: SiteSpider, response: TextResponse) -> PageItem:
    items = [out for out in spider.parse(response) if isinstance(out, PageItem)]
    assert len(items) == 1
    return items[0]


def _response(
    cls: type[TextResponse], url: str, body: bytes, content_type: str, **meta: Any
) -> TextResponse:
    return cls(
        url,
        body=body,
        headers={"Content-Type": content_type},
        request=Request(url, meta=meta),
        status=200,
    )


# A page in UTF-8 that says "utf-16" in its <meta> (a page saved by an editor that wrote what
# it once was): the prescan reads it as UTF-8 (HTML 13.2.3.2: a <meta> read as ASCII cannot be
# UTF-16), w3lib takes it at its word and response.css sees CJK characters, not one <div>.
UTF16_META = (
    '<html><head><meta charset="utf-16"><title>Blog</title></head>'
    '<body><div class="blog"><p>Notes from the café.</p></div></body></html>'
).encode()


def test_a_policy_selector_sees_the_page_the_crawler_decoded(tmp_path: Path) -> None:
    spider = _spider(
        tmp_path,
        '[policies.docs]\nswitch_to = "news"\nswitch_selector = "div.blog"\n[policies.news]\n',
    )
    response = _response(
        HtmlResponse, "http://a.test/", UTF16_META, "text/html", **{POLICY_META: "docs"}
    )
    assert not response.css("div.blog")  # Scrapy's decoding: no such element
    item = _item(spider, response)
    assert item["title"] == "Blog"
    assert response.meta[POLICY_META].partition("@")[0] == "news"
    assert spider.crawler.stats.get_value("policies/switched") == 1


def test_a_field_reads_a_page_declared_only_by_its_meta(tmp_path: Path) -> None:
    """No charset in the header, a ``<meta>`` that says windows-1251: the field is the text
    the page's title is, not UTF-8's replacement characters."""
    spider = _spider(tmp_path, '[fields]\nheading = "h1::text"\n')
    body = '<meta charset="windows-1251"><title>Привет</title><h1>Привет, мир</h1>'.encode(
        "cp1251"
    )
    item = _item(spider, _response(HtmlResponse, "http://a.test/", body, "text/html"))
    assert item["title"] == "Привет"
    assert item["heading"] == "Привет, мир"


def test_a_field_reads_a_page_whose_bom_and_header_disagree(tmp_path: Path) -> None:
    """A UTF-8 byte order mark beats the header's charset (HTML 13.2.3.1), for the fields as
    for the title."""
    spider = _spider(tmp_path, '[fields]\nheading = "h1::text"\n')
    body = "\ufeff<title>Žluťoučký kůň</title><h1>Žluťoučký kůň</h1>".encode()
    response = _response(
        HtmlResponse, "http://a.test/", body, "text/html; charset=iso-8859-2"
    )
    item = _item(spider, response)
    assert item["title"] == "Žluťoučký kůň"
    assert item["heading"] == "Žluťoučký kůň"


def test_a_plain_text_document_showing_a_meta_is_not_decoded_by_it(tmp_path: Path) -> None:
    """A text/plain file about HTML, in UTF-8 without a charset: the ``<meta>`` it shows is
    text, not a declaration (w3lib's response.encoding takes it: KOI8-R)."""
    spider = _spider(tmp_path, "")
    text = 'Naïve café notes\nWrite <meta charset="koi8-r"> in a KOI8-R page.\n'
    response = _response(TextResponse, "http://a.test/notes.txt", text.encode(), "text/plain")
    assert response.encoding == "koi8-r"  # Scrapy's decoding
    item = _item(spider, response)
    assert item["title"] == "Naïve café notes"
    assert item["text"].split() == text.split()


def test_a_stylesheet_is_decoded_by_its_charset_rule() -> None:
    """A windows-1252 stylesheet whose bytes are also valid UTF-8 (``Ã©`` is C3 A9): its
    ``@charset`` decides (CSS Syntax 3.2), where response.encoding guesses UTF-8 first."""
    css = '@charset "windows-1252";\nbody { background: url("Ã©t.png") }\n'.encode("cp1252")
    response = _response(TextResponse, "http://a.test/s.css", css, "text/css")
    assert response.encoding == "utf-8"  # Scrapy's decoding
    urls, over = nested_requisites(response, 10)
    assert (urls, over) == (["http://a.test/Ã©t.png"], 0)


@pytest.mark.parametrize(
    ("body", "transport", "codec"),
    [
        (b'@charset "koi8-r";\na{}', None, "koi8-r"),
        (b'@charset "utf-16";\na{}', None, "utf-8"),  # its bytes were read as ASCII
        (b'@charset "koi8-r";\na{}', "iso-8859-2", "iso8859-2"),  # the header first
        (b'\xef\xbb\xbf@charset "koi8-r";\na{}', "iso-8859-2", "utf-8"),  # the BOM before it
        (b' @charset "koi8-r";\na{}', None, None),  # not where the stylesheet begins
        (b"@charset 'koi8-r';\na{}", None, None),  # byte for byte: double quotes
        (b'@charset  "koi8-r";\na{}', None, None),  # one space
        (b'@charset "bogus";\na{}', None, None),
        (b'/* x */ @charset "koi8-r";', None, None),
    ],
)
def test_the_encoding_a_stylesheet_declares(
    body: bytes, transport: str | None, codec: str | None
) -> None:
    """CSS Syntax 3.2, "determine the fallback encoding" (None: the caller guesses)."""
    assert stylesheet_encoding(body, transport) == codec


# Python codecs that are no character encoding: transforms (base64, zlib...), which str cannot
# be decoded with at all, the "undefined" codec, which fails every decoding, and escapes that
# hide markup in ASCII as UTF-7 does. A browser ignores such a label; a reader that took it
# raised (LookupError, UnicodeError) and lost the page.
NOT_CHARSETS = ["base64", "undefined", "rot13", "hex", "zlib", "unicode-escape", "idna",
                "punycode", "raw-unicode-escape", "uu"]


@pytest.mark.parametrize("label", NOT_CHARSETS)
def test_a_codec_that_is_no_charset_declares_nothing(tmp_path: Path, label: str) -> None:
    from crawler.content.document import decode_html, decode_text
    from crawler.content.encoding import label_codec, transport_encoding
    from crawler.middlewares.redirect import meta_refresh

    assert label_codec(label) is None
    assert transport_encoding(f"text/html; charset={label}") is None
    page = ('<html><head><meta http-equiv="refresh" content="0; url=/next">'
            "<title>Caf\u00e9</title></head><body><p>x</p></body></html>").encode()
    for declared in (f"text/html; charset={label}", "text/html"):
        body = page if "charset" in declared else page.replace(
            b"<head>", f'<head><meta charset="{label}">'.encode())
        assert decode_html(body, transport_encoding(declared)).count("Caf\u00e9") == 1
        assert "Caf\u00e9" in decode_text(body, transport_encoding(declared))
        response = _response(HtmlResponse, "http://example.com/a", body, declared)
        assert meta_refresh(response, ("noscript",)) == (0, "http://example.com/next")
        spider = _spider(tmp_path, "")
        assert _item(spider, response)["title"] == "Caf\u00e9"
