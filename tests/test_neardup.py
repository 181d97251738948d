"""Near-duplicate detection without Scrapy: normalization, shingles, main text, the detector."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from crawler.content.maintext import main_text
from crawler.content.neardup import DEFAULT_THRESHOLD, NearDuplicateDetector
from crawler.content.neardup_explain import exact_similarity, explain, lsh_params
from crawler.content.normalize import content_fingerprint, normalize_text, text_fingerprint
from crawler.content.shingles import shingle_hashes, shingle_hashes32, shingle_set, shingle_texts
from devsite.testset import (
    VARIANT_KINDS,
    build_labelled_set,
    corpus_paragraphs,
    documents,
)

# --- normalization ---------------------------------------------------------------------------


def test_normalize_masks_what_changes_between_fetches() -> None:
    a = "Visited 12,345 times. Updated Tuesday, March 3rd 2024 at 10:32 AM. Session a8f3k2j1."
    b = "Visited 12,346 times. Updated Wednesday, April 4th 2024 at 9:05 PM. Session zz81kq0p."
    assert normalize_text(a) == normalize_text(b)
    assert text_fingerprint(a) == text_fingerprint(b)
    assert text_fingerprint(a) != text_fingerprint("Visited many times.")


def test_normalize_folds_case_punctuation_and_unicode() -> None:
    text = "\u201cHello\u201d, WORLD \u2014 it\u2019s \uff21\uff22\uff23!"  # curly, full-width
    assert normalize_text(text) == "hello world it s abc"
    assert normalize_text("Ça marche, naïve") == "ça marche naïve"
    assert normalize_text("") == ""
    assert normalize_text("x" * 30 + " word") == "# word"  # a hash or tracking id
    # long runs of other scripts are words, not ids
    assert normalize_text("日本語" * 10) == "日本語" * 10


def test_fingerprint_is_stable_hex() -> None:
    fp = content_fingerprint("some text")
    assert fp == content_fingerprint("some text")
    assert len(fp) == 32
    int(fp, 16)


# --- shingles --------------------------------------------------------------------------------


def test_shingle_hashes_match_shingle_texts() -> None:
    text = normalize_text(" ".join(p for _, p in corpus_paragraphs()[:20]))
    for k in (1, 3, 5):
        texts = shingle_texts(text, k)
        hashes = shingle_hashes(text, k).tolist()
        assert len(texts) == len(hashes)
        by_text: dict[str, int] = {}
        for s, h in zip(texts, hashes, strict=True):
            assert by_text.setdefault(s, h) == h  # equal shingles, equal hashes
        assert len(set(by_text.values())) == len(by_text)  # no collisions among distinct ones


def test_shingle_hashes_are_position_independent() -> None:
    a = shingle_set("alpha beta gamma delta", 2)
    b = shingle_set("zeta alpha beta gamma delta", 2)
    assert a <= b and len(b - a) == 1


def test_shingle_hashes_are_the_polynomial_hash_on_long_texts() -> None:
    # the powers come from two 256-entry tables (no 1 MB cache): far into a 90 KB text, and
    # across a table step, a shingle's hash is still the polynomial of its bytes
    words = [f"w{i}\u00e9" for i in range(15_000)]
    text = " ".join(words)
    hashes = shingle_hashes(text, 3).tolist()
    mask, base = (1 << 64) - 1, 0x100000001B3

    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask
        return h ^ (h >> 33)

    for i in (0, 1, 85, 86, 9_000, 14_997):
        data = " ".join(words[i : i + 3]).encode("utf-8")
        h = sum(b * pow(base, j, 1 << 64) for j, b in enumerate(data)) & mask
        assert hashes[i] == fmix((h + len(data) * 0x9E3779B97F4A7C15) & mask)
    assert len(text.encode("utf-8")) > 1 << 16


def test_short_and_empty_texts() -> None:
    assert len(shingle_hashes("", 3)) == 0
    assert len(shingle_hashes("two words", 3)) == 1  # one shingle of all its words
    assert shingle_hashes32("two words", 3).dtype == np.uint32
    assert shingle_hashes("ab", 3)[0] != shingle_hashes("a b", 3)[0]


# --- main text -------------------------------------------------------------------------------


def _page(body: str, title: str = "T") -> str:
    return f"<html><head><title>{title}</title><script>var x = 1;</script></head><body>{body}</body></html>"  # noqa: E501


ARTICLE = (
    "The crawler keeps a frontier of URLs to visit, ordered by priority, and hands them out "
    "to the downloader so that no host is hit more often than its politeness delay allows."
)


def test_main_text_prefers_declared_main_content() -> None:
    html = _page(
        '<header><a href="/">Site</a></header><nav><a href="/a">Alpha</a><a href="/b">Beta</a>'
        f"</nav><main><h1>Frontier</h1><p>{ARTICLE}</p></main><aside>About this site: a long "
        "sentence that says who runs the site and why it exists, nothing else.</aside>"
        "<footer>Copyright. Visitors: 1234.</footer>"
    )
    text = main_text(html)
    assert "Frontier" in text and ARTICLE in text
    assert "About this site" not in text and "Visitors" not in text and "Alpha" not in text
    assert "var x" not in text


def test_main_text_scores_containers_without_landmarks() -> None:
    about = "This site collects notes about the standard library, written by volunteers, " * 2
    html = _page(
        f'<table><tr><td class="l"><ul><li><a href="/1">One</a></li><li><a href="/2">Two</a>'
        f"</li></ul><p>{about}</p></td><td class=c><h1>Frontier</h1><p>{ARTICLE}</p></td>"
        f'<td class="r"><b>Quote of the day</b><br>Simple is better than complex, and flat is '
        f"better than nested, said somebody.</td></tr></table>"
    )
    text = main_text(html)
    assert ARTICLE in text
    assert "volunteers" not in text and "Quote" not in text


def test_main_text_short_article_with_heading_in_its_own_div() -> None:
    about = "This site collects notes about the standard library, written by volunteers, " * 3
    links = "".join(f'<li><a href="/{i}">Section {i}</a></li>' for i in range(12))
    html = _page(
        f'<div class="w"><div class="l"><ul>{links}</ul><p>{about}</p></div><div class="x">'
        f'<div class="h"><h1>Frontier</h1><span>May 3, 2024</span></div><div class="b">'
        f"<p>{ARTICLE}</p></div></div></div>"
    )
    text = main_text(html)
    assert ARTICLE in text and "Frontier" in text
    assert "volunteers" not in text and "Section" not in text


def test_main_text_the_one_container_named_contents_beats_a_banner() -> None:
    # Doxygen: a survey banner (one long sentence) above a "contents" div of short blocks
    banner = ("Please, help us to better know about our user community by answering the "
              "following short survey, it takes a few minutes")
    rows = "".join(f'<tr><td><a href="#m{i}">member{i}</a> () const</td><td><a href="b.html">'
                   f"Eigen::Base{i} &lt; Derived &gt;</a></td><td>inline</td></tr>"
                   for i in range(12))
    html = _page(
        f'<div style="background:#fdd">{banner}</div><div id="doc-content"><div class="contents">'
        f"<p>This is the complete list of members for Frontier, including all inherited members."
        f"</p><table>{rows}</table></div></div>"
    )
    text = main_text(html)
    assert "complete list of members for Frontier" in text and "member3" in text
    assert "survey" not in text
    # asciidoc: the page's "content" holds every example block's "content"; the outer one is it
    blocks = "".join(f'<div class="listingblock"><div class="content"><pre>$ git x{i}</pre>'
                     f"</div></div>" for i in range(3))
    option = "Print the raw status output to standard error instead of the normal output."
    text = main_text(_page(
        f'<div id="content"><div class="sect1"><p>Validates the signature.</p>{blocks}</div>'
        f'<div class="sect1"><dl><dt>--raw</dt><dd><p>{option}</p></dd></dl></div></div>'
    ))
    assert "Validates the signature" in text and "git x2" in text and option in text
    # an included options section far longer than the page's own text does not replace it
    # (git diff-index and diff-tree were both their shared diff options, "exact duplicates")
    options = "".join(f"<dt>--opt{i}</dt><dd><p>{ARTICLE}</p></dd>" for i in range(20))
    text = main_text(_page(
        f'<div id="content"><div class="sect1"><p>Compares a tree and the index.</p></div>'
        f'<div class="sect1"><dl>{options}</dl></div></div>'
    ))
    assert "Compares a tree and the index" in text
    # a name on an inline element is no container (DocBook's <span class="article">)
    text = main_text(_page(f'<div class="x"><h1>Frontier</h1><p>{ARTICLE}</p><p>See '
                           f'<span class="article">the guide</span>.</p></div>'))
    assert ARTICLE in text
    # two at the top: neither is the page's
    two = (f'<div class="content"><p>{banner}</p></div>'
           f'<div class="content"><h1>Frontier</h1><p>{ARTICLE}</p></div>')
    assert ARTICLE in main_text(_page(two))


def test_main_text_drops_link_lists_and_named_chrome() -> None:
    links = "".join(f'<li><a href="/{i}">Related article number {i}</a></li>' for i in range(10))
    html = _page(
        f'<div id="content"><h1>Frontier</h1><p>{ARTICLE}</p><ul>{links}</ul></div>'
        '<div class="sidebar-widget"><p>Subscribe to the newsletter for weekly tips and '
        "tricks about crawling the web politely.</p></div>"
        '<div id="cookie-banner">We use cookies to improve your experience on this site.</div>'
    )
    text = main_text(html)
    assert ARTICLE in text
    assert "Related article" not in text and "newsletter" not in text and "cookies" not in text


def test_a_declared_link_list_stays_one_whatever_is_added_to_its_intro() -> None:
    # a Sphinx chapter page: an intro of 37 words and a table of contents of ~300 link words in
    # the role="main" part; a "last updated" line or a paragraph must not turn its main text
    # into the intro alone (it was all of it, then the intro: Jaccard 0.07, missed)
    intro = ("The modules described in this chapter parse various miscellaneous file formats "
             "that aren't markup languages and are not related to e-mail, and some of them "
             "write them too, for other programs to read.")
    toc = "".join(f'<li><a href="m{i}.html">module{i} — reading and writing format number '
                  f"{i}</a></li>" for i in range(40))
    page = ('<div class="related" role="navigation"><a href="/">Index</a></div>'
            '<div class="body" role="main"><h1>File Formats</h1><p>{intro}</p>{extra}'
            f'<div class="toctree-wrapper"><ul>{toc}</ul></div></div>')
    original = main_text(_page(page.format(intro=intro, extra="")))
    assert intro in original and "module39" in original
    for extra in ("<p>Last updated: July 3, 2019</p>", f"<p>{ARTICLE}</p>"):
        edited = main_text(_page(page.format(intro=intro, extra=extra)))
        assert "module39" in edited and original.split("\n")[-1] == edited.split("\n")[-1]
        det = NearDuplicateDetector()
        det.check("http://docs.test/fileformats.html", original, title="File Formats")
        assert det.check("http://docs.test/fileformats.html?rev=2", edited,
                         title="File Formats").is_duplicate
    # the body of a page that declares nothing keeps the bound: an article of 60 words is an
    # article, whatever its list of links
    body = (f"<div><h1>Frontier</h1><p>{ARTICLE} {ARTICLE}</p></div>"
            f'<div><ul>{toc}</ul></div>')
    assert "module3" not in main_text(_page(body))


def test_a_command_index_of_a_few_links_is_its_links() -> None:
    # mdBook: every heading is a permalink <a class="header" href="#...">, and a command index
    # is that heading and a short list of links in <main>; its main text was empty (the
    # heading dropped as chrome by its class, the list as links), so it was never compared
    def index(title: str, commands: list[str], extra: str = "") -> str:
        items = "".join(f'<li><a href="{c}.html">cargo {c}</a></li>' for c in commands)
        return _page(f'<nav class="sidebar"><a href="/">Book</a></nav><main>'
                     f'<h1 id="x"><a class="header" href="#x">{title}</a></h1>{extra}'
                     f"<ul>{items}</ul></main>")

    build = main_text(index("Build Commands", ["bench", "build", "check", "clean", "doc"]))
    assert build.split("\n") == ["Build Commands", "cargo bench", "cargo build", "cargo check",
                                  "cargo clean", "cargo doc"]
    det = NearDuplicateDetector()
    det.check("http://cargo.test/build-commands.html", build, title="Build Commands")
    # compared now: a mirror with its own banner (outside the main part) is caught
    mirror = main_text(index("Build Commands", ["bench", "build", "check", "clean", "doc"])
                       .replace("<body>", "<body><p>A mirror kept by volunteers since 2019, "
                                "updated every night from the upstream documentation.</p>"))
    assert mirror == build
    d = det.check("http://mirror.cargo.test/build-commands.html", mirror, title="Build Commands")
    assert d.duplicate_of == "http://cargo.test/build-commands.html"
    other = main_text(index("Manifest Commands", ["generate-lockfile", "locate-project",
                                                  "metadata", "pkgid", "tree"]))
    assert not det.check("http://cargo.test/manifest-commands.html", other,
                         title="Manifest Commands").is_duplicate
    # an anchor without href, or to the page itself, is no link: a heading wrapped in one
    # stays content, and a page's text is not taken for a link list
    text = main_text(_page(f'<div class="body" role="main"><h2><a name="s1">Section one</a>'
                           f'</h2><p><a href="#s1">{ARTICLE}</a></p>'
                           '<p>See <a href="other.html">the other page</a>.</p></div>'))
    assert text.split("\n")[:2] == ["Section one", ARTICLE]


def test_main_text_one_walk_skips_boilerplate_where_it_stands() -> None:
    # a hidden or named-chrome element inside a paragraph: its text goes, the words after it
    # stay in the paragraph (the tree is not edited: the walk skips the subtree)
    html = _page(
        f'<main><h1>Frontier</h1><p>{ARTICLE} It waits<span hidden>HIDDEN</span> for the '
        f'host<span class="share-buttons"><a href="/s">Share</a></span> to come due.</p>'
        f"<article><header>Posted by the crawler team</header><p>{ARTICLE}</p></article></main>"
    )
    text = main_text(html)
    assert f"{ARTICLE} It waits for the host to come due." in text.split("\n")
    assert "HIDDEN" not in text and "Share" not in text
    assert "Posted by the crawler team" in text  # an article's own header is content
    # a declared main part that is no block element is walked on its own
    html = _page(f'<div class="x"><p>{ARTICLE} banner banner banner banner banner.</p></div>'
                 f'<span role="main">Frontier: <b>the URLs</b> a crawl will fetch, in the order '
                 f"it will fetch them, one host at a time.</span>")
    assert main_text(html) == ("Frontier: the URLs a crawl will fetch, in the order it will "
                               "fetch them, one host at a time.")


def test_main_text_bytes_encoding_and_broken_input() -> None:
    html = _page(f"<article><p>{ARTICLE} Ça marche.</p></article>")
    assert "Ça marche" in main_text(html.encode("latin-1"), "latin-1")
    assert "Ça marche" in main_text(html.encode("utf-8"), "utf-8")
    assert main_text(b"") == ""
    assert isinstance(main_text(b"\x00\x01<<<>>>"), str)  # garbage never raises
    assert main_text("<p>unclosed <b>bold") == "unclosed bold"


def test_main_text_matches_truth_on_all_template_styles() -> None:
    labelled = build_labelled_set(pages=24, variants_per_page=1, seed=3)
    for page in labelled.originals:
        truth = set(normalize_text(" ".join(page.doc.paragraphs)).split())
        got = normalize_text(main_text(page.html)).split()
        assert truth <= set(got), page.url  # all of the content
        extra = [w for w in got if w not in truth]
        assert len(extra) <= 30, (page.url, extra)  # title and byline, not the template


# --- the detector ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return ["\n".join(d.paragraphs) for d in documents()[:12]]


def test_exact_duplicate_on_another_host(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    assert not det.check("http://a.test/1", docs[0]).is_duplicate
    d = det.check("http://mirror.test/1", docs[0])
    assert (d.kind, d.duplicate_of, d.similarity) == ("exact", "http://a.test/1", 1.0)


def test_counter_and_small_edit_are_near_duplicates(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    det.check("http://a.test/1", docs[1] + "\nVisitors: 1000")
    assert det.check("http://a.test/1?s=2", docs[1] + "\nVisitors: 1001").kind == "exact"
    words = docs[1].split()
    for i in range(0, len(words), 15):  # ~7 % of the words edited, scattered
        words[i] = "edited"
    d = det.check("http://a.test/1?s=3", " ".join(words))
    assert d.kind == "near" and d.duplicate_of == "http://a.test/1"
    assert DEFAULT_THRESHOLD <= d.similarity < 1.0


def test_different_pages_are_not_flagged(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    for i, text in enumerate(docs):
        assert not det.check(f"http://a.test/{i}", text).is_duplicate
    assert det.originals == len(docs)


def test_duplicates_point_at_the_original_never_a_chain(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    det.check("http://a.test/orig", docs[2])
    copy = det.check("http://b.test/copy", docs[2] + " one more sentence at the end of it")
    assert copy.duplicate_of == "http://a.test/orig"
    # a copy of the copy is aliased to the original, never to the copy
    d = det.check("http://c.test/copy2", docs[2] + " one more sentence at the end of it")
    assert d.duplicate_of == "http://a.test/orig"


def test_refetch_is_not_its_own_duplicate_and_replaces_content(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    det.check("http://a.test/1", docs[3])
    assert not det.check("http://a.test/1", docs[3]).is_duplicate  # same content again
    assert not det.check("http://a.test/1", docs[4]).is_duplicate  # changed content
    # the old content is no longer anyone's: a page with it is new
    assert not det.check("http://a.test/2", docs[3]).is_duplicate
    # and the new content belongs to /1
    assert det.check("http://a.test/3", docs[4]).duplicate_of == "http://a.test/1"


def test_empty_and_tiny_pages(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    assert det.check("http://a.test/empty1", "").kind == "empty"
    assert det.check("http://a.test/empty2", "   ").kind == "empty"
    assert not det.check("http://a.test/tiny1", "Contact us").is_duplicate
    assert det.check("http://a.test/tiny2", "Contact us!").kind == "exact"
    assert not det.check("http://a.test/tiny3", "Contact them").is_duplicate


# Tiny pages shaped like gtk-doc's tools index (its main text is its heading and one entry) and
# an old-book redirect stub of the rust book, whose other lines are the host's template.
TOOLS = "GLib Tools\nglib-gettextize — gettext internationalization utility"
TOOLS_TITLE = "GLib Tools: GLib Reference Manual"


def test_a_tiny_page_with_a_line_added_is_its_near_duplicate() -> None:
    det = NearDuplicateDetector()
    assert det.check("http://glib.test/tools.html", TOOLS, title=TOOLS_TITLE).kind == "new"
    dated = TOOLS.replace("\n", "\nLast updated: July 3, 2019\n")
    d = det.check("http://glib.test/tools.html?rev=2", dated, title=TOOLS_TITLE)
    assert (d.kind, d.duplicate_of) == ("near", "http://glib.test/tools.html")
    assert d.similarity is not None and d.similarity >= DEFAULT_THRESHOLD
    # and the other way round: the stored page is the larger one
    det = NearDuplicateDetector()
    det.check("http://glib.test/a", dated, title=TOOLS_TITLE)
    assert det.check("http://glib.test/b", TOOLS, title=TOOLS_TITLE).kind == "near"


def test_tiny_siblings_are_not_near_duplicates() -> None:
    det = NearDuplicateDetector()
    det.check("http://glib.test/tools.html", TOOLS, title=TOOLS_TITLE)
    sibling = "GLib Tools\nglib-genmarshal — C code marshaller generation utility"
    # a line of its own, not the stored page's lines plus a run
    assert not det.check("http://glib.test/t2", sibling, title=TOOLS_TITLE).is_duplicate
    grown = TOOLS.replace("gettext internationalization", "gettext internationalisation")
    assert not det.check("http://glib.test/t3", grown + "\nglib-mkenums — C language enum "
                         "description generation utility", title=TOOLS_TITLE).is_duplicate
    # another title, or none: exact only
    plus = TOOLS + "\nLast updated: July 3, 2019"
    assert not det.check("http://glib.test/t4", plus, title="GIO Tools").is_duplicate
    det = NearDuplicateDetector()
    det.check("http://glib.test/u1", TOOLS)
    assert not det.check("http://glib.test/u2", plus).is_duplicate


def test_a_stub_that_is_template_but_its_heading_gets_a_paragraph() -> None:
    det = NearDuplicateDetector()
    stub = ("Rust 1.95.0\n{name}\nThere is a new edition of the book and this is an old link.\n"
            "Here are the relevant sections in the new and old books:")
    for i, name in enumerate(("Ownership", "Lifetimes", "Closures", "Iterators")):
        det.check(f"http://book.test/{i}.html", stub.format(name=name), title=name)
    assert det.templates.template("book.test")  # the stub's shared lines are template now
    text = stub.format(name="Syntax and Semantics")
    det.check("http://book.test/syntax.html", text, title="Syntax and Semantics")
    lines = text.split("\n")
    edited = "\n".join([*lines[:3], ARTICLE, *lines[3:]])
    d = det.check("http://book.test/syntax.html?rev=2", edited, title="Syntax and Semantics")
    assert d.duplicate_of == "http://book.test/syntax.html"
    # a sibling stub with a paragraph is not: its heading is not the stored page's
    other = "\n".join([lines[0], "Macros", lines[2], ARTICLE, lines[3]])
    d = det.check("http://book.test/m.html", other, title="Syntax and Semantics")
    assert not d.is_duplicate


def test_a_paragraph_added_to_a_short_page_is_one_inserted_run(docs: list[str]) -> None:
    """Jaccard ~0.5 by construction; containment plus "the difference is one run of lines"."""
    short = docs[2].split("\n")[0]
    short = " ".join(short.split()[:30])
    added = " ".join(docs[5].split()[:40])
    det = NearDuplicateDetector()
    det.check("http://a.test/p", f"{short}\nSee also the notes.", title="Frontier")
    d = det.check("http://b.test/p", f"{short}\n{added}\nSee also the notes.", title="Frontier")
    assert d.kind == "near" and d.duplicate_of == "http://a.test/p"
    # the same words added in two places (two runs, a line of the original between): no
    half = len(added.split()) // 2
    first, second = " ".join(added.split()[:half]), " ".join(added.split()[half:])
    det = NearDuplicateDetector()
    det.check("http://a.test/p", f"{short}\nSee also the notes.", title="Frontier")
    d = det.check("http://b.test/p", f"{short}\n{first}\nSee also the notes.\n{second}",
                  title="Frontier")
    assert not d.is_duplicate
    # a sibling that contains the short page's words but names something else in its line: no
    det = NearDuplicateDetector()
    det.check("http://a.test/p", f"{short}\nSee also the notes.", title="Frontier")
    d = det.check("http://a.test/q", f"{short} Other\n{added}\nSee also the notes.",
                  title="Frontier")
    assert not d.is_duplicate


def test_siblings_of_one_title_must_share_lines() -> None:
    """Doxygen's member lists: one title, one sentence naming the class; Jaccard ~0.56."""
    line = "This is the complete list of members for Eigen::{}, including all inherited members."
    det = NearDuplicateDetector()
    det.check("http://a.test/1", line.format("IdentityPreconditioner"), title="Member List")
    d = det.check("http://a.test/2", line.format("ForceAlignedAccess"), title="Member List")
    assert not d.is_duplicate
    # without titles the words decide (an edit in every line shares no line either)
    det = NearDuplicateDetector()
    det.check("http://a.test/1", line.format("IdentityPreconditioner"))
    assert det.check("http://a.test/2", line.format("ForceAlignedAccess")).is_duplicate
    # an edit of one title keeps its lines: a date line added to the same page
    det = NearDuplicateDetector()
    det.check("http://a.test/1", line.format("Ref") + "\ninline", title="Member List")
    d = det.check("http://b.test/1", "Last updated: May 3\n" + line.format("Ref") + "\ninline",
                  title="Member List")
    assert d.is_duplicate


def test_look_only_does_not_record(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    det.check("http://a.test/noindex", docs[5], add=False)
    assert len(det) == 0
    assert not det.check("http://a.test/real", docs[5]).is_duplicate


def test_host_duplicate_ratio(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    for i, text in enumerate(docs[:6]):
        det.check(f"http://a.test/{i}", text)
        det.check(f"http://mirror.test/{i}", text)
    assert det.host_duplicate_ratio("a.test") == 0.0
    assert det.host_duplicate_ratio("mirror.test") == 1.0
    assert det.host_duplicate_ratio("mirror.test", min_pages=10) == 0.0


def test_state_round_trip(docs: list[str]) -> None:
    det = NearDuplicateDetector()
    for i, text in enumerate(docs[:4]):
        det.check(f"http://a.test/{i}", text)
    state = pickle.loads(pickle.dumps(det.state()))
    again = NearDuplicateDetector()
    assert again.restore(state)
    assert again.check("http://b.test/0", docs[0]).duplicate_of == "http://a.test/0"
    assert not NearDuplicateDetector(threshold=0.9).restore(state)


@pytest.mark.parametrize("num_perm", [128, 300])
def test_stored_sketches_unpack_to_what_was_computed(docs: list[str], num_perm: int) -> None:
    """Each stored hash's block is kept as an index into the page's distinct blocks (a byte,
    two when num_perm > 256): what comes back, drained or from the records, is the sketch."""
    det = NearDuplicateDetector(num_perm=num_perm)
    long_text = "\n".join(docs)  # more hashes than num_perm
    texts = [long_text, *docs[:5], TOOLS]
    for i, text in enumerate(texts):
        det.check(f"http://a.test/{i}", text, title=TOOLS_TITLE if text is TOOLS else None)
    drained = {r[1]: r for r in det.drain() if r[0] == "o"}
    records = {r[1]: r for r in det.records() if r[0] == "o"}
    for i, text in enumerate(texts):
        f = det.features(text, "a.test")
        url = f"http://a.test/{i}"
        for record in (drained[url], records[url]):
            assert np.frombuffer(record[4], np.uint32).tolist() == f.sketch.tolist()
            assert np.frombuffer(record[5], np.uint32).tolist() == f.sketch_blocks.tolist()
    assert len(drained["http://a.test/0"][4]) == 4 * num_perm
    again = NearDuplicateDetector(num_perm=num_perm)
    again.replay(det.records())
    for i, text in enumerate(texts):
        assert again.check(f"http://b.test/{i}", text).duplicate_of == f"http://a.test/{i}"


def test_lsh_params_reach_the_recall() -> None:
    for perm, t in ((128, 0.5), (64, 0.5), (128, 0.8)):
        b, r = lsh_params(perm, t, 0.99)
        assert b * r <= perm
        assert 1 - (1 - t**r) ** b >= 0.99


def test_explain_numbers(docs: list[str]) -> None:
    longer = docs[6] + " and a short tail added to it"
    e = explain(docs[6], longer)
    assert e.flagged and e.kind == "near" and e.candidate
    assert e.exact == pytest.approx(exact_similarity(docs[6], longer))
    assert abs(e.estimated - e.exact) < 0.1
    assert e.only_b and not e.exact_duplicate
    different = explain(docs[6], docs[7])
    assert not different.flagged and different.exact < 0.2


# --- the labelled set ------------------------------------------------------------------------


def test_labelled_set_precision_and_recall_at_defaults() -> None:
    """The issue's targets on a small labelled set (bench/neardup.py measures a larger one)."""
    labelled = build_labelled_set(pages=90, variants_per_page=3, seed=101)
    assert {v.kind for v in labelled.variants} == set(VARIANT_KINDS)
    det = NearDuplicateDetector()
    group: dict[str, int] = {}
    tp = fp = 0
    for i, page in enumerate(labelled.originals):
        group[page.url] = i
        fp += det.check(page.url, main_text(page.html)).is_duplicate
    for page in labelled.variants:
        group[page.url] = page.original  # type: ignore[assignment]
        d = det.check(page.url, main_text(page.html))
        if d.duplicate_of is not None:
            if group[d.duplicate_of] == page.original:
                tp += 1
            else:
                fp += 1
    precision = tp / (tp + fp)
    recall = tp / len(labelled.variants)
    assert precision >= 0.99, precision
    assert recall >= 0.97, recall


def test_page_nested_deeper_than_libxml2_keeps_its_links_and_text() -> None:
    """libxml2 stops at 2,048 levels even with huge_tree: the page is parsed again flat."""
    from crawler.content.html import parse_html

    links = "".join(f'<a href="/l{i}">link <b>{i}</b></a> ' for i in range(30))
    for depth, flattened in ((1000, False), (5000, True)):
        html = (f"<html><head><title>Deep</title></head><body>{'<div>' * depth}"
                f"<p>deep text here</p>{links}{'</div>' * depth}<a href='/after'>after</a>"
                "<script>var hidden = 1;</script></body></html>")
        page = parse_html(html)
        assert page.flattened is flattened
        assert len(page.links) == 31 and page.links[0] == ("/l0", "link 0")
        assert page.links[-1] == ("/after", "after")
        assert "deep text here" in page.text and "hidden" not in page.text
        assert page.title == "Deep"
        assert "deep text here" in page.main_text
