"""The robots.txt product token: the name a site's robots.txt calls the crawler by, taken from
``ROBOTSTXT_USER_AGENT`` or ``USER_AGENT``, and the check that it can name the crawler at all.

A leaf of the bottom layer (the settings check before a crawl and the robots.txt parser both use
it), free of Scrapy.
"""

from __future__ import annotations

import re

# RFC 9309 2.2.1 allows only letters, "_" and "-" in a product token; real crawlers and the
# robots.txt files naming them also use digits and dots (MJ12bot, 360Spider, Mail.RU_Bot), so a
# token is the leading run of these, as sites write it: "MJ12bot/1.4" is "mj12bot", not "mj".
_TOKEN = re.compile(r"[A-Za-z0-9_.-]*")

#: Tokens that name a browser, not a crawler: no robots.txt group addresses a crawler by them.
BROWSER_TOKENS = frozenset({"mozilla"})


def product_token(text: str | None) -> str:
    """The product token of a User-Agent header or of a robots.txt ``User-agent`` value,
    lower-cased for the case-insensitive match RFC 9309 asks: ``MJ12bot/1.4 (+url)`` ->
    ``mj12bot``, ``FOO BAR`` -> ``foo``, ``crawler-bot; x`` -> ``crawler-bot``.

    ``*`` is the wildcard when no token character follows it (``* any`` too); text that starts
    with no token character (``*bot``, a non-ASCII name) gives "", which names no crawler.
    """
    text = (text or "").strip()
    if text[:1] == "*":
        return "" if _leading_token(text, 1) else "*"
    return _leading_token(text).lower()


def _leading_token(text: str, start: int = 0) -> str:
    match = _TOKEN.match(text, start)
    return match.group() if match else ""


def crawler_token(user_agent: str | None, robots_user_agent: str | None = None) -> str:
    """The token the crawler matches robots.txt groups with: that of ``ROBOTSTXT_USER_AGENT``
    when set, else that of ``USER_AGENT``; ``*`` (only the groups for every crawler) when
    neither gives one."""
    return product_token(robots_user_agent or user_agent) or "*"


def agent_problem(user_agent: str | None, robots_user_agent: str | None = None) -> str | None:
    """Why the crawler cannot obey robots.txt with these settings (one ``NAME: problem``
    line), or None.

    ``ROBOTSTXT_USER_AGENT`` is the product token itself: a value that is not one (empty, with
    a space, a version, a ``*``, a non-ASCII name) is refused rather than cut to its leading
    token, as Google's parser refuses such a name to obey (``IsValidUserAgentToObey``). A
    ``USER_AGENT`` is a header, read for its first product token, which must exist and must
    not be a browser's: ``Mozilla/5.0 ...`` gives ``mozilla``, and a site's
    ``User-agent: ourbot`` group would never apply, so the crawl is refused rather than run
    under rules meant for nobody."""
    fix = " set ROBOTSTXT_USER_AGENT to the crawler's own name (-s ROBOTSTXT_USER_AGENT=mybot)"
    if robots_user_agent is not None:
        token = product_token(robots_user_agent)
        if token in ("", "*") or token != robots_user_agent.lower():
            return (
                f"ROBOTSTXT_USER_AGENT: {robots_user_agent!r} is not a product token (letters,"
                " digits, '_', '-' and '.', as robots.txt groups name a crawler):" + fix
            )
        return None
    if user_agent is None:
        return None  # not set: Scrapy's own names the crawler
    token = product_token(user_agent)
    if token in ("", "*"):
        return (
            f"USER_AGENT: {user_agent!r} starts with no product token, so no robots.txt"
            " group can address this crawler;" + fix
        )
    if token not in BROWSER_TOKENS:
        return None
    return (
        f"USER_AGENT: its robots.txt product token is {token!r}, a browser's name, so no"
        " robots.txt group can address this crawler;" + fix
    )
