"""V4 — evidence against the real page text (spec slide 6): the hallucination detector.

Rule phase, deterministic, against the DocumentBundle (never against the classifier's claims):

* every snippet is looked up on its claimed page after normalising case, width, dashes and
  whitespace, tolerating OCR noise (fuzzy ``partial_ratio`` ≥ the threshold in
  ``include/rules/evidence.json``; a page the local parser OCR'd takes ``fuzzy_threshold_ocr``);
* not there: found on another page of the same segment → ``EVIDENCE_WRONG_PAGE`` (MAJOR,
  auto-fixable: the page number is corrected); found only outside the segment →
  ``EVIDENCE_OUTSIDE_SEGMENT`` (MAJOR); found nowhere → ``EVIDENCE_FABRICATED`` (BLOCKER);
* every anchor must be on the claimed page: absent there → ``ANCHOR_NOT_ON_PAGE`` (MAJOR, not
  fixable), absent from the whole document → the same code as a BLOCKER. When the snippet is
  ``EVIDENCE_WRONG_PAGE``, the anchors are checked on the page the fix moves it to: anchors found
  there travel with the one fixable issue (issue 10, item 3);
* a snippet found on its claimed page, but that page is outside its segment →
  ``EVIDENCE_OUTSIDE_SEGMENT``; a page the document does not have is V1's
  ``EVIDENCE_PAGE_OUTSIDE_DOCUMENT``: such an item is only checked for fabrication here.

Judgment phase (evidence quality). The offline implementation flags a PRIMARY or EMBEDDED_RAW
type whose every snippet is generic ("see attached results"), too short, or carries no term of
the claimed type → ``EVIDENCE_WEAK`` (MAJOR).

``quality_score`` = 1.0 − 0.30·BLOCKER − 0.15·MAJOR − 0.05·MINOR over V4's issues, ≥ 0.
"""

from __future__ import annotations

from docverify.codes import make_issue
from docverify.models import ClassificationOutput, DocumentBundle, Issue, Severity
from docverify.resources import load_rule
from docverify.verify.common import contains, iter_type_entries, normalise, type_loc

IMPLEMENTATION = "rules-v1"
OFFLINE_IMPLEMENTATION = "offline-evidence-heuristics-v1"
PENALTY = {"BLOCKER": 0.30, "MAJOR": 0.15, "MINOR": 0.05}


def _cfg() -> dict:
    return load_rule("evidence")


def _short(snippet: str, n: int = 60) -> str:
    """A snippet shortened for a message. Messages go to artifacts and SME packets, never to
    logs (the lineage log line carries issue codes only)."""
    s = " ".join(snippet.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def quality_score(issues: list[Issue]) -> float:
    score = 1.0 - sum(PENALTY[Severity(i.severity).value] for i in issues if i.agent == "V4")
    return round(max(0.0, score), 4)


def locate(bundle: DocumentBundle, text: str, claimed_page: int) -> tuple[bool, list[int]]:
    """(found on the claimed page?, other pages where it was found)."""
    cfg = _cfg()

    def kw(page) -> dict:
        # an OCR'd page (no text layer) tolerates more noise: fuzzy_threshold_ocr, measured by
        # scripts/bench_ocr.py (docs/benchmarks/ocr.md)
        ocr = page is not None and page.ocr_confidence is not None
        return {"threshold": cfg.get("fuzzy_threshold_ocr", cfg["fuzzy_threshold"]) if ocr else cfg["fuzzy_threshold"],
                "fuzzy_min_chars": cfg["fuzzy_min_chars"]}

    claimed = next((p for p in bundle.pages if p.page_num == claimed_page), None)
    if claimed is not None and contains(claimed.text, text, **kw(claimed)):
        return True, []
    return False, [p.page_num for p in bundle.pages if p.page_num != claimed_page and contains(p.text, text, **kw(p))]


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
            on_page, elsewhere = locate(bundle, ev.snippet, ev.page)
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
                in_seg = [p for p in elsewhere if p in seg_pages]
                if in_seg:
                    # The fix moves the whole item, anchors included: anchors found on the new page
                    # travel with it (one fixable issue), only the others are reported below.
                    anchor_page = in_seg[0]
                    moving = [a for a in ev.anchors_found if normalise(a) and locate(bundle, a, in_seg[0])[0]]
                    issues.append(make_issue(
                        "EVIDENCE_WRONG_PAGE",
                        f"Evidence snippet '{_short(ev.snippet)}' for {tc.doc_type} is not on page {ev.page} "
                        f"but on page {in_seg[0]} of the same segment"
                        + (f" (with {len(moving)} of its anchor(s))" if moving else ""),
                        location=loc, suggested_fix=f"Set the evidence page to {in_seg[0]}",
                        details={**ref, "found_on_pages": elsewhere, "fix_page": in_seg[0],
                                 "anchors_moving": len(moving)},
                    ))
                elif elsewhere:
                    issues.append(make_issue(
                        "EVIDENCE_OUTSIDE_SEGMENT",
                        f"Evidence snippet '{_short(ev.snippet)}' for {tc.doc_type} in segment {seg.segment_index} "
                        f"(pages {seg.page_start}–{seg.page_end}) is only found on page(s) "
                        f"{', '.join(map(str, elsewhere))}, outside the segment",
                        location=loc, suggested_fix="Check the segment boundaries and the evidence",
                        details={**ref, "found_on_pages": elsewhere},
                    ))
                else:
                    issues.append(make_issue(
                        "EVIDENCE_FABRICATED",
                        f"Evidence snippet '{_short(ev.snippet)}' not found in actual PDF text on page {ev.page} "
                        f"nor on any other page. Possible hallucination.",
                        location=loc, suggested_fix="Remove the snippet and re-classify; an SME must check the label",
                        details={**ref, "found_on_pages": []},
                    ))
            for anchor in ev.anchors_found:
                if not normalise(anchor):
                    continue
                a_on_page, a_elsewhere = locate(bundle, anchor, anchor_page)
                if a_on_page:
                    continue
                where = (f"it appears on page(s) {', '.join(map(str, a_elsewhere))}" if a_elsewhere
                         else "it appears nowhere in the document")
                claimed = (f"its claimed page {ev.page}" if anchor_page == ev.page
                           else f"page {anchor_page}, where its snippet really is")
                issues.append(make_issue(
                    "ANCHOR_NOT_ON_PAGE",
                    f"Anchor '{_short(anchor, 40)}' for {tc.doc_type} is not on {claimed}; {where}",
                    location=f"{loc}.anchors_found",
                    suggested_fix="Anchors must be verbatim text of the cited page",
                    severity=Severity.MAJOR if a_elsewhere else Severity.BLOCKER,
                    details={**ref, "found_on_pages": a_elsewhere},
                ))
    return issues


def offline_judgment(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    from docverify.lexicon import score_text

    cfg = _cfg()
    generic = {normalise(g) for g in cfg["generic_phrases"]}
    issues: list[Issue] = []
    for _, seg, tc in iter_type_entries(cls):
        if tc.presence_level not in ("PRIMARY", "EMBEDDED_RAW") or not tc.top_evidence:
            continue  # missing evidence is V1's EVIDENCE_MISSING
        reasons = []
        for ev in tc.top_evidence:
            s = normalise(ev.snippet).strip(" .:;,")
            if s in generic or any(s.startswith(g) for g in generic if len(g) > 6):
                reasons.append("a generic reference")
            elif len(s) < cfg["min_chars"] or len(s.split()) < cfg["min_words"]:
                reasons.append("too short to be specific")
            elif score_text(ev.snippet).get(tc.doc_type, 0.0) <= 0.0:
                reasons.append(f"without any term specific to {tc.doc_type}")
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
