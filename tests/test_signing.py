"""The crawler's verifiable identity, piece by piece: the RFC 9421 signer against the RFC's and
the Web Bot Auth draft's vectors, its signatures against an independent verifier
(``tests/botauth_verifier.py``: the ``http-message-signatures`` package), the settings that
turn it on, and ``scrapy botkey``. ``tests/test_signing_crawl.py`` signs a whole crawl."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_message_signatures import InvalidSignature
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawler.config.schema import check_settings, value_problem
from crawler.middlewares.signing import IdentityMiddleware
from crawler.net.signatures import (
    KeyFileError,
    RequestSigner,
    authority,
    jwk_thumbprint,
    key_directory,
    load_private_key,
    public_jwk,
    sf_string,
    signature_base,
    signature_params,
)
from crawler.sites.loading import load_all_sites
from tests.botauth_verifier import Message, directory_server, verify
from tests.crawling import PROJECT

# RFC 9421 Appendix B.1.4, the Ed25519 test key (a published test key: never for production).
RFC_KEY = (
    b"-----BEGIN PRIVATE KEY-----\n"
    b"MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n"
    b"-----END PRIVATE KEY-----\n"
)
AGENT = "https://crawler.example"


@pytest.fixture
def rfc_key_file(tmp_path: Path) -> Path:
    path = tmp_path / "rfc.pem"
    path.write_bytes(RFC_KEY)
    return path


def test_the_signer_reproduces_rfc_9421_b_2_6(rfc_key_file: Path) -> None:
    """B.2.6, "Signing a Request Using ed25519": the test request's signature base and its
    signature, byte for byte (Ed25519 is deterministic)."""
    components = [
        ('"date"', "Tue, 20 Apr 2021 02:07:55 GMT"),
        ('"@method"', "POST"),
        ('"@path"', "/foo"),
        ('"@authority"', authority("http://example.com/foo?param=Value&Pet=dog")),
        ('"content-type"', "application/json"),
        ('"content-length"', "18"),
    ]
    params = signature_params(
        [identifier for identifier, _ in components], created=1618884473, keyid="test-key-ed25519"
    )
    base = signature_base(components, params)
    assert base == (
        b'"date": Tue, 20 Apr 2021 02:07:55 GMT\n'
        b'"@method": POST\n'
        b'"@path": /foo\n'
        b'"@authority": example.com\n'
        b'"content-type": application/json\n'
        b'"content-length": 18\n'
        b'"@signature-params": ("date" "@method" "@path" "@authority" "content-type"'
        b' "content-length");created=1618884473;keyid="test-key-ed25519"'
    )
    signature = base64.b64encode(load_private_key(rfc_key_file).sign(base)).decode()
    assert signature == (
        "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="
    )


def test_keyid_and_signature_reproduce_the_web_bot_auth_draft_e_2_1(rfc_key_file: Path) -> None:
    """draft-ietf-webbotauth-httpsig-protocol-00 E.2.1: the keyid is the RFC 7638 thumbprint of
    the B.1.4 key, and the minimal Web Bot Auth signature comes out as published."""
    key = load_private_key(rfc_key_file)
    keyid = jwk_thumbprint(public_jwk(key.public_key()))
    assert keyid == "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
    components = [
        ('"@authority"', authority("https://example.com/")),
        ('"signature-agent";key="agent2"', sf_string("https://signature-agent.test")),
    ]
    params = signature_params(
        [identifier for identifier, _ in components],
        created=1735689600,
        keyid=keyid,
        alg="ed25519",
        expires=4889289600,
        nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==",
        tag="web-bot-auth",
    )
    signature = base64.b64encode(key.sign(signature_base(components, params))).decode()
    assert signature == (
        "RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg=="
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Example.COM/", "example.com"),
        ("https://example.com:443/a", "example.com"),
        ("http://example.com:80/a", "example.com"),
        ("http://example.com:8080/a", "example.com:8080"),
        ("https://[::1]:8443/", "[::1]:8443"),
    ],
)
def test_authority_is_lower_case_without_the_default_port(url: str, expected: str) -> None:
    assert authority(url) == expected


def test_the_directory_lists_each_key_under_its_thumbprint(rfc_key_file: Path) -> None:
    public = load_private_key(rfc_key_file).public_key()
    [entry] = json.loads(key_directory([public]))["keys"]
    assert entry == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs",  # RFC 9421 B.1.4's public key
        "kid": "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U",
        "use": "sig",
    }


# --- Our signatures, checked by the independent verifier ----------------------------------------


def _signed(signer: RequestSigner, url: str, method: str = "GET") -> Message:
    return Message(method, url, signer.headers(method, url))


def test_signatures_verify_and_tampering_or_expiry_is_rejected(rfc_key_file: Path) -> None:
    key = load_private_key(rfc_key_file)
    jwks = key_directory([key.public_key()])
    with directory_server(jwks) as (origin, context):
        signer = RequestSigner(key, origin)
        good = _signed(signer, "http://site.test:8080/docs/page.html?q=1")
        assert verify(good, context) == origin
        input_value = good.headers["Signature-Input"]
        assert input_value.startswith(
            'sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created='
        )
        assert f';keyid="{signer.keyid}";alg="ed25519";expires=' in input_value
        assert input_value.endswith(';tag="web-bot-auth"')
        assert good.headers["Signature-Agent"] == f'sig1="{origin}"'
        tampered = [
            Message("GET", "http://other.test:8080/docs/page.html?q=1", good.headers),  # authority
            Message("GET", "http://site.test:8080/docs/other.html", good.headers),  # path
            Message("POST", good.url, good.headers),  # method
            # the same origin spelt otherwise: the covered member's value changed
            Message("GET", good.url, {**good.headers, "Signature-Agent": f'sig1="{origin}/"'}),
        ]
        for message in tampered:
            with pytest.raises(InvalidSignature):
                verify(message, context)
        # made 10 minutes ago: expired after its 5 minutes of validity
        old = RequestSigner(key, origin, clock=lambda: time.time() - 600)
        with pytest.raises(InvalidSignature, match="expires"):
            verify(_signed(old, good.url), context)
        # signed by a key the directory does not publish
        other = RequestSigner(_new_key(), origin)
        with pytest.raises(InvalidSignature, match="key"):
            verify(_signed(other, good.url), context)


def _new_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_each_signature_has_its_own_nonce_and_never_shows_the_key(rfc_key_file: Path) -> None:
    signer = RequestSigner(load_private_key(rfc_key_file), AGENT)
    first, second = (signer.headers("GET", "https://a.test/") for _ in range(2))
    assert first["Signature-Input"] != second["Signature-Input"]
    assert "private_key" not in repr(signer) and signer.keyid in repr(signer)


# --- Key files ----------------------------------------------------------------------------------


def test_a_key_file_that_cannot_be_used_is_named_without_its_content(tmp_path: Path) -> None:
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("secret words\n")
    rsa_pem = tmp_path / "rsa.pem"
    rsa_pem.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    for path, why in [
        (tmp_path / "missing.pem", "cannot read"),
        (not_pem, "not an unencrypted PEM private key"),
        (rsa_pem, "not an Ed25519 key"),
    ]:
        with pytest.raises(KeyFileError) as caught:
            load_private_key(path)
        assert str(caught.value).startswith(f"{path}: {why}")
        assert "secret" not in str(caught.value) and "BEGIN" not in str(caught.value)


def test_the_middleware_signs_sets_from_and_warns_of_a_key_others_can_read(
    rfc_key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rfc_key_file.chmod(0o644)
    settings = {"SIGNATURE_KEY_FILE": str(rfc_key_file), "SIGNATURE_AGENT": AGENT + "/",
                "FROM_ADDRESS": "ops@example.org"}  # fmt: skip
    with caplog.at_level("INFO"):
        middleware = IdentityMiddleware.from_crawler(get_crawler(settings_dict=settings))
    assert "can be read by other users than its owner: chmod 600 it" in caplog.text
    assert "keyid poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U" in caplog.text
    assert "MC4CAQAw" not in caplog.text
    request = Request("https://docs.example.org/a?b=1", headers={"From": "other@example.org"})
    middleware.process_request(request)
    assert request.headers[b"From"] == b"other@example.org"  # a request's own From wins
    assert request.headers[b"Signature-Agent"] == f'sig1="{AGENT}"'.encode()
    first = request.headers[b"Signature"]
    middleware.process_request(request)  # a retry: signed again, not twice
    assert len(request.headers.getlist(b"Signature")) == 1
    assert request.headers[b"Signature"] != first
    plain = Request("https://docs.example.org/")
    middleware.process_request(plain)
    assert plain.headers[b"From"] == b"ops@example.org"
    local = Request("data:,no server")
    middleware.process_request(local)
    assert b"Signature" not in local.headers
    rfc_key_file.chmod(0o600)
    caplog.clear()
    IdentityMiddleware.from_crawler(get_crawler(settings_dict=settings))
    assert "chmod" not in caplog.text


def test_the_middleware_is_off_unless_configured() -> None:
    with pytest.raises(NotConfigured):
        IdentityMiddleware.from_crawler(get_crawler())


# --- Settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("ops@example.org", None),
        ("Crawl Ops <ops@example.org>", None),
        ("", None),
        ("ops", "must be one mailbox such as ops@example.org, got 'ops'"),
        ("a@example.org, b@example.org", "must be one mailbox"),
        ("ops@example.org\r\nX-Injected: 1", "must be one line of ASCII"),
        ("opé@example.org", "must be one line of ASCII"),
    ],
)
def test_from_address_must_be_one_mailbox(value: str, problem: str | None) -> None:
    found = value_problem("FROM_ADDRESS", value)
    assert found == problem if problem is None else found and found.startswith(problem)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("https://crawler.example.org", None),
        ("https://crawler.example.org/", None),
        ("https://crawler.example.org:8443", None),
        ("http://crawler.example.org", "must be an https origin"),
        ("https://crawler.example.org/keys", "without a path"),
        ("https://crawler.example.org/?a", "without a path"),
        ("https://ops:pw@crawler.example.org", "without a user or password"),
        ("crawler.example.org", "must be an https origin"),
    ],
)
def test_signature_agent_must_be_an_https_origin(value: str, problem: str | None) -> None:
    found = value_problem("SIGNATURE_AGENT", value)
    assert found == problem if problem is None else found and problem in found


def test_a_key_file_without_signature_agent_is_refused() -> None:
    values = {"SIGNATURE_KEY_FILE": "/etc/crawl/botkey.pem", "SIGNATURE_AGENT": ""}
    assert check_settings(values, values.get).problems == [
        "SIGNATURE_KEY_FILE: needs SIGNATURE_AGENT: the https origin that publishes the key "
        "directory (a signed request must carry Signature-Agent)"
    ]
    values["SIGNATURE_AGENT"] = AGENT
    assert check_settings(values, values.get).problems == []


def test_a_site_config_sets_the_identity_and_a_bad_from_is_refused(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text(
        'name = "good"\n[settings]\nFROM_ADDRESS = "ops@example.org"\n'
        f'SIGNATURE_AGENT = "{AGENT}/"\n'
    )
    (tmp_path / "bad.toml").write_text('name = "bad"\n[settings]\nFROM_ADDRESS = "nobody"\n')
    sites, errors = load_all_sites(str(tmp_path))
    assert sites["good"].settings["SIGNATURE_AGENT"] == AGENT
    assert sites["good"].settings["FROM_ADDRESS"] == "ops@example.org"
    [error] = errors.values()
    assert str(error) == (
        f'{tmp_path / "bad.toml"}: settings.FROM_ADDRESS: must be one mailbox such as '
        'ops@example.org, got "nobody"'
    )


# --- scrapy botkey ------------------------------------------------------------------------------


def _scrapy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(PROJECT), SCRAPY_SETTINGS_MODULE="crawler.settings"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _botkey(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _scrapy(tmp_path, "botkey", *args)


def test_botkey_writes_a_private_key_the_directory_and_the_info_page(tmp_path: Path) -> None:
    done = _botkey(
        tmp_path, "out", "--agent", AGENT, "--contact", "Crawl Ops <ops@example.org>",
        "--purpose", "A search index of <em>docs</em>",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    key_path = tmp_path / "out" / "botkey.pem"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    key = load_private_key(key_path)
    keyid = jwk_thumbprint(public_jwk(key.public_key()))
    jwks = tmp_path / "out" / ".well-known" / "http-message-signatures-directory"
    assert jwks.read_bytes() == key_directory([key.public_key()])
    assert f"keyid {keyid}" in done.stdout
    assert "Content-Type: application/http-message-signatures-directory+json" in done.stdout
    assert f"SIGNATURE_AGENT={AGENT}" in done.stdout
    pem_body = b"".join(key_path.read_bytes().splitlines()[1:-1]).decode()
    assert pem_body not in done.stdout + done.stderr
    page = (tmp_path / "out" / "bot.html").read_text()
    assert "User-agent: crawler-bot\nDisallow: /" in page
    assert "mailto:ops@example.org" in page and "Crawl Ops &lt;ops@example.org&gt;" in page
    assert "A search index of &lt;em&gt;docs&lt;/em&gt;" in page  # escaped, not markup
    assert f'keyid="{keyid}"' in page and f"{AGENT}/.well-known/" in page
    # run again: the key is kept, the files rebuilt from it
    again = _botkey(tmp_path, "out", "--agent", AGENT)
    assert again.returncode == 0, again.stderr
    assert "existing Ed25519 key" in again.stdout and f"keyid {keyid}" in again.stdout


def test_botkey_rotates_keys_as_the_draft_asks(tmp_path: Path) -> None:
    """5.5.2: publish the new key beside the old, then drop the old one."""
    out = tmp_path / "out"
    jwks = out / ".well-known" / "http-message-signatures-directory"

    def listed() -> list[str]:
        return [entry["kid"] for entry in json.loads(jwks.read_bytes())["keys"]]

    def current() -> str:
        return jwk_thumbprint(public_jwk(load_private_key(out / "botkey.pem").public_key()))

    assert _botkey(tmp_path, "out", "--agent", AGENT).returncode == 0
    first = current()
    done = _botkey(tmp_path, "out", "--agent", AGENT, "--rotate")
    assert done.returncode == 0, done.stderr
    second = current()
    assert second != first and listed() == [second, first]
    assert f"also listing retired keys {first}" in done.stdout
    retired = out / f"retired-{first}.pem"
    assert stat.S_IMODE(retired.stat().st_mode) == 0o600
    assert _botkey(tmp_path, "out", "--agent", AGENT).returncode == 0
    assert listed() == [second, first]  # nothing dropped unless asked
    assert _botkey(tmp_path, "out", "--agent", AGENT, "--drop-retired").returncode == 0
    assert listed() == [second]


def test_botkey_refuses_an_agent_that_is_not_an_https_origin(tmp_path: Path) -> None:
    done = _botkey(tmp_path, "out", "--agent", "http://crawler.example/keys")
    assert done.returncode == 1
    assert "must be an https origin" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_crawl_with_an_unusable_identity_is_refused_before_it_starts(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.2:9/\n")
    key = tmp_path / "botkey.pem"
    key.write_text("not a key\n")
    crawl = ["crawl", "web", "-a", f"seeds={seeds}", "-s", "ALLOW_PRIVATE_ADDRESSES=True"]
    signing = ["-s", f"SIGNATURE_KEY_FILE={key}", "-s", f"SIGNATURE_AGENT={AGENT}"]
    done = _scrapy(tmp_path, *crawl, *signing)
    assert done.returncode == 2
    assert f"crawl web refused: {key}: not an unencrypted PEM private key" in done.stderr
    done = _scrapy(tmp_path, *crawl, "-s", "FROM_ADDRESS=ops")
    assert done.returncode == 2
    assert "crawl web refused: FROM_ADDRESS: must be one mailbox" in done.stderr
