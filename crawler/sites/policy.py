"""A crawl's URL policy (scope, URL filters, trap budgets), built from its site config and
settings: the scheduler admits links by it, and the content analysis prepares a page's links with
the same policy on the content thread."""

from __future__ import annotations

from typing import Any

from crawler.config import defaults
from crawler.config.typed import FeatureConfig, knob, setting
from crawler.frontier.policies import PolicyBook, book_from_config
from crawler.frontier.urls import UrlPolicy, registered_domain_function

# Days ahead of today past which a date in a URL (/2031/04) marks an event calendar's trap:
# three years holds every real schedule of events, and a calendar walked a month a page stops
# after 36 pages. Not a setting: no crawl needs to follow calendars further.
DATE_FUTURE_DAYS = 1095


class TrapBudgets(FeatureConfig):
    """The spider-trap budgets of a crawl's URL policy (a site config sets the settings in its
    ``[settings]`` table); the date window back is a ``TUNING`` knob, which tests shorten."""

    max_query_variants: int = setting("URL_MAX_QUERY_VARIANTS")
    max_date_past_days: int = knob("url_date_past_days")
    max_hosts_per_domain: int = setting("URL_MAX_HOSTS_PER_DOMAIN")


def url_policy_for(spider: Any, settings: Any) -> UrlPolicy:
    """The URL policy of a site spider comes from its config; a plain spider is limited to its
    ``allowed_domains`` when it has them. The trap budgets are settings (a site config sets
    them in its ``[settings]`` table)."""
    traps = {
        **TrapBudgets.from_settings(settings).model_dump(),
        "max_date_future_days": DATE_FUTURE_DAYS,
    }
    site = getattr(spider, "site", None)
    if site is None:
        domains = tuple(getattr(spider, "allowed_domains", None) or ())
        return UrlPolicy(
            domains=domains,
            any_host=not domains,
            max_url_length=settings.getint("URL_MAX_LENGTH", defaults.URL_MAX_LENGTH),
            max_repeated_segments=settings.getint(
                "URL_MAX_REPEATED_SEGMENTS", defaults.URL_MAX_REPEATED_SEGMENTS
            ),
            **traps,
        )
    return UrlPolicy(
        hosts=site.scope.hosts,
        domains=site.scope.domains,
        any_host=site.scope.open,
        allow=site.allow,
        deny=site.deny,
        max_depth=site.max_depth,
        max_url_length=site.max_url_length,
        max_repeated_segments=site.max_repeated_segments,
        **traps,
    )


def policy_book_for(spider: Any, settings: Any) -> PolicyBook | None:
    """The crawl policies of a site (its ``[policies.NAME]`` tables) and the trusted and
    distrusted domain lists (``trusted_domains`` / ``distrusted_domains`` files of the site
    config, else the FRONTIER_TRUSTED_DOMAINS / FRONTIER_DISTRUSTED_DOMAINS settings); None
    when there are none."""
    site = getattr(spider, "site", None)
    policies = dict(getattr(site, "policies", None) or {})
    trusted = getattr(site, "trusted_domains", None) or settings.get(
        "FRONTIER_TRUSTED_DOMAINS", defaults.FRONTIER_TRUSTED_DOMAINS
    )
    distrusted = getattr(site, "distrusted_domains", None) or settings.get(
        "FRONTIER_DISTRUSTED_DOMAINS", defaults.FRONTIER_DISTRUSTED_DOMAINS
    )
    if not policies and not trusted and not distrusted:
        return None
    distrusted_policy = getattr(site, "distrusted_policy", "") or ""
    if distrusted and not distrusted_policy and "distrust" not in policies:
        policies["distrust"] = DISTRUST  # the built-in one, when the site defines none
    return book_from_config(
        policies,
        trusted_file=trusted or None,
        distrusted_file=distrusted or None,
        distrusted_policy=distrusted_policy,
        domain_of=registered_domain_function(private=True),
    )


# The distrust a distrusted domain gets when the site defines no policy of that name: its
# links carry a thousandth of the cash, halved again at every hop.
DISTRUST = {"multiplier": 0.001, "dampening": 0.5}
