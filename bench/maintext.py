"""Main-text extraction against trafilatura: word precision and recall, milliseconds per page.

Reproduces the comparison quoted in ``crawler/content/maintext.py``'s docstring. trafilatura is
not a dependency of the project (it pulls in a dozen packages), so it goes in a venv of its own,
never the project's::

    python3 -m venv /tmp/trafvenv
    /tmp/trafvenv/bin/pip install -r requirements.txt trafilatura==2.3.1 lxml_html_clean
    /tmp/trafvenv/bin/python bench/maintext.py                 # sections 0, 1 and 2
    /tmp/trafvenv/bin/python bench/maintext.py --only-real     # section 0 only
    /tmp/trafvenv/bin/python bench/maintext.py --only-real --list   # with the tuning pages
    /tmp/trafvenv/bin/python bench/maintext.py --real ''       # sections 0 and 1
    /tmp/trafvenv/bin/python bench/maintext.py --pages 40 --repeat 1   # quicker

(``lxml_html_clean``: trafilatura's justext fallback imports ``lxml.html.clean``, a separate
package since lxml 5.2.)

Word precision is the share of the words extracted (lower-cased, punctuation stripped, counted
as a multiset) that are the page's content; recall the share of the content's words extracted;
F1 their harmonic mean. Per page, then the mean over pages.

0. **Real pages, labelled** (``bench/maintext_set``: 60 pages of blogs, news, CMSs and site
   builders, docs; its README says where each comes from and how its label was cut). The
   tuning part and the held-out part apart (``label.held_out``: a fixed rule on the page's
   name), mean P, R, F1, pages under F1 0.5, empty results; CPU per page over all. ``--list``
   prints each tuning page's precision/recall for every extractor, never a held-out page's.
   Both extractors get the page's bytes and decode them by its own charset.
1. **The synthetic labelled set** of ``devsite/testset.py`` (``build_labelled_set``: originals
   and their variants on template-heavy sites whose known content is each page's title and
   paragraphs). Per page, then the mean and the worst page.
2. **Real HTML** under ``/usr/share/doc`` (or ``--real DIR``): Debian's documentation pages have
   no labels, so only the cost and the two extractors' agreement (the share of one's words the
   other kept too) are printed.

Time is CPU time of this process (the machine may be shared), the best of ``--repeat`` passes
over the same pages, both extractors given the same ``str`` (``bytes`` in section 0);
trafilatura with its defaults (``extract(html)``, plain text) and with ``fast=True`` (no
fallback extractors).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.content.maintext import main_text
from devsite.testset import Page, build_labelled_set

sys.path.insert(0, str(Path(__file__).resolve().parent / "maintext_set"))
from label import entries, read_page  # bench/maintext_set/label.py

Extract = Callable[[str], str]
_WORD = re.compile(r"\w+")
USAGE = (
    "bench/maintext.py needs trafilatura, in a venv of its own (not the project's):\n"
    "  python3 -m venv /tmp/trafvenv\n"
    "  /tmp/trafvenv/bin/pip install -r requirements.txt trafilatura==2.3.1 lxml_html_clean\n"
    "  /tmp/trafvenv/bin/python bench/maintext.py"
)


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def precision_recall(extracted: str, truth: Counter[str]) -> tuple[float, float]:
    got = words(extracted)
    shared = sum((got & truth).values())
    total = sum(got.values())
    return (shared / total if total else 0.0), shared / sum(truth.values())


def f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def known_content(page: Page) -> Counter[str]:
    return words(" ".join((page.doc.title, *page.doc.paragraphs)))


def cpu_ms_per_page(extract: Extract, docs: Sequence[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for html in docs:
            extract(html)
        best = min(best, time.process_time() - t0)
    return best / len(docs) * 1e3


def extractors() -> dict[str, Extract]:
    import trafilatura

    version = trafilatura.__version__
    return {
        "main_text": main_text,
        f"trafilatura {version}": lambda h: trafilatura.extract(h) or "",
        f"trafilatura {version} fast": lambda h: trafilatura.extract(h, fast=True) or "",
    }


def section_real_labelled(found: dict[str, Extract], repeat: int, listing: bool) -> None:
    """The real pages of ``bench/maintext_set`` against their labels: the tuning part and the
    held-out part apart (the held-out pages are scored, never listed)."""
    pages = entries()
    # bytes, as the crawler gets them: each extractor decodes them by the page's own charset
    raw = [read_page(e.page) for e in pages]
    truths = [words(e.label.read_text(encoding="utf-8")) for e in pages]
    size = statistics.fmean(len(b) for b in raw) / 1024
    held = sum(e.held_out for e in pages)
    print(f"== 0. Real labelled pages (bench/maintext_set): {len(pages)} pages of ~{size:.0f} KB "
          f"from {len({e.platform for e in pages})} kinds of site; {len(pages) - held} tuning, "
          f"{held} held out (name's SHA-1 starts with 0-4)")
    print(f"  {'extractor':28s} {'part':8s} {'ms/page':>8s} {'P':>6s} {'R':>6s} {'F1':>6s} "
          f"{'F1<.5':>6s} {'empty':>6s}")
    per_page: dict[str, list[tuple[float, float, float]]] = {}
    for name, extract in found.items():
        run: Callable[[bytes], str] = extract  # type: ignore[assignment]  (both take bytes)
        scores = []
        for body, truth in zip(raw, truths, strict=True):
            p, r = precision_recall(run(body), truth)
            scores.append((p, r, f1(p, r)))
        per_page[name] = scores
        ms = cpu_ms_per_page(run, raw, repeat)
        for part, held_out in (("tuning", False), ("held-out", True), ("all", None)):
            chosen = [s for s, e in zip(scores, pages, strict=True)
                      if held_out is None or e.held_out == held_out]
            empty = sum(1 for p, r, _ in chosen if p == 0 and r == 0)
            cost = f"{ms:8.2f}" if part == "all" else " " * 8
            print(f"  {name:28s} {part:8s} {cost} "
                  f"{statistics.fmean(s[0] for s in chosen):6.3f} "
                  f"{statistics.fmean(s[1] for s in chosen):6.3f} "
                  f"{statistics.fmean(s[2] for s in chosen):6.3f} "
                  f"{sum(1 for s in chosen if s[2] < 0.5):6d} {empty:6d}")
    if listing:
        names = list(found)
        print(f"\n  tuning pages, F1 per extractor ({', '.join(names)}):")
        for i, e in enumerate(pages):
            if not e.held_out:
                cells = " ".join(f"{per_page[n][i][0]:.2f}/{per_page[n][i][1]:.2f}"
                                 for n in names)
                print(f"    {e.name:42s} {e.platform[:22]:22s} P/R {cells}")
    print()


def section_labelled(found: dict[str, Extract], pages: int, variants: int, seed: int,
                     repeat: int) -> None:
    labelled = build_labelled_set(pages=pages, variants_per_page=variants, seed=seed)
    all_pages = labelled.originals + labelled.variants
    docs = [p.html for p in all_pages]
    truths = [known_content(p) for p in all_pages]
    size = statistics.fmean(len(h.encode()) for h in docs) / 1024
    print(f"== 1. Labelled set (devsite/testset.py, seed {seed}): {len(docs)} pages of "
          f"~{size:.0f} KB, {len(labelled.originals)} originals on template-heavy sites")
    print(f"  {'extractor':28s} {'ms/page':>8s} {'precision':>10s} {'worst':>6s} "
          f"{'recall':>7s} {'worst':>6s}")
    for name, extract in found.items():
        scores = [precision_recall(extract(h), t) for h, t in zip(docs, truths, strict=True)]
        ms = cpu_ms_per_page(extract, docs, repeat)
        precision = [p for p, _ in scores]
        recall = [r for _, r in scores]
        print(f"  {name:28s} {ms:8.2f} {statistics.fmean(precision):10.3f} "
              f"{min(precision):6.2f} {statistics.fmean(recall):7.3f} {min(recall):6.2f}")


def real_pages(root: Path, limit: int, max_kb: int) -> list[tuple[str, str]]:
    """(path, HTML) of up to ``limit`` HTML files of 1 to ``max_kb`` KB under ``root``, spread
    over its packages (nodejs's ``all.html``, every API page in one 8 MB file, would weigh more
    than the rest together)."""
    by_tree: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*.htm*")):
        if path.is_file() and 1024 < path.stat().st_size <= max_kb * 1024:
            by_tree.setdefault(path.relative_to(root).parts[0], []).append(path)
    chosen: list[Path] = []
    while len(chosen) < limit and any(by_tree.values()):
        for tree in sorted(by_tree):  # round robin: one package's API pages do not crowd out
            if by_tree[tree] and len(chosen) < limit:
                chosen.append(by_tree[tree].pop(0))
    return [(str(p), p.read_bytes().decode("utf-8", errors="replace")) for p in chosen]


def section_real(found: dict[str, Extract], root: Path, limit: int, max_kb: int,
                 repeat: int) -> None:
    pages = real_pages(root, limit, max_kb)
    if not pages:
        print(f"\n== 2. Real HTML: none under {root}")
        return
    docs = [h for _, h in pages]
    trees = len({Path(p).relative_to(root).parts[0] for p, _ in pages})
    size = statistics.fmean(len(h.encode()) for h in docs) / 1024
    print(f"\n== 2. Real HTML: {len(docs)} pages of ~{size:.0f} KB from {trees} packages under "
          f"{root} (no labels: cost, words kept, and the share of main_text's words the other "
          "kept / of its words main_text kept)")
    ours = [words(main_text(h)) for h in docs]
    for name, extract in found.items():
        ms = cpu_ms_per_page(extract, docs, repeat)
        theirs = [words(extract(h)) for h in docs]
        kept = statistics.fmean(sum(t.values()) for t in theirs)
        line = f"  {name:28s} {ms:8.2f} ms/page  {kept:7.0f} words/page"
        if extract is not main_text:
            covered = _share(ours, theirs)
            covering = _share(theirs, ours)
            line += f"  has {covered:.2f} of main_text's, main_text has {covering:.2f} of its"
        print(line)


def _share(of: list[Counter[str]], within: list[Counter[str]]) -> float:
    """Mean over pages of the share of ``of``'s words that ``within`` has (pages with words)."""
    shares = [sum((a & b).values()) / sum(a.values())
              for a, b in zip(of, within, strict=True) if a]
    return statistics.fmean(shares) if shares else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=120, help="originals of the labelled set")
    parser.add_argument("--variants", type=int, default=3, help="variants per original")
    parser.add_argument("--seed", type=int, default=20240501, help="labelled set's seed")
    parser.add_argument("--real", default="/usr/share/doc",
                        help="folder of real HTML ('' to skip)")
    parser.add_argument("--real-pages", type=int, default=120, help="real pages at most")
    parser.add_argument("--max-kb", type=int, default=256, help="largest real page taken (KB)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (best is kept)")
    parser.add_argument("--only-real", action="store_true",
                        help="the real labelled pages only (section 0)")
    parser.add_argument("--list", action="store_true",
                        help="list the tuning pages' precision/recall (never the held-out ones)")
    args = parser.parse_args()
    try:
        found = extractors()
    except ImportError as exc:
        parser.exit(2, f"{exc}\n\n{USAGE}\n")
    t0 = time.perf_counter()
    section_real_labelled(found, args.repeat, args.list)
    if args.only_real:
        return
    section_labelled(found, args.pages, args.variants, args.seed, args.repeat)
    if args.real:
        section_real(found, Path(args.real), args.real_pages, args.max_kb, args.repeat)
    print(f"\n(total {time.perf_counter() - t0:.0f} s, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
