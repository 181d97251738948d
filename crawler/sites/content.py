"""``[content]`` of a site config: which kinds of response the crawl reads the text of.

``types`` lists them: ``html`` and the document kinds of ``crawler.content.documents`` (``pdf``,
``docx``, ``odt``, ``text``: plain text). A response of a kind not listed still gives an item
(its URL, status, content type), with no text, no title and no links, as an image does;
its text is neither indexed nor checked for duplicates. ``html`` must be listed: HTML pages are
where the crawl finds its links. The default reads every kind: a crawl keeps what it fetched.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, PlainValidator

from crawler.content.documents import KINDS
from crawler.sites.messages import fail, show

__all__ = ["CONTENT_TYPES", "Content"]

CONTENT_TYPES: tuple[str, ...] = ("html", *KINDS)


def _types(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise fail(f"must be a list of strings, got {show(value)}")
    unknown = [v for v in value if v not in CONTENT_TYPES]
    if unknown:
        raise fail(f"unknown type {show(unknown[0])}: one of {', '.join(CONTENT_TYPES)}")
    if "html" not in value:
        raise fail('must include "html": HTML pages are where the crawl finds its links')
    return tuple(dict.fromkeys(value))


class Content(BaseModel):
    """``[content]`` (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    types: Annotated[tuple[str, ...], PlainValidator(_types)] = CONTENT_TYPES
