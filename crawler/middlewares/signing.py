"""Who is crawling, said verifiably: a ``From`` header and Web Bot Auth request signatures.

A user agent string is a claim anyone can copy; sites now block crawlers they cannot verify.
With ``SIGNATURE_KEY_FILE`` and ``SIGNATURE_AGENT`` set, every request that leaves the crawler
(pages, robots.txt, sitemaps, retries, redirects: each attempt signed afresh) carries
``Signature-Agent``, ``Signature-Input`` and ``Signature`` (HTTP Message Signatures, RFC 9421,
Ed25519, as draft-ietf-webbotauth-httpsig-protocol-00 asks: ``crawler/net/signatures.py`` says
what is covered and why), which a site verifies with the key directory the operator publishes
(``scrapy botkey`` makes the key and the directory). With ``FROM_ADDRESS``, every request
carries ``From`` (RFC 9110 10.1.2), unless a request sets its own. Off unless configured.

Priority 945: after every middleware that changes a request, just before the WARC capture
(950), so the request record keeps the headers exactly as signed. They are public values (the
signature is checked with the public key; it covers one method, authority and path and expires
after ``LIFETIME`` seconds), so the WARC keeps them as sent. The private key stays inside the
:class:`~crawler.net.signatures.RequestSigner`: the log names its public ``keyid``, the stats
count signed requests, and neither ever sees the key or the key file's bytes.
"""

from __future__ import annotations

import logging
import os

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler.config.typed import FeatureConfig, setting
from crawler.net.signatures import DRAFT, RequestSigner, load_private_key

logger = logging.getLogger(__name__)


class IdentityConfig(FeatureConfig):
    """What the identity settings say: the From mailbox, and the key and origin requests are
    signed with (crawler/config/defaults.py has the reasons; the schema checks the mailbox, the
    origin, and that a key comes with its origin)."""

    from_address: str = setting("FROM_ADDRESS")  # empty: no From header
    key_file: str = setting("SIGNATURE_KEY_FILE")  # empty: requests are not signed
    agent: str = setting("SIGNATURE_AGENT")


class IdentityMiddleware:
    """Sets ``From`` and signs each request; see the module docstring."""

    def __init__(self, crawler: Crawler, from_address: str, signer: RequestSigner | None) -> None:
        self.stats = crawler.stats
        self.from_address = from_address.encode("ascii") if from_address else None
        self.signer = signer

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdentityMiddleware:
        # every problem at once, in the schema's words (SettingsError: a ValueError)
        config = IdentityConfig.from_settings(crawler.settings)
        key_file = config.key_file
        if not config.from_address and not key_file:
            raise NotConfigured  # the default: no message, no warning on every crawl
        signer = None
        if key_file:
            path = os.path.expanduser(key_file)
            signer = RequestSigner(load_private_key(path), config.agent)
            if os.stat(path).st_mode & 0o077:
                logger.warning(
                    "%s can be read by other users than its owner: chmod 600 it (whoever reads "
                    "it can sign as this crawler)",
                    path,
                )
            logger.info(
                "Signing requests (%s): keyid %s, Signature-Agent %s",
                DRAFT,
                signer.keyid,
                signer.agent,
            )
        return cls(crawler, config.from_address, signer)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if self.from_address is not None and b"From" not in request.headers:
            request.headers[b"From"] = self.from_address
        if self.signer is None or not request.url.startswith(("http://", "https://")):
            return  # data: and file: requests reach no server
        try:
            headers = self.signer.headers(request.method, request.url)
        except ValueError:
            # a URL a signature base cannot hold (not ASCII): sent unsigned, and counted
            self._inc("signing/unsigned")
            return
        for name, value in headers.items():
            request.headers[name] = value  # replaces a retried or redirected copy's
        self._inc("signing/signed")

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)
