"""A partition's letter: the links and OPIC cash one page found for hosts of a partition its
worker does not own, carried to that partition's owner through its inbox
(:mod:`crawler.backends.redis.mail`, which reads and writes the inboxes), and the letter's bytes
there. Apart from the inboxes: what a letter holds and how it travels is one job, the streams
that carry it another.

A letter's bytes (msgpack, never pickle: what comes out of a shared Redis is data, not code)
are an array ``[hosts, policies, referrers, adds, credits]``:

==========  ===================================================================================
hosts       the distinct host names of the letter's links, in order of first use
policies    the distinct crawl policy labels of its links and credits ("" the site's default)
referrers   the distinct referrers of its links: the page that sent the letter, once, where
            each entry would carry it as a delta against its own URL that shares nothing
            with it (the link leads to another partition's host)
adds        3 items per link: the entry without its referrer, cash and policy
            (:func:`crawler.backends.redis.entries.pack_entry`: its host's index in
            ``hosts``, the URL relative to its host as text, depth, payload, seen key), a tag
            ``((policy x len(referrers) + referrer) x 8 + priority) x 4 + first x 2 +
            force`` (indexes into the tables; the priority clamped to the front queues, as
            the owner's frontier would), and the OPIC cash, nil when it is the previous
            link's (0.0 before the first): a page hands each of its links the same share,
            so a letter holds one float
credits     3 items per URL seen before that the page gives cash to: its identity (seen key or
            URL), cash (nil: the previous credit's, 0.0 before the first), policy index
==========  ===================================================================================

Host names, referrers and the links' URL tails travel as text (UTF-8), not in the static
Huffman code the queues use (:mod:`crawler.frontier.urlcode`): a letter lives in its inbox
until its owner acknowledges it (seconds), so its bytes matter little, while coding a URL in
Python costs its sender ~10-20k instructions and decoding it the owner as much (the owner
codes only the links it queues, not those it has seen before). An entry's ``id`` (a store's
row id) does not travel: the owner's store gives its own.

Size, measured with ``.venv/bin/python bench/letter_bytes.py`` on the 7,611 real documentation
links of this machine's /usr/share/doc HTML (31 trees, one host each, crawled breadth-first as
``bench/referrer_bytes.py`` does; each page's links one letter, 17.6 links a letter; each page
moved to another host, as a letter's page always is): 49.3 B a link under depth order, 49.7 B
under OPIC (cash 1/links of the page; Huffman-coded: 30.6 and 31.0 B). The packed entries
alone take 39.9 B: a letter adds ~4 B a link (msgpack's bin header, the tag, the nil cash)
and its page's URL once. A letter of one link costs 123.0 B (its host and referrer are its
own). In Redis (7.0) the inbox holds a page letter for ~55 B a link (``MEMORY USAGE``) until
it is acknowledged and deleted, a one-link letter for ~151 B.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from crawler.backends.redis.entries import pack_entry, unpack_entry
from crawler.frontier.api import Entry
from crawler.frontier.mercator import FRONT_QUEUES, MercatorFrontier
from crawler.frontier.store import url_key

_LAST_QUEUE = FRONT_QUEUES - 1  # an add's priority travels in its tag, clamped as queued
_FORCE, _FIRST = 1, 2  # in an add's tag


@dataclass
class Letter:
    """What one page sends one partition: links to queue, and cash for URLs seen before.

    ``adds``: (entry, force, first) as :meth:`crawler.frontier.api.Frontier.add` takes them,
    the entry's ``cash`` and ``policy`` included. ``credits``: (identity, cash, crawl policy
    label) of URLs the page links to that were seen before: OPIC cash goes to them without
    queueing them again (identity: ``crawler.frontier.store.identity``)."""

    adds: list[tuple[Entry, bool, bool]] = field(default_factory=list)
    credits: list[tuple[str | int, float, str]] = field(default_factory=list)

    def deliver(self, frontier: MercatorFrontier, keys: Sequence[int] = ()) -> None:
        """Queue the letter in its partition's frontier (the owner's): the cash, then the
        links, plain ones in one batch; ``keys``: the seen keys of its adds (``entry_key``),
        when the caller computed them already."""
        if self.credits:
            frontier.credit(self.credits)
        plain = [i for i, (_, force, first) in enumerate(self.adds) if not force and not first]
        if plain:
            some = [keys[i] for i in plain] if keys else ()
            frontier.add_many([self.adds[i][0] for i in plain], some)
        for entry, force, first in self.adds:
            if force or first:
                frontier.add(entry, force=force, first=first)

    def plain(self) -> bool:
        """Whether it carries links only, none forced or first (no cash for URLs seen)."""
        if self.credits:
            return False
        for _, force, first in self.adds:  # noqa: SIM110 - a generator: a function, a frame
            if force or first:
                return False
        return True

    def seen_keys(self) -> tuple[list[int], list[int]]:
        """Its links' seen keys (``entry_key``), and those of the links not forced (whose
        owner tests them): one pass, no comprehensions (a function and a frame each)."""
        keys: list[int] = []
        tests: list[int] = []
        for entry, force, _ in self.adds:
            keys.append(key := entry.key or url_key(entry.url))  # (entry_key, inline)
            if not force:
                tests.append(key)
        return keys, tests


def deliver_all(
    frontier: MercatorFrontier, letters: Sequence[Letter], keys: Sequence[Sequence[int]]
) -> None:
    """:meth:`Letter.deliver` of each of ``letters`` in order (``keys``: each one's seen
    keys), the links of consecutive letters that carry nothing else (no cash, no forced or
    first request) in one ``add_many``: one pass of the frontier's intake for an inbox's
    letters, not one a letter (a page's letter to a partition holds a link or two). Not under
    a page budget: a host reaching it within one batch has the rest of the batch marked
    seen, which letters apart would leave unseen."""
    if frontier.max_pages_per_host is not None:
        for i, letter in enumerate(letters):
            letter.deliver(frontier, keys[i])
        return
    batch: list[Entry] = []
    batch_keys: list[int] = []
    for i, letter in enumerate(letters):
        if not letter.plain():
            if batch:
                frontier.add_many(batch, batch_keys)
                batch, batch_keys = [], []
            letter.deliver(frontier, keys[i])
        else:
            for entry, _, _ in letter.adds:  # (a loop: a comprehension is a function)
                batch.append(entry)
            batch_keys += keys[i]
    if batch:
        frontier.add_many(batch, batch_keys)


def _cash_or_nil(cash: float, previous: float) -> float | None:
    return None if cash == previous else float(cash)


def pack_letter(letter: Letter, pack: Callable[[Any], bytes] | None = None) -> bytes:
    """The letter's bytes in an inbox (see the module docstring); ``pack``: the caller's
    ready ``msgpack.Packer(use_bin_type=True).pack`` (``packb`` makes a Packer at each call:
    ~0.9 us of a letter's ~5)."""
    hosts: dict[str, int] = {}
    policies: dict[str, int] = {}
    referrers: dict[str, int] = {}
    for entry, _, _ in letter.adds:
        hosts.setdefault(entry.host, len(hosts))
        policies.setdefault(entry.policy, len(policies))
        referrers.setdefault(entry.referrer, len(referrers))
    for _, _, policy in letter.credits:
        policies.setdefault(policy, len(policies))
    n_referrers = len(referrers)
    adds: list[Any] = []
    previous = 0.0
    for entry, force, first in letter.adds:
        priority = min(max(entry.priority, 0), _LAST_QUEUE)
        tag = (
            ((policies[entry.policy] * n_referrers + referrers[entry.referrer]) << 3 | priority)
            << 2
            | (_FORCE if force else 0)
            | (_FIRST if first else 0)
        )
        packed = pack_entry(entry, hosts[entry.host], queue=priority, letter=True)
        adds += [packed, tag, _cash_or_nil(entry.cash, previous)]
        previous = entry.cash
    credits: list[Any] = []
    previous = 0.0
    for identity, cash, policy in letter.credits:
        credits += [identity, _cash_or_nil(cash, previous), policies[policy]]
        previous = cash
    tables = [list(hosts), list(policies), list(referrers), adds, credits]
    return pack(tables) if pack is not None else msgpack.packb(tables, use_bin_type=True)


def unpack_letter(blob: bytes) -> Letter:
    """The letter :func:`pack_letter` made ``blob`` of; ValueError when it is not one."""
    try:
        hosts, policies, referrers, adds, credits = msgpack.unpackb(blob, raw=False)
        n_policies, n_referrers = len(policies), len(referrers)
        letter = Letter()
        cash = 0.0
        for i in range(0, len(adds), 3):
            packed, tag, sent = adds[i : i + 3]
            if tag < 0:  # an index below 0 would pick a table's last item
                raise ValueError(f"tag {tag}")
            policy, referrer = divmod(tag >> 5, n_referrers)
            entry = unpack_entry(packed, hosts, tag >> 2 & 7)
            if policy >= n_policies:
                raise ValueError(f"tag {tag}")
            cash = cash if sent is None else float(sent)
            entry.cash, entry.policy = cash, policies[policy]
            entry.referrer = referrers[referrer]
            letter.adds.append((entry, bool(tag & _FORCE), bool(tag & _FIRST)))
        cash = 0.0
        for i in range(0, len(credits), 3):
            identity, sent, policy = credits[i : i + 3]
            cash = cash if sent is None else float(sent)
            letter.credits.append((identity, cash, policies[policy]))
    except (ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError,
            ZeroDivisionError) as exc:  # fmt: skip
        raise ValueError(f"not a letter: {exc}") from None
    return letter
