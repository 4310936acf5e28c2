"""The offline classifier: the embedded default's "judgment" without an LLM.

A real, deterministic algorithm over the lexicon of :mod:`docverify.domain.lexicon` — weaker
than Gemini, never a canned answer. It produces a complete :class:`ClassificationOutput` that
passes V1 and V2's rule checks by construction: all five types in every segment and in the
mixture, shares summing to 1, pages in bounds, no overlaps, confidences in [0, 1], evidence for
every type that is not NO_EVIDENCE (taken verbatim from the page it names).

1. **Pages.** Every page 1..N is scored (:func:`~docverify.domain.lexicon.analyse`): one
   length-normalised score per type. N is ``max(total_pages, highest page_num)``; a page missing
   from the bundle counts as a page without text. **Clinical structure** (ADR 0043): on a page
   that holds at least :data:`STRUCTURE_MIN` distinct section headers of a clinical note's own
   (history, examination, plan; the lexicon's and the classifier-only :data:`NOTE_HEADERS`),
   Radiology Report and Other count :data:`STRUCTURE_FACTOR` of their score: a consult full of
   imaging findings or a progress note listing labs is a note. Everything below reads these
   scores; the lexicon's own scores (V2's and V4's) are unchanged.
2. **Segmentation** — a Viterbi pass over the pages. Labelling page *p* with type *t* costs
   ``max_t' S[p][t'] - S[p][t]`` (what the page's own best type would have scored more), and
   every change of type between neighbouring pages costs :data:`SWITCH_PENALTY`. The cheapest
   labelling gives contiguous runs of pages = segments. Consequences: a page without text (or
   without any cue) costs nothing under any label, so it joins its neighbours; a page with weak
   evidence joins its neighbours too; a 1-page segment survives only when its evidence beats
   its neighbours' type by more than 2 x SWITCH_PENALTY (1 x at either end of the document).
   **Page continuity.** A page *supports* a type when its score for it is at least
   :data:`CONTINUE_RATIO` of the page's best score (a page without any cue supports every type).
   A *weak* page — its leading type has fewer than :data:`WEAK_PAGE_CUES` distinct cues (a
   footer-only page, boilerplate, an appendix: methods, gene lists, disclaimers) — costs only
   :data:`WEAK_PAGE_FACTOR` of its emission under the types it supports, and leaving a type it
   supports for it costs :data:`WEAK_SWITCH` x the penalty: it continues the segment before it.
   A weak page that shows (next to) nothing of the running segment's type gets neither
   discount: its own evidence, however small, disagrees with the segment, and a new segment
   starts there when that evidence outweighs the penalty (a short report after a long one).
   A page that opens with a section header (within its first :data:`OPEN_CHARS` characters)
   may start a document: a change of type into it costs :data:`OPEN_SWITCH` x the penalty.
   **Continuity** (ADR 0035; on since v5, ADR 0042): a page's continuity score is the share of
   distinct words (4+ letters) it has in common with the page before it (Jaccard). Pages of one
   document share their vocabulary, the first page of another shares little (tuning parts: a new
   document's first page scores under 0.1, a continuation page's median is 0.13). A page scoring at
   least :data:`CONT_HIGH` reads as a continuation: its emissions under the clinical types that it
   *and the page before it* score at least :data:`CONT_SUPPORT` of their best score for count
   :data:`CONT_EMIT` of their weight (a note's last page of imaging results follows the note). It
   never follows a neighbour into "Other" (:data:`CONT_EXCLUDE`): a report whose first page repeats
   the consent form's words before it is a report, not more of the form. A change of type into a
   page scoring under :data:`CONT_LOW` costs :data:`BREAK_SWITCH` x the penalty (1.0: off).
   **Radiology headers** (ADR 0042): a change of type into Radiology Report on a page that holds no
   Radiology header (EXAMINATION, FINDINGS, TECHNIQUE, ...; not those that head clinical notes too,
   :data:`HEADER_IGNORED`: IMPRESSION, HISTORY, EXAM, INDICATIONS, PROCEDURE) costs
   :data:`HEADERLESS_SWITCH` x the penalty: imaging findings without a report's headers are, far
   more often, a note discussing them.
   **Form pages** (offline-lexicon-v8, ADR 0048): a page that is a form as a whole by its layout
   (:mod:`docverify.classify.form_layout`: at least :data:`FORM_SHARE` of its lines are field lines -- labels
   without a value, blanks, checkboxes, yes/no choices, signature and date lines -- and at least
   :data:`FORM_MIN_FIELDS` of them, few sentences, and no strong clinical reading: :func:`is_form`) counts
   :data:`FORM_FACTOR` of its clinical scores and at least :data:`FORM_OTHER` for Other; it is never a weak page,
   and a change of type into it, or out of it into a page that is no form, costs :data:`FORM_SWITCH` x the
   penalty: a one-page form before, between or after reports opens its own Other segment. A segment of form
   pages only is Other (its reasoning and its page decisions say "form page" and why).
   **Pages with next to nothing of their own** (offline-lexicon-v12, ADR 0068): leaving a form page for a page
   without any cue costs the whole penalty (:data:`FAINT_AFTER_FORM`: it continues the form), and a weak page led
   by Other that shares at least :data:`WEAK_OTHER_MIN_CONT` of its words with the page before, no form page,
   supports every type (:data:`WEAK_OTHER_CONTINUES`: a report's last page with a "please call" line and a
   CONFIDENTIAL stamp continues the report).
   **Printed page numbers** (offline-lexicon-v13, ADR 0069; :mod:`docverify.domain.pagination`): a change of type
   into a page numbered "k of n" right after "k-1 of n" costs :data:`NUMBERED_CONTINUE` x the penalty; into a page
   numbered "1 of n", or after a page numbered "n of n", :data:`NUMBERED_START` x it; and a page numbered "1 of n"
   right after one numbered "m of m" starts a segment even when both read as one type (:data:`NUMBERED_SPLIT`:
   two documents of one type side by side). One counter over the whole PDF (a fax stamp) is no cue.
   **Scan status** (offline-lexicon-v14, ADR 0070): a change of type into a page read otherwise than the page
   before it -- one OCR'd from its image (``Page.ocr_confidence`` set), the other from its text layer -- costs
   :data:`SCAN_CHANGE` x the penalty when the page is no weak page and shares under :data:`SCAN_MAX_CONT` of its
   words with the page before: a scanned form beside a report printed from the record system.
   Ties prefer the type with the larger total over the whole document, then "Other".
3. **Per segment.** ``total[t]`` = sum of the page scores of t, ``peak[t]`` = its best page.
   The dominant type is the type with the largest total among those with at least one evidence
   unit in the segment; when no type has any (no text, or no cue at all) the dominant type is
   "Other" with a low confidence (:data:`FALLBACK_CONFIDENCE`). **Minimum-evidence rule**: when
   the leading type is not "Other" but weak (mean score per page with text under
   :data:`MIN_EVIDENCE_SCORE`, or under twice that with fewer than :data:`MIN_DISTINCT_CUES`
   distinct cues), the segment is "Other" with :data:`WEAK_FALLBACK_CONFIDENCE`, and its
   reasoning names the weak type and its cues. Cues on a form's option line (a checkbox or a
   blank on the line) count 0.15 of their weight and not as distinct cues. Neighbouring segments that end up
   with the same dominant type are merged. The other types get, with ``ratio = total[t] /
   total[dominant]``:

   ============  ============================================================================
   EMBEDDED_RAW  ratio >= :data:`EMBEDDED_RATIO` and peak >= :data:`EMBEDDED_MIN_PEAK`: a
                 substantial body of that type's content inside the segment
   MENTION_ONLY  ratio >= :data:`MENTION_RATIO` and peak >= :data:`MENTION_MIN_PEAK`: the type's
                 vocabulary is there, but only in passing
   NO_EVIDENCE   otherwise, and always when no evidence unit holds one of the type's cues
   ============  ============================================================================

   Shares: PRIMARY weighs ``total[dominant]``, EMBEDDED_RAW ``0.6 * total[t]``, MENTION_ONLY
   ``0.15 * total[t]``, NO_EVIDENCE 0; normalised, rounded to 4 decimals, the rounding remainder
   on the dominant type (sum == 1 within 1e-9). Confidence of the dominant type grows with its
   evidence (``1 - exp(-mean page score / 6)``) and its margin over the runner-up, between 0.25
   and 0.95; the others get ``min(ratio, 0.9) * (1 - exp(-peak / 6))``; NO_EVIDENCE gets 0.
4. **Evidence.** 1–3 items per type that is not NO_EVIDENCE: the units (verbatim lines or
   sentences of 25–200 characters, never a header/footer line or a generic phrase) holding the
   most weight of that type's cues; ``anchors_found`` are that type's cues on that page, exactly
   as they appear in the page text (those inside the snippet first). Every quote passes V4's own
   look-up (:func:`docverify.verify.v4_evidence.find_on_page`, ADR 0035): a unit cut out from under
   a governing negation ("obvious tumor. ..." out of "no obvious tumor. ...") is extended back to
   take the negation in (at most :data:`NEGATION_REACH` characters, within its line and
   SNIPPET_MAX), else not quoted.
5. **Document.** The mixture is the page-weighted average of the segment shares (rounded the
   same way); its presence level is the highest across segments; the dominant type overall is
   the type with the largest overall share. ``vendor_signals`` come from
   :func:`~docverify.domain.lexicon.find_vendors` over the whole text. The document confidence is the
   page-weighted dominant confidence, calibrated (:mod:`docverify.classify.calibration`: the
   probability that the dominant type is right, Platt scaling fitted on the tuning parts).
6. **Page decisions** (ADR 0035): ``page_decisions`` records, per page, its score per type, its
   continuity score, whether it opens with a header, its segment's type and why a segment starts
   or continues there (since v8: "form page (N of M lines are form fields, K sentence(s); ...)" on a form
   page, since v9 "form page (it addresses its reader: ...)" on one that speaks to its reader, "after a form page" on the page that starts a segment after one) — numbers and lexicon labels,
   never page text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from docverify.classify.calibration import calibrated, calibration
from docverify.classify.form_layout import FormLayout, form_layout
from docverify.domain.lexicon import (
    SNIPPET_MAX,
    SNIPPET_MIN,
    TextAnalysis,
    Unit,
    analyse,
    find_vendors,
    get_lexicon,
)
from docverify.domain.models import (
    DOC_TYPES,
    PRESENCE_RANK,
    ClassificationOutput,
    DocType,
    DocumentBundle,
    Evidence,
    MixtureEntry,
    Page,
    PageDecision,
    PresenceLevel,
    Segment,
    SelfEvaluation,
    TypeClassification,
)
from docverify.domain.pagination import Cue, PageMark, boundary_cues, page_mark
from docverify.verify.common import distinct_words, word_share
from docverify.verify.v4_evidence import find_on_page

#: offline-lexicon-v8 (ADR 0048): v7's (ADR 0045: v6's rules over lexicon-v4) with form pages: a page that is a
#: form by its layout opens its own Other segment (FORM_*); the lexicon is v7's. offline-lexicon-v9 (ADR 0059):
#: v8's with a page that addresses its reader ("you", "your": ADDRESS_*), or instructs and addresses them
#: (INSTRUCTED_FORMS), a form page too. offline-lexicon-v10 (ADR 0060): v9's with a lone first page (LONE_FIRST_*) a
#: form page too. offline-lexicon-v11 (ADR 0066): v10's with a change of type into a page that starts mid-sentence
#: costing more (MID_SENTENCE_SWITCH). offline-lexicon-v12 (ADR 0068): v11's with a page without any cue after a form
#: page continuing the form (FAINT_AFTER_FORM) and a weak page led by Other continuing the page before it when it
#: shares its words (WEAK_OTHER_CONTINUES). offline-lexicon-v13 (ADR 0069): v12's with printed page numbers read
#: (NUMBERED_*): "Page k of n" after "Page k-1 of n" continues its document, "Page 1 of n" or the page after "n of n"
#: may start one, and two numberings meeting split even two documents of one type. offline-lexicon-v14 (ADR 0070):
#: v13's with a change of type into a page read otherwise than the page before it (OCR'd beside a text layer)
#: costing less (SCAN_STATUS).
IMPLEMENTATION = "offline-lexicon-v14"

OTHER = DocType.OTHER.value
PRIMARY = PresenceLevel.PRIMARY.value
EMBEDDED_RAW = PresenceLevel.EMBEDDED_RAW.value
MENTION_ONLY = PresenceLevel.MENTION_ONLY.value
NO_EVIDENCE = PresenceLevel.NO_EVIDENCE.value

#: Cost of a change of type between two neighbouring pages (in page-score points).
SWITCH_PENALTY = 2.5
#: Page-boundary logic: the emissions of a page whose leading type shows fewer than
#: WEAK_PAGE_CUES distinct cues are scaled by WEAK_PAGE_FACTOR under the types the page supports
#: (a footer-only page, a page of boilerplate, an appendix), and leaving a type the page supports
#: for it costs WEAK_SWITCH times the penalty, so that it continues the document before it; a
#: page with its own evidence starts a segment.
WEAK_PAGE_CUES = 3
WEAK_PAGE_FACTOR = 0.3
WEAK_SWITCH = 1.5
#: A weak page whose leading type is Other -- a report's last page with a fax footer, a page number, a phone line,
#: a disclaimer -- and which shares at least WEAK_OTHER_MIN_CONT of its distinct words with the page before it
#: supports every type: it continues the document before it as a page without any cue does (offline-lexicon-v12,
#: ADR 0068). On the tuning part's PDFs (four draws) the weak pages led by Other after a page that is no form page
#: continue their document 73 of 73 times when they share at least 2 % of their words with it; of those sharing
#: less, 37 continue and 5 begin a document (one-page covers). After a form page the rule does not apply: the page
#: continues the form. Without it a report's last page of this kind became an Other segment of its own.
WEAK_OTHER_CONTINUES = True
WEAK_OTHER_MIN_CONT = 0.02
#: A page supports a type (could continue a segment of it) when its score for the type is at
#: least this fraction of its best score.
CONTINUE_RATIO = 0.5
#: A page that opens with a section header (a header cue within its first OPEN_CHARS characters:
#: "EXAMINATION:", "PREOPERATIVE DIAGNOSIS:", "FAX COVER SHEET") may start a document: a change of
#: type into it costs OPEN_SWITCH times the penalty.
OPEN_SWITCH = 0.7
OPEN_CHARS = 150
#: A page whose text starts with a lower-case letter starts in the middle of a sentence: it continues the page
#: before it (a document begins with its title, a header or a letterhead), so a change of type into it costs
#: MID_SENTENCE_SWITCH times the penalty (offline-lexicon-v11, ADR 0066). A form page is exempt (its first line
#: is often a field's leftover). Soft, not a rule: 42 of 2,561 pages where a document begins in the tuning part's
#: packets start lower-case too (an OCR'd line of noise, a FHIR resource's "status:", a "path report" title), against
#: 540 of 2,090 continuation pages. Chosen on the tuning part (1.5, 2.0 and 3.0 measured: 3.0 broke more than it
#: fixed).
MID_SENTENCE_SWITCH = 2.0
#: Page continuity (ADR 0035, on since offline-lexicon-v5, ADR 0042): the share of distinct words
#: (:func:`docverify.verify.common.word_share`: 4+ letters) a page has in common with the page before it (Jaccard). Pages of one document share their
#: vocabulary (names, the diagnosis, the procedure, the form's boilerplate); the first page of another
#: document shares little. A page scoring at least CONT_HIGH continues the page before it: its emissions
#: under the types that it and the page before it (CONT_MUTUAL) score at least CONT_SUPPORT of their best
#: score for count CONT_EMIT of their weight, so it follows a neighbour of such a type (a clinical note's
#: page of imaging findings stays in the note) but not one of a type it shows (next to) nothing of (two
#: FHIR resources share their format words), and never into a type of CONT_EXCLUDE: "Other" is what is
#: left when no clinical type holds, and a report's first page that repeats the consent form before it
#: is not more of the form (with Other allowed, the first test part lost a page, ADR 0042). A page without
#: words is neutral. CONT_HIGH, CONT_SUPPORT, CONT_EMIT and CONT_MUTUAL were chosen on the tuning parts'
#: multi-document PDFs. The other half measured in ADR 0035 -- a change of type into a page scoring under
#: CONT_LOW costs BREAK_SWITCH times the penalty -- stays off (BREAK_SWITCH = 1.0): with it the first test
#: part's 60 multi-document PDFs fell (ADR 0035) and on the tuning parts it gained nothing on its own.
CONT_HIGH = 0.1
CONT_EMIT = 0.1
CONT_SUPPORT = 0.25
CONT_MUTUAL = True
CONT_EXCLUDE: frozenset[str] = frozenset({OTHER})
CONT_LOW = 0.015
BREAK_SWITCH = 1.0
#: A radiology report carries its report headers (EXAMINATION, FINDINGS, IMPRESSION, TECHNIQUE,
#: COMPARISON, ...); a page of imaging findings without any is, far more often, a clinical note's or a
#: procedure note's page that discusses imaging. A change of type into Radiology Report on a page that
#: holds no Radiology header costs HEADERLESS_SWITCH times the penalty (ADR 0042; chosen on the tuning parts).
HEADERLESS_SWITCH = 2.0
HEADER_REQUIRED = frozenset({DocType.RADIOLOGY_REPORT.value})
#: Headers that do not count as a type's header for HEADERLESS_SWITCH (offline-lexicon-v6, ADR 0043): the
#: Radiology headers that head clinical notes too (IMPRESSION of a consult, HISTORY, EXAM, INDICATIONS and
#: PROCEDURE of a procedure note): a note's last page with its IMPRESSION and the angiogram's contrast is not a
#: radiology report's first page.
HEADER_IGNORED: dict[str, frozenset[str]] = {
    DocType.RADIOLOGY_REPORT.value: frozenset({"IMPRESSION", "HISTORY", "EXAM", "INDICATIONS", "PROCEDURE"})}
#: EMBEDDED_RAW: the type's total is at least this fraction of the dominant's, and one page
#: scores at least EMBEDDED_MIN_PEAK for it.
EMBEDDED_RATIO = 0.45
EMBEDDED_MIN_PEAK = 4.0
#: MENTION_ONLY: at least this fraction of the dominant's total, and one page at least
#: MENTION_MIN_PEAK (one strong cue or a few weak ones).
MENTION_RATIO = 0.05
MENTION_MIN_PEAK = 1.5
#: Share weight of each presence level, relative to the type's total score.
SHARE_WEIGHT = {PRIMARY: 1.0, EMBEDDED_RAW: 0.6, MENTION_ONLY: 0.15, NO_EVIDENCE: 0.0}
#: Smallest share of a type that is present (so that "present" never means a share of 0).
MIN_PRESENT_SHARE = 0.0001
#: The minimum-evidence rule: a clinical type needs at least this mean score per page with text
#: and this many distinct cues (outside form option lines), else the segment is "Other" with a
#: low confidence (a weak or single cue is no report).
MIN_EVIDENCE_SCORE = 1.5
MIN_DISTINCT_CUES = 2
#: Confidence of the "Other" fallback (no cue at all), with and without page text.
FALLBACK_CONFIDENCE = 0.1
NO_TEXT_CONFIDENCE = 0.05
MAX_EVIDENCE = 3
MAX_ANCHORS = 5


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


@dataclass
class _Page:
    num: int
    text: str
    analysis: TextAnalysis
    #: the bundle's page (V4 looks quotes up on it); an empty stand-in for a page missing from it
    bundle_page: Page
    _norm_text: str | None = None
    _words: frozenset[str] | None = None

    @property
    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = distinct_words(self.text)
        return self._words

    @property
    def norm_text(self) -> str:
        if self._norm_text is None:
            self._norm_text = _norm(self.text)
        return self._norm_text

    _scores: dict[str, float] | None = None
    _layout: FormLayout | None = None

    #: which rule makes it a form page (:func:`form_rule`), "" when none; None until asked
    _form_rule: str | None = None

    def score(self, doc_type: str) -> float:
        if self._scores is None:
            self._scores = page_scores(self.analysis, form=self.form)
        return self._scores[doc_type]

    @property
    def scanned(self) -> bool:
        """The page's text was read by OCR from its image (it has no text layer)."""
        return self.bundle_page.ocr_confidence is not None

    @cached_property
    def mark(self) -> PageMark | None:
        """The page's printed page number (:func:`~docverify.domain.pagination.page_mark`), read once."""
        return page_mark(self.text)

    @property
    def layout(self) -> FormLayout:
        if self._layout is None:
            self._layout = form_layout(self.analysis)
        return self._layout

    @property
    def form_rule(self) -> str | None:
        """Which rule makes the page a form page (:func:`form_rule`), None when it is none."""
        if self._form_rule is None:
            self._form_rule = form_rule(self.analysis, self.layout) or ""
        return self._form_rule or None

    @property
    def form(self) -> bool:
        """The page is a form as a whole (:func:`is_form`: its layout, or it addresses or instructs its reader; or
        it is a lone first page, :func:`_lone`)."""
        return self.form_rule is not None

    def mark_lone(self) -> None:
        """Make the page a form page as a lone first page (its scores are computed again as a form page's)."""
        self._form_rule = LONE
        self._scores = None


CLINICAL = DocType.CLINICAL_NOTE.value
RADIOLOGY = DocType.RADIOLOGY_REPORT.value
#: Clinical structure (offline-lexicon-v6, ADR 0043): a page that holds at least STRUCTURE_MIN distinct section
#: headers of a clinical note's own -- the history, examination and plan of a patient (PAST MEDICAL HISTORY,
#: SOCIAL HISTORY, REVIEW OF SYSTEMS, ALLERGIES, VITAL SIGNS, ASSESSMENT AND PLAN, HOSPITAL COURSE, ESTIMATED
#: BLOOD LOSS, ...) -- is a note, whatever imaging it discusses or labs it lists: its Radiology Report and Other
#: scores count STRUCTURE_FACTOR of their weight (the classifier's own view of the page; the lexicon's scores,
#: which V2 and V4 read, are unchanged). On the tuning parts 381 of 382 radiology report pages hold at most one
#: such header. Not counted: the headers other types' reports carry too (STRUCTURE_SHARED: IMPRESSION, HISTORY,
#: EXAM, INDICATIONS, PROCEDURE head radiology reports, DIAGNOSIS pathology reports) and one-word headers of any
#: report (GENERAL, CONDITION, OPERATION, RECOMMENDATIONS, CONSULTATION). Pathology keeps its weight: a pathology
#: report quotes the operation's diagnoses and clinical history.
STRUCTURE_MIN = 2
STRUCTURE_FACTOR = 0.5
STRUCTURE_DAMPED: frozenset[str] = frozenset({RADIOLOGY, OTHER})
STRUCTURE_SHARED: frozenset[str] = frozenset({
    "IMPRESSION", "HISTORY", "INDICATIONS", "EXAM", "PROCEDURE", "DIAGNOSIS",
    "GENERAL", "CONDITION", "OPERATION", "RECOMMENDATIONS", "CONSULTATION"})
#: Section headers of notes that the shared lexicon does not list (classifier-only: they count towards the
#: clinical structure above and nothing else, so V2's and V4's lexical checks do not move): the neurological
#: and system examination of a note (MS:, CN:, Motor:, Reflexes:, Gait:, ...), an eye clinic's examination
#: (VISUAL ACUITY, SLIT LAMP, INTRAOCULAR PRESSURE, ...), a discharge summary's and an operative note's closing
#: sections. A header starts a line or follows ``,`` ``.`` ``;`` (transcribed notes run their sections together
#: as ",SECTION:,") and ends with a colon; the short ones count in capitals only.
NOTE_HEADERS: tuple[str, ...] = (
    "MOTOR", "SENSORY", "SENSATION", "COORDINATION", "COORD", "STATION", "GAIT", "REFLEXES", "GEN EXAM",
    "MENTAL STATUS", "CRANIAL NERVES", "SKIN", "RESPIRATORY", "GENITOURINARY", "MUSCULOSKELETAL", "LYMPHATICS",
    "PSYCH", "ALLERGY", "DIET", "ACTIVITY", "CODE STATUS", "IMPRESSION/PLAN", "IMPRESSION AND RECOMMENDATIONS",
    "PAST OCULAR HISTORY", "VISUAL ACUITY", "SLIT LAMP EXAMINATION", "SLIT LAMP EXAM", "FUNDUS",
    "DILATED FUNDUS EXAMINATION", "INTRAOCULAR PRESSURE", "EXTRAOCULAR MOVEMENTS", "PUPILS", "LIDS", "CONJUNCTIVA",
    "CORNEA", "DISCHARGE CONDITION", "DISCHARGE DISPOSITION", "DISCHARGE PLAN", "CONDITION ON DISCHARGE",
    "POSTOPERATIVE CONDITION", "PROCEDURE DETAILS", "DESCRIPTION OF THE PROCEDURE", "DESCRIPTION OF THE OPERATION",
    "INDICATIONS FOR THE PROCEDURE", "INDICATION FOR PROCEDURE", "INDICATION FOR OPERATION",
    "HISTORY OF PRESENT ILLNESS", "PAST MEDICAL HISTORY")
NOTE_HEADERS_CS: tuple[str, ...] = (
    "MS", "CN", "HEENT", "GU", "MSK", "EXT", "NEURO", "GEN", "CV", "RESP", "ABD", "VS", "BP", "HR", "RR")
_NOTE_HEADER = re.compile(
    r"(?:^|(?<=[\n,.;]))[ \t]*(?:(?i:" + "|".join(re.escape(h).replace(r"\ ", r"\s+") for h in NOTE_HEADERS)
    + r")|" + "|".join(NOTE_HEADERS_CS) + r")[ \t]*:", re.MULTILINE)


def clinical_structure(analysis: TextAnalysis) -> int:
    """The number of distinct section headers of a clinical note's own on the page (see STRUCTURE_MIN)."""
    labels = {h.entry.label for h in analysis.hits.get(CLINICAL, ())
              if h.entry.kind == "header" and h.factor == 1.0 and h.entry.label not in STRUCTURE_SHARED}
    labels |= {" ".join(m.group(0).strip(" \t:").upper().split()) for m in _NOTE_HEADER.finditer(analysis.text)}
    return len(labels)


#: Form pages (offline-lexicon-v8, ADR 0048): a page is a form as a whole when it has at least FORM_MIN_LINES
#: lines, at least FORM_MIN_FIELDS of them field lines (a blank, a checkbox, a yes/no choice, a signature or date
#: line, labels with nothing after them: :mod:`docverify.classify.form_layout`) making at least FORM_SHARE of its
#: lines, at most FORM_SENTENCES sentences of prose per line, and no type but Other scoring FORM_MAX_CLINICAL or
#: more (unless its field lines make FORM_STRONG_SHARE of its lines): a pathology report's page of specimen fields
#: and a radiology report's EXAM/DATE header lines read as their report. The classifier's view of a form page:
#: its scores for the clinical types count FORM_FACTOR of their weight, Other scores at least FORM_OTHER; it is
#: never a weak page, and a change of type into it, or out of it into a page that is no form, costs
#: FORM_SWITCH x the penalty: a one-page form before, between or after reports opens its own Other segment.
FORM_MIN_LINES = 5
FORM_MIN_FIELDS = 4
FORM_SHARE = 0.2
FORM_SENTENCES = 0.5
FORM_MAX_CLINICAL = 6.0
FORM_STRONG_SHARE = 0.6
FORM_FACTOR = 0.25
FORM_OTHER = 4.0
FORM_SWITCH = 0.5
#: A page that addresses its reader (offline-lexicon-v9, ADR 0059) is a form page too, whatever its layout: at least
#: ADDRESS_MIN_WORDS words, at least ADDRESS_SHARE of them "you", "your", "yours" or "yourself", and no type but
#: Other scoring ADDRESS_MAX_CLINICAL or more. A form, a consent, a release, a questionnaire, a fax cover speak to
#: the one who fills them in or receives them; a report speaks about the patient. On the tuning part's first
#: pages (30+ words): 0 of 1,254 pages of the four report types reach 1 %, 64-90 % of the business, registration,
#: consent and questionnaire forms reach 2 % (fax covers, requisitions and prescriptions mostly do not).
ADDRESSED_FORMS = True
ADDRESS_MIN_WORDS = 30
ADDRESS_SHARE = 0.02
ADDRESS_MAX_CLINICAL = 6.0
#: ... and so is a page that instructs its reader ("Please circle any items that you have today", "If yes, ...")
#: and addresses them at least once, whatever its clinical vocabulary (INSTRUCTED_FORMS): a review-of-systems
#: questionnaire lists symptoms, a report never tells its reader to circle them. Tuning part's first pages: 0 of
#: 1,255 report pages, every questionnaire and 42-60 % of the business, registration and release forms.
INSTRUCTED_FORMS = True
#: A lone first page (offline-lexicon-v10, ADR 0060) is a form page too: the first page of a document of several
#: pages that holds no cue of any type (every score under LONE_FIRST_MAX_SCORE), at least LONE_FIRST_MIN_WORDS
#: words, and shares under LONE_FIRST_SHARE of its distinct words with page 2. A report's first page names what it
#: is (its title, its headers) and a continuation page never comes first, so a first page with nothing of any
#: report and nothing of the page after it is a document of its own -- the last page of a form, an information
#: leaflet, a form in another language -- which the Viterbi pass let page 2's type absorb (its emissions cost
#: nothing under any type). Only the first page: a report's *last* page often holds a few words of no type
#: ("Plan was for repeat cultures.", a QC stub) and little of the page before it. Tuning part (4 draws of the
#: intake, hard and multi-document sets, the single documents): 8 packets right, none wrong; with the last page too
#: 11 right and 14 wrong.
LONE_FIRST_PAGE = True
LONE_FIRST_MAX_SCORE = 0.5
LONE_FIRST_SHARE = 0.02
LONE_FIRST_MIN_WORDS = 3
#: Confidence of an Other segment of form pages without any Other cue (its layout is the evidence).
FORM_CONFIDENCE = 0.5
#: Leaving a form page for a *faint* page -- no form page, with text, every type scoring under
#: LONE_FIRST_MAX_SCORE -- costs the full penalty, not FORM_SWITCH x it (offline-lexicon-v12, ADR 0068): a page
#: with nothing of its own after a form is the form's next page or another administrative page far more often
#: than a report's first page (on the tuning part's PDFs 8 of 9 such pages; the ninth begins a radiology
#: report). With the discount, the report after it took it as its first page.
FAINT_AFTER_FORM = True
#: Printed page numbers ("Page 2 of 3", :mod:`docverify.domain.pagination`; offline-lexicon-v13, ADR 0069): a change
#: of type into a page numbered k of n right after k-1 of n costs NUMBERED_CONTINUE x the penalty; into a page
#: numbered 1 of n, or after a page numbered n of n, NUMBERED_START x it. A counter over the whole PDF (a fax
#: stamp) is no cue. On the tuning part's PDFs (header and footer lines read): 135 "continues" cues, none at a true
#: document start; 7 "meets", all at one; 259 "starts", 227 at one (the rest: numberings that restart inside a
#: document, and OCR'd reports whose marks the benchmark's character cut puts near a page's edge).
NUMBERED_PAGES = True
NUMBERED_CONTINUE = 4.0
NUMBERED_START = 0.5
#: ... and a page numbered 1 of n right after a page numbered m of m starts a segment even when both pages read as
#: one type: two documents of the same type side by side, which type runs alone cannot tell apart.
NUMBERED_SPLIT = True
#: How a page was read ("scan status", offline-lexicon-v14, ADR 0070): a page OCR'd from its image (no text layer,
#: ``Page.ocr_confidence`` set) beside a page with a text layer, or the reverse, came from another source -- a faxed
#: or scanned form next to a report printed from the record system. A change of type into a page whose scan status
#: differs from the page before's costs SCAN_CHANGE x the penalty, unless the page is weak (a few cues: a report's
#: short last page) or shares at least SCAN_MAX_CONT of its words with the page before (it continues it): a report
#: page scanned inside a text-layer report stays with it. A PDF read one way throughout gives no cue. Tuning part:
#: with every intake packet's scanned forms marked, 548 -> 549 of 600 right; with one page of a report scanned in
#: each of 876 PDFs, 808 right without the cue, 788 with it ungated, 810 gated.
SCAN_STATUS = True
SCAN_CHANGE = 0.5
SCAN_MAX_CONT = 0.03
#: the form rule of a lone first page (``_Page.form_rule``; :func:`form_rule` reads one page and never returns it)
LONE = "lone first page"


def is_form(analysis: TextAnalysis, layout: FormLayout | None = None) -> bool:
    """The page is a form as a whole (see FORM_MIN_LINES): its layout, and no strong clinical reading; or it
    addresses its reader (see ADDRESS_SHARE), or instructs and addresses them (INSTRUCTED_FORMS)."""
    return form_rule(analysis, layout) is not None


def form_rule(analysis: TextAnalysis, layout: FormLayout | None = None) -> str | None:
    """Which rule makes the page a form page: ``"layout"`` (its field lines), ``"addressed"`` (it speaks to its
    reader), ``"instructed"`` (it instructs and addresses its reader); None when it is no form page."""
    lay = form_layout(analysis) if layout is None else layout
    clinical = max(analysis.scores[t] for t in DOC_TYPES if t != OTHER)
    if (lay.lines >= FORM_MIN_LINES and lay.fields >= FORM_MIN_FIELDS and lay.field_share >= FORM_SHARE
            and lay.sentences <= FORM_SENTENCES * lay.lines
            and (clinical < FORM_MAX_CLINICAL or lay.field_share >= FORM_STRONG_SHARE)):
        return "layout"
    if (ADDRESSED_FORMS and lay.words >= ADDRESS_MIN_WORDS and lay.addressed_share >= ADDRESS_SHARE
            and clinical < ADDRESS_MAX_CLINICAL):
        return "addressed"
    if INSTRUCTED_FORMS and lay.instructions and lay.addressed:
        return "instructed"
    return None


def page_scores(analysis: TextAnalysis, *, form: bool | None = None) -> dict[str, float]:
    """The classifier's score per type of one page: the lexicon's, with the clinical structure rule and the
    form page rule applied (``form``: whether the page is a form, when the caller knows; else found here)."""
    scores = dict(analysis.scores)
    if clinical_structure(analysis) >= STRUCTURE_MIN:
        for t in STRUCTURE_DAMPED:
            scores[t] *= STRUCTURE_FACTOR
    if is_form(analysis) if form is None else form:
        for t in DOC_TYPES:
            scores[t] = max(scores[t], FORM_OTHER) if t == OTHER else scores[t] * FORM_FACTOR
    return scores


@dataclass
class _Seg:
    pages: list[_Page]

    @property
    def start(self) -> int:
        return self.pages[0].num

    @property
    def end(self) -> int:
        return self.pages[-1].num

    def total(self, t: str) -> float:
        return sum(p.score(t) for p in self.pages)

    def peak(self, t: str) -> float:
        return max(p.score(t) for p in self.pages)

    def has_evidence(self, t: str) -> bool:
        return any(u.scores.get(t, 0.0) > 0 for p in self.pages for u in p.analysis.units)

    def forms(self) -> bool:
        """Every page of the segment with text is a form page."""
        text = [p for p in self.pages if p.analysis.has_text]
        return bool(text) and all(p.form for p in text)

    def dominant(self) -> str:
        if self.forms():
            return OTHER
        candidates = [t for t in DOC_TYPES if self.total(t) > 0 and self.has_evidence(t)]
        if not candidates:
            return OTHER
        best = max(candidates, key=lambda t: (self.total(t), -DOC_TYPES.index(t)))
        if best != OTHER and self.weak(best):
            return OTHER  # the minimum-evidence rule
        return best

    def distinct_cues(self, t: str) -> int:
        return len({h.entry.index for p in self.pages for h in p.analysis.hits.get(t, [])
                    if h.factor == 1.0})

    def weak(self, t: str) -> bool:
        """Too little evidence for a document type: a mean score per page with text under
        MIN_EVIDENCE_SCORE, or under twice that with fewer than MIN_DISTINCT_CUES distinct cues
        (one word is no report)."""
        text_pages = max(1, sum(1 for p in self.pages if p.analysis.has_text))
        mean = self.total(t) / text_pages
        return mean < MIN_EVIDENCE_SCORE or (self.distinct_cues(t) < MIN_DISTINCT_CUES
                                             and mean < 2 * MIN_EVIDENCE_SCORE)


# --------------------------------------------------------------------------- segmentation


def _preference(pages: list[_Page]) -> list[str]:
    totals = {t: sum(p.score(t) for p in pages) for t in DOC_TYPES}
    return sorted(DOC_TYPES, key=lambda t: (-totals[t], 0 if t == OTHER else 1, DOC_TYPES.index(t)))


def _opens(page: _Page) -> bool:
    """The page opens with a section header (a header cue within its first OPEN_CHARS characters)."""
    return any(h.entry.kind == "header" and h.start < OPEN_CHARS
               for hs in page.analysis.hits.values() for h in hs)


def _headed_types(page: _Page) -> frozenset[str]:
    """The types of which the page holds at least one header cue (anywhere on the page)."""
    return frozenset(t for t, hs in page.analysis.hits.items()
                     if any(h.entry.kind == "header" and h.entry.label not in HEADER_IGNORED.get(t, ()) for h in hs))


def _mid_sentence(page: _Page) -> bool:
    """The page is no form page and its text starts with a lower-case letter: it starts mid-sentence."""
    text = page.text.lstrip()
    return bool(text) and text[0].islower() and not page.form


def _faint(page: _Page) -> bool:
    """The page has text but no cue of any type (every score under LONE_FIRST_MAX_SCORE) and is no form page."""
    return (page.analysis.has_text and not page.form
            and max(page.score(t) for t in DOC_TYPES) < LONE_FIRST_MAX_SCORE)


def _lead(page: _Page) -> str:
    """The page's leading type (its best score; ties to the first of DOC_TYPES)."""
    return max(DOC_TYPES, key=lambda t: page.score(t))


def _weak_page(page: _Page) -> bool:
    """A weak page: no form page, and its leading type has fewer than WEAK_PAGE_CUES distinct cues."""
    lead = _lead(page)
    distinct = len({h.entry.index for h in page.analysis.hits.get(lead, ()) if h.factor == 1.0})
    return distinct < WEAK_PAGE_CUES and not page.form


def _weak_other_continues(pages: list[_Page], i: int) -> bool:
    """Page ``i`` is a weak page with text led by Other that shares at least WEAK_OTHER_MIN_CONT of its words
    with the page before it, and that page is no form page (WEAK_OTHER_CONTINUES): it supports every type. After a
    form page it supports Other alone, as before: it continues the form."""
    if not (WEAK_OTHER_CONTINUES and i > 0) or pages[i - 1].form:
        return False
    page = pages[i]
    if not page.analysis.has_text or _lead(page) != OTHER or not _weak_page(page):
        return False
    return (continuity(pages[i - 1], page) or 0.0) >= WEAK_OTHER_MIN_CONT


def _numbering(pages: list[_Page]) -> list[Cue]:
    """What the pages' printed numbers say about the boundary before each page (NUMBERED_PAGES; all NONE when
    off)."""
    if not NUMBERED_PAGES:
        return [Cue.NONE] * len(pages)
    return boundary_cues([p.mark for p in pages])


def _scan_changes(pages: list[_Page], i: int, cont: float | None) -> bool:
    """Page ``i`` was read otherwise than the page before it (one OCR'd, the other from its text layer), is no weak
    page and shares under SCAN_MAX_CONT of its words with it (``cont``: its :func:`continuity` with the page before,
    which the callers have; SCAN_STATUS; False for the first page)."""
    if not (SCAN_STATUS and i > 0 and pages[i].scanned != pages[i - 1].scanned) or _weak_page(pages[i]):
        return False
    return cont is None or cont < SCAN_MAX_CONT


def continuity(prev: _Page, page: _Page) -> float | None:
    """The continuity score of ``page`` after ``prev``: the Jaccard share of their distinct words
    (None when either has no word: no evidence either way)."""
    return word_share(prev.words, page.words)


def _continuity_factor(score: float | None) -> float:
    """The factor of the penalty for a change of type into a page of this continuity score."""
    return BREAK_SWITCH if score is not None and score < CONT_LOW else 1.0


def _emissions(pages: list[_Page]) -> tuple[list[dict[str, float]], list[bool], list[dict[str, bool]], list[bool],
                                             list[frozenset[str]], list[float]]:
    """What :func:`_viterbi` reads of each page: its emission costs per type, whether it speaks softly
    (weak), the types it supports, whether it opens with a section header, the types it is headed by,
    and the factor of a change of type into it for its continuity with the page before and for starting
    mid-sentence (MID_SENTENCE_SWITCH; 1.0 for the first)."""
    n = len(pages)
    emit: list[dict[str, float]] = []
    weak: list[bool] = []
    support: list[dict[str, bool]] = []
    opens: list[bool] = []
    headed: list[frozenset[str]] = []
    for i, p in enumerate(pages):
        best = max(p.score(t) for t in DOC_TYPES)
        # a page whose leading type has fewer than WEAK_PAGE_CUES distinct cues speaks softly:
        # it joins its neighbours unless their type is absent from it
        k = WEAK_PAGE_FACTOR if _weak_page(p) else 1.0
        weak.append(k < 1.0)
        # ... but only into a type the page itself supports (CONTINUE_RATIO of its best score):
        # a weak page whose few cues all belong to another type does not continue a segment
        # of a type it shows (next to) nothing of
        # a page that opens with a section header may start a new document
        opens.append(_opens(p))
        headed.append(_headed_types(p))
        supports = {t: p.score(t) >= CONTINUE_RATIO * best for t in DOC_TYPES}
        if _weak_other_continues(pages, i):
            supports = dict.fromkeys(DOC_TYPES, True)
        support.append(supports)
        emit.append({t: (k if supports[t] else 1.0) * (best - p.score(t)) for t in DOC_TYPES})
    scores: list[float | None] = [None, *(continuity(pages[i - 1], pages[i]) for i in range(1, n))]
    numbered = {Cue.CONTINUES: NUMBERED_CONTINUE, Cue.STARTS: NUMBERED_START, Cue.MEETS: NUMBERED_START,
                Cue.NONE: 1.0}
    conts = [_continuity_factor(c) * (MID_SENTENCE_SWITCH if i and _mid_sentence(pages[i]) else 1.0)
             * numbered[cue] * (SCAN_CHANGE if _scan_changes(pages, i, c) else 1.0)
             for i, (c, cue) in enumerate(zip(scores, _numbering(pages), strict=True))]
    for i, c in enumerate(scores):
        if c is not None and c >= CONT_HIGH:
            # a continuation page follows its neighbours, into a type it shows some of
            top = max(pages[i].score(t) for t in DOC_TYPES)
            prev_top = max(pages[i - 1].score(t) for t in DOC_TYPES)
            emit[i] = {t: (CONT_EMIT if pages[i].score(t) >= CONT_SUPPORT * top and t not in CONT_EXCLUDE
                           and (not CONT_MUTUAL or pages[i - 1].score(t) >= CONT_SUPPORT * prev_top) else 1.0) * e
                       for t, e in emit[i].items()}
    return emit, weak, support, opens, headed, conts


def _viterbi(pages: list[_Page]) -> list[str]:
    """The cheapest type per page: emission ``best - score``, SWITCH_PENALTY per change."""
    pref = _preference(pages)
    rank = {t: i for i, t in enumerate(pref)}
    n = len(pages)
    emit, weak, support, opens, headed, conts = _emissions(pages)
    forms = [p.form for p in pages]
    faint = [_faint(p) for p in pages]
    cost = [dict(emit[0])]
    back: list[dict[str, str]] = [{}]
    for i in range(1, n):
        row: dict[str, float] = {}
        ptr: dict[str, str] = {}
        for t in DOC_TYPES:
            # stay in t unless a switch is strictly cheaper; among switches, the preferred type
            best_u, best_c = t, cost[i - 1][t]
            for u in pref:
                if u == t:
                    continue
                # leaving u for a weak page costs more only when that page could continue u
                sticky = weak[i] and support[i][u]
                factor = (WEAK_SWITCH if sticky else 1.0) * (OPEN_SWITCH if opens[i] else 1.0) * conts[i]
                if forms[i] != forms[i - 1] and not (FAINT_AFTER_FORM and forms[i - 1] and faint[i]):
                    # into a form page, or out of one into a page that is no form (but holds a cue)
                    factor *= FORM_SWITCH
                if t in HEADER_REQUIRED and t not in headed[i]:
                    factor *= HEADERLESS_SWITCH
                c = cost[i - 1][u] + SWITCH_PENALTY * factor
                if c < best_c - 1e-12:
                    best_u, best_c = u, c
            row[t] = best_c + emit[i][t]
            ptr[t] = best_u
        cost.append(row)
        back.append(ptr)
    last = min(DOC_TYPES, key=lambda t: (round(cost[-1][t], 9), rank[t]))
    states = [last]
    for i in range(n - 1, 0, -1):
        states.append(back[i][states[-1]])
    states.reverse()
    return states


def _segments(pages: list[_Page]) -> list[tuple[_Seg, str]]:
    """Runs of pages with the same Viterbi type, with their dominant types; neighbours whose
    dominant types coincide (the dominant type needs evidence) are merged until stable."""
    states = _viterbi(pages)
    # two documents' printed numberings meet: a new segment, whatever the types (NUMBERED_SPLIT)
    meets = {p.num for p, cue in zip(pages, _numbering(pages), strict=True) if NUMBERED_SPLIT and cue is Cue.MEETS}
    segs: list[_Seg] = []
    for i, page in enumerate(pages):
        if i > 0 and states[i] == states[i - 1] and page.num not in meets:
            segs[-1].pages.append(page)
        else:
            segs.append(_Seg([page]))
    merged = [(seg, seg.dominant()) for seg in segs]
    changed = True
    while changed:
        changed = False
        out: list[tuple[_Seg, str]] = []
        for seg, dom in merged:
            if out and out[-1][1] == dom and seg.start not in meets:
                combined = _Seg(out[-1][0].pages + seg.pages)
                out[-1] = (combined, combined.dominant())
                changed = True
            else:
                out.append((seg, dom))
        merged = out
    return merged


# --------------------------------------------------------------------------- evidence


def _anchors(page: _Page, doc_type: str, unit: Unit | None) -> list[str]:
    hits = page.analysis.hits.get(doc_type, [])
    inside = [h for h in hits if unit is not None and unit.start <= h.start and h.end <= unit.end]
    rest = [h for h in hits if h not in inside]
    ordered = sorted(inside, key=lambda h: (-h.weight, h.start)) + sorted(
        rest, key=lambda h: (-h.weight, h.start)
    )
    out: list[str] = []
    seen: set[str] = set()
    for h in ordered:
        key = _norm(h.text)
        if key and key not in seen:
            seen.add(key)
            out.append(h.text)
            if len(out) >= MAX_ANCHORS:
                break
    return out


def _verbatim(page: _Page, snippet: str) -> bool:
    return (
        SNIPPET_MIN <= len(snippet) <= SNIPPET_MAX
        and snippet in page.text
        and _norm(snippet) in page.norm_text
    )


def _faithful(page: _Page, snippet: str) -> bool:
    """V4's own look-up of a quote on its page (ADR 0035): verbatim, and not cut out from under a
    governing negation ("obvious tumor. Representative sections" out of "no obvious tumor. ...")."""
    return find_on_page(page.bundle_page, snippet).found


#: How far back (characters) a unit may be extended to take in the negation that governs it.
NEGATION_REACH = 40


def _quotable(page: _Page, unit: Unit) -> tuple[int, int] | None:
    """The span to quote for ``unit``: the unit itself when V4 finds it faithful on the page; else
    the unit extended back to the start of a word at most NEGATION_REACH characters before it (so
    the quote carries the negation that governs it), when that is still faithful and at most
    SNIPPET_MAX long; else None (the unit is not quoted)."""
    if _verbatim(page, unit.text) and _faithful(page, unit.text):
        return unit.start, unit.end
    text = page.text
    line_start = text.rfind("\n", 0, unit.start) + 1
    lo = max(line_start, unit.start - NEGATION_REACH, unit.end - SNIPPET_MAX)
    start = unit.start
    while start > lo:
        start -= 1
        if not text[start].isspace() and (start == 0 or text[start - 1].isspace()):
            snippet = text[start:unit.end]
            if _verbatim(page, snippet) and _faithful(page, snippet):
                return start, unit.end
    return None


def _evidence(seg: _Seg, doc_type: str, fallback: bool = False) -> list[Evidence]:
    """1–3 evidence items for ``doc_type``: the units holding the most weight of its cues.
    With ``fallback`` (the "Other" fallback without cues) the first usable units instead."""
    ranked: list[tuple[tuple[float, float, int, int], _Page, Unit]] = []
    for page in seg.pages:
        page_score = page.score(doc_type)
        for unit in page.analysis.units:
            w = unit.scores.get(doc_type, 0.0)
            if w > 0:
                ranked.append(((-w, -page_score, page.num, unit.start), page, unit))
            elif fallback:
                ranked.append(((0.0, 0.0, page.num, unit.start), page, unit))
    ranked.sort(key=lambda r: r[0])
    chosen: list[tuple[_Page, Unit]] = []
    for _, page, unit in ranked:
        if any(p is page and not (unit.end <= u.start or unit.start >= u.end) for p, u in chosen):
            continue
        span = _quotable(page, unit)
        if span is None:
            continue
        if span != (unit.start, unit.end):
            unit = Unit(span[0], span[1], page.text[span[0]:span[1]], dict(unit.scores))
        chosen.append((page, unit))
        if len(chosen) >= MAX_EVIDENCE:
            break
    return [
        Evidence(snippet=unit.text, page=page.num, anchors_found=_anchors(page, doc_type, unit))
        for page, unit in chosen
    ]


# --------------------------------------------------------------------------- shares


def _round_shares(raw: dict[str, float], dominant: str, present: set[str]) -> dict[str, float]:
    """Round to 4 decimals; every present type keeps at least MIN_PRESENT_SHARE; the remainder
    goes to the dominant type so that the sum is 1 within float precision."""
    total = sum(raw.values())
    if total <= 0:
        return {t: (1.0 if t == dominant else 0.0) for t in DOC_TYPES}
    out: dict[str, float] = {}
    for t in DOC_TYPES:
        if t == dominant:
            continue
        share = round(raw[t] / total, 4)
        if t in present:
            share = max(share, MIN_PRESENT_SHARE)
        out[t] = share
    out[dominant] = round(1.0 - sum(out.values()), 4)
    return {t: out[t] for t in DOC_TYPES}


# --------------------------------------------------------------------------- classifier


@dataclass
class _SegResult:
    segment: Segment
    shares: dict[str, float]
    levels: dict[str, str]
    confidence: float


def _classify_segment(index: int, seg: _Seg, dom: str) -> _SegResult:
    totals = {t: seg.total(t) for t in DOC_TYPES}
    peaks = {t: seg.peak(t) for t in DOC_TYPES}
    dom_total = totals[dom]
    has_cues = dom_total > 0 and seg.has_evidence(dom)

    levels: dict[str, str] = {}
    ratios: dict[str, float] = {}
    for t in DOC_TYPES:
        if t == dom:
            levels[t] = PRIMARY
            continue
        ratio = totals[t] / dom_total if dom_total > 0 else 0.0
        ratios[t] = ratio
        if not has_cues or totals[t] <= 0 or not seg.has_evidence(t):
            levels[t] = NO_EVIDENCE
        elif ratio >= EMBEDDED_RATIO and peaks[t] >= EMBEDDED_MIN_PEAK:
            levels[t] = EMBEDDED_RAW
        elif ratio >= MENTION_RATIO and peaks[t] >= MENTION_MIN_PEAK:
            levels[t] = MENTION_ONLY
        else:
            levels[t] = NO_EVIDENCE

    evidence: dict[str, list[Evidence]] = {}
    for t in DOC_TYPES:
        if levels[t] == NO_EVIDENCE:
            evidence[t] = []
        else:
            evidence[t] = _evidence(seg, t, fallback=(t == dom and not has_cues))
            if not evidence[t] and t != dom:
                levels[t] = NO_EVIDENCE  # cannot be backed by a verbatim snippet

    present = {t for t in DOC_TYPES if levels[t] != NO_EVIDENCE}
    raw = {t: SHARE_WEIGHT[levels[t]] * totals[t] for t in DOC_TYPES}
    shares = _round_shares(raw, dom, present - {dom})

    text_pages = [p for p in seg.pages if p.analysis.has_text]
    fallback = dom == OTHER and _weak_fallback(seg)
    if dom == OTHER and seg.forms():
        # a form by its layout: its own Other cues, if any, can only add to what the layout says
        if has_cues:
            mean = dom_total / max(1, len(text_pages))
            runner_up = max((totals[t] for t in DOC_TYPES if t != dom), default=0.0)
            margin = max(0.0, (dom_total - runner_up) / dom_total)
            dom_conf = max(FORM_CONFIDENCE, 0.25 + 0.7 * (1.0 - math.exp(-mean / 6.0)) * (0.35 + 0.65 * margin))
        else:
            dom_conf = FORM_CONFIDENCE
    elif fallback:
        dom_conf = WEAK_FALLBACK_CONFIDENCE
    elif has_cues:
        mean = dom_total / max(1, len(text_pages))
        runner_up = max((totals[t] for t in DOC_TYPES if t != dom), default=0.0)
        margin = max(0.0, (dom_total - runner_up) / dom_total)
        strength = 1.0 - math.exp(-mean / 6.0)
        dom_conf = 0.25 + 0.7 * strength * (0.35 + 0.65 * margin)
    else:
        dom_conf = FALLBACK_CONFIDENCE if text_pages else NO_TEXT_CONFIDENCE

    classifications: list[TypeClassification] = []
    for t in DOC_TYPES:
        if t == dom:
            conf = dom_conf
        elif levels[t] == NO_EVIDENCE:
            conf = 0.0
        else:
            conf = max(0.01, min(ratios[t], 0.9) * (1.0 - math.exp(-peaks[t] / 6.0)))
        classifications.append(
            TypeClassification(
                doc_type=t,
                presence_level=levels[t],
                confidence=round(min(1.0, max(0.0, conf)), 4),
                segment_share=shares[t] if levels[t] != NO_EVIDENCE else 0.0,
                top_evidence=evidence[t],
            )
        )
    segment = Segment(
        segment_index=index,
        page_start=seg.start,
        page_end=seg.end,
        segment_page_count=seg.end - seg.start + 1,
        dominant_type=dom,
        reasoning=_reasoning(seg, dom, has_cues, levels, ratios),
        classifications=classifications,
    )
    return _SegResult(segment, shares, levels, round(min(1.0, max(0.0, dom_conf)), 4))


#: Confidence of "Other" chosen by the minimum-evidence rule (another type led, weakly).
WEAK_FALLBACK_CONFIDENCE = 0.3


def _weak_fallback(seg: _Seg) -> bool:
    """Other by the minimum-evidence rule: another type out-scored Other, but weakly."""
    best = max(DOC_TYPES, key=lambda t: (seg.total(t), -DOC_TYPES.index(t)))
    return best != OTHER and seg.total(best) > 0 and seg.has_evidence(best) and seg.weak(best)


def _cue_labels(seg: _Seg, t: str, limit: int = 5) -> list[str]:
    """The lexicon labels of t's strongest cues in the segment (vocabulary, no patient data)."""
    weights: dict[str, float] = {}
    for p in seg.pages:
        for h in p.analysis.hits.get(t, []):
            weights[h.entry.label] = max(weights.get(h.entry.label, 0.0), h.weight)
    return [k for k, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]


def _reasoning(seg: _Seg, dom: str, has_cues: bool, levels: dict[str, str],
               ratios: dict[str, float]) -> str:
    pages = f"page {seg.start}" if seg.start == seg.end else f"pages {seg.start}-{seg.end}"
    if dom == OTHER and seg.forms():
        why = "; ".join(f"page {p.num}: {_form_why(p)}" for p in seg.pages if p.analysis.has_text)
        text = f"Form on {pages}, Other ({why})"
        cues = _cue_labels(seg, OTHER) if has_cues else []
        return text + (f"; Other cues: {', '.join(cues)}." if cues else ".")
    if not has_cues:
        if not any(p.analysis.has_text for p in seg.pages):
            return f"No text on {pages}: defaulted to Other with low confidence."
        return f"No lexicon cue of any type on {pages}: defaulted to Other with low confidence."
    if dom == OTHER and _weak_fallback(seg):
        best = max(DOC_TYPES, key=lambda t: (seg.total(t), -DOC_TYPES.index(t)))
        return (f"Minimum-evidence rule on {pages}: {best} led with too little evidence "
                f"({seg.distinct_cues(best)} distinct cue(s): {', '.join(_cue_labels(seg, best, 3))}); "
                f"defaulted to Other with low confidence.")
    text = f"{dom} cues on {pages}: {', '.join(_cue_labels(seg, dom))}."
    others = sorted((t for t in DOC_TYPES if t != dom and levels[t] != NO_EVIDENCE),
                    key=lambda t: -ratios[t])
    if others:
        t = others[0]
        text += (f" Also {t} ({levels[t]}, score ratio {ratios[t]:.2f}): "
                 f"{', '.join(_cue_labels(seg, t, 3))}.")
    return text


def _pages(bundle: DocumentBundle) -> list[_Page]:
    by_num: dict[int, Page] = {}
    for p in bundle.pages:
        by_num.setdefault(p.page_num, p)  # first one wins, like bundle.page_text()
    n = max([bundle.total_pages, 1, *by_num.keys()])
    out = []
    for i in range(1, n + 1):
        page = by_num.get(i) or Page(page_num=i, text="")
        text = page.text or ""
        out.append(_Page(i, text, analyse(text), page))
    if LONE_FIRST_PAGE and len(out) >= 2 and _lone(out[0], out[1]):
        out[0].mark_lone()
    return out


def _lone(first: _Page, second: _Page) -> bool:
    """``first`` is a lone first page (see LONE_FIRST_PAGE): no form page already, at least LONE_FIRST_MIN_WORDS
    words, no type scoring LONE_FIRST_MAX_SCORE, under LONE_FIRST_SHARE of its words shared with ``second``."""
    if first.form or len(first.words) < LONE_FIRST_MIN_WORDS:
        return False
    if max(first.score(t) for t in DOC_TYPES) >= LONE_FIRST_MAX_SCORE:
        return False
    share = word_share(first.words, second.words)
    return share is not None and share < LONE_FIRST_SHARE


_SHORT = {DocType.CLINICAL_NOTE.value: "Clinical", DocType.PATHOLOGY_REPORT.value: "Pathology",
          DocType.GENOMIC_REPORT.value: "Genomic", DocType.RADIOLOGY_REPORT.value: "Radiology", OTHER: "Other"}


_NUMBERING_WHY = {
    Cue.CONTINUES: "numbered as the next page of the page before it",
    Cue.STARTS: "a document starts here (numbered page 1, or the page before it was the last of its numbering)",
    Cue.MEETS: "two documents' numberings meet (page 1 after a last page)",
}


def _form_why(page: _Page) -> str:
    """Which rule makes a page a form page, in words (numbers only)."""
    lay = page.layout
    rule = page.form_rule
    if rule == LONE:
        return (f"a lone first page: no cue of any type, {len(page.words)} words, under {LONE_FIRST_SHARE:.0%} of them "
                "shared with page 2")
    if rule == "addressed":
        return f"it addresses its reader: {lay.addressed} of {lay.words} words are you/your"
    if rule == "instructed":
        return f"it instructs its reader: {lay.instructions} instruction line(s), {lay.addressed} you/your"
    return (f"{lay.fields} of {lay.lines} lines are form fields (labels without a value, blanks, checkboxes, yes/no "
            f"choices, signature or date lines), {lay.sentences} sentence(s)")


def _form_reason(page: _Page) -> str:
    """Why a page is a form page and what follows (numbers only)."""
    return f"form page ({_form_why(page)}; Other at least {FORM_OTHER:g}, the clinical types x{FORM_FACTOR:g})"


def _page_decisions(pages: list[_Page], segments: list[tuple[_Seg, str]]) -> list[PageDecision]:
    """Each page's scores, continuity and the decision made on it (ADR 0035): numbers and lexicon
    labels only, never page text."""
    label = {p.num: dom for seg, dom in segments for p in seg.pages}
    starts = {seg.start for seg, _ in segments}
    numbering = _numbering(pages)
    out: list[PageDecision] = []
    for i, page in enumerate(pages):
        cont = continuity(pages[i - 1], page) if i else None
        opens = _opens(page)
        t = label[page.num]
        best = max(DOC_TYPES, key=lambda d: (page.score(d), -DOC_TYPES.index(d)))
        c = "none" if cont is None else f"{cont:.2f}"
        if i == 0:
            reason = "first page" + (f"; {_form_reason(page)}" if page.form else "")
        elif page.num in starts and page.form:
            prev = label[pages[i - 1].num]
            reason = (f"new segment: {_form_reason(page)}: {_SHORT[t]} {page.score(t):.1f} against {_SHORT[prev]} "
                      f"{page.score(prev):.1f} on this page; continuity {c}")
        elif page.num in starts:
            prev = label[pages[i - 1].num]
            reason = (f"new segment: {_SHORT[t]} {page.score(t):.1f} against {_SHORT[prev]} "
                      f"{page.score(prev):.1f} on this page; continuity {c}"
                      + ("; opens with a header" if opens else "")
                      + ("; starts mid-sentence" if _mid_sentence(page) else "")
                      + ("; after a form page" if pages[i - 1].form else ""))
        elif page.form:
            reason = f"continues {_SHORT[t]}: {_form_reason(page)}; continuity {c}"
        else:
            reason = f"continues {_SHORT[t]}: continuity {c}" + ("; starts mid-sentence" if _mid_sentence(page) else "")
            if best != t and page.score(best) > page.score(t):
                reason += f"; reads as {_SHORT[best]} {page.score(best):.1f} against {page.score(t):.1f}"
            if t != OTHER and _weak_other_continues(pages, i):
                reason += "; a weak page led by Other that shares its words with the page before continues it"
            if FAINT_AFTER_FORM and pages[i - 1].form and _faint(page):
                reason += "; no cue of its own after a form page"
            if not page.analysis.has_text:
                reason += "; no text"
        if numbering[i] is not Cue.NONE:
            reason += f"; printed page numbers: {_NUMBERING_WHY[numbering[i]]}"
        if _scan_changes(pages, i, cont):
            reason += ("; read from its image (OCR), the page before from its text layer" if page.scanned
                       else "; read from its text layer, the page before from its image (OCR)")
        out.append(PageDecision(
            page=page.num, type_scores={d: round(page.score(d), 3) for d in DOC_TYPES},
            continuity=None if cont is None else round(cont, 4), opens_with_header=opens, label=t,
            starts_segment=page.num in starts, reason=reason))
    return out


def classify_offline(bundle: DocumentBundle, *, calibrate: bool = True) -> ClassificationOutput:
    """Classify one document without an LLM (see the module docstring for the algorithm).
    ``calibrate``: the document confidence is the calibrated probability that the dominant type is
    right (:mod:`docverify.classify.calibration`, ADR 0035); False gives the raw score it is fitted on."""
    pages = _pages(bundle)
    n_pages = len(pages)
    segments = _segments(pages)
    results = [_classify_segment(i, seg, dom) for i, (seg, dom) in enumerate(segments, 1)]

    weights = {t: sum(r.shares[t] * r.segment.segment_page_count for r in results) / n_pages
               for t in DOC_TYPES}
    overall_levels = {
        t: max((r.levels[t] for r in results), key=lambda lv: PRESENCE_RANK[lv]) for t in DOC_TYPES
    }
    doc_totals = {t: sum(p.score(t) for p in pages) for t in DOC_TYPES}
    dominant = max(DOC_TYPES, key=lambda t: (weights[t], doc_totals[t], -DOC_TYPES.index(t)))
    present = {t for t in DOC_TYPES if overall_levels[t] != NO_EVIDENCE and t != dominant}
    overall = _round_shares(weights, dominant, present)
    mixture = [
        MixtureEntry(doc_type=t, presence_level=overall_levels[t],
                     overall_share=overall[t] if overall_levels[t] != NO_EVIDENCE else 0.0)
        for t in DOC_TYPES
    ]

    raw = sum(r.confidence * r.segment.segment_page_count for r in results) / n_pages
    confidence = calibrated(raw) if calibrate else raw
    empty = sum(1 for p in pages if not p.analysis.has_text)
    notes = (
        f"{IMPLEMENTATION}: deterministic lexicon/layout classifier (no LLM; lexicon "
        f"{get_lexicon().version}); {len(results)} segment(s) over {n_pages} page(s)"
        + (f"; {empty} page(s) without text" if empty else "")
        + (f". Confidence: the calibrated probability that the dominant type is right (raw score {raw:.4f}; "
           f"calibration {calibration()['version']})" if calibrate else ". Confidence: the raw score")
        + ". Weaker than an LLM classifier: read its confidence accordingly."
    )
    return ClassificationOutput(
        doc_id=bundle.doc_id,
        dominant_type_overall=dominant,
        number_of_segments=len(results),
        segments=[r.segment for r in results],
        document_mixture=mixture,
        vendor_signals=find_vendors(bundle.full_text()),
        self_evaluation=SelfEvaluation(confidence=round(confidence, 4), notes=notes),
        classifier=IMPLEMENTATION,
        page_decisions=_page_decisions(pages, segments),
    )
