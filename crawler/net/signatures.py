"""A verifiable identity for the crawler: requests signed with HTTP Message Signatures (RFC 9421,
Ed25519) as Web Bot Auth describes, and the key directory the operator publishes.

Followed: **draft-ietf-webbotauth-httpsig-protocol-00** (1 September 2026), the working group's
adoption of draft-meunier-webbotauth-httpsig-protocol-02, itself the successor of
draft-meunier-web-bot-auth-architecture-05 with draft-meunier-http-message-signatures-directory
folded in. What it asks of a signer, and what this module does:

- ``Signature-Input`` covers ``@authority`` (5.2: at least one of ``@authority`` and
  ``@target-uri``) and the ``Signature-Agent`` member keyed by the signature's label (5.2.1: a
  signed request MUST carry the header and cover that member). We also cover ``@method`` and
  ``@path``, which 5.2 says narrow a signature to one resource: a signature over ``@authority``
  alone can be replayed against every page of the host until it expires, and the request
  headers are kept in WARC request records that may be published.
- Parameters ``created``, ``expires`` (a few minutes: 5.2 recommends at most 24 hours, 6.9 warns
  against long windows), ``keyid`` the JWK SHA-256 thumbprint of the public key (RFC 7638, with
  RFC 8037 A.3 for Ed25519), ``alg="ed25519"``, a fresh ``nonce`` (RFC 9421 7.2.2: lets a
  verifier refuse a replay) and ``tag="web-bot-auth"``.
- ``Signature-Agent`` is the Dictionary form (``sig1="https://crawler.example"``); its value is
  the https origin whose ``/.well-known/http-message-signatures-directory`` serves the JWKS
  (5.5, type ``directory``, the default), with media type
  ``application/http-message-signatures-directory+json`` (5.5.1), ``kid`` = thumbprint.

The signature base follows RFC 9421 2.5; ``tests/test_signing.py`` reproduces RFC 9421 B.2.6
and the draft's E.2.1 vector with this code. The private key is only ever held as a key object:
no function here returns or formats its bytes except :func:`new_private_key_pem`, used once by
``scrapy botkey`` to write the 0600 key file.

Free of Scrapy (a core of the bottom layer); ``cryptography`` does the Ed25519 arithmetic.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "DIRECTORY_MEDIA_TYPE",
    "DIRECTORY_PATH",
    "DRAFT",
    "KeyFileError",
    "RequestSigner",
    "directory_keys",
    "jwk_thumbprint",
    "key_directory",
    "load_private_key",
    "new_private_key_pem",
    "public_jwk",
    "sf_string",
    "signature_base",
    "signature_params",
]

DRAFT = "draft-ietf-webbotauth-httpsig-protocol-00"
TAG = "web-bot-auth"
ALGORITHM = "ed25519"
DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
DIRECTORY_MEDIA_TYPE = "application/http-message-signatures-directory+json"
# The signature's label in Signature-Input and Signature, and the key of our Signature-Agent
# member (5.2.1: the member keyed to the signature label is the one it covers).
LABEL = "sig1"
# Seconds a signature stays valid: it is made just before the request leaves (after the
# frontier's politeness wait), so it only has to outlive the download (DOWNLOAD_TIMEOUT, 20 s)
# and the verifier's clock skew; every retry or redirect is signed again.
LIFETIME = 300
# Components every signature covers, in this order, before the Signature-Agent member.
COVERED = ("@method", "@authority", "@path")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class KeyFileError(ValueError):
    """A signing key file that cannot be used; the message names the file, never its bytes."""


# --- Keys, JWK and the key directory ----------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_private_key_pem() -> bytes:
    """A fresh Ed25519 private key as unencrypted PKCS#8 PEM (what ``openssl genpkey
    -algorithm ed25519`` writes), for the key file only."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 private key of a PEM file (PKCS#8, as ``scrapy botkey`` and openssl write
    it). Raises :class:`KeyFileError` naming the file and what is wrong with it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the signing key ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        # the parser's message may quote the file; ours does not
        raise KeyFileError(
            f"{path}: not an unencrypted PEM private key (make one with `scrapy botkey`)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key (Web Bot Auth signs with Ed25519 here)")
    return key


def public_jwk(public_key: Ed25519PublicKey) -> dict[str, str]:
    """The JWK of an Ed25519 public key (RFC 8037 2): its required members only."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(raw)}


def jwk_thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638 JWK SHA-256 thumbprint, base64url: the required members of an OKP key
    (RFC 8037 A.3: ``crv``, ``kty``, ``x``) in lexicographic order, no whitespace."""
    required = {name: jwk[name] for name in ("crv", "kty", "x")}
    canonical = json.dumps(required, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def key_directory(public_keys: Iterable[Ed25519PublicKey]) -> bytes:
    """The JWKS to publish at :data:`DIRECTORY_PATH` (5.5.1): one entry per key, ``kid`` its
    thumbprint (5.5: a kid there MUST be the thumbprint), ``use`` ``sig``."""
    keys = []
    for public_key in public_keys:
        jwk = public_jwk(public_key)
        keys.append({**jwk, "kid": jwk_thumbprint(jwk), "use": "sig"})
    return json.dumps({"keys": keys}, indent=2).encode("utf-8") + b"\n"


def directory_keys(data: bytes) -> list[Ed25519PublicKey]:
    """The Ed25519 public keys a key directory (:func:`key_directory`'s JSON) lists, in its
    order; raises ValueError for a file that is not one."""
    try:
        entries = json.loads(data)["keys"]
        return [
            Ed25519PublicKey.from_public_bytes(
                base64.urlsafe_b64decode(entry["x"] + "=" * (-len(entry["x"]) % 4))
            )
            for entry in entries
            if entry.get("kty") == "OKP" and entry.get("crv") == "Ed25519"
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a key directory ({exc})") from None


# --- RFC 9421 serialization ---------------------------------------------------------------------


def sf_string(value: str) -> str:
    """A Structured Field String (RFC 9651 3.3.3): printable ASCII in quotes, ``\\`` and ``"``
    escaped."""
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"not a Structured Field String: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def signature_params(
    components: Sequence[str],
    *,
    created: int,
    keyid: str,
    alg: str | None = None,
    expires: int | None = None,
    nonce: str | None = None,
    tag: str | None = None,
) -> str:
    """The ``@signature-params`` value (RFC 9421 2.3): the covered component identifiers (each
    already serialized, e.g. ``"@authority"`` or ``"signature-agent";key="sig1"``) as an inner
    list, then the parameters in the order the draft's test vectors write them."""
    params = [f";created={created}", f";keyid={sf_string(keyid)}"]
    if alg is not None:
        params.append(f";alg={sf_string(alg)}")
    if expires is not None:
        params.append(f";expires={expires}")
    if nonce is not None:
        params.append(f";nonce={sf_string(nonce)}")
    if tag is not None:
        params.append(f";tag={sf_string(tag)}")
    return "(" + " ".join(components) + ")" + "".join(params)


def signature_base(components: Sequence[tuple[str, str]], params: str) -> bytes:
    """The signature base (RFC 9421 2.5): one ``identifier: value`` line per covered component,
    then the ``@signature-params`` line, joined by LF with no trailing newline."""
    lines = []
    for identifier, value in components:
        if "\n" in value or "\r" in value or not value.isascii():
            raise ValueError(f"component {identifier} has a value a signature base cannot hold")
        lines.append(f"{identifier}: {value}")
    lines.append(f'"@signature-params": {params}')
    return "\n".join(lines).encode("ascii")


def authority(url: str) -> str:
    """``@authority`` (RFC 9421 2.2.3): the target URI's host, lower case, and its port unless
    it is the scheme's default."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"{host}:{port}"


def path(url: str) -> str:
    """``@path`` (RFC 9421 2.2.6): the target URI's absolute path, "/" when empty, no query."""
    return urlsplit(url).path or "/"


# --- The signer -------------------------------------------------------------------------------


def _nonce() -> str:
    return base64.b64encode(os.urandom(32)).decode("ascii")


@dataclass
class RequestSigner:
    """Signs requests for one key and one Signature-Agent origin (``agent``, checked by the
    settings schema's ``SIGNATURE_AGENT`` rule: an https origin).

    :meth:`headers` returns the three header fields to set on a request; nothing of the
    private key leaves the object (its ``repr`` shows the public ``keyid`` only).
    """

    private_key: Ed25519PrivateKey = field(repr=False)
    agent: str
    lifetime: int = LIFETIME
    covered: Sequence[str] = COVERED
    label: str = LABEL
    clock: Callable[[], float] = field(default=time.time, repr=False)
    nonce: Callable[[], str | None] = field(default=_nonce, repr=False)
    keyid: str = field(init=False)

    def __post_init__(self) -> None:
        self.keyid = jwk_thumbprint(public_jwk(self.private_key.public_key()))
        self.agent = self.agent.rstrip("/")

    @property
    def agent_header(self) -> str:
        """The ``Signature-Agent`` value: a Dictionary with our one member."""
        return f"{self.label}={sf_string(self.agent)}"

    def headers(self, method: str, url: str) -> dict[str, str]:
        """``Signature-Agent``, ``Signature-Input`` and ``Signature`` for a request of
        ``method`` to ``url`` (its final, percent-encoded form), created now."""
        created = int(self.clock())
        derived = {"@method": method.upper(), "@authority": authority(url), "@path": path(url)}
        components = [(f'"{name}"', derived[name]) for name in self.covered]
        agent_id = f'"signature-agent";key={sf_string(self.label)}'
        components.append((agent_id, sf_string(self.agent)))
        params = signature_params(
            [identifier for identifier, _ in components],
            created=created,
            keyid=self.keyid,
            alg=ALGORITHM,
            expires=created + self.lifetime,
            nonce=self.nonce(),
            tag=TAG,
        )
        signature = self.private_key.sign(signature_base(components, params))
        return {
            "Signature-Agent": self.agent_header,
            "Signature-Input": f"{self.label}={params}",
            "Signature": f"{self.label}=:{base64.b64encode(signature).decode('ascii')}:",
        }
