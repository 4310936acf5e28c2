"""The auto-fix engine (spec slide 8): one fixer per auto-fixable issue code.

A fixer receives the classification (a copy it may change) and the issues of its code, and
returns a sentence saying what it changed, or ``None`` when it changed nothing. Fixers are
idempotent. ``tests/docverify/test_autofix.py`` checks that every code the catalogue marks
auto-fixable has a fixer here.
"""

from __future__ import annotations

from collections.abc import Callable

from docverify.domain.models import (
    DOC_TYPES,
    ClassificationOutput,
    FixApplied,
    Issue,
    MixtureEntry,
    Segment,
    TypeClassification,
)
from docverify.verify.common import is_number
from docverify.verify.registry import REGISTRY, Registry
from docverify.verify.v2_consistency import SHARE_TOLERANCE, derive_mixture, pages_by_dominant_type

Fixer = Callable[[ClassificationOutput, list[Issue]], str | None]
FIXERS: dict[str, Fixer] = {}


def fixer(code: str) -> Callable[[Fixer], Fixer]:
    def register(fn: Fixer) -> Fixer:
        FIXERS[code] = fn
        return fn

    return register


def normalise_shares(values: list[float]) -> list[float]:
    """Divide each share by the sum: [0.50, 0.30, 0.10, 0.08, 0.08] → [0.4717, 0.2830, …]."""
    total = sum(values)
    if not total > 0:
        raise ValueError("cannot normalise shares whose sum is not positive")
    return [v / total for v in values]


def _needs_normalising(values: list[float]) -> bool:
    return (all(is_number(v) for v in values) and sum(values) > 0
            and abs(sum(values) - 1.0) > SHARE_TOLERANCE)


@fixer("SEGMENT_SHARE_SUM")
def fix_segment_shares(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    changed = []
    for seg in cls.segments:
        values = [tc.segment_share for tc in seg.classifications]
        if _needs_normalising(values):
            for tc, v in zip(seg.classifications, normalise_shares(values), strict=True):
                tc.segment_share = v
            changed.append(f"segment {seg.segment_index} (sum {sum(values):.3f})")
    return f"Normalised the shares of {', '.join(changed)} to sum 1.0" if changed else None


@fixer("MIXTURE_SHARE_SUM")
def fix_mixture_shares(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    values = [m.overall_share for m in cls.document_mixture]
    if not _needs_normalising(values):
        return None
    for m, v in zip(cls.document_mixture, normalise_shares(values), strict=True):
        m.overall_share = v
    return f"Normalised the mixture's overall_share values (sum {sum(values):.3f}) to sum 1.0"


@fixer("SEGMENT_COUNT_MISMATCH")
def fix_segment_count(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    if cls.number_of_segments == len(cls.segments):
        return None
    old, cls.number_of_segments = cls.number_of_segments, len(cls.segments)
    return f"Set number_of_segments from {old} to {cls.number_of_segments}"


@fixer("SEGMENT_PAGE_COUNT_WRONG")
def fix_segment_page_count(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    changed = []
    for seg in cls.segments:
        expected = seg.page_end - seg.page_start + 1
        if seg.page_start <= seg.page_end and seg.segment_page_count != expected:
            changed.append(f"segment {seg.segment_index}: {seg.segment_page_count} → {expected}")
            seg.segment_page_count = expected
    return f"Recomputed segment_page_count ({'; '.join(changed)})" if changed else None


@fixer("DOC_TYPE_MISSING")
def fix_missing_types(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    added = []
    for seg in cls.segments:
        have = {tc.doc_type for tc in seg.classifications}
        for t in DOC_TYPES:
            if t not in have:
                seg.classifications.append(TypeClassification(
                    doc_type=t, presence_level="NO_EVIDENCE", confidence=0.0, segment_share=0.0))
                added.append(f"{t} to segment {seg.segment_index}")
        seg.classifications.sort(key=lambda tc: DOC_TYPES.index(tc.doc_type))
    have = {m.doc_type for m in cls.document_mixture}
    for t in DOC_TYPES:
        if t not in have:
            cls.document_mixture.append(MixtureEntry(doc_type=t, presence_level="NO_EVIDENCE", overall_share=0.0))
            added.append(f"{t} to the mixture")
    cls.document_mixture.sort(key=lambda m: DOC_TYPES.index(m.doc_type))
    return f"Added as NO_EVIDENCE (confidence 0, share 0): {', '.join(added)}" if added else None


@fixer("EVIDENCE_WRONG_PAGE")
def fix_evidence_page(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    moved = []
    for issue in issues:
        d = issue.details
        try:
            seg = cls.segments[d["segment_pos"]]
            tc = next(t for t in seg.classifications if t.doc_type == d["doc_type"])
            ev = tc.top_evidence[d["evidence_index"]]
        except (KeyError, IndexError, StopIteration):
            continue
        if ev.page == d["claimed_page"] and ev.page != d["fix_page"]:
            ev.page = d["fix_page"]
            moved.append(f"{issue.issue_id or issue.code}: page {d['claimed_page']} → {d['fix_page']}")
    return f"Corrected evidence pages ({'; '.join(moved)})" if moved else None


@fixer("MIXTURE_CONTRADICTS_SEGMENTS")
def fix_mixture_from_segments(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    """The mixture summarises the segments, so the segments win: the whole mixture is derived
    from them (strongest level, page-weighted share), which also keeps its shares summing to 1."""
    derived = derive_mixture(cls)
    before = {m.doc_type: (m.presence_level, m.overall_share) for m in cls.document_mixture}
    if before == {m.doc_type: (m.presence_level, m.overall_share) for m in derived}:
        return None
    changed = [f"{m.doc_type} {before.get(m.doc_type, ('absent',))[0]} → {m.presence_level}"
               for m in derived if before.get(m.doc_type, ("absent",))[0] != m.presence_level]
    cls.document_mixture = derived
    return ("Derived the mixture from the segments (strongest presence level, page-weighted share)"
            + (f": {'; '.join(changed)}" if changed else ""))


@fixer("DOMINANT_OVERALL_CONTRADICTS_SEGMENTS")
def fix_dominant_overall(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    pages = pages_by_dominant_type(cls)
    if not pages or cls.dominant_type_overall in pages:
        return None
    top = max(pages.values())
    best = [t for t, n in pages.items() if n == top]
    if len(best) != 1:  # a tie is a judgment (the issue is then not auto-fixable)
        return None
    old, cls.dominant_type_overall = cls.dominant_type_overall, best[0]
    return f"Set dominant_type_overall from {old} to {best[0]} (the type of the segments covering the most pages)"


@fixer("JURY_FLIP")
def fix_jury_flip(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    """Set the presence level the jury voted for (PRIMARY <-> MENTION_ONLY) in the segment, and in
    the mixture when the document has one segment. Idempotent: a level already flipped stays."""
    done = []
    for issue in issues:
        t = (issue.details or {}).get("flip") or {}
        seg = next((s for s in cls.segments if s.segment_index == t.get("segment_index")), None)
        if seg is None:
            continue
        for tc in seg.classifications:
            if tc.doc_type == t.get("doc_type") and tc.presence_level == t.get("from"):
                tc.presence_level = t["to"]
                done.append(f"{tc.doc_type} in segment {seg.segment_index}: {t['from']} -> {t['to']}")
                if len(cls.segments) == 1:
                    for m in cls.document_mixture:
                        if m.doc_type == tc.doc_type and m.presence_level == t["from"]:
                            m.presence_level = t["to"]
    return "Applied the jury's FLIP: " + "; ".join(done) if done else None


@fixer("SEGMENT_BOUNDARY_MISPLACED")
def split_at_boundary(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    """Split off the pages the independent reading read surely as another type at a segment's start or end
    (the issue's ``pages`` and ``read_as``) as a segment of their own: that type PRIMARY (the reading's
    probability as its confidence, its evidence on those pages kept), every other type NO_EVIDENCE — or, when
    the segment on the other side of the boundary already is of that type, as more pages of it (the boundary
    moves). The rest
    of the segment keeps its labels and the evidence on its own pages. Segments are renumbered in page order,
    the mixture and the overall type derived from them. Segments are found by page range, not index, so the
    issues of one attempt can all be applied; idempotent (a range that already is a segment is left)."""
    done = []
    for issue in issues:
        d = issue.details or {}
        pages, read_as, prob = d.get("pages"), d.get("read_as"), d.get("probability")
        if not (isinstance(pages, list) and len(pages) == 2 and read_as in DOC_TYPES
                and isinstance(prob, (int, float)) and not isinstance(prob, bool)):
            continue
        a, b = int(pages[0]), int(pages[1])
        seg = next((s for s in cls.segments if s.page_start <= a and b <= s.page_end), None)
        if seg is None or seg.dominant_type == read_as or (seg.page_start, seg.page_end) == (a, b):
            continue
        if a != seg.page_start and b != seg.page_end:  # not at an edge: a person decides
            continue
        at_start = a == seg.page_start
        rest = _rest_of(seg, b + 1 if at_start else seg.page_start, seg.page_end if at_start else a - 1)
        at = cls.segments.index(seg)
        pages_named = f"pages {a}–{b}" if a != b else f"page {a}"
        # the segment the pages touch on the other side of the boundary: of the type read, it takes them
        beside = next((s for s in cls.segments if s.page_end == a - 1), None) if at_start else \
            next((s for s in cls.segments if s.page_start == b + 1), None)
        if beside is not None and beside.dominant_type == read_as:
            beside.page_start, beside.page_end = min(beside.page_start, a), max(beside.page_end, b)
            beside.segment_page_count = beside.page_end - beside.page_start + 1
            cls.segments[at] = rest
            done.append(f"{pages_named} of segment {seg.segment_index} moved to segment {beside.segment_index} "
                        f"({read_as})")
            continue
        new = _split_segment(seg, a, b, str(read_as), float(prob))
        cls.segments[at:at + 1] = [new, rest] if at_start else [rest, new]
        done.append(f"{pages_named} of segment {seg.segment_index} as {read_as}")
    if not done:
        return None
    _renumber(cls)
    return f"Split at the boundary the independent reading found: {'; '.join(done)}"


def _renumber(cls: ClassificationOutput) -> None:
    """After segments were split or moved: segments in page order numbered from 1, their count, the mixture
    derived from them, and the overall type the one covering the most pages when no segment has it any more."""
    cls.segments.sort(key=lambda s: s.page_start)
    for i, seg in enumerate(cls.segments, 1):
        seg.segment_index = i
    cls.number_of_segments = len(cls.segments)
    cls.document_mixture = derive_mixture(cls)
    pages = pages_by_dominant_type(cls)
    if cls.dominant_type_overall not in pages:
        cls.dominant_type_overall = max(pages, key=lambda t: pages[t])


@fixer("SEGMENT_SPANS_PRINTED_DOCUMENTS")
def split_printed_documents(cls: ClassificationOutput, issues: list[Issue]) -> str | None:
    """Split a segment where a printed document begins (the issue's ``split_at`` pages: "Page 1 of n" right after
    "Page m of m"): each piece keeps the segment's labels and the evidence on its own pages, and says in its
    reasoning that the verifiers split it -- verifying again judges each piece on its own text (a form joined to a
    report then reads as one). Segments are renumbered (:func:`_renumber`). Found by page range; idempotent (a page
    that already starts a segment is left)."""
    done = []
    for issue in issues:
        d = issue.details or {}
        at = d.get("split_at")
        if not isinstance(at, list):
            continue
        for num in sorted(x for x in at if isinstance(x, int) and not isinstance(x, bool)):
            seg = next((s for s in cls.segments if s.page_start < num <= s.page_end), None)
            if seg is None:
                continue
            head, tail = _rest_of(seg, seg.page_start, num - 1), _rest_of(seg, num, seg.page_end)
            tail.reasoning = (f"Split from segment {seg.segment_index} by the verifiers: page {num} begins a printed "
                              f"document of its own (its page numbering starts again). {seg.reasoning}").strip()
            i = cls.segments.index(seg)
            cls.segments[i:i + 1] = [head, tail]
            done.append(f"segment {seg.segment_index} at page {num}")
    if not done:
        return None
    _renumber(cls)
    return f"Split where a printed document begins: {'; '.join(done)}"


def _split_segment(seg: Segment, a: int, b: int, doc_type: str, prob: float) -> Segment:
    entries = []
    for t in DOC_TYPES:
        old = next((tc for tc in seg.classifications if tc.doc_type == t), None)
        if t == doc_type:
            evidence = [ev for ev in (old.top_evidence if old else []) if a <= ev.page <= b]
            entries.append(TypeClassification(doc_type=t, presence_level="PRIMARY", confidence=round(prob, 4),
                                              segment_share=1.0, top_evidence=evidence))
        else:
            entries.append(TypeClassification(doc_type=t, presence_level="NO_EVIDENCE", confidence=0.0,
                                              segment_share=0.0))
    return Segment(segment_index=seg.segment_index, page_start=a, page_end=b, segment_page_count=b - a + 1,
                   dominant_type=doc_type, classifications=entries,
                   reasoning=f"Split from segment {seg.segment_index} by the verifiers: the pages read as {doc_type} "
                             f"in a reading made without the classifier's labels (probability {prob:.2f}).")


def _rest_of(seg: Segment, a: int, b: int) -> Segment:
    rest = seg.model_copy(deep=True)
    rest.page_start, rest.page_end, rest.segment_page_count = a, b, b - a + 1
    for tc in rest.classifications:
        tc.top_evidence = [ev for ev in tc.top_evidence if a <= ev.page <= b]
    return rest


def fixer_for(code: str, registry: Registry = REGISTRY) -> Fixer | None:
    """The fixer of ``code``: this module's, or the one its verifier's spec brings (``VerifierSpec.fixers``)."""
    fn = FIXERS.get(code)
    if fn is None:
        owner = registry.code_owner(code)
        fn = owner.fixers.get(code) if owner is not None else None
    return fn


def apply_fixes(cls: ClassificationOutput, issues: list[Issue], attempt: int,
                registry: Registry = REGISTRY) -> tuple[ClassificationOutput, list[FixApplied]]:
    """Apply the fixer of every auto-fixable issue code present (:func:`fixer_for`). Returns a new
    classification (the input is not changed) and what was done."""
    fixed = cls.model_copy(deep=True)
    by_code: dict[str, list[Issue]] = {}
    for issue in issues:
        if issue.auto_fixable:
            by_code.setdefault(issue.code, []).append(issue)
    applied = []
    for code, code_issues in by_code.items():
        fn = fixer_for(code, registry)
        if fn is None:  # guarded by a test; never silently pretend a fix happened
            continue
        description = fn(fixed, code_issues)
        if description:
            applied.append(FixApplied(attempt=attempt, fixer=fn.__name__, codes=[code],
                                      issue_ids=[i.issue_id for i in code_issues], description=description))
    return fixed, applied
