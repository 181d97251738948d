"""Project settings: Scrapy's defaults changed where a polite, long-running crawler needs it.

The crawler's own settings (FRONTIER_*, URL_*, ROBOTSTXT_*, RECRAWL_*, NEARDUP_*, INDEX_*, ...)
and their defaults live in ``crawler/config/defaults.py``, the one place the code takes them from;
this
module ships them and adds the Scrapy settings the project changes, each with its reason.
"""

from scrapy.settings.default_settings import (
    SPIDER_MIDDLEWARES_BASE as _SCRAPY_SPIDER_MIDDLEWARES_BASE,
)

from crawler.config.defaults import *  # noqa: F403 - the crawler's own settings, shipped as they are

BOT_NAME = "crawler"

SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
# Spiders come from the per-site configs in crawler/sites/, one spider per file.
SPIDER_LOADER_CLASS = "crawler.spiders.loader.SiteSpiderLoader"
COMMANDS_MODULE = "crawler.commands"

# A user agent that names the crawler and says where to complain. A site config may override it.
USER_AGENT = "crawler-bot/0.1 (+https://github.com/crawler-project/crawler)"

# --- The Mercator frontier owns politeness ------------------------------------------------
SCHEDULER = "crawler.scheduler.FrontierScheduler"
# The downloader subclass tells the frontier when each fetch ends, however it ends.
DOWNLOADER = "crawler.download.downloader.FrontierDownloader"
# The frontier spaces requests per host from the end of the previous fetch. Scrapy's own delay
# counts start to start and would add a second, different politeness rule on top, so it is off.
DOWNLOAD_DELAY = 0
# AutoThrottle starts every slot at 5 s and adjusts on its own: a competing politeness policy.
AUTOTHROTTLE_ENABLED = False
# The frontier never hands out more than FRONTIER_HOST_CONCURRENCY requests per host; the
# downloader's own per-domain cap must not be the tighter one (and is not reliably enforced
# with DOWNLOAD_DELAY = 0 anyway).
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
# The site spider yields one item per page (links go to the frontier in bulk). Scrapy 2.19
# starts CONCURRENT_ITEMS worker tasks for every response whatever it yields: the default of
# 100 cost about 10 % of a crawl's CPU.
CONCURRENT_ITEMS = 4

# --- Middlewares ---------------------------------------------------------------------------------
DOWNLOADER_MIDDLEWARES = {
    "crawler.middlewares.address_safety.AddressSafetyMiddleware": 50,
    # ours fetches robots.txt through the frontier and never lets a waiting request through
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.middlewares.robots.RobotsMiddleware": 100,
    # /.well-known/tdmrep.json, once per origin, for an ai-train/ai-input crawl (CRAWL_PURPOSE)
    "crawler.middlewares.tdmrep.TdmRepMiddleware": 102,
    "crawler.middlewares.sitemaps.SitemapMiddleware": 105,  # sitemaps, lastmod (SITEMAPS_*)
    "crawler.middlewares.conditional.ConditionalGetMiddleware": 450,
    # below the redirects: a soft-404 probe's final answer (SOFT404_PROBE)
    "crawler.middlewares.soft404.Soft404ProbeMiddleware": 470,
    # above RetryMiddleware (550): it sees a 429/503 first (crawler/middlewares/retry_after.py)
    "crawler.middlewares.retry_after.RetryAfterMiddleware": 560,
    # above RetryMiddleware: a name that does not resolve holds its host instead of failing
    # its pages one by one (crawler/middlewares/dns.py)
    "crawler.middlewares.dns.DnsMiddleware": 555,
    # the stock one, with decompression bombs counted in limits/decompressed_size
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    # the stock one, with dropped chains and loops counted in limits/redirects, redirect_loop
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
    "crawler.middlewares.redirect.CountingRedirectMiddleware": 600,
    # the stock one decodes a whole page on the reactor to read its first 4,096 characters
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "crawler.middlewares.redirect.PrefixMetaRefreshMiddleware": 580,
    "crawler.middlewares.compression.CountingHttpCompressionMiddleware": 590,
    # the stock one, with a URL whose retries ran out counted in retry/gave_up/<reason>
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "crawler.middlewares.retry.CountingRetryMiddleware": 550,
    # WARC capture (WARC_ENABLED, off by default): nearest the handler, so it records every
    # response as received, before decompression, redirects, retries and the robots.txt gate
    "crawler.middlewares.warc.WarcCaptureMiddleware": 950,
    # From and Web Bot Auth signatures (FROM_ADDRESS, SIGNATURE_*; off by default): after every
    # change to a request, before its WARC record (crawler/middlewares/signing.py)
    "crawler.middlewares.signing.IdentityMiddleware": 945,
}

# Outermost spider middleware: it sees exactly what the scraper gets and tells the frontier when
# a page's output has ended (so a page that yields no item is acknowledged too). In the _BASE
# dict, so a SPIDER_MIDDLEWARES given with -s or in a site config does not drop it.
SPIDER_MIDDLEWARES_BASE = {
    **_SCRAPY_SPIDER_MIDDLEWARES_BASE,
    "crawler.middlewares.lease.LeaseAckMiddleware": 1,
}

# Names resolved by twisted.names, cached by TTL and shared by a fleet (crawler/download/dns.py),
# not by getaddrinfo on the thread pool with answers kept for ever.
TWISTED_DNS_RESOLVER = "crawler.download.dns.CachingDnsResolver"
DNS_TIMEOUT = 10  # Scrapy's 60 s holds a request a minute for a name that will not resolve

# --- Crawler defaults ------------------------------------------------------------------------
ROBOTSTXT_OBEY = False  # Scrapy's own middleware: replaced by crawler.middlewares.robots
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False  # 2.19's extension runs posted Python code on a local port
# A dead host must not hold a slot for minutes: short timeout, few retries.
DOWNLOAD_TIMEOUT = 20
RETRY_ENABLED = True
RETRY_TIMES = 2
# a URL whose retries ran out is counted (retry/gave_up/<reason>), not an ERROR line each
# (crawler/middlewares/retry.py)
RETRY_GIVE_UP_LOG_LEVEL = "DEBUG"
LOG_FORMATTER = "crawler.middlewares.retry.QuietDownloadErrors"
# 429 and 503 are RetryAfterMiddleware's: the host is held for its Retry-After, then the page is
# tried again; stock retrying would hit a host that asked to be left alone at once.
RETRY_HTTP_CODES = [500, 502, 504, 522, 524, 408]
REDIRECT_MAX_TIMES = 5
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
# Scrapy stops every download while the responses its spider and pipelines are still working
# on add up to more than this (5 MB by default). Pages are parsed on the content thread
# (crawler/offload/components.py), so a few big documentation pages (mdBook's print.html, 1-4 MB
# each)
# stay "in the scraper" a little longer, and at 5 MB every host waited for them. Measured on 10
# real-docs hosts at 0.5 s (bench/realcrawl.py --politeness): politeness efficiency 0.89 at
# 5 MB, 0.95 at 12 MB, 0.98 at 16 MB; peak RSS of the full real-docs crawl 330, 360, 394 MB
# (500 MB at 32 MB). 16 MiB: four pages of the largest size parsed (PAGE_MAX_HTML).
SCRAPER_SLOT_MAX_ACTIVE_SIZE = 16 * 1024 * 1024

# --- Limits on what a hostile server can make the crawler do (README: "Hostile servers") -----
# Scrapy's Twisted handler plus header limits, a minimum transfer rate and counted limits
# (crawler/download/handler.py; DOWNLOAD_MIN_RATE*, PAGE_MAX_*, CONTENT_MAX_TEXT in
# crawler/config/defaults.py).
DOWNLOAD_HANDLERS = {
    "http": "crawler.download.handler.LimitedHTTPDownloadHandler",
    "https": "crawler.download.handler.LimitedHTTPDownloadHandler",
}
# Depth is enforced by the frontier's URL policy (site config max_depth); DepthMiddleware
# still records meta["depth"] and the depth stats.
DEPTH_LIMIT = 0
DEPTH_STATS_VERBOSE = False
LOG_LEVEL = "INFO"

# --- Content: near-duplicates and the full-text index ----------------------------------------
ITEM_PIPELINES = {
    "crawler.pipelines.neardup.NearDuplicatePipeline": 300,
    "crawler.pipelines.soft404.Soft404Pipeline": 350,  # flags soft 404s (SOFT404_PROBE)
    "crawler.pipelines.index.IndexPipeline": 400,
    # last: a big item's feed bytes made on a thread (crawler/pipelines/feed.py)
    "crawler.pipelines.feed.FeedLinePipeline": 900,
}

EXTENSIONS = {
    "crawler.extensions.statsfile.StatsFile": 900,
    "crawler.extensions.summary.CrawlSummary": 800,
    "crawler.extensions.progress.FrontierProgress": 500,
    # the crawl record (RECORD_*), read by `scrapy report`
    "crawler.extensions.recorder.CrawlRecordExtension": 505,
    "crawler.extensions.stall.ReactorStallMonitor": 510,
    # /metrics for Prometheus, with METRICS_PORT
    "crawler.extensions.metrics.WorkerMetrics": 515,
    "crawler.extensions.gcpace.GcPacer": 520,
    "crawler.extensions.recrawl.RecrawlExtension": 100,
    "crawler.extensions.budget.BudgetCuts": 110,
    "crawler.extensions.heartbeat.FleetHeartbeat": 600,
    # the crawl's one per-host tally (pages, errors, broken links, gaps, delays), which the
    # summary, the progress line, the crawl record and the heartbeat read
    "crawler.extensions.tally.CrawlTally": 50,
    # the crawl's one log of limits that fired (once per host and limit, across components)
    "crawler.download.limits.LimitLog": 0,
    # the content, index and feed threads and the parse process: built last, so they close
    # after every other extension's engine_stopped
    "crawler.offload.components.OffloadWorkers": 1000,
    # FrontierProgress says what LogStats says, and what the frontier is doing.
    "scrapy.extensions.logstats.LogStats": None,
    # CLOSESPIDER_PAGECOUNT counts pages, not their requisites ([requisites] in a site config)
    "scrapy.extensions.closespider.CloseSpider": None,
    "crawler.extensions.closespider.PageCloseSpider": 0,
}
FEED_EXPORT_ENCODING = "utf-8"
# Scrapy's JSON exporters, writing the bytes FeedLinePipeline made off the reactor when it did
FEED_EXPORTERS = {
    "json": "crawler.pipelines.feed.JsonExporter",
    "jsonlines": "crawler.pipelines.feed.JsonLinesExporter",
    "jsonl": "crawler.pipelines.feed.JsonLinesExporter",
    "jl": "crawler.pipelines.feed.JsonLinesExporter",
}
# The crawl ends with CrawlSummary's dozen lines instead of ~50 lines of stats dict; the full
# stats stay in STATS_FILE and in the log at LOG_LEVEL=DEBUG.
STATS_DUMP = False
