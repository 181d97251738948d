"""What a page says about itself: description, OpenGraph and Twitter cards, JSON-LD, microdata,
publication dates and declared language, read from the tree the spider parsed once.

A reader of our own rather than extruct: extruct parses the page again (lxml, and for RDFa
rdflib), and pulls in a dozen packages (rdflib, mf2py, pyrdfa3, html-text, jstyleson...) for
syntaxes that search and language-model pipelines rarely read. What is read here:

* ``<meta name="description">`` (else ``og:description``);
* OpenGraph ``<meta property="og:*">`` and ``article:*``, Twitter cards ``twitter:*`` (by
  ``name`` or ``property``: both are seen in the wild);
* JSON-LD: every ``<script type="application/ld+json">`` that parses as JSON (a broken, too
  deeply nested or oversized one is counted, never raised), ``@graph`` flattened;
* microdata: each top-level ``itemscope`` as ``{"@type": ..., prop: value}`` (values as the
  HTML microdata spec reads them: ``content``, ``href``/``src``, ``datetime``, else the text),
  nested items kept nested;
* dates: ``datePublished``/``dateModified`` of JSON-LD or microdata, else
  ``article:published_time``/``article:modified_time``, else ``<meta name="date">``-like names
  (Dublin Core's ``dcterms.created``/``dcterms.modified``); as written, when they start with
  an ISO 8601 date (``2024-05-01``...), which is what these vocabularies ask for.

Call :func:`page_metadata` before the invisible parts (``<head>``, scripts) are stripped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lxml import etree

__all__ = ["page_metadata"]

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?")
_PUBLISHED_METAS = ("article:published_time", "og:published_time", "date", "dcterms.created",
                    "dc.date", "dc.date.issued", "dcterms.issued")
_MODIFIED_METAS = ("article:modified_time", "og:updated_time", "last-modified",
                   "dcterms.modified", "dc.date.modified")
_SCOPES = etree.XPath("//*[@itemscope]")  # libxml2's walk: ElementPath's is 3x slower
_MAX_STRUCTURED = 50  # JSON-LD objects or microdata items kept from one page
_MAX_TEXT = 1_000  # characters of a microdata text value
_MAX_DEPTH = 16  # microdata items nested in one another, read
_MAX_JSON_LD_CHARS = 100_000  # a bigger JSON-LD script is counted as broken, not read


def page_metadata(root: etree._Element, metas: dict[str, str]) -> dict[str, Any]:
    """The page's metadata (see the module docstring): only what the page has. ``metas`` is
    the page's ``<meta name>`` contents by lower-case name (``ParsedPage.metas``)."""
    out: dict[str, Any] = {}
    properties: dict[str, str] = {}
    for meta in root.iter("meta"):  # (lxml filters the tag in C; ElementPath is slower)
        name = meta.get("property", "").strip().lower()
        if name and name not in properties:
            properties[name] = meta.get("content", "").strip()
    opengraph = {k[3:]: v for k, v in properties.items() if k.startswith("og:") and v}
    article = {k[8:]: v for k, v in properties.items() if k.startswith("article:") and v}
    twitter = {k[8:]: v.strip() for k, v in {**properties, **metas}.items()
               if k.startswith("twitter:") and v.strip()}
    description = " ".join(metas.get("description", "").split()) or opengraph.get(
        "description", "")
    if description:
        out["description"] = description
    if opengraph:
        out["opengraph"] = opengraph
    if article:
        out["article"] = article
    if twitter:
        out["twitter"] = twitter
    json_ld, broken = _json_ld(root)
    if json_ld:
        out["json_ld"] = json_ld
    if broken:
        out["json_ld_errors"] = broken
    microdata = [_item(el) for el in _top_items(root)]
    if microdata:
        out["microdata"] = microdata
    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    if lang and lang.strip():
        out["html_lang"] = lang.strip()
    named = {**metas, **properties}
    for key, field, names in (("published", "datePublished", _PUBLISHED_METAS),
                              ("modified", "dateModified", _MODIFIED_METAS)):
        date = _structured_date([*json_ld, *microdata], field) or _first_date(named, names)
        if date:
            out[key] = date
    return out


def _json_ld(root: etree._Element) -> tuple[list[dict[str, Any]], int]:
    """The page's JSON-LD objects (``@graph`` members in its place) and how many scripts did
    not parse."""
    found: list[dict[str, Any]] = []
    broken = 0
    for script in root.iter("script"):
        if script.get("type", "").strip().lower() != "application/ld+json":
            continue
        text = (script.text or "").strip()
        if not text:
            continue
        if len(text) > _MAX_JSON_LD_CHARS:  # a data dump, not a description of the page
            broken += 1
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past Python's
            broken += 1
            continue
        for obj in data if isinstance(data, list) else [data]:
            if not isinstance(obj, dict):
                continue
            graph = obj.get("@graph")
            members = graph if isinstance(graph, list) else [obj]
            found.extend(m for m in members if isinstance(m, dict))
    return found[:_MAX_STRUCTURED], broken


def _top_items(root: etree._Element) -> list[etree._Element]:
    """The microdata items no other item holds (a nested item is a property's value)."""
    scopes = _SCOPES(root)
    if not scopes:
        return []
    inside = set(scopes)
    top = [el for el in scopes if not any(a in inside for a in el.iterancestors())]
    return top[:_MAX_STRUCTURED]


def _item(el: etree._Element, depth: int = 0) -> dict[str, Any]:
    """A microdata item: its type and properties (a property named twice becomes a list); an
    item nested deeper than ``_MAX_DEPTH`` keeps its type only (a hostile page nests
    thousands, past Python's recursion limit)."""
    item: dict[str, Any] = {}
    kind = el.get("itemtype", "").strip()
    if kind:
        item["@type"] = kind
    if depth >= _MAX_DEPTH:
        return item
    for prop, value in _properties(el, depth):
        for name in prop.split():
            if name in item:
                old = item[name]
                item[name] = [*old, value] if isinstance(old, list) else [old, value]
            else:
                item[name] = value
    return item


def _properties(scope: etree._Element, depth: int) -> list[tuple[str, Any]]:
    """``scope``'s properties: ``itemprop`` descendants not inside a nested item."""
    found: list[tuple[str, Any]] = []
    stack = list(scope)
    stack.reverse()
    while stack:
        el = stack.pop()
        if not isinstance(el.tag, str):
            continue
        prop = el.get("itemprop")
        nested = el.get("itemscope") is not None
        if prop:
            found.append((prop, _item(el, depth + 1) if nested else _value(el)))
        if not nested:
            stack.extend(reversed(list(el)))
    return found


def _value(el: etree._Element) -> str:
    """A microdata property's value (HTML Living Standard, "values")."""
    tag = el.tag
    if tag == "meta":
        return el.get("content", "")
    if tag in ("a", "area", "link"):
        return el.get("href", "")
    if tag in ("img", "audio", "video", "source", "iframe", "embed"):
        return el.get("src", "")
    if tag in ("time",) and el.get("datetime"):
        return el.get("datetime", "")
    if tag in ("data", "meter") and el.get("value") is not None:
        return el.get("value", "")
    return " ".join(el.xpath("string()").split())[:_MAX_TEXT]


def _structured_date(objects: list[dict[str, Any]], field: str) -> str:
    for obj in objects:
        value = obj.get(field)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            date = _iso(value)
            if date:
                return date
    return ""


def _first_date(named: dict[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        date = _iso(named.get(name, ""))
        if date:
            return date
    return ""


def _iso(value: str) -> str:
    """``value`` cut to its ISO 8601 date or date-time, "" when it does not start with one."""
    match = _ISO_DATE.match(value.strip())
    return match.group(0) if match else ""
