"""The Redis engine: several ``scrapy crawl`` workers, one polite crawl.

Every Redis user gets its client from ``connection`` and its key names from ``keys`` (the one
place that names a crawl's keys, and that will give the frontier's state per-shard hash tags).

``connection``       the client from the crawl's settings, the password, the masked URL
``keys``             every key of a crawl (:class:`~crawler.backends.redis.keys.CrawlKeys`)
``frontier_store``   ``FRONTIER_STORE_CLASS``: wires a worker's frontier, scope and seeds inbox
``frontier``         the Mercator frontier in Lua scripts (``frontier_lua``, its prelude in
                     ``frontier_lua_prelude``); beside it the seen-set (``seen``), a queued
                     URL's format (``entries``), host reports (``host_reports``), the operator's
                     controls (``controls``) and the wake-ups of idle workers (``wake``)
``scope``, ``inbox`` the hosts in scope; seeds pushed to a running crawl
``robots``           ``ROBOTS_CACHE_CLASS``: robots.txt fetched once per host for the crawl
``neardup_store``    ``NEARDUP_STORE_CLASS``: builds the shared near-duplicate detector
                     (``neardup``; its scripts ``neardup_lua``, formats ``neardup_codec``, what
                     a worker keeps of it ``neardup_copies``)
``status``           ``scrapy frontier``'s view: heartbeats, merged counters, the report
"""
