"""Settings there are no more (docs/decisions/0003-settings.md) and what became of each.

A crawl given one (``-s``, scrapyd's ``setting=``, a site config's ``[settings]``) is refused in
one line that says so: run without it, it would not do what its operator asked, and "unknown
setting" would send them looking for a typo. A leaf: plain data, read by the settings schema.
"""

_CONSTANT = "no longer a setting: a constant of "
_PLUGGED = "no longer a setting: a plug point of the expert table BACKEND_CLASSES, "
_TUNED = "no longer a setting: an expert knob, TUNING's "
REMOVED: dict[str, str] = {
    "CRAWLER_CONTACT_URL": "no longer a setting: set USER_AGENT",
    "REACTOR_STALL_INTERVAL": _CONSTANT + "crawler/extensions/stall.py",
    "CONTENT_THREAD_SWITCH_INTERVAL": _CONSTANT + "crawler/offload/components.py",
    "FEED_THREAD_MIN_CHARS": _CONSTANT + "crawler/pipelines/feed.py",
    "GC_FREEZE_INTERVAL": _CONSTANT + "crawler/extensions/gcpace.py",
    "GC_FULL_INTERVAL": _CONSTANT + "crawler/extensions/gcpace.py",
    "ROBOTSTXT_MAX_SIZE": _CONSTANT + "crawler/robots/rules.py (RFC 9309's 500 KiB)",
    "ROBOTSTXT_MAX_RETRY_DELAY": _CONSTANT + "crawler/robots/book.py",
    "ROBOTSTXT_WAIT_TIMEOUT": "no longer a setting: it follows DOWNLOAD_TIMEOUT and RETRY_TIMES",
    "SITEMAPS_MAX_FILES": _CONSTANT + "crawler/sitemaps/limits.py",
    "RETRY_AFTER_DEFAULT": _CONSTANT + "crawler/middlewares/retry_after.py",
    "DNS_CONCURRENCY": _CONSTANT + "crawler/download/dns.py",
    "DNS_CACHE_SIZE": _CONSTANT + "crawler/download/dns.py",
    "DNS_MAX_TTL": _CONSTANT + "crawler/download/dns.py",
    "DNS_PREFETCH": _CONSTANT + "crawler/download/dns.py",
    "DNS_HOLD_MAX": _CONSTANT + "crawler/middlewares/dns.py",
    "CRAWLDB_COMMIT_INTERVAL": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_LEASE": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_BATCH": _CONSTANT + "crawler/extensions/recrawl.py",
    "RECRAWL_INC_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_DEC_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_SYNC_DELTA_RATE": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_PRIORITY_LEVELS": _CONSTANT + "crawler/crawldb/schedule.py",
    "RECRAWL_MIN_INTERVAL": "no longer a setting: it follows RECRAWL_INTERVAL",
    "RECRAWL_MAX_INTERVAL": "no longer a setting: it follows RECRAWL_INTERVAL",
    "DOWNLOAD_MAX_HEADERS": _CONSTANT + "crawler/download/handler.py",
    "DOWNLOAD_MAX_HEADER_BYTES": _CONSTANT + "crawler/download/handler.py",
    "NEARDUP_JOURNAL_INTERVAL": _CONSTANT + "crawler/content/analysis_neardup.py",
    "INDEX_BATCH_SIZE": _CONSTANT + "crawler/pipelines/index.py",
    "INDEX_COMMIT_INTERVAL": _CONSTANT + "crawler/pipelines/index.py",
    "RECORD_AGGREGATE_INTERVAL": _CONSTANT + "crawler/extensions/recorder.py",
    "RECORD_MAX_BROKEN": _CONSTANT + "crawler/extensions/recorder.py",
    "WARC_GZIP_LEVEL": _CONSTANT + "crawler/archive/files.py",
    "WARC_REVISIT_REQUESTS": _CONSTANT + "crawler/archive/archiver.py",
    # the third pass (issue 38): ~80 settings
    "NEARDUP_SHINGLE_SIZE": _CONSTANT + "crawler/content/neardup_features.py",
    "NEARDUP_NUM_PERM": _CONSTANT + "crawler/content/neardup_features.py",
    "NEARDUP_HOST_MIN_PAGES": _CONSTANT + "crawler/content/neardup_features.py",
    "NEARDUP_SHARED_CAPACITY": _CONSTANT + "crawler/backends/redis/neardup.py",
    "NEARDUP_CACHE_BYTES": _CONSTANT + "crawler/backends/redis/neardup.py",
    "URL_MAX_DATE_DISTANCE_DAYS": _CONSTANT + "crawler/sites/policy.py (DATE_FUTURE_DAYS)",
    "URL_MAX_DATE_PAST_DAYS": _TUNED + "url_date_past_days",
    "ROBOTSTXT_RETRY_DELAY": _TUNED + "robots_retry_delay",
    "METRICS_LINGER": _TUNED + "metrics_linger",
    "FRONTIER_PROGRESS_INTERVAL": _TUNED + "progress_interval",
    "RECRAWL_SYNC_DELTA": _TUNED + "recrawl_sync_delta",
    "CONTENT_THREAD": _TUNED + "content_thread",
    "CRAWLDB_PARTITIONS": "no longer a setting: set DATABASE_PARTITIONS (the crawl database's "
    "and the index's tables)",
    "INDEX_PARTITIONS": "no longer a setting: set DATABASE_PARTITIONS (the crawl database's "
    "and the index's tables)",
    # the Lua frontier's (issue 37): the partition-owned frontier has no use for them
    "FRONTIER_SEEN_BLOOM_CAPACITY": "no longer a setting: the seen-set grows with "
    "FRONTIER_SEEN_EXACT_LIMIT and FRONTIER_SEEN_ERROR",
    "FRONTIER_SEEN_BLOOM_ERROR": "no longer a setting: set FRONTIER_SEEN_ERROR",
    "FRONTIER_REPLICA_WAIT_TIMEOUT": "no longer a setting: a write waits 1 s at most for "
    "FRONTIER_REPLICA_WAIT replicas (a constant of crawler/backends/redis/fence.py)",
    "FRONTIER_SHARD_PATIENCE": "no longer a setting: a Redis call retries while Redis is away "
    "(REDIS_OUTAGE_WAIT)",
    "FLEET_WORKER_LOST_AFTER": "no longer a setting: a dead worker's partitions are taken over "
    "when their lease runs out (a constant of crawler/backends/redis/frontier_store.py)",
    # the fourth pass (issue 38): at most 80 settings
    "FRONTIER_HOST_FAILURE_WINDOW": _TUNED + "host_failure_window",
    "FRONTIER_HOST_MAX_FAILURE_RATIO": _TUNED + "host_failure_ratio",
    "FRONTIER_MAX_BACKLOG_BYTES": _TUNED + "max_backlog_bytes",
    "ROBOTSTXT_RETRY_TIMES": _TUNED + "robots_retry_times",
    "RETRY_AFTER_MAX": _CONSTANT + "crawler/middlewares/retry_after.py (MAX_WAIT, an hour)",
    "RETRY_AFTER_TIMES": "no longer a setting: a 429 or 503 is asked again RETRY_TIMES times, "
    "like any other answer that says try again",
    "WARC_FSYNC": "no longer a setting: each WARC file is always fsynced before its rename",
    "CRAWL_SUMMARY": "no longer a setting: the summary is always logged at the end of a crawl",
    # the frontier's tuning (issue 38): constants beside the code, or TUNING knobs
    "FRONTIER_FRONT_QUEUES": _CONSTANT + "crawler/frontier/mercator.py (FRONT_QUEUES)",
    "FRONTIER_BACK_QUEUES": "no longer a setting: it follows CONCURRENT_REQUESTS (three back "
    "queues per fetch in flight, Mercator's rule)",
    "FRONTIER_REFILL_BATCH": _CONSTANT + "crawler/frontier/mercator.py",
    "FRONTIER_BACK_RUN": _CONSTANT + "crawler/frontier/mercator.py",
    "FRONTIER_COMMIT_INTERVAL": _CONSTANT + "crawler/backends/sqlite/frontier.py",
    "FRONTIER_LINK_CACHE_SIZE": _CONSTANT + "crawler/sites/analysis.py",
    "FRONTIER_LINK_SLICE": _TUNED + "link_slice",
    "FRONTIER_BATCH_LINGER": _CONSTANT + "crawler/backends/redis/frontier_store.py",
    "FRONTIER_LEASE_MAX_WAIT": _CONSTANT + "crawler/frontier/buffered.py",
    "FRONTIER_REFRESH_INTERVAL": _CONSTANT + "crawler/frontier/buffered.py",
    "FRONTIER_SEEN_ERROR": _CONSTANT + "crawler/backends/redis/frontier_store.py",
    "FRONTIER_READ_AHEAD": _TUNED + "read_ahead",
    "FRONTIER_IDLE_HORIZON": _TUNED + "idle_horizon",
    "FRONTIER_JOIN_WAIT": _TUNED + "join_wait",
    "FLEET_HEARTBEAT_INTERVAL": _TUNED + "heartbeat_interval",
    "METRICS_INTERVAL": _TUNED + "metrics_interval",
    "RECORD_INTERVAL": _TUNED + "record_interval",
    # the storage plug points (issue 38): one expert table
    "FRONTIER_STORE_CLASS": _PLUGGED + '"frontier_store"',
    "ROBOTS_CACHE_CLASS": _PLUGGED + '"robots_cache"',
    "CRAWLDB_CLASS": _PLUGGED + '"crawldb"',
    "INDEX_CLASS": _PLUGGED + '"index"',
    "NEARDUP_STORE_CLASS": _PLUGGED + '"neardup_store"',
    "DNS_SHARED_CLASS": _PLUGGED + '"dns_shared"',
    "ADDRESS_BUDGET_CLASS": _PLUGGED + '"address_budget"',
    "WARC_DIGEST_INDEX_CLASS": _PLUGGED + '"warc_digest_index"',
    # tuning kept public by ADR 3 for the tests that shorten it (issue 38)
    "INDEX_THREAD": _TUNED + "index_thread",
    "CONTENT_PROCESS_MIN_BYTES": _TUNED + "process_min_bytes",
    "DOWNLOAD_MIN_RATE_GRACE": _TUNED + "min_rate_grace",
    "DNS_MIN_TTL": _TUNED + "dns_min_ttl",
    "DNS_NEGATIVE_TTL": _TUNED + "dns_negative_ttl",
    "DNS_HOLD_TIMES": _TUNED + "dns_hold_times",
    "ROBOTSTXT_BOOK_SIZE": _TUNED + "robots_book_size",
    "SITEMAPS_MAX_URLS": _TUNED + "sitemap_max_urls",
    "SITEMAPS_MAX_SIZE": _TUNED + "sitemap_max_bytes",
    "NEARDUP_LINK_DEMOTION": _TUNED + "neardup_link_demotion",
    "RECORD_MAX_FETCHES": _TUNED + "record_max_fetches",
    "WARC_REVISIT_MIN_SIZE": _TUNED + "warc_revisit_min_size",
}
