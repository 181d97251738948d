"""Where every Redis user of a crawl gets its client: built from the crawl's settings as
scrapy-redis builds it (``REDIS_URL`` / ``REDIS_PARAMS``, ``rediss://`` for TLS), with the
password kept out of the URL, and the URL masked for messages.

One place, so the frontier, the robots.txt cache, the near-duplicate store, the heartbeats and
``scrapy frontier`` connect alike (and a cluster client, when there is one, is chosen here).
"""

from __future__ import annotations

import os
import socket

import redis
from scrapy.settings import BaseSettings
from scrapy_redis.connection import get_redis_from_settings

from crawler.config import defaults
from crawler.net.credentials import without_password


def redis_password(settings: BaseSettings) -> str | None:
    """The Redis password from ``REDIS_PASSWORD_FILE`` (a file's first line) or the environment
    variable named by ``REDIS_PASSWORD_ENV``, so it need not be in ``REDIS_URL``: scrapyd logs a
    job's arguments and ``ps`` shows a command line. None when neither is set."""
    path = settings.get("REDIS_PASSWORD_FILE", defaults.REDIS_PASSWORD_FILE)
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"REDIS_PASSWORD_FILE: cannot read {path}: {exc.strerror}") from None
    name = settings.get("REDIS_PASSWORD_ENV", defaults.REDIS_PASSWORD_ENV)
    if name:
        if name not in os.environ:
            raise ValueError(f"REDIS_PASSWORD_ENV: the environment has no variable {name}")
        return os.environ[name]
    return None


def redis_client(settings: BaseSettings) -> redis.Redis:
    """A client as scrapy-redis builds it from ``REDIS_URL`` / ``REDIS_PARAMS``, returning
    bytes (the frontier's entries are msgpack); the password, if it comes from a file or the
    environment (:func:`redis_password`), joins ``REDIS_PARAMS``."""
    password = redis_password(settings)
    if password is not None:
        settings = settings.copy()
        settings.frozen = False  # a copy of the crawl's (frozen) settings, for this client only
        settings.set(
            "REDIS_PARAMS", {**settings.getdict("REDIS_PARAMS"), "password": password}, "cmdline"
        )
    client = get_redis_from_settings(settings)
    if client.get_connection_kwargs().get("decode_responses"):
        raise ValueError("REDIS_PARAMS: decode_responses must be off for the Redis frontier")
    return client


def safe_url(settings: BaseSettings) -> str:
    """``REDIS_URL`` without its password, for messages and logs."""
    url = settings.get("REDIS_URL") or (
        f"redis://{settings.get('REDIS_HOST') or 'localhost'}:{settings.get('REDIS_PORT') or 6379}"
    )
    return without_password(url)


def worker_name() -> str:
    """This worker's name in leases and heartbeats: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"
