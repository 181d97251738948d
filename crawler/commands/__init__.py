"""The crawler's own scrapy commands (``COMMANDS_MODULE``), and what they share."""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TypeVar

from scrapy.commands import ScrapyHelpFormatter
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

_Run = TypeVar("_Run", bound=Callable[..., None])


def pipe_safe(run: _Run) -> _Run:
    """A command's ``run`` whose reader may go away: ``scrapy search ... | head`` closes the
    pipe after ten lines, and Python would end with a BrokenPipeError traceback (and another
    when it flushes stdout at exit). The output simply stops, as for any Unix tool."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            run(*args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:
            # stdout's remaining buffer would raise again at exit: point it at /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    return wrapper  # type: ignore[return-value]


# The settings that name a Redis server (scrapy-redis reads the last two when REDIS_URL is unset)
_REDIS_SERVER = ("REDIS_URL", "REDIS_HOST", "REDIS_PORT")


def given_settings(settings: BaseSettings) -> list[str]:
    """The settings the user set (``-s``, scrapyd's ``setting=``, a site config's
    ``[settings]``), not left at the project's default."""
    return [n for n in settings if settings.getpriority(n) > SETTINGS_PRIORITIES["project"]]


def redis_server_missing(settings: BaseSettings, given: list[str]) -> str:
    """A crawl on Redis (``FRONTIER_BACKEND=redis``) with no Redis named: scrapy-redis would
    use ``redis://localhost:6379`` silently, and a trial crawl filled another service's Redis
    that way. Refused, saying what to add; "" when a server is named or the backend is not
    Redis."""
    if str(settings.get("FRONTIER_BACKEND") or "").lower() != "redis":
        return ""
    if any(name in given for name in _REDIS_SERVER):
        return ""
    return (
        "FRONTIER_BACKEND=redis needs the crawl's Redis: add -s REDIS_URL=redis://HOST:6379/0 "
        "(there is no default server)"
    )


class ParagraphHelpFormatter(ScrapyHelpFormatter):
    """Scrapy's help layout, with a command's long description kept in its paragraphs and
    ``* `` items (argparse refills the whole description into one block of text)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for paragraph in re.split(r"\n\s*\n", text.strip()):
            lines = []
            for item in re.split(r"\n\s*(?=\* )", paragraph):
                words = " ".join(item.split())
                hang = "  " if words.startswith("* ") else ""
                lines.append(textwrap.fill(
                    words, width, initial_indent=indent, subsequent_indent=indent + hang
                ))
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)


def keep_paragraphs(parser: argparse.ArgumentParser) -> None:
    """Show ``parser``'s description as :class:`ParagraphHelpFormatter` lays it out (called
    from a command's ``add_options``: Scrapy makes the parser)."""
    parser.formatter_class = ParagraphHelpFormatter


def counted(count: int, noun: str, plural: str = "") -> str:
    """``1 worker``, ``2 workers``, ``0 workers``: a count with its noun agreeing."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {plural or noun + 's'}"
