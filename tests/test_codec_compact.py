"""A queued request's stored payload leaves out the fields at their defaults and comes back
the same Request."""

from __future__ import annotations

import msgpack
from scrapy import Request, Spider

from crawler.backends.redis.entries import pack_entry, unpack_entry
from crawler.frontier import Entry
from crawler.frontier.api import ROBOTS_FIRST
from crawler.middlewares.robots_requests import robots_request
from crawler.scheduler import codec


class Docs(Spider):
    name = "docs"

    def parse_page(self, response):  # pragma: no cover - named, never called
        return None


def same(a: Request, b: Request) -> None:
    for field in ("url", "method", "body", "meta", "priority", "dont_filter", "encoding",
                  "flags", "cb_kwargs", "callback", "errback"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.headers.to_unicode_dict() == b.headers.to_unicode_dict()


def test_a_hosts_first_robots_request_is_a_word_and_comes_back() -> None:
    """The robots.txt request queued first for every new host is kept as ``ROBOTS_FIRST`` (a
    few bytes in a Redis entry, where its serialized Request took ~190), rebuilt the same;
    any other robots.txt request (a retry, a redirect's hop) is serialized as before."""
    spider = Docs()
    robots = robots_request("https://a.example.org", frontier_first=True)
    assert codec.encode(robots, spider, serialize=True) == ROBOTS_FIRST
    assert codec.encode(robots, spider, serialize=False) == ROBOTS_FIRST
    entry = Entry(url=robots.url, host="a.example.org", payload=ROBOTS_FIRST)
    same(codec.decode(entry, spider), robots)
    stored = pack_entry(entry, 0)
    assert len(stored) < 20
    assert unpack_entry(stored, ["a.example.org"]).payload == ROBOTS_FIRST
    others = [
        robots_request("https://a.example.org", frontier_first=True, robotstxt_retry=True),
        robots_request("https://a.example.org", "https://b.example.org/robots.txt", 1),
        robots_request("https://a.example.org"),
    ]
    for other in others:
        payload = codec.encode(other, spider, serialize=True)
        assert isinstance(payload, bytes)
        same(codec.decode(Entry(url=other.url, host="a.example.org", payload=payload), spider),
             other)


def test_defaults_are_left_out_and_come_back() -> None:
    spider = Docs()
    robots = robots_request("https://a.example.org", robotstxt_retry=True)
    payload = codec.encode(robots, spider, serialize=True)
    stored = msgpack.unpackb(payload, raw=False)
    assert set(stored) == {"url", "meta", "dont_filter", "priority"}
    assert len(payload) < 0.7 * len(msgpack.packb(robots.to_dict(spider=spider), use_bin_type=True))
    same(codec.decode(Entry(url=robots.url, host="a.example.org", payload=payload), spider),
         robots)
    post = Request("https://a.example.org/form", method="POST", body=b"q=1",
                   headers={"X-A": "1", "Authorization": "secret"}, callback=spider.parse_page,
                   cookies={"c": "1"}, flags=["f"], cb_kwargs={"k": 2}, encoding="latin-1",
                   priority=-3, meta={"m": 1})
    back = codec.decode(Entry(url=post.url, host="a.example.org",
                              payload=codec.encode(post, spider, serialize=True)), spider)
    assert back.headers.get("Authorization") is None  # never stored
    post.headers.pop("Authorization")
    same(back, post)
    assert back.cookies == {"c": "1"}
