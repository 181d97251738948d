"""Label the pages of the main-text set: each page's main text is written from CSS selectors.

Every label in ``manifest.tsv`` names, for its page, the element(s) holding the article body as a
reader sees it (``keep``: one or more CSS selectors, comma-separated as CSS allows, taken in
document order) and what inside them is not (``drop``: share bars, "related" boxes, comments,
ads, captions of nothing). The selectors were chosen by reading each page; writing the label from
them (rather than by hand-copying text) keeps labels reproducible and reviewable: a wrong label is
a wrong selector in one line of the manifest. The text is cut into one line per block element,
as a reader sees paragraphs.

    .venv/bin/python bench/maintext_set/label.py outline PAGE.html.gz   # candidate containers
    .venv/bin/python bench/maintext_set/label.py show NAME              # the label of one page
    .venv/bin/python bench/maintext_set/label.py write                  # (re)write every .txt
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from lxml import etree, html
from w3lib.encoding import html_to_unicode

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.tsv"
PAGES = HERE / "pages"
HELD_OUT_SHARE = 5  # of 16: a page is held out when its name's SHA-1 starts with 0-4 (~31 %)
_NEVER_TEXT = ("script", "style", "noscript", "template", "svg", "head", "button", "select",
               "textarea", "iframe")
_BLOCKS = frozenset({
    "address", "article", "blockquote", "caption", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "ol",
    "p", "pre", "section", "table", "td", "th", "tr", "ul", "br", "aside", "nav", "form",
})


@dataclass(frozen=True)
class Entry:
    """One page of the set: its file, where it came from, and how its label is cut."""

    name: str  # file name under pages/ without .html.gz
    platform: str
    source: str
    keep: str
    drop: str

    @property
    def held_out(self) -> bool:
        return held_out(self.name)

    @property
    def page(self) -> Path:
        return PAGES / f"{self.name}.html.gz"

    @property
    def label(self) -> Path:
        return PAGES / f"{self.name}.txt"


def held_out(name: str) -> bool:
    """The fixed rule that keeps ~30 % of the set out of tuning: the first hex digit of the
    SHA-1 of the page's name."""
    return int(hashlib.sha1(name.encode()).hexdigest()[0], 16) < HELD_OUT_SHARE


def entries() -> list[Entry]:
    with MANIFEST.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    header, *rows = rows
    assert header == ["name", "platform", "source", "keep", "drop"], header
    return [Entry(*r) for r in rows]


def read_page(path: Path) -> bytes:
    """A page of the set (gzipped), or any HTML file (to outline a candidate page)."""
    body = path.read_bytes()
    return gzip.decompress(body) if path.suffix == ".gz" else body


def parse(body: bytes) -> etree._Element:
    """The page as a browser reads it: decoded by its BOM, its ``<meta>`` charset, else UTF-8
    (w3lib, what Scrapy does; the pages were saved without their HTTP headers)."""
    _, text = html_to_unicode(None, body)
    return html.document_fromstring(text)


def label_text(body: bytes, keep: str, drop: str) -> str:
    """The text of the elements ``keep`` selects without those ``drop`` selects, a line per
    block."""
    root = parse(body)
    etree.strip_elements(root, *_NEVER_TEXT, etree.Comment, with_tail=False)
    if drop:
        for el in root.cssselect(drop):
            if el.getparent() is not None:
                el.drop_tree()
    kept = root.cssselect(keep)
    if not kept:
        raise ValueError(f"no element matches {keep!r}")
    # an element held by another kept one is already in it
    chosen = set(kept)
    tops = [el for el in kept if not any(a in chosen for a in el.iterancestors())]
    lines: list[str] = []
    for el in tops:
        _lines(el, lines)
    return "\n".join(line for line in (" ".join(x.split()) for x in lines) if line)


def _lines(el: etree._Element, lines: list[str]) -> None:
    parts: list[str] = []

    def walk(node: etree._Element) -> None:
        block = isinstance(node.tag, str) and node.tag in _BLOCKS
        if block:
            lines.append("".join(parts))
            parts.clear()
        if node.text:
            parts.append(node.text)
        for child in node:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if block:
            lines.append("".join(parts))
            parts.clear()

    walk(el)
    lines.append("".join(parts))


def outline(path: Path, min_chars: int = 300) -> None:
    """Containers with at least ``min_chars`` of text, indented, with their text size, the
    share of it in links and their first and last words: where to look for the body."""
    root = parse(read_page(path))
    etree.strip_elements(root, *_NEVER_TEXT, etree.Comment, with_tail=False)
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag not in _BLOCKS | {"body", "main", "article"}:
            continue
        text = " ".join(el.text_content().split())
        if len(text) < min_chars or any(
            len(" ".join(c.text_content().split())) >= 0.92 * len(text) for c in el
            if isinstance(c.tag, str)
        ):  # shorter than asked, or one link of a chain of wrappers (its child is shown)
            continue
        links = sum(len(" ".join(a.text_content().split())) for a in el.iter("a"))
        depth = sum(1 for _ in el.iterancestors())
        ident = el.tag + (f"#{el.get('id')}" if el.get("id") else "")
        if el.get("class"):
            ident += "." + ".".join(el.get("class").split())
        print(f"{'  ' * depth}{ident[:90]} {len(text)}c {links / len(text):.0%}L "
              f"| {text[:60]} ... {text[-40:]}")


def main(argv: list[str]) -> None:
    command = argv[0] if argv else "write"
    if command == "outline":
        outline(Path(argv[1]), int(argv[2]) if len(argv) > 2 else 300)
    elif command == "show":
        entry = next(e for e in entries() if e.name == argv[1])
        print(label_text(read_page(entry.page), entry.keep, entry.drop))
    elif command == "write":
        for entry in entries():
            text = label_text(read_page(entry.page), entry.keep, entry.drop)
            entry.label.write_text(text + "\n", encoding="utf-8")
            print(f"{entry.name:45s} {'held-out' if entry.held_out else 'tuning':8s} "
                  f"{len(text):7d} chars")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
