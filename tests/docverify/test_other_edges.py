"""V2's check of an Other segment's edges (``OTHER_EDGE_READS_AS_NEIGHBOUR``, ADR 0064): the first or last page of
an "Other" segment beside a report whose reading is most likely that report's type (at least EDGE_READS_MIN, the
reading not abstaining) is a page of the report split off -- a person looks at it. A form that reads as a form,
an Other page beside another Other, a reading that abstains or leans elsewhere, is no finding."""

from __future__ import annotations

from dataclasses import dataclass

from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification
from tests.docverify.test_seams import FORM, REPORT_1, REPORT_2

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import DOC_TYPES
from docverify.verify.v2_consistency import EDGE_READS_MIN, offline_judgment, other_edges

#: a pathology report's last lines on a page of their own: no cue of any type in the lexicon, a reading that leans
#: to Pathology Report under the reading's own threshold for "another type"
TAIL = ("Slides and blocks are retained for ten years. Questions about this case: call the laboratory at extension "
        "4410.\nClient copy\nAccession S24-1187")
CODE = "OTHER_EDGE_READS_AS_NEIGHBOUR"


@dataclass
class _Reading:
    probs: dict[str, float]
    abstaining: bool = False

    def abstains(self, read_as: str) -> bool:
        return self.abstaining and read_as != "Other"


class _Reader:
    """A reading fixed per page text (the rule's logic, apart from what the trained reader makes of a text)."""

    implementation = "stub-reader"

    def __init__(self, readings: dict[str, _Reading]) -> None:
        self.readings = readings

    def read(self, text: str) -> _Reading:
        return self.readings.get(text, _Reading({t: (1.0 if t == "Other" else 0.0) for t in DOC_TYPES}))


def _leaning(doc_type: str, p: float, *, abstaining: bool = False) -> _Reading:
    rest = (1.0 - p) / (len(DOC_TYPES) - 1)
    return _Reading({t: (p if t == doc_type else rest) for t in DOC_TYPES}, abstaining)


def _pages(spans: list[tuple[int, int, str]], pages: list[str], readings: dict[str, _Reading]) -> list[list[int]]:
    issues = other_edges(_bundle(pages), _classification(spans), _Reader(readings))  # type: ignore[arg-type]
    assert all(i.code == CODE for i in issues)
    return [i.details["pages"] for i in issues]


def test_the_code_is_a_major_a_person_decides():
    spec = CATALOGUE[CODE]
    assert (spec.agent, spec.severity, spec.auto_fixable) == ("V2", "MAJOR", False)


def test_a_reports_last_page_split_off_as_other_is_found_by_the_offline_judgment():
    """The real reader: nothing else in V2's offline judgment names the page (no lexicon cue, a reading under its
    own threshold), this check does, and its message names the page and the neighbour's type."""
    b = _bundle([REPORT_1, REPORT_2, TAIL])
    cls = _classification([(1, 2, "Pathology Report"), (3, 3, "Other")])
    issues = offline_judgment(b, cls)
    assert [(i.code, i.details.get("pages")) for i in issues] == [(CODE, [3, 3])]
    issue = issues[0]
    assert issue.details["read_as"] == "Pathology Report" and issue.details["neighbour_segment"] == 1
    assert EDGE_READS_MIN <= issue.details["probability"] < 0.6
    assert "page 3" in issue.message and "Pathology Report" in issue.message and issue.severity == "MAJOR"


def test_a_form_in_its_own_segment_beside_a_report_is_no_finding():
    b = _bundle([REPORT_1, REPORT_2, FORM])
    assert [i for i in offline_judgment(b, _classification([(1, 2, "Pathology Report"), (3, 3, "Other")]))
            if i.code == CODE] == []


def test_the_threshold_and_the_most_likely_type():
    spans = [(1, 2, "Pathology Report"), (3, 3, "Other")]
    pages = [REPORT_1, REPORT_2, TAIL]
    assert _pages(spans, pages, {TAIL: _leaning("Pathology Report", EDGE_READS_MIN)}) == [[3, 3]]
    assert _pages(spans, pages, {TAIL: _leaning("Pathology Report", EDGE_READS_MIN - 0.01)}) == []
    # most likely a clinical note, not the pathology report beside it
    assert _pages(spans, pages, {TAIL: _leaning("Clinical Note", 0.7)}) == []


def test_a_reading_that_abstains_is_no_finding():
    spans = [(1, 2, "Pathology Report"), (3, 3, "Other")]
    assert _pages(spans, [REPORT_1, REPORT_2, TAIL], {TAIL: _leaning("Pathology Report", 0.9, abstaining=True)}) == []


def test_the_first_page_after_a_report_and_the_last_before_one():
    spans = [(1, 1, "Pathology Report"), (2, 3, "Other"), (4, 4, "Radiology Report")]
    pages = [REPORT_1, TAIL, FORM, "IMPRESSION: no acute disease."]
    assert _pages(spans, pages, {TAIL: _leaning("Pathology Report", 0.5)}) == [[2, 2]]
    assert _pages(spans, pages, {FORM: _leaning("Radiology Report", 0.5)}) == [[3, 3]]
    # page 2 leans to the report that is not beside it: nothing
    assert _pages(spans, pages, {TAIL: _leaning("Radiology Report", 0.9)}) == []


def test_an_other_page_between_two_reports_is_one_finding_naming_the_likelier_neighbour():
    spans = [(1, 1, "Pathology Report"), (2, 2, "Other"), (3, 3, "Clinical Note")]
    issues = other_edges(_bundle([REPORT_1, TAIL, REPORT_2]), _classification(spans),
                         _Reader({TAIL: _leaning("Clinical Note", 0.55)}))  # type: ignore[arg-type]
    assert [(i.details["pages"], i.details["read_as"], i.details["neighbour_segment"]) for i in issues] == [
        ([2, 2], "Clinical Note", 3)]


def test_no_report_beside_it_no_gap_and_no_report_segment_is_checked():
    lean = {TAIL: _leaning("Pathology Report", 0.9)}
    # an Other beside another Other
    assert _pages([(1, 1, "Other"), (2, 2, "Other")], [FORM, TAIL], lean) == []
    # a report segment's own edge: the seam check's, not this one's
    assert _pages([(1, 2, "Pathology Report")], [REPORT_1, TAIL], lean) == []
    # a page between them that no segment claims: not beside
    assert _pages([(1, 1, "Pathology Report"), (3, 3, "Other")], [REPORT_1, FORM, TAIL], lean) == []
