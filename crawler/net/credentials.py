"""Server URLs as they may be shown: in messages, logs and stats a password never appears."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["without_password"]


def without_password(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``scheme://user:***@host:port/...``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
