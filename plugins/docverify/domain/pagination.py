"""Printed page numbers ("Page 2 of 3") and what they say about where a document starts and ends.

A report, a consent or a registration form printed by a hospital system numbers its own pages; a PDF that
joins several documents keeps each document's numbering. So a page numbered "1 of n" begins a document, the page
after one numbered "n of n" begins the next, and a page numbered "k of n" right after "k-1 of n" continues its
document. A fax machine or a scanner stamps one counter over the whole transmission instead ("Page 3 of 7" on the
PDF's third page of seven); that counter says nothing of the documents inside and is set aside
(:func:`pdf_counter`).

Only what is printed counts: a number in words, a page number without its total ("Page 2") or a mark the page
prints twice with different values (two documents' footers cut into one page) is no mark. Pure functions of the
page texts: the offline classifier reads them, and V2's rule phase checks any classifier's segments against them
(ADR 0069); nothing here logs or returns page text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

#: "Page 2 of 3", "PAGE 2 OF 3", "Page: 2 of 3", "Pg. 2 of 3", "Page 2/3", "page 2 / 3"; and a line that is only
#: "2 of 3" (a footer printed alone). The total is at most MAX_TOTAL pages.
_MARK = re.compile(r"\b(?:page|pg\.?)\s*:?\s*(\d{1,3})\s*(?:of|/)\s*(\d{1,3})\b", re.IGNORECASE)
_LINE_MARK = re.compile(r"^\s*(\d{1,3})\s+of\s+(\d{1,3})\s*$", re.IGNORECASE | re.MULTILINE)
MAX_TOTAL = 500


@dataclass(frozen=True)
class PageMark:
    """A printed page number: page ``number`` of ``total``."""

    number: int
    total: int

    @property
    def first(self) -> bool:
        return self.number == 1

    @property
    def last(self) -> bool:
        return self.number == self.total


class Cue(StrEnum):
    """What the printed numbers say about the boundary before a page."""

    NONE = "none"
    #: the page is numbered 1 of n, or the page before it was the last of its numbering
    STARTS = "starts"
    #: the page is numbered 1 of n right after a page numbered m of m: two documents' numberings meet (a
    #: document starts here even when it is of the same type as the one before)
    MEETS = "meets"
    #: the page is numbered k of n right after a page numbered k-1 of n
    CONTINUES = "continues"


#: A page number is printed in a page's header or footer: only its first and last EDGE_LINES lines with text are read.
EDGE_LINES = 3


def page_mark(text: str) -> PageMark | None:
    """The page's printed page number, or None: no mark in its first or last EDGE_LINES lines with text, a mark
    out of range (0, or above its total, or a total above MAX_TOTAL), or marks that disagree (the same mark printed
    in a header and a footer is one mark)."""
    lines = [line for line in text.splitlines() if line.strip()]
    edges = "\n".join(lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:])
    found = {(int(a), int(b)) for a, b in _MARK.findall(edges)}
    found |= {(int(a), int(b)) for a, b in _LINE_MARK.findall(edges)}
    if len(found) != 1:
        return None
    number, total = found.pop()
    if not 1 <= number <= total <= MAX_TOTAL:
        return None
    return PageMark(number, total)


def pdf_counter(marks: list[PageMark | None]) -> bool:
    """The marks are one counter over the whole PDF (a fax or scanner stamp, or one document numbering every page
    of the PDF): at least two marks, all with page number = index + d and total = pages + d for one d >= 0 (d: the
    transmission's pages before this PDF, a cover sheet not scanned)."""
    n = len(marks)
    offsets = {(m.number - i, m.total - n) for i, m in enumerate(marks, start=1) if m is not None}
    if sum(m is not None for m in marks) < 2 or len(offsets) != 1:
        return False
    d_number, d_total = offsets.pop()
    return d_number == d_total >= 0


def boundary_cues(marks: list[PageMark | None]) -> list[Cue]:
    """What the printed numbers say about the boundary before each page (the first page's cue is NONE): MEETS
    when the page is numbered 1 of n right after a page numbered m of m; STARTS when it is numbered 1 of n or the
    page before it was the last of its numbering (n of n); CONTINUES when it is numbered k of n after k-1 of n;
    NONE otherwise, and everywhere when the marks are one counter over the whole PDF (:func:`pdf_counter`)."""
    cues = [Cue.NONE] * len(marks)
    if pdf_counter(marks):
        return cues
    for i in range(1, len(marks)):
        prev, mark = marks[i - 1], marks[i]
        if mark is not None and prev is not None and mark.total == prev.total and mark.number == prev.number + 1:
            cues[i] = Cue.CONTINUES
        elif mark is not None and mark.first and prev is not None and prev.last:
            cues[i] = Cue.MEETS
        elif (mark is not None and mark.first) or (prev is not None and prev.last):
            cues[i] = Cue.STARTS
    return cues
