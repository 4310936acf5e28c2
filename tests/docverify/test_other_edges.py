"""V2's checks of a segment's edge against the report beside it. ``OTHER_EDGE_READS_AS_NEIGHBOUR`` (ADR 0064): the
first or last page of an "Other" segment beside a report whose reading is most likely that report's type (at least
EDGE_READS_MIN, the reading not abstaining) is a page of the report split off -- a person looks at it. A form that
reads as a form, an Other page beside another Other, a reading that abstains or leans elsewhere, is no finding.
``SEGMENT_EDGE_CONTINUES_NEIGHBOUR`` (ADR 0065): a Genomic Report segment's edge page that shares the words of the
Pathology Report beside it, shows its cues and reads as it is the report's molecular section."""

from __future__ import annotations

from dataclasses import dataclass

from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification
from tests.docverify.test_seams import FORM, REPORT_1, REPORT_2

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import DOC_TYPES, DocType
from docverify.verify.common import distinct_words, word_share
from docverify.verify.v2_consistency import (
    CONTINUED_MIN_SHARED,
    CONTINUED_PAIRS,
    EDGE_READS_MIN,
    continued_edges,
    offline_judgment,
    other_edges,
)

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


# --------------------------------------------------------------------------- a report's section as another type

#: a pathology report's molecular studies on a page of their own: genomic vocabulary for the lexicon (the
#: classifier may call it a Genomic Report), the report's specimen and block for the words it shares
MOLECULAR = ("MOLECULAR STUDIES on block A4 (invasive ductal carcinoma): HER2 gene amplification by FISH not detected "
             "(HER2/CEP17 ratio 1.1; 60 nuclei). Mismatch repair: MLH1, MSH2, MSH6, PMS2 expression retained. "
             "Microsatellite instability: stable. Sequencing of PIK3CA exon 20: no pathogenic variant detected. "
             "Controls reviewed.")
#: a genomic report of its own after the pathology report
GENOMIC = ("GENOMIC TESTING REPORT\nTest: Hereditary cancer panel, next-generation sequencing of 84 genes.\nResult: "
           "POSITIVE. Pathogenic variant detected: BRCA2 c.5946delT (p.Ser1982fs), heterozygous.\nVariant "
           "classification per ACMG guidelines. Genetic counseling is recommended for the patient and at-risk "
           "relatives.")
CONTINUES = "SEGMENT_EDGE_CONTINUES_NEIGHBOUR"


def _continued(spans, pages, readings=None):
    reader = None if readings is None else _Reader(readings)
    issues = continued_edges(_bundle(pages), _classification(spans), reader)  # type: ignore[arg-type]
    assert all(i.code == CONTINUES for i in issues)
    return issues


def test_the_continuation_code_is_a_major_a_person_decides():
    spec = CATALOGUE[CONTINUES]
    assert (spec.agent, spec.severity, spec.auto_fixable) == ("V2", "MAJOR", False)
    assert (DocType.GENOMIC_REPORT.value, DocType.PATHOLOGY_REPORT.value) in CONTINUED_PAIRS


def test_a_pathology_reports_molecular_page_called_genomic_is_found_and_a_genomic_report_is_not():
    """The real reader: the molecular studies share the report's words, show its cues and read as it; the
    hereditary-cancer panel after the same report is a genomic report of its own."""
    spans = [(1, 2, "Pathology Report"), (3, 3, "Genomic Report")]
    [issue] = _continued(spans, [REPORT_1, REPORT_2, MOLECULAR])
    assert issue.details["pages"] == [3, 3] and issue.details["read_as"] == "Pathology Report"
    assert issue.details["shared_words"] >= CONTINUED_MIN_SHARED and "page 3" in issue.message
    assert _continued(spans, [REPORT_1, REPORT_2, GENOMIC]) == []
    # in V2's offline judgment the page is named once (by the reading's own finding when it is surer)
    b = _bundle([REPORT_1, REPORT_2, MOLECULAR])
    named = [i.code for i in offline_judgment(b, _classification(spans)) if i.details.get("pages") == [3, 3]]
    assert len(named) == 1 and named[0] in (CONTINUES, "INDEPENDENT_READING_DISAGREES")


def test_each_of_its_conditions():
    spans = [(1, 2, "Pathology Report"), (3, 3, "Genomic Report")]
    pages = [REPORT_1, REPORT_2, MOLECULAR]
    assert len(_continued(spans, pages, {MOLECULAR: _leaning("Pathology Report", EDGE_READS_MIN)})) == 1
    # the reading leans elsewhere, too little, or abstains
    assert _continued(spans, pages, {MOLECULAR: _leaning("Genomic Report", 0.9)}) == []
    assert _continued(spans, pages, {MOLECULAR: _leaning("Pathology Report", EDGE_READS_MIN - 0.01)}) == []
    assert _continued(spans, pages, {MOLECULAR: _leaning("Pathology Report", 0.9, abstaining=True)}) == []
    # no Pathology cue on the page (the genomic report), or few words shared with the report's page beside it
    assert _continued(spans, [REPORT_1, REPORT_2, GENOMIC], {GENOMIC: _leaning("Pathology Report", 0.9)}) == []
    other_case = ("Immunohistochemistry on colon resection block B2: PMS2 and MLH1 retained. Microsatellite "
                  "instability testing pending.")  # Pathology cues, another specimen: no word of page 2
    assert word_share(distinct_words(other_case), distinct_words(REPORT_2)) < CONTINUED_MIN_SHARED
    assert _continued(spans, [REPORT_1, REPORT_2, other_case], {other_case: _leaning("Pathology Report", 0.9)}) == []
    # a pair not listed: a clinical note beside the pathology report
    assert _continued([(1, 2, "Pathology Report"), (3, 3, "Clinical Note")], pages,
                      {MOLECULAR: _leaning("Pathology Report", 0.9)}) == []
    # the genomic segment before the report: its last page
    assert [i.details["pages"] for i in _continued([(1, 1, "Genomic Report"), (2, 3, "Pathology Report")],
                                                   [MOLECULAR, REPORT_2, REPORT_1],
                                                   {MOLECULAR: _leaning("Pathology Report", 0.6)})] == [[1, 1]]
