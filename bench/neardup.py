"""Benchmark of near-duplicate detection: quality on the labelled set, speed, memory.

Run from the project root::

    .venv/bin/python bench/neardup.py            # everything (~4 min)
    .venv/bin/python bench/neardup.py --quick    # smaller samples (~1 min)
    .venv/bin/python bench/neardup.py --only speed,memory

It prints:

1. precision and recall at the default settings on the labelled set (several seeds), per kind
   of variant, and the exact-Jaccard gap between the hardest positive and the hardest negative;
2. the sweep that justifies the defaults: shingle size x permutations x threshold;
3. what happens without boilerplate removal (shingles of the whole visible text, of raw HTML);
4. the LSH band design: the share of pairs of similarity exactly t that become candidates, with
   datasketch's own parameters for t and with ours (query lower, verify);
5. pages/s of the decision on ~5 KB text pages, per stage;
6. the cost of main-text extraction (ms/page), separately, next to a bare lxml parse;
7. memory per document of the LSH (tracemalloc).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lxml.html
import numpy as np
from datasketch import MinHash, MinHashLSH

from crawler.content.html import parse_html
from crawler.content.maintext import main_text
from crawler.content.neardup import (
    DEFAULT_NUM_PERM,
    DEFAULT_SHINGLE_SIZE,
    DEFAULT_THRESHOLD,
    NearDuplicateDetector,
)
from crawler.content.neardup_features import ANCHORS
from crawler.content.normalize import normalize_text
from crawler.content.shingles import shingle_hashes32, shingle_set
from devsite.testset import (
    LabelledSet,
    build_labelled_set,
    render_page,
    text_pages,
)

Extract = Callable[[str], str]


def evaluate(
    labelled: LabelledSet,
    texts: tuple[list[str], list[str]],
    shingle_size: int = DEFAULT_SHINGLE_SIZE,
    num_perm: int = DEFAULT_NUM_PERM,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, float]:
    """Feed originals, then variants, through a detector the way a crawl would.

    A variant flagged as a duplicate of its own original (or of another variant of it that was
    missed earlier) is a true positive; flagged as a duplicate of anything else, a false positive
    (and a miss); an original flagged at all, a false positive.
    """
    originals, variants = texts
    detector = NearDuplicateDetector(shingle_size, num_perm, threshold)
    group: dict[str, int] = {}
    tp = fp = 0
    missed: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for i, (page, text) in enumerate(zip(labelled.originals, originals, strict=True)):
        group[page.url] = i
        if detector.check(page.url, text).is_duplicate:
            fp += 1
    for page, text in zip(labelled.variants, variants, strict=True):
        assert page.original is not None
        kinds[page.kind] += 1
        group[page.url] = page.original
        decision = detector.check(page.url, text)
        if decision.duplicate_of is None:
            missed[page.kind] += 1
        elif group.get(decision.duplicate_of) == page.original:
            tp += 1
        else:
            fp += 1
            missed[page.kind] += 1
    result = {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / len(labelled.variants),
        "fp": fp,
        "fn": sum(missed.values()),
    }
    for kind, n in kinds.items():
        result[f"recall[{kind}]"] = 1 - missed[kind] / n
    return result


def exact_gap(labelled: LabelledSet, texts: tuple[list[str], list[str]], k: int) -> tuple:
    """(lowest exact Jaccard of a positive pair, highest of a negative pair) at shingle size k."""
    orig = [shingle_set(normalize_text(t), k) for t in texts[0]]
    var = [shingle_set(normalize_text(t), k) for t in texts[1]]

    def jac(a: set[int], b: set[int]) -> float:
        return len(a & b) / len(a | b) if a | b else 1.0

    pos = [jac(var[i], orig[p.original or 0]) for i, p in enumerate(labelled.variants)]
    neg = [jac(a, b) for a, b in itertools.combinations(orig, 2)]
    return min(pos), max(neg), float(np.percentile(neg, 99.9))


def labelled_sets(seeds: Sequence[int], variants: int) -> list[tuple[LabelledSet, tuple]]:
    out = []
    for seed in seeds:
        labelled = build_labelled_set(pages=110, variants_per_page=variants, seed=seed)
        texts = (
            [main_text(p.html) for p in labelled.originals],
            [main_text(p.html) for p in labelled.variants],
        )
        out.append((labelled, texts))
    return out


def merged(results: list[dict[str, float]]) -> dict[str, float]:
    out = {k: statistics.fmean(r[k] for r in results) for k in results[0]}
    out["fp"] = sum(r["fp"] for r in results)
    out["fn"] = sum(r["fn"] for r in results)
    return out


def section_quality(sets: list[tuple[LabelledSet, tuple]]) -> None:
    n_orig = sum(len(s.originals) for s, _ in sets)
    n_var = sum(len(s.variants) for s, _ in sets)
    print(f"\n== 1. Labelled set: {len(sets)} seeds, {n_orig} originals on template-sharing sites "
          f"({n_orig * (n_orig // len(sets) - 1) // 2} negative pairs), {n_var} positives")
    res = merged([evaluate(s, t) for s, t in sets])
    print(f"defaults: shingle={DEFAULT_SHINGLE_SIZE} num_perm={DEFAULT_NUM_PERM} "
          f"threshold={DEFAULT_THRESHOLD}")
    print(f"  precision {res['precision']:.4f}  recall {res['recall']:.4f}  "
          f"(false positives {res['fp']}, misses {res['fn']}; targets >= 0.99 / >= 0.97)")
    print("  recall per kind: " + ", ".join(
        f"{k[7:-1]} {v:.3f}" for k, v in sorted(res.items()) if k.startswith("recall[")))
    print("  exact Jaccard, lowest positive vs highest negative pair, by shingle size; their")
    print(f"  distance to the threshold {DEFAULT_THRESHOLD} in standard deviations (sd) of a "
          f"{DEFAULT_NUM_PERM}-permutation")
    print("  MinHash estimate, and the widest margin any threshold would give:")
    for k in (1, 2, 3, 4, 5):
        gaps = [exact_gap(s, t, k) for s, t in sets]
        lo = min(g[0] for g in gaps)
        hi = max(g[1] for g in gaps)
        p999 = max(g[2] for g in gaps)
        sd_lo = (lo * (1 - lo) / DEFAULT_NUM_PERM) ** 0.5
        sd_hi = (hi * (1 - hi) / DEFAULT_NUM_PERM) ** 0.5
        margin = (lo - hi) / (sd_lo + sd_hi)
        centre = (lo * sd_hi + hi * sd_lo) / (sd_lo + sd_hi)
        t = DEFAULT_THRESHOLD
        print(f"    k={k}: positives >= {lo:.3f} ({(lo - t) / sd_lo:+.1f} sd), negatives <= "
              f"{hi:.3f} ({(t - hi) / sd_hi:+.1f} sd; 99.9%: {p999:.3f}); best: {margin:.1f} sd "
              f"both ways at {centre:.2f}")


def section_sweep(sets: list[tuple[LabelledSet, tuple]], quick: bool) -> None:
    print("\n== 2. Sweep (precision / recall / decision pages/s on the labelled pages)")
    grid_k = (2, 3, 4, 5)
    grid_perm = (64, 128) if quick else (64, 128, 256)
    grid_t = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8)
    for k, perm in itertools.product(grid_k, grid_perm):
        cells = []
        for t in grid_t:
            t0 = time.perf_counter()
            res = merged([evaluate(s, x, k, perm, t) for s, x in sets])
            pages = sum(len(s.originals) + len(s.variants) for s, _ in sets)
            rate = pages / (time.perf_counter() - t0)
            ok = "*" if res["precision"] >= 0.99 and res["recall"] >= 0.97 else " "
            cells.append(f"{t:.2f}:{res['precision']:.3f}/{res['recall']:.3f}{ok}")
        print(f"  k={k} perm={perm:3d} ({rate:5.0f}/s) " + " ".join(cells))
    print("  (* = meets both targets)")


def section_no_boilerplate_removal(sets: list[tuple[LabelledSet, tuple]]) -> None:
    print("\n== 3. Without boilerplate removal (defaults otherwise)")
    for name, extract in (
        ("whole visible text", lambda h: parse_html(h).text),
        ("raw HTML", lambda h: h),
    ):
        results = []
        for labelled, _ in sets:
            texts = (
                [extract(p.html) for p in labelled.originals],
                [extract(p.html) for p in labelled.variants],
            )
            results.append(evaluate(labelled, texts))
        res = merged(results)
        print(f"  {name:20s} precision {res['precision']:.4f} recall {res['recall']:.4f} "
              f"(false positives {res['fp']})")


def section_lsh_design(trials: int) -> None:
    """How often a pair of similarity exactly t becomes a candidate: datasketch's banded LSH
    (its own b, r for t) against this detector's anchor index (a pair is a candidate when the
    two bottom-k sketches share one of their ANCHORS smallest hashes), before verification."""
    print(f"\n== 4. Candidates for pairs of similarity exactly t ({trials} pairs each, "
          f"num_perm={DEFAULT_NUM_PERM}, {ANCHORS} anchors)")
    rng = np.random.default_rng(5)
    perms = MinHash(num_perm=DEFAULT_NUM_PERM).permutations
    for t in (0.5, 0.6, 0.8):
        # sets of 1000 elements with |A & B| / |A | B| = t exactly
        inter = round(2000 * t / (1 + t))
        own = 1000 - inter
        stock = MinHashLSH(threshold=t, num_perm=DEFAULT_NUM_PERM)
        hits_stock = hits_ours = 0
        for _ in range(trials):
            items = rng.integers(0, 2**32, inter + 2 * own, dtype=np.uint64).tolist()
            a = MinHash(DEFAULT_NUM_PERM, hashfunc=int, permutations=perms, scheme="affine32")
            b = MinHash(DEFAULT_NUM_PERM, hashfunc=int, permutations=perms, scheme="affine32")
            a.update_batch(items[: inter + own])
            b.update_batch(items[:inter] + items[inter + own :])
            hits_stock += _collides(a, b, stock.b, stock.r)
            anchors_a = np.unique(np.array(items[: inter + own], np.uint32))[:ANCHORS]
            anchors_b = np.unique(np.array(items[:inter] + items[inter + own :],
                                           np.uint32))[:ANCHORS]
            hits_ours += bool(np.intersect1d(anchors_a, anchors_b).size)
        print(f"  t={t}: datasketch params b={stock.b:2d} r={stock.r:2d}: "
              f"{hits_stock / trials:5.1%} candidates | ours, {ANCHORS} anchors: "
              f"{hits_ours / trials:5.1%}, then verified by estimated Jaccard >= t")


def _collides(a: MinHash, b: MinHash, bands: int, rows: int) -> bool:
    ha, hb = a.hashvalues, b.hashvalues
    return any(np.array_equal(ha[i * rows : (i + 1) * rows], hb[i * rows : (i + 1) * rows])
               for i in range(bands))


def section_speed(n_pages: int) -> None:
    pages = text_pages(n_pages, size=5000)
    # a fifth of them are near-duplicates of others, as on a real crawl
    rng = np.random.default_rng(1)
    for i in rng.choice(len(pages), len(pages) // 5, replace=False):
        words = pages[int(i)].split()
        j = int(rng.integers(0, len(words)))
        words[j] = "edited"
        pages[int(i)] = " ".join(words)
    urls = [f"http://host{i % 50}.test/page/{i}" for i in range(len(pages))]
    avg_words = statistics.fmean(len(p.split()) for p in pages)
    print(f"\n== 5. Decision speed: {len(pages)} text pages of ~5 KB ({avg_words:.0f} words), "
          "one core")
    detector = NearDuplicateDetector()
    t0 = time.perf_counter()
    for url, text in zip(urls, pages, strict=True):
        detector.check(url, text)
    total = time.perf_counter() - t0
    print(f"  NearDuplicateDetector.check: {len(pages) / total:,.0f} pages/s "
          f"({total / len(pages) * 1e3:.3f} ms/page; target >= 1,000 pages/s)")
    tail = pages[-500:]
    for k in sorted({2, 3, DEFAULT_SHINGLE_SIZE}):
        probe = detector if k == DEFAULT_SHINGLE_SIZE else NearDuplicateDetector(shingle_size=k)
        if probe is not detector:
            for url, text in zip(urls, pages, strict=True):
                probe.check(url, text)
        found = [len(probe._candidates(probe.features(p).sketch[:ANCHORS], None))
                 for p in tail]
        print(f"    candidates verified per page with {len(pages)} pages indexed, {k}-word "
              f"shingles: "
              f"{statistics.fmean(found):.1f} (99th percentile {np.percentile(found, 99):.0f})")
    n = min(len(pages), 2000)
    norm = [normalize_text(p) for p in pages[:n]]
    stages = {
        "normalize_text": lambda i: normalize_text(pages[i]),
        "shingle hashes (numpy)": lambda i: shingle_hashes32(norm[i], DEFAULT_SHINGLE_SIZE),
        "features (bottom-k sketch)": lambda i: detector.features(pages[i]),
    }
    for name, fn in stages.items():
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        print(f"    {name:24s} {(time.perf_counter() - t0) / n * 1e3:.3f} ms/page")
    # For reference: datasketch's documented ways on the same shingles (sha1 per shingle).
    shingles = [s.encode() for s in _shingle_strings(norm[0])]
    for name, fn in (
        ("datasketch update() loop", lambda: [m.update(s) for m in [MinHash()] for s in shingles]),
        ("datasketch update_batch", lambda: MinHash().update_batch(shingles)),
    ):
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        print(f"    ({name}, sha1: {(time.perf_counter() - t0) / 50 * 1e3:.3f} ms for "
              f"{len(shingles)} shingles)")


def _shingle_strings(normalized: str) -> list[str]:
    words = normalized.split()
    k = DEFAULT_SHINGLE_SIZE
    return [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]


def section_extraction(sets: list[tuple[LabelledSet, tuple]]) -> None:
    labelled = sets[0][0]
    docs = [p.html for p in labelled.originals + labelled.variants]
    size = statistics.fmean(len(h.encode()) for h in docs) / 1024
    print("\n== 6. Main-text extraction (separate from the decision)")
    big = _big_page(labelled)
    for name, pages in ((f"labelled pages (~{size:.0f} KB)", docs),
                        (f"one large page ({len(big) // 1024} KB) x 50", [big] * 50)):
        raw = [h.encode() for h in pages]
        for label, fn in (
            ("main_text", lambda b: main_text(b, "utf-8")),
            ("lxml parse only", lambda b: lxml.html.document_fromstring(b)),
            ("spider's parse_html", lambda b: parse_html(b, "utf-8")),
        ):
            t0 = time.perf_counter()
            for b in raw:
                fn(b)
            ms = (time.perf_counter() - t0) / len(raw) * 1e3
            print(f"  {name:28s} {label:20s} {ms:6.2f} ms/page")


def _big_page(labelled: LabelledSet) -> str:
    """A long article (~88 KB of HTML) in one site's template."""
    import random

    from devsite.testset import Document, make_sites, random_chrome, sentence_pool

    rng = random.Random(1)
    paragraphs = tuple(p for page in labelled.originals[:40] for p in page.doc.paragraphs)
    text, out = 0, []
    for p in paragraphs:
        out.append(p)
        text += len(p)
        if text > 80_000:
            break
    doc = Document("big", "A long page", tuple(out))
    titles = [p.doc.title for p in labelled.originals]
    site = make_sites(rng, 1, titles)[0]
    return render_page(site, doc, random_chrome(rng, titles, sentence_pool()))


def section_memory(n_docs: int) -> None:
    pages = text_pages(n_docs, size=3000, seed=9)
    print(f"\n== 7. Memory per document ({n_docs} distinct pages, tracemalloc)")
    for perm, t in ((DEFAULT_NUM_PERM, DEFAULT_THRESHOLD), (64, DEFAULT_THRESHOLD), (128, 0.7)):
        detector = NearDuplicateDetector(num_perm=perm, threshold=t)
        stock = MinHashLSH(threshold=t, num_perm=perm)
        minhashes = []
        for p in pages:
            m = MinHash(num_perm=perm)
            m.update_batch([s.encode() for s in _shingle_strings(normalize_text(p))])
            minhashes.append(m)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for i, m in enumerate(minhashes):
            stock.insert(i, m, check_duplication=False)
        lsh_bytes = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        del stock
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for i, p in enumerate(pages):
            detector.check(f"http://h{i % 40}.test/{i}", p)
        all_bytes = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        print(f"  num_perm={perm:3d} threshold={t}: datasketch MinHashLSH {lsh_bytes / n_docs:,.0f}"
              f" B/doc; whole detector (anchor index, packed sketches, URL/fingerprint tables, "
              f"template models) {all_bytes / n_docs:,.0f} B/doc")


SECTIONS = ("quality", "sweep", "template", "lsh", "speed", "extraction", "memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller samples")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if unknown := only - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    seeds = (11, 12) if args.quick else (11, 12, 13, 14)
    t0 = time.perf_counter()
    sets = labelled_sets(seeds, variants=6) if only & {"quality", "sweep", "template",
                                                       "extraction"} else []
    if "quality" in only:
        section_quality(sets)
    if "sweep" in only:
        section_sweep(sets[:1] if args.quick else sets[:2], args.quick)
    if "template" in only:
        section_no_boilerplate_removal(sets)
    if "lsh" in only:
        section_lsh_design(300 if args.quick else 1000)
    if "speed" in only:
        section_speed(2000 if args.quick else 10000)
    if "extraction" in only:
        section_extraction(sets)
    if "memory" in only:
        section_memory(5000 if args.quick else 20000)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
