"""The Scrapy scheduler over the Mercator frontier (``SCHEDULER =
"crawler.scheduler.FrontierScheduler"``):
the adapter (``adapter``), how requests wait in the frontier (``codec``) and the engine's
wake-up when the earliest host comes due (``waker``)."""

from crawler.scheduler.adapter import FrontierScheduler

__all__ = ["FrontierScheduler"]
