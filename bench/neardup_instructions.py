"""redis-server's instructions per page of the shared near-duplicate store alone, split so that
what runs by the clock does not hide what a page costs.

    .venv/bin/python bench/neardup_instructions.py [--pages N] [--tree DIR] [--keep DIR]

The pages of ``bench/partition_costs.py --real``'s devsite crawl (``bench/shared.py``'s
``_devsite_order``: 40 hosts of 50 pages, the capacity a crawl's workers have), checked by two
workers taking turns (``bench/shared.py``'s ``_real_run``, with ``--tree``'s code: another
checkout, e.g. ``git archive <commit> | tar -x -C DIR``) against a ``redis-server`` under
valgrind's callgrind. Printed per page: all instructions; ``serverCron``'s, which runs ten
times a second whatever the load (a run that takes longer under a busy machine counts more of
it: ``bench/shared.py --instructions`` and ``bench/partition_costs.py --callgrind`` include
it); the rest; ``EXEC`` (the commit's writes) and ``APPEND`` (the anchor postings) inclusive.

Measured 2026-12-06, 2,080 pages (0 decisions differ from the in-process detector), at a
load of 15-24: 30ac88d 312.1k a page without ``serverCron`` (EVALSHA 145.4k); with the
commit's answer one string: 307.3k (EVALSHA 140.1k, APPEND 25.5k). Sending a new original's
postings with the worker's next commit instead of their own round trip saved 2.6k more a page
(304.7k): declined, as it leaves a killed worker's last page pending until a repair.
Then (7d0cfad: 305.6k, EVALSHA 140.0k): the record table :o dropped (a record says its own
version), 290.0k; the record sent apart and :v's forget and floor stored first, 286.0k; :v and
:hc kept hashtables (a host's field found without a scan), 267.2k; one packed argument and
fewer C calls in the commit, 259.6k (EVALSHA 111.3k, APPEND 25.5k). Declined: the host counts
as :v fields (one key less to the commit), -0.7k. The commit a ``WATCH``/``MULTI``/``EXEC``
transaction checked in the worker instead of the script (lua/neardup_commit.lua, deleted):
213.5k (EXEC 31.1k, APPEND 25.5k; 214.2k another run), 0 decisions differ; the read, the
records and the postings sent on the lean path (crawler/backends/redis/wire.py): 213.0k.
Then (f561c1d: 212.8k, EXEC 31.0k): the anchor postings on the crawl's tag, appended by the
commit's transaction (no :pend to write, read and clear): 201.0k-201.9k (EXEC 68.3k, APPEND
25.3k).
"""

from __future__ import annotations

import argparse
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench import shared


def inclusive(dump: Path) -> dict[str, int]:
    """Inclusive instructions of the functions this bench reports, and the total."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for name, pattern in (
        ("total", r"\s+PROGRAM TOTALS"),
        ("serverCron", r"\s+\S*:serverCron "),
        ("execCommand", r"\s+\S*:execCommand "),
        ("appendCommand", r"\s+\S*:appendCommand "),
    ):
        m = re.search(r"([\d,]+) \([^)]*\)" + pattern, out)
        found[name] = int(m.group(1).replace(",", "")) if m else 0
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=0, help="the first N pages (0: all)")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--keep", default="", help="keep callgrind's dump in this directory")
    args = parser.parse_args()
    order = shared._devsite_order()
    order = order[: args.pages] if args.pages else order
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "pages.pickle"
        path.write_bytes(pickle.dumps(order))
        with shared.callgrind_redis(out) as (port, pid):
            run = shared._real_run(
                port, Path(args.tree).resolve(), path, pid, shared.DEFAULT_CAPACITY
            )
            time.sleep(0.5)
            dumps = sorted(out.glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)
            got = inclusive(dumps[-1])
    n = len(order)
    rest = got["total"] - got["serverCron"]
    print(
        f"{n} pages, {run['differ']} decisions differ from in-process; instructions a page: "
        f"{got['total'] / n / 1e3:,.1f}k, serverCron {got['serverCron'] / n / 1e3:,.1f}k, "
        f"without it {rest / n / 1e3:,.1f}k (EXEC {got['execCommand'] / n / 1e3:,.1f}k, "
        f"APPEND {got['appendCommand'] / n / 1e3:,.1f}k)"
    )


if __name__ == "__main__":
    main()
