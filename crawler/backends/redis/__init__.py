"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl. Every Redis user gets
its client from ``connection``, its key names from ``keys``, and rides out Redis going away
through ``outage`` (docs/architecture/layout.md, docs/topics/fleet.md).
"""
