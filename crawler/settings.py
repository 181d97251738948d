"""Project settings: Scrapy's defaults changed where a polite, long-running crawler needs it.

Every FRONTIER_* setting can be given with ``-s KEY=VALUE``, in a site config's
``[politeness]`` / ``[settings]`` tables, or in scrapyd's ``setting=KEY=VALUE``.
"""

from scrapy.settings.default_settings import (
    SPIDER_MIDDLEWARES_BASE as _SCRAPY_SPIDER_MIDDLEWARES_BASE,
)

BOT_NAME = "crawler"

SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
# Spiders come from the per-site configs in crawler/sites/, one spider per file.
SPIDER_LOADER_CLASS = "crawler.spiders.loader.SiteSpiderLoader"
COMMANDS_MODULE = "crawler.commands"

# A user agent that names the crawler and says where to complain. A site config may override it.
CRAWLER_CONTACT_URL = "https://github.com/crawler-project/crawler"
USER_AGENT = f"crawler-bot/0.1 (+{CRAWLER_CONTACT_URL})"

# --- Backends (crawler/backends.py) ----------------------------------------------------------
# The one public switch: "memory" (the embedded default; on disk in SQLite when JOBDIR is set).
# It only picks the defaults of the class settings below; a class setting given explicitly wins.
FRONTIER_BACKEND = "memory"
FRONTIER_STORE_CLASS = ""  # queued and seen URLs, host politeness state, leases
ROBOTS_CACHE_CLASS = ""  # fetched robots.txt files
CRAWLDB_CLASS = ""  # the crawl database (on with CRAWLDB_PATH or RECRAWL_INTERVAL)
INDEX_CLASS = ""  # the full-text index
NEARDUP_STORE_CLASS = ""  # the near-duplicate detector's state

# --- The Mercator frontier owns politeness ------------------------------------------------
SCHEDULER = "crawler.scheduler.FrontierScheduler"
# The downloader subclass tells the frontier when each fetch ends, however it ends.
DOWNLOADER = "crawler.downloader.FrontierDownloader"
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

# Heritrix's defaults: wait max(1 s, 5 x last fetch time), at most 30 s, between fetches of a host.
FRONTIER_MIN_DELAY = 1.0
FRONTIER_DELAY_FACTOR = 5.0
FRONTIER_MAX_DELAY = 30.0
FRONTIER_HOST_CONCURRENCY = 1
FRONTIER_FRONT_QUEUES = 8
FRONTIER_BACK_QUEUES = 0  # 0: 3 x CONCURRENT_REQUESTS (Mercator's rule of thumb)
# A host whose robots.txt asks for a longer Crawl-delay is skipped rather than crawled faster.
FRONTIER_MAX_CRAWL_DELAY = 120.0
# Consecutive failed fetches (timeouts, refused connections) after which a host is given up.
FRONTIER_HOST_MAX_FAILURES = 5
# A crawl ends when nothing is in flight and no host is due within this many seconds; the hosts
# still waiting are reported in the log and the stats.
FRONTIER_IDLE_HORIZON = 300.0
# How many front-queue entries one refill may move before it yields to the caller.
FRONTIER_REFILL_BATCH = 256
# With JOBDIR: new URLs are committed to disk at least this often (and with every completed
# fetch), so a killed crawl loses at most the URLs discovered in the last this-many seconds.
FRONTIER_COMMIT_INTERVAL = 2.0
# A URL handed out is a lease: forgotten when its page's item and links have left the spider and
# the pipelines, back in the queue if neither that nor a renewal (every third of this, while the
# engine works on it) happens within this many seconds. Must exceed DOWNLOAD_TIMEOUT x
# (RETRY_TIMES + 1); raised with a warning if it does not.
FRONTIER_LEASE_TTL = 300.0
# Raw links (as written in pages) remembered so a repeated link skips normalization.
FRONTIER_LINK_CACHE_SIZE = 1_000_000
FRONTIER_PRIORITY_POLICY = "depth"

# URL filters and spider-trap defenses (a site config sets its own).
URL_MAX_LENGTH = 2048
URL_MAX_REPEATED_SEGMENTS = 3
# Spider traps (crawler/frontier/urls.py; 0 turns one off). Session ids (?sid=<token>,
# ;jsessionid=...) are always stripped in normalization.
URL_MAX_QUERY_VARIANTS = 100  # distinct queries per path: facet permutations, sort orders
URL_MAX_DATE_DISTANCE_DAYS = 1095  # a date in the URL this far in the future: a calendar trap
URL_MAX_DATE_PAST_DAYS = 10950  # ... or this far back (30 years: older than most of the web)
URL_MAX_HOSTS_PER_DOMAIN = 100  # hosts per registered domain: endless generated subdomains

# --- robots.txt (RFC 9309) -------------------------------------------------------------------
ROBOTSTXT_ENABLED = True
ROBOTSTXT_USER_AGENT = None  # the product token; default: the first word of USER_AGENT
ROBOTSTXT_CACHE_EXPIRY = 86400  # seconds a fetched robots.txt stays in force
ROBOTSTXT_MAX_SIZE = 512000  # bytes parsed at most (RFC 9309: at least 500 KiB)
# 5xx, 429 or unreachable: the host is disallowed for now; robots.txt is tried again after
# this delay (doubling, or the server's Retry-After), this many times.
ROBOTSTXT_RETRY_DELAY = 30.0
ROBOTSTXT_RETRY_TIMES = 2
# 429 and 503 are RetryAfterMiddleware's: the host is held for its Retry-After, then the page is
# tried again; stock retrying would hit a host that asked to be left alone at once.
RETRY_HTTP_CODES = [500, 502, 504, 522, 524, 408]
RETRY_AFTER_DEFAULT = 60.0  # seconds, when a 429/503 has no (readable) Retry-After
RETRY_AFTER_MAX = 3600.0  # a host asking to wait longer is skipped, and says so in the log
RETRY_AFTER_TIMES = 3  # 429/503 answers to one request before it is given up
ROBOTSTXT_CACHE_PATH = ""  # default: JOBDIR/robots.sqlite, else beside the crawl database
# Where fetched robots.txt files are kept (a class with from_crawler, see crawler/robots/cache.py).
# Empty: crawler.robots.cache.SqliteRobotsCache where a path is known (above), else
# crawler.robots.cache.MemoryRobotsCache.
ROBOTS_CACHE_CLASS = ""
# Longest a request waits for its origin's robots.txt fetch before it is refused as unresolved.
# 0: DOWNLOAD_TIMEOUT x (RETRY_TIMES + 1) x (1 + 5 redirects) + 60 s.
ROBOTSTXT_WAIT_TIMEOUT = 0

# --- The crawl database and recrawl -------------------------------------------------------------
# On when CRAWLDB_PATH or RECRAWL_INTERVAL is set. "%(name)s" is the site name; default path:
# JOBDIR/crawldb.sqlite, else crawldb-<site>.sqlite in the current directory.
CRAWLDB_PATH = ""
RECRAWL_INTERVAL = 0  # seconds; the adaptive interval starts here (Nutch's AdaptiveFetchSchedule)
RECRAWL_CONTINUOUS = False  # keep running and refetch pages as they come due

# --- Address safety --------------------------------------------------------------------------
# Refuse private, loopback, link-local and reserved targets unless a site config or this allows it.
ALLOW_PRIVATE_ADDRESSES = False
# Or allow just these networks and ports, e.g. ["127.0.0.2/32:8080", "10.20.0.0/16"]
ALLOWED_NETWORKS: list[str] = []

DOWNLOADER_MIDDLEWARES = {
    "crawler.middlewares.address_safety.AddressSafetyMiddleware": 50,
    # ours fetches robots.txt through the frontier and never lets a waiting request through
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.middlewares.robots.RobotsMiddleware": 100,
    "crawler.middlewares.conditional.ConditionalGetMiddleware": 450,
    # above RetryMiddleware (550): it sees a 429/503 first (crawler/middlewares/retry_after.py)
    "crawler.middlewares.retry_after.RetryAfterMiddleware": 560,
    # the stock one, with decompression bombs counted in limits/decompressed_size
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "crawler.middlewares.compression.CountingHttpCompressionMiddleware": 590,
}

# Outermost spider middleware: it sees exactly what the scraper gets and tells the frontier when
# a page's output has ended (so a page that yields no item is acknowledged too). In the _BASE
# dict, so a SPIDER_MIDDLEWARES given with -s or in a site config does not drop it.
SPIDER_MIDDLEWARES_BASE = {
    **_SCRAPY_SPIDER_MIDDLEWARES_BASE,
    "crawler.middlewares.lease.LeaseAckMiddleware": 1,
}

# --- Crawler defaults ------------------------------------------------------------------------
ROBOTSTXT_OBEY = False  # Scrapy's own middleware: replaced by crawler.middlewares.robots
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False  # 2.19's extension runs posted Python code on a local port
# A dead host must not hold a slot for minutes: short timeout, few retries.
DOWNLOAD_TIMEOUT = 20
RETRY_ENABLED = True
RETRY_TIMES = 2
# 429 and 503 are RetryAfterMiddleware's: the host is held for its Retry-After, then the page is
# tried again; stock retrying would hit a host that asked to be left alone at once.
RETRY_HTTP_CODES = [500, 502, 504, 522, 524, 408]
RETRY_AFTER_DEFAULT = 60.0  # seconds, when a 429/503 has no (readable) Retry-After
RETRY_AFTER_MAX = 3600.0  # a host asking to wait longer is skipped, and says so in the log
RETRY_AFTER_TIMES = 3  # 429/503 answers to one request before it is given up
REDIRECT_MAX_TIMES = 5
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024

# --- Limits on what a hostile server can make the crawler do (README: "Hostile servers") -----
# Scrapy's Twisted handler plus header limits, a minimum transfer rate and counted limits.
DOWNLOAD_HANDLERS = {
    "http": "crawler.handlers.LimitedHTTPDownloadHandler",
    "https": "crawler.handlers.LimitedHTTPDownloadHandler",
}
DOWNLOAD_MAX_HEADERS = 256  # header lines of one response (Twisted counts none)
DOWNLOAD_MAX_HEADER_BYTES = 256 * 1024  # bytes of one response's header section
# A response must arrive at this many bytes/s on average from its first byte, once the grace
# period is over: a trickled body is cut after seconds instead of holding a slot for minutes.
DOWNLOAD_MIN_RATE = 1024
DOWNLOAD_MIN_RATE_GRACE = 5.0
# bytes of a page's HTML parsed (Nutch's http.content.limit is 1 MB); the rest is not parsed
PAGE_MAX_HTML = 4 * 1024 * 1024
PAGE_MAX_LINKS = 5000  # links of one page kept (in page order); a 200,000-link page is a trap
CONTENT_MAX_TEXT = 1_000_000  # characters of a page's text kept for near-duplicates and index
# Depth is enforced by the frontier's URL policy (site config max_depth); DepthMiddleware
# still records meta["depth"] and the depth stats.
DEPTH_LIMIT = 0
DEPTH_STATS_VERBOSE = False
LOG_LEVEL = "INFO"

# --- Content: near-duplicates and the full-text index ----------------------------------------
ITEM_PIPELINES = {
    "crawler.pipelines.neardup.NearDuplicatePipeline": 300,
    "crawler.pipelines.index.IndexPipeline": 400,
}
# Defaults chosen by bench/neardup.py (precision and recall 1.0 on the labelled set; 3-word
# shingles keep LSH candidates per page 8x fewer than word pairs).
NEARDUP_ENABLED = True
NEARDUP_SHINGLE_SIZE = 3
NEARDUP_NUM_PERM = 128
NEARDUP_THRESHOLD = 0.5
NEARDUP_INDEX_DUPLICATES = False  # a near-duplicate becomes an alias of its original
NEARDUP_HOST_MIN_PAGES = 5  # pages of a host before its duplicate ratio lowers its priority
INDEX_ENABLED = True
INDEX_PATH = None  # crawl-index.sqlite under JOBDIR, else in the current directory
INDEX_BATCH_SIZE = 200
INDEX_COMMIT_INTERVAL = 5.0

EXTENSIONS = {
    "crawler.extensions.statsfile.StatsFile": 900,
    "crawler.extensions.progress.FrontierProgress": 500,
    "crawler.extensions.recrawl.RecrawlExtension": 100,
    # FrontierProgress says what LogStats says, and what the frontier is doing.
    "scrapy.extensions.logstats.LogStats": None,
}
FRONTIER_PROGRESS_INTERVAL = 30.0
# Write the final stats as JSON to this path (off when empty).
STATS_FILE = ""
FEED_EXPORT_ENCODING = "utf-8"
