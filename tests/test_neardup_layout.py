"""The shared near-duplicate store's layout where it decides Redis's cost: the hashes a page
looks a host up in are hashtables from the first commit (a listpack, below
``hash-max-listpack-entries`` hosts, is scanned field by field at every look-up), and an
original's record alone says it is one (no record table beside the records)."""

from __future__ import annotations

from crawler.backends.redis.neardup import RedisNearDuplicateDetector
from tests.redis_support import RedisServer, fresh_key, redis_server  # noqa: F401


def test_the_host_hashes_are_hashtables_and_records_say_what_is_an_original(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    client = redis_server.client()
    worker = RedisNearDuplicateDetector(client, fresh_key())
    text = "a page of its own words, long enough to be compared with the others"
    assert worker.check("http://a.test/1", text).kind == "new"
    assert worker.check("http://b.test/2", text).kind == "exact"
    keys = worker.keys
    for key in (keys.versions, keys.host_counts):
        assert client.object("encoding", key) == b"hashtable"
    assert not list(client.scan_iter(match=keys.pattern("o")))
    (record,) = worker.store.records([1])
    assert record is not None and record[8:12] == bytes((0, 0, 0, 1))  # host id 1
    assert worker.store.records([2]) == [None]  # the copy has an id, no record
