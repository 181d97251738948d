"""The WARC feature's settings (``WARC_*``), typed, read once (crawler/config/typed.py).

A core: free of Scrapy; the capture middleware builds it from the crawl's settings and hands
its values to the writer, the archiver and the packaging at close.
"""

from __future__ import annotations

from crawler.config.typed import FeatureConfig, knob, setting


class WarcConfig(FeatureConfig):
    """What ``WARC_*`` says: whether to archive, where, in which files, with which records.
    The settings' reasons are in ``crawler/config/defaults.py``."""

    enabled: bool = setting("WARC_ENABLED")
    directory: str = setting("WARC_DIR")  # "%(name)s": the site
    prefix: str = setting("WARC_PREFIX")  # empty: the site's name
    max_size: int = setting("WARC_MAX_SIZE")
    digest_path: str = setting("WARC_DIGEST_PATH")  # empty: where the next crawl looks
    revisit_min_size: int = knob("warc_revisit_min_size")
    metadata: bool = setting("WARC_METADATA")
    cdxj: bool = setting("WARC_CDXJ")
    wacz: bool = setting("WARC_WACZ")

    def directory_of(self, site: str) -> str:
        """The folder of ``site``'s files: ``WARC_DIR`` with the site's name in it."""
        return (self.directory or "warc/%(name)s").replace("%(name)s", site)
