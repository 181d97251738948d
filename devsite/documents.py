"""Documents for the test site: real PDFs, DOCX and ODT made from real text, plain text, and
hostile files (encrypted, truncated, 10,000 pages, a deflate bomb in a PDF stream, a zip bomb
as DOCX).

The real PDFs are Debian's manuals under ``/usr/share/doc`` (never downloaded). DOCX and ODT
are written here with python-docx and odfpy (writers other than the crawler's readers) from
the text of those manuals' HTML editions. The hostile PDFs are written byte by byte
(:func:`pdf_file`): a PDF is objects and a cross-reference table, and a hostile file is one
whose objects say something a reader must survive.

:func:`document_routes` serves them all on one host of a :class:`devsite.routed.RoutedSiteServer`,
with an index page linking every one.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from devsite.routed import Answer, Ask, RoutedSiteServer

PDF_TYPE = "application/pdf"
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT_TYPE = "application/vnd.oasis.opendocument.text"

# Debian's manuals as PDF, on every machine image of this project (shared-mime-info, zlib1g-dev,
# nettle-dev), the first found is used first; each with the words its first page holds.
REAL_PDFS = (
    Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
    Path("/usr/share/doc/zlib1g-dev/crc-doc.1.0.pdf.gz"),
    Path("/usr/share/doc/nettle-dev/nettle.pdf.gz"),
)


@dataclass(frozen=True)
class Served:
    """One file the site serves: where, as what, and its bytes."""

    path: str
    content_type: str
    body: bytes


def real_pdfs() -> list[tuple[str, bytes]]:
    """(file name, bytes) of the real PDFs of :data:`REAL_PDFS` that are installed."""
    out = []
    for path in REAL_PDFS:
        if path.is_file():
            data = path.read_bytes()
            out.append((path.name.removesuffix(".gz"), gzip.decompress(data)
                        if path.suffix == ".gz" else data))
    return out


# --- PDFs written byte by byte ---------------------------------------------------------------


def pdf_file(objects: list[bytes], *, trailer: bytes = b"", root: int = 1) -> bytes:
    """A PDF of ``objects`` (object 1 is the first), with its cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R %s>>\n" % (len(objects) + 1, root, trailer))
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _text_ops(lines: Iterable[str]) -> bytes:
    """A content stream that shows ``lines`` in Helvetica, one under another."""
    ops = [b"BT /F1 12 Tf 72 720 Td 14 TL"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(b"(" + escaped.encode("latin-1", "replace") + b") '")
    ops.append(b"ET")
    return b"\n".join(ops)


def many_pages_pdf(pages: int = 10_000) -> bytes:
    """A PDF of ``pages`` pages sharing one content stream (a line of text): ~1 MB."""
    content = _stream(_text_ops(["A page among many."]))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>"
        % (pages, b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        content,
    ]
    page = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>")
    objects += [page] * pages
    return pdf_file(objects)


def text_pdf(lines: list[str], title: str = "", links: Iterable[str] = ()) -> bytes:
    """A one-page PDF of ``lines``, titled ``title``, with a URI link annotation to each of
    ``links`` (stacked at the page's foot)."""
    annots = [
        b"<< /Type /Annot /Subtype /Link /Rect [72 %d 300 %d] /Border [0 0 0] "
        b"/A << /S /URI /URI (%s) >> >>" % (60 + 20 * i, 75 + 20 * i, uri.encode())
        for i, uri in enumerate(links)
    ]
    first_annot = 6
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count 1 /Kids [4 0 R] >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> /Annots [%s] >>"
        % b" ".join(b"%d 0 R" % (first_annot + i) for i in range(len(annots))),
        _stream(_text_ops(lines)),
        *annots,
    ]
    info = b""
    if title:
        objects.append(b"<< /Title (%s) >>" % title.encode("latin-1"))
        info = b"/Info %d 0 R " % len(objects)
    return pdf_file(objects, trailer=info)


def encrypted_pdf() -> bytes:
    """A PDF under the standard security handler whose user password is not empty: a reader
    without the password cannot open it (its /U entry matches no empty password)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        _stream(os.urandom(64)),
        b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -3904 /O <%s> /U <%s> >>"
        % (os.urandom(32).hex().encode(), os.urandom(32).hex().encode()),
    ]
    return pdf_file(objects, trailer=b"/Encrypt 5 0 R /ID [<%s> <%s>] " % (
        b"ab" * 16, b"ab" * 16))


def _deflate_repeated(chunk: bytes, times: int) -> bytes:
    """A zlib stream of ``chunk`` ``times`` over, made in milliseconds: each chunk compressed
    after a full flush is the same bytes, so it is compressed once and repeated. Its checksum
    covers only the first two chunks: a reader inflates everything before it can check it."""
    squeeze = zlib.compressobj(9)
    first = squeeze.compress(chunk) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(chunk) + squeeze.flush(zlib.Z_FULL_FLUSH)
    return first + again * (times - 1) + squeeze.flush()


def deflate_bomb_pdf(expanded: int = 4 * 1024**3) -> bytes:
    """A PDF whose one page's content stream inflates to ``expanded`` bytes (4 GiB of spaces
    from ~4 MB of deflate: the ratio of a deflate bomb)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        _stream(_deflate_repeated(b" " * (1 << 20), expanded >> 20), b"/Filter /FlateDecode "),
    ]
    return pdf_file(objects)


def truncated(body: bytes, keep: float = 0.6) -> bytes:
    """The first ``keep`` of a file: a download cut short, served as if whole."""
    return body[: int(len(body) * keep)]


# --- DOCX and ODT ----------------------------------------------------------------------------


def make_docx(title: str, paragraphs: list[str], link: tuple[str, str] | None = None) -> bytes:
    """A DOCX written by python-docx: a heading, the paragraphs, a table, and a hyperlink."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml.ns import qn
    from docx.oxml.parser import OxmlElement

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Cell one of the table"
    table.rows[0].cells[1].text = "Cell two of the table"
    if link is not None:
        url, anchor = link
        para = document.add_paragraph("See ")
        rid = document.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
        hyperlink = OxmlElement("w:hyperlink")
        hyperlink.set(qn("r:id"), rid)
        run = OxmlElement("w:r")
        text = OxmlElement("w:t")
        text.text = anchor
        run.append(text)
        hyperlink.append(run)
        para._p.append(hyperlink)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_odt(title: str, paragraphs: list[str], link: tuple[str, str] | None = None) -> bytes:
    """An ODT written by odfpy: a heading, the paragraphs, and a hyperlink."""
    from odf.dc import Title
    from odf.opendocument import OpenDocumentText
    from odf.text import A, H, P

    document = OpenDocumentText()
    document.meta.addElement(Title(text=title))
    document.text.addElement(H(outlinelevel=1, text=title))
    for text in paragraphs:
        document.text.addElement(P(text=text))
    if link is not None:
        url, anchor = link
        para = P(text="See ")
        para.addElement(A(href=url, text=anchor))
        document.text.addElement(para)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def zip_bomb_docx(expanded: int = 2 * 1024**3) -> bytes:
    """A DOCX whose ``word/document.xml`` inflates to ``expanded`` bytes of spaces (under
    4 GiB), and says so in its directory: a zip bomb, written entry by entry (its CRC is the
    first chunk's: nobody should read that far)."""
    squeezed = _deflate_repeated(b" " * (1 << 20), expanded >> 20)[2:-4]  # raw deflate
    name = b"word/document.xml"
    crc = zlib.crc32(b" " * (1 << 20))
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(squeezed),
                        expanded, len(name), 0) + name
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                          len(squeezed), expanded, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central),
                      len(local) + len(squeezed), 0)
    return local + squeezed + central + end


# --- the site ---------------------------------------------------------------------------------


def document_routes(server: RoutedSiteServer, address: str, files: list[Served]) -> None:
    """Serve ``files`` on ``address``, and at ``/`` an HTML page linking each of them."""
    links = "".join(f'<li><a href="{f.path}">{f.path}</a></li>' for f in files)
    home = (f"<!DOCTYPE html><html><head><title>Documents</title></head><body>"
            f"<h1>Documents</h1><ul>{links}</ul></body></html>").encode()
    by_path = {f.path: f for f in files}

    def answer(ask: Ask) -> Answer | None:
        path = ask.path.split("?", 1)[0]
        if path == "/":
            return 200, [("Content-Type", "text/html; charset=utf-8")], home
        served = by_path.get(path)
        if served is None:
            return None
        return 200, [("Content-Type", served.content_type)], served.body

    server.route(address, "/", answer)
    for f in files:
        server.route(address, f.path, answer)
