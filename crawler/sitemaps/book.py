"""One crawl's sitemap bookkeeping: which files were asked for, and how many entries the site
has taken, so that every hostile shape stays bounded.

* An index that lists itself, or two that list each other: a file is read once per crawl (by
  its URL without the fragment); the second mention is refused as ``loop``.
* Indexes of indexes: refused beyond ``max_index_depth`` as ``nesting``.
* A site that lists a million sitemap files: refused beyond ``max_files`` as ``files``.
* Millions of entries: :meth:`take` hands out what is left of ``max_site_urls``.

Each refusal reason is said once in the log by the caller (:meth:`first_time`), then counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.sitemaps.limits import SitemapLimits


@dataclass(frozen=True, slots=True)
class SitemapFile:
    """A sitemap file to fetch: where it is, who listed it, how deep in indexes."""

    url: str
    origin: str  # the origin whose robots.txt (or probe) led to it
    depth: int = 0  # 0: listed by robots.txt or probed; 1: listed by an index; ...
    named: bool = False  # robots.txt named it (or the index it is in): proof of ownership
    # the folder (``scheme://host/path/``) of the page whose head named it as a feed: that
    # page speaks for its folder, so the feed may list it too ("": no page named it)
    vouched: str = ""


class SitemapBook:
    def __init__(self, limits: SitemapLimits) -> None:
        self.limits = limits
        self.asked: set[str] = set()
        self.taken = 0  # entries taken from every file so far
        self._said: set[str] = set()

    def want(self, file: SitemapFile) -> str:
        """"" when ``file`` is to be fetched (and it is now counted as asked), else why not:
        ``loop``, ``nesting`` or ``files``."""
        key = file.url.partition("#")[0]
        if key in self.asked:
            return "loop"
        if file.depth > self.limits.max_index_depth:
            return "nesting"
        if self.full_of_files:
            return "files"
        self.asked.add(key)
        return ""

    def asked_before(self, url: str) -> bool:
        """Whether the file at ``url`` was asked for this crawl."""
        return url.partition("#")[0] in self.asked

    def take(self, wanted: int) -> int:
        """How many of ``wanted`` entries the site's cap still allows (they are counted)."""
        allowed = max(0, min(wanted, self.limits.max_site_urls - self.taken))
        self.taken += allowed
        return allowed

    @property
    def full_of_files(self) -> bool:
        """No further file will be asked this crawl (``max_files``)."""
        return len(self.asked) >= self.limits.max_files

    @property
    def full(self) -> bool:
        return self.taken >= self.limits.max_site_urls

    def first_time(self, reason: str) -> bool:
        """Whether ``reason`` is new to this crawl's log (then it is said in full, once)."""
        if reason in self._said:
            return False
        self._said.add(reason)
        return True
