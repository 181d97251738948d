"""robots.txt and page robots directives, free of Scrapy: rules (Protego), a cache interface
with in-memory and SQLite backends, and the per-origin bookkeeping (the book).

``crawler.middlewares.robots_fetcher`` (a Scrapy component) drives the book from a crawl;
``crawler.middlewares.robots`` is the gate that checks page requests against it."""

from crawler.config.agent import product_token
from crawler.robots.book import IN_FLIGHT, QUEUED, OriginState, RobotsBook, Verdict
from crawler.robots.cache import MemoryRobotsCache, RobotsCache, SqliteRobotsCache
from crawler.robots.directives import Directives, x_robots_tag
from crawler.robots.rules import (
    ALLOW_ALL,
    DEFAULT_EXPIRY,
    DISALLOW_ALL,
    MAX_SIZE,
    RULES,
    RobotsRecord,
    RobotsRules,
    classify,
    decode_body,
    robots_token,
)

__all__ = [
    "ALLOW_ALL",
    "DEFAULT_EXPIRY",
    "DISALLOW_ALL",
    "IN_FLIGHT",
    "MAX_SIZE",
    "QUEUED",
    "RULES",
    "Directives",
    "MemoryRobotsCache",
    "OriginState",
    "RobotsBook",
    "RobotsCache",
    "RobotsRecord",
    "RobotsRules",
    "SqliteRobotsCache",
    "Verdict",
    "classify",
    "decode_body",
    "product_token",
    "robots_token",
    "x_robots_tag",
]
