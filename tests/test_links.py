"""The fast URL joiner gives exactly what urljoin gives."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest

from crawler.spiders.links import UrlJoiner

BASES = [
    "http://127.0.0.2:8080/docs/guide/intro.html",
    "http://127.0.0.2:8080/std/collections/hash_map/struct.HashMap.html",
    "http://h/x/y;p",
    "http://h/a/b/",
    "https://example.org/",
    "https://example.org",
    "https://example.org/a/b/?q=1#frag",
    "http://user:pw@example.org:81/x/y",
]
HREFS = [
    "/p/1.html", "p/1.html", "sub/dir/page.html?x=1#y", "./p.html", "../up.html", "/a/../b",
    "/a/./b", "?q=2", "#top", "", "   /spaced.html  ", "//other.org/x", "http://other.org/x",
    "HTTPS://Other.org/x", "https://other.org", "http://other.org?x", "mailto:a@b.org",
    "javascript:void(0)", "data:text/plain,hi", "ftp://h/f", "a:b/c", "x/y:z", "\\back\\slash",
    "/ü/ß.html", "p%20q.html", "..", ".", "/", "?", "#", "http:relative", "https://h/a/../b",
    "foo.html#frag", ".hidden", "/trailing/", "C:/windows", "http://h/x?", "http://h/x#",
    "http://h/a;p/x", "https://h/a;p?q#f", "/a;p/b", "a;b", "http://h/x?a=1&b=2#c",
    "https://h:443/x", "Http://h/x", "/x?y=/../z", "p.html?next=/./a",
    # climbing first, as rustdoc and Sphinx write links
    "../../std/vec/struct.Vec.html", "../../../../../x.html", "./../a.html", "../.", "../..",
    "../", "./", "../a/../b.html", "../a/./b", "../?q", "../#f", "../a.html?x=../y#z",
    "../a:b.html", "..//x", "../.hidden", "../\\x", ".../x", "..x/y", "./a/b.html#c",
    "#impl-From%3Cu8%3E-for-char", "#a#b", "#?x", "# x",
]


@pytest.mark.parametrize("base", BASES)
def test_join_matches_urljoin(base):
    joiner = UrlJoiner(base)
    for href in HREFS:
        assert joiner.join(href) == urljoin(base, href.strip()), (base, href)
