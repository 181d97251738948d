"""Page requisites: the resources a page embeds (stylesheets, scripts, images, fonts, frames),
which an archival crawl fetches with the page so that it replays as it looked.

Pure functions of a parsed page or a stylesheet's text, free of Scrapy: the content analysis
collects a page's raw references in the same parse that finds its links
(``crawler.content.html``), and the site spider reads a fetched stylesheet's ``url(...)`` and
``@import`` and a frame's own requisites with :func:`css_references` and
:func:`html_requisites`. What counts as a requisite is what a browser fetches to draw the page
without a click: ``<link rel=stylesheet|icon|preload|modulepreload>``, ``<script src>``,
``<img src srcset>``, ``<picture><source srcset>``, ``<video poster src>``, ``<audio src>``,
``<track src>``, ``<iframe src>``, ``<frame src>``, ``<embed src>``, ``<object data>``,
``<input type=image src>``, ``background`` attributes, and CSS ``url(...)`` in ``<style>``
elements and ``style`` attributes. Anchors (``<a href>``) are links, never requisites.

References come out in the order a page needs them to render (stylesheets, then scripts, then
frames, images and the rest), so a bound on how many are kept keeps the ones that matter most.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from lxml import etree

from crawler.content.document import parse_document_checked
from crawler.net.weburl import join as web_join

# CSS: comments first (a commented-out url() is not fetched), then url(...) and @import "x".
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.I)
_CSS_IMPORT = re.compile(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", re.I)

_LINK_RELS = frozenset(
    {"stylesheet", "icon", "apple-touch-icon", "mask-icon", "preload", "modulepreload"}
)


def css_references(text: str) -> list[str]:
    """The raw references of a stylesheet (or a ``style`` attribute): ``@import`` targets and
    ``url(...)`` values, in order, ``data:`` URIs left out."""
    text = _CSS_COMMENT.sub(" ", text)
    out: list[str] = []
    for pattern in (_CSS_IMPORT, _CSS_URL):
        for match in pattern.finditer(text):
            ref = next((g for g in match.groups() if g is not None), "").strip()
            if ref and not ref.lower().startswith(("data:", "#")):
                out.append(ref)
    return out


def srcset_references(value: str) -> list[str]:
    """The URLs of a ``srcset`` (``a.png 1x, b.png 2x``), read as the HTML standard says (a URL
    runs to the next whitespace and may hold commas; trailing commas end it). Every candidate
    is kept: the replaying browser picks one by its own screen."""
    out = []
    pos, end = 0, len(value)
    while True:
        while pos < end and (value[pos].isspace() or value[pos] == ","):
            pos += 1
        if pos >= end:
            return out
        start = pos
        while pos < end and not value[pos].isspace():
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            url = url.rstrip(",")
        else:  # descriptors up to the next comma
            comma = value.find(",", pos)
            pos = end if comma < 0 else comma + 1
        if url and not url.lower().startswith("data:"):
            out.append(url)


def tree_requisites(root: etree._Element) -> list[str]:
    """The raw references of a parsed HTML document, most needed first (see the module
    docstring). Call before anything strips the tree (the main-text extraction does)."""
    sheets: list[str] = []
    scripts: list[str] = []
    frames: list[str] = []
    images: list[str] = []
    other: list[str] = []
    for el in root.iter(etree.Element):
        tag = el.tag
        if not isinstance(tag, str):
            continue
        get = el.get
        if tag == "link":
            rels = set((get("rel") or "").lower().split())
            if rels & _LINK_RELS:
                href = get("href")
                if "stylesheet" in rels or (get("as") or "").lower() == "style":
                    _add(sheets, href)
                elif (get("as") or "").lower() == "script" or "modulepreload" in rels:
                    _add(scripts, href)
                else:
                    _add(other, href)
                if get("imagesrcset"):
                    images.extend(srcset_references(get("imagesrcset") or ""))
        elif tag == "script":
            _add(scripts, get("src"))
        elif tag == "style":
            sheets.extend(css_references(el.text or ""))
        elif tag in ("iframe", "frame"):
            _add(frames, get("src"))
        elif tag == "img" or (tag == "input" and (get("type") or "").lower() == "image"):
            _add(images, get("src"))
            if get("srcset"):
                images.extend(srcset_references(get("srcset") or ""))
        elif tag == "source":
            _add(other, get("src"))
            if get("srcset"):
                images.extend(srcset_references(get("srcset") or ""))
        elif tag in ("video", "audio", "track", "embed"):
            _add(other, get("src"))
            _add(images, get("poster"))
        elif tag == "object":
            _add(other, get("data"))
        background = get("background")
        if background:
            _add(images, background)
        style = get("style")
        if style and "url(" in style.lower():
            images.extend(css_references(style))
    return sheets + scripts + frames + images + other


def html_requisites(body: bytes, encoding: str | None = None) -> tuple[list[str], str | None]:
    """The raw references of an HTML document's bytes and its ``<base href>`` (a frame fetched
    as a requisite: parsed for its own requisites only, never for links)."""
    if not body:
        return [], None
    try:
        root, _ = parse_document_checked(body, encoding)
    except (etree.ParserError, ValueError):
        return [], None
    base = root.find(".//base[@href]")
    return tree_requisites(root), (
        base.get("href", "").strip() or None
    ) if base is not None else None


def absolute_requisites(
    base: str, references: Iterable[str], limit: int, base_href: str | None = None
) -> tuple[list[str], int]:
    """``references`` joined to ``base`` (or to ``base_href``, a ``<base href>``, joined to
    ``base``), http(s) only, without fragments, each once, at most ``limit`` (0: no bound);
    with how many distinct ones the bound left out."""
    if base_href:
        with contextlib.suppress(ValueError):  # a broken <base href> is ignored
            base = web_join(base, base_href)
    out: dict[str, None] = {}
    over = 0
    for url in _joined(base, references):
        if url in out:
            continue
        if limit and len(out) >= limit:
            over += 1
            continue
        out[url] = None
    return list(out), over


def _joined(base: str, references: Iterable[str]) -> Iterator[str]:
    for ref in references:
        ref = ref.strip()
        if not ref or ref.lower().startswith(("data:", "javascript:", "about:", "blob:")):
            continue
        try:
            url = web_join(base, ref).partition("#")[0]
            parts = urlsplit(url)
        except ValueError:
            continue
        if parts.scheme in ("http", "https") and parts.hostname:
            yield url


def _add(bucket: list[str], value: str | None) -> None:
    if value and value.strip():
        bucket.append(value.strip())
