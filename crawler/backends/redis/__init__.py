"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl.

Every Redis user gets its client from ``connection`` (one server, or a Redis Cluster) and its
key names from ``keys`` (the one place that names a crawl's keys, the shards' hash tags too),
and rides out Redis going away through ``outage``.

``connection``       the client from the crawl's settings (a cluster's when ``REDIS_URL`` names
                     a cluster node), the password, the masked URL
``outage``           Redis away: one line going and one back per component, a bounded wait
``keys``             every key of a crawl (:class:`~crawler.backends.redis.keys.CrawlKeys`)
``shards``           the host splitter: host -> shard (``FRONTIER_SHARDS``)
``sharded``          a frontier in S shards served as one
``calls``            how the frontier's scripts reach Redis: pipelined per cluster node, never
                     following ``ASK`` (a moving slot pauses its shard), replicas waited on
``frontier_store``   ``FRONTIER_STORE_CLASS``: wires a worker's frontier, scope and seeds inbox
``frontier``         the Mercator frontier in Lua scripts (``frontier_lua``, its prelude in
                     ``frontier_lua_prelude``); beside it the seen-set (``seen``), a queued
                     URL's format (``entries``), host reports and the operator's controls as
                     its scripts obey them (``host_reports``), the wake-ups of idle workers
                     (``wake``)
``controls``         the operator's controls (pause, deadline, byte budget, blocks): written
                     by ``scrapy frontier``, read by each worker at its beat, obeyed in memory
``scope``, ``inbox`` the hosts in scope; seeds pushed to a running crawl
``robots``           ``ROBOTS_CACHE_CLASS``: robots.txt fetched once per host for the crawl
``neardup_store``    ``NEARDUP_STORE_CLASS``: builds the shared near-duplicate detector
                     (``neardup``; its scripts ``neardup_lua``, formats ``neardup_codec``, what
                     a worker keeps of it ``neardup_copies``, the anchor postings spread over
                     tags of their own ``neardup_anchors``)
``status``           ``scrapy frontier``'s view: heartbeats, merged counters, the report
                     (``partition_load``: each partition's owner, queues, inbox and node)
"""
