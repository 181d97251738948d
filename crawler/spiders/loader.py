"""The spider loader (``SPIDER_LOADER_CLASS``): one spider per site config in ``crawler/sites/``.

Users add a site by adding a TOML file, not by writing a spider class. A broken config must not
hide the good ones (``scrapy list`` warns and lists the rest) but must stop a crawl of that site
before any request (``load`` raises the :class:`~crawler.sites.SiteConfigError`).

The ``SITES_DIR`` setting points the loader at another folder of configs (tests, or configs kept
outside the egg on a server); by default it reads the ``crawler.sites`` package.
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError
from scrapy.spiderloader import SpiderLoader

from crawler.sites import SiteConfig, SiteConfigError, load_all_sites
from crawler.spiders.site import SiteSpider

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


class InvalidSiteConfig(SiteConfigError, UsageError):
    """The :class:`SiteConfigError` that :meth:`SiteSpiderLoader.load` raises.

    Also a :class:`~scrapy.exceptions.UsageError`, so ``scrapy crawl bad`` (and scrapyd's runner)
    ends with ``crawl: error: <file>: <key>: <problem>`` and exit status 2 instead of a traceback.
    """

    def __init__(
        self,
        file: str,
        key: str | None,
        problem: str,
        more: Iterable[tuple[str | None, str]] = (),
    ) -> None:
        super().__init__(file, key, problem, more)
        self.print_help = False  # UsageError's flag; the usage text would bury the message


class SiteSpiderLoader:
    """Implements Scrapy's ``SpiderLoaderProtocol`` over the site configs.

    Ordinary spider classes in ``SPIDER_MODULES`` are still loaded (through Scrapy's own
    :class:`SpiderLoader`), so a hand-written spider keeps working; a site config with the same
    name wins, with a warning.
    """

    def __init__(self, settings: BaseSettings) -> None:
        self.sites_dir: str | None = settings.get("SITES_DIR") or None
        sites, errors = load_all_sites(self.sites_dir)
        self.sites: dict[str, SiteConfig] = sites
        self.errors: dict[str, SiteConfigError] = errors
        # A broken file is found by the name it was meant to have: its file name.
        self._errors_by_name = {_stem(file): exc for file, exc in errors.items()}
        self._spiders: dict[str, type[Spider]] = dict(_module_spiders(settings))
        for name, site in sites.items():
            if name in self._spiders:
                logger.warning(
                    "Site config %s replaces the spider class %r of the same name",
                    site.path,
                    self._spiders[name],
                )
            self._spiders[name] = SiteSpider.for_site(site)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(settings)

    def load(self, spider_name: str) -> type[Spider]:
        """The spider class for ``spider_name``.

        Raises the config's :class:`SiteConfigError` if its file is invalid (so ``scrapy crawl``
        stops with the file, key and problem before anything is fetched), ``KeyError`` if there
        is no such spider, as Scrapy's loader does.
        """
        if spider_name in self._spiders:
            return self._spiders[spider_name]
        if spider_name in self._errors_by_name:
            exc = self._errors_by_name[spider_name]
            raise InvalidSiteConfig(exc.file, exc.key, exc.problem, exc.problems[1:])
        raise KeyError(f"Spider not found: {spider_name}")

    def list(self) -> list[str]:
        """Names of the usable spiders; each invalid config file is logged as a warning."""
        for exc in self.errors.values():
            logger.warning("Invalid site config, skipped: %s", exc)
        return list(self._spiders)

    def find_by_request(self, request: Request) -> list[str]:
        """Spiders whose configured scope (or ``allowed_domains``) covers the request's host."""
        return [name for name, cls in self._spiders.items() if cls.handles_request(request)]


def _stem(file: str) -> str:
    name = PurePosixPath(file.replace("\\", "/")).name
    return name[: -len(".toml")] if name.endswith(".toml") else name


def _module_spiders(settings: BaseSettings) -> dict[str, type[Spider]]:
    """Hand-written spider classes from ``SPIDER_MODULES`` (none in this project so far)."""
    if not settings.getlist("SPIDER_MODULES"):
        return {}
    loader = SpiderLoader.from_settings(settings)
    return {name: loader.load(name) for name in loader.list()}
