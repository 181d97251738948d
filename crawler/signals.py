"""Signals of our own, sent through Scrapy's signal manager."""

# Sent by FrontierDownloader once per fetch, however it ended:
# fetch_finished(request, outcome: crawler.frontier.Outcome, duration: float | None,
#                response: the Response that goes on to the spider, or None,
#                followed_by: the Request that replaces this fetch (a retry, a redirect) or None,
#                status: the server's answer's status (also of a retry or redirect) or None,
#                size: its body's bytes as received)
fetch_finished = object()

# Sent by crawler.middlewares.lease.LeaseAckMiddleware when the spider's output for a page
# handed out by the frontier has ended (normally or with an error), with how many items it
# yielded: page_output_done(response, items: int).
page_output_done = object()

# Sent by the scheduler the first time it admits a URL of an origin (scheme://host:port).
# origin_discovered(origin: str, host: str) -> a Request, a list of Requests or None.
# Returned requests become the host's first requests: the frontier hands out nothing else of
# that host until they complete (how robots.txt is fetched before a host's pages, under the
# host's politeness).
origin_discovered = object()

# Sent by whoever learns a host's robots.txt Crawl-delay; the scheduler applies it.
# host_crawl_delay(host: str, delay: float | None)
host_crawl_delay = object()

# Sent by whoever needs a host left alone for a while (robots.txt unavailable for now): the
# frontier hands out nothing of it for ``seconds``; its URLs stay queued.
# host_hold(host: str, seconds: float)
host_hold = object()

# Sent by the scheduler once its frontier is open, before any request is enqueued.
# frontier_opened(frontier: crawler.frontier.Frontier, spider)
# A crawl database uses it to mark URLs it already fetched and that are not due as seen.
frontier_opened = object()

# Sent by the site spider once per page with the page's links (absolute http(s) URLs,
# fragments removed, in page order): links_extracted(response, urls: list[str], spider,
# demote: int, forms: dict[str, LinkForm] | None), ``demote`` being what
# ``link_demotion_wanted`` answered for the page, ``forms`` what ``link_preparer_wanted``'s
# callable made of the links on the content thread (None: not prepared).
# The frontier scheduler takes them in bulk and returns True; if no receiver returns True the
# spider yields Requests instead (another scheduler is in use).
links_extracted = object()

# Asked by the site spider on the reactor thread before it hands a page to the content thread:
# link_preparer_wanted() -> a callable ``prepare(urls: list[str]) -> dict[str, LinkForm]``
# (see ``crawler.frontier.urls.UrlPolicy.link_form``), safe to call on another thread. The
# spider calls it there with the page's links and passes the answer on as
# ``links_extracted``'s ``forms=``, so the reactor does only the stateful part of taking the
# links (scope, trap budgets, seen-test, queue). The frontier scheduler answers.
link_preparer_wanted = object()

# Sent by the recrawl extension when its crawl database is open (at spider_opened), so other
# components (conditional GET) read it without importing the extension: crawldb_opened(db).
crawldb_opened = object()

# Sent by whoever has to drop requests it could not fetch this crawl (robots.txt unreachable
# after every retry): requests_unfetched(requests: list[Request]) -> True when a receiver
# kept them for a later crawl (the recrawl extension, as due URLs in the crawl database).
requests_unfetched = object()

# Sent by the scheduler when it opens its prioritizer: host_penalty_wanted() -> a callable
# ``penalty(host) -> int`` (front queues to push the host's URLs down), or None. The
# near-duplicate pipeline answers with its per-host duplicate penalty.
host_penalty_wanted = object()

# Sent by the site spider for a page item before it hands the page's links on (the pipelines
# judge the item only after its links are queued): link_demotion_wanted(item) -> int, how many
# levels of depth to add to the page's links (with the depth priority policy, that many front
# queues lower, and the site's max_depth reached that much sooner). The near-duplicate
# pipeline answers: it judges the item then, and a duplicate page's links go
# NEARDUP_LINK_DEMOTION deeper, so a trap of look-alike pages (a calendar) ends in a few hops.
link_demotion_wanted = object()
# Sent by the crawl command when a stop begins (Ctrl-C, SIGTERM, scrapyd's cancel), before
# Scrapy's own stop: crawl_stopping(). Scrapy's stop waits for every download in flight, up to
# DOWNLOAD_TIMEOUT with a silent server; the download handler cuts them instead (their requests
# get ``meta[STOPPED_META]`` and fail with ``StoppedAtShutdown``) and the scheduler hands their
# leases back to the frontier, so a resumed crawl or another worker fetches them.
crawl_stopping = object()

# Sent by the scheduler for each URL the frontier refused only because its host's page budget
# (max_pages_per_host) is used up: url_over_budget(url: normalized URL, depth: int). The
# budget extension keeps it for a rerun with a larger budget.
url_over_budget = object()
