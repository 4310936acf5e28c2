"""V2's seam check (``SEGMENT_EDGE_UNRELATED``, ADR 0059): a segment's first or last page that shares almost no
words with the page beside it, shows no cue of the segment's type and does not read as it is another document
joined to the segment -- a person looks at it; a report's own last page, or a page that carries the segment's
type, is no seam."""

from __future__ import annotations

from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification

from docverify.domain.codes import CATALOGUE
from docverify.verify import independent as ind
from docverify.verify.v2_consistency import SEAM_MAX_OWN, SEAM_MAX_SHARED, offline_judgment, seams

REPORT_1 = (
    "SURGICAL PATHOLOGY REPORT\nSPECIMEN: Right breast, lumpectomy.\nGROSS DESCRIPTION: The specimen is received "
    "in formalin labelled right breast lumpectomy and consists of an oriented fibrofatty excision measuring "
    "6.2 x 4.5 x 3.1 cm. The margins are inked. Sectioning reveals a firm tan-white stellate mass measuring "
    "1.8 cm, located 0.6 cm from the inked deep margin. Representative sections are submitted in cassettes A1-A9."
)
REPORT_2 = (
    "MICROSCOPIC DESCRIPTION: Sections of the breast mass show invasive ductal carcinoma, Nottingham grade 2, "
    "with tubule formation, moderate nuclear pleomorphism and low mitotic count. The carcinoma is 0.6 cm from the "
    "deep margin; all other margins are free. Ductal carcinoma in situ, cribriform type, is present. Lymphovascular "
    "invasion is not identified.\nFINAL DIAGNOSIS: Right breast, lumpectomy: invasive ductal carcinoma, grade 2, "
    "1.8 cm; margins negative; DCIS present."
)
#: a short page about a practice's staff (a referral slip's back, say): no form by layout, no cue of any type in the
#: lexicon, too short for the reading to say more than "unsure"
STAFF = (
    "Lakeside Orthopedic Associates\nOur team: senior member of the regional craniofacial society; past president "
    "of the state orthodontic foundation.\nOffice hours Monday to Friday. Parking behind the building."
)
#: a registration form: the reading itself says "Other" at its edge (SEGMENT_BOUNDARY_MISPLACED)
FORM = (
    "NEW PATIENT REGISTRATION\nLast name ____________ First name ____________ M.I. ___\n"
    "Street address ______________________ City ____________ State ____ ZIP ______\n"
    "Home phone ____________ Cell phone ____________ Email ______________________\n"
    "Employer ____________ Employer phone ____________\n"
    "Emergency contact ____________ Relationship ____________ Phone ____________\n"
    "Insurance company ____________ Member ID ____________ Group number ____________\n"
    "Subscriber name ____________ Subscriber date of birth ____________\n"
    "How did you hear about our office?  [ ] Friend  [ ] Internet  [ ] Insurance directory  [ ] Other\n"
    "I authorize the release of any information necessary to process insurance claims.\n"
    "Signature ______________________  Date ____________"
)


def _codes(pages: list[str], spans: list[tuple[int, int, str]]):
    b = _bundle(pages)
    return b, [i for i in offline_judgment(b, _classification(spans)) if i.code == "SEGMENT_EDGE_UNRELATED"]


def test_the_code_is_a_major_a_person_decides():
    spec = CATALOGUE["SEGMENT_EDGE_UNRELATED"]
    assert (spec.agent, spec.severity, spec.auto_fixable) == ("V2", "MAJOR", False)


def test_a_staff_page_joined_after_a_pathology_report_is_a_seam_on_its_page():
    _, issues = _codes([REPORT_1, REPORT_2, STAFF], [(1, 3, "Pathology Report")])
    assert [(i.details["pages"], i.details["edge"]) for i in issues] == [([3, 3], "last")]
    assert "page 3" in issues[0].message and issues[0].severity == "MAJOR"
    assert issues[0].details["shared_words"] < SEAM_MAX_SHARED


def test_the_same_page_before_the_report_is_a_seam_on_its_first_page():
    _, issues = _codes([STAFF, REPORT_1, REPORT_2], [(1, 3, "Pathology Report")])
    assert [(i.details["pages"], i.details["edge"]) for i in issues] == [([1, 1], "first")]


def test_a_page_the_reading_already_names_is_one_finding_not_two():
    """The registration form reads surely as Other at the segment's end: the reading's fixable finding names it,
    and the seam on the same page is left out."""
    b = _bundle([REPORT_1, REPORT_2, FORM])
    cls = _classification([(1, 3, "Pathology Report")])
    assert [i.details["pages"] for i in seams(b, cls)] == [[3, 3]]
    codes = [(i.code, i.details["pages"]) for i in offline_judgment(b, cls) if i.details.get("pages") == [3, 3]]
    assert codes == [("SEGMENT_BOUNDARY_MISPLACED", [3, 3])]


def test_a_report_of_two_pages_is_no_seam():
    assert _codes([REPORT_1, REPORT_2], [(1, 2, "Pathology Report")])[1] == []


def test_the_form_in_its_own_segment_is_no_seam_and_an_other_segment_is_not_checked():
    assert _codes([REPORT_1, REPORT_2, STAFF], [(1, 2, "Pathology Report"), (3, 3, "Other")])[1] == []
    assert seams(_bundle([STAFF, REPORT_1]), _classification([(1, 2, "Other")])) == []


def test_an_edge_page_with_a_cue_of_the_segments_type_is_no_seam():
    """The same staff page, but it names a pathology cue: the lexicon sees the type, no seam."""
    with_cue = STAFF + "\nImmunohistochemistry and frozen section services on site."
    assert ind.default_reader().read(with_cue).probs["Pathology Report"] < SEAM_MAX_OWN  # only the cue differs
    assert _codes([REPORT_1, REPORT_2, with_cue], [(1, 3, "Pathology Report")])[1] == []


def test_the_review_page_places_the_seam_on_the_page_it_names_not_on_the_segments_evidence():
    """The segment's evidence is on page 1; the seam is page 3: the clinician's Go to page lands on page 3."""
    from docverify.domain.classification_view import ClassificationView
    from docverify.domain.models import SMEIssueSummary
    from docverify.sme.context import locate_issue, named_page

    b, [issue] = _codes([REPORT_1, REPORT_2, STAFF], [(1, 3, "Pathology Report")])
    cls = _classification([(1, 3, "Pathology Report")])
    summary = SMEIssueSummary(issue_id="i1", severity=issue.severity, agent=issue.agent, code=issue.code,
                              message=issue.message, location=issue.location, details=issue.details)
    assert named_page(summary) == 3
    placed = locate_issue(b, summary, ClassificationView.read(cls.model_dump(mode="json")))
    assert (placed["page"], placed["found"], placed["how"]) == (3, True, "page")
    assert "Lakeside" in placed["match"]
    # a finding that quotes text is placed by its text, as before
    quoting = summary.model_copy(update={"details": {**issue.details, "snippet": "invasive ductal carcinoma"}})
    assert named_page(quoting) is None and locate_issue(b, quoting, None)["page"] == 2
