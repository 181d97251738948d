"""Other projects' URL test vectors, as data, run against the crawler's link handling.

* WHATWG URL: ``web-platform-tests/wpt``, ``url/resources/urltestdata.json``: its cases that
  parse or join an http(s) URL (a link on an http(s) page, or a seed). The verdict is what a
  browser requests for the link: WHATWG's ``href`` less the fragment and the credentials (a
  request line has neither), or nothing (a parse failure, another scheme). Ours is the link
  joined as the spider joins it (:class:`crawler.spiders.links.UrlJoiner`) and made a request
  URL (:func:`crawler.net.weburl.request_url`), or nothing (``InvalidUrl``).
* crawler-commons, ``BasicURLNormalizerTest.java``: each pair (a URL, its normal form) says
  "the same resource"; the verdict is whether the crawler's seen key
  (:func:`crawler.frontier.urls.normalize_url`) makes them one URL. Its "left alone" cases
  also say the escaped and the unescaped forms are different resources: the key must keep
  them apart.

A case where we deliberately differ carries our verdict and the reason in ``DIFFERS``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from scrapy import Request

from crawler.content.canonical import CanonicalPolicy
from crawler.content.requisites import absolute_requisites
from crawler.frontier.urls import normalize_url
from crawler.net.weburl import InvalidUrl, join, request_url
from crawler.sitemaps.jsonfeed import read_json_feed
from crawler.spiders.links import UrlJoiner

WPT = "web-platform-tests/wpt url/resources/urltestdata.json"
B = "http://example.org/foo/bar"  # the file's usual base

# (input, base, WHATWG's href or None for a failure), in the file's order; base None: the
# input is parsed alone (a seed, an absolute link).
URLTESTDATA: list[tuple[str, str | None, str | None]] = [
    ("http://example\t.\norg", B, "http://example.org/"),
    ("http://user:pass@foo:21/bar;par?b#c", B, "http://user:pass@foo:21/bar;par?b#c"),
    ("https://test:@test", None, "https://test@test/"),
    ("https://:@test", None, "https://test/"),
    ("http:foo.com", B, "http://example.org/foo/foo.com"),
    ("\t   :foo.com   \n", B, "http://example.org/foo/:foo.com"),
    (" foo.com  ", B, "http://example.org/foo/foo.com"),
    ("a:\t foo.com", B, "a: foo.com"),
    ("http://f:21/ b ? d # e ", B, "http://f:21/%20b%20?%20d%20#%20e"),
    ("http://f:/c", B, "http://f/c"),
    ("http://f:0/c", B, "http://f:0/c"),
    ("http://f:00000000000000/c", B, "http://f:0/c"),
    ("http://f:00000000000000000000080/c", B, "http://f/c"),
    ("http://f:b/c", B, None),
    ("http://f: /c", B, None),
    ("http://f:\n/c", B, "http://f/c"),
    ("http://f:fifty-two/c", B, None),
    ("http://f:999999/c", B, None),
    ("http://f: 21 / b ? d # e ", B, None),
    ("", B, "http://example.org/foo/bar"),
    ("  \t", B, "http://example.org/foo/bar"),
    (":foo.com/", B, "http://example.org/foo/:foo.com/"),
    (":foo.com\\", B, "http://example.org/foo/:foo.com/"),
    (":", B, "http://example.org/foo/:"),
    (":a", B, "http://example.org/foo/:a"),
    (":/", B, "http://example.org/foo/:/"),
    (":\\", B, "http://example.org/foo/:/"),
    (":#", B, "http://example.org/foo/:#"),
    ("#", B, "http://example.org/foo/bar#"),
    ("#/", B, "http://example.org/foo/bar#/"),
    ("#\\", B, "http://example.org/foo/bar#\\"),
    ("#;?", B, "http://example.org/foo/bar#;?"),
    ("?", B, "http://example.org/foo/bar?"),
    ("/", B, "http://example.org/"),
    (":23", B, "http://example.org/foo/:23"),
    ("/:23", B, "http://example.org/:23"),
    ("\\x", B, "http://example.org/x"),
    ("\\\\x\\hello", B, "http://x/hello"),
    ("::", B, "http://example.org/foo/::"),
    ("::23", B, "http://example.org/foo/::23"),
    ("foo://", B, "foo://"),
    ("http://a:b@c:29/d", B, "http://a:b@c:29/d"),
    ("http::@c:29", B, "http://example.org/foo/:@c:29"),
    ("http://&a:foo(b]c@d:2/", B, "http://&a:foo(b%5Dc@d:2/"),
    ("http://::@c@d:2", B, "http://:%3A%40c@d:2/"),
    ("http://foo.com:b@d/", B, "http://foo.com:b@d/"),
    ("http://foo.com/\\@", B, "http://foo.com//@"),
    ("http:\\\\foo.com\\", B, "http://foo.com/"),
    ("http:\\\\a\\b:c\\d@foo.com\\", B, "http://a/b:c/d@foo.com/"),
    ("http://a:b@c\\", None, "http://a:b@c/"),
    ("ws://a@b\\c", None, "ws://a@b/c"),
    ("//foo/bar", B, "http://foo/bar"),
    ("http://foo/path;a??e#f#g", B, "http://foo/path;a??e#f#g"),
    ("http://foo/abcd?efgh?ijkl", B, "http://foo/abcd?efgh?ijkl"),
    ("http://foo/abcd#foo?bar", B, "http://foo/abcd#foo?bar"),
    ("[61:24:74]:98", B, "http://example.org/foo/[61:24:74]:98"),
    ("http:[61:27]/:foo", B, "http://example.org/foo/[61:27]/:foo"),
    ("http://[1::2]:3:4", B, None),
    ("http://2001::1", B, None),
    ("http://2001::1]", B, None),
    ("http://2001::1]:80", B, None),
    ("http://[2001::1]", B, "http://[2001::1]/"),
    ("http://[::127.0.0.1]", B, "http://[::7f00:1]/"),
    ("http://[::127.0.0.1.]", B, None),
    ("http://[0:0:0:0:0:0:13.1.68.3]", B, "http://[::d01:4403]/"),
    ("http://[2001::1]:80", B, "http://[2001::1]/"),
    ("http:/example.com/", B, "http://example.org/example.com/"),
    ("ftp:/example.com/", B, "ftp://example.com/"),
    ("https:/example.com/", B, "https://example.com/"),
    ("ws:/example.com/", B, "ws://example.com/"),
    ("javascript:/example.com/", B, "javascript:/example.com/"),
    ("mailto:/example.com/", B, "mailto:/example.com/"),
    ("http:example.com/", B, "http://example.org/foo/example.com/"),
    ("ftp:example.com/", B, "ftp://example.com/"),
    ("https:example.com/", B, "https://example.com/"),
    ("/a/b/c", B, "http://example.org/a/b/c"),
    ("/a/ /c", B, "http://example.org/a/%20/c"),
    ("/a%2fc", B, "http://example.org/a%2fc"),
    ("/a/%2f/c", B, "http://example.org/a/%2f/c"),
    ("#\u03b2", B, "http://example.org/foo/bar#%CE%B2"),
    ("data:text/html,test#test", B, "data:text/html,test#test"),
    ("tel:1234567890", B, "tel:1234567890"),
    ("ssh://example.com/foo/bar.git", "http://example.org/", "ssh://example.com/foo/bar.git"),
    ("http://example.com/././foo", None, "http://example.com/foo"),
    ("http://example.com/./.foo", None, "http://example.com/.foo"),
    ("http://example.com/foo/.", None, "http://example.com/foo/"),
    ("http://example.com/foo/./", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar/..", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar/../", None, "http://example.com/foo/"),
    ("http://example.com/foo/..bar", None, "http://example.com/foo/..bar"),
    ("http://example.com/foo/bar/../ton", None, "http://example.com/foo/ton"),
    ("http://example.com/foo/bar/../ton/../../a", None, "http://example.com/a"),
    ("http://example.com/foo/../../..", None, "http://example.com/"),
    ("http://example.com/foo/../../../ton", None, "http://example.com/ton"),
    ("http://example.com/foo/%2e", None, "http://example.com/foo/"),
    ("http://example.com/foo/%2e%2", None, "http://example.com/foo/%2e%2"),
    ("http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", None, "http://example.com/%2e.bar"),
    ("http://example.com////../..", None, "http://example.com//"),
    ("http://example.com/foo/bar//../..", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar//..", None, "http://example.com/foo/bar/"),
    ("http://example.com/foo", None, "http://example.com/foo"),
    ("http://example.com/%20foo", None, "http://example.com/%20foo"),
    ("http://example.com/foo%", None, "http://example.com/foo%"),
    ("http://example.com/foo%2", None, "http://example.com/foo%2"),
    ("http://example.com/foo%2zbar", None, "http://example.com/foo%2zbar"),
    ("http://example.com/foo%2\u00c2\u00a9zbar", None, "http://example.com/foo%2%C3%82%C2%A9zbar"),
    ("http://example.com/foo%41%7a", None, "http://example.com/foo%41%7a"),
    ("http://example.com/foo\t\u0091%91", None, "http://example.com/foo%C2%91%91"),
    ("http://example.com/foo%00%51", None, "http://example.com/foo%00%51"),
    ("http://example.com/(%28:%3A%29)", None, "http://example.com/(%28:%3A%29)"),
    ("http://example.com/%3A%3a%3C%3c", None, "http://example.com/%3A%3a%3C%3c"),
    ("http://example.com/foo\tbar", None, "http://example.com/foobar"),
    ("http://example.com\\\\foo\\\\bar", None, "http://example.com//foo//bar"),
    (
        "http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd",
        None,
        "http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd",
    ),
    ("http://example.com/@asdf%40", None, "http://example.com/@asdf%40"),
    (
        "http://example.com/\u4f60\u597d\u4f60\u597d",
        None,
        "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD",
    ),
    ("http://example.com/\u2025/foo", None, "http://example.com/%E2%80%A5/foo"),
    ("http://example.com/\ufeff/foo", None, "http://example.com/%EF%BB%BF/foo"),
    (
        "http://example.com/\u202e/foo/\u202d/bar",
        None,
        "http://example.com/%E2%80%AE/foo/%E2%80%AD/bar",
    ),
    ("http://www.google.com/foo?bar=baz#", None, "http://www.google.com/foo?bar=baz#"),
    (
        "http://www.google.com/foo?bar=baz# \u00bb",
        None,
        "http://www.google.com/foo?bar=baz#%20%C2%BB",
    ),
    ("http://www.google.com", None, "http://www.google.com/"),
    ("http://192.0x00A80001", None, "http://192.168.0.1/"),
    ("http://www/foo%2Ehtml", None, "http://www/foo%2Ehtml"),
    ("http://www/foo/%2E/html", None, "http://www/foo/html"),
    ("http://user:pass@/", None, None),
    ("http://%25DOMAIN:foobar@foodomain.com/", None, "http://%25DOMAIN:foobar@foodomain.com/"),
    ("http:\\\\www.google.com\\foo", None, "http://www.google.com/foo"),
    ("http://foo:80/", None, "http://foo/"),
    ("http://foo:81/", None, "http://foo:81/"),
    ("httpa://foo:80/", None, "httpa://foo:80/"),
    ("http://foo:-80/", None, None),
    ("https://foo:443/", None, "https://foo/"),
    ("https://foo:80/", None, "https://foo:80/"),
    ("ftp://foo:21/", None, "ftp://foo/"),
    ("ws://foo:80/", None, "ws://foo/"),
    ("http:/example.com/", None, "http://example.com/"),
    ("https:/example.com/", None, "https://example.com/"),
    ("ws:/example.com/", None, "ws://example.com/"),
    ("javascript:/example.com/", None, "javascript:/example.com/"),
    ("http:example.com/", None, "http://example.com/"),
    ("https:example.com/", None, "https://example.com/"),
    ("mailto:example.com/", None, "mailto:example.com/"),
    ("https://example.com/aaa/bbb/%2e%2e?query", None, "https://example.com/aaa/?query"),
    ("http:@www.example.com", None, "http://www.example.com/"),
    ("http:/@www.example.com", None, "http://www.example.com/"),
    ("http://@www.example.com", None, "http://www.example.com/"),
    ("http:a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http:/a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http://a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http://@pple.com", None, "http://pple.com/"),
    ("http::b@www.example.com", None, "http://:b@www.example.com/"),
    ("http:/:b@www.example.com", None, "http://:b@www.example.com/"),
    ("http://:b@www.example.com", None, "http://:b@www.example.com/"),
    ("http:/:@/www.example.com", None, None),
    ("http://user@/www.example.com", None, None),
    ("http:@/www.example.com", None, None),
    ("http:/@/www.example.com", None, None),
    ("http://@/www.example.com", None, None),
    ("https:@/www.example.com", None, None),
    ("http:a:b@/www.example.com", None, None),
    ("http:/a:b@/www.example.com", None, None),
    ("http://a:b@/www.example.com", None, None),
    ("http::@/www.example.com", None, None),
    ("http:a:@www.example.com", None, "http://a@www.example.com/"),
    ("http:/a:@www.example.com", None, "http://a@www.example.com/"),
    ("http://a:@www.example.com", None, "http://a@www.example.com/"),
    ("http://www.@pple.com", None, "http://www.@pple.com/"),
    ("http:@:www.example.com", None, None),
    ("http:/@:www.example.com", None, None),
    ("http://@:www.example.com", None, None),
    ("http://:@www.example.com", None, "http://www.example.com/"),
    ("/", "http://www.example.com/test", "http://www.example.com/"),
    ("/test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    (".", "http://www.example.com/test", "http://www.example.com/"),
    ("..", "http://www.example.com/test", "http://www.example.com/"),
    ("test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("./test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("../test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("../aaa/test.txt", "http://www.example.com/test", "http://www.example.com/aaa/test.txt"),
    ("../../test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("\u4e2d/test.txt", "http://www.example.com/test", "http://www.example.com/%E4%B8%AD/test.txt"),
    ("http://www.example2.com", "http://www.example.com/test", "http://www.example2.com/"),
    ("//www.example2.com", "http://www.example.com/test", "http://www.example2.com/"),
    ("file:...", "http://www.example.com/test", "file:///..."),
    ("http://ExAmPlE.CoM", "http://other.com/", "http://example.com/"),
    ("http://example example.com", "http://other.com/", None),
    ("http://Goo%20 goo%7C|.com", "http://other.com/", None),
    ("http://[]", "http://other.com/", None),
    ("http://[:]", "http://other.com/", None),
    ("http://GOO\u00a0\u3000goo.com", "http://other.com/", None),
    ("http://GOO\u200b\u2060\ufeffgoo.com", "http://other.com/", "http://googoo.com/"),
    ("\u0000\u001b\u0004\u0012 http://example.com/\u001f \u000d ", None, "http://example.com/"),
    ("http://www.foo\u3002bar.com", "http://other.com/", "http://www.foo.bar.com/"),
    ("http://\ufdd0zyx.com", "http://other.com/", None),
    ("http://%ef%b7%90zyx.com", "http://other.com/", None),
    ("https://\ufffd", None, None),
    ("https://%EF%BF%BD", None, None),
    ("https://x/\ufffd?\ufffd#\ufffd", None, "https://x/%EF%BF%BD?%EF%BF%BD#%EF%BF%BD"),
    ("http://a.b.c.xn--pokxncvks", None, None),
    ("http://10.0.0.xn--pokxncvks", None, None),
    ("http://a.b.c.XN--pokxncvks", None, None),
    ("http://a.b.c.Xn--pokxncvks", None, None),
    ("http://10.0.0.XN--pokxncvks", None, None),
    ("http://10.0.0.xN--pokxncvks", None, None),
    ("http://\uff27\uff4f.com", "http://other.com/", "http://go.com/"),
    ("http://\uff05\uff14\uff11.com", "http://other.com/", None),
    ("http://%ef%bc%85%ef%bc%94%ef%bc%91.com", "http://other.com/", None),
    ("http://\uff05\uff10\uff10.com", "http://other.com/", None),
    ("http://%ef%bc%85%ef%bc%90%ef%bc%90.com", "http://other.com/", None),
    ("http://\u4f60\u597d\u4f60\u597d", "http://other.com/", "http://xn--6qqa088eba/"),
    ("https://fa\u00df.ExAmPlE/", None, "https://xn--fa-hia.example/"),
    ("http://%zz%66%a.com", "http://other.com/", None),
    ("http://%25", "http://other.com/", None),
    ("http://hello%00", "http://other.com/", None),
    ("http://%30%78%63%30%2e%30%32%35%30.01", "http://other.com/", "http://192.168.0.1/"),
    ("http://%30%78%63%30%2e%30%32%35%30.01%2e", "http://other.com/", "http://192.168.0.1/"),
    ("http://192.168.0.257", "http://other.com/", None),
    ("http://%3g%78%63%30%2e%30%32%35%30%2E.01", "http://other.com/", None),
    ("http://192.168.0.1 hello", "http://other.com/", None),
    ("https://x x:12", None, None),
    (
        "http://\uff10\uff38\uff43\uff10\uff0e\uff10\uff12\uff15\uff10\uff0e\uff10\uff11",
        "http://other.com/",
        "http://192.168.0.1/",
    ),
    ("http://./", None, "http://./"),
    ("http://../", None, "http://../"),
    ("http://[www.google.com]/", None, None),
    ("http://[google.com]", "http://other.com/", None),
    ("http://[::1.2.3.4x]", "http://other.com/", None),
    ("http://[::1.2.3.]", "http://other.com/", None),
    ("http://[::1.2.]", "http://other.com/", None),
    ("http://[::.1.2]", "http://other.com/", None),
    ("http://[::1.]", "http://other.com/", None),
    ("http://[::.1]", "http://other.com/", None),
    ("http://[::%31]", "http://other.com/", None),
    ("http://%5B::1]", "http://other.com/", None),
    (
        "http://foo:\U0001f4a9@example.com/bar",
        "http://other.com/",
        "http://foo:%F0%9F%92%A9@example.com/bar",
    ),
    (
        "https://@test@test@example:800/",
        "http://doesnotmatter/",
        "https://%40test%40test@example:800/",
    ),
    ("https://@@@example", "http://doesnotmatter/", "https://%40%40@example/"),
    (
        "http://`{}:`{}@h/`{}?`{}",
        "http://doesnotmatter/",
        "http://%60%7B%7D:%60%7B%7D@h/%60%7B%7D?`{}",
    ),
    ("http://host/?'", None, "http://host/?%27"),
    ("/some/path", "http://user@example.org/smth", "http://user@example.org/some/path"),
    ("", "http://user:pass@example.org:21/smth", "http://user:pass@example.org:21/smth"),
    (
        "/some/path",
        "http://user:pass@example.org:21/smth",
        "http://user:pass@example.org:21/some/path",
    ),
    ("about:/../", None, "about:/"),
    ("data:/../", None, "data:/"),
    ("http://a b/", None, None),
    ("http://a%b/", None, None),
    ("http://a<b", None, None),
    ("http://a>b", None, None),
    ("http://a[b/", None, None),
    ("http://a]b/", None, None),
    ("http://a^b", None, None),
    ("http://a|b/", None, None),
    ("http://a\u007fb/", None, None),
    ("http://ho\u0009st/", None, "http://host/"),
    ("http://ho\u000ast/", None, "http://host/"),
    ("http://ho\u000dst/", None, "http://host/"),
    ("http://!\"$&'()*+,-.;=_`{}~/", None, "http://!\"$&'()*+,-.;=_`{}~/"),
    ("ftp://example.com%80/", None, None),
    ("https://example.com%80/", None, None),
    ("https://example.com%A0/", None, None),
    ("https://%e2%98%83", None, "https://xn--n3h/"),
    (
        "http://127.0.0.1:10100/relative_import.html",
        None,
        "http://127.0.0.1:10100/relative_import.html",
    ),
    ("http://facebook.com/?foo=%7B%22abc%22", None, "http://facebook.com/?foo=%7B%22abc%22"),
    ("https://localhost:3000/jqueryui@1.2.3", None, "https://localhost:3000/jqueryui@1.2.3"),
    (
        "h\tt\nt\rp://h\to\ns\rt:9\t0\n0\r0/p\ta\nt\rh?q\tu\ne\rry#f\tr\na\rg",
        None,
        "http://host:9000/path?query#frag",
    ),
    ("?a=b&c=d", B, "http://example.org/foo/bar?a=b&c=d"),
    ("??a=b&c=d", B, "http://example.org/foo/bar??a=b&c=d"),
    ("http:", B, "http://example.org/foo/bar"),
    ("http:", "https://example.org/foo/bar", None),
    ("http://foo.bar/baz?qux#foo\bbar", None, "http://foo.bar/baz?qux#foo%08bar"),
    ('http://foo.bar/baz?qux#foo"bar', None, "http://foo.bar/baz?qux#foo%22bar"),
    ("http://1.2.3.4/", "http://other.com/", "http://1.2.3.4/"),
    ("http://1.2.3.4./", "http://other.com/", "http://1.2.3.4/"),
    ("http://192.168.257", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.168.257.", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.168.257.com", "http://other.com/", "http://192.168.257.com/"),
    ("http://256", "http://other.com/", "http://0.0.1.0/"),
    ("http://256.com", "http://other.com/", "http://256.com/"),
    ("http://999999999", "http://other.com/", "http://59.154.201.255/"),
    ("http://999999999.", "http://other.com/", "http://59.154.201.255/"),
    ("http://999999999.com", "http://other.com/", "http://999999999.com/"),
    ("http://10000000000", "http://other.com/", None),
    ("http://10000000000.com", "http://other.com/", "http://10000000000.com/"),
    ("http://4294967295", "http://other.com/", "http://255.255.255.255/"),
    ("http://4294967296", "http://other.com/", None),
    ("http://0xffffffff", "http://other.com/", "http://255.255.255.255/"),
    ("http://0xffffffff1", "http://other.com/", None),
    ("http://256.256.256.256", "http://other.com/", None),
    ("https://0x.0x.0", None, "https://0.0.0.0/"),
    ("https://0x100000000/test", None, None),
    ("https://256.0.0.1/test", None, None),
    ("https://%43%7C/", None, None),
    ("http://[1:0::]", "http://example.net/", "http://[1::]/"),
    ("http://[0:1:2:3:4:5:6:7:8]", "http://example.net/", None),
    ("https://[0::0::0]", None, None),
    ("https://[0:.0]", None, None),
    ("https://[0:0:]", None, None),
    ("https://[0:1:2:3:4:5:6:7.0.0.0.1]", None, None),
    ("https://[0:1.00.0.0.0]", None, None),
    ("https://[0:1.290.0.0.0]", None, None),
    ("https://[0:1.23.23]", None, None),
    ("http://?", None, None),
    ("http://#", None, None),
    ("http://f:4294967377/c", "http://example.org/", None),
    ("http://f:18446744073709551697/c", "http://example.org/", None),
    ("http://f:340282366920938463463374607431768211537/c", "http://example.org/", None),
    ("blob:https://example.com:443/", None, "blob:https://example.com:443/"),
    ("http://0x7f.0.0.0x7g", None, "http://0x7f.0.0.0x7g/"),
    ("http://0X7F.0.0.0X7G", None, "http://0x7f.0.0.0x7g/"),
    ("http://[::127.0.0.0.1]", None, None),
    ("http://[0:1:0:1:0:1:0:1]", None, "http://[0:1:0:1:0:1:0:1]/"),
    ("http://[1:0:1:0:1:0:1:0]", None, "http://[1:0:1:0:1:0:1:0]/"),
    ("http://example.org/test?\u0022", None, "http://example.org/test?%22"),
    ("http://example.org/test?\u0023", None, "http://example.org/test?#"),
    ("http://example.org/test?\u003c", None, "http://example.org/test?%3C"),
    ("http://example.org/test?\u003e", None, "http://example.org/test?%3E"),
    ("http://example.org/test?\u2323", None, "http://example.org/test?%E2%8C%A3"),
    ("http://example.org/test?%23%23", None, "http://example.org/test?%23%23"),
    ("http://example.org/test?%GH", None, "http://example.org/test?%GH"),
    ("http://example.org/test?a#%EF", None, "http://example.org/test?a#%EF"),
    ("http://example.org/test?a#%GH", None, "http://example.org/test?a#%GH"),
    ("http://example.org/test?a#b\u0000c", None, "http://example.org/test?a#b%00c"),
    ("a1234567890-+.:foo/bar", "http://example.com/dir/file", "a1234567890-+.:foo/bar"),
    ("#link", "https://example.org/##link", "https://example.org/#link"),
    (
        "https://www.example.com/path{\u007fpath.html?query'\u007f=query#fragment<\u007ffragment",
        None,
        "https://www.example.com/path%7B%7Fpath.html?query%27%7F=query#fragment%3C%7Ffragment",
    ),
    ("https://user:pass[\u007f@foo/bar", "http://example.org", "https://user:pass%5B%7F@foo/bar"),
    ("http://1.2.3.4.5", "http://other.com/", None),
    ("http://1.2.3.4.5.", "http://other.com/", None),
    ("http://0..0x300/", None, None),
    ("http://0..0x300./", None, None),
    ("http://256.256.256.256.256", "http://other.com/", None),
    ("http://256.256.256.256.256.", "http://other.com/", None),
    ("http://1.2.3.08", None, None),
    ("http://1.2.3.08.", None, None),
    ("http://1.2.3.09", None, None),
    ("http://09.2.3.4", None, None),
    ("http://09.2.3.4.", None, None),
    ("http://01.2.3.4.5", None, None),
    ("http://01.2.3.4.5.", None, None),
    ("http://0x100.2.3.4", None, None),
    ("http://0x100.2.3.4.", None, None),
    ("http://0x1.2.3.4.5", None, None),
    ("http://0x1.2.3.4.5.", None, None),
    ("http://foo.1.2.3.4", None, None),
    ("http://foo.1.2.3.4.", None, None),
    ("http://foo.2.3.4", None, None),
    ("http://foo.2.3.4.", None, None),
    ("http://foo.09", None, None),
    ("http://foo.09.", None, None),
    ("http://foo.0x4", None, None),
    ("http://foo.0x4.", None, None),
    ("http://foo.09..", None, "http://foo.09../"),
    ("http://0999999999999999999/", None, None),
    ("http://foo.0x", None, None),
    ("http://foo.0XFfFfFfFfFfFfFfFfFfAcE123", None, None),
    ("http://\U0001f4a9.123/", None, None),
    ("https://\u0000y", None, None),
    ("https://x/\u0000y", None, "https://x/%00y"),
    ("https://x/?\u0000y", None, "https://x/?%00y"),
    ("https://x/?#\u0000y", None, "https://x/?#%00y"),
    ("https://\uffffy", None, None),
    ("https://x/\uffffy", None, "https://x/%EF%BF%BFy"),
    ("https://x/?\uffffy", None, "https://x/?%EF%BF%BFy"),
    ("https://x/?#\uffffy", None, "https://x/?#%EF%BF%BFy"),
    ('https://example.com/"quoted"', None, "https://example.com/%22quoted%22"),
    ("https://a%C2%ADb/", None, "https://ab/"),
    ("https://\u00ad/", None, None),
    ("https://%C2%AD/", None, None),
    ("https://xn--/", None, None),
    (
        "data://example.com:8080/pathname?search#hash",
        None,
        "data://example.com:8080/pathname?search#hash",
    ),
    (
        "javascript://example.com:8080/pathname?search#hash",
        None,
        "javascript://example.com:8080/pathname?search#hash",
    ),
    (
        "mailto://example.com:8080/pathname?search#hash",
        None,
        "mailto://example.com:8080/pathname?search#hash",
    ),
    (
        "intent://example.com:8080/pathname?search#hash",
        None,
        "intent://example.com:8080/pathname?search#hash",
    ),
    ("///test", "http://example.org/", "http://test/"),
    ("///\\//\\//test", "http://example.org/", "http://test/"),
    ("///example.org/path", "http://example.org/", "http://example.org/path"),
    ("///example.org/../path", "http://example.org/", "http://example.org/path"),
    ("///example.org/../../", "http://example.org/", "http://example.org/"),
    ("///example.org/../path/../../", "http://example.org/", "http://example.org/"),
    ("///example.org/../path/../../path", "http://example.org/", "http://example.org/path"),
    ("/\\/\\//example.org/../path", "http://example.org/", "http://example.org/path"),
]
# "Forbidden domain code points" and "Encoded forbidden domain code points in special URLs":
# the file lists one case per code point; they are the same list here.
URLTESTDATA += [(f"http://a{chr(c)}b/", None, None) for c in range(0x20) if c not in (9, 10, 13)]
URLTESTDATA += [
    (f"http://ho%{c:02X}st/", None, None) for c in [*range(0x21), *b"#%/:<>?@[\\]|\x7f"]
]

EMPTY_QUERY = "an empty query is not sent: Scrapy's Request drops it (crawler.net.weburl)"
BRACKETS = "[ ] in a path are encoded: RFC 3986 3.3 has them in no path (Scrapy's Request too)"
PERCENT = "a % that starts no escape is written %25: RFC 3986 2.1/2.4, a valid request line"
TRAILING_DOT = "a host's trailing dot is dropped: one server, one queue and robots.txt"
QUERY_CHARS = "` { } in a query are encoded, as Scrapy's Request encodes them"
HOST_CHARS = "a host of characters no DNS name has (!$&'()*+,;=`{}~) is refused"

# (input, base): (the URL we request, or None; why we differ from the browser)
DIFFERS: dict[tuple[str, str | None], tuple[str | None, str]] = {
    ("?", B): ("http://example.org/foo/bar", EMPTY_QUERY),
    ("http://example.org/test?#", None): ("http://example.org/test", EMPTY_QUERY),
    ("https://x/?#\u0000y", None): ("https://x/", EMPTY_QUERY),
    ("https://x/?#\uffffy", None): ("https://x/", EMPTY_QUERY),
    ("[61:24:74]:98", B): ("http://example.org/foo/%5B61:24:74%5D:98", BRACKETS),
    ("http:[61:27]/:foo", B): ("http://example.org/foo/%5B61:27%5D/:foo", BRACKETS),
    ("http://example.com/foo/%2e%2", None): ("http://example.com/foo/%2e%252", PERCENT),
    ("http://example.com/foo%", None): ("http://example.com/foo%25", PERCENT),
    ("http://example.com/foo%2", None): ("http://example.com/foo%252", PERCENT),
    ("http://example.com/foo%2zbar", None): ("http://example.com/foo%252zbar", PERCENT),
    ("http://example.com/foo%2\u00c2\u00a9zbar", None): (
        "http://example.com/foo%252%C3%82%C2%A9zbar",
        PERCENT,
    ),
    ("http://example.org/test?%GH", None): ("http://example.org/test?%25GH", PERCENT),
    ("http://../", None): ("http://./", TRAILING_DOT),
    ("http://foo.09..", None): ("http://foo.09./", TRAILING_DOT),
    ("http://`{}:`{}@h/`{}?`{}", "http://doesnotmatter/"): (
        "http://h/%60%7B%7D?%60%7B%7D",
        QUERY_CHARS,
    ),
    ("http://!\"$&'()*+,-.;=_`{}~/", None): (None, HOST_CHARS),
}


def browser_request(href: str | None) -> str | None:
    """The URL a browser requests for WHATWG's ``href``: http(s) only, without the fragment
    and the credentials (sent, if at all, in an ``Authorization`` header)."""
    if href is None:
        return None
    scheme, sep, rest = href.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    rest = rest.partition("#")[0]
    slash = rest.find("/")  # an http(s) URL always has a path
    return f"{scheme}://{rest[:slash].rpartition('@')[2]}{rest[slash:]}"


def crawler_request(link: str, base: str | None) -> str | None:
    """The URL the crawler requests for ``link`` found on ``base`` (None: a seed)."""
    absolute = UrlJoiner(base).join(link) if base else link
    try:
        return request_url(absolute)[0]
    except InvalidUrl:
        return None


def _id(case: tuple[str, str | None, str | None]) -> str:
    return ascii(f"{case[0]} @ {case[1]}")[1:-1][:80]


@pytest.mark.parametrize("case", URLTESTDATA, ids=[_id(c) for c in URLTESTDATA])
def test_what_a_browser_would_request(case: tuple[str, str | None, str | None]) -> None:
    link, base, href = case
    expected = DIFFERS.get((link, base), (browser_request(href), ""))[0]
    assert crawler_request(link, base) == expected


def test_every_deliberate_difference_is_a_case_of_the_file() -> None:
    assert set(DIFFERS) <= {(link, base) for link, base, _ in URLTESTDATA}
    for link, base, href in URLTESTDATA:
        if (link, base) in DIFFERS:
            assert browser_request(href) != DIFFERS[(link, base)][0], link


@pytest.mark.parametrize("case", URLTESTDATA, ids=[_id(c) for c in URLTESTDATA])
def test_the_request_url_is_what_scrapy_sends(case: tuple[str, str | None, str | None]) -> None:
    """A request URL is a fixed point of Scrapy's ``Request``: what the frontier keeps, robots.txt
    judges and the WARC records is what goes on the wire."""
    url = crawler_request(case[0], case[1])
    if url is not None:
        assert Request(url).url == url


# Every place that joins an href joins it the one way (crawler.net.weburl.join): links,
# <base href>, rel=canonical, page requisites, feed items. Relative inputs of the file where
# RFC 3986's urljoin and WHATWG disagree.
ODD_HREFS = ["\\x", "\\\\x\\hello", "http:/example.com/", "///example.org/../path", " foo.com  "]


@pytest.mark.parametrize("href", ODD_HREFS)
def test_every_href_is_joined_as_a_browser_joins_it(href: str) -> None:
    joined = join(B, href)
    assert UrlJoiner(B).join(href) == joined
    assert absolute_requisites(B, [href], 0)[0] == [joined]
    body = b'{"items": [{"url": "%s"}]}' % href.replace("\\", "\\\\").encode()
    assert read_json_feed(body, 10, B)[0][0][0] == joined
    same_host = urlsplit(joined).hostname == "example.org"
    verdict = (normalize_url(joined)[0], "honoured") if same_host else (None, "other_site")
    assert CanonicalPolicy("host", normalize_url).judge(B, href) == verdict


# --- crawler-commons BasicURLNormalizerTest.java ------------------------------------------------

COMMONS = "crawler-commons BasicURLNormalizerTest.java"
EMPTY_SEGMENT = (
    "an empty path segment is kept: RFC 3986 6.2.2.3 removes dot-segments only, WHATWG keeps "
    "//, and a server may route /a//b apart from /a/b"
)
# (test, a URL, its normal form, whether our seen key makes them one URL, why we differ)
SAME_RESOURCE: list[tuple[str, str, str, bool, str]] = [
    ("testNUTCH1098", "http://foo.com/%66oo.html", "http://foo.com/foo.html", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.htm%6c", "http://foo.com/foo.html", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.ht%6dl", "http://foo.com/foo.html", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.ht%6d%6c", "http://foo.com/foo.html", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.htm%C0", "http://foo.com/foo.htm%C0", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.htm%1A", "http://foo.com/foo.htm%1A", True, ""),
    ("testNUTCH1098", "http://foo.com/%66oo.htm%c0", "http://foo.com/foo.htm%C0", True, ""),
    ("testNUTCH1098", "http://foo.com/you too.html", "http://foo.com/you%20too.html", True, ""),
    ("testNUTCH1098", "http://foo.com/fast/dir%2fcz", "http://foo.com/fast/dir%2Fcz", True, ""),
    ("testNUTCH1098", "http://foo.com/\u001a!", "http://foo.com/%1A!", True, ""),
    ("testNUTCH1098", "http://foo.com/\u0001!", "http://foo.com/%01!", True, ""),
    (
        "testNUTCH1098",
        "http://mydomain.com/en Espa\u00f1ol.aspx",
        "http://mydomain.com/en%20Espa%C3%B1ol.aspx",
        True,
        "",
    ),
    # IDNA: crawler-commons keeps the U-label; it and the A-label name one host
    ("testNUTCH2064", "http://b\u00fccher.de/", "http://xn--bcher-kva.de/", True, ""),
    ("testNUTCH2064", "http://x.com/./a/../%66.html", "http://x.com/f.html", True, ""),
    ("testNUTCH2064", "http://x.com/?x[y]=1", "http://x.com/?x%5By%5D=1", True, ""),
    ("testNUTCH2064", "http://x.com/foo\u0080", "http://x.com/foo%C2%80", True, ""),
    ("testNUTCH2064", "http://x.com/foo%c2%80", "http://x.com/foo%C2%80", True, ""),
    ("testNormalizer", " http://foo.com/ ", "http://foo.com/", True, ""),
    ("testNormalizer", "HTTP://foo.com/", "http://foo.com/", True, ""),
    ("testNormalizer", "http://Foo.Com/index.html", "http://foo.com/index.html", True, ""),
    ("testNormalizer", "http://foo.com:80/index.html", "http://foo.com/index.html", True, ""),
    ("testNormalizer", "http://example.com:/", "http://example.com/", True, ""),
    (
        "testNormalizer",
        "https://example.com:/foobar.html",
        "https://example.com/foobar.html",
        True,
        "",
    ),
    ("testNormalizer", "http://foo.com", "http://foo.com/", True, ""),
    ("testNormalizer", "http://foo.com/foo.html#ref", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/aa/./foo.html", "http://foo.com/aa/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/aa/../", "http://foo.com/", True, ""),
    ("testNormalizer", "http://foo.com/aa/bb/../", "http://foo.com/aa/", True, ""),
    ("testNormalizer", "http://foo.com/aa/..", "http://foo.com/", True, ""),
    (
        "testNormalizer",
        "http://foo.com/aa/bb/cc/../../foo.html",
        "http://foo.com/aa/foo.html",
        True,
        "",
    ),
    (
        "testNormalizer",
        "http://foo.com/aa/bb/../cc/dd/../ee/foo.html",
        "http://foo.com/aa/cc/ee/foo.html",
        True,
        "",
    ),
    ("testNormalizer", "http://foo.com/../foo.html", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/../../foo.html", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/../aa/../foo.html", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/aa/../../foo.html", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/aa/../bb/../foo.html/../../", "http://foo.com/", True, ""),
    ("testNormalizer", "http://foo.com/../aa/foo.html", "http://foo.com/aa/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/a..a/../foo.html", "http://foo.com/foo.html", True, ""),
    ("testNormalizer", "http://foo.com/foo.foo/../foo.html", "http://foo.com/foo.html", True, ""),
    (
        "testNormalizer",
        "http://foo.com//aa/bb/foo.html",
        "http://foo.com/aa/bb/foo.html",
        False,
        EMPTY_SEGMENT,
    ),
    (
        "testNormalizer",
        "http://foo.com/aa//bb/foo.html",
        "http://foo.com/aa/bb/foo.html",
        False,
        EMPTY_SEGMENT,
    ),
    (
        "testNormalizer",
        "http://foo.com/aa/bb//foo.html",
        "http://foo.com/aa/bb/foo.html",
        False,
        EMPTY_SEGMENT,
    ),
    (
        "testNormalizer",
        "http://foo.com////aa////bb////foo.html",
        "http://foo.com/aa/bb/foo.html",
        False,
        EMPTY_SEGMENT,
    ),
]
FORM_DECODED = (
    "the seen key reads a query as HTML form data (w3lib's canonical form): a form decoder "
    "gives the same fields for %3A%2F and :/"
)
# Cases crawler-commons leaves alone because decoding would change the resource: the escaped
# form and the decoded one must stay two URLs. (test, escaped, decoded, one URL?, why we differ)
DIFFERENT_RESOURCES: list[tuple[str, str, str, bool, str]] = [
    ("testNUTCH1098", "http://foo.com/file.html%23cz", "http://foo.com/file.html#cz", False, ""),
    ("testNUTCH1098", "http://foo.com/fast/dir%2fcz", "http://foo.com/fast/dir/cz", False, ""),
    ("testNUTCH1098", "http://foo.com/you%20too.html", "http://foo.com/you+too.html", False, ""),
    ("testNUTCH2064", "http://x.com/s?q=a%26b&m=10", "http://x.com/s?q=a&b&m=10", False, ""),
    (
        "testNUTCH2064",
        "http://google.com/search?q=c%2B%2B",
        "http://google.com/search?q=c++",
        False,
        "",
    ),
    (
        "testNUTCH2064",
        "http://x.com/show?http%3A%2F%2Fx.com%2Fb",
        "http://x.com/show?http://x.com/b",
        True,
        FORM_DECODED,
    ),
]


@pytest.mark.parametrize(
    ("test", "url", "other", "one", "differs"), SAME_RESOURCE + DIFFERENT_RESOURCES
)
def test_the_seen_key_makes_one_url_of_one_resource(
    test: str, url: str, other: str, one: bool, differs: str
) -> None:
    assert (normalize_url(url)[0] == normalize_url(other)[0]) is one
