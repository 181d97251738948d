"""Do the spider-trap defenses cut pages of real documentation sites? Feed every link of local
HTML documentation trees through the URL policy, with the shipped defaults, as a crawl of that
tree would (one policy per tree, links in file order), and count what the new trap defenses
reject and what session-id stripping changes.

    python -m bench.doctrees [TREE ...]      # default: /usr/share/doc and the Rust docs, if present

Nothing is fetched: each file stands for the page ``http://docs.test/<path in the tree>``.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from crawler.config.defaults import (
    URL_MAX_HOSTS_PER_DOMAIN,
    URL_MAX_LENGTH,
    URL_MAX_QUERY_VARIANTS,
    URL_MAX_REPEATED_SEGMENTS,
)
from crawler.config.tuning import knob_default
from crawler.frontier.urls import UrlPolicy, strip_session_ids
from crawler.sites.policy import DATE_FUTURE_DAYS

HREF = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'#][^"']*)["']""", re.I)
HOST = "docs.test"
NEW_REASONS = {"date_distance", "query_variants", "domain_hosts"}
# The bulk of the Rust tree is 40,000 generated pages of CPU intrinsics: left out for time.
SKIP = ("/core/arch/", "/core/core_arch/")


def default_trees() -> list[str]:
    trees = ["/usr/share/doc"]
    trees += sorted(
        glob.glob(os.path.expanduser("~/.rustup/toolchains/stable-*/share/doc/rust/html"))
    )
    return [t for t in trees if os.path.isdir(t)]


def policy() -> UrlPolicy:
    return UrlPolicy(
        hosts=[HOST],
        max_url_length=URL_MAX_LENGTH,
        max_repeated_segments=URL_MAX_REPEATED_SEGMENTS,
        max_query_variants=URL_MAX_QUERY_VARIANTS,
        max_date_future_days=DATE_FUTURE_DAYS,
        max_date_past_days=knob_default("url_date_past_days"),
        max_hosts_per_domain=URL_MAX_HOSTS_PER_DOMAIN,
    )


def run(tree: str) -> dict[str, object]:
    root = Path(tree)
    p = policy()
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    pages = links = stripped = 0
    admitted: set[str] = set()
    for path in sorted(root.rglob("*.htm*")):
        rel = path.relative_to(root).as_posix()
        if any(s in "/" + rel for s in SKIP) or not path.is_file():
            continue
        pages += 1
        page_url = f"http://{HOST}/{rel}"
        for raw in [page_url.encode(), *HREF.findall(path.read_bytes())]:
            href = raw.decode("utf-8", "replace").strip()
            try:
                url = urljoin(page_url, href)
                if urlsplit(url).hostname != HOST:
                    continue
            except ValueError:
                continue
            links += 1
            reason, normalized, _ = p.check(url)
            if reason:
                reasons[reason] += 1
                examples.setdefault(reason, url)
            else:
                admitted.add(normalized)
            parts = urlsplit(url)
            stripped += strip_session_ids(parts.path, parts.query) != (parts.path, parts.query)
    return {
        "tree": tree,
        "pages": pages,
        "links": links,
        "admitted": len(admitted),
        "rejected": dict(reasons),
        "examples": examples,
        "session_stripped": stripped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*")
    args = parser.parse_args()
    for tree in args.trees or default_trees():
        start = time.monotonic()
        r = run(tree)
        new = {k: v for k, v in r["rejected"].items() if k in NEW_REASONS}  # type: ignore[union-attr]
        took = time.monotonic() - start
        print(
            f"{r['tree']}: {r['pages']} pages, {r['links']} same-site links, "
            f"{r['admitted']} distinct URLs admitted; rejected by the new trap defenses: "
            f"{new or 'none'}; all rejections: {r['rejected'] or 'none'}; "
            f"session ids stripped: {r['session_stripped']} ({took:.0f}s)"
        )
        for reason, url in r["examples"].items():  # type: ignore[union-attr]
            print(f"    e.g. {reason}: {url}")


if __name__ == "__main__":
    main()
