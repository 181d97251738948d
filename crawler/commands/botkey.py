"""``scrapy botkey DIR``: the crawler's Web Bot Auth key, its key directory and its information
page, ready to publish.

Writes into ``DIR``:

- ``botkey.pem``: a new Ed25519 private key (PKCS#8 PEM), created with mode 0600 and never
  printed; an existing one is kept and used (run the command again to rebuild the other files);
- ``.well-known/http-message-signatures-directory``: the JWKS of its public key (``kid`` the
  RFC 7638 thumbprint, the ``keyid`` of every signature), to serve at that path of the
  ``SIGNATURE_AGENT`` origin with ``Content-Type: application/http-message-signatures-
  directory+json`` (draft-ietf-webbotauth-httpsig-protocol-00 5.5.1). Keys the directory
  already lists stay listed, so that rotation follows the draft's 5.5.2: ``--rotate`` renames
  the key to ``retired-<keyid>.pem`` and makes a new one, both published; once verifiers'
  cached copies have expired, ``--drop-retired`` lists the current key alone;
- ``bot.html``: the bot's information page, a template to complete and publish where the user
  agent's ``+URL`` points: what it crawls, for what, how to opt out, whom to write to, and how
  to verify its requests.

Then prints the settings that turn signing on. The key stays in the file: nothing here logs it.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.config.schema import SettingValueError, read_value
from crawler.net.signatures import (
    DIRECTORY_MEDIA_TYPE,
    DIRECTORY_PATH,
    DRAFT,
    KeyFileError,
    directory_keys,
    jwk_thumbprint,
    key_directory,
    load_private_key,
    new_private_key_pem,
    public_jwk,
)
from crawler.robots.rules import robots_token

KEY_FILE = "botkey.pem"
RETIRED_FILE = "retired-{keyid}.pem"
PAGE_FILE = "bot.html"

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{name}: about this crawler</title>
</head>
<body>
<h1>{name}</h1>
<p>Requests with the user agent <code>{user_agent}</code> come from this crawler.</p>

<h2>What it crawls, and for what</h2>
<p>{purpose}</p>
<p><!-- Complete: which sites or parts of the web it visits, how often it comes back, and what
becomes of the pages (an index, an archive, a data set), with how long they are kept. --></p>
<p>It reads robots.txt before any other request to a host and obeys it (RFC 9309), fetches one
page of a host at a time with a pause between fetches (longer when the host answers slowly, or
when robots.txt asks for a <code>Crawl-delay</code>), and waits as long as a
<code>429</code> or <code>503</code> answer's <code>Retry-After</code> asks.</p>

<h2>How to opt out</h2>
<p>To keep it away from your whole site, add to your <code>/robots.txt</code>:</p>
<pre>User-agent: {token}
Disallow: /</pre>
<p>A <code>Disallow</code> for a path keeps it out of that path only. Pages carrying
<code>&lt;meta name="robots" content="noindex"&gt;</code> or an <code>X-Robots-Tag: noindex</code>
header are fetched but not indexed; <code>nofollow</code> keeps their links from being
followed.</p>

<h2>Contact</h2>
<p>Write to <a href="mailto:{contact_address}">{contact}</a> (also sent as the
<code>From</code> header of every request).</p>

<h2>Verifying that a request comes from this crawler</h2>
<p>Every request is signed with HTTP Message Signatures (RFC 9421, Ed25519), as Web Bot Auth
({draft}) describes: it carries <code>Signature-Input</code> (with
<code>tag="web-bot-auth"</code> and <code>keyid="{keyid}"</code>), <code>Signature</code> and
<code>Signature-Agent: sig1="{agent}"</code>. The public key is published at
<a href="{agent}{directory_path}">{agent}{directory_path}</a>.</p>
</body>
</html>
"""


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] <directory>"

    def short_desc(self) -> str:
        return "Make the Web Bot Auth signing key, its key directory and the bot's info page"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--agent", default="", help="the https origin serving the key directory "
            "(default: SIGNATURE_AGENT)",
        )  # fmt: skip
        parser.add_argument(
            "--contact", default="", help="the operator's mailbox (default: FROM_ADDRESS)"
        )
        parser.add_argument("--purpose", default="", help="what the crawl is for, one sentence")
        parser.add_argument(
            "--rotate", action="store_true",
            help="retire the current key (still published) and make a new one",
        )  # fmt: skip
        parser.add_argument(
            "--drop-retired", action="store_true",
            help="publish the current key alone (after verifiers' caches of the directory expired)",
        )  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one directory to write the key and the files to publish into")
        settings = self.settings
        assert settings is not None
        try:
            agent = read_value("SIGNATURE_AGENT", opts.agent or settings.get("SIGNATURE_AGENT"))
            contact = read_value("FROM_ADDRESS", opts.contact or settings.get("FROM_ADDRESS"))
        except SettingValueError as exc:
            self._fail(f"--agent/--contact: {exc}")
            return
        if not agent:
            self._fail("give --agent https://... (or set SIGNATURE_AGENT): the origin whose "
                       f"{DIRECTORY_PATH} serves the key")  # fmt: skip
            return
        directory = Path(args[0])
        directory.mkdir(parents=True, exist_ok=True)
        key_path = directory / KEY_FILE
        jwks_path = directory / DIRECTORY_PATH.lstrip("/")
        try:
            listed = directory_keys(jwks_path.read_bytes()) if jwks_path.exists() else []
            if opts.rotate:
                if not key_path.exists():
                    raise KeyFileError(f"{key_path}: no key to rotate")
                retired = jwk_thumbprint(public_jwk(load_private_key(key_path).public_key()))
                key_path.rename(directory / RETIRED_FILE.format(keyid=retired))
            made = _write_new_key(key_path)
            public_key = load_private_key(key_path).public_key()
        except (KeyFileError, ValueError) as exc:
            self._fail(str(exc))
            return
        keyid = jwk_thumbprint(public_jwk(public_key))
        keys = {keyid: public_key}
        if not opts.drop_retired:  # earlier keys stay published until dropped
            keys.update((jwk_thumbprint(public_jwk(k)), k) for k in listed)
        jwks_path.parent.mkdir(parents=True, exist_ok=True)
        jwks_path.write_bytes(key_directory(keys.values()))
        page_path = directory / PAGE_FILE
        page_path.write_text(self._page(agent, contact, opts.purpose, keyid), encoding="utf-8")
        print(f"{key_path}: {'new' if made else 'existing'} Ed25519 key, keyid {keyid} (mode 0600, "
              "keep it secret)")  # fmt: skip
        others = [k for k in keys if k != keyid]
        listing = f" (also listing retired keys {', '.join(others)})" if others else ""
        print(f"{jwks_path}: publish at {agent}{DIRECTORY_PATH}{listing}")
        print(f"    with Content-Type: {DIRECTORY_MEDIA_TYPE}")
        print(f"{page_path}: complete it and publish it where the user agent's +URL points")
        print("Sign the crawl's requests with:")
        print(f"    -s SIGNATURE_KEY_FILE={key_path.resolve()} -s SIGNATURE_AGENT={agent}")
        if contact:
            print(f"    -s 'FROM_ADDRESS={contact}'")

    def _page(self, agent: str, contact: str, purpose: str, keyid: str) -> str:
        assert self.settings is not None
        user_agent = str(self.settings.get("USER_AGENT") or "")
        token = robots_token(self.settings)  # the name the robots.txt gate matches groups with
        address = contact.rsplit("<", 1)[-1].rstrip(">") if contact else "you@example.org"
        values = {
            "name": self.settings.get("BOT_NAME") or token,
            "user_agent": user_agent,
            "purpose": purpose or "<!-- Complete: what the crawl is for. -->",
            "token": token,
            "contact": contact or "you@example.org",
            "contact_address": address,
            "draft": DRAFT,
            "keyid": keyid,
            "agent": agent,
            "directory_path": DIRECTORY_PATH,
        }
        kept = {"purpose"} if not purpose else set()  # the placeholder comment stays a comment
        return PAGE.format(**{k: v if k in kept else html.escape(v) for k, v in values.items()})

    def _fail(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        self.exitcode = 1


def _write_new_key(path: Path) -> bool:
    """Create ``path`` with a new key, readable by its owner only (mode 0600 from the start: the
    key is never in a file others may read); False when a key file is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask
        out.write(new_private_key_pem())
    return True
