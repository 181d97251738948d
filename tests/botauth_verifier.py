"""A Web Bot Auth verifier for the tests, independent of the crawler's signer: the
``http-message-signatures`` package (PyPI) checks RFC 9421 and ``http-sf`` parses the
Structured Fields; this module only does what draft-ietf-webbotauth-httpsig-protocol-00 adds
(5.4, 5.5): find the Signature-Agent member the signature covers, fetch that origin's key
directory over HTTPS (200 only, the directory media type, no redirect), pick the key whose
``kid`` is the signature's ``keyid`` and check that ``kid`` is the key's thumbprint.

Also: a loopback HTTPS server with a certificate of its own that serves a key directory, and
a site server that verifies every request it gets before answering (401 when it cannot).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import ssl
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import http_sf
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.x509.oid import NameOID
from http_message_signatures import HTTPMessageVerifier, InvalidSignature, MappingKeyResolver
from http_message_signatures.algorithms import ED25519

WELL_KNOWN = "/.well-known/http-message-signatures-directory"
MEDIA_TYPE = "application/http-message-signatures-directory+json"


@dataclass
class Message:
    """What the verifier reads of a request (its interface: method, absolute url, headers)."""

    method: str
    url: str
    headers: dict[str, str]


def _thumbprint(jwk: dict[str, str]) -> str:
    members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x")}, separators=(",", ":"))
    digest = hashlib.sha256(members.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def fetch_directory(origin: str, context: ssl.SSLContext) -> dict[str, Ed25519PublicKey]:
    """kid -> public key of the directory at ``origin``; raises ValueError when it is not one."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=context))
    with opener.open(origin + WELL_KNOWN, timeout=10) as answer:
        if answer.status != 200 or answer.headers.get_content_type() != MEDIA_TYPE:
            raise ValueError(f"not a key directory: {answer.status} {answer.headers}")
        keys = json.loads(answer.read())["keys"]
    out = {}
    for jwk in keys:
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        if jwk.get("kid") != _thumbprint(jwk):
            raise ValueError(f"kid {jwk.get('kid')} is not the key's thumbprint")
        raw = base64.urlsafe_b64decode(jwk["x"] + "=" * (-len(jwk["x"]) % 4))
        out[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(raw)
    return out


def verify(message: Message, context: ssl.SSLContext) -> str:
    """The Signature-Agent origin a valid Web Bot Auth signature of ``message`` resolves to;
    raises InvalidSignature (or ValueError for a directory that cannot be used)."""
    inputs = http_sf.parse(message.headers["Signature-Input"].encode(), tltype="dictionary")
    agents = http_sf.parse(message.headers["Signature-Agent"].encode(), tltype="dictionary")
    for label, (components, params) in inputs.items():
        if params.get("tag") != "web-bot-auth":
            continue
        covered = [(name, dict(p)) for name, p in components]
        member = next((p["key"] for n, p in covered if n == "signature-agent" and "key" in p), None)
        if member is None or member not in agents:
            raise InvalidSignature(f"{label}: covers no Signature-Agent member")
        origin = agents[member][0]
        keys = fetch_directory(origin, context)  # keyed on (origin, keyid): 5.4
        verifier = HTTPMessageVerifier(
            signature_algorithm=ED25519,
            key_resolver=MappingKeyResolver(public_keys=keys, private_keys={}),
        )
        verifier.verify(
            message,
            expect_tag="web-bot-auth",
            expect_label=label,
            require_components=("@authority", f'"signature-agent";key="{member}"'),
        )
        return origin
    raise InvalidSignature("no web-bot-auth signature")


# --- Servers ------------------------------------------------------------------------------------


def loopback_certificate() -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a self-signed certificate for 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@contextmanager
def directory_server(jwks: bytes) -> Iterator[tuple[str, ssl.SSLContext]]:
    """An HTTPS server on 127.0.0.1 serving ``jwks`` at the well-known path: yields its origin
    and a client context that trusts its certificate."""
    cert, key = loopback_certificate()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != WELL_KNOWN:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", MEDIA_TYPE)
            self.send_header("Content-Length", str(len(jwks)))
            self.end_headers()
            self.wfile.write(jwks)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cert.pem").write_bytes(cert)
        (Path(tmp) / "key.pem").write_bytes(key)
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(Path(tmp) / "cert.pem", Path(tmp) / "key.pem")
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ssl.create_default_context(
            cadata=cert.decode()
        )
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Seen:
    """One request the verifying site got: its path, headers and the verdict."""

    host: str
    path: str
    headers: dict[str, str]
    verdict: str  # "verified <origin>", "invalid: why" or "unsigned"


@contextmanager
def verifying_site(
    hosts: list[str],
    pages: dict[str, str],
    context: ssl.SSLContext,
    redirects: dict[str, str] | None = None,
) -> Iterator[tuple[int, list[Seen]]]:
    """One HTTP server on a free port of each of ``hosts`` (the same port), answering
    ``pages`` (path -> HTML) and ``redirects`` (path -> Location, a 301) to requests whose
    signature it verifies, 401 to the others; yields the port and the list of requests seen,
    in order."""
    redirects = redirects or {}
    seen: list[Seen] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = dict(self.headers.items())
            message = Message("GET", f"http://{headers.get('Host', '')}{self.path}", headers)
            if "Signature" not in headers:
                verdict = "unsigned"
            else:
                try:
                    verdict = f"verified {verify(message, context)}"
                except (InvalidSignature, ValueError, KeyError, urllib.error.URLError) as exc:
                    verdict = f"invalid: {exc}"
            with lock:
                seen.append(Seen(self.server.server_address[0], self.path, headers, verdict))
            body = pages.get(self.path)
            status = 200 if verdict.startswith("verified") else 401
            if status == 200 and self.path in redirects:
                status, body = 301, "moved"
            elif status == 200 and body is None:
                status, body = 404, "not found"
            data = (body or verdict).encode()
            self.send_response(status)
            if status == 301:
                self.send_header("Location", redirects[self.path])
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    first = ThreadingHTTPServer((hosts[0], 0), Handler)
    port = first.server_address[1]
    servers = [first] + [ThreadingHTTPServer((h, port), Handler) for h in hosts[1:]]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield port, seen
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
