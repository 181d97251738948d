"""Text, title and links of the documents a crawl meets besides HTML: PDF, DOCX, ODT, plain text.

Readers, chosen with ``bench/documents.py`` (643 pages of 7 real PDFs of ``/usr/share/doc``,
CPU time on a shared 2-core machine; word recall and precision against the HTML edition of
the same manual):

* **PDF: pypdfium2** (Google's PDFium, the reader of Chromium, fuzzed for years): 0.95 ms of
  CPU a page; on the bzip2 manual recall 0.999, precision 0.989. pypdf took 9.1 ms a page
  (0.971, 0.970), pdfminer.six 24.8 ms (0.971, 0.970); on the nettle manual all three found
  the same words. The title is the document's ``/Title``, else its first line; links are the
  pages' URI link annotations (what a reader clicks, with the text under them as anchor
  text), not URLs that merely appear in the text.
* **DOCX and ODT: their XML read with lxml** (``word/document.xml``, ``content.xml``), in
  document order, tables and text boxes included, with hyperlinks (DOCX relationships, ODF
  ``text:a``): 22 ms for 5,000 paragraphs where python-docx takes 125 ms (and its
  ``paragraphs`` leave the tables out), 9 ms for ODT where odfpy takes 44 ms. Reading only
  the parts with the text keeps every byte read under a bound; python-docx loads every part
  of the package, images included.
* **Plain text**: decoded by its byte order mark, else the transport's charset, else guessed
  (:func:`crawler.content.document.decode_text`: never by a ``<meta>`` it shows, which Scrapy's
  ``response.text`` would read), title its first line.

What a hostile file can do, and what stops it (each a ``problem``, counted by the crawl as
``documents/<problem>``; the item says it in ``document_problem``):

* ``encrypted``: a PDF that needs a password (one with only an owner password opens, as in
  every reader); ``malformed``: not a file of its kind; ``truncated``: a PDF without its final
  ``%%EOF`` (PDFium rebuilds what it can: the text of the pages it found is kept);
* ``too_many_pages``: only the first :data:`MAX_PAGES` pages are read (a 10,000-page file of
  empty pages costs seconds), the text kept; text stops at ``max_text`` characters anyway;
* ``bomb``: a DOCX/ODT whose parts would expand past :data:`MAX_EXPANDED` bytes or
  :data:`MAX_RATIO` times their compressed size. An entry is read up to the size it
  declares and never further, so a zip that lies about its sizes gets cut (and is then
  ``malformed``): the declared sizes are a bound that holds;
* bytes: a file is read whole (a PDF's cross-reference table is at its end), so its bound is
  the download's, ``DOWNLOAD_MAXSIZE``;
* ``memory``, ``cpu_time``, ``parser_lost``: a parser that allocates or spins without end
  (a deflate bomb inside a PDF stream is decompressed by PDFium itself). The crawl runs these
  readers in a child process with a memory limit and a CPU-time limit per document
  (``crawler.offload.components``, :data:`CHILD_MEMORY`, :data:`CHILD_CPU_SECONDS`); these
  three are the crawl's verdicts on a child that failed, not this module's.

Free of Scrapy: the child process imports only this and its readers.
"""

from __future__ import annotations

import ctypes
import io
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from crawler.content.document import decode_text

__all__ = [
    "CHILD_CPU_SECONDS",
    "CHILD_MEMORY",
    "KINDS",
    "MAX_PAGES",
    "DocumentText",
    "document_kind",
    "read_document",
]

KINDS = ("pdf", "docx", "odt", "text")

# Pages of one PDF read at most: ~1 ms each, so a file of 10,000 empty pages costs 1 s, not 10.
MAX_PAGES = 1000
# Bytes the XML parts of a DOCX/ODT may expand to, and how many times their compressed size
# (text-heavy XML deflates 5-20 times; a zip bomb thousands of times).
MAX_EXPANDED = 64 * 1024 * 1024
MAX_RATIO = 200
# The document child's limits: address space (PDFium and Python with a big document stay under
# 300 MB) and CPU seconds per document (a 1,000-page manual takes about 1.5 s).
CHILD_MEMORY = 1024 * 1024 * 1024
CHILD_CPU_SECONDS = 20
_TITLE_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_TYPES = {
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.oasis.opendocument.text": "odt",
    "text/plain": "text",
}
_EXTENSIONS = {".pdf": "pdf", ".docx": "docx", ".odt": "odt", ".txt": "text"}


@dataclass
class DocumentText:
    """What :func:`read_document` made of a file."""

    kind: str
    title: str = ""
    text: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (URI as written, anchor text)
    pages: int = 0  # pages in the file (PDF)
    text_chars: int = 0  # characters of text before the cut to max_text
    problem: str | None = None  # why the text is missing or partial (see the module docstring)


def document_kind(content_type: str | None, url: str, head: bytes) -> str | None:
    """The kind of document (one of :data:`KINDS`) a response holds, or ``None`` (not one).

    The ``Content-Type`` decides; a generic one (none, ``application/octet-stream``, as many
    servers label what they do not know) leaves it to the file's signature and the URL's
    extension, as browsers sniff such answers (WHATWG MIME Sniffing).
    """
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    kind = _TYPES.get(mime)
    if kind is not None or mime not in ("", "application/octet-stream", "binary/octet-stream"):
        return kind
    if head.startswith(b"%PDF-"):
        return "pdf"
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    ext = path[path.rfind(".") :] if "." in path.rsplit("/", 1)[-1] else ""
    kind = _EXTENSIONS.get(ext)
    if kind in ("docx", "odt") and not head.startswith(b"PK\x03\x04"):
        return None
    return kind if kind != "text" else None  # unlabelled text could be anything


def read_document(
    kind: str, body: bytes, encoding: str | None = None, *, max_text: int = 0
) -> DocumentText:
    """Title, text (cut to ``max_text`` characters, 0: no cut) and links of a document.

    Never raises on a bad file: its problem is in the answer. Run it where a parser that spins
    or allocates without end can be stopped (the crawl's document child).
    """
    reader = _READERS[kind]
    try:
        doc = reader(body, encoding, max_text)
    except MemoryError:
        return DocumentText(kind, problem="memory")
    # no control characters in an item (XML exports and the index refuse some of them)
    doc.text = _CONTROL.sub(" ", doc.text)
    doc.text_chars = max(doc.text_chars, len(doc.text))
    if max_text and len(doc.text) > max_text:
        doc.text = doc.text[:max_text]
    if not doc.title:
        doc.title = _first_line(doc.text)
    return doc


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            return line[:_TITLE_CHARS]
    return ""


# --- PDF -------------------------------------------------------------------------------------


def _read_pdf(body: bytes, encoding: str | None, max_text: int) -> DocumentText:
    import pypdfium2 as pdfium  # imported where it runs: the crawl process never loads PDFium
    import pypdfium2.raw as raw

    doc = DocumentText("pdf")
    if b"%PDF-" not in body[:1024]:  # the header may follow up to 1 KB of junk
        doc.problem = "malformed"
        return doc
    if b"%%EOF" not in body[-2048:]:
        doc.problem = "truncated"  # kept even if PDFium rebuilds the pages it finds
    try:
        pdf = pdfium.PdfDocument(body)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code in (raw.FPDF_ERR_PASSWORD, raw.FPDF_ERR_SECURITY):
            doc.problem = "encrypted"
        elif doc.problem is None:
            doc.problem = "malformed"
        return doc
    try:
        doc.title = _clean_title(pdf.get_metadata_value("Title"))
        doc.pages = len(pdf)
        if doc.pages > MAX_PAGES and doc.problem is None:
            doc.problem = "too_many_pages"
        texts: list[str] = []
        chars = 0
        for index in range(min(doc.pages, MAX_PAGES)):
            page = pdf[index]
            try:
                textpage = page.get_textpage()
                text = textpage.get_text_bounded()
                doc.links.extend(_pdf_links(pdf, page, textpage, raw))
                textpage.close()
            finally:
                page.close()
            # PDFium ends lines with CRLF, and joins a word hyphenated at a line's end with
            # U+0002 where the hyphen was ("back\x02ground"): the word is whole again without it
            text = text.replace("\x02", "").replace("\r\n", "\n").replace("\r", "\n").strip()
            if text:
                texts.append(text)
                chars += len(text) + 1
            if max_text and chars > max_text:
                break  # the rest would be cut anyway
    finally:
        pdf.close()
    doc.text = "\n".join(texts)
    return doc


def _clean_title(value: str) -> str:
    return " ".join(value.replace("\x00", " ").split())[:_TITLE_CHARS]


def _pdf_links(pdf: Any, page: Any, textpage: Any, raw: Any) -> list[tuple[str, str]]:
    """The URI link annotations of a page (PDF 32000-1, 12.5.6.5 and 12.6.4.7), each with the
    text under its rectangle as anchor text. Only absolute URIs: a relative one would need the
    catalog's ``/URI /Base``, which writers rarely set (and a TeX writer's ``url(...)`` is no
    URI at all)."""
    links: list[tuple[str, str]] = []
    pos = ctypes.c_int(0)
    link = raw.FPDF_LINK()
    rect = raw.FS_RECTF()
    while raw.FPDFLink_Enumerate(page.raw, ctypes.byref(pos), ctypes.byref(link)):
        action = raw.FPDFLink_GetAction(link)
        if not action or raw.FPDFAction_GetType(action) != raw.PDFACTION_URI:
            continue
        size = raw.FPDFAction_GetURIPath(pdf.raw, action, None, 0)
        if size <= 1 or size > 8192:
            continue
        buffer = ctypes.create_string_buffer(size)
        raw.FPDFAction_GetURIPath(pdf.raw, action, buffer, size)
        # 7-bit ASCII by the spec; a few writers put UTF-8 there
        uri = buffer.raw[: size - 1].decode("utf-8", "replace").strip()
        if not _ABSOLUTE.match(uri):
            continue
        anchor = ""
        if raw.FPDFLink_GetAnnotRect(link, ctypes.byref(rect)):
            anchor = " ".join(
                textpage.get_text_bounded(rect.left, rect.bottom, rect.right, rect.top).split()
            )
        links.append((uri, anchor[:_TITLE_CHARS]))
        if len(links) >= _MAX_LINKS:
            break
    return links


_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_MAX_LINKS = 10_000  # of one page; the crawl keeps PAGE_MAX_LINKS of the document's


# --- DOCX and ODT ----------------------------------------------------------------------------

# No DTDs, no entities, no network: XML from a stranger (billion laughs, external entities).
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)


class _Bomb(Exception):
    pass


def _open_parts(body: bytes, names: tuple[str, ...]) -> dict[str, bytes] | str:
    """The named parts of a zip package, or the problem that stops reading it."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
    except zipfile.BadZipFile:
        return "malformed"
    with archive:
        infos = {info.filename: info for info in archive.infolist()}
        parts: dict[str, bytes] = {}
        expanded = 0
        for name in names:
            info = infos.get(name)
            if info is None:
                continue
            expanded += info.file_size
            ratio = info.file_size / max(info.compress_size, 1024)
            if expanded > MAX_EXPANDED or ratio > MAX_RATIO:
                return "bomb"
            try:
                with archive.open(info) as part:
                    # read(n) inflates at most n bytes at a time; read() could inflate 2 GiB
                    # at once before cutting at the declared size
                    parts[name] = part.read(info.file_size)
            except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError):
                return "malformed"  # bad CRC, cut short, encrypted or unknown compression
    return parts


def _xml(data: bytes | None) -> etree._Element | None:
    if not data:
        return None
    try:
        return etree.fromstring(data, _XML)
    except etree.XMLSyntaxError:
        return None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_DC = "{http://purl.org/dc/elements/1.1/}"


def _read_docx(body: bytes, encoding: str | None, max_text: int) -> DocumentText:
    doc = DocumentText("docx")
    parts = _open_parts(
        body, ("word/document.xml", "word/_rels/document.xml.rels", "docProps/core.xml")
    )
    if isinstance(parts, str):
        doc.problem = parts
        return doc
    root = _xml(parts.get("word/document.xml"))
    if root is None:
        doc.problem = "malformed"
        return doc
    targets: dict[str, str] = {}
    rels = _xml(parts.get("word/_rels/document.xml.rels"))
    if rels is not None:
        for rel in rels.iter(f"{_REL}Relationship"):
            if rel.get("TargetMode") == "External" and rel.get("Id"):
                targets[rel.get("Id", "")] = rel.get("Target", "")
    lines: list[str] = []
    for para in root.iter(f"{_W}p"):  # paragraphs of the body, of tables' cells, of text boxes
        text = "".join(_docx_runs(para))
        text = " ".join(text.split())
        if text:
            lines.append(text)
    for link in root.iter(f"{_W}hyperlink"):
        target = targets.get(link.get(f"{_R}id", ""))
        if target:
            anchor = " ".join("".join(t.text or "" for t in link.iter(f"{_W}t")).split())
            doc.links.append((target, anchor))
    doc.text = "\n".join(lines)
    core = _xml(parts.get("docProps/core.xml"))
    if core is not None:
        title = core.find(f"{_DC}title")
        if title is not None and title.text:
            doc.title = _clean_title(title.text)
    return doc


def _docx_runs(para: etree._Element) -> list[str]:
    """The text of one ``w:p`` (not of the paragraphs nested in its text boxes: those are
    paragraphs of their own), tabs and breaks as spaces."""
    out: list[str] = []
    for el in para.iter(f"{_W}t", f"{_W}tab", f"{_W}br", f"{_W}p"):
        if el is not para and el.tag == f"{_W}p":
            continue
        if _inside_nested_paragraph(el, para):
            continue
        out.append(el.text or "" if el.tag == f"{_W}t" else " ")
    return out


def _inside_nested_paragraph(el: etree._Element, para: etree._Element) -> bool:
    parent = el.getparent()
    while parent is not None and parent is not para:
        if parent.tag == f"{_W}p":
            return True
        parent = parent.getparent()
    return False


_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_XLINK = "{http://www.w3.org/1999/xlink}"
_META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_ODF_SPACE = {f"{_TEXT}s", f"{_TEXT}tab", f"{_TEXT}line-break"}


def _read_odt(body: bytes, encoding: str | None, max_text: int) -> DocumentText:
    doc = DocumentText("odt")
    parts = _open_parts(body, ("content.xml", "meta.xml"))
    if isinstance(parts, str):
        doc.problem = parts
        return doc
    root = _xml(parts.get("content.xml"))
    if root is None:
        doc.problem = "malformed"
        return doc
    text_root = root.find(f"{_OFFICE}body")
    lines: list[str] = []
    for block in (text_root if text_root is not None else root).iter(f"{_TEXT}p", f"{_TEXT}h"):
        text = " ".join(_odf_text(block).split())
        if text:
            lines.append(text)
    for link in root.iter(f"{_TEXT}a"):
        href = link.get(f"{_XLINK}href", "")
        if href:
            doc.links.append((href, " ".join(_odf_text(link).split())))
    doc.text = "\n".join(lines)
    meta = _xml(parts.get("meta.xml"))
    if meta is not None:
        title = meta.find(f".//{_DC}title")
        if title is not None and title.text:
            doc.title = _clean_title(title.text)
    return doc


def _odf_text(el: etree._Element) -> str:
    """An ODF text element's text: ``text:s``, tabs and line breaks as spaces; notes (footnote
    bodies inside a paragraph) included, as a reader sees them at the page's foot."""
    out = [el.text or ""]
    for child in el:
        out.append(" " if child.tag in _ODF_SPACE else _odf_text(child))
        out.append(child.tail or "")
    return "".join(out)


# --- Plain text ------------------------------------------------------------------------------


def _read_text(body: bytes, encoding: str | None, max_text: int) -> DocumentText:
    doc = DocumentText("text")
    if max_text:
        body = body[: max_text * 4]  # no character takes more than 4 bytes in UTF-8
    text = decode_text(body, encoding)
    doc.text = text.replace("\r\n", "\n").replace("\r", "\n")
    return doc


_READERS = {"pdf": _read_pdf, "docx": _read_docx, "odt": _read_odt, "text": _read_text}
