"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl.

Every Redis user gets its client from ``connection`` (one server, or a Redis Cluster) and its
key names from ``keys`` (the one place that names a crawl's keys, the partitions' hash tags too),
and rides out Redis going away through ``outage``.

``connection``       the client from the crawl's settings (a cluster's when ``REDIS_URL`` names
                     a cluster node), the password, the masked URL
``outage``           Redis away: one line going and one back per component, a bounded wait
``keys``             every key of a crawl (:class:`~crawler.backends.redis.keys.CrawlKeys`)
``shards``           the host splitter: host -> partition (by registered domain)
``frontier_store``   ``frontier_store``: wires a worker's frontier, scope and seeds inbox
``partitioned``      the partitions of the hosts this worker owns (``ownership``), each a
                     ``MercatorFrontier`` over ``queue_store`` (a queued URL's format:
                     ``entries``), written through ``fence`` (``lua/fence.lua``); links for
                     other partitions go to their inboxes (``mail``); each partition's seen-set
                     (``seenset``); the wake-ups of idle workers (``wake``)
``controls``         the operator's controls (pause, deadline, byte budget, blocks): written
                     by ``scrapy frontier``, read by each worker at its beat, obeyed in memory
``scope``, ``inbox`` the hosts in scope; seeds pushed to a running crawl
``robots``           ``robots_cache``: robots.txt fetched once per host for the crawl
``neardup_store``    ``neardup_store``: builds the shared near-duplicate detector
                     (``neardup``: the algorithm; its calls on Redis ``neardup_state``
                     (``lua/neardup_commit.lua``), formats ``neardup_codec``, what a worker
                     keeps of it ``neardup_copies``, the anchor postings spread over tags of
                     their own ``neardup_anchors`` (``lua/neardup_put.lua``))
``status``           ``scrapy frontier``'s view: heartbeats, merged counters, the report
                     (``partition_load``: each partition's owner, queues, inbox and node)
"""
