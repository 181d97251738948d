"""The main content of a page as Markdown: headings, lists, tables, links, code blocks.

Search and language-model pipelines read Markdown (Firecrawl and crawl4ai return it): the main
text alone loses what a heading, a list item or a code block is, and every link. This renders
the blocks the main-text walk chose (:func:`crawler.content.maintext.main_blocks_from_tree`),
so the Markdown says exactly what the main text says, from the tree the spider parsed once:

* a block's element gives its kind: ``h1``-``h6`` a heading, ``li`` a list item (indented by
  its nesting, numbered inside an ``ol``), a cell of a table row one row of a pipe table,
  ``pre`` a fenced code block (its text as written, whitespace and all), ``blockquote`` a
  quote, ``dt`` a bold term; the rest a paragraph;
* a block whose element holds no other block element is rendered inline from the tree:
  links (made absolute against the page's base URL), ``code``, bold and italic, images;
  a block inside a larger one (a ``div``'s loose text) keeps its plain text.

Why not a library: markdownify and html2text walk the whole page again in Python (the spider
already walked it once for the main text) and know nothing of which part is the content;
``bench/metadata.py`` measures the cost of this renderer per page.
"""

from __future__ import annotations

import contextlib

from lxml import etree

from crawler.content.maintext import _BLOCK_TAGS, MainBlock
from crawler.net.weburl import join as web_join

__all__ = ["render_markdown"]

_HEADINGS = {f"h{n}": "#" * n for n in range(1, 7)}
_INNER_BLOCKS = tuple(sorted(_BLOCK_TAGS - {"br"}))
_CODE = frozenset({"code", "kbd", "samp", "tt", "var"})
_HOLDERS = ("td", "th", "pre", "blockquote")

_STRONG = frozenset({"strong", "b"})
_EMPHASIS = frozenset({"em", "i", "cite"})
_MARKED = frozenset({"a"}) | _CODE | _STRONG | _EMPHASIS
_BREAK = "\x00"  # a <br> while the text is folded (no whitespace to split(); not in HTML text)
_string = etree.XPath("string()", smart_strings=False)


def render_markdown(blocks: list[MainBlock], base_url: str = "") -> str:
    """``blocks`` (the main text's, in document order) as one Markdown document; relative
    links and images are joined to ``base_url`` (the page's URL or its ``<base href>``)."""
    out: list[tuple[str, str]] = []  # (kind, markdown): kinds decide the blank lines
    done: set[etree._Element] = set()
    tables: set[etree._Element] = set()  # tables whose header row is out
    for el, text in blocks:
        if el in done:
            continue
        tag = el.tag
        # what holds the block: a table cell, a pre, a blockquote (one lookup, in C)
        holder = el if tag in _HOLDERS else next(el.iterancestors(*_HOLDERS), None)
        if holder is not None:
            kind = holder.tag
            if kind in ("td", "th"):
                row = holder.getparent()
                if row is not None and row not in done:
                    done.add(row)
                    out.extend(_row(row, base_url, tables))
                continue
            if kind == "pre":
                if holder not in done:
                    done.add(holder)
                    out.append(("pre", _fence(holder)))
                continue
        if _childless(el):  # plain text: the walk's is the same
            line = text
        else:
            inline = _inline(el, base_url)
            if inline is None:  # it holds blocks of its own: this one is its loose text
                line = text
            else:
                done.add(el)
                line = inline or text
        kind = "p"
        if tag in _HEADINGS:
            line = f"{_HEADINGS[tag]} {line}"
        elif tag == "li":
            lists = list(el.iterancestors("ul", "ol"))
            kind = f"li{id(lists[-1])}" if lists else "li"  # one list, no blank line
            line = _item_marker(el, len(lists)) + line
        elif tag == "dt":
            line = f"**{line}**"
        if holder is not None:  # a blockquote
            kind = "quote"
            line = "\n".join(f"> {part}" for part in line.split("\n"))
        out.append((kind, line))
    return _join(out)


def _childless(el: etree._Element) -> bool:
    """Whether ``el`` has no child (``len()`` counts them all: a ``div`` of 500 children
    holding 200 blocks of loose text would count them 200 times)."""
    try:
        el[0]
    except IndexError:
        return True
    return False


def _join(out: list[tuple[str, str]]) -> str:
    """Blocks separated by a blank line; list items, table rows and a quote's lines by a
    line break (a blank line would end the list, the table, the quote)."""
    parts: list[str] = []
    last = ""
    for kind, markdown in out:
        if parts:
            tight = kind == last and kind.startswith(("li", "tr", "quote"))
            parts.append("\n" if tight else "\n\n")
        parts.append(markdown)
        last = kind
    return "".join(parts)


def _ancestor(el: etree._Element, tags: tuple[str, ...]) -> etree._Element | None:
    return next(el.iterancestors(*tags), None)


def _item_marker(li: etree._Element, depth: int) -> str:
    """``- `` or ``3. `` (an ``ol``'s third item), indented two spaces a level of nesting
    below the first (``depth``: lists around ``li``)."""
    depth -= 1
    parent = li.getparent()
    if parent is not None and parent.tag == "ol":
        number = sum(1 for _ in li.itersiblings("li", preceding=True)) + 1
        marker = f"{number}. "
    else:
        marker = "- "
    return "  " * max(depth, 0) + marker


def _row(row: etree._Element, base_url: str, tables: set[etree._Element]) -> list[tuple[str, str]]:
    """One table row as a pipe-table line; after a table's first row, the separator line
    (Markdown tables need a header: the first row is it)."""
    cells = [c for c in row if c.tag in ("td", "th")]
    texts = []
    for cell in cells:
        text = _inline(cell, base_url)
        if text is None:  # blocks in the cell: its text
            text = " ".join(_string(cell).split())
        texts.append(text.replace("|", "\\|").replace("\n", " "))
    lines = [("tr", "| " + " | ".join(texts) + " |")]
    table = _ancestor(row, ("table",))
    if table is not None and table not in tables:
        tables.add(table)
        lines.append(("tr", "|" + " --- |" * len(cells)))
    return lines


def _fence(pre: etree._Element) -> str:
    """A code block as written (a ``pre``'s whitespace is its meaning), fenced with more
    backticks than it holds in a row."""
    code = _string(pre).strip("\n")
    fence = "```"
    while fence in code:
        fence += "`"
    language = ""
    for name in f"{pre.get('class', '')} {_child_class(pre)}".split():
        if name.startswith("language-"):
            language = name[len("language-") :]
            break
    return f"{fence}{language}\n{code}\n{fence}"


def _child_class(pre: etree._Element) -> str:
    """The class of a ``pre``'s ``code`` child (``<pre><code class="language-python">``)."""
    if len(pre) and pre[0].tag == "code":
        return pre[0].get("class", "")
    return ""


def _inline(el: etree._Element, base_url: str) -> str | None:
    """The text of ``el`` with its links, code, emphasis and images marked up; whitespace
    folded, a ``<br>`` kept as a line break. None when ``el`` holds a block element.

    One ``iterwalk`` (its events from C) rather than a Python call per element: this is most
    of the renderer's cost (``bench/metadata.py``)."""
    parts: list[str] = []
    starts: list[int] = []  # where each open marked-up element's text starts in parts
    walker = etree.iterwalk(el, events=("start", "end"))
    for event, node in walker:
        if node is el:
            if event == "start":
                if node.text:
                    parts.append(node.text)
                continue
            break
        tag = node.tag
        if event == "start":
            if tag == "br":
                parts.append(_BREAK)
            elif tag == "img":
                src = node.get("src", "").strip()
                if src:
                    alt = " ".join(node.get("alt", "").split())
                    parts.append(f"![{alt}]({_url(src, base_url)})")
            elif tag in _BLOCK_TAGS:
                return None
            elif tag in _MARKED:
                starts.append(len(parts))
            if node.text:
                parts.append(node.text)
            continue
        if tag in _MARKED:
            start = starts.pop()
            inner = "".join(parts[start:])
            del parts[start:]
            text = " ".join(inner.split())
            if text:
                # spaces at the edges go outside the markup ("a<a> b</a>": "a [b](...)")
                lead = " " if inner[:1].isspace() else ""
                trail = " " if inner[-1:].isspace() else ""
                parts.append(lead + _marked(node, tag, text, base_url) + trail)
        if node.tail:
            parts.append(node.tail)
    # source newlines are whitespace like any other; only a <br> breaks the line
    lines = "".join(parts).split(_BREAK)
    return "\n".join(filter(None, (" ".join(line.split()) for line in lines)))


def _marked(child: etree._Element, tag: str, text: str, base_url: str) -> str:
    if tag == "a":
        href = child.get("href", "").strip()
        if href.startswith("#") and not any(c.isalnum() for c in text):
            return ""  # a heading's permalink mark ("¶", "#", "§")
        if href and not href.startswith(("#", "javascript:")):
            return f"[{text}]({_url(href, base_url)})"
        return text
    if tag in _CODE:
        return f"`{text}`"
    if tag in _STRONG:
        return f"**{text}**"
    if tag in _EMPHASIS:
        return f"*{text}*"
    return text


def _url(href: str, base_url: str) -> str:
    """``href`` joined to the base URL, spaces escaped (a Markdown link ends at a space)."""
    if base_url and not href.startswith(("http://", "https://")):
        with contextlib.suppress(ValueError):  # a broken href stays as written
            href = web_join(base_url, href)
    return href.replace(" ", "%20").replace(")", "%29")
