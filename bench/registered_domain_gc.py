"""What the crawl's registered-domain lookups cost the garbage collector: the objects they keep
alive (each walked by every full collection of a long crawl) and the time of a full collection
with them built, against an older checkout, the two run alternately.

    .venv/bin/python bench/registered_domain_gc.py [--baseline DIR] [--runs 3]

A crawl with the default settings builds three lookups
(``crawler.frontier.urls.registered_domain_function``: the URL policy's host budget one with
``private=True`` and one without, the canonical scope one with; crawl policies and a sharded
Redis frontier build one more each); each run builds them in a fresh process after the
crawl's heavy imports, then times ``gc.collect()`` 21 times (the median). ``--baseline``: a
checkout of the project (``git archive``) run the same way, as "before".
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

_PROBE = """
import gc, json, statistics, time
import lxml.html, scrapy, twisted.internet.reactor  # noqa: F401  (the crawl's imports)
from crawler.frontier.urls import registered_domain_function
gc.collect()
objects = len(gc.get_objects())
start = time.process_time()
lookups = [registered_domain_function(private=p) for p in (True, True, False)]
built = time.process_time() - start
assert lookups[0]("www.example.co.uk") == "example.co.uk"
gc.collect()
added = len(gc.get_objects()) - objects
times = []
for _ in range(21):
    start = time.perf_counter()
    gc.collect()
    times.append(time.perf_counter() - start)
print(json.dumps({"added": added, "built_ms": built * 1000,
                  "full_ms": statistics.median(times) * 1000}))
"""


def probe(checkout: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=checkout, env={"PYTHONPATH": str(checkout)},
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    checkouts = {"after": PROJECT}
    if args.baseline is not None:
        checkouts = {"before": args.baseline.resolve()} | checkouts
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for i in range(args.runs):
        for name, checkout in checkouts.items():
            r = probe(checkout)
            results[name].append(r)
            print(f"run {i} {name:6}: +{r['added']:,} objects, lookups built in "
                  f"{r['built_ms']:.0f} ms CPU, full collection {r['full_ms']:.1f} ms", flush=True)
    for name, rs in results.items():
        print(f"{name:6} medians: +{statistics.median(r['added'] for r in rs):,.0f} objects, "
              f"built {statistics.median(r['built_ms'] for r in rs):.0f} ms, full collection "
              f"{statistics.median(r['full_ms'] for r in rs):.1f} ms")


if __name__ == "__main__":
    main()
