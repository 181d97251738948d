"""A labelled near-duplicate set of *real* pages, and its judgement pair by pair and in crawl order.

Run from the project root::

    .venv/bin/python bench/realpages.py --install        # apt-get the documentation packages
    .venv/bin/python bench/realpages.py                  # tuning part and held-out part
    .venv/bin/python bench/realpages.py --per-tree 60 --split tune
    .venv/bin/python bench/realpages.py --split tune --seed 11 --show   # another sample; misses

Pages come from documentation trees that Debian packages (and a rustup toolchain, when present)
install as HTML, one *host* per tree, several generators: Sphinx (python3.11-doc), gtk-doc
(libglib2.0-doc), Doxygen (libeigen3-doc, in libeigen3-dev/html), asciidoc manual pages of one
command family (git-doc),
javadoc (openjdk-17-doc), rustdoc and mdBook (rust-doc or rustup), DocBook (valgrind), and
nodejs's generator. Missing trees are skipped and named.

Labels come from construction, with real edits of the real HTML:

* **originals**: up to ``--per-tree`` pages of each tree (a seeded sample of distinct files:
  byte-identical files under two names are taken once; pages of one tree share its template, so
  any two are a hard negative; the git manual pages are one command family);
* **positives**, each of exactly one original: ``boilerplate`` (a version banner at the top, a
  footer with a build date, every year in the page moved), ``date`` (a "Last updated" line under
  the heading, dates in the page changed), ``paragraph`` (one paragraph of real prose from another
  tree added after the first paragraph), ``mirror`` (the same bytes on a mirror host) and
  ``mirror_edit`` (a mirror with its own banner and footer).

Two judgements, each on the tuning part and the held-out part (``hash(url) % 4 == 0`` of the
pages of every tree, and every page of the ``HELD_OUT_TREES`` whole):

1. **pair by pair**: for every positive (original, variant) and every hard negative (each
   original with its most similar sibling by exact shingle Jaccard of the visible text, and a
   random sibling), a fresh detector sees A then B; B flagged as a duplicate of A is a positive
   decision (the detector gets the main text and the ``<title>``, as the pipeline gives them).
   ``cold``: the detector knows nothing else; ``warm``: it starts with the host's template
   model learned from the host's originals (as a crawl would have learned it).
2. **crawl order**: one detector sees every page once, hosts interleaved round robin, each host
   in path order, variants of one host after their original: a distinct page flagged as a
   duplicate of a page of another group is *merged* (the issue's "9 %"); a variant flagged as a
   duplicate of its own group is found.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import random
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.content.html import parse_html
from crawler.content.neardup import NearDuplicateDetector
from crawler.content.normalize import normalize_text
from crawler.content.shingles import shingle_set

PACKAGES = ["python3.11-doc", "libglib2.0-doc", "libeigen3-doc", "git-doc", "openjdk-17-doc"]


def _rustup() -> str:
    """One rustup toolchain's docs: a stable one, else any (a nightly-only machine). Never all
    of them: two toolchains hold the same pages, which would be sampled as distinct pages."""
    for toolchain in ("stable-*", "*-*"):
        found = sorted(glob.glob(os.path.expanduser(
            f"~/.rustup/toolchains/{toolchain}/share/doc/rust/html")))
        if found:
            return found[0]
    return os.path.expanduser("~/.rustup/toolchains/none/share/doc/rust/html")


RUSTUP = _rustup()

# (tree name, generator, glob patterns)
TREES: list[tuple[str, str, list[str]]] = [
    ("python-library", "sphinx", ["/usr/share/doc/python3.11-doc/html/library/*.html"]),
    ("python-capi", "sphinx", ["/usr/share/doc/python3.11-doc/html/c-api/*.html"]),
    ("glib", "gtk-doc", ["/usr/share/doc/libglib2.0-doc/glib/*.html"]),
    ("gio", "gtk-doc", ["/usr/share/doc/libglib2.0-doc/gio/*.html"]),
    ("eigen", "doxygen", ["/usr/share/doc/libeigen3-dev/html/class*.html"]),
    ("git", "asciidoc", ["/usr/share/doc/git-doc/git-*.html"]),
    ("java-base", "javadoc", ["/usr/share/doc/openjdk-17-doc/api/java.base/java/*/*.html",
                              "/usr/share/doc/openjdk-17-doc/api/java.base/java/util/*/*.html"]),
    ("rust-std", "rustdoc", [f"{RUSTUP}/std/*/*.html",
                             "/usr/share/doc/rust-doc/html/std/*/*.html"]),
    ("rust-core", "rustdoc", [f"{RUSTUP}/core/*/*.html"]),
    ("rust-book", "mdbook", [f"{RUSTUP}/book/*.html", "/usr/share/doc/rust-doc/html/book/*.html"]),
    ("cargo", "mdbook", [f"{RUSTUP}/cargo/*/*.html"]),
    ("nodejs", "nodejs", ["/usr/share/doc/nodejs/api/*.html"]),
    ("valgrind", "docbook", ["/usr/share/doc/valgrind/html/*.html"]),
    ("libxslt", "gtk-doc", ["/usr/share/doc/libxslt1-dev/html/*.html",
                            "/usr/share/doc/libxslt1-dev/**/*.html"]),
]
# Whole trees never used for tuning: generators the tuning part has siblings of, not the pages.
HELD_OUT_TREES = frozenset({"gio", "rust-core", "cargo", "valgrind"})
KINDS = ("boilerplate", "date", "paragraph", "mirror", "mirror_edit")
MAX_BYTES = 1_500_000


@dataclass
class Page:
    url: str
    host: str
    tree: str
    generator: str
    html: str
    group: int  # pages of one group are near-duplicates of each other
    kind: str = "original"
    split: str = "tune"
    main_text: str = ""
    title: str = ""


def install() -> None:
    """Install the documentation packages (Debian; needs root)."""
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
                   check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _files(patterns: Iterable[str]) -> list[str]:
    for pattern in patterns:
        found = sorted(f for f in glob.glob(pattern, recursive=True)
                       if 1500 < os.path.getsize(f) <= MAX_BYTES)
        if found:
            return found
    return []


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


_YEAR = re.compile(r"\b(19[89]\d|20[0-3]\d)\b")
_ISO_DATE = re.compile(r"\b(20[0-3]\d)-([01]\d)-([0-3]\d)\b")
_BODY = re.compile(r"<body[^>]*>", re.IGNORECASE)
_BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)
_H1_END = re.compile(r"</h1\s*>", re.IGNORECASE)
_P_END = re.compile(r"</p\s*>", re.IGNORECASE)
_MONTHS = "January February March April May June July August September October November December"


def _insert_after(html: str, pattern: re.Pattern[str], snippet: str, fallback: re.Pattern[str],
                  start: int = 0) -> str:
    m = pattern.search(html, start) or fallback.search(html)
    if m is None:
        return snippet + html
    return html[: m.end()] + snippet + html[m.end():]


def _date(rng: random.Random) -> str:
    return f"{rng.choice(_MONTHS.split())} {rng.randint(1, 28)}, {rng.randint(2015, 2026)}"


def _chrome(html: str, rng: random.Random) -> str:
    """A new version banner and build footer; every year in the page moved."""
    version = f"{rng.randint(1, 9)}.{rng.randint(0, 30)}"
    banner = (f'<div class="version-warning">This page documents version {version}. '
              f'<a href="/latest/">Read the documentation of the latest release</a>.</div>')
    footer = (f'<div class="site-footer">Copyright {rng.randint(2015, 2026)} the authors. '
              f'Last built on {_date(rng)}. Built with a documentation generator.</div>')
    html = _YEAR.sub(lambda m: str(int(m.group(1)) + rng.randint(1, 3)), html)
    html = _insert_after(html, _BODY, banner, _BODY)
    ends = list(_BODY_END.finditer(html))
    if not ends:
        return html + footer
    at = ends[-1].start()
    return html[:at] + footer + html[at:]


def make_variant(page: Page, kind: str, rng: random.Random, prose: list[str]) -> Page:
    """One real edit of ``page``'s HTML (see the module docstring)."""
    html, host, path = page.html, page.host, page.url.split("/", 3)[3]
    if kind == "boilerplate":
        html = _chrome(html, rng)
    elif kind == "date":
        html = _ISO_DATE.sub(lambda m: f"{m.group(1)}-{rng.randint(1, 12):02d}-"
                             f"{rng.randint(1, 28):02d}", html)
        html = _YEAR.sub(lambda m: str(int(m.group(1)) + 1), html)
        html = _insert_after(html, _H1_END, f"<p>Last updated: {_date(rng)}</p>", _BODY)
    elif kind == "paragraph":
        h1 = _H1_END.search(html)
        html = _insert_after(html, _P_END, f"<p>{rng.choice(prose)}</p>", _BODY,
                             h1.end() if h1 else 0)
    elif kind == "mirror":
        host = f"mirror.{host}"
    elif kind == "mirror_edit":
        host = f"mirror.{host}"
        html = _chrome(html, rng)
    query = "" if kind.startswith("mirror") else f"?rev={kind}"
    return Page(f"http://{host}/{path}{query}", host, page.tree, page.generator, html,
                page.group, kind, page.split)


def build(per_tree: int = 80, variants: float = 0.6, seed: int = 7) -> tuple[list[Page], list[str]]:
    """(pages: originals then variants, trees skipped). Deterministic for a machine's packages."""
    rng = random.Random(seed)
    originals: list[Page] = []
    skipped: list[str] = []
    for tree, generator, patterns in TREES:
        files = _files(patterns)
        if len(files) < 4:
            skipped.append(tree)
            continue
        files.sort(key=lambda f: _stable(f"{seed}:{f}"))
        taken: list[str] = []
        digests: set[bytes] = set()
        for f in files:
            with open(f, "rb") as fh:
                digest = hashlib.blake2b(fh.read(), digest_size=16).digest()
            if digest in digests:
                continue  # the same bytes under two names (the rust book's index.html and
                # title-page.html) are one page, not a hard negative
            digests.add(digest)
            taken.append(f)
            if len(taken) == per_tree:
                break
        files = sorted(taken)
        root = os.path.commonpath(files) if len(files) > 1 else os.path.dirname(files[0])
        host = f"{tree}.docs.test"
        for f in files:
            rel = os.path.relpath(f, root)
            url = f"http://{host}/{rel}"
            split = "held-out" if tree in HELD_OUT_TREES or _stable(url) % 4 == 0 else "tune"
            with open(f, "rb") as fh:
                html = fh.read().decode("utf-8", "replace")
            originals.append(Page(url, host, tree, generator, html, len(originals), split=split))
    for page in originals:
        parsed = parse_html(page.html)
        page.main_text, page.title = parsed.main_text, parsed.title
    # Prose for added paragraphs: real paragraphs of other trees' main text.
    prose = [line for p in originals for line in p.main_text.split("\n")
             if 40 <= len(line.split()) <= 90 and line.count("(") < 3]
    rng.shuffle(prose)
    prose = prose[:2000] or ["A paragraph of added text that explains the function further."]
    out: list[Page] = list(originals)
    for page in originals:
        if rng.random() < variants:
            kind = KINDS[rng.randrange(len(KINDS))]
            variant = make_variant(page, kind, rng, [p for p in prose if p not in page.main_text])
            parsed = parse_html(variant.html)
            variant.main_text, variant.title = parsed.main_text, parsed.title
            out.append(variant)
    return out, skipped


# --- judgement ---------------------------------------------------------------------------


def _detector(**kwargs: float) -> NearDuplicateDetector:
    return NearDuplicateDetector(**kwargs)  # type: ignore[arg-type]


def hard_negatives(originals: list[Page], rng: random.Random) -> list[tuple[Page, Page]]:
    """Each original with its most similar sibling (exact Jaccard of visible-text shingles) and
    a random sibling of the same tree."""
    by_tree: dict[str, list[Page]] = defaultdict(list)
    for p in originals:
        by_tree[p.tree].append(p)
    pairs: set[tuple[int, int]] = set()
    index = {id(p): i for i, p in enumerate(originals)}
    for pages in by_tree.values():
        sets = [shingle_set(normalize_text(parse_html(p.html, main_text=False).text), 3)
                for p in pages]
        for i, a in enumerate(sets):
            best, best_j = None, -1.0
            for j, b in enumerate(sets):
                if i == j:
                    continue
                jac = len(a & b) / len(a | b) if a | b else 1.0
                if jac > best_j:
                    best, best_j = j, jac
            if best is not None:
                pairs.add((index[id(pages[best])], index[id(pages[i])]))
            other = rng.randrange(len(pages))
            if other != i:
                pairs.add((index[id(pages[other])], index[id(pages[i])]))
    return [(originals[a], originals[b]) for a, b in sorted(pairs)]


def pair_by_pair(
    pages: list[Page], warm: bool, show: bool = False, **params: float
) -> dict[str, float]:
    originals = {p.group: p for p in pages if p.kind == "original"}
    positives = [(originals[p.group], p) for p in pages if p.kind != "original"]
    negatives = hard_negatives(list(originals.values()), random.Random(3))
    host_pages: dict[str, list[Page]] = defaultdict(list)
    for p in pages:
        host_pages[p.host].append(p)
    warm_models: dict[str, tuple[int, set[int]]] = {}
    if warm:  # each host's template model, learned from its originals as a crawl would
        for host, host_list in host_pages.items():
            learner = _detector(**params)
            for other in host_list:
                if other.kind == "original":
                    learner.observe(other.url, other.main_text)
            model = learner.templates
            warm_models[host] = (model.pages(host), set(model.template(host)))
    tp = fp = fn = tn = 0
    misses: dict[str, int] = defaultdict(int)
    wrong: list[str] = []
    for (a, b), label in [*((pair, True) for pair in positives),
                          *((pair, False) for pair in negatives)]:
        det = _detector(**params)
        if warm:
            for host in {a.host, b.host}:
                det.templates.seed(host, *warm_models[host])
        det.check(a.url, a.main_text, title=a.title)
        flagged = det.check(b.url, b.main_text, title=b.title).duplicate_of == a.url
        if label and flagged:
            tp += 1
        elif label:
            fn += 1
            misses[b.kind] += 1
            wrong.append(f"missed {b.kind}: {b.url} ({len(a.main_text.split())} / "
                         f"{len(b.main_text.split())} words)")
        elif flagged:
            fp += 1
            wrong.append(f"false positive: {b.url} of {a.url}")
        else:
            tn += 1
    result: dict[str, float] = {
        "positives": len(positives), "negatives": len(negatives),
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0, "fp": fp, "fn": fn,
    }
    result.update({f"missed[{k}]": v for k, v in misses.items()})
    if show:
        print("\n".join(f"    {line}" for line in wrong))
    return result


def in_crawl_order(pages: list[Page]) -> list[Page]:
    """The order a polite crawl meets the pages: hosts interleaved, each in path order, variants
    after their original."""
    per_host: dict[str, list[Page]] = defaultdict(list)
    for p in sorted(pages, key=lambda p: (p.url.split("?")[0], p.kind != "original")):
        per_host[p.host].append(p)
    queues = [per_host[h] for h in sorted(per_host)]
    order: list[Page] = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def crawl_order(pages: list[Page], **params: float) -> dict[str, float]:
    order = in_crawl_order(pages)
    det = _detector(**params)
    group_of: dict[str, int] = {}
    seen_groups: set[int] = set()
    distinct = merged = found = expected = wrong = 0
    started = time.perf_counter()
    for p in order:
        group_of[p.url] = p.group
        decision = det.check(p.url, p.main_text, title=p.title)
        first = p.group not in seen_groups
        seen_groups.add(p.group)
        dup_group = group_of.get(decision.duplicate_of) if decision.duplicate_of else None
        if first:
            distinct += 1
            merged += decision.is_duplicate
        else:
            expected += 1
            found += dup_group == p.group
            wrong += decision.is_duplicate and dup_group != p.group
    elapsed = time.perf_counter() - started
    return {
        "pages": len(order), "distinct": distinct, "merged": merged,
        "merged_share": merged / distinct if distinct else 0.0,
        "recall": found / expected if expected else 1.0, "wrong": wrong,
        "ms_per_page": 1000 * elapsed / len(order),
    }


def costs(pages: list[Page]) -> None:
    """Parse and main-text cost on the set's ~30 KB pages; detector time and bytes per page."""
    import tracemalloc

    mid = [p for p in pages if p.kind == "original" and 20_000 <= len(p.html) <= 40_000][:120]
    for label, flag in (("parse_html, links + text", False), ("parse_html + main text", True)):
        started = time.process_time()
        for _ in range(3):
            for p in mid:
                parse_html(p.html, main_text=flag)
        ms = 1000 * (time.process_time() - started) / (3 * len(mid))
        print(f"{label}: {ms:.2f} ms/page on {len(mid)} pages of 20-40 KB")
    # What the first check imports (numpy's set routines, ...) is code, not state: warm up on
    # a detector of its own first.
    _detector().check("http://warm.up/", mid[0].main_text if mid else "warm up text")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    det = _detector()
    started = time.process_time()
    for i, p in enumerate(pages):
        det.check(p.url, p.main_text, title=p.title)
        if i % 100 == 99:
            det.drain()  # the pipeline appends the journal to its file every 2 s
    cpu = time.process_time() - started
    det.drain()
    det._merge_buffer()  # count the index as it stands after a merge
    size = tracemalloc.get_traced_memory()[0] - before
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    fixed = sum(
        stat.size for stat in snapshot.statistics("filename")
        if stat.traceback[0].filename.endswith(("shingles.py",))
    )
    print(f"detector: {1000 * cpu / len(pages):.2f} ms/page (tracemalloc on), state "
          f"{size / len(pages):.0f} B/page over {len(pages)} pages ({det.originals} originals), "
          f"of which {fixed / len(pages):.0f} B/page are fixed-size tables (the shingler's "
          f"powers, {fixed / 1e3:.0f} KB whatever the number of pages)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--install", action="store_true", help="apt-get the packages, then exit")
    ap.add_argument("--per-tree", type=int, default=80)
    ap.add_argument("--split", choices=["tune", "held-out", "both"], default="both")
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--costs", action="store_true", help="only the cost figures")
    ap.add_argument("--seed", type=int, default=7, help="which sample of each tree (build seed)")
    ap.add_argument("--show", action="store_true",
                    help="list the missed positives and false positives (warm)")
    args = ap.parse_args()
    if args.install:
        install()
        return
    started = time.perf_counter()
    pages, skipped = build(args.per_tree, seed=args.seed)
    params = {} if args.threshold is None else {"threshold": args.threshold}
    trees = sorted({(p.tree, p.generator) for p in pages})
    print(f"built {len(pages)} pages ({sum(p.kind == 'original' for p in pages)} originals) of "
          f"{len(trees)} trees in {time.perf_counter() - started:.1f} s; skipped: {skipped}")
    print("trees:", ", ".join(f"{t} ({g})" for t, g in trees))
    if args.costs:
        costs(pages)
        return
    splits = ["tune", "held-out"] if args.split == "both" else [args.split]
    for split in splits:
        part = [p for p in pages if p.split == split]
        print(f"\n== {split}: {len(part)} pages")
        for warm in (False, True):
            r = pair_by_pair(part, warm, args.show and warm, **params)
            print(f"pair by pair ({'warm' if warm else 'cold'}): " +
                  ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                            for k, v in r.items()))
        r = crawl_order(part, **params)
        print("crawl order: " + ", ".join(
            f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
