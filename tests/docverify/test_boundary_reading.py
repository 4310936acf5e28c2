"""The independent reading's boundary check and its abstention (ADR 0049): a form absorbed into the report
beside it is split off by the automatic fix; a text unlike the reader's training material makes it abstain
instead of disagreeing, and the night's audit draws such an accept with the largest weight."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
from scripts.support.labelled_corpus import part_records
from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification

from docverify.domain.models import Issue
from docverify.pipeline.autofix import apply_fixes
from docverify.reporting.audit_sample import sampling_confidence
from docverify.reporting.labelled_sample import split_pages
from docverify.verify import independent as ind
from docverify.verify.v1_schema import check as v1_check
from docverify.verify.v2_consistency import rule_phase as v2_rules

REPO = pathlib.Path(__file__).resolve().parents[2]
FORM_KINDS = ("registration", "consent", "roi_authorization", "questionnaire")


def _test_part(corpora_dir) -> list[dict]:
    return sorted(part_records(corpora_dir, REPO, "test"), key=lambda r: str(r["id"]))


def _form_pages(corpora_dir, n: int) -> list[str]:
    """The first page of the test part's first ``n`` clinic forms (never trained on) with 400+ letters."""
    out = []
    for r in _test_part(corpora_dir):
        if (r.get("labels") or {}).get("kind") in FORM_KINDS:
            page = r["text"].split("\f")[0].strip()
            if ind.letters(page) >= ind.MIN_PAGE_LETTERS:
                out.append(page)
    return out[:n]


def _report_pages(corpora_dir, doc_type: str, k: int) -> list[list[str]]:
    return [split_pages(r["text"], 1500)[:3] for r in _test_part(corpora_dir)
            if r["proposed_doc_type"] == doc_type and len(r["text"]) > 3500][:k]


def test_the_reader_ships_a_boundary_and_a_novelty_threshold():
    r = ind.default_reader()
    assert r.boundary_threshold >= max(r.page_threshold, r.short_threshold, r.tiny_threshold)
    assert r.tiny_threshold >= 0.5
    assert 0 < r.novelty_threshold < 1 and 0 < r.novelty_short_threshold < 1
    assert len(r.centroid_cols) == len(r.centroid_rows) == len(r.centroid_vals) > 0


def test_a_held_out_form_before_a_report_is_a_boundary_to_move_and_the_fix_splits_it(corpora_dir):
    """Ten held-out clinic forms, each put before a held-out pathology report and called one Pathology
    segment: most are read as a misplaced boundary at page 1, and the fix makes the true two segments,
    which then pass V1's and V2's rules."""
    forms = _form_pages(corpora_dir, 10)
    reports = _report_pages(corpora_dir, "Pathology Report", 10)
    assert len(forms) == 10 and len(reports) == 10
    found = 0
    for form, report in zip(forms, reports, strict=True):
        b = _bundle([form, *report])
        cls = _classification([(1, b.total_pages, "Pathology Report")])
        issues = [i for i in ind.disagreements(b, cls) if i.code == "SEGMENT_BOUNDARY_MISPLACED"]
        if not issues:
            continue
        found += 1
        [issue] = issues
        assert issue.auto_fixable and issue.severity == "MAJOR"
        assert issue.details["pages"] == [1, 1] and issue.details["read_as"] == "Other"
        fixed, applied = apply_fixes(cls, [issue.model_copy(update={"issue_id": "V2-0001"})], attempt=0)
        assert [(s.dominant_type, s.page_start, s.page_end, s.segment_index) for s in fixed.segments] == [
            ("Other", 1, 1, 1), ("Pathology Report", 2, b.total_pages, 2)]
        assert fixed.number_of_segments == 2 and applied and "page 1" in applied[0].description
        assert not [i for i in v1_check(b, fixed) + v2_rules(fixed, b) if i.severity in ("BLOCKER", "MAJOR")]
        # verified again: the reading has nothing more to say about the new segments
        assert not [i for i in ind.disagreements(b, fixed) if i.severity != "MINOR"]
    assert found >= 7, f"only {found} of 10 held-out forms before a report were read as a boundary"


def test_a_form_inside_a_report_is_not_split_automatically(corpora_dir):
    """A run of foreign pages in the middle of a segment is not a boundary: a person decides."""
    form = _form_pages(corpora_dir, 1)[0]
    report = _report_pages(corpora_dir, "Pathology Report", 1)[0]
    b = _bundle([report[0], form, *report[1:]])
    issues = ind.disagreements(b, _classification([(1, b.total_pages, "Pathology Report")]))
    assert not [i for i in issues if i.code == "SEGMENT_BOUNDARY_MISPLACED"]


def test_a_page_inside_a_segment_disagrees_only_as_surely_as_a_split(corpora_dir):
    """ADR 0067: another document inside a segment means two boundaries, so a run of pages that is neither the
    segment's first nor its last page disagrees only when it reads at least at the boundary threshold; the same
    page at the segment's edge disagrees at the page threshold."""
    form = _form_pages(corpora_dir, 1)[0]
    report = _report_pages(corpora_dir, "Pathology Report", 1)[0]
    reader = ind.default_reader()
    p_form = reader.read(form).probs["Other"]
    assert reader.page_threshold <= p_form  # the held-out form reads as Other at least at the page threshold
    inside = _bundle([report[0], form, *report[1:]])
    at_end = _bundle([*report, form])
    cls_inside = _classification([(1, inside.total_pages, "Pathology Report")])
    cls_end = _classification([(1, at_end.total_pages, "Pathology Report")])

    def disagreeing(b, cls, r):
        return [i.details["pages"] for i in ind.disagreements(b, cls, r)
                if i.code in ("INDEPENDENT_READING_DISAGREES", "SEGMENT_BOUNDARY_MISPLACED")]

    surer = dataclasses.replace(reader, boundary_threshold=min(1.0, p_form + 0.01))  # the form reads under it
    assert disagreeing(inside, cls_inside, surer) == []
    assert disagreeing(at_end, cls_end, surer) == [[at_end.total_pages, at_end.total_pages]]
    looser = dataclasses.replace(reader, boundary_threshold=max(reader.page_threshold, p_form - 0.01))
    assert disagreeing(inside, cls_inside, looser) == [[2, 2]]


def test_right_reports_are_not_split(corpora_dir):
    """Held-out reports labelled rightly: no page of theirs is a boundary to move."""
    for doc_type in ("Pathology Report", "Clinical Note", "Radiology Report"):
        for pages in _report_pages(corpora_dir, doc_type, 8):
            b = _bundle(pages)
            issues = ind.disagreements(b, _classification([(1, b.total_pages, doc_type)]))
            assert not [i for i in issues if i.code == "SEGMENT_BOUNDARY_MISPLACED"], doc_type


def test_a_tiny_page_is_read_and_a_blank_one_is_not():
    r = ind.default_reader()
    assert r.threshold("word " * 12, whole=False) == r.tiny_threshold  # 48 letters
    assert r.threshold("Page 2 of 3", whole=False) is None


def test_the_fix_leaves_a_whole_segment_and_an_inner_run_alone():
    cls = _classification([(1, 3, "Pathology Report")])
    whole = Issue(issue_id="V2-0001", agent="V2", severity="MAJOR", message="m", auto_fixable=True,
                  code="SEGMENT_BOUNDARY_MISPLACED", ig_code="IG-2",
                  details={"pages": [1, 3], "read_as": "Other", "probability": 0.9})
    inner = whole.model_copy(update={"details": {"pages": [2, 2], "read_as": "Other", "probability": 0.9}})
    fixed, applied = apply_fixes(cls, [whole, inner], attempt=0)
    assert applied == [] and fixed == cls


def test_an_unfamiliar_text_makes_the_reading_abstain_instead_of_disagreeing(corpora_dir):
    """The same wrong label: reported when the text is familiar, an abstention (MINOR) when the reader's
    novelty threshold says the text is unlike its training material."""
    pages = _report_pages(corpora_dir, "Radiology Report", 1)[0]
    b = _bundle(pages)
    wrong = _classification([(1, b.total_pages, "Pathology Report")])
    reader = ind.default_reader()
    never = dataclasses.replace(reader, novelty_threshold=0.0, novelty_short_threshold=0.0)
    [disagrees] = ind.disagreements(b, wrong, never)
    assert disagrees.code == "INDEPENDENT_READING_DISAGREES" and "familiarity" in disagrees.details
    always = dataclasses.replace(reader, novelty_threshold=1.01, novelty_short_threshold=1.01)
    [abstains] = ind.disagreements(b, wrong, always)
    assert abstains.code == "INDEPENDENT_READING_ABSTAINS" and abstains.severity == "MINOR"
    assert abstains.details["read_as"] == "Radiology Report" and "abstains" in abstains.message


def test_a_reading_of_other_never_abstains(corpora_dir):
    """"Other" is the open class: a form page in a report's segment is reported however unfamiliar it is."""
    form = _form_pages(corpora_dir, 1)[0]
    report = _report_pages(corpora_dir, "Pathology Report", 1)[0]
    b = _bundle([*report, form])
    always = dataclasses.replace(ind.default_reader(), novelty_threshold=1.01, novelty_short_threshold=1.01)
    issues = ind.disagreements(b, _classification([(1, b.total_pages, "Pathology Report")]), always)
    assert [i.code for i in issues if i.details["read_as"] == "Other"] in (
        ["SEGMENT_BOUNDARY_MISPLACED"], ["INDEPENDENT_READING_DISAGREES"])


def test_familiarity_separates_real_text_from_text_it_has_never_seen(corpora_dir):
    reader = ind.default_reader()
    pages = _report_pages(corpora_dir, "Clinical Note", 1)[0]
    assert reader.familiarity(pages[0]) >= reader.novelty_threshold
    # the same letters, words scrambled into strings no corpus holds
    scrambled = " ".join(w[::-1] + "qx" for w in pages[0].split())
    assert reader.familiarity(scrambled) < min(reader.novelty_threshold, reader.novelty_short_threshold)


@pytest.mark.parametrize("codes, expected", [([], 0.9), (["EVIDENCE_MISSING"], 0.9),
                                             (["INDEPENDENT_READING_ABSTAINS"], 0.0)])
def test_an_abstention_draws_the_accept_as_the_least_confident(codes, expected):
    cls = _classification([(1, 1, "Other")]).model_dump(mode="json")
    assert sampling_confidence(cls, codes) == pytest.approx(expected)


def test_pages_read_as_the_neighbours_type_move_the_boundary_instead_of_a_new_segment():
    """[Other 1–2][Pathology 3–5] where page 2 reads surely as Pathology: the boundary moves to page 2."""
    cls = _classification([(1, 2, "Other"), (3, 5, "Pathology Report")])
    issue = Issue(issue_id="V2-0001", agent="V2", severity="MAJOR", message="m", auto_fixable=True,
                  code="SEGMENT_BOUNDARY_MISPLACED", ig_code="IG-2",
                  details={"segment_index": 1, "pages": [2, 2], "read_as": "Pathology Report", "probability": 0.9})
    fixed, applied = apply_fixes(cls, [issue], attempt=0)
    assert [(s.dominant_type, s.page_start, s.page_end, s.segment_page_count) for s in fixed.segments] == [
        ("Other", 1, 1, 1), ("Pathology Report", 2, 5, 4)]
    assert "moved to segment 2" in applied[0].description
    assert not [i for i in v1_check(_bundle(["a"] * 5), fixed) + v2_rules(fixed, _bundle(["a"] * 5))
                if i.severity in ("BLOCKER", "MAJOR")]
