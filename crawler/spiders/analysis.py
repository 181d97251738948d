"""The content analysis in a Scrapy crawl: built from the settings, told what the crawl has.

:class:`crawler.sites.analysis.ContentAnalysis` knows nothing of Scrapy; this wires it to a
crawl. Its parts that depend on the rest of the crawl are set when the crawl says it has them,
never asked for:

* link preparation, when the scheduler announces a frontier (``frontier_opened``): another
  scheduler takes Requests, and preparing their forms would be work for nothing;
* the near-duplicate judge, when the spider opens and the near-duplicate pipeline is in the
  crawl (it consumes the verdicts): ``scrapy parse`` without ``--pipelines`` judges nothing.
  The judge owns the detector (``neardup_store``) and its journal, closed with the spider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler

from crawler import signals as crawler_signals
from crawler.backends.registry import build_backend
from crawler.content.analysis_neardup import JOURNAL_FILE, NearDuplicateJudge
from crawler.content.config import ContentConfig, NeardupConfig
from crawler.pipelines.neardup import NearDuplicatePipeline
from crawler.robots import robots_token
from crawler.sites.analysis import ContentAnalysis, LinkPreparer, main_text_wanted
from crawler.sites.policy import url_policy_for
from crawler.spiders.links import UrlJoiner


def near_duplicate_judge(crawler: Crawler) -> NearDuplicateJudge:
    """The crawl's judge, with the detector ``neardup_store`` names and the ``NEARDUP_*``
    settings; its journal in ``JOBDIR`` (call :meth:`NearDuplicateJudge.open` to replay it)."""
    s = crawler.settings
    config = NeardupConfig.from_settings(s)
    jobdir = s.get("JOBDIR")
    return NearDuplicateJudge(
        build_backend(crawler, "neardup_store"),
        link_demotion=config.link_demotion,
        journal=Path(jobdir) / JOURNAL_FILE if jobdir else None,
    )


class CrawlContentAnalysis:
    """A spider's :class:`ContentAnalysis` (``.analysis``) and its life in the crawl."""

    def __init__(self, crawler: Crawler, spider: Spider) -> None:
        s = crawler.settings
        content = ContentConfig.from_settings(s)  # built once, one line per bad value
        site = getattr(spider, "site", None)
        self.crawler = crawler
        self.spider = spider
        self.analysis = ContentAnalysis(
            UrlJoiner,
            fields=site.fields if site is not None else None,
            robots_token=robots_token(s),
            main_text=main_text_wanted(s),
            markdown=content.markdown,
            metadata=content.metadata,
            max_links=content.max_links,
            max_text=content.max_text,
            max_html=content.max_html,
            requisites=site.requisites.max_per_page
            if site is not None and site.requisites.fetch
            else 0,
        )
        crawler.signals.connect(self._frontier_opened, crawler_signals.frontier_opened)
        crawler.signals.connect(self._spider_opened, signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signals.spider_closed)

    def _frontier_opened(self, frontier: Any, spider: Spider) -> None:
        if spider is not self.spider:
            return
        self.analysis.links = LinkPreparer(
            url_policy_for(spider, self.crawler.settings)
        )

    def _spider_opened(self, spider: Spider) -> None:
        if spider is not self.spider or self.crawler.engine is None:
            return
        if self.crawler.get_item_pipeline(NearDuplicatePipeline) is None:
            return  # nobody consumes verdicts (NEARDUP_ENABLED off, or no item pipelines)
        judge = near_duplicate_judge(self.crawler)
        judge.open()
        self.analysis.judge = judge

    def _spider_closed(self, spider: Spider) -> None:
        judge = self.analysis.judge
        if spider is self.spider and judge is not None:
            judge.close()
