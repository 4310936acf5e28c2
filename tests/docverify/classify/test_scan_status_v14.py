"""offline-lexicon-v14 (ADR 0070): how a page was read (OCR'd from its image, or its text layer) as a boundary cue.

A scanned form beside a report printed from the record system: a change of type where the scan status changes
costs SCAN_CHANGE x the penalty, into a page that is no weak page and shares little of the page before's words. A
PDF read one way throughout gives no cue, and the cue never splits one type.
"""

from __future__ import annotations

import pytest
from scripts.support.examples import bundle
from tests.docverify.classify.test_numbered_pages_v13 import APPOINTMENT, BILLING, MARGINS, PATH1, PATH2

from docverify.classify import offline
from docverify.classify.offline import classify_offline
from docverify.domain.models import DocumentBundle

#: a lab's billing notice: a few Other cues and a few pathology words, none of them on PATH1
NOTICE = ("Billing questions: contact the business office.\nPlease bring your insurance card.\n"
          "Copay is due at the time of service.\nFrozen section.\nImmunohistochemistry panel.")


def _scanned(pages: list[str], scanned: set[int], confidence: float = 0.83) -> DocumentBundle:
    """A bundle whose pages in ``scanned`` (1-based) were OCR'd, as the local PDF parser records them."""
    b = bundle(pages)
    return b.model_copy(update={"pages": [p.model_copy(update={"ocr_confidence": confidence})
                                          if p.page_num in scanned else p for p in b.pages]})


def _segments(b: DocumentBundle) -> list[tuple[str, int, int]]:
    return [(s.dominant_type, s.page_start, s.page_end) for s in classify_offline(b).segments]


def test_a_scanned_page_after_a_report_starts_its_own_document(monkeypatch):
    b = _scanned([PATH1, NOTICE], {2})
    assert _segments(b) == [("Pathology Report", 1, 1), ("Other", 2, 2)]
    monkeypatch.setattr(offline, "SCAN_STATUS", False)
    assert _segments(b) == [("Pathology Report", 1, 2)]


@pytest.mark.parametrize("after", [BILLING, APPOINTMENT])
def test_a_weak_page_gets_no_cue(after):
    # a page with a few cues only (a report's short last page looks the same) joins the report as before v14
    pages = offline._pages(_scanned([PATH1, after], {2}))
    cont = offline.continuity(pages[0], pages[1])
    assert offline._weak_page(pages[1]) and not offline._scan_changes(pages, 1, cont)
    assert _segments(_scanned([PATH1, after], {2})) == [("Pathology Report", 1, 2)]


def test_a_page_that_shares_the_words_of_the_page_before_gets_no_cue(monkeypatch):
    pages = offline._pages(_scanned([PATH1, NOTICE], {2}))
    cont = offline.continuity(pages[0], pages[1])
    assert offline._scan_changes(pages, 1, cont)
    monkeypatch.setattr(offline, "SCAN_MAX_CONT", cont)
    assert not offline._scan_changes(pages, 1, cont)


@pytest.mark.parametrize("scanned", [set(), {1, 2}])
def test_a_pdf_read_one_way_throughout_gives_no_cue(scanned):
    # the same two pages, both from their text layer or both OCR'd (a fax of the whole packet): the page joins
    # the report as before v14
    assert _segments(_scanned([PATH1, NOTICE], scanned)) == [("Pathology Report", 1, 2)]


def test_a_report_page_scanned_inside_a_report_stays_with_it():
    # the cue only makes a change of type cheaper: a page that continues the report (no cue of another type)
    # stays in it, whichever way it was read
    assert _segments(_scanned([PATH1, MARGINS], {2})) == [("Pathology Report", 1, 2)]


def test_two_reports_of_one_type_read_differently_are_not_split_by_it():
    assert _segments(_scanned([PATH1, PATH2], {2})) == [("Pathology Report", 1, 2)]


def test_the_page_decision_says_how_the_page_was_read():
    out = classify_offline(_scanned([PATH1, NOTICE, APPOINTMENT], {2, 3}))
    reasons = {d.page: d.reason for d in out.page_decisions}
    assert "read from its image (OCR), the page before from its text layer" in reasons[2]
    assert "OCR" not in reasons[1] and "OCR" not in reasons[3]
    assert out.classifier == offline.IMPLEMENTATION == "offline-lexicon-v14"


def test_the_switch_factor(monkeypatch):
    pages = offline._pages(_scanned([PATH1, NOTICE, APPOINTMENT], {2, 3}))
    conts = offline._emissions(pages)[-1]
    monkeypatch.setattr(offline, "SCAN_STATUS", False)
    plain = offline._emissions(pages)[-1]
    assert conts[1] == pytest.approx(plain[1] * offline.SCAN_CHANGE) and conts[1] < plain[1]
    assert conts[0] == plain[0] and conts[2] == plain[2]
