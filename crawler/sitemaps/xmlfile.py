"""Reading an XML sitemap (a ``<urlset>`` or a ``<sitemapindex>``, or a syndication feed, which
sitemaps.org accepts too: ``crawler.sitemaps.feeds``) entry by entry, bounded, and safe against
hostile XML.

lxml's ``iterparse`` reads the file one entry at a time (each is dropped once read, so a file of
millions of entries costs the memory of one), and stops once the limit is passed. What it
does with the shapes real sitemaps take, checked against crawler-commons' SAX handlers:

* **Two ``<loc>`` in one entry** (``<sitemap><loc>a</loc><loc>b</loc></sitemap>``): *each* is
  kept, as crawler-commons does (it reads the second ``<loc>`` as the start of an entry whose
  tags the generator forgot). Each names a file or page the site wants read; keeping only one
  (Scrapy's parser keeps the last) silently loses the other. A ``<lastmod>`` belongs to the
  ``<loc>`` it follows (or, before any, to the first). Every kept ``<loc>`` counts against the
  per-file limit, so the cost stays bounded.
* **No ``<loc>``**: text written straight in the entry (``<sitemap>https://a/s.xml</sitemap>``)
  is its location. **Markup inside ``<loc>``** (``<loc><url><![CDATA[...]]></url></loc>``): its
  text is the location. CDATA, character references and the five XML entities are read;
  white space around a location, Unicode spaces included, is stripped.
* **Malformed XML** (tags not closed, a file cut short): read as far as lxml's recovery gets,
  as crawler-commons' "partial" mode does; the entries read still pass every check a link
  does. Text after the last ``>`` is dropped first, so a file cut in the middle of a URL never
  yields half a URL.
* **Extensions** (Google's image, video and news sitemaps): their elements are not the entry's
  ``<loc>`` (``<image:loc>`` is an image, not a page) and are skipped, except a News
  sitemap's ``<news:publication_date>``, the entry's date when it has no ``<lastmod>``.
* **Entities and DTDs** (XXE, "billion laughs"): no DTD is loaded, nothing is fetched from the
  network, no entity is expanded; a ``<loc>`` that holds an entity reference is not what the
  site meant and is dropped (counted as ``hidden``). XInclude is never processed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from io import BytesIO

from lxml import etree

from crawler.sitemaps.feeds import local_name as _local
from crawler.sitemaps.feeds import read_feed_entry

URLSET = "urlset"
SITEMAPINDEX = "sitemapindex"
# Syndication feeds, which sitemaps.org accepts as sitemaps: RSS 2.0, RSS 1.0 (RDF), Atom.
RSS, RDF, ATOM = "rss", "RDF", "feed"
FEEDS = frozenset({RSS, RDF, ATOM})
# The entry element of each kind of root, and its depth (1: a child of the root).
ENTRY = {URLSET: ("url", 1), SITEMAPINDEX: ("sitemap", 1), RSS: ("item", 2),
         RDF: ("item", 1), ATOM: ("entry", 1)}

# (location, lastmod as written or None)
Row = tuple[str, str | None]


@dataclass
class XmlSitemap:
    """What an XML sitemap holds, as far as ``limit`` lets it be read."""

    root: str = ""  # local name of the root element; "" when the file has none
    rows: list[Row] = field(default_factory=list)
    more: bool = False  # entries past the limit were left unread
    hidden: int = 0  # locations holding an unexpanded entity reference: dropped
    error: str = ""  # why nothing could be read at all


def read_xml(body: bytes, limit: int, base: str = "") -> XmlSitemap:
    """The entries of an XML sitemap or feed, at most ``limit`` (see the module docstring);
    a feed's relative links are resolved against ``base``, the feed's URL."""
    out = XmlSitemap()
    body = body[: body.rfind(b">") + 1]
    events = etree.iterparse(
        BytesIO(body), events=("end",), recover=True, resolve_entities=False,
        no_network=True, load_dtd=False, huge_tree=False, remove_comments=True,
        remove_pis=True, collect_ids=False,
    )  # fmt: skip
    root: etree._Element | None = None
    entry, at, suffix = "", 0, ""
    try:
        for _, element in events:
            if root is None:  # the first element closed: its top ancestor is the root
                root = element
                while (up := root.getparent()) is not None:
                    root = up
                out.root = _local(root)
                entry, at = ENTRY.get(out.root, ("", 0))
                if not entry:
                    return out
                suffix = "}" + entry
            tag = element.tag
            if not (tag == entry or (isinstance(tag, str) and tag.endswith(suffix))):
                continue
            parent = element.getparent()
            if parent is None or (parent if at == 1 else parent.getparent()) is not root:
                continue
            if out.root in FEEDS:
                _add(out, *read_feed_entry(element, base, out.root == ATOM))
            else:
                _read_entry(element, entry, out)
            element.clear()
            while element.getprevious() is not None:
                del parent[0]
            if len(out.rows) > limit:
                break
    except etree.XMLSyntaxError as exc:
        if root is None:
            out.error = str(exc) or "no XML element"
    if len(out.rows) > limit:
        out.more = True
        del out.rows[limit:]
    return out


def _read_entry(element: etree._Element, entry: str, out: XmlSitemap) -> None:
    """The rows of one ``<url>`` or ``<sitemap>`` (more than one with repeated ``<loc>``)."""
    loc: str | None = None
    lastmod: str | None = None
    news: str | None = None
    loose = [element.text or ""]  # text straight in the entry: its location without <loc>
    for child in element:
        tag = _local(child)
        if tag == "loc":
            if loc is not None:
                _add(out, loc, lastmod)
                lastmod = None
            loc = _text(child, out)
        elif tag == "lastmod":
            lastmod = _text(child, out)
        elif tag == "news" and news is None:  # Google News: its publication date
            news = next((_text(d, out) for d in child.iter() if _local(d) == "publication_date"),
                        None)
        elif isinstance(child, etree._Entity):  # loose text with an entity: not a location
            out.hidden += 1
            loose = []
        elif tag == entry:  # an entry inside an entry: a tag left open, recovered by lxml
            if loc is not None:
                _add(out, loc, lastmod)
                loc, lastmod = None, None
            _read_entry(child, entry, out)
        if loose:
            loose.append(child.tail or "")
    if loc is not None:
        _add(out, loc, lastmod or news)
    elif loose:
        _add(out, "".join(loose), lastmod or news)


def _add(out: XmlSitemap, loc: str, lastmod: str | None) -> None:
    loc = loc.strip()
    if loc:
        out.rows.append((loc, lastmod.strip() if lastmod else None))


def _text(element: etree._Element, out: XmlSitemap) -> str:
    """All the text inside ``element`` (CDATA and markup inside it included); "" when it
    holds an entity reference, which is never expanded."""
    if not len(element):  # no child, so no entity reference either: the common case
        return element.text or ""
    if any(isinstance(node, etree._Entity) for node in element.iter()):
        out.hidden += 1
        return ""
    return "".join(element.itertext())
