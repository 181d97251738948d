"""Letters sent again (``crawler.backends.redis.mail``): a send whose reply was lost with the
connection (Redis added the letters) is sent again, and the call that wrote the letters may run
again and write them alike (the frontier's guard retries a whole ``apply``). Either way an inbox
gets each letter once: its links, OPIC cash and counts are not carried twice. On a real Redis,
the reply cut by a loopback proxy.
"""

from __future__ import annotations

import pytest
import redis

from crawler.backends.redis import fence
from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.mail import Letter, Mailboxes, pack_letter
from crawler.frontier.api import Entry
from tests.frontier_contract import FakeClock, entries
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401
from tests.reply_cut import reply_cutter
from tests.test_frontier_partitioned import partitioned

COUNT = 4


def letter_of(*urls: str) -> bytes:
    return pack_letter(
        Letter(adds=[(Entry(u, u.split("/")[2], cash=0.5), False, False) for u in urls])
    )


def test_a_letter_sent_again_after_a_lost_reply_is_added_once(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    crawl = fresh_key()
    keys = [PartitionKeys(crawl, i, COUNT) for i in range(COUNT)]
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        mail = Mailboxes(proxy.client(), keys.__getitem__, "w1")
        mail.send({3: letter_of("http://c.test/1")})  # (the server has the sender's script)
        first = {1: letter_of("http://a.test/1"), 2: letter_of("http://b.test/1")}
        proxy.cut_after(keys[1].inbox.encode())
        with pytest.raises(redis.ConnectionError):
            mail.send(first)
        assert proxy.cuts == 1 and direct.xlen(keys[1].inbox) == 1  # added, reply lost
        mail.send({})  # the batch whose reply was lost goes again, first
        mail.send(dict(first))  # and the call that wrote it ran again, writing it alike
        assert [direct.xlen(k.inbox) for k in keys] == [0, 1, 1, 1]
        mail.send({1: letter_of("http://a.test/2")})  # a new letter is added
        mail.send({1: letter_of("http://a.test/1")})  # so is an old one, later: the page again
        assert direct.xlen(keys[1].inbox) == 3


def test_a_retried_apply_mails_its_letters_once(redis_server: RedisServer) -> None:  # noqa: F811
    """Worker ``a`` mails ``b``'s partitions the links it found; the reply is lost, and the
    guard runs the same ``apply`` again: each of ``b``'s inboxes holds one letter, and ``b``
    queues each link once."""
    key, clock = fresh_key(), FakeClock()
    with reply_cutter(redis_server.port) as proxy, redis_server.client() as direct:
        a = partitioned(proxy.client(), key, clock, count=COUNT, worker="a")
        b = partitioned(direct, key, clock, count=COUNT, worker="b")
        for _ in range(3):  # a hands partitions over to b at its beats
            a.beat()
            b.beat()
        assert len(a.parts) == len(b.parts) == 2
        links = entries(20, 2)  # 20 hosts over 4 partitions
        theirs = [PartitionKeys(key, i, COUNT).inbox for i in sorted(b.parts)]
        proxy.cut_after(theirs[0].encode())
        with pytest.raises(redis.ConnectionError):
            a.apply(links, [])
        assert proxy.cuts == 1
        a.apply(links, [])  # the guard's retry of the same call
        assert [direct.xlen(inbox) for inbox in theirs] == [1, 1]
        b.read_mail()
        assert len(a) + len(b) == len(links)  # every link queued once, at its host's owner


def test_a_retried_apply_whose_call_never_reached_redis_mails_once(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fenced call carrying worker ``a``'s letters fails on the way, before Redis ran it
    (its outcome unknown to ``a``), and the guard runs the same ``apply`` again: the call is
    sent again as it was, and the letters written alike by the retry go no more, so each of
    ``b``'s inboxes holds one letter."""
    key, clock = fresh_key(), FakeClock()
    with redis_server.client() as client:
        a = partitioned(client, key, clock, count=COUNT, worker="a")
        b = partitioned(client, key, clock, count=COUNT, worker="b")
        for _ in range(3):
            a.beat()
            b.beat()
        assert len(a.parts) == len(b.parts) == 2
        links = entries(20, 2)
        theirs = [PartitionKeys(key, i, COUNT).inbox for i in sorted(b.parts)]
        call = fence.transact
        failed: list[bool] = []

        def fails_once(*args: object) -> object:
            if not failed:
                failed.append(True)
                raise redis.ConnectionError("cut before it was sent")
            return call(*args)

        monkeypatch.setattr(fence, "transact", fails_once)
        with pytest.raises(redis.ConnectionError):
            a.apply(links, [])
        assert [client.xlen(inbox) for inbox in theirs] == [0, 0]
        a.apply(links, [])  # the guard's retry of the same call
        assert [client.xlen(inbox) for inbox in theirs] == [1, 1]
        b.read_mail()
        assert len(a) + len(b) == len(links)
