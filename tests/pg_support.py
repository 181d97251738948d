"""A real PostgreSQL for tests: a fresh database per test on the server at 127.0.0.1:5432
(``TEST_POSTGRES_URL`` names another), dropped afterwards.

Use it with ``from tests.pg_support import pg_url  # noqa: F401`` and ask for ``pg_url`` (the
``postgresql://`` URL of the new database). Without a server the tests that need it are
skipped with the reason, except under CI (``CI=true``), where that is a failure: CI must not go
green by testing nothing.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> psycopg.Connection:  # type: ignore[type-arg]
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL is not reachable at {ADMIN_URL}: {str(exc).splitlines()[0]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": required under CI")
        pytest.skip(message)


def create_database() -> str:
    """A new, empty database; its URL."""
    name = "crawler_test_" + uuid.uuid4().hex[:12]
    with _admin() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit(urlsplit(ADMIN_URL)._replace(path="/" + name))


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with _admin() as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)
