"""Other projects' sitemap test vectors, as data, run against the crawler's sitemap reading.

Sources (each case names its file and test):

* crawler-commons, ``src/test/java/crawlercommons/sitemaps/``: ``SiteMapParserTest.java``
  (commit ``0519d14``), ``SiteMapParserLimitsTest.java`` (``00a0163``),
  ``SiteMapCrossSubmitValidatorTest.java`` (``037826a``) and ``AbstractSiteMapTest.java``
  (the W3C Datetime and RSS date tests), with the resource files they read
  (``src/test/resources/rss/feed.rss``, ``rss/xmlRss_pubDate.xml``, ``sitemaps/atom.xml``,
  ``sitemaps/sitemap.index.xml``), copied here as they are.
* sitemaps.org, ``protocol.html``: the examples of "Entity escaping", "Sitemap file location"
  and "Sitemap index" (which sitemaps an index may name).

Ours is what a crawl keeps of the file: :func:`crawler.middlewares.sitemaps_reading.read_sitemap`
given the bytes, the ``Content-Type``, the URL the file came from and who named it (a plain
probe unless the case says robots.txt named it), with the limits of the case. A sitemap index's
verdict is the sitemaps it names that are read next; a sitemap's, the pages it lists that the
crawl takes. A case where we deliberately differ carries ours and, in ``differs``, why.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from crawler.middlewares.sitemaps_reading import SitemapReading, read_sitemap
from crawler.sitemaps import GZIP, TEXT, XML, SitemapFile, SitemapLimits, file_kind, parse_lastmod
from crawler.sitemaps.feeds import rfc822_to_w3c

PARSER = "crawler-commons SiteMapParserTest.java"
LIMITS_TEST = "crawler-commons SiteMapParserLimitsTest.java"
CROSS = "crawler-commons SiteMapCrossSubmitValidatorTest.java"
DATES = "crawler-commons AbstractSiteMapTest.java"
PROTOCOL = "sitemaps.org protocol.html"
EX = "http://www.example.com"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
DECL = '<?xml version="1.0" encoding="UTF-8"?>'
LIMITS = SitemapLimits(max_urls=50_000, max_size=52_428_800)


@dataclass(frozen=True)
class Case:
    source: str  # file and test name
    body: bytes
    url: str  # where the file was fetched from
    expected: tuple[str, ...]  # our verdict: the pages (or, for an index, sitemaps) kept
    index: bool = False
    lastmods: dict[str, str | None] = field(default_factory=dict)  # page: W3C date or None
    content_type: str | None = "text/xml"
    origin: str = ""  # the origin whose robots.txt named the file ("": a probe of its own)
    limits: SitemapLimits = LIMITS
    differs: str = ""  # why ours is not the source's verdict


def _urlset(*entries: str) -> bytes:
    return f"{DECL}<urlset {NS}>{''.join(entries)}</urlset>".encode()


def _index(*entries: str) -> bytes:
    return f"{DECL}<sitemapindex {NS}>{''.join(entries)}</sitemapindex>".encode()


# SiteMapParserTest.getXMLSitemapAsBytes: five entries, the last <loc> wrapping a <url> CDATA
SITEMAP_URLS = (
    f"{EX}/",
    f"{EX}/catalog?item=12&amp;desc=vacation_hawaii",
    f"{EX}/catalog?item=73&amp;desc=vacation_new_zealand",
    f"{EX}/catalog?item=74&amp;desc=vacation_newfoundland",
    f"{EX}/catalog?item=83&desc=vacation_usa",
)
XML_SITEMAP = _urlset(
    f"<url>  <loc>{SITEMAP_URLS[0]}</loc>  <lastmod>2005-01-01</lastmod>  <changefreq>monthly"
    "</changefreq>  <priority>0.8</priority></url>",
    f"<url>  <loc>{SITEMAP_URLS[1]}</loc>  <changefreq>weekly</changefreq></url>",
    f"<url>  <loc>{SITEMAP_URLS[2]}</loc>  <lastmod>2004-12-23</lastmod>  <changefreq>weekly"
    "</changefreq></url>",
    f"<url>  <loc>{SITEMAP_URLS[3]}</loc>  <lastmod>2004-12-23T18:00:15+00:00</lastmod>"
    "  <priority>0.3</priority></url>",
    f"<url>  <loc><url><![CDATA[{SITEMAP_URLS[4]}]]></url></loc>  <lastmod>2004-11-23</lastmod>"
    "</url>",
)
XML_PAGES = tuple(url.replace("&amp;", "&") for url in SITEMAP_URLS)
TEXT_SITEMAP = f"{EX}/catalog?item=1\n{EX}/catalog?item=11".encode()

# src/test/resources/sitemaps/sitemap.index.xml: 15 <sitemap> without <loc>
INDEX_CODES = (
    10260,
    2,
    10080,
    10140,
    10340,
    10400,
    10430,
    10440,
    10450,
    10460,
    10470,
    10480,
    10490,
    10550,
    10570,
)
MISSING_LOC_INDEX = (
    f"{DECL}\n<sitemapindex {NS}>\n"
    + "".join(
        f"<sitemap>\nhttps://example.com/sitemap.jss?portalCode={code}&amp;lang=en\n</sitemap>\n"
        for code in INDEX_CODES
    )
    + "</sitemapindex>\n"
).encode()

# src/test/resources/rss/feed.rss
FEED_RSS = b"""
<!-- extended from https://en.wikipedia.org/wiki/RSS#Example -->

<rss version="2.0">
<channel>
 <title>RSS Title</title>
 <description>This is an example of an RSS feed</description>
 <link>https://www.example.com/main.html</link>
 <lastBuildDate>Mon, 06 Sep 2010 00:01:00 +0000 </lastBuildDate>
 <pubDate>Sun, 06 Sep 2009 16:20:00 +0000</pubDate>
 <ttl>1800</ttl>

 <item>
  <title>Example entry</title>
  <description>Here is some text containing an interesting description.</description>
  <link>https://www.example.com/blog/post/1</link>
  <guid isPermaLink="false">7bd204c6-1655-4c27-aeee-53f933c5395f</guid>
  <pubDate>Sun, 06 Sep 2009 16:20:00 +0000</pubDate>
 </item>

 <item>
  <title>&amp;guid&amp; element instead of &amp;link&amp;</title>
  <guid isPermaLink="false">https://www.example.com/guid.html</guid>
 </item>

 <item>
  <title>XML entity in link content</title>
  <link>https://www.example.com/foo?q=a&amp;l=en</link>
 </item>

 <item>
  <title>CDATA</title>
  <link>https://www.example.com/foo<![CDATA[?q=a&l=fr]]></link>
 </item>

</channel>
</rss>"""

# src/test/resources/rss/xmlRss_pubDate.xml
PUBDATES = (
    "Thu, 05 Jan 2017 13:34:51 +0100",
    "Thu, 05 Jan 17 13:34:52 +0100",
    "05 Jan 2017 13:34:53 +0100",
    "05 Jan 17 13:34:54 +0100",
    "05 Jan 17 13:34:55",
    "",
)
RSS_PUBDATE = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"  '
    'xmlns:atom="http://www.w3.org/2005/Atom">\n\n    <channel>\n        <title>Main channel'
    "</title>\n        <pubDate>Thu, 05 Jan 2017 12:34:50 GMT</pubDate>\n        <link>"
    "http://www.example.com/rss.xml</link>\n"
    + "".join(
        f"        <item>\n            <title><![CDATA[News number {n}]]></title>\n"
        f"            <link>http://www.example.com/article_{n}</link>\n"
        f"            <pubDate>{date}</pubDate>\n        </item>\n"
        for n, date in enumerate(PUBDATES, 1)
    )
    + "        <item>\n            <title><![CDATA[News number 7 missing pub date]]></title>\n"
    "            <link>http://www.example.com/article_7</link>\n        </item>\n"
    "    </channel>\n</rss>\n"
).encode()

# src/test/resources/sitemaps/atom.xml
ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<!-- from:
     https://validator.w3.org/feed/docs/atom.html
     https://en.wikipedia.org/wiki/Atom_(standard)
-->
<feed xmlns="http://www.w3.org/2005/Atom">

\t<title>Example Feed</title>
\t<subtitle>A subtitle.</subtitle>
\t<link href="http://example.org/feed/" rel="self" />
\t<link href="http://example.org/" />
\t<id>urn:uuid:60a76c80-d399-11d9-b91C-0003939e0af6</id>
\t<updated>2003-12-13T18:30:02Z</updated>


\t<entry>
\t\t<title>Atom-Powered Robots Run Amok</title>
\t\t<link href="http://example.org/2003/12/13/atom03" />
\t\t<link rel="alternate" type="text/html" href="http://example.org/2003/12/13/atom03.html"/>
\t\t<link rel="edit" href="http://example.org/2003/12/13/atom03/edit"/>
\t\t<id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
\t\t<updated>2003-12-13T18:30:02Z</updated>
\t\t<summary>Some text.</summary>
\t\t<content type="xhtml">
\t\t\t<div xmlns="http://www.w3.org/1999/xhtml">
\t\t\t\t<p>This is the entry content.</p>
\t\t\t</div>
\t\t</content>
\t\t<author>
\t\t\t<name>John Doe</name>
\t\t\t<email>johndoe@example.com</email>
\t\t</author>
\t</entry>

</feed>
"""

RDF = (
    b'<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"  '
    b'xmlns="http://purl.org/rss/1.0/"><channel rdf:about="http://www.xml.com/xml/news.rss">'
    b"<title>XML.com</title><link>http://www.example.com/pub</link><description>example.com"
    b'</description><image rdf:resource="http://www.example.com/universal/images/xml_tiny.gif" />'
    b'<items><rdf:Seq><rdf:li resource="http://www.example.com/pub/2000/08/09/xslt/xslt.html" />'
    b'<rdf:li resource="http://www.example.com/pub/2000/08/09/rdfdb/index.html" /></rdf:Seq>'
    b'</items></channel><image rdf:about="http://www.example.com/universal/images/xml_tiny.gif">'
    b"<title>XML.com</title><link>http://www.xml.com</link><url>http://www.example.com/universal/"
    b'images/xml_tiny.gif</url></image><item rdf:about="http://www.example.com/pub/2000/08/09/'
    b'xslt/xslt.html"><title>Processing Inclusions with XSLT</title><link>http://www.example.com/'
    b"pub/2000/08/09/xslt/xslt.html</link><description>Processing document inclusions with "
    b"general XML tools can be problematic. This article proposes a way of preserving inclusion"
    b"information through SAX-based processing. </description> </item> </rdf:RDF>"
)


def _whole(body: bytes, size: int) -> int:
    """How many entries of a generated file are whole in its first ``size`` bytes."""
    cut = body[:size]
    return cut.count(b"</loc>") if cut.startswith(b"<?xml") else cut.count(b"\n")


def _pages(n: int, template: str = EX + "/page{}.html") -> tuple[str, ...]:
    return tuple(template.format(i) for i in range(n))


def _limits_xml(n: int) -> bytes:  # SiteMapParserLimitsTest.getXmlSitemap
    return (
        f"{DECL}\n<urlset {NS}>\n"
        + "".join(f" <url><loc>{EX}/page{i}.html</loc></url>\n" for i in range(n))
        + "</urlset>"
    ).encode()


def _limits_text(n: int) -> bytes:  # SiteMapParserLimitsTest.getTextSitemap
    return "".join(f"{EX}/page{i}.html\n" for i in range(n)).encode()


def _limits_rss(n: int) -> bytes:
    return (
        f'{DECL}\n<rss version="2.0">\n<channel>\n<title>Test</title>\n<link>{EX}/</link>\n'
        + "".join(f" <item><link>{EX}/page{i}.html</link></item>\n" for i in range(n))
        + "</channel>\n</rss>"
    ).encode()


def _limits_atom(n: int) -> bytes:
    return (
        f'{DECL}\n<feed xmlns="http://www.w3.org/2005/Atom">\n<title>Test</title>\n'
        + "".join(f' <entry><link href="{EX}/page{i}.html"/></entry>\n' for i in range(n))
        + "</feed>"
    ).encode()


def _limits_index(n: int) -> bytes:
    return (
        f"{DECL}\n<sitemapindex {NS}>\n"
        + "".join(f" <sitemap><loc>{EX}/sitemap{i}.xml</loc></sitemap>\n" for i in range(n))
        + "</sitemapindex>"
    ).encode()


TEN = SitemapLimits(max_urls=10, max_size=52_428_800)
XML100, TEXT100 = _limits_xml(100), _limits_text(100)
BOMB = (
    f"{DECL}\n<urlset {NS}>\n"
    + "".join(f" <url><loc>{EX}/page{i}.html</loc></url>{' ' * 1024}\n" for i in range(2048))
    + "</urlset>"
).encode()

CASES = [
    # --- SiteMapParserTest ---------------------------------------------------------------------
    Case(
        f"{PARSER}: testSitemapIndex",
        _index(
            "\n <sitemap>\n  <loc>http://www.example.com/sitemap1.xml.gz</loc>\n"
            "  <lastmod><![CDATA[2004-10-01T18:23:17+00:00]]></lastmod>\n </sitemap>\n",
            "<sitemap>\n  <loc>http://www.example.com/sitemap2.xml.gz</loc>\n"
            "  <lastmod>2005-01-01</lastmod>\n </sitemap>\n",
            "<sitemap>\n  <loc>http://www.example.com/dynsitemap?date=now&amp;all=true</loc>\n"
            " </sitemap>\n",
            "<sitemap>\n  <loc>http://www.example.com/dynsitemap<![CDATA[?date=lastyear&all=false]]>"
            "</loc>\n </sitemap>\n",
        ),
        f"{EX}/sitemapindex.xml",
        (
            f"{EX}/sitemap1.xml.gz",
            f"{EX}/sitemap2.xml.gz",
            f"{EX}/dynsitemap?date=now&all=true",
            f"{EX}/dynsitemap?date=lastyear&all=false",
        ),
        index=True,
    ),
    Case(
        f"{PARSER}: testSitemapTXT",
        TEXT_SITEMAP,
        f"{EX}/sitemap.txt",
        (f"{EX}/catalog?item=1", f"{EX}/catalog?item=11"),
        content_type="text/plain",
    ),
    Case(
        f"{PARSER}: testSitemapTXTWithXMLExt",
        TEXT_SITEMAP,
        f"{EX}/sitemap.xml",
        (f"{EX}/catalog?item=1", f"{EX}/catalog?item=11"),
        content_type="text/plain",
    ),
    Case(
        f"{PARSER}: testSitemapTXTWithWrongMimeType",
        TEXT_SITEMAP,
        f"{EX}/sitemap.xml",
        (f"{EX}/catalog?item=1", f"{EX}/catalog?item=11"),
        content_type="application/bogus",
    ),
    Case(
        f"{PARSER}: testSitemapXML",
        XML_SITEMAP,
        f"{EX}/sitemap.xml",
        XML_PAGES,
        lastmods={
            XML_PAGES[0]: "2005-01-01",
            XML_PAGES[1]: None,
            XML_PAGES[2]: "2004-12-23",
            XML_PAGES[3]: "2004-12-23T18:00:15+00:00",
            XML_PAGES[4]: "2004-11-23",
        },
    ),
    *(
        Case(
            f"{PARSER}: testSitemapXMLMediaTypes ({ctype})",
            XML_SITEMAP,
            f"{EX}/sitemap.nonXmlExt",
            XML_PAGES,
            content_type=ctype,
        )
        for ctype in (
            "text/xml",
            "application/x-xml",
            "application/xml",
            "application/atom+xml",
            "application/rss+xml",
        )
    ),
    Case(
        f"{PARSER}: testSitemapParserBrokenXml",
        (
            f"{DECL}<urlset {NS}><url><!-- This file is not a valid XML file --></url><url><loc> "
            "http://cs.harding.edu/fmccown/sitemaps/something.html</loc></url><!-- missing opening "
            "url tag --></url></urlset>"
        ).encode(),
        f"{EX}/sitemapindex.xml",
        (),
        differs="crawler-commons refuses the file (UnknownFormatException); we read malformed "
        "XML as far as recovery goes (its 'partial' mode), and the one URL is on another host",
    ),
    Case(
        f"{PARSER}: testMissingLocSitemapIndexFile",
        MISSING_LOC_INDEX,
        "https://example.com/sitemap.index.xml",
        tuple(f"https://example.com/sitemap.jss?portalCode={c}&lang=en" for c in INDEX_CODES),
        index=True,
    ),
    *(
        Case(
            f"{PARSER}: testSitemapGZMediaTypes ({ctype})",
            gzip.compress(XML_SITEMAP),
            f"{EX}/sitemap",
            XML_PAGES,
            content_type=ctype,
        )
        for ctype in (
            "application/gzip",
            "application/x-gzip",
            "application/x-gunzip",
            "application/gzipped",
            "application/gzip-compressed",
            "gzip/document",
        )
    ),
    Case(
        f"{PARSER}: testSitemapTextGZ",
        gzip.compress(_limits_text(5)),
        f"{EX}/sitemap.txt.gz",
        _pages(5),
        content_type="application/gzip",
    ),
    Case(
        f"{PARSER}: testSitemapWithInvalidContent",
        b"this is a bogus sitemap",
        f"{EX}/sitemap",
        (),
        content_type="application/octet-stream",
    ),
    Case(
        f"{PARSER}: testLenientParser (strict)",
        _urlset(f"<url><loc>{EX}/</loc></url>"),
        f"{EX}/subsection/sitemap.xml",
        (),
    ),
    Case(
        f"{PARSER}: testAtomFormat",
        ATOM,
        "http://example.org/atom.xml",
        ("http://example.org/2003/12/13/atom03",),
        content_type=None,
        lastmods={"http://example.org/2003/12/13/atom03": "2003-12-13T18:30:02Z"},
    ),
    Case(
        f"{PARSER}: testRSSFormat",
        FEED_RSS,
        "https://www.example.com/index.php?feed/rss",
        (
            "https://www.example.com/blog/post/1",
            "https://www.example.com/guid.html",
            "https://www.example.com/foo?q=a&l=en",
            "https://www.example.com/foo?q=a&l=fr",
        ),
        content_type=None,
    ),
    *(
        Case(
            f"{PARSER}: testRSS10SyndicationFormat ({ctype})",
            RDF,
            f"{EX}/sitemapindex.xml",
            (f"{EX}/pub/2000/08/09/xslt/xslt.html",),
            content_type=ctype,
        )
        for ctype in ("text/xml", "application/rdf+xml", None)
    ),
    Case(
        f"{PARSER}: testRSSPubDate",
        RSS_PUBDATE,
        f"{EX}/rss.xml",
        _pages(8, EX + "/article_{}")[1:],
        lastmods={
            f"{EX}/article_1": "2017-01-05T12:34:51Z",
            f"{EX}/article_2": "2017-01-05T12:34:52Z",
            f"{EX}/article_3": "2017-01-05T12:34:53Z",
            f"{EX}/article_4": "2017-01-05T12:34:54Z",
            f"{EX}/article_5": None,
            f"{EX}/article_6": None,
            f"{EX}/article_7": None,
        },
    ),
    Case(
        f"{PARSER}: testPartialSitemapsAllowed",
        (f"{DECL}<urlset {NS}><url><loc>http://www.example.com/</lo").encode(),
        f"{EX}/subsection/sitemap.xml",
        (),
        differs="crawler-commons keeps the cut entry, marked invalid; we drop text after the "
        "last '>', so a cut file never yields half a URL (and / is outside /subsection/)",
    ),
    Case(
        f"{PARSER}: testUrlLocUrl",
        _urlset(
            "<url><loc><url><![CDATA[http://jobs.optistaffing.com/EXPERIENCED-DISPATCHER-NEEDED-NOW"
            "----Jobs-in-Vancouver-WA/2333221]]></url></loc><lastmod>2015-04-28</lastmod>"
            "<changefreq>daily</changefreq></url>"
        ),
        f"{EX}/subsection/sitemap.xml",
        (),
    ),
    Case(
        f"{PARSER}: testPartialSitemapIndicesAllowed",
        (
            f"{DECL}<sitemapindex {NS}><sitemap><loc>http://www.example.com/sitemap1.xml.gz</loc>"
            "<las"
        ).encode(),
        f"{EX}/subsection/sitemap.xml",
        (f"{EX}/sitemap1.xml.gz",),
        index=True,
    ),
    # --- sitemaps.org protocol.html ----------------------------------------------------------
    Case(
        f"{PROTOCOL}: Sitemap file location",
        _urlset(
            *(
                f"<url><loc>{u}</loc></url>"
                for u in (
                    "http://example.com/catalog/show?item=23",
                    "http://example.com/catalog/show?item=233&amp;user=3453",
                    "http://example.com/image/show?item=23",
                    "http://example.com/image/show?item=233&amp;user=3453",
                    "https://example.com/catalog/page1.php",
                    "http://subdomain.example.com/catalog/a.html",
                )
            )
        ),
        "http://example.com/catalog/sitemap.xml",
        (
            "http://example.com/catalog/show?item=23",
            "http://example.com/catalog/show?item=233&user=3453",
        ),
    ),
    Case(
        f"{PROTOCOL}: Sitemap file location (a '/' in the query)",
        _urlset("<url><loc>https://example.com/catalog/page1.php</loc></url>"),
        "https://example.com/index.php?route=path/sitemap",
        ("https://example.com/catalog/page1.php",),
    ),
    Case(
        f"{PROTOCOL}: Entity escaping",
        _urlset(
            "<url><loc>http://www.example.com/view.html?item=12&amp;desc=vacation_hawaii</loc></url>",
            "<url><loc>http://www.example.com/%C3%BCmlat.php&amp;q=name</loc></url>",
            "<url><loc>http://www.example.com/q?a=&apos;x&apos;&amp;b=&quot;y&quot;&amp;c=&lt;"
            "&gt;</loc></url>",
        ),
        f"{EX}/sitemap.xml",
        (
            f"{EX}/view.html?item=12&desc=vacation_hawaii",
            f"{EX}/%C3%BCmlat.php&q=name",
            f"{EX}/q?a='x'&b=\"y\"&c=<>",
        ),
    ),
    Case(
        f"{PROTOCOL}: Sitemap index (sitemaps of its own site only)",
        _index(
            *(
                f"<sitemap><loc>{u}</loc></sitemap>"
                for u in (
                    "http://www.yoursite.com/sitemap1.xml",
                    "http://www.example.com/sitemap1.xml",
                    "http://yourhost.yoursite.com/sitemap1.xml",
                )
            )
        ),
        "http://www.yoursite.com/sitemap_index.xml",
        ("http://www.yoursite.com/sitemap1.xml",),
        index=True,
    ),
    # --- SiteMapCrossSubmitValidatorTest ------------------------------------------------------
    Case(
        f"{CROSS}: testValidateURLs",
        b"https://blog.example.com/blog-1.html\nhttps://blog.example.com/blog-2.html",
        "https://blog.example.com/sitemap.txt",
        ("https://blog.example.com/blog-1.html", "https://blog.example.com/blog-2.html"),
        content_type="text/plain",
    ),
    Case(
        f"{CROSS}: testValidateCrossSubmitHost (named by blog's robots.txt)",
        b"https://blog.example.com/blog-1.html\nhttps://blog.example.com/blog-2.html",
        "https://www.example.com/sitemap.txt",
        ("https://blog.example.com/blog-1.html", "https://blog.example.com/blog-2.html"),
        content_type="text/plain",
        origin="https://blog.example.com",
    ),
    Case(
        f"{CROSS}: testValidateCrossSubmitHost (named by another domain's robots.txt)",
        b"https://blog.example.com/blog-1.html\nhttps://blog.example.com/blog-2.html",
        "https://www.example.com/sitemap.txt",
        (),
        content_type="text/plain",
        origin="https://www.otherdomain.com",
    ),
    Case(
        f"{CROSS}: testValidateCrossSubmitSites (named by blog's robots.txt)",
        b"https://blog.example.com/blog-1.html\nhttps://blog.example.com/blog-2.html\n"
        b"https://docs.example.com/index.html",
        "https://www.example.com/sitemap.txt",
        ("https://blog.example.com/blog-1.html", "https://blog.example.com/blog-2.html"),
        content_type="text/plain",
        origin="https://blog.example.com",
    ),
    Case(
        f"{CROSS}: testValidateCrossSubmitSites (private domain level, this.github.io)",
        b"https://this.github.io/this.html\nhttps://that.github.io/that-1.html\n"
        b"https://that.github.io/that-2.html",
        "https://www.example.com/sitemap.txt",
        ("https://this.github.io/this.html",),
        content_type="text/plain",
        origin="https://this.github.io",
    ),
    # --- SiteMapParserLimitsTest --------------------------------------------------------------
    Case(
        f"{LIMITS_TEST}: testXmlSitemapMaxUrls (10 of 10)",
        _limits_xml(10),
        f"{EX}/sitemap.xml",
        _pages(10),
        limits=TEN,
    ),
    Case(
        f"{LIMITS_TEST}: testXmlSitemapMaxUrls (10 of 25)",
        _limits_xml(25),
        f"{EX}/sitemap.xml",
        _pages(10),
        limits=TEN,
    ),
    Case(
        f"{LIMITS_TEST}: testGzippedXmlSitemapMaxUrls",
        gzip.compress(_limits_xml(25)),
        f"{EX}/sitemap.xml.gz",
        _pages(10),
        content_type="application/gzip",
        limits=TEN,
    ),
    Case(
        f"{LIMITS_TEST}: testSitemapIndexMaxUrls",
        _limits_index(25),
        f"{EX}/sitemapindex.xml",
        _pages(10, EX + "/sitemap{}.xml"),
        index=True,
        limits=TEN,
    ),
    Case(
        f"{LIMITS_TEST}: testRssMaxUrls",
        _limits_rss(25),
        f"{EX}/feed.rss",
        _pages(10),
        content_type="application/rss+xml",
        limits=TEN,
    ),
    Case(
        f"{LIMITS_TEST}: testAtomMaxUrls",
        _limits_atom(25),
        f"{EX}/feed.atom",
        _pages(10),
        content_type="application/atom+xml",
        limits=TEN,
    ),
    *(
        Case(
            f"{LIMITS_TEST}: testTextSitemapMaxUrls ({n}{' gzip' if gz else ''})",
            gzip.compress(_limits_text(n)) if gz else _limits_text(n),
            f"{EX}/sitemap.txt",
            _pages(10),
            content_type="text/plain",
            limits=TEN,
        )
        for n, gz in ((10, False), (25, False), (25, True))
    ),
    *(
        Case(
            f"{LIMITS_TEST}: testMaxBytesNotExceeded ({name})",
            body,
            f"{EX}/sitemap",
            _pages(100),
            limits=SitemapLimits(max_urls=50_000, max_size=size),
        )
        for name, body, size in (
            ("xml", XML100, len(XML100)),
            ("xml gzip", gzip.compress(XML100), len(XML100)),
            ("text", TEXT100, len(TEXT100)),
            ("text gzip", gzip.compress(TEXT100), len(TEXT100)),
        )
    ),
    # crawler-commons asserts 0 < n < 100 whole URLs; ours: the entries whole in the bytes read
    *(
        Case(
            f"{LIMITS_TEST}: testMaxBytesExceededPartialAllowed ({name})",
            body,
            f"{EX}/sitemap",
            _pages(_whole(body, size)),
            limits=SitemapLimits(max_urls=50_000, max_size=size),
        )
        for name, body, size in (
            ("xml", XML100, len(XML100) // 2),
            ("text", TEXT100, len(TEXT100) // 2),
            ("text cut in a URL", TEXT100, len(TEXT100) // 2 + 25),
        )
    ),
    *(
        Case(
            f"{LIMITS_TEST}: testMaxBytesExceededPartialAllowed ({name})",
            gzip.compress(body),
            f"{EX}/sitemap",
            _pages(_whole(body, size)),  # inflated up to the limit, read as the plain file
            limits=SitemapLimits(max_urls=50_000, max_size=size),
        )
        for name, body, size in (
            ("xml gzip", XML100, len(XML100) // 2),
            ("text gzip", TEXT100, len(TEXT100) // 2),
        )
    ),
    Case(
        f"{LIMITS_TEST}: testMaxBytesExceeded (xml)",
        XML100,
        f"{EX}/sitemap.xml",
        _pages(100),
        limits=SitemapLimits(max_urls=50_000, max_size=len(XML100) - 1),
        differs="crawler-commons' default (strict) parser refuses a file over the size limit; "
        "we read it up to the limit, as its partial mode does: cut one byte short, the file "
        "loses only its closing tag",
    ),
    *(
        Case(
            f"{LIMITS_TEST}: testMaxBytesExceeded ({name})",
            body,
            f"{EX}/sitemap",
            expected,
            limits=SitemapLimits(max_urls=50_000, max_size=size),
            differs=why,
        )
        for name, body, size, expected, why in (
            (
                "xml gzip",
                gzip.compress(XML100),
                len(XML100) - 1,
                _pages(100),
                "inflated up to the limit and read there, as the plain file",
            ),
            (
                "text",
                TEXT100,
                len(TEXT100) - 1,
                _pages(99),
                "read up to the limit, as for XML: the last line, cut, is dropped",
            ),
            (
                "text gzip",
                gzip.compress(TEXT100),
                len(TEXT100) - 1,
                _pages(99),
                "inflated up to the limit and read there, as the plain file",
            ),
        )
    ),
    Case(
        f"{LIMITS_TEST}: testMaxBytesExceededGzipHighlyCompressed",
        gzip.compress(BOMB),
        f"{EX}/sitemap.xml.gz",
        _pages(_whole(BOMB, 1024 * 1024)),
        content_type="application/gzip",
        limits=SitemapLimits(max_urls=50_000, max_size=1024 * 1024),
        differs="crawler-commons' strict parser refuses it; we inflate it up to the limit, no "
        "further, and read the entries whole there (its partial mode)",
    ),
    Case(
        f"{LIMITS_TEST}: testMaxUrlsBrokenSitemapIndex (partial)",
        (
            f"{DECL}\n<sitemapindex {NS}>\n"
            " <sitemap><loc>http://www.example.com/sitemap1.xml</loc></sitemap>\n"
            " <sitemap><loc>http://www.example.com/sitemap2.xml</loc></sitemap>\n"
            " <sitemap><loc>http://www.example.com/sitemap3.xml</loc><broken"
        ).encode(),
        f"{EX}/sitemapindex.xml",
        (f"{EX}/sitemap1.xml", f"{EX}/sitemap2.xml"),
        index=True,
        limits=SitemapLimits(max_urls=2, max_size=52_428_800),
    ),
]


def _read(case: Case) -> SitemapReading:
    named = bool(case.origin)
    origin = case.origin or case.url.split("/", 3)[0] + "//" + case.url.split("/", 3)[2]
    file = SitemapFile(case.url, origin, named=named)
    return read_sitemap(case.body, case.content_type, case.url, file, case.limits, True)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.source)
def test_what_the_crawl_keeps_of_a_sitemap(case: Case) -> None:
    reading = _read(case)
    got = reading.children if case.index else [loc for loc, _, _ in reading.entries]
    assert tuple(got) == case.expected
    assert reading.index == case.index
    dates = {loc: lastmod for loc, _, lastmod in reading.entries}
    for page, lastmod in case.lastmods.items():
        assert dates[page] == parse_lastmod(lastmod)


# --- AbstractSiteMapTest: W3C Datetime (https://www.w3.org/TR/NOTE-datetime) -------------------

W3C_DATES = [
    ("testDateParsing", "2014", "2014-01-01T00:00:00Z"),
    ("testDateParsing", "2014-06", "2014-06-01T00:00:00Z"),
    ("testDateParsing", "2014-06-03", "2014-06-03T00:00:00Z"),
    ("testDateParsing", "2014-06-03T10:30+00:00", "2014-06-03T10:30:00Z"),
    ("testDateParsing", "2014-06-03T10:30:45+00:00", "2014-06-03T10:30:45Z"),
    ("testDateParsing", "2014-06-03T10:30:45-05:00", "2014-06-03T15:30:45Z"),
    ("testDateParsing", "2014-06-03T10:30:45.82+00:00", "2014-06-03T10:30:45.820Z"),
    ("testDateParsing", "1997", "1997-01-01T00:00:00Z"),
    ("testDateParsing", "1997-07", "1997-07-01T00:00:00Z"),
    ("testDateParsing", "1997-07-16", "1997-07-16T00:00:00Z"),
    ("testDateParsing", "1997-07-16T19:20+01:00", "1997-07-16T18:20:00Z"),
    ("testDateParsing", "1997-07-16T19:20:30+01:00", "1997-07-16T18:20:30Z"),
    ("testDateParsing", "1997-07-16T19:20:30.45+01:00", "1997-07-16T18:20:30.450Z"),
    ("testFullDateFormat", "1994-11-05T08:15:30-05:00", "1994-11-05T13:15:30Z"),
    ("testDateParsing", "blah", None),
    ("testDateParsing", None, None),
]


@pytest.mark.parametrize("test, value, utc", W3C_DATES)
def test_w3c_datetimes(test: str, value: str | None, utc: str | None) -> None:
    expected = None if utc is None else _epoch(utc)
    assert parse_lastmod(value) == expected


RSS_DATES = [
    ("Full date-time with named timezone", "Thu, 05 Jan 2017 12:34:50 GMT", "2017-01-05T12:34:50Z"),
    (
        "Full date-time with time zone offset",
        "Thu, 05 Jan 2017 13:34:51 +0100",
        "2017-01-05T12:34:51Z",
    ),
    ("Date-time without week day", "05 Jan 2017 11:34:52 -0100", "2017-01-05T12:34:52Z"),
    (
        "Date-time without week day and two-digit year",
        "05 Jan 17 12:34:53 GMT",
        "2017-01-05T12:34:53Z",
    ),
    ("Date-time with two-digit year", "Thu, 05 Jan 17 12:34:54 GMT", "2017-01-05T12:34:54Z"),
    ("incorrect", "incorrect", None),
]


@pytest.mark.parametrize("name, value, utc", RSS_DATES)
def test_rss_dates(name: str, value: str, utc: str | None) -> None:
    """AbstractSiteMapTest.testRssDateNormalyzing (an unreadable date: commons passes it on
    as written, to be refused when read as a date; ours says None at once)."""
    w3c = rfc822_to_w3c(value)
    assert (None if w3c is None else parse_lastmod(w3c)) == (None if utc is None else _epoch(utc))


def _epoch(utc: str) -> float:
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()


def test_a_location_written_unescaped_is_the_page_its_escaped_form_names() -> None:
    """sitemaps.org "Entity escaping": ``http://www.example.com/ümlat.php&q=name`` is to be
    written ``http://www.example.com/%C3%BCmlat.php&amp;q=name``; a sitemap that writes it as
    is names the same page (the crawl database's key is the same)."""
    body = _urlset(
        "<url><loc>http://www.example.com/\u00fcmlat.php&amp;q=name</loc></url>",
        "<url><loc>http://www.example.com/%C3%BCmlat.php&amp;q=name</loc></url>",
    )
    case = Case(PROTOCOL, body, f"{EX}/sitemap.xml", ())
    keys = [key for _, key, _ in _read(case).entries]
    assert keys == [f"{EX}/%C3%BCmlat.php&q=name"] * 2


MIME = "crawler-commons MimeTypeDetectorTest.java"
BOM_TEXT = b"\xef\xbb\xbfhttp://www.domain.com/page1.html\nhttp://www.domain.com/page2.html\n"
KINDS = [
    (f"{MIME}: testXMLDetection (atom.xml)", ATOM, XML),
    (f"{MIME}: testTextDetection (sitemap.txt)", _limits_text(5), TEXT),
    (f"{MIME}: testTextDetection (sitemap-with-bom.txt)", BOM_TEXT, TEXT),
    (f"{MIME}: testGzipDetection (xmlSitemap.gz)", gzip.compress(XML_SITEMAP), GZIP),
    (f"{MIME}: testGzipDetection (sitemap.txt.gz)", gzip.compress(_limits_text(5)), GZIP),
    (f"{MIME}: testLeadingSpace", b" \n" + _limits_text(5), TEXT),
    (f"{MIME}: testLeadingSpace (after the BOM)", BOM_TEXT[:3] + b" \n" + BOM_TEXT[3:], TEXT),
]


@pytest.mark.parametrize("source, body, kind", KINDS, ids=[k[0] for k in KINDS])
def test_what_kind_of_file_the_bytes_say(source: str, body: bytes, kind: str) -> None:
    assert file_kind(body) == kind
