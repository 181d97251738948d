"""Live Prometheus metrics of a crawl, free of Scrapy: what the figures are called and how they
are served.

* :mod:`crawler.metrics.families`: the crawl's stats (one worker's, or the merged totals of a
  fleet in Redis) and the frontier's counts as Prometheus metric families, named by Prometheus's
  conventions (units in names, ``_total`` counters, few labels with bounded values).
* :mod:`crawler.metrics.exporter`: ``/metrics`` on its own thread (prometheus_client's WSGI
  server), answering from the last snapshot the crawl published, so a scrape never runs on the
  reactor and never waits for it.
* :mod:`crawler.metrics.redis_calls`: Redis round trips and errors of the process, counted.

The Scrapy side is :mod:`crawler.extensions.metrics` (a worker) and ``scrapy frontier <site>
--metrics-port`` (the crawl as one, from Redis).
"""
