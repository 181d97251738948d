"""Finding and loading site configs: every ``*.toml`` of the sites folder (``SITES_DIR``) or of
the ``crawler.sites`` package, read and checked against the schema (crawler/sites/sitefile.py).

The configs live inside the ``crawler.sites`` package so they travel inside a scrapyd egg; they
are found with :func:`importlib.resources.files`, never relative to the current directory.
"""

from __future__ import annotations

import os
import tomllib
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from pydantic import ValidationError

from crawler.sites.messages import SiteConfigError, display, file_problems
from crawler.sites.sitefile import SiteConfig, SiteFile, schema_tables

SITES_PACKAGE = "crawler.sites"


def sites_root(directory: str | os.PathLike[str] | Traversable | None = None) -> Traversable:
    """The folder holding the site configs: ``directory`` if given, else the ``crawler.sites``
    package (a real folder in a checkout, a folder inside the zip in a scrapyd egg)."""
    if directory is None:
        return files(SITES_PACKAGE)
    if isinstance(directory, (str, os.PathLike)):
        return Path(directory).absolute()
    return directory


def load_all_sites(
    directory: str | os.PathLike[str] | Traversable | None = None,
) -> tuple[dict[str, SiteConfig], dict[str, SiteConfigError]]:
    """Load every ``*.toml`` in the sites folder: the valid configs by name, the errors by file.

    One broken file must not hide the others (``scrapy list`` still lists the good ones, and
    ``scrapy crawl good`` still works), so errors are collected instead of raised.
    """
    root = sites_root(directory)
    sites: dict[str, SiteConfig] = {}
    errors: dict[str, SiteConfigError] = {}
    try:
        entries = sorted(
            (e for e in root.iterdir() if e.name.endswith(".toml") and not e.name.startswith(".")),
            key=lambda e: e.name,
        )
    except OSError as exc:
        shown = display(root)
        errors[shown] = SiteConfigError(
            shown, None, f"cannot list site configs: {exc.strerror or exc}"
        )
        return sites, errors
    for entry in entries:
        if not entry.is_file():
            continue
        try:
            site = load_site_config(entry, base=root)
        except SiteConfigError as exc:
            errors[exc.file] = exc
        else:
            sites[site.name] = site
    return sites, errors


def load_site_config(
    source: str | os.PathLike[str] | Traversable,
    base: Traversable | None = None,
) -> SiteConfig:
    """Load and validate one site config; :class:`SiteConfigError` names the file and key.

    ``base`` is the folder a relative ``seeds_file`` is resolved against; it defaults to the
    config's own folder (pass it for a resource without a ``parent``).
    """
    entry: Traversable = (
        Path(source).absolute() if isinstance(source, (str, os.PathLike)) else source
    )
    shown = display(entry)
    try:
        text = entry.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SiteConfigError(shown, None, f"not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise SiteConfigError(shown, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SiteConfigError(shown, None, f"invalid TOML: {exc}") from None
    if base is None:
        base = getattr(entry, "parent", None)
    stem = entry.name[: -len(".toml")] if entry.name.endswith(".toml") else entry.name
    try:
        document = SiteFile.model_validate(data, context={"stem": stem, "base": base})
    except ValidationError as exc:
        first, *more = file_problems(exc, stem, schema_tables())
        raise SiteConfigError(shown, *first, more=more) from None
    return document.site_config(shown)
