"""robots.txt pieces without a crawl: rules, cache, per-origin bookkeeping, page directives, and
the middleware driven by hand (a fake engine, Deferreds fired by the test)."""

from __future__ import annotations

import gzip
import sqlite3
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.utils._compression import brotli, zstd
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

import crawler.middlewares.robots_fetcher as robots_fetcher
import crawler.middlewares.robots_outcomes as robots_outcomes
import crawler.middlewares.robots_waits as robots_waits
from crawler import signals as crawler_signals
from crawler.content.html import parse_html
from crawler.frontier.urls import origin_of
from crawler.middlewares.compression import CountingHttpCompressionMiddleware
from crawler.middlewares.robots import RobotsMiddleware, RobotsTxtHandled
from crawler.middlewares.robots_requests import build_cache, robots_request
from crawler.robots import (
    ALLOW_ALL,
    DISALLOW_ALL,
    MAX_SIZE,
    RULES,
    MemoryRobotsCache,
    RobotsBook,
    RobotsRecord,
    RobotsRules,
    SqliteRobotsCache,
    Verdict,
    classify,
    decode_body,
    product_token,
    x_robots_tag,
)

# --- rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("crawler-bot/0.1 (+https://example.org)", "crawler-bot"),
        ("My_Bot", "my_bot"),
        ("  spaced-Bot/2", "spaced-bot"),
        ("", ""),  # names no crawler (a crawler without one matches "*" groups only)
        (None, ""),
    ],
)
def test_product_token(user_agent: str | None, token: str) -> None:
    assert product_token(user_agent) == token


@pytest.mark.parametrize(
    ("status", "kind"),
    [(200, RULES), (204, RULES), (404, ALLOW_ALL), (401, ALLOW_ALL), (403, ALLOW_ALL),
     (410, ALLOW_ALL), (429, DISALLOW_ALL), (500, DISALLOW_ALL), (503, DISALLOW_ALL)],
)
def test_status_classes_follow_rfc_9309(status: int, kind: str) -> None:
    assert classify(status) == kind


def test_decode_cuts_at_the_limit_and_drops_the_partial_line() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /a\nDisallow: /private\n"
    text, cut = decode_body(body, max_size=len(body) - 5)
    assert cut and text == "User-agent: *\nDisallow: /a\n"
    assert decode_body(b"\xff\xfeUser-agent: *", 100) == ("%FF%FEUser-agent: *", False)
    # a line that ends at the limit, its newline just past it, is whole
    text, cut = decode_body(body, max_size=body.index(b"\nDisallow: /private"))
    assert cut and text == "User-agent: *\nDisallow: /a\n"


def test_a_body_whose_download_was_stopped_loses_its_partial_line() -> None:
    """The first bytes of a compressed robots.txt may inflate to less than 500 KiB: the body
    still ends mid-line, and ``Allow: /pri`` (of ``Allow: /private/open``) must not allow
    ``/print``."""
    body = b"User-agent: *\nDisallow: /p\nAllow: /pri"
    assert decode_body(body, cut=True) == ("User-agent: *\nDisallow: /p\n", True)
    # UTF-16: a newline starts on a character; U+0A41 U+0100 hold its two bytes across two
    text = "User-agent: *\nDisallow: /\nAllow: /\u0a41\u0100\u0a41/open"
    for codec, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")):
        cut = (bom + text.encode(codec))[:-4]
        assert decode_body(cut, cut=True) == ("User-agent: *\nDisallow: /\n", True), codec


def _compressed(encoding: str, data: bytes) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "deflate":
        return zlib.compress(data)
    if encoding == "br":
        return bytes(brotli.compress(data))
    if encoding == "zstd-frames":  # several frames, as pzstd writes a file
        step = 100_000
        return b"".join(bytes(zstd.compress(data[i : i + step])) for i in range(0, len(data), step))
    return bytes(zstd.compress(data))


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "zstd-frames"])
@pytest.mark.parametrize("whole", [True, False])
def test_a_compressed_robots_txt_is_inflated_up_to_what_is_parsed(
    encoding: str, whole: bool
) -> None:
    """RFC 9309 2.5: 500 KiB are parsed; a robots.txt that inflates past DOWNLOAD_MAXSIZE (a
    long file, a bomb) is inflated up to there and read, not dropped; one whose download was
    stopped (its compressed bytes cut) gives what they hold."""
    lines = (f"# padding line {i}\n".encode() for i in range(100_000))
    text = b"User-agent: *\nDisallow: /private\n" + b"".join(lines)  # 2 MB
    body = _compressed(encoding, text)
    if not whole:
        body = body[: len(body) // 2]
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 1_000_000})
    middleware = CountingHttpCompressionMiddleware.from_crawler(crawler)
    request = robots_request("http://a.example")
    headers = {"Content-Encoding": encoding.split("-")[0]}
    response = Response(request.url, body=body, headers=headers, request=request)
    out = middleware.process_response(request, response)
    assert isinstance(out, Response) and b"Content-Encoding" not in out.headers
    if whole:
        assert out.body == text[: MAX_SIZE + 1]
    else:
        assert 0 < len(out.body) <= MAX_SIZE + 1 and text.startswith(out.body)


def record(body: str, kind: str = RULES, origin: str = "http://a.example") -> RobotsRecord:
    return RobotsRecord(origin, kind, 200, 0.0, 100.0, body)


def test_a_robots_txt_the_parser_fails_on_disallows_everything(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A parser bug must neither stop the crawl nor let it ignore the file: the origin is
    taken as disallowed, as when its robots.txt is unreachable (RFC 9309 2.3.1.4)."""
    import crawler.robots.rules as rules

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a parser bug")

    monkeypatch.setattr(rules, "read_groups", broken)
    found = RobotsRules(record("User-agent: *\nDisallow: /private\n"), "crawler-bot")
    assert not found.allowed("http://a.example/")
    assert not found.allowed("http://a.example/open")
    assert "Cannot parse robots.txt of http://a.example" in caplog.text


def test_rules_match_the_product_token_and_longest_pattern() -> None:
    body = (
        "User-agent: crawler-bot\nDisallow: /private/\nAllow: /private/open\nCrawl-delay: 2\n"
        "Request-rate: 1/5s\n\nUser-agent: *\nDisallow: /\n"
    )
    ours = RobotsRules(record(body), "crawler-bot")
    assert not ours.allowed("http://a.example/private/x")
    assert ours.allowed("http://a.example/private/open/1")
    assert ours.allowed("http://a.example/public")
    assert ours.crawl_delay() == 5.0  # Request-rate 1/5s asks more than Crawl-delay 2
    others = RobotsRules(record(body), "somebot")
    assert not others.allowed("http://a.example/public")
    assert others.crawl_delay() is None
    assert RobotsRules(record("", ALLOW_ALL), "x").allowed("http://a.example/any")
    assert not RobotsRules(record("", DISALLOW_ALL), "x").allowed("http://a.example/any")


# --- cache ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_cache_keeps_usable_records_only(tmp_path: Path, backend: str) -> None:
    def make() -> Any:
        return MemoryRobotsCache() if backend == "memory" else SqliteRobotsCache(tmp_path / "r.db")

    cache = make()
    cache.put(record("User-agent: *\nDisallow: /x\n"))
    cache.put(record("", DISALLOW_ALL, origin="http://b.example"))
    assert cache.get("http://b.example") is None
    if backend == "sqlite":
        cache.close()
        cache = make()  # survives the process
    assert cache.get("http://a.example") == record("User-agent: *\nDisallow: /x\n")
    cache.close()


class OneRecordCache(MemoryRobotsCache):
    """A stand-in for a cache kept elsewhere (Redis): configured by its own setting."""

    def __init__(self, origin: str) -> None:
        super().__init__()
        self.put(record("User-agent: *\nDisallow: /\n", origin=origin))

    @classmethod
    def from_crawler(cls, crawler: Any, path: str | None = None) -> OneRecordCache:
        return cls(crawler.settings["ONE_RECORD_ORIGIN"])


def test_cache_class_is_a_setting(tmp_path: Path) -> None:
    def built(settings: dict[str, Any]) -> Any:
        return build_cache(get_crawler(Spider, settings))

    in_memory = built({})  # nowhere on disk: SQLite in memory, for this crawl only
    assert isinstance(in_memory, SqliteRobotsCache) and in_memory.path == ":memory:"
    in_memory.close()
    sqlite = built({"ROBOTSTXT_CACHE_PATH": str(tmp_path / "r.sqlite")})
    assert isinstance(sqlite, SqliteRobotsCache) and sqlite.path == str(tmp_path / "r.sqlite")
    sqlite.close()
    in_jobdir = built({"JOBDIR": str(tmp_path / "job")})
    assert in_jobdir.path == str(tmp_path / "job" / "robots.sqlite")
    in_jobdir.close()
    custom = built(
        {
            "BACKEND_CLASSES": {"robots_cache": f"{__name__}.OneRecordCache"},
            "ONE_RECORD_ORIGIN": "http://a.example",
        }
    )
    assert isinstance(custom, OneRecordCache) and custom.get("http://a.example") is not None


# --- bookkeeping ----------------------------------------------------------------------------


def test_book_states_and_retries() -> None:
    book = RobotsBook(MemoryRobotsCache(), "bot", expiry=10, retry_delay=2, retry_times=3,
                      max_retry_delay=5)
    o = "http://a.example"
    assert book.verdict(o, o + "/x") is Verdict.FETCH and book.needs_fetch(o, 0)
    book.start_fetch(o)
    assert book.verdict(o, o + "/x") is Verdict.WAIT and not book.needs_fetch(o, 0)
    assert book.fetched(o, 503, b"", 0) is None
    assert book.failed(o, 0) == 2  # disallowed for now, retry in 2 s, then 4, then 5 (cap)
    assert book.verdict(o, o + "/x") is Verdict.UNAVAILABLE
    assert not book.needs_fetch(o, 1) and book.needs_fetch(o, 2)
    assert book.failed(o, 2) == 4
    assert book.failed(o, 6, retry_after=60) == 5  # Retry-After, within the bounds
    assert book.failed(o, 11) is None and book.state(o).gave_up
    # a later success clears everything
    book.fetched(o, 200, b"User-agent: *\nDisallow: /x\n", 20)
    assert book.verdict(o, o + "/x") is Verdict.DENY and book.verdict(o, o + "/y") is Verdict.ALLOW
    st = book.state(o)
    assert (st.failures, st.gave_up, st.unreachable, st.retry_at) == (0, False, False, None)
    # expired: still in force, and a refresh is due; a failed refresh keeps it in force
    assert book.fresh(o, 29) and not book.fresh(o, 30) and book.needs_fetch(o, 30)
    assert book.failed(o, 30) == 2
    assert book.verdict(o, o + "/x") is Verdict.DENY and not book.needs_fetch(o, 31)


def test_the_book_keeps_a_bounded_number_of_settled_origins() -> None:
    """A broad crawl's millions of origins: at most ``max_origins`` settled ones stay parsed;
    one met again is read back from the cache with the same verdicts and no new fetch; an
    origin with a fetch under way, parked requests or failures is never dropped."""
    cache = MemoryRobotsCache()
    book = RobotsBook(cache, "bot", expiry=1000, max_origins=10)
    busy = "http://busy.example"
    assert book.needs_fetch(busy, 0) and book.start_fetch(busy)  # in flight
    failing = "http://failing.example"
    book.start_fetch(failing)
    book.fetched(failing, 503, b"", 0)
    book.failed(failing, 0)
    book.park(failing, "a request")
    origins = [f"http://h{i}.example" for i in range(100)]
    for o in origins:
        book.start_fetch(o)
        book.fetched(o, 200, b"User-agent: *\nDisallow: /x\n", 0)
        assert book.verdict(o, o + "/x") is Verdict.DENY
    assert len(book.states()) <= 10 + 2  # the settled ones, and the two with news to keep
    kept = {st.origin for st in book.states()}
    assert {busy, failing} <= kept
    assert book.verdict(busy, busy + "/a") is Verdict.WAIT
    assert book.verdict(failing, failing + "/a") is Verdict.UNAVAILABLE
    assert book.all_parked() == ["a request"]
    first = origins[0]
    assert first not in kept
    assert book.verdict(first, first + "/x") is Verdict.DENY  # read back from the cache
    assert book.verdict(first, first + "/y") is Verdict.ALLOW
    assert not book.needs_fetch(first, 1)
    unbounded = RobotsBook(cache, "bot", max_origins=0)
    for o in origins:
        unbounded.state(o)
    assert len(unbounded.states()) == 100


# --- page directives ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "noindex", "nofollow"),
    [
        (["noindex"], True, False),
        (["NoFollow"], False, True),
        (["none"], True, True),
        (["noarchive, nosnippet"], False, False),
        (["otherbot: noindex"], False, False),
        (["crawler-bot: noindex, nofollow"], True, True),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], True, False),  # past: noindex
        (["unavailable_after: 2999-01-01"], False, False),
        (["otherbot: none", "nofollow"], False, True),
    ],
)
def test_x_robots_tag(values: list[str], noindex: bool, nofollow: bool) -> None:
    d = x_robots_tag(values, "crawler-bot")
    assert (d.noindex, d.nofollow) == (noindex, nofollow)


def test_the_page_parse_keeps_nofollow_links_and_metas() -> None:
    body = (
        b'<meta name="Crawler-Bot" content="noindex"><a href="/a" rel="nofollow">a</a>'
        b'<a href="/b" rel="External NoFollow">b</a><a href="/b">b again</a><a href="/c">c</a>'
    )
    page = parse_html(body, "utf-8")
    assert page.nofollow_hrefs == {"/a"}  # /b is also linked without nofollow
    assert page.metas["crawler-bot"] == "noindex"


# --- the middleware, driven by hand ----------------------------------------------------------


class FakeEngine:
    """Records what the middleware schedules and downloads; downloads finish when the test
    fires their Deferred, going through the middleware like the real downloader would."""

    def __init__(self, mw: RobotsMiddleware) -> None:
        self.mw = mw
        self.crawled: list[Request] = []
        self.downloads: list[tuple[Request, Deferred[Response]]] = []

    def crawl(self, request: Request) -> None:
        self.crawled.append(request)

    async def download_async(self, request: Request) -> Response:
        await self.mw.process_request(request)
        d: Deferred[Response] = Deferred()
        self.downloads.append((request, d))
        response = await d
        return await self.mw.process_response(request, response)


@pytest.fixture
def middleware(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A RobotsMiddleware (and its fetcher) whose awaits are plain Deferreds and whose timers
    are recorded."""
    monkeypatch.setattr(robots_waits, "maybe_deferred_to_future", lambda d: d)
    monkeypatch.setattr(robots_fetcher, "deferred_from_coro", Deferred.fromCoroutine)
    timers: list[tuple[float, Any, tuple[Any, ...]]] = []

    class Timer:
        def cancel(self) -> None:
            pass

    def call_later(delay: float, func: Any, *args: Any) -> Timer:
        timers.append((delay, func, args))
        return Timer()

    for module in (robots_outcomes, robots_waits):
        monkeypatch.setattr(module, "call_later", call_later)
    crawler = get_crawler(
        Spider,
        {"USER_AGENT": "crawler-bot/1.0", "TUNING": {"robots_retry_delay": 7},
         "ROBOTSTXT_CACHE_PATH": str(tmp_path / "robots.sqlite")},
    )
    crawler.spider = Spider("s")
    mw = RobotsMiddleware.from_crawler(crawler)
    crawler.engine = FakeEngine(mw)  # type: ignore[assignment]
    delays: list[tuple[str, float]] = []

    def on_delay(host: str, delay: float) -> None:
        delays.append((host, delay))

    crawler.signals.connect(on_delay, crawler_signals.host_crawl_delay)  # weak: keep it alive
    yield mw, crawler, timers, delays
    del on_delay


def run(coro: Any) -> Deferred[Any]:
    d = Deferred.fromCoroutine(coro)
    d.addErrback(lambda f: f.value)  # keep the exception as the result
    return d


def answer(request: Request, status: int, body: bytes = b"", **headers: str) -> TextResponse:
    return TextResponse(request.url, status=status, body=body, headers=headers, request=request)


def test_every_waiter_gets_the_answer(middleware) -> None:
    """Scrapy 2.19 hands a pending robots.txt to the first waiter only (5 of 7 disallowed URLs
    queued together were fetched); here all of them wait for it and all are checked."""
    mw, crawler, timers, delays = middleware
    engine: FakeEngine = crawler.engine
    urls = [f"http://a.example/p/{i}" for i in range(7)] + ["http://a.example/ok"]
    pending = [run(mw.process_request(Request(u))) for u in urls]
    assert len(engine.downloads) == 1  # one robots.txt fetch for all of them
    robots_request, d = engine.downloads[0]
    assert robots_request.url == "http://a.example/robots.txt"
    assert not any(p.called for p in pending)
    d.callback(answer(robots_request, 200, b"User-agent: *\nDisallow: /p/\nCrawl-delay: 3\n"))
    assert all(isinstance(p.result, IgnoreRequest) for p in pending[:7])
    # the allowed page rests the file's Crawl-delay after the fetch the frontier never saw
    assert not pending[7].called
    rest, end_rest, args = timers[-1]
    assert rest == pytest.approx(3.0, abs=0.1)
    end_rest(*args)
    assert pending[7].result is None
    assert crawler.stats.get_value("robotstxt/denied") == 7
    assert delays == [("a.example", 3.0)]


def test_a_page_after_a_direct_robots_fetch_rests_the_host_delay(middleware) -> None:
    """A direct fetch (the frontier never scheduled it: a race, Redis away) used to let the page
    follow at once; now it waits the politeness delay after robots.txt, and a stop ends the
    wait at once."""
    mw, crawler, timers, _ = middleware
    engine: FakeEngine = crawler.engine
    fetcher = mw.fetcher
    page = run(mw.process_request(Request("http://b.example/page")))
    robots_request, d = engine.downloads[0]
    d.callback(answer(robots_request, 200, b"User-agent: *\nAllow: /\n"))
    assert not page.called
    rest, _, _ = timers[-1]
    assert rest == pytest.approx(fetcher.waits.politeness.min_delay, abs=0.1)  # 1 s by default
    assert crawler.stats.get_value("robotstxt/direct_rest") == 1
    # a later page of the host, once the rest is over, is not held again
    fetcher.waits._rest_until["http://b.example"] = fetcher.clock() - 1
    later = run(mw.process_request(Request("http://b.example/later")))
    assert later.called and later.result is None
    # a stop (Ctrl-C) releases the resting page at once
    crawler.signals.send_catch_log(crawler_signals.crawl_stopping)
    assert page.called and page.result is None


def discover(crawler, origin: str) -> Request | None:
    """The scheduler announces an origin; the request the fetcher scheduled for it, if any."""
    crawled = crawler.engine.crawled
    before = len(crawled)
    crawler.signals.send_catch_log(
        crawler_signals.origin_discovered, origin=origin, host=urlsplit(origin).hostname
    )
    assert len(crawled) <= before + 1
    return crawled[-1] if len(crawled) > before else None


def test_first_request_and_cache(middleware) -> None:
    mw, crawler, _, delays = middleware
    first = discover(crawler, "http://a.example:80")
    assert isinstance(first, Request) and first.url == "http://a.example/robots.txt"
    assert first.dont_filter and first.meta["dont_redirect"] and first.meta["dont_retry"]
    assert first.meta["frontier_first"]  # the host's first request, scheduled by the fetcher
    assert discover(crawler, "http://a.example") is None  # already queued
    # its answer never reaches the spider
    run(mw.process_request(first))
    d = run(mw.process_response(first, answer(first, 200, b"User-agent: *\nCrawl-delay: 1\n")))
    assert isinstance(d.result, RobotsTxtHandled)
    assert delays == [("a.example", 1.0)]
    # A new crawl with the same cache file: no request, the delay is sent at once.
    mw.fetcher._spider_closed(crawler.spider, "finished")
    crawler.signals.disconnect_all(crawler_signals.origin_discovered)  # the closed fetcher's
    again = RobotsMiddleware.from_crawler(crawler)  # kept: signals hold receivers weakly
    assert again.fetcher.book is not mw.fetcher.book
    assert discover(crawler, "http://a.example") is None
    assert crawler.stats.get_value("robotstxt/cache_hit") == 1
    assert delays == [("a.example", 1.0), ("a.example", 1.0)]


def test_unreachable_parks_then_requeues(middleware) -> None:
    mw, crawler, timers, _ = middleware
    engine: FakeEngine = crawler.engine
    first = discover(crawler, "http://a.example")
    run(mw.process_request(first))
    run(mw.process_response(first, answer(first, 503, **{"Retry-After": "30"})))
    assert [t[0] for t in timers] == [30]
    leased = Request("http://a.example/page", meta={"frontier_lease": 1, "depth": 2})
    result = run(mw.process_request(leased)).result
    assert isinstance(result, IgnoreRequest)  # parked, its host freed at once
    unleased = run(mw.process_request(Request("http://a.example/other"))).result
    assert isinstance(unleased, IgnoreRequest)  # engine.download: refused, not parked
    with pytest.raises(DontCloseSpider):
        mw.fetcher._spider_idle(crawler.spider)
    # the retry: the host's first request again
    _, retry, args = timers[0]
    retry(*args)
    robots = engine.crawled[-1]
    assert robots.meta["frontier_first"] and robots.meta["robotstxt_retry"]
    run(mw.process_request(robots))
    run(mw.process_response(robots, answer(robots, 200, b"User-agent: *\nAllow: /\n")))
    requeued = engine.crawled[-1]
    assert requeued.url == "http://a.example/page" and requeued.dont_filter
    assert requeued.meta["depth"] == 2
    mw.fetcher._spider_idle(crawler.spider)  # nothing parked: may close
    assert run(mw.process_request(requeued)).result is None


def test_refresh_failure_keeps_the_last_good_copy(middleware) -> None:
    mw, crawler, _, _ = middleware
    engine: FakeEngine = crawler.engine
    old = RobotsRecord("http://a.example", RULES, 200, 0, 1, "User-agent: *\nDisallow: /x\n")
    mw.fetcher.book.cache.put(old)
    # expired: the old copy decides, and a refresh is queued as the host's next request
    denied = run(mw.process_request(Request("http://a.example/x"))).result
    assert isinstance(denied, IgnoreRequest)
    refresh = engine.crawled[-1]
    assert refresh.url == "http://a.example/robots.txt" and refresh.meta["frontier_first"]
    run(mw.process_request(refresh))
    with pytest.raises(RobotsTxtHandled):
        mw.process_exception(refresh, TimeoutError())
    assert isinstance(run(mw.process_request(Request("http://a.example/x"))).result, IgnoreRequest)
    assert run(mw.process_request(Request("http://a.example/y"))).result is None
    assert len(engine.crawled) == 1  # no second refresh before the retry delay


def test_an_sqlite_cache_another_version_wrote_is_dropped_not_read(tmp_path: Path) -> None:
    """A cache file of another layout (PRAGMA user_version) is emptied: robots.txt is fetched
    again, which loses nothing, where reading it would fail or mislead."""
    path = tmp_path / "robots.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE robots (origin TEXT PRIMARY KEY, kind TEXT NOT NULL, status INTEGER NOT"
        " NULL, fetched_at REAL NOT NULL, expires_at REAL NOT NULL, body TEXT NOT NULL)"
    )
    db.execute("INSERT INTO robots VALUES ('http://a.example', 'rules', 200, 0, 9e9, 'x')")
    db.commit()
    db.close()
    cache = SqliteRobotsCache(path)
    assert cache.get("http://a.example") is None
    cache.put(RobotsRecord("http://b.example", RULES, 200, 0, 9e9, "y", '"e"', "then"))
    cache.close()
    cache = SqliteRobotsCache(path)  # its own layout is kept
    assert cache.get("http://b.example") == RobotsRecord(
        "http://b.example", RULES, 200, 0, 9e9, "y", '"e"', "then"
    )
    cache.close()


def test_a_fetch_that_ends_unread_counts_as_unreachable_once(middleware) -> None:
    """HttpCompressionMiddleware raising above this middleware: only ``fetch_finished`` says
    the robots.txt fetch ended. Its origin is failed (held, retried), once."""
    mw, crawler, timers, _ = middleware
    first = discover(crawler, "http://a.example")
    run(mw.process_request(first))
    hop = robots_request("http://a.example", "http://a.example/moved.txt", 1)
    run(mw.process_request(hop))
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished, request=hop, outcome="fetched", duration=0.1
    )
    assert (
        mw.fetcher.book.state("http://a.example").fetching == "in_flight"
    )  # its owner reads a hop
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished, request=first, outcome="fetched", duration=0.1
    )
    st = mw.fetcher.book.state("http://a.example")
    assert st.unreachable and st.failures == 1 and [t[0] for t in timers] == [7]
    # a fetch that was read already is not failed again when the downloader lets it go
    retry = robots_request("http://a.example", robotstxt_retry=True)
    run(mw.process_request(retry))
    with pytest.raises(RobotsTxtHandled):
        mw.process_exception(retry, TimeoutError())
    crawler.signals.send_catch_log(
        crawler_signals.fetch_finished, request=retry, outcome="failed", duration=0.1
    )
    assert crawler.stats.get_value("robotstxt/unreachable") == 2
    assert crawler.stats.get_value("robotstxt/unprocessable") == 1


def test_a_wait_ends_after_the_wait_timeout(middleware) -> None:
    mw, crawler, timers, _ = middleware
    pending = run(mw.process_request(Request("http://a.example/page")))
    assert len(crawler.engine.downloads) == 1 and not pending.called
    ((delay, expire, args),) = [t for t in timers if t[1] == mw.fetcher.waits._expired]
    assert delay == mw.fetcher.wait_timeout == 180 * 3 * 6 + 60  # Scrapy's defaults
    expire(*args)
    assert isinstance(pending.result, IgnoreRequest)
    assert crawler.stats.get_value("robotstxt/wait_timeout") == 1
    assert crawler.stats.get_value("robotstxt/unresolved") == 1
    mw.fetcher.waits.wake("http://a.example")  # the fetch ending later wakes nobody twice


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://A.example:80/x", "http://a.example"),
        ("https://a.example:8443/", "https://a.example:8443"),
        ("http://[::1]:8080/x", "http://[::1]:8080"),
        ("ftp://a.example/", None),
        ("http://a.example:99999/", None),
    ],
)
def test_origin_of(url: str, origin: str | None) -> None:
    assert origin_of(url) == origin
