"""``scrapy crawl``, with the checks that must refuse a crawl before it starts.

Scrapy's own command, plus a preflight: an unknown site (the sites are listed), a setting of
ours with a value it cannot take (named as the user wrote it: ``-s``, a site config's
``[settings]``, or scrapyd's ``setting=``; read by the settings schema, crawler/config/schema.py,
and the values read put back, so a component sees ``'["a", "b"]'`` given for a list setting as
that list and ``TRUE`` as a boolean), a malformed ``ALLOWED_NETWORKS`` entry, and the
frontier store the settings choose (``FRONTIER_BACKEND``) may refuse the crawl, e.g. a
shared store whose server is unreachable or whose stored crawl was made with other politeness
settings; a ``REDIS_URL`` given without ``FRONTIER_BACKEND`` (the scrapy-redis way of starting
a worker, which here would crawl alone). A refusal is one clear line and exit status 2, before
any request goes out; so is a name
that looks like a setting of ours but is none, with where it was given and the closest real name.

Each line goes to stderr and, when ``LOG_FILE`` is set (scrapyd sets it), to the log too, so a
scrapyd job's log says why the job ended.

A stop (Ctrl-C, scrapyd's cancel) that arrives while the crawl is still starting (the spider
and the frontier opening, which with Redis takes a few round trips) waits until the engine
runs and then stops it the normal way: Scrapy's own stop does nothing before that and stops
the reactor under the opening crawl, so no stats (no ``finish_reason``) were written and the
leases read ahead stayed taken until they expired. Once the crawl runs, a stop first cuts the
downloads in flight (``crawl_stopping``): Scrapy would wait for each, up to
``DOWNLOAD_TIMEOUT`` with a silent server; their leases go back to the frontier.

Below ``LOG_LEVEL=DEBUG``, Scrapy's start-up dump and its line per 404 are demoted to DEBUG
(:func:`quieter_start`): a crawl starts with a few lines, and the progress line is readable.

A SIGINT before Scrapy has installed its handlers (the first ~0.5 s, while Python imports it)
ends the process as any Python program: exit status 130, nothing sent, nothing leased, no
stats file.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.crawler import Crawler
from scrapy.exceptions import UsageError
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings, default_settings
from scrapy.utils.defer import maybe_deferred_to_future

from crawler import signals as crawler_signals
from crawler.backends.registry import backend_class
from crawler.commands import counted, given_settings, pipe_safe, redis_server_missing
from crawler.config.schema import check_settings
from crawler.net.addresses import policy_from_settings
from crawler.net.signatures import load_private_key
from crawler.sites import SeedsFileError, SiteConfigError, check_seeds_file
from crawler.sites.seeds import seeds_argument

logger = logging.getLogger(__name__)

# Setting names of the libraries under us, which are never "unknown".
_LIBRARY_SETTINGS = frozenset(name for name in dir(default_settings) if name.isupper())


class Command(ScrapyCrawlCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        if logging.getLevelName(str(self.settings.get("LOG_LEVEL") or "DEBUG")) > logging.DEBUG:
            quieter_start()

    @pipe_safe
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError(
                "give one site: scrapy crawl <site> (scrapy list shows the configured sites)"
            )
        assert self.crawler_process is not None
        site = args[0]
        try:
            crawler = self._create_crawler(site)
        except KeyError:
            sites = ", ".join(sorted(self.crawler_process.spider_loader.list())) or "none"
            self._say(f"crawl {site} refused: no site named {site!r}; the sites are: {sites}")
            self.exitcode = 2
            return
        except SiteConfigError as exc:
            # one line per problem, as for a setting (Scrapy's usage banner came first)
            for line in str(exc).splitlines():
                self._say(f"crawl {site} refused: {line}")
            self.exitcode = 2
            return
        problems = self._preflight(crawler, opts.spargs)
        if problems:
            for problem in problems:
                self._say(f"crawl {site} refused: {problem}")
            self.exitcode = 2
            return
        _stop_once_started(crawler)
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
            return
        stats = crawler.stats.get_stats()
        note = already_finished(stats, crawler.settings, site)
        if note:
            self._say(f"crawl {site}: {note}", logging.WARNING)
        self.exitcode = crawl_exit_status(stats)

    def _preflight(self, crawler: Crawler, spargs: dict[str, str]) -> list[str]:
        settings = crawler.settings
        given = given_settings(settings)
        where = lambda name: given_with(settings, name)  # noqa: E731
        found = check_settings(settings, settings.get, _LIBRARY_SETTINGS, given, where=where)
        if found.problems:
            return found.problems
        alone = _redis_url_alone(settings, given) or redis_server_missing(settings, given)
        if alone:
            return [alone]
        self._put_back(found.values, crawler)
        unknown = unknown_arguments(spargs)
        if unknown:
            return unknown
        site = getattr(crawler.spidercls, "site", None)
        try:
            seeds_file = getattr(site, "seeds_file", None)
            if seeds_file:
                check_seeds_file(os.path.abspath(os.path.expanduser(seeds_file)))
            if "seeds" in spargs:
                seeds_argument(spargs["seeds"])
        except SeedsFileError as exc:
            return [str(exc)]
        try:
            policy_from_settings(settings)
            if settings.get("SIGNATURE_KEY_FILE"):  # KeyFileError names the file, not its bytes
                load_private_key(os.path.expanduser(settings.get("SIGNATURE_KEY_FILE")))
            store = backend_class(settings, "frontier_store")
            return list(store.preflight(crawler)) if hasattr(store, "preflight") else []
        except ValueError as exc:  # BackendError too
            return [str(exc)]

    def _put_back(self, values: Mapping[str, Any], crawler: Crawler) -> None:
        """Our settings given as text (``-s``, scrapyd) replaced by their values as read, in the
        crawler's settings and in the process's, which Scrapy merges into them again when the
        crawl starts."""
        assert self.crawler_process is not None
        for name, value in values.items():
            text = crawler.settings.get(name)
            if not isinstance(text, str) or text == value:
                continue
            for settings in (crawler.settings, self.crawler_process.settings):
                if settings.get(name) == text:
                    settings.set(name, value, priority=settings.getpriority(name) or 0)

    def _say(self, line: str, level: int = logging.ERROR) -> None:
        print(line, file=sys.stderr)
        settings: BaseSettings | None = self.settings
        if settings is not None and settings.get("LOG_FILE"):
            logger.log(level, line)


# Scrapy's INFO lines that drown the progress line: its start-up dump (versions, add-ons, every
# component enabled, the settings overridden: ~75 lines before the first useful one) and one
# line per 404 (the broken links are in the summary and the stats file). Shown at DEBUG.
_DEMOTED = {
    "scrapy.utils.log": ("Versions:",),
    "scrapy.addons": ("Enabled addons",),
    "scrapy.middleware": ("Enabled ",),
    "scrapy.crawler": ("Overridden settings",),
    "scrapy.spidermiddlewares.httperror": ("Ignoring response",),
}


class _Demote(logging.Filter):
    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and str(record.msg).startswith(self.prefixes):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def given_with(settings: BaseSettings, name: str) -> str:
    """Where a setting came from, as a refusal names it: the command line (``-s``, which is
    also how scrapyd passes its ``setting=``), or the settings module. A site config's
    ``[settings]`` are checked, with the file's name, when the site is loaded."""
    priority = settings.getpriority(name) or 0
    if priority >= SETTINGS_PRIORITIES["cmdline"]:
        return " (given with -s or scrapyd's setting=)"
    if priority >= SETTINGS_PRIORITIES["project"]:
        return " (in the settings module)"
    return ""


def quieter_start() -> None:
    """Demote :data:`_DEMOTED` to DEBUG (a record whose level drops below the handler's is
    not written): at ``LOG_LEVEL=INFO`` a crawl starts with a few lines."""
    for name, prefixes in _DEMOTED.items():
        log = logging.getLogger(name)
        if not any(isinstance(f, _Demote) for f in log.filters):
            log.addFilter(_Demote(prefixes))


def _redis_url_alone(settings: BaseSettings, given: list[str]) -> str:
    """A ``REDIS_URL`` given without choosing the frontier backend: with scrapy-redis that
    alone makes a shared crawl, here the frontier would stay in this process and each worker
    would crawl everything alone, silently. Refused, saying what to add (the rule: the
    frontier backend is chosen by ``FRONTIER_BACKEND``, never guessed from ``REDIS_URL``)."""
    if "REDIS_URL" not in given or "FRONTIER_BACKEND" in given or "BACKEND_CLASSES" in given:
        return ""
    return (
        "REDIS_URL is given but FRONTIER_BACKEND is not: this worker would crawl alone, "
        "its frontier in memory. Add -s FRONTIER_BACKEND=redis to share the crawl in Redis "
        "(or -s FRONTIER_BACKEND=memory to crawl alone)"
    )


# The spider arguments a site takes (``-a NAME=VALUE``); scrapyd adds its own, named ``_job``
# and so on: any name starting with "_" is the scheduler's, never the user's.
SPIDER_ARGUMENTS = ("seeds",)


def unknown_arguments(spargs: Mapping[str, str]) -> list[str]:
    """One problem per ``-a`` argument no site takes, with the closest real one: Scrapy would
    set it on the spider and go on, so ``-a seed=...`` or ``-a url=...`` crawled without the
    seeds the user meant."""
    problems = []
    for name in spargs:
        if name in SPIDER_ARGUMENTS or name.startswith("_"):
            continue
        close = difflib.get_close_matches(name, SPIDER_ARGUMENTS, n=1, cutoff=0.5)
        hint = f"did you mean -a {close[0]}=?" if close else "the arguments are: " + ", ".join(
            f"-a {a}=" for a in SPIDER_ARGUMENTS
        )
        problems.append(
            f"unknown spider argument -a {name}=; {hint} (-a seeds= takes a URL, several "
            "separated by commas, or a seeds file)"
        )
    return problems


def already_finished(stats: Mapping[str, Any], settings: BaseSettings, site: str) -> str:
    """What to say when a kept crawl (a JOBDIR, a crawl in Redis) is run again after it had
    finished: nothing was left, so nothing went out (not even a robots.txt request), yet the
    frontier knew URLs. It printed "0 pages OK" and ended with status 0, as if it had crawled;
    now it says so and how to start afresh. "" for any other crawl."""
    if stats.get("finish_reason") != "finished" or stats.get("downloader/request_count"):
        return ""
    seen = stats.get("frontier/seen", 0)
    if not seen:
        return ""
    urls = counted(seen, "URL")
    backend = str(settings.get("FRONTIER_BACKEND") or "").lower()
    jobdir = settings.get("JOBDIR")
    if backend == "redis":
        from crawler.backends.redis.connection import safe_url

        key = settings.get("FRONTIER_REDIS_KEY") or site
        return (
            f"nothing left to fetch: crawl {key!r} in Redis at {safe_url(settings)} had already "
            f"finished ({urls} seen). To crawl it afresh, add -s FRONTIER_RESET=True "
            "(deletes that crawl's state), or start another: -s FRONTIER_REDIS_KEY=NAME"
        )
    if jobdir:
        return (
            f"nothing left to fetch: the crawl kept in JOBDIR {jobdir} had already finished "
            f"({urls} seen). To crawl afresh, give another JOBDIR or delete {jobdir}"
        )
    return ""


def crawl_exit_status(stats: Mapping[str, Any]) -> int:
    """2: there was nothing to crawl (no valid seed, nothing due, nothing fetched) or the shared
    frontier refused the crawl (stored by another version, other settings: what to do is in
    the log); 1: pages were asked for but every one failed (unreachable hosts, robots.txt
    never answering); else 0.

    A worker joining a shared crawl (or resuming a JOBDIR) has no seeds of its own but works on
    a frontier that knows the crawl's URLs, so it ends with 0, even when nothing was left to
    fetch; so does a crawl stopped (Ctrl-C) before its first page. The status of a shared
    crawl's worker is the crawl's: one whose own partitions held only failing hosts ends with
    0 when the crawl fetched pages (``fleet/pages``, read from the crawl's totals at its end).
    """
    if stats.get("finish_reason") == "frontier_refused":
        return 2  # refused once the frontier opened, as a setting is refused before
    # Pages answered (any status), robots.txt apart: the summary's tally (pages/status/<code>),
    # else Scrapy's count (robots.txt answers stay inside the robots.txt middleware).
    tallied = [v for k, v in stats.items() if k.startswith("pages/status/")]
    pages = sum(tallied) if tallied else stats.get("response_received_count", 0)
    if pages > 0 or stats.get("fleet/pages", 0) > 0:
        return 0
    if stats.get("seeds/none") and not stats.get("frontier/seen"):
        return 2  # no seed, and no crawl to join or resume (a frontier that knows no URL)
    if stats.get("finish_reason") == "shutdown":
        return 0  # stopped (Ctrl-C, scrapyd's cancel) before any page came: not a failure
    failed = stats.get("downloader/exception_count", 0) or stats.get("robotstxt/unreachable", 0)
    return 1 if failed else 0


_START_WAIT = 120.0  # seconds a stop waits at most for the opening crawl to run


def _stop_once_started(crawler: Crawler) -> None:
    """Make a stop that arrives while the crawl opens wait for the engine to run, then stop
    it as usual (spider closed with "shutdown", leases handed back, stats written), having
    first cut the downloads in flight (``crawl_stopping``)."""
    scrapy_stop = crawler.stop_async

    async def stop_async() -> None:
        from twisted.internet import reactor
        from twisted.internet.task import deferLater

        waited = 0.0
        while crawler.crawling and not _engine_running(crawler) and waited < _START_WAIT:
            if waited == 0.0:
                logger.info("Stop asked while the crawl is starting: stopping once it runs")
            await maybe_deferred_to_future(deferLater(reactor, 0.05, lambda: None))
            waited += 0.05
        if crawler.crawling:
            # downloads in flight are cut and their leases handed back, rather than waited
            # for (up to DOWNLOAD_TIMEOUT with a silent server)
            await crawler.signals.send_catch_log_async(crawler_signals.crawl_stopping)
        await scrapy_stop()

    crawler.stop_async = stop_async  # type: ignore[method-assign]


def _engine_running(crawler: Crawler) -> bool:
    engine: Any = getattr(crawler, "_engine", None)
    return bool(engine is not None and engine.running)
