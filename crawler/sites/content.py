"""``[content]`` of a site config: what a site's crawl reads and keeps of its responses.

``types`` lists the kinds of response the crawl reads the text of: ``html`` and the document
kinds of ``crawler.content.documents`` (``pdf``, ``docx``, ``odt``, ``text``: plain text). A
response of a kind not listed still gives an item (its URL, status, content type), with no text,
no title and no links, as an image does; its text is neither indexed nor checked for duplicates.
``html`` must be listed: HTML pages are where the crawl finds its links. The default reads every
kind: a crawl keeps what it fetched.

``languages``: the languages (ISO 639-1 codes, as ``crawler.content.language`` names them) whose
pages become items; a page in another language is fetched and its links followed (a French
page links to the English ones), but it yields no item, so neither the index nor the feeds
nor the near-duplicate detector see it (counted as ``language/not_kept``). A page whose
language is unknown (too little text, nothing declared) is kept: nothing says it is another.
Empty (the default): every language.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainValidator

from crawler.content.documents import KINDS
from crawler.sites.messages import fail, show

__all__ = ["CONTENT_TYPES", "Content"]

CONTENT_TYPES: tuple[str, ...] = ("html", *KINDS)

_CODE = re.compile(r"[a-z]{2,3}")


def _types(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise fail(f"must be a list of strings, got {show(value)}")
    unknown = [v for v in value if v not in CONTENT_TYPES]
    if unknown:
        raise fail(f"unknown type {show(unknown[0])}: one of {', '.join(CONTENT_TYPES)}")
    if "html" not in value:
        raise fail('must include "html": HTML pages are where the crawl finds its links')
    return tuple(dict.fromkeys(value))


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    codes = tuple(v.strip().lower() for v in values)
    for value in codes:
        if not _CODE.fullmatch(value):
            raise ValueError(f"{value!r} is no ISO 639-1 language code (de, fr, pt...)")
    return tuple(dict.fromkeys(codes))


class Content(BaseModel):
    """``[content]`` (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    types: Annotated[tuple[str, ...], PlainValidator(_types)] = CONTENT_TYPES
    languages: Annotated[tuple[str, ...], AfterValidator(_codes)] = ()

    def keeps_language(self, code: str) -> bool:
        """Whether a page whose text is in ``code`` ("" unknown) becomes an item."""
        return not self.languages or not code or code in self.languages
