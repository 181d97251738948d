"""Main text of whole platforms' markup: each test is one class of defect, on a small page
written the way that platform (or that kind of site) writes its pages.

Every one of these came back empty or wrong before: the word "widget" in Blogger's post
container and in every Elementor block read as chrome, an empty ``<article>`` or ``<div
id="main">`` won over the text beside it, an ad network's "taboola-below-article-..." read as
content for its word "article", a layout wrapper named after its sidebar dropped the article.
"""

from __future__ import annotations

from crawler.content.maintext import main_text

STORY = [
    "The harbour master counted forty boats leaving before dawn, the most since the spring "
    "storms closed the channel for a week and kept the whole fleet tied up at the quay.",
    "Fishermen said the catch was smaller than last year, but prices at the morning auction "
    "rose by a third, so most crews still came home with more money than they expected.",
    "The council will vote next month on dredging the channel, which silts up every winter "
    "and which the pilots say is now too shallow for the larger trawlers at low tide.",
]
SIDEBAR = ("About me: I write about boats, harbours and the sea, and I have kept this blog "
           "since the year my grandfather gave me his old dinghy with a torn sail.")
PROMOTED = ("You will not believe what these celebrities look like today, number seven "
            "will surprise you, sponsored stories from around the web for you.")


def _page(body: str) -> str:
    return f"<html><head><title>Harbour</title></head><body>{body}</body></html>"


def _paragraphs() -> str:
    return "".join(f"<p>{p}</p>" for p in STORY)


def _has_story(text: str) -> bool:
    return all(p in text for p in STORY)


def test_blogger_post_container_named_widget_is_content() -> None:
    # Blogger: the posts sit in <div class="widget Blog" id="Blog1">, the sidebar's gadgets in
    # <div class="widget HTML">, all inside <div class="section">
    html = _page(
        '<div class="main-inner"><div class="section" id="main">'
        '<div class="widget Blog" id="Blog1"><div class="blog-posts hfeed">'
        '<div class="post hentry"><h3 class="post-title entry-title">Forty boats</h3>'
        f'<div class="post-body entry-content">{_paragraphs()}</div>'
        '<div class="post-footer"><a href="/share">Share to Twitter</a></div></div></div></div>'
        '</div></div>'
        '<div class="sidebar section" id="sidebar-right-1">'
        f'<div class="widget HTML" id="HTML1"><h2>About</h2><div class="widget-content">{SIDEBAR}'
        '</div></div></div>'
    )
    text = main_text(html)
    assert _has_story(text)
    assert SIDEBAR not in text


def test_elementor_blocks_named_widget_are_content() -> None:
    # Elementor: every block is elementor-widget-container in elementor-widget-wrap
    widgets = "".join(
        '<div class="elementor-element elementor-widget elementor-widget-text-editor">'
        f'<div class="elementor-widget-container"><div class="elementor-text-editor">'
        f"<p>{p}</p></div></div></div>"
        for p in STORY
    )
    html = _page(
        '<header class="site-header"><nav><a href="/">Home</a></nav></header>'
        '<div class="elementor elementor-42"><section class="elementor-section">'
        '<div class="elementor-container"><div class="elementor-column">'
        f'<div class="elementor-widget-wrap">{widgets}</div></div></div></section></div>'
    )
    assert _has_story(main_text(html))


def test_an_empty_article_does_not_win_over_the_text_beside_it() -> None:
    # a theme's empty <article> (a teaser, a placeholder) and the story in a plain div
    html = _page(
        '<article class="teaser"><h2><a href="/other">Other news</a></h2></article>'
        f'<div class="story">{_paragraphs()}</div>'
    )
    assert _has_story(main_text(html))
    # a <div id="main"> holding the heading alone, the story beside it
    html = _page(f'<div id="main"><h1>Forty boats</h1></div><div class="story">{_paragraphs()}'
                 "</div>")
    assert _has_story(main_text(html))


def test_ad_network_blocks_are_chrome_whatever_their_name_says() -> None:
    promoted = "".join(
        f'<div class="item"><a href="https://ads.test/{i}">{PROMOTED}</a><p>{PROMOTED}</p></div>'
        for i in range(3)
    )
    for name in ('id="taboola-below-article-thumbnails" class="tbl-feed-container"',
                 'class="OUTBRAIN" data-widget-id="AR_1"'):
        html = _page(f"<article><h1>Forty boats</h1>{_paragraphs()}"
                     f"<div {name}>{promoted}</div></article>")
        text = main_text(html)
        assert _has_story(text)
        assert PROMOTED not in text, name


def test_of_several_articles_the_one_with_the_heading_is_the_page() -> None:
    # news sites mark every teaser card as an <article> too
    cards = "".join(
        f'<article class="card"><h3><a href="/n{i}">Elsewhere</a></h3><p>{SIDEBAR}</p>'
        f"<p>{SIDEBAR}</p></article>"
        for i in range(4)
    )
    html = _page(f'<article class="story"><h1>Forty boats</h1>{_paragraphs()}</article>'
                 f'<div class="more">{cards}</div>')
    text = main_text(html)
    assert _has_story(text)
    assert SIDEBAR not in text


def test_the_article_inside_main_leaves_out_what_main_adds() -> None:
    # <main> holds the article, then the related posts and the donation box
    related = "".join(f'<div class="card"><h3>Elsewhere</h3><p>{SIDEBAR}</p></div>'
                      for _ in range(2))
    html = _page(f"<main><article><h1>Forty boats</h1>{_paragraphs()}</article>"
                 f'<div class="more-posts">{related}</div></main>')
    text = main_text(html)
    assert _has_story(text)
    assert SIDEBAR not in text


def test_a_layout_wrapper_named_after_its_sidebar_keeps_the_article() -> None:
    # the article's body sits in a layout row named for the sidebar column beside it
    html = _page(
        '<div class="o-row"><div class="o-col"><article class="c-article">'
        '<header class="c-article__header"><h1>Forty boats</h1></header>'
        '<div class="o-row c-fixed-sidebar-layout--140--left">'
        f'<div class="c-article__main"><div class="c-article__content">{_paragraphs()}</div>'
        '</div></div></article></div></div>'
        '<div class="c-sidebar"><h3>Editor picks</h3><p><a href="/x">One</a></p></div>'
    )
    assert _has_story(main_text(html))


def test_a_name_that_is_chrome_and_content_at_once_is_chrome() -> None:
    # "related-articles", "comment-content": the content word says what the chrome is about;
    # beside it, a name of its own ("entry-content has-sidebar") still says content
    for chrome in ("comment-content", "related-article"):
        html = _page(
            f'<div class="entry-content has-sidebar">{_paragraphs()}'
            f'<div class="{chrome}"><p>{SIDEBAR}</p></div></div>'
        )
        text = main_text(html)
        assert _has_story(text)
        assert SIDEBAR not in text, chrome


def test_the_author_box_and_byline_are_chrome() -> None:
    bio = ("Jane Doe has covered the harbour and its fleet for twenty years, and before that she "
           "sailed as a deckhand on three of the trawlers she now writes about.")
    html = _page(
        f'<div class="entry"><h1>Forty boats</h1><p class="byline">By Jane Doe, 3 May</p>'
        f'{_paragraphs()}<div class="author-box"><p>{bio}</p></div></div>'
    )
    text = main_text(html)
    assert _has_story(text)
    assert bio not in text and "By Jane Doe" not in text


def test_a_page_header_the_markup_never_closed_holds_the_story() -> None:
    # <header class="page-header"> left open: the parser closes it at the end of the body, so
    # the whole page is in the page-level header
    html = ('<html><head><title>Harbour</title></head><body><header class="page-header">'
            '<div class="logo"><a href="/">Harbour News</a></div>'
            f'<div class="entry-content">{_paragraphs()}</div></body></html>')
    assert _has_story(main_text(html))


def test_a_story_wrapped_in_an_aside_inside_main_is_the_story() -> None:
    # a CMS wraps the article's column in <aside> inside <main>; the footer is columns of links
    footer = "".join(f'<article class="col"><a href="/{i}">Section {i}</a></article>'
                     for i in range(30))
    html = _page(f'<main class="content"><aside class="pa direct-content">'
                 f'<section class="ar"><header>{_paragraphs()}</header></section></aside></main>'
                 f"<div>{footer}</div>")
    assert _has_story(main_text(html))
