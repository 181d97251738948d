"""What a sitemap's ``<lastmod>`` says about a page the crawl fetched before.

The recrawl otherwise asks every due page again (a conditional GET each): a sitemap that says
when each page last changed answers that question for the whole site in one file. A page whose
``lastmod`` is not after its last fetch is UNCHANGED: it is not asked until it is due again (the
crawl records the sitemap's word as it records a ``304``). A page whose ``lastmod`` is after its
last fetch is CHANGED: it is asked now, due or not. A ``lastmod`` that cannot be read, or lies
in the future, says nothing (UNKNOWN): the page is left to its schedule.
"""

from __future__ import annotations

from datetime import UTC, datetime

NEW = "new"  # the crawl database has never fetched the page
UNKNOWN = "unknown"  # no usable lastmod: the page keeps its schedule
UNCHANGED = "unchanged"  # lastmod <= last fetch: not asked until due again
CHANGED = "changed"  # lastmod > last fetch: asked now

_FUTURE_SLACK = 86400.0  # a lastmod up to a day ahead (time zones, clocks) is taken as now


def parse_lastmod(value: str | None) -> float | None:
    """Epoch seconds of a W3C Datetime (``2024``, ``2024-05``, ``2024-05-17``,
    ``2024-05-17T10:00:00+02:00``, ``...Z``), or None. No zone: UTC."""
    if not value:
        return None
    text = value.strip().upper()  # "t" and "z" are ISO 8601's too
    if len(text) == 4 and text.isdigit():
        text += "-01-01"
    elif len(text) == 7 and text[4] == "-":
        text += "-01"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def decide(lastmod: float | None, fetched_at: float | None, now: float) -> str:
    """NEW, UNKNOWN, UNCHANGED or CHANGED for a page last fetched at ``fetched_at`` (None:
    never) whose sitemap entry says ``lastmod``."""
    if fetched_at is None:
        return NEW
    if lastmod is None or lastmod > now + _FUTURE_SLACK:
        return UNKNOWN
    return CHANGED if lastmod > fetched_at else UNCHANGED
