"""A queued request's stored payload leaves out the fields at their defaults and comes back
the same Request."""

from __future__ import annotations

import msgpack
from scrapy import Request, Spider

from crawler.frontier import Entry
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


def test_defaults_are_left_out_and_come_back() -> None:
    spider = Docs()
    robots = robots_request("https://a.example.org", frontier_first=True)
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
