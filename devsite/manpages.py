"""Real text in many languages, from this machine: the translated manual pages under
``/usr/share/man/<lang>/`` (Debian's manpages-l10n and the packages' own translations).

Language identification must be tested on what people write, not on made-up sentences, and
nothing may be downloaded: the translated manual pages are prose by human translators in twenty
languages. Their paragraphs, roff markup stripped, serve the test site's multilingual pages
(:func:`multilingual_pages`, with OpenGraph, Twitter and JSON-LD metadata) and the labelled set
of ``bench/metadata.py`` (:func:`labelled_paragraphs`).
"""

from __future__ import annotations

import gzip
import html
import json
import re
from pathlib import Path

__all__ = ["MAN_ROOT", "labelled_paragraphs", "multilingual_pages"]

MAN_ROOT = Path("/usr/share/man")
# Directory -> ISO 639-1 code: the languages with ten or more translated pages here.
LANGUAGES = {
    "cs": "cs", "da": "da", "de": "de", "es": "es", "fr": "fr", "hu": "hu", "id": "id",
    "it": "it", "ja": "ja", "ko": "ko", "nl": "nl", "pl": "pl", "pt": "pt", "ro": "ro",
    "ru": "ru", "sl": "sl", "sv": "sv", "tr": "tr", "uk": "uk", "zh_CN": "zh",
}
MIN_CHARS = 200  # a paragraph shorter than this is an option's one-line description
# groff's names of accented letters (groff_char(7)), as translators write them.
_GLYPHS = {
    ":a": "ä", ":o": "ö", ":u": "ü", ":A": "Ä", ":O": "Ö", ":U": "Ü", "oa": "å", "oA": "Å",
    "'e": "é", "'a": "á", "'i": "í", "'o": "ó", "'u": "ú", "'E": "É", "`e": "è", "`a": "à",
    "^e": "ê", "^a": "â", "^o": "ô", "^i": "î", ",c": "ç", ",C": "Ç", "ss": "ß", "~n": "ñ",
    "~a": "ã", "~o": "õ", "/o": "ø", "/O": "Ø", "ae": "æ", "AE": "Æ", "aq": "'", "dq": '"',
    "em": "—", "en": "\u2013", "hy": "-", "lq": "“", "rq": "”", "Fo": "«", "Fc": "»",
}
_GLYPH = re.compile(r"\\(?:\((..)|\[([^]]{2})\])")
_ESCAPE = re.compile(r"\\(?:f(?:\[[^]]*\]|\(..|.)|\(..|\*(?:\(..|\[[^]]*\]|.)|s[-+]?\d|[&|^:%])")
_NOT_PROSE = re.compile(r"[{}<>$=/]|\s-{1,2}\w")  # code, options, paths: not a paragraph of prose
# A translation left partly undone keeps the English paragraph: one whose words are this much
# English function words is not labelled with the directory's language.
_ENGLISH = frozenset({"the", "and", "of", "to", "is", "a", "in", "for", "that", "with", "be",
                      "this", "are", "by", "or", "it", "as", "on", "not"})
_ENGLISH_SHARE = 0.15
# The scripts a language is written in: a paragraph of another script is not its text.
_SCRIPTS = {"ja": "\u3040-\u30ff\u4e00-\u9fff", "zh": "\u4e00-\u9fff",
            "ko": "\uac00-\ud7af", "ru": "\u0400-\u04ff", "uk": "\u0400-\u04ff"}


def _prose(source: str) -> list[str]:
    """The paragraphs of a roff manual page that read as prose (no code, options or paths)."""
    paragraphs: list[str] = []
    lines: list[str] = []
    for line in [*source.splitlines(), ".PP"]:
        if line.startswith((".", "'")) or not line.strip():
            if lines:
                text = " ".join(" ".join(lines).split())
                if len(text) >= MIN_CHARS and not _NOT_PROSE.search(text):
                    paragraphs.append(text)
                lines = []
            continue
        line = line.replace("\\-", "-").replace("\\e", "\\")
        line = _GLYPH.sub(lambda m: _GLYPHS.get(m.group(1) or m.group(2), m.group(0)), line)
        lines.append(_ESCAPE.sub("", line))
    return paragraphs


def _labelled(text: str, code: str) -> bool:
    """Whether ``text`` is fit to be labelled ``code``: not left in English, in its script."""
    words = text.lower().split()
    if sum(w in _ENGLISH for w in words) > _ENGLISH_SHARE * len(words):
        return False
    script = _SCRIPTS.get(code)
    if script is None:
        return True
    letters = [c for c in text if c.isalpha()]
    native = len(re.findall(f"[{script}]", text))
    return native >= 0.5 * len(letters)


def _paragraphs(directory: str, limit: int) -> list[str]:
    """Up to ``limit`` prose paragraphs of the section 1 and 8 pages in ``directory``, in
    file-name order (the same on every run), at most five from one page."""
    found: list[str] = []
    for section in ("man1", "man8", "man5"):
        for path in sorted((MAN_ROOT / directory / section).glob("*.gz")):
            try:
                source = gzip.decompress(path.read_bytes()).decode("utf-8")
            except (OSError, UnicodeDecodeError, EOFError):
                continue
            code = LANGUAGES[directory]
            found.extend([p for p in _prose(source) if _labelled(p, code)][:5])
            if len(found) >= limit:
                return found[:limit]
    return found


def labelled_paragraphs(per_language: int = 60) -> dict[str, list[str]]:
    """Paragraphs by ISO 639-1 code, up to ``per_language`` each; a language with fewer than
    that (or than ten) here is left out."""
    out = {}
    for directory, code in LANGUAGES.items():
        paragraphs = _paragraphs(directory, per_language)
        if len(paragraphs) >= min(per_language, 10):
            out[code] = paragraphs
    return out


# The test site's pages: (path, language of the text, what <html lang> says). The Swedish page
# says it is English, as a theme's default does.
PAGES = (("/de", "de", "de-DE"), ("/fr", "fr", "fr"), ("/ja", "ja", "ja"),
         ("/ru", "ru", "ru"), ("/pt", "pt", "pt-BR"), ("/sv", "sv", "en"))


def multilingual_pages() -> dict[str, str]:
    """A small site of real text in six languages: an index linking to a page per language,
    each with a description, OpenGraph and Twitter cards, a JSON-LD article with its dates,
    a heading, a list, a table and a code block around three paragraphs of a translated
    manual page."""
    links = "".join(f'<li><a href="{path}">{code}</a></li>' for path, code, _ in PAGES)
    pages = {"/": f"<html lang=en><head><title>Languages</title></head><body><main><h1>"
                  f"Manual pages in many languages</h1><ul>{links}</ul></main></body></html>"}
    for number, (path, code, declared) in enumerate(PAGES, 1):
        directory = next(d for d, c in LANGUAGES.items() if c == code)
        paragraphs = [html.escape(p) for p in _paragraphs(directory, 3)]
        title = f"Manual ({code})"
        ld = json.dumps({
            "@context": "https://schema.org", "@type": "TechArticle", "headline": title,
            "inLanguage": code, "datePublished": f"2024-0{number}-15",
            "dateModified": f"2025-0{number}-01T08:00:00Z",
            "author": {"@type": "Organization", "name": "manpages-l10n"},
        }, ensure_ascii=False)
        pages[path] = (
            f'<!DOCTYPE html><html lang="{declared}"><head><meta charset="utf-8">'
            f"<title>{title}</title>"
            f'<meta name="description" content="{paragraphs[0][:120]}">'
            f'<meta property="og:title" content="{title}">'
            f'<meta property="og:type" content="article">'
            f'<meta property="og:locale" content="{code}">'
            f'<meta name="twitter:card" content="summary">'
            f'<script type="application/ld+json">{ld}</script></head>'
            f'<body><nav><a href="/">Home</a></nav><main><article><h1>{title}</h1>'
            f"<p>{paragraphs[0]}</p><h2>{code}</h2><ul><li>{code}-1</li><li>{code}-2</li></ul>"
            f"<p>{paragraphs[1]}</p>"
            f"<table><tr><th>Code</th><th>Page</th></tr><tr><td>{code}</td>"
            f'<td><a href="/">index</a></td></tr></table>'
            f"<pre><code>man -L {code} man</code></pre><p>{paragraphs[2]}</p>"
            f"</article></main><footer>Footer</footer></body></html>"
        )
    return pages
