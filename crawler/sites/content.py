"""``[content]``: what a site's crawl keeps of the pages it fetches.

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

from pydantic import AfterValidator, BaseModel, ConfigDict

__all__ = ["Content"]

_CODE = re.compile(r"[a-z]{2,3}")


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    codes = tuple(v.strip().lower() for v in values)
    for value in codes:
        if not _CODE.fullmatch(value):
            raise ValueError(f"{value!r} is no ISO 639-1 language code (de, fr, pt...)")
    return tuple(dict.fromkeys(codes))


class Content(BaseModel):
    """The ``[content]`` table (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    languages: Annotated[tuple[str, ...], AfterValidator(_codes)] = ()

    def keeps_language(self, code: str) -> bool:
        """Whether a page whose text is in ``code`` ("" unknown) becomes an item."""
        return not self.languages or not code or code in self.languages
