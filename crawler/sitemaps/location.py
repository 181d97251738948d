"""Which URLs a sitemap may speak for: sitemaps.org's "Sitemap file location" rule.

The protocol: a sitemap at ``http://example.com/catalog/sitemap.xml`` may list URLs starting
with ``http://example.com/catalog/`` (same scheme, host and port, under its folder; a ``/`` in
the query does not count), and not ``http://example.com/images/...`` nor
``https://example.com/catalog/...``; such URLs "are dropped from further consideration". The
exception is proof of ownership: a sitemap named in a host's robots.txt may list any URL of
that host, any scheme or port (the protocol's "cross submits", checked on the host name as
crawler-commons' ``SiteMapCrossSubmitValidator`` does; the sitemap may even live on another
host), and so may the sitemaps of an index that robots.txt names. The folder is the one of the
URL the file was finally fetched from (after redirects). A feed that a page names in its head
(``<link rel="alternate" type="application/rss+xml">``) may also list the pages of that page's
folder: the page speaks for its folder as much as a file in it does (a WordPress home page at
``/`` names ``/feed/``, whose posts are under ``/``), never for more. A sitemap index may
only name sitemaps on its own site (or, again, on the host whose robots.txt named it).

crawler-commons applies the rule in its ``strict`` mode, its default, and so does this crawler
(``SITEMAPS_FOLDER_RULE``, on by default): without it, anyone who can put a file in a folder of
a site (a user's home page, an upload folder, a wiki's attachments) could steer the crawl
over the whole host. Turning it off keeps the weaker rule that a sitemap lists URLs of its own
host (or of the host whose robots.txt named it), any scheme, any path: for sites whose CMS
writes its sitemaps to a folder of their own (``/sitemaps/pages.xml``) and is not named in
robots.txt.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

IN = ""  # the sitemap may list the URL
FOREIGN = "foreign"  # another host than the sitemap's and the naming robots.txt's
OUT_OF_FOLDER = "out_of_folder"  # its host, but outside the folder (or another scheme/port)

_DEFAULT_PORTS = {"http": 80, "https": 443}

Site = tuple[str, str, int | None]  # (scheme, host, port), lower-case, default port filled in


def site_of(parts: SplitResult) -> Site:
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    # "example.com." is example.com (a fully qualified name): one host, one site
    return scheme, (parts.hostname or "").rstrip("."), port or _DEFAULT_PORTS.get(scheme)


def folder_of(path: str) -> str:
    """The folder of a sitemap's path: ``/catalog/sitemap.xml`` -> ``/catalog/``."""
    return path[: path.rfind("/") + 1] or "/"


class Coverage:
    """What one sitemap may list (see the module docstring).

    ``origin`` is the ``scheme://host[:port]`` whose robots.txt named the sitemap (or whose
    ``/sitemap.xml`` was probed); ``named``: robots.txt named it (or the index holding it),
    which proves ownership of that origin.
    """

    __slots__ = ("folder", "folder_rule", "hosts", "named", "origin_site", "prefixes", "site",
                 "vouched")

    def __init__(
        self, url: str, origin: str, *, named: bool, folder_rule: bool, vouched: str = ""
    ) -> None:
        parts = urlsplit(url)
        origin_parts = urlsplit(origin)
        self.site = site_of(parts)
        self.folder = folder_of(parts.path)
        self.origin_site = site_of(origin_parts)
        self.named = named
        self.folder_rule = folder_rule
        self.hosts = {self.site[1], self.origin_site[1]}
        # the common case, checked without parsing: the sitemap's folder as written, and the
        # naming origin when it proves ownership
        own = f"{parts.scheme}://{parts.netloc}{self.folder}"
        self.prefixes: tuple[str, ...] = (own, origin + "/") if named else (own,)
        # a feed named in a page's head: the page's folder too, on the page's own site
        self.vouched: tuple[Site, str] | None = None
        if vouched:
            vouched_parts = urlsplit(vouched)
            self.vouched = (site_of(vouched_parts), folder_of(vouched_parts.path))
            self.prefixes += (vouched,)
        if not folder_rule:
            self.prefixes = (f"{parts.scheme}://{parts.netloc}/", origin + "/")

    def entry(self, loc: str) -> str:
        """IN, FOREIGN or OUT_OF_FOLDER for a URL the sitemap lists."""
        if loc.startswith(self.prefixes):
            return IN
        try:
            parts = urlsplit(loc)
        except ValueError:
            return FOREIGN
        site = site_of(parts)
        if site[1] not in self.hosts:
            return FOREIGN
        if not self.folder_rule:
            return IN
        if site == self.site and (parts.path or "/").startswith(self.folder):
            return IN
        if self.named and site[1] == self.origin_site[1]:
            return IN
        if self.vouched and site == self.vouched[0] and (parts.path or "/").startswith(
            self.vouched[1]
        ):
            return IN
        return OUT_OF_FOLDER

    def child(self, loc: str) -> bool:
        """Whether a sitemap index may name the sitemap ``loc``: on its own site, or on the
        site whose robots.txt named it (always, without the folder rule)."""
        if not self.folder_rule:
            return True
        try:
            site = site_of(urlsplit(loc))
        except ValueError:
            return False
        return site == self.site or (self.named and site[1] == self.origin_site[1])
