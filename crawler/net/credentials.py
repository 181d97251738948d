"""Server URLs as they may be shown: in messages, logs and stats a password never appears, and
for a server whose user names are secrets too (a Redis ACL user), no user name either."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["without_credentials", "without_password"]


def without_password(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``scheme://user:***@host:port/...``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return _with_userinfo(url, f"{parts.username or ''}:***")


def without_credentials(url: str) -> str:
    """``url`` with its user and password, if any, replaced by ``***``
    (``scheme://***@host:port/...``): a user name is half of a login, which an attacker who
    reads a log should have to guess."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return _with_userinfo(url, "***")


def _with_userinfo(url: str, userinfo: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    netloc = f"{userinfo}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
