"""Site-specific item fields: a site config's ``[fields]`` table, checked at load, applied per page.

A user who wants a page's price, author or tags in the items writes a selector, not a spider::

    [fields]
    byline = ".byline::text"                              # a string: a CSS selector
    author = { css = "meta[name=author]::attr(content)" }
    tags = { xpath = "//a[@rel='tag']/text()", all = true }

Each name becomes a new item field (the built-in fields keep their names and meaning: a name
that is already one is refused). ``all = false`` (the default) keeps the first match, ``true``
a list of every match; whitespace is folded, empty matches dropped; no match is ``null`` (or
``[]``). Selectors are compiled when the config loads, so a typo stops the crawl before any
request. Free of Scrapy (parsel and lxml only), like the site config module that uses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lxml import etree
from parsel import Selector
from parsel.csstranslator import HTMLTranslator

from crawler.content.document import decode_html
from crawler.items import PAGE_FIELDS

# A [fields] name may not take one of the page item's own.
BUILTIN_FIELDS = frozenset(PAGE_FIELDS)
FIELD_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
_TABLE_KEYS = ("css", "xpath", "all")


class FieldSpecError(ValueError):
    """What is wrong with one ``[fields]`` entry; ``key`` is the sub-key at fault, if any."""

    def __init__(self, problem: str, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.key = key


@dataclass(frozen=True)
class FieldSpec:
    """One extra item field: its selector (as XPath, CSS already translated) and whether it
    keeps every match."""

    selector: str  # as written
    kind: str  # "css" or "xpath"
    all: bool = False

    @cached_property
    def xpath(self) -> str:
        return HTMLTranslator().css_to_xpath(self.selector) if self.kind == "css" else self.selector

    def extract(self, page: Selector) -> str | list[str] | None:
        values = page.xpath(self.xpath).getall()
        texts = [t for t in (" ".join(v.split()) for v in values if isinstance(v, str)) if t]
        if self.all:
            return texts
        return texts[0] if texts else None


def field_name_problem(name: str) -> str | None:
    if not FIELD_NAME_RE.match(name):
        return "field names are lower_case identifiers (letters, digits, _)"
    if name in BUILTIN_FIELDS:
        return f"{name} is a built-in item field; give the new field another name"
    return None


def parse_field_spec(value: object) -> FieldSpec:
    """A ``[fields]`` value as :class:`FieldSpec`; raises :class:`FieldSpecError`."""
    if isinstance(value, str):
        return _compiled(FieldSpec(_selector(value, None), "css"), None)
    if not isinstance(value, Mapping):
        raise FieldSpecError(
            f"must be a CSS selector string or a table with css or xpath, got {value!r}"
        )
    for key in value:
        if key not in _TABLE_KEYS:
            raise FieldSpecError(f"unknown key (known keys: {', '.join(_TABLE_KEYS)})", key)
    given = [k for k in ("css", "xpath") if k in value]
    if len(given) != 1:
        raise FieldSpecError("give one of css or xpath" + (", not both" if given else ""))
    kind = given[0]
    every = value.get("all", False)
    if not isinstance(every, bool):
        raise FieldSpecError(f"must be true or false, got {every!r}", "all")
    return _compiled(FieldSpec(_selector(value[kind], kind), kind, every), kind)


def _selector(value: object, key: str | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FieldSpecError(f"must be a non-empty selector string, got {value!r}", key)
    return value.strip()


def _compiled(spec: FieldSpec, key: str | None) -> FieldSpec:
    """Refuse a selector that does not compile, in the words of its language."""
    try:
        etree.XPath(spec.xpath)
    except Exception as exc:  # cssselect's SelectorError, lxml's XPathSyntaxError, ...
        what = "CSS selector" if spec.kind == "css" else "XPath expression"
        raise FieldSpecError(f"not a valid {what}: {exc}", key) from None
    return spec


def page_selector(body: bytes, encoding: str | None) -> Selector:
    """An HTML page as a selector, decoded as the crawler decodes a page
    (:func:`crawler.content.document.decode_html`; ``encoding``: the ``Content-Type``
    charset), not as ``response.css`` would (w3lib's)."""
    return Selector(text=decode_html(body, encoding), type="html")


def extract_fields(
    specs: Mapping[str, FieldSpec], body: bytes, encoding: str | None
) -> dict[str, Any]:
    """Every field of ``specs`` from one HTML page: ``body`` decoded as the crawler decodes a
    page (:func:`crawler.content.document.decode_html`; ``encoding``: the ``Content-Type``
    charset), so a field reads the text the page's title and main text come from."""
    if not specs:
        return {}
    try:
        page = page_selector(body, encoding)
    except (ValueError, TypeError):  # lxml could make no document of it: no field values
        return {name: [] if spec.all else None for name, spec in specs.items()}
    return {name: spec.extract(page) for name, spec in specs.items()}
