"""Per-site crawl configs, one TOML file per site, checked before any request.

A site config is user input that drives a long, unattended crawl, so it is validated strictly and
up front: a wrong type, an out-of-range number, a regex that does not compile, a seed that is not
an http(s) URL or a key that does not exist (a typo that would otherwise silently do nothing) is
refused with ``<file>: <key>: <what is wrong>``, and every such problem of a file is reported at
once, so one edit fixes them all. Free of Scrapy: the frontier and its tests use the same classes
without it.

This folder is a package so the configs travel inside a scrapyd egg as package data. Its
modules, one job each:

* ``sitefile``: the schema of a site file, and :class:`SiteConfig`, the loaded view;
* ``seeds``: seeds files and the check of a seed URL;
* ``loading``: finding and loading the configs of a folder or of this package;
* ``messages``: the errors and how their lines read;
* ``fields``: the ``[fields]`` table's selectors; ``policy``: the URL policy built from a config.
"""

from crawler.sites.loading import load_all_sites, load_site_config, sites_root
from crawler.sites.messages import SeedsFileError, SiteConfigError
from crawler.sites.seeds import check_seeds_file, iter_seeds_file, read_seeds_file, seed_url_problem
from crawler.sites.sitefile import (
    Limits,
    Politeness,
    Priority,
    Scope,
    Setting,
    SiteConfig,
    SiteFile,
    Urls,
    schema_tables,
)

__all__ = [
    "Limits",
    "Politeness",
    "Priority",
    "Scope",
    "SeedsFileError",
    "Setting",
    "SiteConfig",
    "SiteConfigError",
    "SiteFile",
    "Urls",
    "check_seeds_file",
    "iter_seeds_file",
    "load_all_sites",
    "load_site_config",
    "read_seeds_file",
    "schema_tables",
    "seed_url_problem",
    "sites_root",
]
