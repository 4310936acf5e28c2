"""Printed page numbers (ADR 0069): which marks count, a counter over the whole PDF, and the cue before each page."""

from __future__ import annotations

import pytest

from docverify.domain.pagination import Cue, PageMark, boundary_cues, page_mark, pdf_counter


@pytest.mark.parametrize("text, mark", [
    ("DIAGNOSIS: benign.\nPage 2 of 3", PageMark(2, 3)),
    ("PAGE 1 OF 1\nConsent to treatment", PageMark(1, 1)),
    ("Page: 4 of 12", PageMark(4, 12)),
    ("Pg. 2 of 5", PageMark(2, 5)),
    ("Report continues\npage 3 / 4", PageMark(3, 4)),
    ("Signature ________\n 2 of 2 \n", PageMark(2, 2)),
    # the same mark in a header and a footer is one mark
    ("Page 2 of 3\nFINDINGS: normal.\nPage 2 of 3", PageMark(2, 3)),
])
def test_a_printed_page_number_is_read(text, mark):
    assert page_mark(text) == mark


@pytest.mark.parametrize("text", [
    "",
    "Page 2",                                     # no total
    "page two of three",                          # in words
    "Take 1 of 2 tablets twice daily",            # not a line of its own, no "page"
    "Page 0 of 3", "Page 4 of 3", "Page 1 of 900",  # out of range
    "Page 3 of 3\nPage 1 of 2",                   # two numberings on one page: which one is this page's?
])
def test_no_mark(text):
    assert page_mark(text) is None


def test_a_counter_over_the_whole_pdf_is_no_cue():
    # a fax stamp: page i of the PDF's 4 pages, with or without a cover sheet before them (d = 1)
    stamp = [PageMark(i, 4) for i in range(1, 5)]
    assert pdf_counter(stamp) and boundary_cues(stamp) == [Cue.NONE] * 4
    with_cover = [PageMark(i + 1, 5) for i in range(1, 5)]
    assert pdf_counter(with_cover) and boundary_cues(with_cover) == [Cue.NONE] * 4
    # a stamp missing from one page is still a stamp
    assert pdf_counter([PageMark(1, 3), None, PageMark(3, 3)])


def test_two_documents_numbered_each_are_no_counter():
    # pages 3-4 are page 1-2 of 2: index - number is constant (2) but the total is not the PDF's
    marks = [PageMark(1, 2), PageMark(2, 2), PageMark(1, 2), PageMark(2, 2)]
    assert not pdf_counter(marks)
    assert boundary_cues(marks) == [Cue.NONE, Cue.CONTINUES, Cue.MEETS, Cue.CONTINUES]
    assert not pdf_counter([PageMark(1, 4), None, None, None])  # one mark is no counter


def test_the_cue_before_each_page():
    marks = [None, PageMark(1, 3), PageMark(2, 3), PageMark(3, 3), None, PageMark(2, 2), PageMark(1, 4)]
    assert boundary_cues(marks) == [
        Cue.NONE,       # the first page
        Cue.STARTS,     # page 1 of 3 after an unnumbered page
        Cue.CONTINUES,  # 2 of 3 after 1 of 3
        Cue.CONTINUES,
        Cue.STARTS,     # after 3 of 3, the last of its numbering
        Cue.NONE,       # 2 of 2 after an unnumbered page: continues something, says nothing sure
        Cue.MEETS,      # 1 of 4 right after 2 of 2
    ]


def test_a_page_skipped_or_a_total_changed_is_no_continuation():
    assert boundary_cues([PageMark(1, 3), PageMark(3, 3)]) == [Cue.NONE, Cue.NONE]
    assert boundary_cues([PageMark(1, 3), PageMark(2, 4)]) == [Cue.NONE, Cue.NONE]


def test_only_a_pages_header_and_footer_lines_are_read():
    body = [f"Line {i} of the findings." for i in range(10)]
    middle = "\n".join(body[:5] + ["as printed on page 2 of 3 of the outside report"] + body[5:])
    assert page_mark(middle) is None
    assert page_mark("\n".join(["Page 2 of 3", *body])) == PageMark(2, 3)
    assert page_mark("\n".join([*body, "Page 2 of 3", "CONFIDENTIAL"])) == PageMark(2, 3)
    # a short page is all edges
    assert page_mark("Findings.\nPage 3 of 3\nEnd.") == PageMark(3, 3)
