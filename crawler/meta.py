"""``Request.meta`` keys that more than one component reads, defined once so that components
need not import each other for a string (the robots middleware must not import the scheduler).
"""

LEASE_META = "frontier_lease"  # set by the frontier scheduler on every request it hands out
ROBOTS_META = "robotstxt_for"
# set by the download handler on a request whose download a stop (crawl_stopping) cut short
STOPPED_META = "download_stopped"  # on a robots.txt request: the origin it is for
