"""An SME correction that holds (ADR 0009).

The SME may set the dominant type, the segments, the presence level of any type (for the whole
document or per segment) and the mixture's presence levels; everything they do not set is
derived from what they set, so the corrected record never contradicts itself:

* a segment the SME gives with the page range of a primary segment starts from that segment's
  per-type claims, any other from none (every type NO_EVIDENCE);
* a segment's ``dominant_type`` is PRIMARY in it; the type it replaced (the primary segment's
  dominant type the SME retyped) is contradicted by the SME: its claims go — NO_EVIDENCE, its
  evidence dropped — unless the SME set its level (``corrected_presence`` or the segment's
  ``presence``), then the SME's level holds and its evidence on the segment's pages is kept;
* a mixture level caps the type in every segment where the SME did not set it; a mixture level
  stronger than every segment goes to the only segment (with several, the SME must say which);
* evidence is kept only for types that are present, on pages of its segment and — when the
  page text is at hand — found on its page by V4's lookup (anchors likewise);
* shares: unchanged levels keep the primary's shares (normalised), changed ones are derived
  from the levels (weights ``LEVEL_SHARE_WEIGHT``); the mixture is derived from the segments
  (strongest level, page-weighted share); ``dominant_type_overall`` is the SME's type, else the
  type covering the most pages.

A correction whose parts contradict each other (a mixture level weaker than a segment's
dominant type, an overall type no segment has, …) is refused with a ValueError naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, TypeGuard

from docverify.domain.models import (
    DOC_TYPES,
    PRESENCE_RANK,
    ClassificationOutput,
    DocumentBundle,
    PresenceLevel,
)
from docverify.verify.common import is_number
from docverify.verify.v2_consistency import derive_mixture
from docverify.verify.v4_evidence import locate


class SegmentRange(TypedDict):
    """An SME's segment as checked (:func:`docverify.sme.ground_truth.validate_segments`): its pages,
    its dominant type and, optionally, presence levels ``{doc type: level}`` in it."""

    page_start: int
    page_end: int
    dominant_type: str
    presence: NotRequired[dict[str, str]]


class _Built(TypedDict):
    k: int
    seg: SegmentRange
    entries: dict[str, dict[str, Any]]  # the primary's per-type entries (JSON as stored), being corrected
    before: dict[str, str]
    base: Mapping[str, object] | None


LEVELS = tuple(p.value for p in PresenceLevel)
LEVEL_SHARE_WEIGHT = {"PRIMARY": 1.0, "EMBEDDED_RAW": 0.3, "MENTION_ONLY": 0.05, "NO_EVIDENCE": 0.0}


def check_levels(value: object, field: str) -> dict[str, str]:
    """``{doc type: presence level}``, checked; raises ValueError naming the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{field}: give an object {{doc type: presence level}}, "
                         f"e.g. {{\"Genomic Report\": \"MENTION_ONLY\"}}")
    for t, level in value.items():
        if t not in DOC_TYPES:
            raise ValueError(f"{field}: {t!r} is not a document type; allowed values: {', '.join(DOC_TYPES)}")
        if level not in LEVELS:
            raise ValueError(f"{field}[{t!r}]: {level!r} is not a presence level; allowed values: {', '.join(LEVELS)}")
    return dict(value)


def _type_entries(seg: Mapping[str, object]) -> dict[str, dict[str, Any]]:
    listed = seg.get("classifications")
    have = {tc.get("doc_type"): copy.deepcopy(tc) for tc in (listed if isinstance(listed, list) else [])
            if isinstance(tc, dict)}
    return {t: have.get(t) or {"doc_type": t, "presence_level": "NO_EVIDENCE", "confidence": 0.0,
                                "segment_share": 0.0, "top_evidence": []} for t in DOC_TYPES}


def _on_page(bundle: DocumentBundle | None, text: str, page: int, *, quote: bool = True) -> bool:
    if bundle is None:
        return True

    return locate(bundle, text, page, quote=quote)[0]


def _number(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and is_number(x)


def derive(gt: dict[str, Any], segments: list[SegmentRange], *, dominant: str | None,
           presence: dict[str, str], mixture: dict[str, str], bundle: DocumentBundle | None,
           old_segments: list[Mapping[str, object]], changes: list[str]) -> dict[str, Any]:
    """Fill ``gt`` from the SME's ``segments`` (``page_start``, ``page_end``, ``dominant_type``,
    optional ``presence``; ``base``: the primary segment to start from, or None) so that no
    field contradicts another. Appends one line per change to ``changes``."""
    by_range = {(s.get("page_start"), s.get("page_end")): s for s in old_segments}
    built: list[_Built] = []
    sme_set: list[dict[str, str]] = []
    for k, s in enumerate(segments):
        base = by_range.get((s["page_start"], s["page_end"]))
        entries = _type_entries(base or {})
        before: dict[str, str] = {t: e["presence_level"] for t, e in entries.items()}
        set_here = {**presence, **(s.get("presence") or {})}
        dom = s["dominant_type"]
        if set_here.get(dom, "PRIMARY") != "PRIMARY":
            raise ValueError(f"corrected_segments[{k}]: the segment is a {dom} but its presence sets {dom} "
                             f"{set_here[dom]}; a segment's dominant type is PRIMARY in it")
        for t, level in set_here.items():
            entries[t]["presence_level"] = level
        entries[dom]["presence_level"] = "PRIMARY"
        old_dom = (base or {}).get("dominant_type")
        if isinstance(old_dom, str) and old_dom in entries and old_dom != dom and old_dom not in set_here:
            # the SME retyped the segment: the replaced type's claims go with it (no leftover
            # MENTION_ONLY carrying the contradicted evidence); its evidence is dropped below
            entries[old_dom]["presence_level"] = "NO_EVIDENCE"
        built.append({"k": k, "seg": s, "entries": entries, "before": before, "base": base})
        sme_set.append({**set_here, dom: "PRIMARY"})

    for t, level in mixture.items():
        for b, fixed in zip(built, sme_set, strict=True):
            cur = b["entries"][t]["presence_level"]
            if PRESENCE_RANK[cur] > PRESENCE_RANK[level]:
                if t in fixed:
                    raise ValueError(f"corrected_mixture[{t!r}]: {level} is weaker than {cur} in corrected segment "
                                     f"{b['k']} (pages {b['seg']['page_start']}–{b['seg']['page_end']}); the mixture "
                                     f"is each type's strongest level over the segments")
                b["entries"][t]["presence_level"] = level
        if max(PRESENCE_RANK[b["entries"][t]["presence_level"]] for b in built) < PRESENCE_RANK[level]:
            free = [b for b, fixed in zip(built, sme_set, strict=True) if t not in fixed]
            if len(built) != 1 or not free:
                raise ValueError(f"corrected_mixture[{t!r}]: {level} is stronger than every segment's level; say in "
                                 f"which segment with corrected_segments[k].presence")
            free[0]["entries"][t]["presence_level"] = level

    new_segments: list[dict[str, object]] = []
    pages: dict[str, int] = {}  # dominant type → pages
    for b in built:
        s, entries, base = b["seg"], b["entries"], b["base"]
        lo, hi = s["page_start"], s["page_end"]
        dropped = 0
        for e in entries.values():
            evidence = []
            if e["presence_level"] != "NO_EVIDENCE":
                for ev in e.get("top_evidence") or []:
                    if lo <= ev.get("page", 0) <= hi and _on_page(bundle, ev.get("snippet", ""), ev["page"]):
                        ev = {**ev, "anchors_found": [a for a in ev.get("anchors_found") or []
                                                      if _on_page(bundle, a, ev["page"], quote=False)]}
                        evidence.append(ev)
            dropped += len(e.get("top_evidence") or []) - len(evidence)
            e["top_evidence"] = evidence
        levels = {t: e["presence_level"] for t, e in entries.items()}
        old_shares = [entries[t].get("segment_share") for t in DOC_TYPES]
        shares = [v for v in old_shares if _number(v) and v >= 0]
        keep = (base is not None and levels == b["before"] and len(shares) == len(old_shares)
                and sum(shares) > 0
                and all(entries[t]["segment_share"] > 0.01 for t in DOC_TYPES if levels[t] == "PRIMARY"))
        weights = shares if keep else [LEVEL_SHARE_WEIGHT[levels[t]] for t in DOC_TYPES]
        total = sum(weights)
        for t, w in zip(DOC_TYPES, weights, strict=True):
            e = entries[t]
            e["segment_share"] = round(w / total, 6)
            if levels[t] != b["before"][t] or not (_number(e.get("confidence")) and 0 <= e["confidence"] <= 1):
                e["confidence"] = 1.0 if levels[t] == "PRIMARY" else (
                    0.0 if levels[t] == "NO_EVIDENCE" else min(1.0, max(0.0, e.get("confidence") or 0.0)))
            if levels[t] != b["before"][t]:
                changes.append(f"segments[{b['k']}] → {t}: {b['before'][t]} → {levels[t]}")
        if dropped:
            changes.append(f"segments[{b['k']}]: {dropped} evidence item(s) dropped (type not present, page outside "
                           f"the segment, or not on its page)")
        new_segments.append({"segment_index": b["k"], "page_start": lo, "page_end": hi,
                             "segment_page_count": hi - lo + 1, "dominant_type": s["dominant_type"],
                             "reasoning": (base or {}).get("reasoning", ""),
                             "classifications": [entries[t] for t in DOC_TYPES]})
        pages[s["dominant_type"]] = pages.get(s["dominant_type"], 0) + hi - lo + 1
    gt["segments"], gt["number_of_segments"] = new_segments, len(new_segments)

    if dominant is not None and dominant not in pages:
        raise ValueError(f"corrected_dominant_type: {dominant} is the type of no segment "
                         f"({', '.join(pages)}); give corrected_segments that include it")
    overall = dominant or max(pages, key=lambda t: pages[t])  # ties: the earliest segment
    if gt.get("dominant_type_overall") != overall:
        changes.append(f"dominant_type_overall: {gt.get('dominant_type_overall')} → {overall}")
        gt["dominant_type_overall"] = overall

    gt.setdefault("vendor_signals", [])
    gt.setdefault("self_evaluation", {"confidence": 1.0, "notes": "SME correction"})
    cls = ClassificationOutput.model_validate(gt)
    old_mix = {m.get("doc_type"): m.get("presence_level") for m in gt.get("document_mixture") or []
               if isinstance(m, dict)}
    cls.document_mixture = derive_mixture(cls)
    for m in cls.document_mixture:
        if old_mix.get(m.doc_type) != m.presence_level:
            changes.append(f"document_mixture → {m.doc_type}: {old_mix.get(m.doc_type)} → {m.presence_level}")
    return cls.model_dump(mode="json")
