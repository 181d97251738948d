"""PDF readers on real files: CPU per page and word recall, and the hostile files' verdicts.

Reproduces the choice in ``crawler/content/documents.py``'s docstring. The files are Debian's
manuals under ``/usr/share/doc`` (``*.pdf`` and ``*.pdf.gz``, never downloaded). The crawl's
reader (``read_document``: pypdfium2) is always measured; pypdf and pdfminer.six only where
they import, so they go in a venv of their own, never the project's::

    .venv/bin/python bench/documents.py                      # the crawl's reader, hostile files
    python3 -m venv /tmp/docvenv
    /tmp/docvenv/bin/pip install -r requirements-dev.txt pypdf==7.1.0 pdfminer.six==20260107
    /tmp/docvenv/bin/python bench/documents.py               # all three readers

1. **CPU per page** (of this process: the machine may be shared), best of ``--repeat``
   passes over each file, the imports done before; text cut by nothing.
2. **Word recall and precision** against the HTML edition of the same manual where Debian
   ships one (bzip2, nettle): words of 3+ letters, lower-cased, counted as a multiset;
   recall = share of the HTML's words the PDF reader found, precision = share of the reader's
   words that the HTML has (page headers and footers repeat in a PDF: precision < 1).
3. **DOCX and ODT**: written by python-docx and odfpy from the longest manual's text (5,000
   paragraphs), read by the crawl (lxml on their XML) and by python-docx and odfpy themselves.
4. **Hostile files** (``devsite/documents.py``) through the crawl's document child
   (``ParseProcess`` with the crawl's limits): each file's verdict, wall and child time, and
   the child's peak memory.
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lxml import etree

from crawler.content.documents import (
    CHILD_CPU_SECONDS,
    CHILD_MEMORY,
    read_document,
)

HTML_EDITIONS = {
    "manual.pdf": Path("/usr/share/doc/bzip2/manual.html"),
    "nettle.pdf": Path("/usr/share/doc/nettle-dev/nettle.html"),
}
_WORD = re.compile(r"[A-Za-z]{3,}")


def real_pdfs(root: Path) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted([*root.rglob("*.pdf"), *root.rglob("*.pdf.gz")]):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        if data.startswith(b"%PDF-"):
            out.append((path.name.removesuffix(".gz"), data))
    return out


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def crawl_reader(data: bytes) -> tuple[int, str]:
    doc = read_document("pdf", data)
    return doc.pages, doc.text


def pypdf_reader(data: bytes) -> tuple[int, str]:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    return len(reader.pages), "\n".join(p.extract_text() or "" for p in reader.pages)


def pdfminer_reader(data: bytes) -> tuple[int, str]:
    from pdfminer.high_level import extract_text
    from pdfminer.pdfpage import PDFPage

    pages = sum(1 for _ in PDFPage.get_pages(io.BytesIO(data)))
    return pages, extract_text(io.BytesIO(data))


READERS: dict[str, Callable[[bytes], tuple[int, str]]] = {
    "pypdfium2 (crawl)": crawl_reader,
    "pypdf": pypdf_reader,
    "pdfminer.six": pdfminer_reader,
}


def _words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def _html_words(path: Path) -> Counter[str]:
    root = etree.parse(str(path), etree.HTMLParser()).getroot()
    etree.strip_elements(root, "script", "style", with_tail=False)
    return _words("".join(root.itertext()))


def readers_section(pdfs: list[tuple[str, bytes]], repeat: int) -> None:
    print(f"{'reader':18} {'file':28} {'pages':>5} {'ms/page':>8}  recall precision")
    for name, read in READERS.items():
        try:
            read(pdfs[0][1])  # imports, caches
        except ImportError:
            print(f"{name:18} not installed here (see the module docstring)")
            continue
        pages_all, cpu_all = 0, 0.0
        for file, data in pdfs:
            best = float("inf")
            for _ in range(repeat):
                start = _cpu()
                pages, text = read(data)
                best = min(best, _cpu() - start)
            pages_all += pages
            cpu_all += best
            quality = ""
            edition = HTML_EDITIONS.get(file)
            if edition is not None and edition.is_file():
                ref, got = _html_words(edition), _words(text)
                both = sum((ref & got).values())
                recall, precision = both / sum(ref.values()), both / max(1, sum(got.values()))
                quality = f"  {recall:.3f}  {precision:.3f}"
            print(f"{name:18} {file:28} {pages:5} {1000 * best / max(pages, 1):8.2f}{quality}")
        print(f"{name:18} {'ALL':28} {pages_all:5} {1000 * cpu_all / pages_all:8.2f}")


def office_section(pdfs: list[tuple[str, bytes]], repeat: int) -> None:
    """DOCX and ODT written by python-docx and odfpy from the longest manual's text, read by
    the crawl (lxml on the package's XML) and by the writers' own readers."""
    from devsite.documents import make_docx, make_odt

    longest = max((read_document("pdf", data).text for _, data in pdfs[:8]), key=len)
    paragraphs = [line for line in longest.splitlines() if line.strip()][:5000]
    docx_body, odt_body = make_docx("Manual", paragraphs), make_odt("Manual", paragraphs)

    def python_docx(body: bytes) -> str:
        import docx

        document = docx.Document(io.BytesIO(body))
        return "\n".join(p.text for p in document.paragraphs)

    def odfpy(body: bytes) -> str:
        from odf import teletype
        from odf import text as odf_text
        from odf.opendocument import load

        document = load(io.BytesIO(body))
        return "\n".join(teletype.extractText(p) for p in document.getElementsByType(odf_text.P))

    print(f"\nDOCX and ODT of {len(paragraphs)} paragraphs ({sum(map(len, paragraphs))} chars)")
    for name, read, body in [
        ("lxml (crawl) docx", lambda b: read_document("docx", b).text, docx_body),
        ("python-docx", python_docx, docx_body),
        ("lxml (crawl) odt", lambda b: read_document("odt", b).text, odt_body),
        ("odfpy", odfpy, odt_body),
    ]:
        read(body)
        best = float("inf")
        for _ in range(repeat):
            start = _cpu()
            read(body)
            best = min(best, _cpu() - start)
        print(f"  {name:18} {1000 * best:8.1f} ms CPU")


def hostile_section(pdfs: list[tuple[str, bytes]]) -> None:
    from crawler.content.child import ChildFailed
    from crawler.offload.components import ParseProcess
    from devsite import documents as made

    files = {
        "encrypted.pdf": ("pdf", made.encrypted_pdf()),
        "truncated.pdf": ("pdf", made.truncated(pdfs[0][1])),
        "10000-pages.pdf": ("pdf", made.many_pages_pdf(10_000)),
        "deflate-bomb.pdf": ("pdf", made.deflate_bomb_pdf()),
        "zip-bomb.docx": ("docx", made.zip_bomb_docx()),
    }
    print(f"\nhostile files, in the document child (memory {CHILD_MEMORY >> 20} MiB, "
          f"{CHILD_CPU_SECONDS} s CPU a document)")
    for name, (kind, body) in files.items():
        child = ParseProcess(0, timeout=3.0 * CHILD_CPU_SECONDS, memory_limit=CHILD_MEMORY,
                             cpu_seconds=CHILD_CPU_SECONDS, fallback=False)
        start = time.monotonic()
        try:
            verdict = child.call(read_document, kind, body).problem or "read"
        except ChildFailed as exc:
            verdict = exc.reason
        wall = time.monotonic() - start
        child.stop()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the children reaped so far
        print(f"  {name:18} {len(body) / 1e6:6.1f} MB  {verdict:15} {wall:6.2f} s wall  "
              f"children's peak RSS so far {usage.ru_maxrss >> 10} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/usr/share/doc"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-hostile", action="store_true")
    args = parser.parse_args()
    pdfs = real_pdfs(args.root)
    if not pdfs:
        sys.exit(f"no PDF under {args.root}")
    readers_section(pdfs, args.repeat)
    office_section(pdfs, args.repeat)
    if not args.no_hostile:
        hostile_section(pdfs)


if __name__ == "__main__":
    main()
