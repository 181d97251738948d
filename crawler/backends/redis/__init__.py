"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl.

Every Redis user gets its client from ``connection`` (one server, or a Redis Cluster) and its
key names from ``keys`` (the one place that names a crawl's keys, the partitions' hash tags
too), and rides out Redis going away through ``outage``. What each module holds:
docs/architecture/layout.md; how the fleet shares a crawl: docs/topics/fleet.md.
"""
