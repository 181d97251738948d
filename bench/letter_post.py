"""What adding a letter once costs (crawler.backends.redis.mail, lua/post.lua) against a plain
XADD: Redis's CPU per letter (INFO commandstats, the script's usec including the XADD, GET and
SET it runs), the mark's memory per sender and inbox (MEMORY USAGE), and the round trips per
send (one pipeline on one Redis, both ways).

    .venv/bin/python bench/letter_post.py [--sends 3000] [--server redis-server]

Both ways run in the same process against one fresh server, interleaved, so the machine's load
weighs on both alike: compare the ratio, not the figures.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.backends.redis.keys import PartitionKeys
from crawler.backends.redis.mail import FIELD, Letter, Mailboxes, pack_letter
from crawler.frontier.api import Entry

PARTITIONS = 16
LINKS = 17  # links per letter (bench/letter_bytes.py: 17.3 on real pages)


def letters(round_: int, per_send: int) -> dict[int, bytes]:
    """``per_send`` letters of LINKS links each, to as many partitions, unlike each other."""
    out = {}
    for i in range(per_send):
        host = f"h{i}.example.org"
        page = f"https://p.example.net/{round_}/{i}.html"
        adds = [
            (Entry(f"https://{host}/{round_}/{j}.html", host, cash=1 / LINKS, referrer=page),
             False, False)
            for j in range(LINKS)
        ]  # fmt: skip
        out[i] = pack_letter(Letter(adds=adds))
    return out


def stats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    info = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): (v["calls"], v["usec"]) for k, v in info.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--per-send", type=int, default=4, help="letters per send")
    parser.add_argument("--server", default="redis-server")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [args.server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
            run(client, args.sends, args.per_send)
        finally:
            server.terminate()
            server.wait()


def run(client: redis.Redis, sends: int, per_send: int) -> None:
    plain_keys = lambda i: PartitionKeys("plain", i, PARTITIONS)  # noqa: E731
    once_keys = lambda i: PartitionKeys("once", i, PARTITIONS)  # noqa: E731
    mail = Mailboxes(client, once_keys, "worker-1:1234")
    mail.send(letters(-1, 1))  # the script loaded
    client.config_resetstat()
    wall = {"xadd": 0.0, "post": 0.0}
    for r in range(sends):
        batch = letters(r, per_send)
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for index, blob in batch.items():
            pipe.xadd(plain_keys(index).inbox, {FIELD: blob})
        pipe.execute()
        wall["xadd"] += time.perf_counter() - started
        started = time.perf_counter()
        mail.send(batch)
        wall["post"] += time.perf_counter() - started
    got = stats(client)
    n = sends * per_send
    xadd_calls, xadd_usec = got["xadd"]
    eval_calls, eval_usec = got["evalsha"]
    assert eval_calls == n and xadd_calls == 2 * n, got  # the script's XADDs count as XADD
    plain_usec = xadd_usec / 2  # half the XADDs are the script's: as dear as the plain ones
    print(f"{n} letters of {LINKS} links ({len(batch[0])} B), {per_send} a send")
    print(f"server usec/letter: XADD {plain_usec / n:.2f}, post.lua {eval_usec / n:.2f} "
          f"(x{eval_usec / plain_usec:.2f})")
    print(f"client wall ms/send: pipeline of XADD {wall['xadd'] / sends * 1000:.3f}, "
          f"Mailboxes.send {wall['post'] / sends * 1000:.3f} (x{wall['post'] / wall['xadd']:.2f})")
    mark = f"{once_keys(0).inbox}:worker-1:1234"
    print(f"mark: {client.memory_usage(mark)} B per sender and inbox, "
          f"{client.memory_usage(mark) * PARTITIONS} B per sender over {PARTITIONS} inboxes")
    print(f"inbox memory: plain {client.memory_usage(plain_keys(0).inbox)} B, "
          f"once {client.memory_usage(once_keys(0).inbox)} B (same letters)")


if __name__ == "__main__":
    main()
