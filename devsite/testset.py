"""A labelled near-duplicate test set, built deterministically from real prose on any machine.

There is no network in tests, and random words would make every pair trivially different, so the
pages are made of real English prose that ships with every CPython: the language reference
(``pydoc_data.topics``) and the docstrings of stdlib modules. Labels come from construction:

* **originals** are different documents, laid out on a few *sites*; every page of a site shares
  the site's template (header, navigation, a sidebar with prose, a quote of the day, a footer with
  a counter and a date), in one of three markup styles (HTML5 landmarks, ``div`` soup with
  telling ids, and a table layout whose class names say nothing). Any two originals are a
  negative pair; originals cut from one module's documentation are the hard negatives.
* **variants** are positives of exactly one original: its chrome re-rendered (other counter,
  date, quote, session ids), timestamps in the article changed, session ids in every link, under
  10 % of its words edited (scattered or in one run), the same page on a mirror host, or chrome
  and edits together.

The tests use a small set; ``bench/neardup.py`` a larger one. Everything depends only on the seed
and the CPython version (whose docstrings change slightly between releases).
"""

from __future__ import annotations

import html
import importlib
import inspect
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

__all__ = [
    "VARIANT_KINDS",
    "Document",
    "LabelledSet",
    "Page",
    "Site",
    "build_labelled_set",
    "corpus_paragraphs",
    "documents",
    "make_sites",
    "page_item",
    "random_chrome",
    "render_page",
    "sentence_pool",
    "text_pages",
]

_MODULES_TEXT = (
    "argparse asyncio.base_events asyncio.streams collections concurrent.futures._base "
    "configparser contextlib csv dataclasses datetime decimal difflib email.message email.utils "
    "enum functools heapq http.client http.cookies http.server imaplib inspect ipaddress "
    "itertools json logging logging.handlers os pathlib pydoc random re shutil smtplib socket "
    "sqlite3 ssl statistics subprocess tarfile tempfile textwrap threading typing unittest.case "
    "unittest.mock urllib.parse urllib.request uuid xml.etree.ElementTree zipfile ftplib pdb bdb "
    "cmd codecs copy doctest filecmp getopt gzip hashlib io locale mimetypes optparse platform "
    "poplib queue sched selectors shelve site socketserver sysconfig tokenize traceback "
    "warnings weakref wave xmlrpc.client zipimport calendar base64 ast profile pstats timeit "
    "graphlib"
)
_MODULES = _MODULES_TEXT.split()

VARIANT_KINDS = ("chrome", "timestamp", "session", "edit", "mirror", "chrome+edit")


@dataclass(frozen=True)
class Document:
    """The main content of one page: a title and its paragraphs of prose."""

    source: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def words(self) -> int:
        return sum(len(p.split()) for p in self.paragraphs)


@dataclass
class Page:
    """One rendered page: what a spider would fetch."""

    url: str
    html: str
    doc: Document
    chrome: Chrome | None = None
    kind: str = "original"  # or one of VARIANT_KINDS
    original: int | None = None  # index into LabelledSet.originals for variants
    edit_fraction: float = 0.0


@dataclass
class LabelledSet:
    originals: list[Page] = field(default_factory=list)
    variants: list[Page] = field(default_factory=list)


@lru_cache(maxsize=1)
def corpus_paragraphs() -> tuple[tuple[str, str], ...]:
    """(source, paragraph) pairs of real prose, each paragraph unique, in a fixed order."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(source: str, text: str) -> None:
        for para in re.split(r"\n\s*\n", text):
            words = para.split()
            if len(words) < 12 or sum(w.isalpha() for w in words) < 0.6 * len(words):
                continue  # code samples, grammar rules, tables
            key = " ".join(words).lower()
            if key not in seen:
                seen.add(key)
                out.append((source, " ".join(words)))

    from pydoc_data.topics import topics

    for name in sorted(topics):
        add(f"ref:{name}", topics[name])
    with warnings.catch_warnings():  # e.g. typing.io warns when its docstring is read
        warnings.simplefilter("ignore", DeprecationWarning)
        _add_docstrings(add)
    return tuple(out)


def _add_docstrings(add: Callable[[str, str], None]) -> None:
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a stripped-down Python without, e.g., sqlite3
            continue
        add(name, inspect.getdoc(module) or "")
        for attr in sorted(vars(module)):
            obj = vars(module)[attr]
            if attr.startswith("_") or inspect.ismodule(obj):
                continue
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            add(name, inspect.getdoc(obj) or "")
            if inspect.isclass(obj):
                for meth in sorted(vars(obj)):
                    member = vars(obj)[meth]
                    if not meth.startswith("_") and callable(member):
                        add(name, inspect.getdoc(member) or "")


def documents(min_words: int = 250, max_words: int = 1100, seed: int = 7) -> list[Document]:
    """Cut the corpus into documents of consecutive paragraphs of one source each.

    The last paragraphs of a source that do not reach ``min_words`` are dropped (they would make
    pages that are mostly template, which :func:`build_labelled_set` adds on purpose instead).
    """
    rng = random.Random(seed)
    docs: list[Document] = []
    by_source: dict[str, list[str]] = {}
    for source, para in corpus_paragraphs():
        by_source.setdefault(source.split(":")[0], []).append(para)
    for source, paras in by_source.items():
        part, words, target = [], 0, rng.randint(min_words, max_words)
        for para in paras:
            part.append(para)
            words += len(para.split())
            if words >= target:
                docs.append(_document(source, len(docs), part))
                part, words, target = [], 0, rng.randint(min_words, max_words)
    return docs


def _document(source: str, number: int, paragraphs: list[str]) -> Document:
    first = paragraphs[0].split()
    title = " ".join(first[: min(8, len(first))]).rstrip(".,:;")
    return Document(source=source, title=f"{title} ({number})", paragraphs=tuple(paragraphs))


# --- templates ------------------------------------------------------------------------------


@dataclass
class Site:
    """What every page of one site shares."""

    host: str
    name: str
    style: str  # "landmarks", "divs" or "table"
    tagline: str
    about: str
    nav: list[tuple[str, str]]
    tags: list[tuple[str, str]]
    footer_links: list[tuple[str, str]]
    copyright: str
    date_style: int = 0


@dataclass
class Chrome:
    """What changes from one fetch of a page to the next without changing its content."""

    counter: int
    when: str
    session: str
    quote: str
    popular: list[tuple[str, str]]
    comments: int
    views: int


def sentence_pool() -> list[str]:
    """Sentences for template text (taglines, about boxes, quotes), from the corpus' tail."""
    sentences = []
    for _, para in corpus_paragraphs()[-400:]:
        sentences.extend(s for s in re.split(r"(?<=[.!?])\s+", para) if 8 <= len(s.split()) <= 30)
    return sentences


def make_sites(rng: random.Random, count: int, titles: list[str]) -> list[Site]:
    """Sites with heavy templates: a 40-link menu, a tag cloud, a 20-link footer, legal text.

    About 400 words of chrome per page, as on many real sites: enough that the whole visible
    text of two different short pages of one site is mostly the same.
    """
    pool = sentence_pool()
    words = sorted({w.strip(".,:;()\"'").lower() for t in titles for w in t.split()} - {""})
    sites = []
    for i in range(count):
        style = ("landmarks", "divs", "table")[i % 3]
        name = f"{rng.choice(['Python', 'Library', 'Reference', 'Field'])} Notes {i}"
        nav_titles = rng.sample(titles, 40)
        foot = rng.sample(titles, 20)
        legal = " ".join(rng.sample(pool, 2))
        sites.append(
            Site(
                host=f"site{i}.test",
                name=name,
                style=style,
                tagline=rng.choice(pool),
                about=" ".join(rng.sample(pool, 3)),
                nav=[(f"/section/{j}.html", _short(t, 40)) for j, t in enumerate(nav_titles)],
                tags=[(f"/tag/{w}.html", w) for w in rng.sample(words, 25)],
                footer_links=[(f"/more/{j}.html", _short(t, 30)) for j, t in enumerate(foot)],
                copyright=f"Copyright {name}. All rights reserved. {legal}",
                date_style=rng.randrange(3),
            )
        )
    return sites


def _short(title: str, length: int) -> str:
    return title.split(" (")[0][:length]


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def random_chrome(
    rng: random.Random, titles: list[str], pool: list[str], date_style: int = 0
) -> Chrome:
    """Fresh chrome; ``date_style`` is the site's one way of writing dates."""
    day, month, year = rng.randint(1, 28), rng.randint(0, 11), rng.randint(2015, 2026)
    hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    when = (
        f"{rng.choice(_WEEKDAYS)}, {_MONTHS[month]} {day}, {year} at {hour}:{minute:02d}",
        f"{year}-{month + 1:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z",
        f"{day} {_MONTHS[month][:3]} {year}, {hour:02d}:{minute:02d}",
    )[date_style % 3]
    return Chrome(
        counter=rng.randint(1000, 9_999_999),
        when=when,
        session="".join(rng.choice("abcdef0123456789") for _ in range(rng.choice([16, 24, 32]))),
        quote=rng.choice(pool),
        popular=[(f"/p/{rng.randint(1, 999)}.html", _short(t, 50)) for t in rng.sample(titles, 6)],
        comments=rng.randint(0, 300),
        views=rng.randint(10, 100_000),
    )


def _links(links: list[tuple[str, str]], base: str, session: str) -> str:
    sid = f"?sid={session}" if session else ""
    return "".join(
        f'<li><a href="{"" if href.startswith("http") else base}{html.escape(href)}{sid}">'
        f"{html.escape(text)}</a></li>"
        for href, text in links
    )


def render_page(
    site: Site, doc: Document, chrome: Chrome, host: str | None = None, session_links: bool = False
) -> str:
    """The HTML of ``doc`` on ``site`` with ``chrome``; ``host`` renders it on a mirror."""
    host = host or site.host
    base = f"http://{host}"
    sid = chrome.session if session_links else ""
    e = html.escape
    body = "".join(f"<p>{e(p)}</p>\n" for p in doc.paragraphs)
    byline = f"Posted on {e(chrome.when)} · {chrome.views} views · {chrome.comments} comments"
    nav = _links(site.nav, base, sid)
    foot = _links(site.footer_links, base, sid)
    popular = _links(chrome.popular, base, sid)
    tags = _links(site.tags, base, sid)
    session_note = f"<p>Your session: {chrome.session}</p>" if session_links else ""
    head = (
        f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{e(doc.title)} | "
        f"{e(site.name)}</title><style>body{{font:16px serif}} .x{{color:red}}</style>"
        f'<script>var session="{chrome.session}"; var counter={chrome.counter};</script>'
        "</head>\n"
    )
    footer_text = (
        f"{e(site.copyright)} Visitors: {chrome.counter}. Page generated {e(chrome.when)}."
    )
    if site.style == "landmarks":
        page = (
            f'<body><header><a class="logo" href="{base}/">{e(site.name)}</a>'
            f"<p>{e(site.tagline)}</p><form role=search><input name=q><button>Search</button>"
            f"</form></header>\n<nav><ul>{nav}</ul></nav>\n<div class=layout><main><article>"
            f"<h1>{e(doc.title)}</h1><p class=byline>{byline}</p>\n{body}</article>"
            f"<section class=comments><h2>Comments ({chrome.comments})</h2></section></main>\n"
            f"<aside><h3>About this site</h3><p>{e(site.about)}</p><h3>Popular</h3>"
            f"<ul>{popular}</ul><h3>Tags</h3><ul class=tags>{tags}</ul><h3>Quote of the day</h3>"
            f"<blockquote>{e(chrome.quote)}"
            f"</blockquote></aside></div>\n<footer><p>{footer_text}</p><ul>{foot}</ul>"
            f"{session_note}</footer></body></html>"
        )
    elif site.style == "divs":
        page = (
            f'<body><div id="header"><div class="logo"><a href="{base}/">{e(site.name)}</a>'
            f"</div><div class=tagline>{e(site.tagline)}</div></div>\n"
            f'<div id="menu"><ul>{nav}</ul></div>\n<div id="wrapper"><div id="content">'
            f"<h1>{e(doc.title)}</h1><div class=date>{byline}</div>\n{body}</div>\n"
            f'<div id="sidebar"><h3>About this site</h3><div>{e(site.about)}</div>'
            f"<h3>Popular</h3><ul>{popular}</ul><h3>Tags</h3><ul>{tags}</ul>"
            f"<h3>Quote of the day</h3><div class=quote>{e(chrome.quote)}</div></div></div>\n"
            f'<div id="footer">{footer_text}<ul>{foot}</ul>{session_note}</div></body></html>'
        )
    else:  # a table layout with class names that say nothing
        page = (
            f'<body><table width="100%"><tr><td colspan=3 class=t1><b>{e(site.name)}</b> - '
            f"{e(site.tagline)}</td></tr>\n<tr><td class=c1 valign=top><ul>{nav}</ul>"
            f"<p>{e(site.about)}</p></td>\n<td class=c2 valign=top><h1>{e(doc.title)}</h1>"
            f"<font size=2>{byline}</font>\n{body}</td>\n<td class=c3 valign=top>"
            f"<b>Popular</b><ul>{popular}</ul><b>Tags</b><ul>{tags}</ul>"
            f"<b>Quote of the day</b><br>{e(chrome.quote)}"
            f"</td></tr>\n<tr><td colspan=3 class=t2>{footer_text}<ul>{foot}</ul>"
            f"{session_note}</td></tr></table></body></html>"
        )
    return head + page


# --- edits ----------------------------------------------------------------------------------


def _edit(doc: Document, fraction: float, rng: random.Random, vocabulary: list[str]) -> Document:
    """Edit about ``fraction`` of the words: substitutions, insertions, deletions.

    Half of the edits are scattered over the text (the worst case for shingles: each edited word
    breaks every shingle that covers it), the other half hit one contiguous run.
    """
    words = [w for p in doc.paragraphs for w in p.split()]
    sizes = [len(p.split()) for p in doc.paragraphs]
    n_edits = max(1, round(fraction * len(words)))
    if rng.random() < 0.5:
        positions = rng.sample(range(len(words)), min(n_edits, len(words)))
    else:
        start = rng.randrange(max(1, len(words) - n_edits))
        positions = list(range(start, min(len(words), start + n_edits)))
    ops: dict[int, str] = {p: rng.choice(("sub", "sub", "ins", "del")) for p in positions}
    out: list[str] = []
    para_ends, total = set(), 0
    for size in sizes:
        total += size
        para_ends.add(total)
    paragraphs: list[str] = []
    for i, word in enumerate(words):
        op = ops.get(i)
        if op == "sub":
            out.append(rng.choice(vocabulary))
        elif op == "ins":
            out.extend((word, rng.choice(vocabulary)))
        elif op != "del":
            out.append(word)
        if i + 1 in para_ends and out:
            paragraphs.append(" ".join(out))
            out = []
    return Document(doc.source, doc.title, tuple(paragraphs))


# --- the set --------------------------------------------------------------------------------


def build_labelled_set(
    pages: int = 120,
    variants_per_page: int = 3,
    sites: int = 6,
    short_pages: int | None = None,
    seed: int = 20240501,
) -> LabelledSet:
    """Originals spread over ``sites`` template-sharing sites, and their labelled variants.

    ``short_pages`` of the originals (default: a fifth) are cut to 40-120 words, so that the
    template dominates the page: the hardest case for telling different pages of one site apart.
    """
    if short_pages is None:
        short_pages = pages // 5
    rng = random.Random(seed)
    docs = documents(seed=seed)
    if pages > len(docs):
        raise ValueError(f"only {len(docs)} documents in the corpus, asked for {pages}")
    # Keep documents of one source together (hard negatives), on the same site.
    start = rng.randrange(len(docs) - pages + 1)
    chosen = docs[start : start + pages]
    titles = [d.title for d in docs]
    pool = sentence_pool()
    vocabulary = sorted({w for d in docs[:50] for p in d.paragraphs for w in p.split()})
    site_list = make_sites(rng, sites, titles)
    out = LabelledSet()
    site_of: list[Site] = []
    short_every = max(1, pages // short_pages) if short_pages else 0
    for i, doc in enumerate(chosen):
        if short_every and i % short_every == short_every - 1 and i < short_every * short_pages:
            words = " ".join(doc.paragraphs).split()[: rng.randint(40, 120)]
            doc = Document(doc.source, doc.title, (" ".join(words),))
        # Neighbours (mostly one module's documentation) share a site: hard negatives.
        site = site_list[(i // 4) % sites]
        site_of.append(site)
        chrome = random_chrome(rng, titles, pool, site.date_style)
        out.originals.append(
            Page(f"http://{site.host}/page/{i}.html", render_page(site, doc, chrome), doc, chrome)
        )
    for i, page in enumerate(out.originals):
        site = site_of[i]
        for j in range(variants_per_page):
            kind = VARIANT_KINDS[(i * variants_per_page + j) % len(VARIANT_KINDS)]
            out.variants.append(_variant(kind, i, page, site, rng, titles, pool, vocabulary))
    return out


def _variant(
    kind: str,
    index: int,
    page: Page,
    site: Site,
    rng: random.Random,
    titles: list[str],
    pool: list[str],
    vocabulary: list[str],
) -> Page:
    doc, fraction = page.doc, 0.0
    assert page.chrome is not None
    fresh = random_chrome(rng, titles, pool, site.date_style)
    if kind == "timestamp":  # the byline in the article changes, the rest stays
        chrome = replace(page.chrome, when=fresh.when, views=fresh.views, comments=fresh.comments)
    elif kind == "mirror":
        chrome = page.chrome
    else:  # everything outside the article changes
        chrome = replace(fresh, when=page.chrome.when, views=page.chrome.views)
        chrome.comments = page.chrome.comments
    host, path = site.host, page.url.split("/", 3)[3]
    url = f"http://{host}/{path}?v={rng.randint(1, 10**6)}"
    session_links = False
    if kind in ("edit", "chrome+edit"):
        fraction = rng.uniform(0.005, 0.099)
        doc = _edit(doc, fraction, rng, vocabulary)
    if kind == "session":
        session_links = True
        url = f"http://{host}/{path}?sid={chrome.session}"
    if kind == "mirror":
        host = f"mirror.{site.host}"
        url = f"http://{host}/{path}"
    html_text = render_page(site, doc, chrome, host=host, session_links=session_links)
    return Page(url, html_text, doc, chrome, kind=kind, original=index, edit_fraction=fraction)


def text_pages(count: int, size: int = 5000, seed: int = 3) -> list[str]:
    """``count`` page texts of about ``size`` characters, each a random draw of paragraphs.

    For throughput measurements: two pages share a paragraph only by chance, like two pages of
    one site that quote the same sentence.
    """
    rng = random.Random(seed)
    paragraphs = [p for _, p in corpus_paragraphs()]
    pages = []
    for _ in range(count):
        parts, length = [], 0
        while length < size:
            para = rng.choice(paragraphs)
            parts.append(para)
            length += len(para) + 1
        pages.append("\n".join(parts)[:size])
    return pages


def page_item(
    url: str,
    html_text: str,
    *,
    site: str = "test",
    status: int = 200,
    final_url: str | None = None,
    fetched_at: str = "2026-01-01T00:00:00Z",
) -> dict[str, object]:
    """The item the site spider yields for ``html_text`` (as a dict, with ``main_text``)."""
    from urllib.parse import urljoin

    from crawler.content.html import parse_html
    from crawler.content.maintext import main_text

    final = final_url or url
    parsed = parse_html(html_text.encode("utf-8"), "utf-8")
    return {
        "url": url,
        "final_url": final,
        "status": status,
        "fetched_at": fetched_at,
        "depth": 0,
        "site": site,
        "title": parsed.title,
        "text": parsed.text,
        "main_text": main_text(html_text),
        "outlinks": [{"url": urljoin(final, href), "text": text} for href, text in parsed.links],
        "noindex": "noindex" in parsed.meta_robots,
    }
