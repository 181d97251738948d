"""The site spider and its loader, driven in memory; the CLI only where it stops before fetching.

No test here sends a request: ``parse`` gets responses built in memory, ``start`` is drained
without an engine, and the ``scrapy`` subprocesses either only list spiders or are refused
before the engine starts.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider, signals
from scrapy.exceptions import UsageError
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.robots import Directives
from crawler.sites import SeedsFileError, SiteConfig, SiteConfigError, load_site_config
from crawler.spiders.loader import SiteSpiderLoader
from crawler.spiders.site import USAGE_STAT_KEYS, SiteSpider
from crawler.spiders.site_items import PageItem

ROOT = Path(__file__).resolve().parent.parent
# Belt and braces for the subprocesses: even if a crawl got as far as the downloader, it could
# not fetch anything.
NO_NETWORK = ["-s", 'DOWNLOAD_HANDLERS={"http": null, "https": null}']


def make_spider(
    tmp_path: Path,
    toml: str = 'name = "t"\n',
    settings: dict[str, Any] | None = None,
    **kwargs: Any,
) -> SiteSpider:
    path = tmp_path / "t.toml"
    path.write_text(toml, encoding="utf-8")
    cls = SiteSpider.for_site(load_site_config(path))
    return cls.from_crawler(get_crawler(cls, settings), **kwargs)


def drain(agen: AsyncIterator[Any]) -> list[Any]:
    """Run an async generator that never awaits anything to completion, without an event loop."""
    out = []
    while True:
        step = agen.__anext__()
        try:
            step.send(None)
        except StopIteration as done:
            out.append(done.value)
        except StopAsyncIteration:
            return out
        else:  # pragma: no cover - start() awaited something: needs a real loop
            step.close()
            raise AssertionError("start() awaited; drive it with an event loop")


def drain_one(agen: AsyncIterator[Any]) -> Any:
    """The next item of an async generator that never awaits anything."""
    step = agen.__anext__()
    try:
        step.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("start() awaited or ended")


def html_response(
    url: str, body: bytes, headers: dict[str, str] | None = None, **meta: Any
) -> HtmlResponse:
    return HtmlResponse(
        url, body=body, headers=headers or {}, request=Request(url, meta=meta), status=200
    )


def split(results: Iterator[Any]) -> tuple[PageItem, list[Request]]:
    out = list(results)
    assert isinstance(out[0], PageItem)
    assert all(isinstance(r, Request) for r in out[1:])
    return out[0], out[1:]


PAGE = b"""<!DOCTYPE html>
<html><head><title>  A   page </title><base href="/docs/"><script>var x = "<a href='/no'>";</script>
</head><body>
<p>Hello <b>world</b></p>
<a href="intro.html#top">Intro</a>
<a href="intro.html">Introduction</a>
<a href=" intro.html ">Intro</a>
<a href="/abs?q=1&amp;r=2">Abs</a>
<a href="//other.example/x">Other</a>
<a href="HTTPS://Upper.example/">Upper</a>
<a href="mailto:me@example.com">Mail</a>
<a href="javascript:void(0)">JS</a>
<a href="tel:+123">Tel</a>
<a href="http://[::1/">Broken IPv6</a>
<a href="http://host:99999/">Bad port</a>
<a href="http://:8080/nohost">No host</a>
<a href="http://exa mple.com/">Host with a space</a>
<a href="#">Self</a>
<map><area href="/map" alt="Map"></map>
</body></html>"""


def test_parse_html_page(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT",
        "ETag": '"abc"',
    }
    response = html_response("https://site.example/a/page.html", PAGE, headers, depth=3)
    item, requests = split(spider.parse(response))

    assert item["url"] == item["final_url"] == "https://site.example/a/page.html"
    assert item["status"] == 200 and item["depth"] == 3 and item["site"] == "t"
    assert item["title"] == "A page"
    assert "Hello world" in item["text"] and "var x" not in item["text"]
    assert item["last_modified"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert item["etag"] == '"abc"'
    assert item["content_type"] == "text/html; charset=utf-8"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", item["fetched_at"])

    base = "https://site.example/docs/"
    assert item["outlinks"] == [
        {"url": base + "intro.html", "text": "Intro"},
        {"url": base + "intro.html", "text": "Introduction"},
        {"url": "https://site.example/abs?q=1&r=2", "text": "Abs"},
        {"url": "https://other.example/x", "text": "Other"},
        {"url": "https://Upper.example/", "text": "Upper"},
        {"url": base, "text": "Self"},  # "#" with <base href> is the base document
        {"url": "https://site.example/map", "text": "Map"},
    ]
    assert [r.url for r in requests] == [
        base + "intro.html",
        "https://site.example/abs?q=1&r=2",
        "https://other.example/x",
        "https://upper.example/",
        base,
        "https://site.example/map",
    ]
    # without the frontier scheduler the links come back as plain Requests (default callback)
    assert all(r.callback is None and not r.meta for r in requests)
    stats = spider.crawler.stats
    assert stats.get_value("links/skipped_scheme") == 3
    assert stats.get_value("links/invalid") == 4


def test_links_are_kept_exactly_when_the_frontier_takes_them(tmp_path: Path) -> None:
    """One rule for a valid URL: the spider keeps the links normalize_url accepts (an IDNA host,
    a backslash WHATWG reads as "/") and drops the ones it refuses (a "!" in the host)."""
    spider = make_spider(tmp_path)
    body = (
        b"<a href='http://a!b.example/'>bang</a>"
        b"<a href='http://m\xc3\xbcnchen.example/'>idna</a>"
        b"<a href='http://a\\b.example/'>backslash</a>"
    )
    response = html_response("https://site.example/", body, {"Content-Type": "text/html"})
    item, _ = split(spider.parse(response))
    kept = [link["text"] for link in item["outlinks"]]
    assert kept == ["idna", "backslash"]
    assert spider.crawler.stats.get_value("links/invalid") == 1


def test_parse_reports_the_url_before_redirects(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    response = html_response(
        "https://site.example/new",
        b"<a href='x'>x</a>",
        redirect_urls=["http://site.example/old", "https://site.example/old"],
    )
    item, requests = split(spider.parse(response))
    assert item["url"] == "http://site.example/old"
    assert item["final_url"] == "https://site.example/new"
    assert item["depth"] == 0
    assert [r.url for r in requests] == ["https://site.example/x"]  # joined with the final URL


def test_parse_broken_html(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    body = b"<html><body><div><a href='/one'>one <b>bold<a href=/two>two</p></table><title>T"
    item, requests = split(spider.parse(html_response("http://b.example/", body)))
    assert [r.url for r in requests] == ["http://b.example/one", "http://b.example/two"]
    # How unclosed tags nest is lxml's call; the anchors are found, whatever their text.
    assert [o["url"] for o in item["outlinks"]] == ["http://b.example/one", "http://b.example/two"]
    assert item["outlinks"][0]["text"].startswith("one bold")


@pytest.mark.parametrize("body", [b"", b"   ", b"\x00\x01\x02\xff" * 500, bytes(range(256))])
def test_parse_garbage_html_does_not_raise(tmp_path: Path, body: bytes) -> None:
    spider = make_spider(tmp_path)
    item, requests = split(spider.parse(html_response("http://g.example/", body)))
    assert item["url"] == "http://g.example/"
    assert requests == [] and item["outlinks"] == []


def test_parse_binary_response_has_no_text_or_links(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + b"<a href='/x'>x</a>" * 10
    response = Response(
        "http://b.example/img.png",
        body=png,
        headers={"Content-Type": "image/png"},
        request=Request("http://b.example/img.png"),
    )
    item, requests = split(spider.parse(response))
    assert requests == []
    assert (item["title"], item["text"], item["outlinks"]) == ("", "", [])
    assert item["content_type"] == "image/png" and item["status"] == 200


def test_parse_plain_text_is_not_parsed_as_html(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    response = TextResponse(
        "http://b.example/robots.txt",
        body=b"<a href='/x'>not a link</a>",
        headers={"Content-Type": "text/plain"},
        request=Request("http://b.example/robots.txt"),
    )
    item, requests = split(spider.parse(response))
    assert requests == [] and item["outlinks"] == []


def test_parse_encodings(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    latin1 = "<title>Caf\xe9</title><a href='/men\xfc'>\xc9t\xe9</a>".encode("latin-1")
    # Declared correctly in a <meta>: decoded correctly.
    body = b'<meta charset="iso-8859-1">' + latin1
    item, requests = split(spider.parse(html_response("http://e.example/", body)))
    assert item["title"] == "Caf\xe9"
    assert item["outlinks"] == [{"url": "http://e.example/men\xfc", "text": "\xc9t\xe9"}]
    assert requests[0].url == "http://e.example/men%C3%BC"
    # Declared wrongly (UTF-8 header on Latin-1 bytes): mangled text, but no exception.
    response = html_response(
        "http://e.example/", latin1, {"Content-Type": "text/html; charset=utf-8"}
    )
    item, requests = split(spider.parse(response))
    assert item["title"].startswith("Caf") and len(requests) == 1


def test_parse_many_links_dedupes(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    body = b"".join(b"<a href='/p%d#f%d'>l</a>" % (i % 100, i) for i in range(5000))
    item, requests = split(spider.parse(html_response("http://m.example/", body)))
    assert len(requests) == 100 and len(item["outlinks"]) == 100


# --- start() ---


def test_start_yields_seeds_from_config_files_and_argument(tmp_path: Path, caplog) -> None:
    (tmp_path / "cfg-seeds.txt").write_text("https://b.example/\n# comment\n\nnot a url\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("https://c.example/\nhttp://[::1\nftp://x/\nhttps://a.example/\n")
    toml = 'name = "t"\nseeds = ["https://a.example/"]\nseeds_file = "cfg-seeds.txt"\n'
    spider = make_spider(tmp_path, toml, seeds=str(extra))
    with caplog.at_level(logging.WARNING):
        requests = drain(spider.start())
    assert [r.url for r in requests] == [
        "https://a.example/",
        "https://b.example/",
        "https://c.example/",
        "https://a.example/",  # duplicates are the scheduler's business
    ]
    assert all(r.meta == {"seed": True} and r.callback == spider.parse for r in requests)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    for bad, source in (("not a url", "cfg-seeds.txt"), ("http://[::1", "extra.txt")):
        assert any(repr(bad) in w and source in w for w in warnings), (bad, warnings)
    assert any("'ftp://x/'" in w for w in warnings)
    stats = spider.crawler.stats
    assert stats.get_value("seeds/invalid") == 3
    assert stats.get_value("seeds/valid") == 4
    assert stats.get_value("seeds/none") is None


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_start_without_seeds_logs_an_error_at_the_end_of_an_empty_crawl(
    tmp_path: Path, caplog
) -> None:
    spider = make_spider(tmp_path, 'name = "t"\n')
    with caplog.at_level(logging.INFO):
        assert drain(spider.start()) == []
        assert errors(caplog) == []  # a joining worker may still find work in the frontier
        spider.closed("finished")
    [error] = errors(caplog)
    assert "No valid seeds" in error and "-a seeds=FILE" in error
    assert spider.crawler.stats.get_value("seeds/none") == 1


def test_a_worker_without_seeds_that_found_a_crawl_logs_no_error(tmp_path: Path, caplog) -> None:
    spider = make_spider(tmp_path, 'name = "t"\n', {"JOBDIR": str(tmp_path / "job")})
    with caplog.at_level(logging.INFO):
        drain(spider.start())
        spider.crawler.stats.set_value("frontier/seen", 12)  # what the scheduler sets at close
        spider.closed("finished")
    assert errors(caplog) == []
    assert any("No seeds of its own" in r.getMessage() for r in caplog.records)


def test_start_with_only_invalid_seeds_counts_none(tmp_path: Path) -> None:
    seeds = tmp_path / "s.txt"
    seeds.write_text("nope\n")
    spider = make_spider(tmp_path, seeds=str(seeds))
    assert drain(spider.start()) == []
    assert spider.crawler.stats.get_value("seeds/none") == 1
    assert spider.crawler.stats.get_value("seeds/invalid") == 1


def test_missing_seeds_argument_file_refuses_to_start(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(SeedsFileError, match=re.escape(str(missing))):
        make_spider(tmp_path, seeds=str(missing))
    with pytest.raises(SeedsFileError):
        make_spider(tmp_path, seeds="  ")


def test_seeds_argument_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rel.txt").write_text("https://r.example/\n")
    monkeypatch.chdir(tmp_path)
    spider = make_spider(tmp_path, seeds="rel.txt")
    monkeypatch.chdir(ROOT)
    assert [r.url for r in drain(spider.start())] == ["https://r.example/"]


def test_site_spider_class() -> None:
    site = SiteConfig(name="s-1", path="s-1.toml", settings={"DOWNLOAD_TIMEOUT": 3})
    cls = SiteSpider.for_site(site)
    assert issubclass(cls, SiteSpider) and cls.name == "s-1" and cls.site is site
    assert cls.custom_settings == {"DOWNLOAD_TIMEOUT": 3}
    assert cls.__name__ == "S1SiteSpider"
    with pytest.raises(TypeError, match="no site config"):
        type("Bare", (SiteSpider,), {"name": "bare"})()


# --- the loader ---


def write_sites(directory: Path) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "good.toml").write_text(
        'name = "good"\nseeds = ["https://good.example/"]\n'
        '[scope]\ndomains = ["good.example"]\n[settings]\nDOWNLOAD_TIMEOUT = 3\n'
    )
    (directory / "bad.toml").write_text('name = "bad"\n[politeness]\nmin_delay = "fast"\n')
    return directory


def test_loader_on_a_sites_dir(tmp_path: Path, caplog) -> None:
    sites = write_sites(tmp_path / "sites")
    loader = SiteSpiderLoader.from_settings(
        Settings({"SITES_DIR": str(sites), "SPIDER_MODULES": ["crawler.spiders"]})
    )
    with caplog.at_level(logging.WARNING, logger="crawler.spiders.loader"):
        assert loader.list() == ["good"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "bad.toml: politeness.min_delay: must be a number >= 0" in warning

    cls = loader.load("good")
    assert issubclass(cls, SiteSpider) and cls.name == "good"
    assert cls.site.scope.domains == ("good.example",)
    assert cls.custom_settings == {"DOWNLOAD_TIMEOUT": 3, "FRONTIER_PRIORITY_POLICY": "depth"}

    with pytest.raises(SiteConfigError) as info:
        loader.load("bad")
    assert info.value.key == "politeness.min_delay"
    assert str(info.value).endswith(
        'bad.toml: politeness.min_delay: must be a number >= 0, got "fast"'
    )
    assert isinstance(info.value, UsageError)  # scrapy crawl: one error line, exit status 2

    with pytest.raises(KeyError, match="Spider not found: nope"):
        loader.load("nope")

    assert loader.find_by_request(Request("https://www.good.example/x")) == ["good"]
    assert loader.find_by_request(Request("https://elsewhere.example/")) == []


def test_loader_reports_every_problem_of_a_file(tmp_path: Path) -> None:
    sites = tmp_path / "sites"
    sites.mkdir()
    (sites / "bad.toml").write_text(
        'name = "bad"\n[politeness]\nmin_delay = "fast"\nmax_delay = -1\n'
    )
    loader = SiteSpiderLoader.from_settings(
        Settings({"SITES_DIR": str(sites), "SPIDER_MODULES": ["crawler.spiders"]})
    )
    with pytest.raises(SiteConfigError) as info:
        loader.load("bad")
    assert isinstance(info.value, UsageError)
    assert [key for key, _ in info.value.problems] == [
        "politeness.min_delay",
        "politeness.max_delay",
    ]
    assert len(str(info.value).splitlines()) == 2


def test_loader_default_sites_and_module_spiders(tmp_path: Path) -> None:
    """Without SITES_DIR the packaged configs are used; ordinary spider classes still load."""
    pkg = tmp_path / "extra_spiders_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import scrapy\n\nclass Hand(scrapy.Spider):\n    name = 'handwritten'\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        loader = SiteSpiderLoader.from_settings(
            Settings({"SPIDER_MODULES": ["crawler.spiders", "extra_spiders_pkg"]})
        )
        names = loader.list()
        assert {"web", "example", "handwritten"} <= set(names)
        assert issubclass(loader.load("handwritten"), Spider)
        assert loader.load("web").site.name == "web"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("extra_spiders_pkg", None)


# --- the command line (nothing is fetched: listing, or refused before the engine starts) ---


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the scrapy commands in parallel (each costs a Python start-up) and collect results."""
    sites = write_sites(tmp_path_factory.mktemp("cli") / "sites")
    missing = str(tmp_path_factory.mktemp("nofile") / "nonexistent-seeds.txt")
    commands = {
        "list": ["list"],
        "list_dir": ["list", "-s", f"SITES_DIR={sites}"],
        "crawl_bad": ["crawl", "bad", "-s", f"SITES_DIR={sites}", *NO_NETWORK],
        "crawl_missing_seeds": ["crawl", "web", "-a", f"seeds={missing}", *NO_NETWORK],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    procs = {
        key: subprocess.Popen(
            [sys.executable, "-m", "scrapy", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for key, args in commands.items()
    }
    results = {}
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        results[key] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    results["missing_path"] = subprocess.CompletedProcess([], 0, missing, "")
    return results


def test_scrapy_list(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    result = cli["list"]
    assert result.returncode == 0, result.stderr
    assert {"web", "example"} <= set(result.stdout.split())


def test_scrapy_list_warns_about_broken_configs(cli) -> None:
    result = cli["list_dir"]
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["good"]
    assert "bad.toml: politeness.min_delay: must be a number >= 0" in result.stderr


def test_scrapy_crawl_broken_config_is_refused(cli) -> None:
    result = cli["crawl_bad"]
    assert result.returncode == 2
    assert 'bad.toml: politeness.min_delay: must be a number >= 0, got "fast"' in result.stderr
    assert "Traceback" not in result.stderr
    assert "Spider opened" not in result.stderr


def test_scrapy_crawl_with_missing_seeds_file_is_refused(cli) -> None:
    result = cli["crawl_missing_seeds"]
    missing = cli["missing_path"].stdout
    assert result.returncode != 0
    assert f"{missing}: cannot read seeds file: No such file or directory" in result.stderr
    assert "Spider opened" not in result.stderr


# --- page robots directives ---


def test_meta_robots_and_nofollow_links(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    body = (
        b'<meta name="robots" content="noindex"><a href="/a">a</a>'
        b'<a href="/b" rel="nofollow">b</a><a href="/c" rel="ugc NOFOLLOW">c</a>'
    )
    item, requests = split(spider.parse(html_response("http://r.example/", body)))
    assert item["noindex"] is True
    assert [r.url for r in requests] == ["http://r.example/a"]
    assert [o["url"] for o in item["outlinks"]] == ["http://r.example/a"]
    assert spider.crawler.stats.get_value("links/nofollow") == 2
    assert spider.crawler.stats.get_value("robots/noindex") == 1


@pytest.mark.parametrize(
    ("head", "headers", "noindex", "follows"),
    [
        ('<meta name="robots" content="nofollow">', {}, False, False),
        ('<meta name="ROBOTS" content="none">', {}, True, False),
        ('<meta name="crawler-bot" content="noindex">', {}, True, True),  # our own token
        ('<meta name="otherbot" content="noindex, nofollow">', {}, False, True),
        ("", {"X-Robots-Tag": "noindex"}, True, True),
        ("", {"X-Robots-Tag": "otherbot: nofollow"}, False, True),
        ("", {"X-Robots-Tag": "crawler-bot: nofollow"}, False, False),
        ("", {}, False, True),
        # unavailable_after: past when fetched, noindex; to come, or no date, nothing
        ('<meta name="robots" content="unavailable_after: 2001-01-01">', {}, True, True),
        ("", {"X-Robots-Tag": "unavailable_after: 2999-01-01T00:00:00Z"}, False, True),
        ("", {"X-Robots-Tag": "unavailable_after: soon"}, False, True),
    ],
)
def test_page_directives(
    tmp_path: Path, head: str, headers: dict[str, str], noindex: bool, follows: bool
) -> None:
    spider = make_spider(tmp_path, 'name = "t"\nuser_agent = "crawler-bot/0.1"\n')
    body = f'<html><head>{head}</head><body><a href="/next">n</a></body></html>'.encode()
    item, requests = split(spider.parse(html_response("http://r.example/", body, headers)))
    assert item["noindex"] is noindex
    assert bool(requests) is follows and bool(item["outlinks"]) is follows


def test_x_robots_tag_is_read_once_and_the_pages_own_directives_stay_the_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header's directives are read once per answer (with its usage decision, which the
    WARC writer may have made first) and the page's ``<meta name="robots">`` is added to a
    copy: a second read of the same answer (the decision kept in its meta) is not told the
    first page's nofollow, and still obeys the header's noindex."""
    added: list[str] = []
    add = Directives.add

    def counted(self: Directives, content: str) -> None:
        added.append(content.strip())
        add(self, content)

    monkeypatch.setattr(Directives, "add", counted)
    spider = make_spider(tmp_path, 'name = "t"\nuser_agent = "crawler-bot/0.1"\n')
    body = b'<html><head><meta name="robots" content="nofollow"></head><a href="/n">n</a>'
    response = html_response("http://r.example/", body, {"X-Robots-Tag": "crawler-bot: noindex"})
    item, requests = split(spider.parse(response))
    assert item["noindex"] is True and requests == [] and item["outlinks"] == []
    assert added.count("noindex") == 1  # the header, once
    header_only = html_response(
        "http://r.example/", b"<a href='/n'>n</a>", {"X-Robots-Tag": "crawler-bot: noindex"}
    )
    header_only.request.meta.update(response.meta)  # the kept decision, as on a second read
    item, requests = split(spider.parse(header_only))
    assert item["noindex"] is True and [r.url for r in requests] == ["http://r.example/n"]


def test_words_a_page_makes_up_make_a_bounded_number_of_stats_keys(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    words = ", ".join(f"made-up-{n}" for n in range(1000))
    for page in range(3):
        response = html_response(
            f"http://r.example/{page}", b"<p>x</p>", {"X-Robots-Tag": words + ", noai"}
        )
        split(spider.parse(response))
    stats = spider.crawler.stats.get_stats()
    usage = [key for key in stats if key.startswith("usage/") and "/effect/" not in key]
    assert len(usage) <= USAGE_STAT_KEYS + 1
    assert stats["usage/other"] > 2 * 1000  # every page past the cap counts, in one key
    assert stats["usage/robots:made-up-0/set"] == 3  # the first ones keep their own keys


def test_main_text_is_kept_for_the_content_pipelines(tmp_path: Path) -> None:
    body = (
        b"<nav><a href='/'>Home</a> <a href='/a'>About</a></nav><main><p>"
        + b"The article says something worth reading about crawlers. " * 3
        + b"</p></main><footer>Visits: 12</footer>"
    )
    spider = make_spider(tmp_path, settings={"NEARDUP_ENABLED": True})
    item, _ = split(spider.parse(html_response("http://m.example/", body)))
    assert item["main_text"].startswith("The article says")
    assert "Visits" not in item["main_text"] and "Visits" in item["text"]
    # with no near-duplicate detection, no crawl database and no Markdown, nothing needs it
    spider = make_spider(
        tmp_path, settings={"NEARDUP_ENABLED": False, "CONTENT_MARKDOWN": False}
    )
    item, _ = split(spider.parse(html_response("http://m.example/", body)))
    assert item["main_text"] == ""


def test_x_robots_tag_on_non_html(tmp_path: Path) -> None:
    spider = make_spider(tmp_path)
    response = Response(
        "http://r.example/doc.pdf",
        body=b"%PDF-1.4",
        headers={"Content-Type": "application/pdf", "X-Robots-Tag": "noindex"},
        request=Request("http://r.example/doc.pdf"),
    )
    item, _ = split(spider.parse(response))
    assert item["noindex"] is True


def test_robots_token_comes_from_the_settings(tmp_path: Path) -> None:
    spider = make_spider(tmp_path, 'name = "t"\nuser_agent = "FancyBot/2.0 (+https://x.example)"\n')
    assert spider.robots_token == "fancybot"
    assert 304 in spider.handle_httpstatus_list


# --- the crawl database: 304s and due pages ---


def crawldb_spider(tmp_path: Path, toml: str = 'name = "t"\n') -> tuple[SiteSpider, Any]:
    from crawler.extensions.recrawl import RecrawlExtension

    path = tmp_path / "t.toml"
    path.write_text(toml, encoding="utf-8")
    cls = SiteSpider.for_site(load_site_config(path))
    extensions = {"crawler.extensions.recrawl.RecrawlExtension": 100}
    crawler = get_crawler(
        cls, {"CRAWLDB_PATH": str(tmp_path / "db.sqlite"), "EXTENSIONS": extensions}
    )
    crawler._apply_settings()  # builds the extensions, as Crawler.crawl() does
    spider = cls.from_crawler(crawler)
    crawler.spider = spider
    ext = crawler.get_extension(RecrawlExtension)
    assert ext is not None
    return spider, ext


def downloaded(spider: SiteSpider, ext: Any, response: Response) -> Response:
    """``response`` as the conditional-GET middleware hands it on (a 304 with its record)."""
    from crawler import signals as crawler_signals
    from crawler.middlewares.conditional import ConditionalGetMiddleware

    middleware = ConditionalGetMiddleware.from_crawler(spider.crawler)
    # what the extension sends at spider_opened
    spider.crawler.signals.send_catch_log(crawler_signals.crawldb_opened, db=ext.db)
    assert response.request is not None
    return middleware.process_response(response.request, response)


def scraped(spider: SiteSpider, response: Response) -> tuple[Any, list[Request]]:
    """Parse a response and let its item leave the pipelines (``item_scraped``), which is when
    the crawl database records the fetch."""
    item, requests = split(spider.parse(response))
    spider.crawler.signals.send_catch_log(
        signals.item_scraped, item=item, response=response, spider=spider
    )
    return item, requests


def test_a_304_is_not_modified_and_its_stored_links_still_count(tmp_path: Path) -> None:
    spider, ext = crawldb_spider(tmp_path)
    headers = {"ETag": '"v1"', "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT"}
    first = html_response("http://n.example/", b"<title>T</title><a href='/x'>X</a>", headers)
    item, _ = scraped(spider, first)
    assert item["status"] == 200
    response = HtmlResponse(
        "http://n.example/", status=304, request=Request("http://n.example/", meta={"depth": 1})
    )
    item, requests = scraped(spider, downloaded(spider, ext, response))
    assert item["status"] == 304 and item["text"] == "" and item["title"] == ""
    assert item["outlinks"] == [{"url": "http://n.example/x", "text": "X"}]
    assert item["etag"] == '"v1"' and item["depth"] == 1
    assert [r.url for r in requests] == ["http://n.example/x"]  # discovery goes on
    record = ext.previous("http://n.example/")
    assert record is not None and record.fetch_count == 2 and record.status == 304
    assert spider.crawler.stats.get_value("crawldb/not_modified") == 1
    ext._engine_stopped()


def test_due_pages_are_scheduled_after_the_seeds(tmp_path: Path) -> None:
    """The spider says when its seeds are scheduled (``seeds_scheduled``); the recrawl extension
    then schedules the due pages with the engine, in that order."""
    toml = 'name = "t"\nseeds = ["https://a.example/"]\n'
    spider, ext = crawldb_spider(tmp_path, toml)
    ext.record("https://a.example/", 200, depth=0, fingerprint="x")
    ext.record("https://a.example/deep", 200, depth=3, fingerprint="y")
    ext.db.commit()

    class FakeFrontier:
        seen: list[str] = []

        def mark_seen(self, keys: Any) -> int:
            self.seen = list(keys)
            return len(self.seen)

    scheduled: list[Request] = []

    class Engine:  # what the extension needs of Scrapy's engine: crawl()
        def crawl(self, request: Request) -> None:
            scheduled.append(request)

    frontier = FakeFrontier()
    ext.clock = lambda: 1e12  # everything is due
    ext._frontier_opened(frontier, spider)
    spider.crawler.engine = Engine()
    start = spider.start()
    seed = drain_one(start)
    assert scheduled == []  # nothing due before the seed is scheduled
    scheduled.insert(0, seed)
    assert drain(start) == []
    assert [(r.url, r.meta) for r in scheduled] == [
        ("https://a.example/", {"seed": True}),
        ("https://a.example/", {"depth": 0, "seed": True}),
        ("https://a.example/deep", {"depth": 3}),
    ]
    assert frontier.seen == []  # due URLs are not marked seen: they go in as plain links
    assert spider.crawler.stats.get_value("seeds/none") is None
    ext._engine_stopped()
