"""V4 — evidence against the real page text (spec slide 6): the hallucination detector.

Rule phase, deterministic, against the DocumentBundle (never against the classifier's claims):

* every snippet is looked up on its claimed page after normalising case, width, dashes and
  whitespace, tolerating OCR noise (fuzzy ``partial_ratio`` ≥ the threshold in
  ``include/rules/evidence.json``; a page the local parser OCR'd takes ``fuzzy_threshold_ocr``);
* the fuzzy match absorbs spacing, hyphenation and OCR noise only (ADR 0021): a snippet that is not
  an exact substring must keep, in the page text rapidfuzz aligned it with, every number as
  written (decimals, percentages, ranges, doses with their unit, "grade 2", "stage iiia",
  "pT2N0M0", "3+4"), every negation cue and every laterality word (``faithfulness`` in
  ``evidence.json``; :class:`docverify.verify.common.CriticalTokens`). Otherwise it is not found
  on that page, and the rules below apply as for any snippet not there; the issue says which
  token differs (``details["unfaithful"]``). Anchors are looked up the same way.
  Choices: "no" is a negation unless a number follows it ("No. 5", "no 12", "no: A12" are
  numbers), "non" before a word is one ("non-small", "nonspecific"), "n't" after a letter too;
  "positive" is not a cue (its change to "negative" shows as that cue). A letter read for a digit
  (0/o, 1/l/i, 5/s, 8/b) is tolerated on every page — it cannot turn one number into another, and
  the classifier may quote another OCR than ours —, one digit for another never, not even on an
  OCR'd page (measured in docs/benchmarks/ocr.md); a unit read on one side only is tolerated on an
  OCR'd page ("6 em" / "6 cm"), two different units ("mg" / "mcg") never. A quote that stops where
  the page goes on is still an exact substring, as before: "evidence of malignancy" out of
  "no evidence of malignancy" is found;
* not there: found on another page of the same segment → ``EVIDENCE_WRONG_PAGE`` (MAJOR,
  auto-fixable: the page number is corrected); found only outside the segment →
  ``EVIDENCE_OUTSIDE_SEGMENT`` (MAJOR); found nowhere → ``EVIDENCE_FABRICATED`` (BLOCKER);
* every anchor must be on the claimed page: absent there → ``ANCHOR_NOT_ON_PAGE`` (MAJOR, not
  fixable), absent from the whole document → the same code as a BLOCKER. When the snippet is
  ``EVIDENCE_WRONG_PAGE``, the anchors are checked on the page the fix moves it to: anchors found
  there travel with the one fixable issue (ADR 0006);
* a snippet found on its claimed page, but that page is outside its segment →
  ``EVIDENCE_OUTSIDE_SEGMENT``; a page the document does not have is V1's
  ``EVIDENCE_PAGE_OUTSIDE_DOCUMENT``: such an item is only checked for fabrication here.

Judgment phase (evidence quality). The offline implementation flags a PRIMARY or EMBEDDED_RAW
type whose every snippet is a generic phrase ("see attached results", "n/a"), too short, only a
pointer to another document however it is worded, or worded as another type (terms of another
type, none of the claimed one; a pointing word such as "attached", an Other cue of the lexicon, is
no type's wording) → ``EVIDENCE_WEAK`` (MAJOR). A snippet with no term of any type is not weak for
that alone: the lexicon does not know every form line.

"Only a pointer" (:func:`pointer_only`, data ``pointer`` in ``evidence.json``) is a judgment of what
the snippet says, not a phrase list: it holds a referential cue ("see", "refer", "enclosed",
"accompanying", "separate", "to follow", "on file"…), names what it points at (a document noun:
report, results, sheet…; or a cue that is its own referent: "attached", "see above"), and once its
filler words, cues, document nouns and document kinds ("pathology", "imaging", "laboratory": a
type's name says nothing of the document) are taken out nothing clinical is left — no lexicon cue of
any type, no measurement (a number with a unit or %, a comparison, a grade or stage), no laterality
word — and at most ``max_unread_words`` other words (a name). "Please refer to the enclosed
laboratory document for complete results", "Results are in the accompanying report" and "Details on
separate sheet" are pointers; "See attached: invasive ductal carcinoma, grade 2" is not
(``offline-evidence-heuristics-v1`` called weak any snippet that merely *started* with a generic
phrase, whatever followed it). A report type only (never "Other": a fax cover's "records attached"
is what a cover sheet says).

``quality_score`` = 1.0 − 0.30·BLOCKER − 0.15·MAJOR − 0.05·MINOR over V4's issues, ≥ 0.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from pydantic import Field

from docverify.domain.codes import make_issue
from docverify.domain.lexicon import OTHER, analyse, score_text
from docverify.domain.models import (
    ClassificationOutput,
    DocumentBundle,
    Evidence,
    Issue,
    Page,
    Segment,
    Severity,
    TypeClassification,
)
from docverify.domain.policy import VerifyPolicy
from docverify.domain.resources import load_rule
from docverify.verify.common import (
    CriticalTokens,
    Differences,
    FaithfulnessRules,
    TextMatch,
    describe_differences,
    find_text,
    iter_type_entries,
    normalise,
    type_loc,
)
from docverify.verify.llm_io import Finding, JudgmentFindings, JudgmentInputs, judgment_view, page_entry
from docverify.verify.spec import VerifierSpec

IMPLEMENTATION = "rules-v1"
OFFLINE_IMPLEMENTATION = "offline-evidence-heuristics-v2"
PENALTY = {"BLOCKER": 0.30, "MAJOR": 0.15, "MINOR": 0.05}


class PointerRules(TypedDict):
    """``pointer`` in ``include/rules/evidence.json``: the words of a snippet that only points elsewhere."""

    #: referential words and phrases ("see", "enclosed", "to follow", "on file")
    cues: list[str]
    #: cues that name their own referent ("attached", "see above"): no document noun needed
    self_referents: list[str]
    #: what a pointer points at (report, results, sheet, page…)
    document_nouns: list[str]
    #: words that say which kind of document, not what it says (pathology, imaging, laboratory…)
    document_kinds: list[str]
    #: function words, courtesy, qualifiers and the verbs of sending and filing
    filler_words: list[str]
    #: at most this many other words (a name, a place) may remain
    max_unread_words: int


class EvidenceRules(TypedDict):
    """``include/rules/evidence.json``."""

    generic_phrases: list[str]
    min_chars: int
    min_words: int
    pointer: PointerRules
    fuzzy_threshold: float
    #: the threshold on a page OCR'd by the local parser
    fuzzy_threshold_ocr: NotRequired[float]
    fuzzy_min_chars: int
    faithfulness: FaithfulnessRules


def _cfg() -> EvidenceRules:
    rules: EvidenceRules = load_rule("evidence")
    return rules


def _short(snippet: str, n: int = 60) -> str:
    """A snippet shortened for a message. Messages go to artifacts and SME packets, never to
    logs (the lineage log line carries issue codes only)."""
    s = " ".join(snippet.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def quality_score(issues: list[Issue]) -> float:
    score = 1.0 - sum(PENALTY[Severity(i.severity).value] for i in issues if i.agent == "V4")
    return round(max(0.0, score), 4)


@functools.lru_cache(maxsize=1)
@functools.cache
def critical_tokens() -> CriticalTokens:
    """The faithfulness rules (``faithfulness`` in ``include/rules/evidence.json``), compiled once."""
    return CriticalTokens(_cfg()["faithfulness"])


def find_on_page(page: Page, text: str, *, quote: bool = True) -> TextMatch:
    """``text`` on ``page`` as V4 looks it up: normalised, fuzzy at the page's threshold, faithful
    in numbers, negation and laterality (``quote``: a snippet, which must not be cut out from
    under a negation; an anchor keyword may)."""
    cfg = _cfg()
    # an OCR'd page (no text layer) tolerates more noise: fuzzy_threshold_ocr, measured by
    # scripts/bench_ocr.py (docs/benchmarks/ocr.md)
    ocr = page.ocr_confidence is not None
    threshold = cfg.get("fuzzy_threshold_ocr", cfg["fuzzy_threshold"]) if ocr else cfg["fuzzy_threshold"]
    return find_text(page.text, text, threshold=threshold, fuzzy_min_chars=cfg["fuzzy_min_chars"],
                     critical=critical_tokens(), ocr=ocr, quote=quote)


def locate_detail(bundle: DocumentBundle, text: str, claimed_page: int, *, quote: bool = True
                  ) -> tuple[bool, list[int], tuple[int, Differences] | None]:
    """(found on the claimed page?, other pages where it was found, the first page where it was
    near-matched but unfaithful — claimed page first — with the differences, or None)."""
    near: tuple[int, Differences] | None = None
    claimed = next((p for p in bundle.pages if p.page_num == claimed_page), None)
    if claimed is not None:
        m = find_on_page(claimed, text, quote=quote)
        if m.found:
            return True, [], None
        if m.differs:
            near = (claimed_page, m.differs)
    elsewhere = []
    for p in bundle.pages:
        if p.page_num == claimed_page:
            continue
        m = find_on_page(p, text, quote=quote)
        if m.found:
            elsewhere.append(p.page_num)
        elif m.differs and near is None:
            near = (p.page_num, m.differs)
    return False, elsewhere, near


def locate(bundle: DocumentBundle, text: str, claimed_page: int, *, quote: bool = True) -> tuple[bool, list[int]]:
    """(found on the claimed page?, other pages where it was found)."""
    on_page, elsewhere, _ = locate_detail(bundle, text, claimed_page, quote=quote)
    return on_page, elsewhere


def _unfaithful(near: tuple[int, Differences] | None) -> tuple[str, dict[str, object]]:
    """The message tail and ``details`` entry of a near match whose critical tokens differ."""
    if near is None:
        return "", {}
    page, differs = near
    return (f"; the closest text, on page {page}, differs from it in {describe_differences(differs)}",
            {"unfaithful": {"page": page, **differs}})


def rule_phase(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    issues: list[Issue] = []
    for pos, seg, tc in iter_type_entries(cls):
        seg_pages = range(min(seg.page_start, seg.page_end), max(seg.page_start, seg.page_end) + 1)
        for k, ev in enumerate(tc.top_evidence):
            loc = f"{type_loc(seg, tc)}.top_evidence[{k}]"
            ref = {"segment_pos": pos, "segment_index": seg.segment_index, "doc_type": tc.doc_type,
                   "evidence_index": k, "claimed_page": ev.page}
            if not normalise(ev.snippet):
                continue  # an empty snippet is a quality problem (judgment phase), not a lookup
            on_page, elsewhere, near = locate_detail(bundle, ev.snippet, ev.page)
            if not 1 <= ev.page <= bundle.total_pages and elsewhere:
                # a page the document does not have is V1's EVIDENCE_PAGE_OUTSIDE_DOCUMENT (BLOCKER), never
                # a wrong page to "fix"; only a snippet found nowhere is still reported (fabricated, below)
                continue
            anchor_page = ev.page  # the page the anchors must be on
            if on_page and ev.page not in seg_pages:
                issues.append(make_issue(
                    "EVIDENCE_OUTSIDE_SEGMENT",
                    f"Evidence snippet '{_short(ev.snippet)}' for {tc.doc_type} in segment {seg.segment_index} "
                    f"(pages {seg.page_start}–{seg.page_end}) cites page {ev.page}, outside the segment",
                    location=loc, suggested_fix="Check the segment boundaries and the evidence",
                    details={**ref, "found_on_pages": [ev.page]},
                ))
            if not on_page:
                issue, anchor_page = _snippet_not_on_page(bundle, seg, tc, ev, seg_pages, elsewhere, near, loc, ref)
                issues.append(issue)
            issues += _anchor_issues(bundle, tc, ev, anchor_page, loc, ref)
    return issues


def _snippet_not_on_page(bundle: DocumentBundle, seg: Segment, tc: TypeClassification, ev: Evidence,
                         seg_pages: range, elsewhere: list[int], near: tuple[int, Differences] | None, loc: str,
                         ref: dict[str, object]) -> tuple[Issue, int]:
    """The issue of a snippet not on its cited page — on another page of its segment (fixable: the page
    its anchors must then be on is that one), only outside the segment, or nowhere — and the anchors' page."""
    near_msg, near_details = _unfaithful(near)
    in_seg = [p for p in elsewhere if p in seg_pages]
    if in_seg:
        # The fix moves the whole item, anchors included: anchors found on the new page
        # travel with it (one fixable issue), only the others are reported below.
        moving = [a for a in ev.anchors_found if normalise(a) and locate(bundle, a, in_seg[0], quote=False)[0]]
        return make_issue(
            "EVIDENCE_WRONG_PAGE",
            f"Evidence snippet '{_short(ev.snippet)}' for {tc.doc_type} is not on page {ev.page} "
            f"but on page {in_seg[0]} of the same segment"
            + (f" (with {len(moving)} of its anchor(s))" if moving else "") + near_msg,
            location=loc, suggested_fix=f"Set the evidence page to {in_seg[0]}",
            details={**ref, "found_on_pages": elsewhere, "fix_page": in_seg[0],
                     "anchors_moving": len(moving), **near_details},
        ), in_seg[0]
    if elsewhere:
        return make_issue(
            "EVIDENCE_OUTSIDE_SEGMENT",
            f"Evidence snippet '{_short(ev.snippet)}' for {tc.doc_type} in segment {seg.segment_index} "
            f"(pages {seg.page_start}–{seg.page_end}) is only found on page(s) "
            f"{', '.join(map(str, elsewhere))}, outside the segment" + near_msg,
            location=loc, suggested_fix="Check the segment boundaries and the evidence",
            details={**ref, "found_on_pages": elsewhere, **near_details},
        ), ev.page
    return make_issue(
        "EVIDENCE_FABRICATED",
        f"Evidence snippet '{_short(ev.snippet)}' not found in actual PDF text on page {ev.page} "
        f"nor on any other page. Possible hallucination"
        + (f" (it nearly matches page {near[0]} but differs from the page text in "
           f"{describe_differences(near[1])})." if near else "."),
        location=loc, suggested_fix="Remove the snippet and re-classify; an SME must check the label",
        details={**ref, "found_on_pages": [], **near_details},
    ), ev.page


def _anchor_issues(bundle: DocumentBundle, tc: TypeClassification, ev: Evidence, anchor_page: int, loc: str,
                   ref: dict[str, object]) -> list[Issue]:
    """``ANCHOR_NOT_ON_PAGE`` for each anchor not on ``anchor_page`` (MAJOR when it is elsewhere in the
    document, BLOCKER when nowhere)."""
    issues: list[Issue] = []
    for anchor in ev.anchors_found:
        if not normalise(anchor):
            continue
        a_on_page, a_elsewhere, a_near = locate_detail(bundle, anchor, anchor_page, quote=False)
        if a_on_page:
            continue
        a_near_msg, a_near_details = _unfaithful(a_near)
        where = (f"it appears on page(s) {', '.join(map(str, a_elsewhere))}" if a_elsewhere
                 else "it appears nowhere in the document")
        claimed = (f"its claimed page {ev.page}" if anchor_page == ev.page
                   else f"page {anchor_page}, where its snippet really is")
        issues.append(make_issue(
            "ANCHOR_NOT_ON_PAGE",
            f"Anchor '{_short(anchor, 40)}' for {tc.doc_type} is not on {claimed}; {where}" + a_near_msg,
            location=f"{loc}.anchors_found",
            suggested_fix="Anchors must be verbatim text of the cited page",
            severity=Severity.MAJOR if a_elsewhere else Severity.BLOCKER,
            details={**ref, "found_on_pages": a_elsewhere, **a_near_details},
        ))
    return issues


_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class _Pointer:
    """:class:`PointerRules`, compiled: phrases (more than one word) and single words apart."""

    cue_phrases: tuple[str, ...]
    cue_words: frozenset[str]
    referent_phrases: tuple[str, ...]
    referent_words: frozenset[str]
    #: every word a pointer may consist of (cues, document nouns and kinds, fillers)
    vocabulary: frozenset[str]
    #: the words that only point (cues, self-referents, fillers): no type's wording
    pointing: frozenset[str]
    max_unread: int
    staging: frozenset[str]


@functools.cache
def _pointer() -> _Pointer:
    rules = _cfg()["pointer"]

    def split(items: list[str]) -> tuple[tuple[str, ...], frozenset[str]]:
        norm = [normalise(i) for i in items]
        return (tuple(sorted((i for i in norm if " " in i), key=len, reverse=True)),
                frozenset(i for i in norm if " " not in i))

    cue_phrases, cue_words = split(rules["cues"])
    referent_phrases, referent_words = split(rules["self_referents"] + rules["document_nouns"])
    lists = (rules["cues"], rules["self_referents"], rules["document_nouns"], rules["document_kinds"],
             rules["filler_words"])
    vocabulary = frozenset(w for items in lists for item in items for w in _LETTERS.findall(normalise(item)))
    pointing = frozenset(w for items in (rules["cues"], rules["self_referents"], rules["filler_words"])
                         for item in items for w in _LETTERS.findall(normalise(item)))
    return _Pointer(cue_phrases, cue_words, referent_phrases, referent_words, vocabulary, pointing,
                    int(rules["max_unread_words"]),
                    frozenset(normalise(w) for w in _cfg()["faithfulness"]["roman_after"]))


def _holds(text: str, words: list[str], phrases: tuple[str, ...], singles: frozenset[str]) -> bool:
    return any(re.search(rf"(?<![^\W_]){re.escape(p)}(?![^\W_])", text) for p in phrases) or any(
        w in singles for w in words)


def _measurement(text: str, ptr: _Pointer) -> bool:
    """A number that says something clinical: with a unit or %, after a comparison sign, or a grade /
    stage ("grade 2", "stage iiia"). A date, a page number or an id alone is not one."""
    ct = critical_tokens()
    if ct.roman.search(text):
        return True
    for m in ct.number.finditer(text):
        token = m.group()
        if m.group("u") or "%" in token or token[:1] in "<>≤≥":
            return True
        before = _LETTERS.findall(text[max(0, m.start() - 20):m.start()])
        if before and before[-1] in ptr.staging:
            return True
    return False


def _content_types(snippet: str, words: frozenset[str]) -> set[str]:
    """The types with a lexicon cue in ``snippet`` that says more than ``words``: a cue counts unless
    every word of it is one of them."""
    return {t for t, hits in analyse(snippet).hits.items()
            if any(not set(_LETTERS.findall(normalise(h.text))) <= words for h in hits)}


def pointer_only(snippet: str) -> bool:
    """Does ``snippet`` only point at another document, saying nothing of its own (module docstring)?"""
    ptr = _pointer()
    text = normalise(snippet)
    words = _LETTERS.findall(text)
    if not words or not _holds(text, words, ptr.cue_phrases, ptr.cue_words):
        return False
    if not _holds(text, words, ptr.referent_phrases, ptr.referent_words):
        return False  # "refer to oncology", "two separate lesions": no document pointed at
    if _measurement(text, ptr) or critical_tokens().laterality.search(text):
        return False
    # a lexicon cue says something unless every word of it is a pointer's ("pathology report", "prior
    # study", "attached" — an Other cue —, "results" as a header)
    if _content_types(snippet, ptr.vocabulary):
        return False
    unread = [w for w in words if w not in ptr.vocabulary and len(w) > 1]
    return len(unread) <= ptr.max_unread


def _worded_as_other(scores: dict[str, float], doc_type: str) -> str:
    """The type a snippet's words belong to when none is ``doc_type``'s ('' when it has terms of
    ``doc_type``, or of no type at all: a snippet the lexicon knows nothing of is not weak for it —
    form lines, organ weights, authorization sentences carry their type in words no list holds)."""
    if scores.get(doc_type, 0.0) > 0.0:
        return ""
    best = max(scores, key=lambda t: scores[t], default="")
    return best if best and scores[best] > 0.0 else ""


def _other_wording(snippet: str, doc_type: str) -> dict[str, float]:
    """``score_text`` of the snippet, the other types counted only for cues that are more than pointing
    words: "attached", "pending" (Other cues), "scanned" (a Radiology one) are no type's wording."""
    content = _content_types(snippet, _pointer().pointing)
    return {t: v for t, v in score_text(snippet).items() if t == doc_type or t in content}


def offline_judgment(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    cfg = _cfg()
    generic = {normalise(g) for g in cfg["generic_phrases"]}
    issues: list[Issue] = []
    for _, seg, tc in iter_type_entries(cls):
        if tc.presence_level not in ("PRIMARY", "EMBEDDED_RAW") or not tc.top_evidence:
            continue  # missing evidence is V1's EVIDENCE_MISSING
        reasons = []
        for ev in tc.top_evidence:
            s = normalise(ev.snippet).strip(" .:;,")
            # the phrase itself ("see attached results", "n/a"); a snippet that only *starts* with one
            # is judged by what it says (pointer_only): "See attached: invasive ductal carcinoma" is not weak
            if s in generic:
                reasons.append("a generic reference")
            elif len(s) < cfg["min_chars"] or len(s.split()) < cfg["min_words"]:
                reasons.append("too short to be specific")
            elif tc.doc_type != OTHER and pointer_only(ev.snippet):
                reasons.append("only a pointer to another document, with nothing of its own")
            elif (other := _worded_as_other(_other_wording(ev.snippet, tc.doc_type), tc.doc_type)):
                reasons.append(f"worded as {other}, without any term specific to {tc.doc_type}")
            else:
                reasons.append("")
        if all(reasons):
            first = tc.top_evidence[0].snippet
            issues.append(make_issue(
                "EVIDENCE_WEAK",
                f"Evidence for {tc.doc_type} {tc.presence_level} in segment {seg.segment_index} is weak: "
                f"'{_short(first)}' is {reasons[0]}"
                + (f" (and {len(reasons) - 1} more weak snippet(s))" if len(reasons) > 1 else "")
                + f". Confidence {tc.confidence:.2f} is not supported by this evidence quality.",
                agent="V4", location=f"{type_loc(seg, tc)}.top_evidence",
                suggested_fix=f"Cite specific {tc.doc_type} text (section headers, findings, results)",
                details={"reasons": reasons, "implementation": OFFLINE_IMPLEMENTATION},
            ))
    return issues


# --------------------------------------------------------------------------- the verifier's spec

class EvidenceFinding(Finding):
    code: Literal["EVIDENCE_FABRICATED", "EVIDENCE_WEAK", "ANCHOR_NOT_ON_PAGE"]
    page: int | None = Field(default=None, description="The page the evidence item cites.")
    snippet: str | None = Field(
        default=None, description="The evidence snippet (or anchor) exactly as the classification gives it."
    )

    def issue_details(self) -> dict[str, object]:
        details: dict[str, object] = {}
        if self.page is not None:
            details["page"] = self.page
        if self.snippet is not None:
            details["snippet"] = self.snippet
        return details


class EvidenceFindings(JudgmentFindings):
    findings: list[EvidenceFinding] = Field(description="One entry per problem; empty when there is none.")


def llm_inputs(bundle: DocumentBundle, classification: ClassificationOutput) -> JudgmentInputs:
    """V4: the evidence (in the judgment view), the text of every page of each segment that has
    evidence, and any other cited page. The whole segment is sent so that a snippet copied from
    another page of its segment is not mistaken for a fabrication (the rule phase reports that
    as EVIDENCE_WRONG_PAGE and fixes it)."""
    wanted: set[int] = set()
    for seg in classification.segments:
        items = [ev for tc in seg.classifications for ev in tc.top_evidence]
        if items:
            wanted.update(range(seg.page_start, seg.page_end + 1))
            wanted.update(ev.page for ev in items)
    pages = sorted((p for p in bundle.pages if p.page_num in wanted), key=lambda p: p.page_num)
    return {
        "total_pages": bundle.total_pages,
        "pages": [page_entry(p.page_num, p.text) for p in pages],
        "classification": judgment_view(classification),
    }


def _rule_phase(bundle: DocumentBundle, cls: ClassificationOutput, policy: VerifyPolicy) -> list[Issue]:
    return rule_phase(bundle, cls)


SPEC = VerifierSpec(
    agent="V4",
    title="evidence",
    codes=("EVIDENCE_FABRICATED", "EVIDENCE_WRONG_PAGE", "EVIDENCE_OUTSIDE_SEGMENT", "ANCHOR_NOT_ON_PAGE",
           "EVIDENCE_WEAK"),
    rule_phase=_rule_phase,
    judgment_codes=("EVIDENCE_FABRICATED", "EVIDENCE_WEAK", "ANCHOR_NOT_ON_PAGE"),
    offline_judgment=offline_judgment,
    offline_implementation=OFFLINE_IMPLEMENTATION,
    prompt="v4_evidence_v2",
    findings_model=EvidenceFindings,
    llm_inputs=llm_inputs,
)
