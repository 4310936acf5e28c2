"""A long scan's pages OCR'd across the parse workers (ADR 0052), and the verdict on
a document's text that the parser gives a whole file and the pool a file read in page ranges.

The pool (:mod:`docverify.layout.pool`) asks the parser to look at a file first (``split_scan_pages``):
when its first pages hold at least that many image-only pages (pages OCR would read) and the OCR
engine loads, the parser answers :class:`ScanSplit` instead of reading the file; the pool then hands
the file out again as page-range jobs (:func:`page_ranges`: one per parse worker), each worker OCRs
its range (``page_range``) with the usual per-page budget, and the pool merges the ranges' pages in
order into one bundle and gives it :func:`text_verdict`, the same one a file read whole gets.

No PDFium here: the parent process of the pool uses this module too.
"""

from __future__ import annotations

from collections.abc import Sequence

from docverify.domain.models import DocumentBundle
from docverify.layout.errors import CORRUPT, NO_TEXT_LAYER, ParseError

#: a page with fewer non-space characters than this, mostly covered by images, is an image page (a scan)
SCAN_MAX_CHARS_PER_PAGE = 50
#: files with at least this many image-only pages (among their first 2×this pages) are read in
#: page ranges across the parse workers (Variable docverify_parse_split_scan_pages; 0: never)
DEFAULT_SPLIT_SCAN_PAGES = 8


class ScanSplit(Exception):  # noqa: N818 - an answer of the parser, not an error
    """The parser's answer to a whole-file job of a long scan: read it in page ranges instead
    (``total`` pages, ``image_pages`` image-only pages seen among the first ones)."""

    def __init__(self, total: int, image_pages: int) -> None:
        super().__init__(f"split: {image_pages} image page(s) of {total}")
        self.total, self.image_pages = total, image_pages


def page_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """``total`` pages as at most ``parts`` contiguous ranges ``(first, last)`` (1-based, inclusive)
    of sizes differing by at most one, in page order."""
    parts = max(1, min(int(parts), total))
    size, extra = divmod(total, parts)
    out, first = [], 1
    for k in range(parts):
        last = first + size - 1 + (1 if k < extra else 0)
        out.append((first, last))
        first = last + 1
    return out


def text_verdict(name: str, file_ref: str, *, pages: int, chars: Sequence[int], image_pages: int,
                 min_chars_per_doc: int, scan_max_chars_per_page: int, ocr_note: str) -> None:
    """Raise ``NO_TEXT_LAYER`` when the document has no usable text: fewer than ``min_chars_per_doc``
    non-space characters in all, or (a scan) image pages and no page with ``scan_max_chars_per_page``
    of them. ``chars``: each page's non-space characters (after OCR); ``ocr_note``: what OCR did
    ("and OCR read no usable text on …", or "")."""
    total_chars = sum(chars)
    dense_pages = sum(1 for c in chars if c >= max(1, scan_max_chars_per_page))
    if total_chars < max(1, min_chars_per_doc):
        if image_pages and ocr_note:
            msg = (f"{name} is a scan with no text layer ({pages} page(s) of images) {ocr_note}; check the scan's "
                   f"quality (resolution, contrast) or route it through Document AI")
        elif image_pages:
            msg = (f"{name} is a scan with no text layer ({pages} page(s) of images, {total_chars} characters "
                   f"of text); OCR it or route it through Document AI")
        else:
            msg = (f"{name} has no extractable text on any of its {pages} page(s) and no page images (blank or "
                   f"damaged pages, or text drawn as vector outlines); check the source document, or OCR it / "
                   f"route it through Document AI")
        raise ParseError(NO_TEXT_LAYER, msg, file_ref)
    if scan_max_chars_per_page > 0 and dense_pages == 0 and image_pages > 0:
        raise ParseError(
            NO_TEXT_LAYER,
            f"{name} is a scan with no usable text layer (none of its {pages} page(s) has "
            f"{scan_max_chars_per_page} characters of text, {total_chars} in total, and its pages are "
            f"images)" + (f" {ocr_note}; check the scan's quality or route it through Document AI"
                          if ocr_note else "; OCR it or route it through Document AI"),
            file_ref,
        )


def ocr_note(*, unavailable: str, tried: int, failed: int = 0) -> str:
    """What OCR did on a document without usable text, for :func:`text_verdict`'s message
    (``failed``: image pages the engine raised on, not pages it found blank)."""
    if unavailable:
        return f"and OCR is unavailable here ({unavailable})"
    if failed:
        return f"and the OCR engine failed on {failed} of its {tried} image page(s) (see the worker's log)"
    if tried:
        return f"and OCR read no usable text on its {tried} image page(s)"
    return ""


def non_space(text: str) -> int:
    """A page's non-space characters (what the scan rules count)."""
    return len("".join(text.split()))


class RangeRead:
    """A file being read in page ranges by the pool: the ranges not answered yet, the pages of those
    answered, the first failure (the file's), and what :meth:`merged` makes of them."""

    def __init__(self, path: str, total: int, ranges: Sequence[tuple[int, int]]) -> None:
        self.path, self.total, self.ranges = path, total, list(ranges)
        self.open: set[tuple[int, int]] = set(self.ranges)
        self.bundles: dict[int, DocumentBundle] = {}
        self.error: ParseError | None = None
        #: pages of the ranges answered, and how many of them were OCR'd
        self.read = 0
        self.ocr = 0

    def answered(self, span: tuple[int, int], result: DocumentBundle | ParseError) -> None:
        self.open.discard(span)
        if isinstance(result, ParseError):
            self.error = self.error or result  # the first failure is the file's
            return
        self.bundles[span[0]] = result
        self.read += len(result.pages)
        self.ocr += sum(1 for p in result.pages if p.ocr_confidence is not None)

    def merged(self, name: str, *, min_chars_per_doc: int, scan_max_chars_per_page: int) -> DocumentBundle | ParseError:
        """The document: the ranges' pages in order, one bundle, and the verdict a whole read gives."""
        if self.error is not None:
            return self.error
        parts = [self.bundles[first] for first, _ in self.ranges]
        pages = [p for b in parts for p in b.pages]
        if [p.page_num for p in pages] != list(range(1, self.total + 1)):
            return ParseError(CORRUPT, f"{name}: the page ranges read across the parse workers do not make its "
                              f"{self.total} pages; parse it again, or route it through Document AI", self.path)
        ocr_pages = sum(1 for p in pages if p.ocr_confidence is not None)
        try:
            text_verdict(name, self.path, pages=self.total, chars=[non_space(p.text) for p in pages],
                         image_pages=ocr_pages, min_chars_per_doc=min_chars_per_doc,
                         scan_max_chars_per_page=scan_max_chars_per_page,
                         ocr_note=ocr_note(unavailable="", tried=ocr_pages))
        except ParseError as exc:
            return exc
        ocr_parser = next((b.parser for b in parts if any(p.ocr_confidence is not None for p in b.pages)), "")
        return parts[0].model_copy(update={"pages": pages, "total_pages": self.total,
                                           "parser": ocr_parser or parts[0].parser})
