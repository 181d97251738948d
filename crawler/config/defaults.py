"""The default of every setting of the crawler's own, in one place, each with its reason.

``crawler/settings.py`` ships these values; every getter fallback, dataclass default and
constructor default that stands for one of them refers here, so a default is changed once and
the project settings, the cores used without Scrapy (tests, benchmarks, ``scrapy search``) and
a crawler built from bare ``Settings`` cannot drift apart (tests/test_defaults.py checks both).

A leaf module: plain constants, no imports, so the Scrapy-free cores may use it. Scrapy's own
settings that the project changes stay in ``crawler/settings.py`` with their reasons.

Every FRONTIER_* setting can be given with ``-s KEY=VALUE``, in a site config's
``[politeness]`` / ``[settings]`` tables, or in scrapyd's ``setting=KEY=VALUE``.
"""

# Another folder of site configs than the packaged crawler/sites/ (tests, configs kept
# elsewhere); empty: the packaged ones.
SITES_DIR = ""

# Expert: knobs that tests and benchmarks turn, as a table ('{"idle_horizon": 2}'); each knob's
# default and meaning are in crawler/config/tuning.py. Empty: the measured defaults.
TUNING: dict[str, float] = {}

# --- Backends (crawler/backends/registry.py)
# ----------------------------------------------------------
# Where the crawl's state lives: "memory" (one process; on disk in SQLite when JOBDIR is set)
# or "redis" (a frontier shared by every worker, at REDIS_URL). The one public switch: it only
# picks the classes that keep each piece of state; BACKEND_CLASSES swaps one.
FRONTIER_BACKEND = "memory"
# Expert: the class of a plug point instead of the backend's, as a table
# ('{"index": "mypackage.MyIndex"}'); the plug points are in crawler/backends/registry.py.
BACKEND_CLASSES: dict[str, str] = {}
# postgresql://user:password@host/db: the crawl database and the index in PostgreSQL, shared by
# every worker (crawler/backends/postgres/crawldb.py, crawler/backends/postgres/index.py). Empty:
# embedded SQLite.
DATABASE_URL = ""
# PostgreSQL only: split the big tables (the crawl database's pages; the index's documents,
# anchors and outlinks) into this many hash partitions each when they are created (0: plain
# tables). Worth it past ~100 million pages, where one table's vacuum and index builds take
# hours; writes keep their rate (BENCHMARKS.md, pg_scale).
DATABASE_PARTITIONS = 0

# --- The Mercator frontier owns politeness ------------------------------------------------
# Seconds a host rests at least after each fetch. After a fetch that took d seconds it rests
# max(FRONTIER_MIN_DELAY, FRONTIER_DELAY_FACTOR x d), at most FRONTIER_MAX_DELAY, and never less
# than its robots.txt Crawl-delay (Heritrix's rule and defaults).
FRONTIER_MIN_DELAY = 1.0
# How many times its last fetch's duration a host rests (0: FRONTIER_MIN_DELAY, fixed).
FRONTIER_DELAY_FACTOR = 5.0
# Seconds a host rests at most after a slow fetch (a longer Crawl-delay is still honoured).
FRONTIER_MAX_DELAY = 30.0
# Fetches of one host in flight at once.
FRONTIER_HOST_CONCURRENCY = 1
# Fetches in flight at once to one server address, over all the host names that resolve to it
# (crawler/frontier/addresses.py): a thousand names on one server get one host's share, no
# more. 0: politeness per host name only.
FRONTIER_IP_CONCURRENCY = 1
# Seconds one server address rests after each fetch there, growing with the response time as a
# host's rest does; None (or empty): FRONTIER_MIN_DELAY.
FRONTIER_IP_DELAY: float | None = None
# Seconds: a host whose robots.txt asks for a longer Crawl-delay is skipped rather than crawled
# faster.
FRONTIER_MAX_CRAWL_DELAY = 120.0
# Consecutive failed fetches (timeouts, refused connections, 5xx answers) after which a host is
# given up. A host is also given up when half of its last 20 fetches failed (TUNING's
# host_failure_window and host_failure_ratio): a success does not wipe out earlier failures, so
# a host that mixes pages that never answer with fast ones ends too.
FRONTIER_HOST_MAX_FAILURES = 5
# A URL handed out is a lease: forgotten when its page's item and links have left the spider and
# the pipelines, back in the queue if neither that nor a renewal (every third of this, while the
# engine works on it) happens within this many seconds: also how long a killed worker's hosts
# (and their server addresses) wait before other workers take them over. Must exceed
# DOWNLOAD_TIMEOUT x (RETRY_TIMES + 1): left at its default it becomes twice that when that is
# longer (the project's 20 s x 3 fits); set lower, it is raised with a warning.
FRONTIER_LEASE_TTL = 120.0
# A worker stops taking work while this many pages it fetched are not yet acknowledged
# (waiting for the content thread, the spider or the pipelines), or 8 MiB of them (TUNING's
# max_backlog_bytes), so a worker killed loses at most the read-ahead, its fetches in flight
# and this much fetched work (others fetch it again). 0: no bound. See
# crawler/scheduler/leases.py; BENCHMARKS.md, kill_refetch.
FRONTIER_MAX_BACKLOG = 32
# Redis only: URLs the crawl's seen-set is sized for, shared out over its partitions. With
# RedisBloom on the server each partition's is a scalable Bloom filter (~2 B per URL) whose false
# positives stay under 1 % past that size too; without it, exact buckets of
# 32-bit fingerprints in intsets (~5 B per URL, no false positive), ~50 B per URL past the size.
# -1: exact whatever the size (no Bloom filter even with RedisBloom; buckets laid out for 2
# million URLs). See crawler/backends/redis/seenset.py.
FRONTIER_SEEN_EXACT_LIMIT = 2_000_000
# Redis frontier: how many replicas each write of a partition's owner waits for (up to 1 s)
# before the owner goes on. 0: replication is asynchronous, and a master's failover may lose
# its last writes (the partition is then read again from what the replica had: nothing is
# lost, the URLs that were out of the queues are fetched twice). 1 or more: a write is done
# once a replica has it, so a failover to that replica loses none and fetches none twice, at
# the cost of a round trip to the replica per write.
FRONTIER_REPLICA_WAIT = 0
# Which URLs go first: "depth" (breadth first), "fifo", "request" (the request's priority) or
# "opic" (the cash pages hand their links, crawler/frontier/opic.py: the most linked-to first).
FRONTIER_PRIORITY_POLICY = "depth"
# A file of registered domains, one per line (crawl policies, crawler/frontier/policies.py),
# whose URLs never rank below the default policy; empty: none. A site config's trusted_domains
# wins.
FRONTIER_TRUSTED_DOMAINS = ""
# A file of registered domains, one per line, whose URLs take the "distrust" policy (the
# site's, or a built-in one: a thousandth of the cash, halved per hop) whatever linked them;
# empty: none. A site config's distrusted_domains wins.
FRONTIER_DISTRUSTED_DOMAINS = ""

# --- Live metrics (crawler/extensions/metrics.py) --------------------------------------------
# The TCP port of this worker's live Prometheus metrics, http://METRICS_HOST:METRICS_PORT/metrics,
# served off the reactor. 0: off.
METRICS_PORT = 0
# The address /metrics is served on: loopback unless set otherwise (0.0.0.0: every interface).
METRICS_HOST = "127.0.0.1"

# --- A shared frontier in Redis (crawler/backends/redis/)
# ---------------------------------
# The crawl's key in Redis; empty: the site name. Two crawls of one site need two keys.
FRONTIER_REDIS_KEY = ""
# Delete the crawl's state in Redis before starting, instead of resuming it.
FRONTIER_RESET = False
# Hash tags the per-IP-address politeness keys are spread over, so a Redis Cluster spreads
# them over its masters (the frontier's own state is in partitions, each under a tag of its
# own). Every worker must use the same
# number. 1: one tag, the single-Redis layout. On a cluster: a multiple of the masters.
FRONTIER_SHARDS = 1
# A file whose first line is the Redis password, for a password kept out of REDIS_URL (which
# scrapyd logs and ps shows). Empty: unused.
REDIS_PASSWORD_FILE = ""
# The name of an environment variable that holds the Redis password (when REDIS_PASSWORD_FILE is
# empty). Empty: unused.
REDIS_PASSWORD_ENV = ""
# Whether REDIS_URL names a Redis Cluster (crawler/backends/redis/connection.py): "auto" asks the
# node (INFO cluster) once per process, "yes" / "no" say so without asking.
REDIS_CLUSTER = "auto"
# Seconds a Redis user that needs an answer waits for Redis to come back after it went away (a
# restart, a cluster failover), counted from the outage's start
# (crawler/backends/redis/outage.py): a page's shared near-duplicate check (past it the page is
# judged alone, counted neardup/unjudged) and a worker's last heartbeat. The frontier waits as
# long as it takes; the robots.txt cache, on the reactor, never waits.
REDIS_OUTAGE_WAIT = 30.0

# --- Identity: a From header and signed requests (crawler/middlewares/signing.py) --------------
# A mailbox where site operators reach whoever runs the crawl (RFC 9110 10.1.2), sent as the
# From header of every request; empty: none. Checked when set ("Crawl Ops <ops@example.org>").
FROM_ADDRESS = ""
# Web Bot Auth (draft-ietf-webbotauth-httpsig-protocol-00, crawler/net/signatures.py): every
# request signed with the Ed25519 key of this PEM file (made by `scrapy botkey`), so sites can
# tell this crawler from one that copies its user agent. Empty: requests are not signed.
SIGNATURE_KEY_FILE = ""
# The https origin that serves the key directory at
# /.well-known/http-message-signatures-directory (`scrapy botkey` writes it), sent as the
# Signature-Agent header. Needed with SIGNATURE_KEY_FILE.
SIGNATURE_AGENT = ""

# --- Usage preferences (crawler/robots/usage.py, README "Usage preferences") ------------------
# What the crawl is for: one or more of search, archive, ai-train, ai-input. Sites' usage
# preferences (robots.txt Content-Signal and Content-Usage, X-Robots-Tag and meta noai,
# noarchive..., TDMRep) are enforced by it: a page whose every purpose is refused is not
# fetched (or not kept), one refused for search is not indexed, for archive not archived.
CRAWL_PURPOSE = ("search",)

# --- URL filters and spider-trap defenses (a site config sets its own) ------------------------
# URLs longer than this many characters are not followed (a generated URL that grows each hop).
URL_MAX_LENGTH = 2048
# URLs whose path repeats one segment more than this many times (/a/b/a/b/a/b/) are not
# followed: relative links that climb into themselves.
URL_MAX_REPEATED_SEGMENTS = 3
# Distinct query strings followed per path (a trap of facet permutations and sort orders,
# crawler/frontier/urls.py); 0: no bound.
URL_MAX_QUERY_VARIANTS = 100
# Host names followed per registered domain (a trap of endless generated subdomains); 0: no
# bound.
URL_MAX_HOSTS_PER_DOMAIN = 100

# --- robots.txt (RFC 9309, crawler/middlewares/robots.py) ----------------------------------
# Obey robots.txt (RFC 9309: fetched once per origin through the frontier, its rules applied to
# every request). Off: nothing is asked and everything is allowed.
ROBOTSTXT_ENABLED = True
# The product token (Scrapy's setting, read by our middleware; Scrapy's own is off);
# default: the name USER_AGENT starts with ("MJ12bot/1.4 (+url)": mj12bot; see
# crawler/config/agent.py). A browser's ("Mozilla/5.0 ...") is refused: set this instead.
ROBOTSTXT_USER_AGENT = None
# Seconds a fetched robots.txt stays in force (RFC 9309 2.4: a cached copy should not be used
# for more than 24 hours).
ROBOTSTXT_CACHE_EXPIRY = 86400
# The SQLite file that keeps fetched robots.txt copies across crawls, so a resumed crawl or a
# recrawl reuses fresh ones; empty: JOBDIR/robots.sqlite, else beside the crawl database, else
# none (memory only).
ROBOTSTXT_CACHE_PATH = ""

# --- Sitemaps (crawler/middlewares/sitemaps.py, crawler/sitemaps/) ---------------------------
# Read the sitemaps a host's robots.txt names (Sitemap: lines), as frontier requests of the host.
SITEMAPS_ENABLED = True
# Also try /sitemap.xml of every origin (a site config sets it in [settings]); off by default:
# a guess costs each host a request.
SITEMAPS_PROBE = False
# Sitemap entries taken from all the sitemaps of one crawl (the per-site cap); the rest are
# ignored.
SITEMAPS_MAX_SITE_URLS = 1_000_000
# sitemaps.org's location rule: a sitemap lists only URLs under its own folder (same scheme,
# host and port), except one named in robots.txt, which may list any URL of that host. Off:
# any URL of the sitemap's host (for CMSs that keep sitemaps in a folder of their own).
SITEMAPS_FOLDER_RULE = True
# With a crawl database: a due page whose <lastmod> is not after its last fetch is not asked
# (recorded as not modified); one whose <lastmod> is after it is asked now, due or not.
SITEMAPS_LASTMOD = True

# --- Canonical URLs (crawler/content/canonical.py) ------------------------------------------
# Which <link rel="canonical"> / Link: rel="canonical" targets are honoured: "host" (the page's
# own host), "domain" (its registered domain: www.example.com -> example.com), "off".
CANONICAL_SCOPE = "domain"

# --- DNS (crawler/download/dns.py, crawler/middlewares/dns.py) ------------------------------
# "ip[:port]" of the DNS servers to ask (a JSON list or a,b); empty: /etc/resolv.conf's.
DNS_SERVERS: tuple[str, ...] = ()

# --- The crawl database and recrawl -------------------------------------------------------------
# The crawl database (each URL's fetch history and next due date, crawler/crawldb/), kept when
# this or RECRAWL_INTERVAL is set; "%(name)s" is the site name. Empty (with RECRAWL_INTERVAL):
# JOBDIR/crawldb.sqlite, else crawldb-<site>.sqlite in the current directory.
CRAWLDB_PATH = ""
# Seconds; the adaptive interval starts here (Nutch's AdaptiveFetchSchedule), and each page's
# interval then grows while it does not change and shrinks when it does, between a minute (or a
# tenth of this, if shorter) and 30 days (or this, if longer); 0: one day.
RECRAWL_INTERVAL = 0
# Keep running once the frontier is empty and refetch pages as they come due (with the crawl
# database); off: the crawl ends when nothing is left, and the next run refetches what is due.
RECRAWL_CONTINUOUS = False

# --- Address safety --------------------------------------------------------------------------
# Refuse private, loopback, link-local and reserved targets unless a site config or this allows it.
ALLOW_PRIVATE_ADDRESSES = False
# Or allow just these networks and ports, e.g. ["127.0.0.2/32:8080", "10.20.0.0/16"]
# (crawler/net/addresses.py); everything else private stays refused.
ALLOWED_NETWORKS: tuple[str, ...] = ()

# --- Limits on what a hostile server can make the crawler do (README: "Hostile servers") -----
# Bytes per second a response must arrive at on average from its first byte, once TUNING's
# min_rate_grace (5 s) is over: a trickled body is cut after seconds instead of holding a
# slot for minutes. 0: no minimum.
DOWNLOAD_MIN_RATE = 1024
# Bytes of a page's HTML parsed, from its start (Nutch's http.content.limit is 1 MB); the rest
# is not parsed.
PAGE_MAX_HTML = 4 * 1024 * 1024
# Links of one page kept, in page order; the rest are dropped (a 200,000-link page is a trap).
PAGE_MAX_LINKS = 5000
# Characters of a page's text kept for near-duplicate detection and the index.
CONTENT_MAX_TEXT = 1_000_000
# The item's `markdown`: the main content as Markdown (crawler/content/markdown.py). Off saves
# its CPU (bench/metadata.py).
CONTENT_MARKDOWN = True
# The item's `metadata`, `description`, dates and `language` (crawler/content/metadata.py,
# language.py). Off saves their CPU (bench/metadata.py); the language is then not counted.
CONTENT_METADATA = True

# --- Content: near-duplicates and the full-text index ----------------------------------------
# Near-duplicate detection (MinHash and LSH over the main text, crawler/content/neardup.py):
# a page that repeats another is flagged, not indexed, and its links demoted.
NEARDUP_ENABLED = True
# Estimated Jaccard similarity of two pages' shingles at or above which one is a near-duplicate
# (the detector's sizes are constants of crawler/content/neardup_features.py, chosen with
# bench/neardup.py).
NEARDUP_THRESHOLD = 0.5
# Index a near-duplicate as a document of its own; off: it becomes an alias of its original in
# the index (no document, no outlinks of its own).
NEARDUP_INDEX_DUPLICATES = False
# Soft 404s: one request per host for a path that cannot exist; pages answered like it are
# flagged soft_404 and not indexed (crawler/content/soft404.py). Off by default: it costs each
# host one request, which a crawl asks for.
SOFT404_PROBE = False
# Write every page to the full-text index that `scrapy search` reads (crawler/index/).
INDEX_ENABLED = True
# The embedded (SQLite) index's file; empty: crawl-index.sqlite under JOBDIR, else in the
# current directory. Unused with DATABASE_URL.
INDEX_PATH = None

# --- Items and stats ---------------------------------------------------------------------------
# Outlinks in the items that feeds write (-o, scrapyd's items): they are most of a feed's
# bytes. Off leaves them out of the feeds only; the index and the crawl database still get them.
ITEM_OUTLINKS = True

# Write the final stats as JSON to this path (off when empty).
STATS_FILE = ""

# --- The crawl record and `scrapy report` (crawler/extensions/recorder.py) -------------------
# A record over time of what the crawl did (snapshots, per-host fetches, broken links), the
# input of `scrapy report`. Cheap enough to stay on (BENCHMARKS.md: ~9 us CPU, ~35 bytes per page).
RECORD_ENABLED = True
# Where; empty: JOBDIR/record.jsonl, else next to STATS_FILE (stats.json -> stats.record.jsonl),
# else crawl-record-<site>.jsonl in the current directory (like crawl-index.sqlite).
RECORD_PATH = ""
# This worker's name in the record (several workers of one Redis crawl); empty: host:pid.
RECORD_WORKER_ID = ""

# --- WARC output (crawler/archive, crawler/middlewares/warc.py) ------------------------------
# Archive every request and response in full in gzipped WARC files (ISO 28500), for replay
# and web archives. Off by default: an archive doubles or triples the disk an ordinary crawl
# uses (bytes written ~ bytes received, BENCHMARKS.md) and costs
# CPU per page, for files only an archive or a replay tool reads.
WARC_ENABLED = False
# Where the files go ("%(name)s": the site); a CDXJ index of the crawl's files goes there too.
WARC_DIR = "warc/%(name)s"
# The first part of each file name (<prefix>-<time>-<serial>-<host>-<pid>.warc.gz); empty: the
# site's name.
WARC_PREFIX = ""
# Bytes a WARC file grows to at most: it is closed, renamed and the next one opened before a
# record would take it past this.
WARC_MAX_SIZE = 1_000_000_000
# The SQLite index of the payload digests archived, which makes a payload archived before a
# small revisit record instead of a second copy; empty: JOBDIR/warc-digests.sqlite, else
# beside the crawl database, else WARC_DIR/digests.sqlite (so the next crawl into the same
# directory revisits).
WARC_DIGEST_PATH = ""
# A metadata record per page beside its response (outlinks, fetch time, delay, near-duplicate
# verdict); off: requests and responses only.
WARC_METADATA = True
# Write a CDXJ index of the crawl's files into WARC_DIR when the crawl ends (cdxj-indexer), which
# replay tools (pywb) read; off: none.
WARC_CDXJ = True
# A WACZ package (WARC files, CDXJ index, pages, manifest: crawler/archive/wacz.py) of the
# crawl's files when it ends, beside them. Off: it is a copy of every file written (`scrapy wacz
# DIR` packages a directory, e.g. a fleet's or several crawls', whenever wanted).
WARC_WACZ = False

__all__ = [name for name in list(globals()) if name.isupper()]
