"""A signed crawl, verified by the server it crawls: the key and directory made by ``scrapy
botkey``, the directory served over HTTPS at its well-known path, and a site on two loopback
hosts that checks every request (robots.txt too) with an independent verifier
(``tests/botauth_verifier.py``) and answers 401 to one it cannot verify. Then a captured
signature replayed to the other host, and an expired one, are refused; and the private key is
nowhere in the log, the stats, the items or the WARC files, whose request records keep the
public signature headers as sent."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from crawler.net.signatures import RequestSigner, load_private_key
from tests.botauth_verifier import directory_server, verifying_site
from tests.crawling import PROJECT, loopback_settings, run_crawl
from tests.warc_support import all_records

HOSTS = ["127.0.0.2", "127.0.0.3"]
FROM = "Crawl Ops <ops@example.org>"
PAGES = {
    "/robots.txt": "User-agent: *\nAllow: /\n",
    "/": '<html><body><a href="/a.html">a</a> <a href="/b.html">b</a> <a href="/moved">m</a>'
    "</body></html>",
    "/a.html": "<html><body><p>Page a</p><a href='/b.html'>b</a></body></html>",
    "/b.html": "<html><body><p>Page b</p></body></html>",
    "/c.html": "<html><body><p>Page c, moved here</p></body></html>",
}
# another @path: a redirect followed with the first request's signature would not verify
REDIRECTS = {"/moved": "/c.html"}
FETCHED = [*PAGES, *REDIRECTS]


def _secret_spellings(key_path: Path) -> list[bytes]:
    """Every way the private key could show up in a file: the PEM body, and the raw 32-byte
    seed in base64, base64url and hex."""
    pem = key_path.read_bytes()
    seed = load_private_key(key_path).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return [
        b"".join(pem.splitlines()[1:-1]),
        base64.b64encode(seed).rstrip(b"="),
        base64.urlsafe_b64encode(seed).rstrip(b"="),
        seed.hex().encode(),
        seed,
    ]


def _replay(host: str, port: int, path: str, headers: dict[str, str]) -> int:
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.integration
def test_a_signed_crawl_is_verified_by_the_site_and_keeps_its_key_secret(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "scrapy", "botkey", "identity", "--agent", "https://127.0.0.1"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(PROJECT), SCRAPY_SETTINGS_MODULE="crawler.settings"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    key_path = tmp_path / "identity" / "botkey.pem"
    jwks = (key_path.parent / ".well-known" / "http-message-signatures-directory").read_bytes()
    warc_dir = tmp_path / "warc"
    with (
        directory_server(jwks) as (origin, context),
        verifying_site(HOSTS, PAGES, context, REDIRECTS) as (port, seen),
    ):
        result = run_crawl(
            tmp_path,
            seeds=[f"http://{host}:{port}/" for host in HOSTS],
            settings=loopback_settings(
                SIGNATURE_KEY_FILE=key_path,
                SIGNATURE_AGENT=origin,
                FROM_ADDRESS=FROM,
                WARC_ENABLED=True,
                WARC_DIR=warc_dir,
            ),
        )
        assert result.returncode == 0, result.log[-3000:]
        # every request the site got, robots.txt and the redirected one included, carried a
        # signature it verified
        paths = sorted((s.host, s.path) for s in seen)
        assert paths == sorted((h, p) for h in HOSTS for p in FETCHED), paths
        assert {s.verdict for s in seen} == {f"verified {origin}"}
        assert {s.headers.get("From") for s in seen} == {FROM}
        assert len({s.headers["Signature"] for s in seen}) == len(seen)  # each its own
        # a captured signature replayed to the other host: its @authority no longer matches
        captured = next(s for s in seen if s.host == HOSTS[0] and s.path == "/a.html")
        replayed = {k: v for k, v in captured.headers.items() if k != "Host"}
        assert _replay(HOSTS[1], port, "/a.html", replayed) == 401
        assert seen[-1].verdict.startswith("invalid")
        # ...and to the same page it came from, it still verifies (within its 5 minutes)
        assert _replay(HOSTS[0], port, "/a.html", replayed) == 200
        # a signature made 10 minutes ago has expired
        stale = RequestSigner(load_private_key(key_path), origin, clock=lambda: time.time() - 600)
        url = f"http://{HOSTS[0]}:{port}/a.html"
        assert _replay(HOSTS[0], port, "/a.html", stale.headers("GET", url)) == 401
        assert "expires" in seen[-1].verdict
    assert len(result.items) == len(HOSTS) * 4  # /, a, b and c (from /moved)
    assert result.stats["signing/signed"] == len(HOSTS) * len(FETCHED)
    assert "Signing requests (draft-ietf-webbotauth-httpsig-protocol-00): keyid" in result.log

    # The WARC request records keep the signature headers as sent: public values.
    records = all_records(warc_dir)
    sent = {s.headers["Signature"] for s in seen[: len(HOSTS) * len(FETCHED)]}
    archived = [r["http"] for r in records if r["type"] == "request"]
    assert {h.get_header("Signature") for h in archived} == sent
    assert {h.get_header("Signature-Agent") for h in archived} == {f'sig1="{origin}"'}
    assert {h.get_header("From") for h in archived} == {FROM}

    # The private key: in none of the log, the stats, the items, the WARC files.
    places = {
        "log": result.log.encode(),
        "stats": json.dumps(result.stats).encode(),
        "items": json.dumps(result.items).encode(),
    }
    for path in warc_dir.iterdir():
        data = path.read_bytes()
        places[path.name] = gzip.decompress(data) if path.name.endswith(".gz") else data
    for spelling in _secret_spellings(key_path):
        leaked = [name for name, data in places.items() if spelling in data]
        assert not leaked, f"the private key is in {leaked}"
