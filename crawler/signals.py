"""Signals of our own, sent through Scrapy's signal manager.

Signals notify; they never ask. No receiver's return value is read: a component that needs an
answer from another calls it (found with ``crawler.get_extension()`` or built from settings).
"""

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

# Sent by the scheduler the first time it admits a URL of an origin (scheme://host:port),
# before that URL is queued: origin_discovered(origin: str, host: str). A receiver that needs
# requests before the host's pages (robots.txt) schedules them at once with
# ``crawler.engine.crawl(request)`` and ``request.meta["frontier_first"] = True``: the frontier
# hands out nothing else of that host until they complete, under the host's politeness.
origin_discovered = object()

# Sent by the scheduler before a batch's ``origin_discovered`` signals (a batch of seeds, a
# page's links), with every origin it is about to announce: origins_discovering(origins:
# list[str]). A receiver may read what it needs of them at once (the robots.txt fetcher reads
# their cached copies in one round trip); each origin is still announced on its own after.
origins_discovering = object()

# Sent by whoever learns a host's robots.txt Crawl-delay; the scheduler applies it.
# host_crawl_delay(host: str, delay: float | None)
host_crawl_delay = object()

# Sent by the robots.txt fetcher once per origin and crawl, when the origin's robots.txt rules are
# known (fetched, cached, or read by another worker): robots_sitemaps(origin: str, host: str,
# urls: list[str]), the sitemaps its ``Sitemap:`` lines name (maybe none). Sent while the host's
# next requests can still be put first (``frontier_first``): the sitemap reader does so.
robots_sitemaps = object()

# Sent by a site spider for a page whose head names feeds (``<link rel="alternate"
# type="application/rss+xml">``, Atom, RDF), unless the page says nofollow:
# feeds_found(response, urls: list[str]) (absolute, in page order). The sitemap reader reads each
# feed once per crawl as a sitemap of the page's host.
feeds_found = object()

# Sent by the sitemap reader for a due page whose sitemap ``<lastmod>`` is not after its last
# fetch, instead of asking the server (a conditional GET): page_unchanged(request). The crawl
# database records it as not modified, so it comes back when due again.
page_unchanged = object()

# Sent by whoever needs a host left alone for a while (robots.txt unavailable for now): the
# frontier hands out nothing of it for ``seconds``; its URLs stay queued.
# host_hold(host: str, seconds: float)
host_hold = object()

# Sent by the scheduler once its frontier is open, before any request is enqueued.
# frontier_opened(frontier: crawler.frontier.Frontier, spider)
# A crawl database uses it to mark URLs it already fetched and that are not due as seen.
frontier_opened = object()

# Sent by a spider once per page with the page's links (absolute http(s) URLs, fragments
# removed, in page order), only in a crawl whose scheduler announced a frontier
# (``frontier_opened``): links_extracted(response, urls: list[str], spider, demote: int,
# forms: dict[str, LinkForm] | None). ``demote``: levels of depth to add (a near-duplicate
# page's links); ``forms``: the stateless part of taking the links (canonical form, host,
# fixed filters: ``crawler.frontier.urls.UrlPolicy.link_form``), made on the content thread
# (None: not prepared). The frontier scheduler takes them in bulk. Without a frontier the
# spider yields Requests instead (``crawler.spiders.links.follow_links``).
links_extracted = object()

# Sent by a site spider from its start() when the crawl's scheduler announced a frontier
# (``frontier_opened``): its seeds in batches, seeds_found(spider, seeds: list[tuple[str, str]])
# of (url, where it came from), as given; the scheduler checks and queues them in bulk
# (``crawler.scheduler.intake``), no Request per seed.
seeds_found = object()

# Sent by a site spider from its start() once every one of its seeds is scheduled:
# seeds_scheduled(spider, urls: list[str]) (the valid seeds it made Requests of, as given; seeds
# in bulk went by ``seeds_found`` and are not listed again, so a worker never keeps a list of a
# seeds file's millions of URLs). A receiver with start
# requests that must come after the seeds (the recrawl extension's due pages: the seeds admit
# their hosts into a seed-scoped site) schedules them at once with ``crawler.engine.crawl()``.
seeds_scheduled = object()

# Sent by the recrawl extension when its crawl database is open (at spider_opened), so other
# components (conditional GET) read it without importing the extension: crawldb_opened(db).
crawldb_opened = object()

# Sent by whoever has to drop requests it could not fetch this crawl (robots.txt unreachable
# after every retry): requests_unfetched(requests: list[Request]). A crawl database keeps
# them for a later crawl (the recrawl extension, as due URLs) and says so in the log.
requests_unfetched = object()

# Sent by the near-duplicate judge when a host's duplicate penalty changes:
# host_penalty_changed(host: str, levels: int), how many front queues lower the host's URLs
# go from now on (0: none). The scheduler's prioritizer applies it.
host_penalty_changed = object()

# Sent by the scheduler when a lease's host has no known address (politeness per server
# address waits for it): host_address_wanted(host: str). The DNS middleware resolves it and
# answers with host_resolved.
host_address_wanted = object()

# Sent by the DNS middleware whenever a host's address is learnt or changes:
# host_resolved(host: str, address: str), "" when the name did not resolve.
host_resolved = object()

# Sent by the scheduler after the frontier completed a fetch, with what the frontier applied:
# fetch_completed(request, host: str, delay: float | None, outcome: crawler.frontier.Outcome),
# ``delay`` the politeness rest of the host's slot after this fetch (None: the fetch never
# reached the network and moved no time). The one source of "the delay applied" for the
# crawl record, the report and the per-host tally.
fetch_completed = object()
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

# Sent by the soft-404 probe middleware when a host's probe (a path that cannot exist) was
# answered: soft404_probed(origin: str, answer: crawler.content.soft404.Answer). The soft-404
# pipeline judges that origin's pages against it.
soft404_probed = object()
