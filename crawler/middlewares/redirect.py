"""Redirects, with the ones that are dropped said out loud.

Scrapy's ``RedirectMiddleware`` drops a request after ``REDIRECT_MAX_TIMES`` hops with a DEBUG
line only. Here a chain over the limit is counted in ``limits/redirects`` and a loop (a
redirect back to a URL of the same chain) in ``limits/redirect_loop``, each with one INFO line
per host; a loop is cut at once rather than followed round until the limit.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.exceptions import IgnoreRequest

from crawler.limits import limit_log


class CountingRedirectMiddleware(RedirectMiddleware):
    """Replaces Scrapy's ``RedirectMiddleware`` at the same order (600)."""

    def _redirect(self, redirected: Request, request: Request, reason: Any) -> Request:
        log = limit_log(self.crawler)
        chain = [*request.meta.get("redirect_urls", []), request.url]
        if redirected.url in chain:
            log.fire(  # said of the URL the chain started from: the one a user would look up
                "redirect_loop",
                chain[0],
                f"redirects back to {redirected.url} after {len(chain)} hops",
            )
            raise IgnoreRequest("redirect loop")
        try:
            return super()._redirect(redirected, request, reason)
        except IgnoreRequest:
            log.fire(
                "redirects",
                chain[0],
                f"more than {self.max_redirect_times} redirects (REDIRECT_MAX_TIMES), "
                f"the last to {redirected.url}",
            )
            raise
