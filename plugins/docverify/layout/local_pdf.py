"""Local PDF parsing: a PDF file → :class:`~docverify.domain.models.DocumentBundle`, or a :class:`ParseError`.

Library: **pypdfium2** (PDFium; Apache-2.0 / BSD-3-Clause), chosen by measurement on the 45 PDFs
of the shared corpus (``scripts/bench_parse.py`` → ``docs/benchmarks/parse.md``): on the files
all three open it extracts text ~15× faster than pypdf and ~40× faster than pdfplumber with the
lowest peak memory, tells "needs a password" apart from "damaged" by error code, opens both
empty-user-password files, and gives text geometry (for paragraphs and tables) at little cost.
pypdf and pdfplumber are not used at run time. PyMuPDF is excluded (AGPL).

Three entry points (the two bounded ones live in :mod:`docverify.layout.pool` and are re-exported
here; the paragraph/table rules in :mod:`docverify.layout.structure`):

* :func:`parse_pdf` — in-process. Every failure is a :class:`ParseError` (library exceptions
  are wrapped), but a file that hangs or crashes PDFium hangs or crashes the caller.
* :func:`parse_pdf_bounded` — the same in a child process, stopped (→ ``TIMEOUT``) when opening
  the file takes longer than ``timeout_s``, one page longer than ``page_timeout_s`` or the whole
  file longer than ``file_ceiling_s`` (the parser reports each page it finishes,
  :mod:`docverify.layout.progress`; ADR 0047); a crash of the child (e.g. a segfault in PDFium) → ``CORRUPT``.
* :func:`parse_many_bounded` — a shard of files over a few long-lived child processes, each file
  still time-bounded; this is what the nightly DAG's layout task calls.

Children are fresh interpreters (``python -m docverify.layout.worker``, the caller's
``sys.path`` and environment) speaking one JSON message per line over stdin/stdout — not
multiprocessing, whose spawn/forkserver children re-import the parent's ``__main__`` file (inside
an Airflow task, the ``airflow`` entry script, which fails there) and never ``fork`` (Airflow task
processes are threaded).

Page text. PDFium's text of a page is split into its lines; every line is normalised (no NUL or
other control characters, ``\\t`` → space, PDFium's U+FFFE line-break hyphen → ``-``,
ligatures ﬁ/ﬂ/… → plain letters, NFC, trailing spaces stripped). Lines are grouped into
**paragraphs** using the geometry of their text rectangles (``FPDFText_CountRects`` /
``FPDFText_GetRect``, a few calls per line): a new paragraph starts at a vertical gap larger than
~1.45× the page's usual line pitch, at a jump back up the page (next column or region), at a
change of font size of more than 30 %, at a first-line indent, and before a line that starts with
a list marker. The page ``text`` is the paragraphs joined by one blank line, so every paragraph is
a verbatim substring of the page text and ``text.split("\\n\\n")`` gives them back.

``layout_metadata.block_types`` has one entry per paragraph: ``table`` (see below), ``list_item``
(starts with a bullet or an enumerator such as ``1.``, ``a)``, ``B.``), ``heading`` (one or two
short lines in a larger font, or in capitals, or ending with a colon, or a numbered section
title) or ``paragraph``.

``has_tables`` heuristic (cheap, geometric): a line is *tabular* when its text rectangles,
merged wherever the horizontal gap is under 1.5× the page's median line height, form ≥ 3
separate segments (cells separated by wide gaps; word gaps in prose are far smaller). A page has
tables when it has ≥ 3 tabular lines including ≥ 2 consecutive ones; a paragraph is a ``table``
block on such a page when at least half of its lines are tabular. Rotated pages are handled by
measuring along the text direction. Known limits: tables whose cells PDFium emits column by
column (one cell per line) are missed; figure labels laid out in a grid can count as a table.
When no geometry is available the same rule is applied to runs of 2+ spaces in the text.

Scans. ``NO_TEXT_LAYER`` is raised when the document has fewer than ``min_chars_per_doc``
non-space characters, or when no page has ``scan_max_chars_per_page`` (50) non-space characters
and at least one page is mostly covered by images (≥ 25 % of its area): a scan whose only "text"
is a stray caption or file name (e.g. "Background", "pdf.js"). Sparse documents without images
(a one-line letter, a short Arabic or vertical CJK sample) still parse.

Not thread-safe inside PDFium: in-process calls are serialised by a lock; use the bounded
functions for parallelism.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import logging
import os
import pathlib
import stat
import threading
import time
from dataclasses import dataclass
from importlib import metadata as _metadata

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docverify.domain.models import DocumentBundle, LayoutMetadata, Page
from docverify.layout import ocr, progress
from docverify.layout.errors import (
    CORRUPT,
    EMPTY_FILE,
    ENCRYPTED,
    INPUT_CHANGED,
    NOT_A_PDF,
    TOO_LARGE,
    UNSUPPORTED,
    ZERO_PAGES,
    ParseError,
)
from docverify.layout.ocr import engine_id
from docverify.layout.split import SCAN_MAX_CHARS_PER_PAGE, ScanSplit, non_space, text_verdict
from docverify.layout.split import ocr_note as _note
from docverify.layout.structure import PageLayout, clip, normalise_line, page_layout
from docverify.storage.inputs import opened_inside
from docverify.storage.limits import MAX_PAGES, MAX_PDF_BYTES

_log = logging.getLogger(__name__)


def _pypdfium2_version() -> str:
    try:
        return _metadata.version("pypdfium2")
    except _metadata.PackageNotFoundError:  # pragma: no cover - vendored copy
        return str(getattr(pdfium, "PYPDFIUM_INFO", "unknown"))


PARSER_ID = f"local:pypdfium2-{_pypdfium2_version()}"
"""Names the library and version that produced a bundle (``DocumentBundle.parser``)."""

DEFAULT_MAX_BYTES = MAX_PDF_BYTES  # docverify.storage.limits: every limit in one place
DEFAULT_MAX_PAGES = MAX_PAGES
HEADER_WINDOW = 1024
"""``%PDF`` must occur within the first 1024 bytes (as Acrobat tolerates)."""
SCAN_MIN_IMAGE_COVERAGE = 0.25

PDFIUM_LOCK = threading.Lock()


# =========================================================================== public API


def parse_pdf(
    path: str | os.PathLike[str],
    *,
    doc_id: str | None = None,
    file_uri: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pages: int = DEFAULT_MAX_PAGES,
    min_chars_per_doc: int = 1,
    scan_max_chars_per_page: int = SCAN_MAX_CHARS_PER_PAGE,
    ocr: bool = False,
    root: str | None = None,
    expect_sha256: str | None = None,
    page_range: tuple[int, int] | list[int] | None = None,
    split_scan_pages: int = 0,
) -> DocumentBundle:
    """Parse one PDF in this process.

    Args:
        path: the PDF file.
        doc_id: defaults to the file stem.
        file_uri: stored as ``file_path`` (e.g. the ``gs://`` URI the file came from); defaults
            to the absolute local path.
        max_bytes / max_pages: larger files → ``TOO_LARGE``.
        min_chars_per_doc: fewer non-space characters in the whole document → ``NO_TEXT_LAYER``.
        scan_max_chars_per_page: a document none of whose pages has this many non-space
            characters, with page images, is a scan → ``NO_TEXT_LAYER``; 0 disables the rule.
        ocr: OCR the pages without a text layer that are mostly images (:mod:`.ocr`); the
            bundle's ``parser`` then names the OCR engine and those pages carry
            ``ocr_confidence``. A scan OCR reads nothing on stays ``NO_TEXT_LAYER``.
        root: an input of a night's storage root (the real path of the root): the file is opened
            without following a symbolic link (``O_NOFOLLOW``) and read only when what was opened
            is a regular file under ``root`` — else ``UNSUPPORTED`` (the layout stage names it
            ``INPUT_NOT_REGULAR``, ADR 0033). None (the CLI): the path is followed as given.
        expect_sha256: the sha256 the file had when it was listed (the night's manifest): bytes
            read with another hash are ``INPUT_CHANGED``, never parsed (hashed from the bytes that
            would be parsed, no second read; ADR 0052).
        page_range: ``(first, last)`` (1-based, inclusive): read only these pages (a part of a long
            scan read across the parse workers, ADR 0052); the bundle holds only them, with the
            document's ``total_pages``, and the document-wide scan rules are left to the caller
            (:func:`docverify.layout.split.text_verdict` on the merged pages).
        split_scan_pages: with ``ocr``, a document with at least this many image-only pages among
            its first ``2 ×`` this pages, where the OCR engine loads, is not read:
            :class:`~docverify.layout.split.ScanSplit` is raised for the pool to hand out its
            page ranges (0: never).

    Raises:
        ParseError: always this type, with a code from ``PARSE_ERROR_CODES``.
        ScanSplit: only with ``split_scan_pages`` (see above).
    """
    p = pathlib.Path(path)
    opts = _Options(expect_sha256 or None, tuple(page_range) if page_range else None, max(0, int(split_scan_pages)))
    try:
        return _parse(
            p,
            doc_id=doc_id,
            file_uri=file_uri,
            max_bytes=max_bytes,
            max_pages=max_pages,
            min_chars_per_doc=min_chars_per_doc,
            scan_max_chars_per_page=scan_max_chars_per_page,
            ocr=ocr,
            root=root,
            opts=opts,
        )
    except (ParseError, ScanSplit):
        raise
    except MemoryError as exc:
        raise ParseError(
            TOO_LARGE,
            f"{p.name} exhausted the memory available to the parser ({type(exc).__name__}); "
            f"parse it on a larger worker or route it through Document AI",
            str(p),
        ) from exc
    except Exception as exc:  # any library failure becomes a ParseError
        raise ParseError(
            CORRUPT,
            f"{p.name} could not be parsed ({type(exc).__name__}); "  # its text may quote the input
            f"the file is probably damaged: re-export it from the source system or repair it "
            f"(e.g. with qpdf) and retry",
            str(p),
        ) from exc


# =========================================================================== the parser


@dataclass(frozen=True)
class _Options:
    """What a pool job adds to a parse (see :func:`parse_pdf`): the hash the bytes must have, the
    pages to read, and when to hand a long scan back to be read in page ranges."""

    expect_sha256: str | None = None
    page_range: tuple[int, ...] | None = None
    split_scan_pages: int = 0

    def span(self, n: int, name: str, file_ref: str) -> tuple[int, int]:
        """The pages to read, ``(first, last)`` (1-based, inclusive), of a document of ``n`` pages."""
        if self.page_range is None:
            return 1, n
        first, last = (int(x) for x in self.page_range)
        if not 1 <= first <= last <= n:
            raise ParseError(UNSUPPORTED, f"{name}: pages {first}-{last} asked for, the document has {n}", file_ref)
        return first, last


_WHOLE = _Options()


_MAGIC = (
    (b"PK\x03\x04", "a ZIP container (an Office document?)"),
    (b"\xd0\xcf\x11\xe0", "an old Office (OLE) document"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89PNG", "a PNG image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"{\\rtf", "an RTF document"),
    (b"<", "HTML or XML"),
)


def _sniff(head: bytes) -> str:
    """What the file looks like, named by its format only: never its bytes (they may be PHI)."""
    stripped = head.lstrip()
    for magic, what in _MAGIC:
        if stripped.startswith(magic):
            return f"it looks like {what}"
    if stripped[:64].isascii():
        return "it looks like plain text"
    return "its format is not recognised"


def _parse(
    p: pathlib.Path,
    *,
    doc_id: str | None,
    file_uri: str | None,
    max_bytes: int,
    max_pages: int,
    min_chars_per_doc: int,
    scan_max_chars_per_page: int,
    ocr: bool = False,
    root: str | None = None,
    opts: _Options = _WHOLE,
) -> DocumentBundle:
    name, file_ref = p.name, str(p)
    if root is not None:
        return _parse_data(_read_input(p, root, max_bytes), p, doc_id=doc_id, file_uri=file_uri,
                           max_pages=max_pages, min_chars_per_doc=min_chars_per_doc,
                           scan_max_chars_per_page=scan_max_chars_per_page, ocr=ocr, opts=opts)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise IsADirectoryError(f"{p} is not a regular file")
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED,
            f"{name} could not be read ({type(exc).__name__}: {exc.strerror or exc}); "
            f"check that the path exists and is a readable file",
            file_ref,
        ) from exc
    _check_size(size, name, file_ref, max_bytes)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED, f"{name} could not be read ({exc.strerror or exc}); check the file's permissions", file_ref
        ) from exc
    return _parse_data(data, p, doc_id=doc_id, file_uri=file_uri, max_pages=max_pages,
                       min_chars_per_doc=min_chars_per_doc, scan_max_chars_per_page=scan_max_chars_per_page, ocr=ocr,
                       opts=opts)


def _check_size(size: int, name: str, file_ref: str, max_bytes: int) -> None:
    if size == 0:
        raise ParseError(
            EMPTY_FILE, f"{name} is empty (0 bytes); re-export or re-upload the document", file_ref
        )
    if size > max_bytes:
        raise ParseError(
            TOO_LARGE,
            f"{name} is {size / 1048576:.1f} MB, over the limit of {max_bytes / 1048576:g} MB "
            f"(max_bytes={max_bytes}); split it, or raise the limit for this run",
            file_ref,
        )


def _read_input(p: pathlib.Path, root: str, max_bytes: int) -> bytes:
    """The bytes of the input ``p`` of the storage root ``root``, opened without following a link
    and read only when what was opened is a regular file under ``root`` (see :func:`parse_pdf`)."""
    name, file_ref = p.name, str(p)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        what = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__
        raise ParseError(UNSUPPORTED, f"{name} could not be opened as a regular file ({what}); put the PDF "
                         f"itself in the folder", file_ref) from None
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode) and opened_inside(fd, root)
    except BaseException:
        os.close(fd)
        raise
    if not regular:  # a folder, a FIFO, a device, or a file reached through a folder that left the root
        os.close(fd)
        raise ParseError(UNSUPPORTED, f"{name} is not a regular file of the storage root; it was not read: "
                         f"put the PDF itself in the folder", file_ref)
    with os.fdopen(fd, "rb") as fh:
        _check_size(st.st_size, name, file_ref, max_bytes)
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise ParseError(UNSUPPORTED, f"{name} could not be read ({exc.strerror or exc}); check the file's "
                             f"permissions", file_ref) from exc
    _check_size(len(data), name, file_ref, max_bytes)  # grown since the fstat
    return data


def _parse_data(
    data: bytes,
    p: pathlib.Path,
    *,
    doc_id: str | None,
    file_uri: str | None,
    max_pages: int,
    min_chars_per_doc: int,
    scan_max_chars_per_page: int,
    ocr: bool,
    opts: _Options = _WHOLE,
) -> DocumentBundle:
    name, file_ref = p.name, str(p)
    sha = hashlib.sha256(data).hexdigest()  # the bytes parsed below, hashed once (ADR 0052)
    if opts.expect_sha256 is not None and sha != opts.expect_sha256:
        raise ParseError(INPUT_CHANGED, f"{name}: the bytes read are not the ones listed (sha256 {sha[:12]}…, "
                         f"listed {opts.expect_sha256[:12]}…): the file was replaced since; list it again",
                         file_ref)
    if not data:
        raise ParseError(EMPTY_FILE, f"{name} is empty (0 bytes); re-export or re-upload the document", file_ref)
    if b"%PDF" not in data[:HEADER_WINDOW]:
        raise ParseError(
            NOT_A_PDF,
            f"{name} is not a PDF (no %PDF header in its first {HEADER_WINDOW} bytes; {_sniff(data[:64])}); "
            f"convert it to PDF or remove it from the batch",
            file_ref,
        )
    with PDFIUM_LOCK:
        pages, total = _extract_pages(data, name, file_ref, max_pages, min_chars_per_doc, scan_max_chars_per_page,
                                      ocr=ocr, opts=opts)

    return DocumentBundle(
        doc_id=doc_id if doc_id is not None else p.stem,
        file_path=file_uri or str(p.resolve()),
        sha256=sha,
        total_pages=total,
        processing_timestamp=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        parser=OCR_PARSER_ID() if any(pg.ocr_confidence is not None for pg in pages) else PARSER_ID,
        pages=pages,
    )


def _open(data: bytes, name: str, file_ref: str) -> tuple[pdfium.PdfDocument, int]:
    """Open with the empty password (documents with an empty user password open transparently)."""
    raw = pdfium_c.FPDF_LoadMemDocument64(data, len(data), None)
    if not raw:
        err = pdfium_c.FPDF_GetLastError()
        if err == pdfium_c.FPDF_ERR_PASSWORD:
            raise ParseError(
                ENCRYPTED,
                f"{name} is encrypted with a user password; re-export it without a password "
                f"or supply the password",
                file_ref,
            )
        if err == pdfium_c.FPDF_ERR_SECURITY:
            raise ParseError(
                UNSUPPORTED,
                f"{name} uses an unsupported security handler (certificate or DRM encryption); "
                f"re-export it without protection",
                file_ref,
            )
        what = {
            pdfium_c.FPDF_ERR_FORMAT: "not in a readable PDF format",
            pdfium_c.FPDF_ERR_FILE: "not readable as a file",
            pdfium_c.FPDF_ERR_PAGE: "missing its pages",
        }.get(err, f"unreadable (PDFium error {err})")
        raise ParseError(
            CORRUPT,
            f"{name} is damaged: its PDF structure is {what}; re-export it from the source system "
            f"or repair it (e.g. with qpdf) and retry",
            file_ref,
        )
    doc = pdfium.PdfDocument(raw)  # takes ownership of the handle (closed by doc.close())
    n = pdfium_c.FPDF_GetPageCount(raw)
    return doc, n


def page_count(data: bytes, name: str) -> int:
    """The page count of a PDF held in memory, without extracting anything; the same typed
    errors as :func:`parse_pdf` when it cannot be opened (ENCRYPTED, UNSUPPORTED, CORRUPT)."""
    doc, n = _open(data, name, name)
    doc.close()
    return n


def _extract_pages(
    data: bytes,
    name: str,
    file_ref: str,
    max_pages: int,
    min_chars_per_doc: int,
    scan_max_chars_per_page: int,
    ocr: bool = False,
    opts: _Options = _WHOLE,
) -> tuple[list[Page], int]:
    doc, n = _open(data, name, file_ref)
    try:
        _check_page_count(n, name, file_ref, max_pages)
        first, last = opts.span(n, name, file_ref)
        if ocr and opts.split_scan_pages and opts.page_range is None:
            _maybe_split(doc, n, opts.split_scan_pages, scan_max_chars_per_page)
        pages: list[Page] = []
        chars: list[int] = []
        image_pages = 0
        ocr_state = _OCRState() if ocr else None
        progress.page_done(first - 1, n)  # opened: from here each page has the per-page budget (ADR 0047)
        for i in range(first - 1, last):
            page, n_chars, image = _read_page(doc, i, n, name, file_ref, scan_max_chars_per_page, ocr_state)
            pages.append(page)
            chars.append(n_chars)
            image_pages += image
            progress.page_done(i + 1, n, ocr_state.tried if ocr_state is not None else 0)
    finally:
        doc.close()
    if opts.page_range is None:  # a page range: the pool gives the merged document the verdict
        text_verdict(name, file_ref, pages=n, chars=chars, image_pages=image_pages,
                     min_chars_per_doc=min_chars_per_doc, scan_max_chars_per_page=scan_max_chars_per_page,
                     ocr_note=_ocr_note(ocr_state))
    return pages, n


def _check_page_count(n: int, name: str, file_ref: str, max_pages: int) -> None:
    if n <= 0:
        raise ParseError(
            ZERO_PAGES,
            f"{name} is a readable PDF with no pages; re-export the document (the source export "
            f"probably failed)",
            file_ref,
        )
    if n > max_pages:
        raise ParseError(
            TOO_LARGE,
            f"{name} has {n} pages, over the limit of {max_pages} pages (max_pages); split it, "
            f"or raise the limit for this run",
            file_ref,
        )


def _read_page(doc: pdfium.PdfDocument, i: int, n: int, name: str, file_ref: str, scan_max_chars_per_page: int,
               ocr_state: _OCRState | None) -> tuple[Page, int, bool]:
    """Page ``i`` (0-based) of ``n``: the page, its non-space characters (after OCR) and whether it
    is an image page (few characters, mostly images; OCR'd when ``ocr_state`` is given)."""
    try:
        page = doc[i]
    except Exception as exc:
        raise ParseError(
            CORRUPT,
            f"{name} is damaged: page {i + 1} of {n} cannot be loaded ({clip(str(exc))}); "
            f"re-export it from the source system or repair it (e.g. with qpdf) and retry",
            file_ref,
        ) from exc
    try:
        textpage = page.get_textpage()
        try:
            result = page_layout(textpage)
        finally:
            textpage.close()
        chars = non_space(result.text)
        ocr_conf = None
        image = chars < max(1, scan_max_chars_per_page) and _image_coverage(page) >= SCAN_MIN_IMAGE_COVERAGE
        if image and ocr_state is not None:
            result, ocr_conf = _ocr_page(page, result, ocr_state)
            chars = non_space(result.text)
    finally:
        page.close()
    return Page(
        page_num=i + 1,
        text=result.text,
        paragraphs=result.paragraphs,
        layout_metadata=LayoutMetadata(block_types=result.block_types, has_tables=result.has_tables),
        ocr_confidence=ocr_conf,
    ), chars, image


def _maybe_split(doc: pdfium.PdfDocument, n: int, want: int, scan_max_chars_per_page: int) -> None:
    """Raise :class:`ScanSplit` when at least ``want`` of the document's first ``2 × want`` pages are
    image-only (few characters, mostly images) and the OCR engine loads: a long scan, read faster in
    page ranges across the parse workers (ADR 0052). A page that cannot be looked at here: no split
    (reading the file says what is wrong with it)."""
    if n < max(2, want):
        return
    found = 0
    try:
        for i in range(min(n, 2 * want)):
            page = doc[i]
            try:
                textpage = page.get_textpage()
                try:
                    chars = non_space(textpage.get_text_range())
                finally:
                    textpage.close()
                if chars < max(1, scan_max_chars_per_page) and _image_coverage(page) >= SCAN_MIN_IMAGE_COVERAGE:
                    found += 1
            finally:
                page.close()
    except Exception:
        return
    if found < want:
        return
    try:
        ocr.get_engine()
    except ocr.OCRUnavailable:
        return
    raise ScanSplit(n, found)


@dataclass
class _OCRState:
    """OCR within one document: pages tried and read, or why the engine could not run."""

    tried: int = 0
    read: int = 0
    unavailable: str = ""
    #: pages the engine raised on (logged by exception type; such a page keeps ``ocr_confidence`` None)
    failed: int = 0


def OCR_PARSER_ID() -> str:  # noqa: N802 - a constant computed on first use (the OCR package is optional)

    return f"{PARSER_ID}+{engine_id()}"


def _ocr_page(page: pdfium.PdfPage, result: PageLayout, state: _OCRState) -> tuple[PageLayout, float | None]:
    """OCR an image page without a text layer (kept in its own function: the parse worker's
    memory limits are set elsewhere). Returns the page layout built from the OCR'd lines and
    its confidence, or the unchanged layout and None when the engine is unavailable."""
    if state.unavailable:
        return result, None
    try:
        ocr.get_engine()
    except ocr.OCRUnavailable as exc:
        state.unavailable = str(exc)
        return result, None
    state.tried += 1
    t0 = time.perf_counter()
    try:
        read = ocr.read_page(page)
    except Exception as exc:  # the engine failed on this image: not a blank page, an unread one
        state.failed += 1
        # the type only: an engine's message may quote what it read
        _log.warning("OCR failed on an image page (%s); %d page(s) of this document so far",
                     type(exc).__name__, state.failed)
        return result, None
    finally:
        progress.ocr_page(time.perf_counter() - t0)  # the document's OCR time, in its stage record (ADR 0052)
    if not read.paragraphs:
        return result, 0.0
    state.read += 1
    paragraphs = [normalise_line(p) for p in read.paragraphs]
    paragraphs = [p for p in paragraphs if p.strip()]
    return (
        PageLayout(text="\n\n".join(paragraphs), paragraphs=paragraphs,
                    block_types=["paragraph"] * len(paragraphs), has_tables=False),
        read.confidence,
    )


def _ocr_note(state: _OCRState | None) -> str:
    if state is None:
        return ""
    return _note(unavailable=clip(state.unavailable) if state.unavailable else "", tried=state.tried,
                 failed=state.failed)


def _image_coverage(page: pdfium.PdfPage) -> float:
    """Fraction of the page area covered by image objects (sum of their clipped boxes, ≤ 1)."""
    try:
        l0, b0, r0, t0 = page.get_bbox()
        area: float = max(1e-6, (r0 - l0) * (t0 - b0))
        covered = 0.0
        for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=4):
            left, bottom, right, top = obj.get_bounds()
            w = min(right, r0) - max(left, l0)
            h = min(top, t0) - max(bottom, b0)
            if w > 0 and h > 0:
                covered += w * h
        return min(1.0, covered / area)
    except Exception:
        return 0.0


# --------------------------------------------------------------------------- text normalisation
