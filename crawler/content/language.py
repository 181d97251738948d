"""The language of a page's text: a language-ID model shipped inside a PyPI package, checked
against what the page declares (``<html lang>``).

py3langid (a maintained fork of langid.py: a naive Bayes model over byte n-grams of 97
languages, its model inside the wheel, nothing downloaded at run time) identifies the text.
Pages declare their language carelessly (a theme's ``lang="en"`` over a French blog), so the
text decides when there is enough of it; a short text (a heading and a menu) tells the model
too little, and there the declaration, when there is one, wins. ``bench/metadata.py`` measures
the model's accuracy on real text of this machine in more than ten languages, with a held-out
part, and its cost per page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Language", "declared_language", "identify_language"]

# Characters of text read: the model reads them byte by byte in Python (~0.1 ms per 500), and
# whole paragraphs of 200 characters and more are all identified (bench/metadata.py).
SAMPLE_CHARS = 500
# Fewer letters than this: the text alone is too little to overrule a declaration.
MIN_LETTERS = 60

_identifier: Any = None


@dataclass(frozen=True, slots=True)
class Language:
    """A page's language: ``code`` (ISO 639-1, lower case; "" unknown), ``declared`` (the
    primary subtag of ``<html lang>``, "" none), and where ``code`` came from: "text" (the
    model) or "declared"."""

    code: str = ""
    declared: str = ""
    source: str = ""

    @property
    def agrees(self) -> bool | None:
        """Whether the text's language is the declared one (None: nothing to compare)."""
        if not self.declared or self.source != "text":
            return None
        return self.code == self.declared


def declared_language(value: str | None) -> str:
    """The primary language subtag of a ``lang`` attribute (BCP 47: ``pt-BR`` -> ``pt``)."""
    if not value:
        return ""
    primary = value.strip().replace("_", "-").split("-", 1)[0].lower()
    return primary if primary.isalpha() and 2 <= len(primary) <= 3 else ""


def identify_language(text: str, declared: str = "") -> Language:
    """The language of ``text``; ``declared`` is the page's ``<html lang>`` as written."""
    declared = declared_language(declared)
    sample = text[:SAMPLE_CHARS]
    letters = sum(map(str.isalpha, sample))
    if letters < MIN_LETTERS:
        return Language(declared, declared, "declared" if declared else "")
    code = _model().classify(sample)[0]
    return Language(code, declared, "text")


def _model() -> Any:
    """The model, loaded once per process (~0.5 s and ~90 MB of memory: kept out of import,
    so a crawl that never reads a page's language does not pay it; the content analysis calls
    it in the crawl's process only, never in the parse child)."""
    global _identifier
    if _identifier is None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        _identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    return _identifier
