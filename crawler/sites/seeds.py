"""Seeds files: one URL per line, read lazily (a million-line file is never held in memory),
from a folder or from inside a zipped scrapyd egg; and the check of one seed URL, shared by the
site-config schema and the spider so both refuse the same things."""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator
from importlib.resources.abc import Traversable
from typing import IO

from crawler.frontier.urls import url_problem
from crawler.sites.messages import SeedsFileError, display, show


def seed_url_problem(url: object) -> str | None:
    """What is wrong with ``url`` as a URL to fetch, or ``None`` if it is a usable http(s) URL.

    Shared by config validation and the spider's seeds files, so both refuse the same things;
    the verdict is the frontier's own (:func:`crawler.frontier.urls.url_problem`), so a seed is
    refused here exactly when the frontier would refuse it later.
    """
    if not isinstance(url, str):
        return f"must be a string, got {show(url)}"
    return url_problem(url)


def _zip_member(path: str) -> zipfile.Path | None:
    """``path`` as a member of a zip archive on the way (a seeds file inside a zipped egg)."""
    parent = os.path.dirname(path)
    inner = [os.path.basename(path)]
    while parent and parent != os.path.dirname(parent):
        if os.path.isfile(parent):
            if not zipfile.is_zipfile(parent):
                return None
            member = zipfile.Path(parent, at="/".join(reversed(inner)))
            return member if member.is_file() else None
        inner.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    return None


def _open_seeds(path: str | os.PathLike[str] | Traversable) -> IO[str]:
    """Open a seeds file for reading, raising :class:`SeedsFileError` naming it if we cannot."""
    shown = display(path)
    try:
        if not isinstance(path, (str, os.PathLike)):
            return path.open("r", encoding="utf-8-sig")
        try:
            return open(path, encoding="utf-8-sig")  # the caller closes it
        except (FileNotFoundError, NotADirectoryError):
            member = _zip_member(os.path.abspath(os.fspath(path)))
            if member is None:
                raise
            return member.open("r", encoding="utf-8-sig")
    except IsADirectoryError:
        raise SeedsFileError(shown, None, "cannot read seeds file: it is a directory") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SeedsFileError(shown, None, f"cannot read seeds file: {reason}") from None


_COMMENT = re.compile(r"\s+#")  # whitespace then "#": a comment follows


def check_seeds_file(path: str | os.PathLike[str] | Traversable) -> None:
    """Raise :class:`SeedsFileError` now if the seeds file cannot be opened or is not UTF-8.

    The crawl command calls this before the crawl starts, and the spider reads the file lazily
    later, so a million-line seeds file is never held in memory; reading it through once here
    means a bad byte on its last line stops the crawl before any request, like a missing file.
    """
    for _ in iter_seeds_file(path):
        pass


def iter_seeds_file(path: str | os.PathLike[str] | Traversable) -> Iterator[str]:
    """The URLs in a seeds file, one per line, in order, without validating them (see
    :func:`iter_seed_lines`)."""
    for url, _ in iter_seed_lines(path):
        yield url


def iter_seed_lines(path: str | os.PathLike[str] | Traversable) -> Iterator[tuple[str, str]]:
    """``(url, crawl policy)`` of each line of a seeds file: ``URL`` or ``URL POLICY`` (the
    name of one of the site's ``[policies]``, "" when not given), in order, not validated (a
    line of three words or more is one URL, reported invalid later).

    Blank lines and lines starting with ``#`` are skipped; so is anything after whitespace and
    a ``#`` on a line (a URL never contains whitespace, so that is a comment, not a fragment).
    """
    shown = display(path)
    with _open_seeds(path) as fh:
        try:
            for line in fh:
                url = line.strip()
                if not url or url.startswith("#"):
                    continue
                line = _COMMENT.split(url, maxsplit=1)[0] if "#" in url else url
                fields = line.split()
                # two fields: URL and policy; anything else is one (invalid) URL, as written
                yield (fields[0], fields[1]) if len(fields) == 2 else (line, "")
        except UnicodeDecodeError as exc:
            raise SeedsFileError(shown, None, f"seeds file is not UTF-8 text ({exc})") from None


# A URL starts with its scheme; several URLs are separated by whitespace or by a comma right
# before the next scheme (a comma inside a URL, as in ``?ids=1,2``, stays in it).
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL_SEPARATOR = re.compile(r"\s+|,\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def seeds_argument(value: str) -> tuple[list[str], str | None]:
    """What ``-a seeds=VALUE`` gives: ``(urls, None)`` for one URL or several (separated by
    commas or whitespace), or ``([], path)`` for a seeds file, its path made absolute (the
    message and the later read must not depend on a later chdir) and checked through now.

    A value starting with a scheme is URLs (a file is never named ``https://...``); the URLs are
    not validated here: each is checked, logged and counted as a seed like one from a file.
    Raises :class:`SeedsFileError` for an empty value or a file that cannot be read.
    """
    text = value.strip()
    if not text:
        raise SeedsFileError("-a seeds=", None, "the seeds argument names no URL and no file")
    if _URL_START.match(text):
        return [url for url in _URL_SEPARATOR.split(text) if url], None
    path = os.path.abspath(os.path.expanduser(text))
    try:
        check_seeds_file(path)
    except SeedsFileError as exc:
        if os.path.exists(path):
            raise
        hint = "-a seeds= takes a seeds file, or URLs with their scheme: https://..."
        raise SeedsFileError(exc.file, exc.key, f"{exc.problem} ({hint})") from None
    return [], path


def read_seeds_file(path: str | os.PathLike[str] | Traversable) -> list[str]:
    """All URLs of a seeds file (see :func:`iter_seeds_file`); raises :class:`SeedsFileError`."""
    return list(iter_seeds_file(path))
