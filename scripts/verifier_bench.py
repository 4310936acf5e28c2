"""The verifier benchmark: correct classifications of real labelled documents, and copies of them
carrying one realistic classifier error each.

How often would an accept be wrong? Nothing in a nightly run can say (the SMEs see only what the
verifiers flagged), so this measures it offline, on texts with known labels:

* **gold** — a correct classification of each document, built from its labels alone
  (:func:`gold_classification`): the true type PRIMARY in each true segment, the other four
  NO_EVIDENCE, evidence quoted verbatim from the segment's pages, shares that sum to 1, the
  mixture derived from the segments. A gold classification the pipeline escalates is a **false
  alarm**. The evidence is picked without the verifiers' lexicon (:func:`pick_evidence`: a line
  naming the type's usual sections, else the first substantial line), so the verifiers are not
  graded on their own vocabulary.
* **cases** — the gold classification with one error of the :data:`CATALOGUE` injected: a changed
  number, a dropped negation, two documents merged into one segment, … Each error class says
  whether the specification requires the verifiers to catch it. A case is **caught** when the
  final decision is not AUTO_ACCEPT, or when the accepted output no longer carries the error (an
  automatic fix removed it).
* **controls** — gold classifications whose evidence is a line holding a number, a negation or a
  laterality word, quoted faithfully: the verifiers must accept them (they guard the error
  classes of the same names against "any number escalates").

Pure domain code (no Airflow); ``scripts/bench_verifiers.py`` runs it on the tuning/test split of
the shared corpora and writes ``docs/benchmarks/verifiers.md``. Nothing here copies corpus text
anywhere: reports name documents by id.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from docverify.domain.models import DOC_TYPES, ClassificationOutput, DocumentBundle
from docverify.judging.judges import Judge, Usage
from docverify.reporting.labelled_sample import text_page

OTHER = "Other"
#: Words of the sections each type usually carries, used only to choose gold evidence lines
#: (deliberately not the verifiers' lexicon: the gold evidence must not be graded by its own words).
SECTION_WORDS: dict[str, tuple[str, ...]] = {
    "Clinical Note": ("history of present illness", "chief complaint", "assessment", "plan", "physical exam",
                      "review of systems", "past medical history", "medications", "allergies", "diagnosis",
                      "patient", "presents", "complains"),
    "Pathology Report": ("diagnosis", "specimen", "gross description", "microscopic", "carcinoma", "margin",
                         "biopsy", "tumor", "lymph node", "histolog", "resection", "pathologic"),
    "Radiology Report": ("impression", "findings", "technique", "comparison", "exam", "views", "chest",
                         "radiograph", "ct ", "mri", "ultrasound", "x-ray", "lungs", "no acute"),
    "Genomic Report": ("variant", "gene", "sequencing", "pathogenic", "mutation", "germline", "somatic",
                       "allele", "genotype", "hgvs", "brca", "exon", "genomic"),
    "Other": ("authorization", "insurance", "claim", "member", "coverage", "consent", "requisition",
              "billing", "payer", "policy", "provider", "order", "form", "signature", "date"),
}
_HEADER_FOOTER = re.compile(r"\bpage\s*\d+\s*(of|/)\s*\d+|\bfax\b|\bphone\b|\btel\b|\bMRN\b|\bDOB\b|"
                            r"\(\d{3}\)\s*\d{3}|\d{3}-\d{3}-\d{4}", re.I)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*\d)")
_NEGATION = re.compile(r"\b(no evidence of|negative for|without|no|not|denies)\b", re.I)
_LATERALITY = re.compile(r"\b(left|right)\b", re.I)


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class TruthSegment:
    doc_type: str
    page_start: int
    page_end: int


@dataclass
class BenchDoc:
    """One document of the benchmark: its pages and its true segments."""

    bundle: DocumentBundle
    truth: list[TruthSegment]
    source_ids: list[str]

    @property
    def doc_id(self) -> str:
        return self.bundle.doc_id


def _bundle(doc_id: str, pages: list[str], origin: str) -> DocumentBundle:
    return DocumentBundle(doc_id=doc_id, file_path=f"bench://{origin}/{doc_id}", total_pages=len(pages),
                          parser="bench:text-split",
                          pages=[text_page(i, t) for i, t in enumerate(pages, 1)])


def single_docs(records: Iterable[dict[str, Any]]) -> list[BenchDoc]:
    """Each labelled record as a document of one segment (pages of about 3,000 characters)."""
    from docverify.reporting.labelled_sample import split_pages

    out = []
    for r in records:
        text = (r.get("text") or "").strip()
        if not text:
            continue
        pages = split_pages(text)
        out.append(BenchDoc(_bundle(str(r["id"]), pages, "single"),
                            [TruthSegment(r["proposed_doc_type"], 1, len(pages))], [str(r["id"])]))
    return out


def multi_docs(records: Iterable[dict[str, Any]], n: int, seed: int) -> list[BenchDoc]:
    """``n`` PDFs holding 2–3 documents of different types (texts of ``records`` concatenated as
    pages), with their true segments. Seeded."""
    from scripts.support.labelled_corpus import texts_by_type

    from docverify.reporting.labelled_sample import split_pages

    rng = random.Random(seed)
    by_type = texts_by_type(records)
    types = sorted(by_type)
    out = []
    for i in range(n):
        chosen = rng.sample(types, min(rng.choice((2, 2, 3)), len(types)))
        pages: list[str] = []
        truth: list[TruthSegment] = []
        ids = []
        for t in chosen:
            rec = rng.choice(by_type[t])
            texts = split_pages(rec["text"].strip())
            truth.append(TruthSegment(t, len(pages) + 1, len(pages) + len(texts)))
            pages += texts
            ids.append(str(rec["id"]))
        out.append(BenchDoc(_bundle(f"multi-{seed}-{i}", pages, "multi"), truth, ids))
    return out


# --------------------------------------------------------------------------- gold classifications


_SENTENCE_END = re.compile(r"(?<=[.;])\s+(?=[A-Z0-9])")


def _lines(text: str) -> list[str]:
    """The text's lines, a long line cut into its sentences (what a classifier quotes)."""
    out: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            out += [s for s in _SENTENCE_END.split(line) if s] if len(line) > 160 else [line]
    return out


def _usable(line: str) -> bool:
    return len(line) >= 20 and len(line.split()) >= 3 and not _HEADER_FOOTER.search(line)


def _clip(line: str, limit: int = 160) -> str:
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit)
    return line[: cut if cut > 40 else limit]


def page_lines(bundle: DocumentBundle, pages: Iterable[int]) -> list[tuple[int, str]]:
    """(page, line) of the usable evidence lines of ``pages`` (whitespace collapsed)."""
    wanted = set(pages)
    return [(p.page_num, _clip(line)) for p in bundle.pages if p.page_num in wanted
            for line in _lines(p.text) if _usable(line)]


def pick_evidence(bundle: DocumentBundle, seg: TruthSegment, k: int = 2) -> list[dict[str, Any]]:
    """Up to ``k`` evidence items for ``seg``'s type, quoted verbatim: lines naming the type's usual
    sections first (from different pages where possible), else the first usable lines."""
    lines = page_lines(bundle, range(seg.page_start, seg.page_end + 1))
    words = SECTION_WORDS[seg.doc_type]

    def cues(line: str) -> int:
        low = line.lower()
        return sum(w in low for w in words)
    # the lines naming most of the type's sections first (a classifier quotes the telling line)
    cued = sorted(((p, s) for p, s in lines if cues(s)), key=lambda ps: -cues(ps[1]))
    chosen: list[tuple[int, str]] = []
    for p, s in cued + lines:
        if any(s == c for _, c in chosen):
            continue
        if len(chosen) < k and (not chosen or p != chosen[0][0] or len(cued) + len(lines) < 4):
            chosen.append((p, s))
    if not chosen:  # a page without any usable line: its first non-empty line, however short
        for page in bundle.pages:
            if seg.page_start <= page.page_num <= seg.page_end and _lines(page.text):
                chosen = [(page.page_num, _clip(_lines(page.text)[0]))]
                break
    return [{"snippet": s, "page": p, "anchors_found": []} for p, s in chosen[:k]]


def _entry(doc_type: str, level: str, share: float, confidence: float,
           evidence: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"doc_type": doc_type, "presence_level": level, "confidence": confidence,
            "segment_share": share, "top_evidence": evidence or []}


def segment_dict(index: int, seg: TruthSegment, evidence: list[dict[str, Any]],
                 confidence: float = 0.9) -> dict[str, Any]:
    others = [t for t in DOC_TYPES if t != seg.doc_type]
    return {
        "segment_index": index, "page_start": seg.page_start, "page_end": seg.page_end,
        "segment_page_count": seg.page_end - seg.page_start + 1, "dominant_type": seg.doc_type,
        "reasoning": f"The pages read as a {seg.doc_type}.",
        "classifications": [_entry(seg.doc_type, "PRIMARY", 0.9, confidence, evidence)]
        + [_entry(t, "NO_EVIDENCE", 0.025, 0.05) for t in others],
    }


def finish(cls: dict[str, Any]) -> dict[str, Any]:
    """Derive what follows from the segments (count, mixture, overall type), as a consistent
    classifier writes them."""
    from docverify.verify.v2_consistency import derive_mixture, pages_by_dominant_type

    cls["number_of_segments"] = len(cls["segments"])
    parsed = ClassificationOutput.model_validate(cls)
    cls["document_mixture"] = [m.model_dump(mode="json") for m in derive_mixture(parsed)]
    pages = pages_by_dominant_type(parsed)
    cls["dominant_type_overall"] = max(sorted(pages), key=lambda t: pages[t])
    return cls


def gold_classification(doc: BenchDoc) -> dict[str, Any]:
    """The correct classification of ``doc`` (see the module docstring)."""
    from docverify.domain.lexicon import find_vendors

    segments = [segment_dict(i, seg, pick_evidence(doc.bundle, seg)) for i, seg in enumerate(doc.truth, 1)]
    cls = {"doc_id": doc.doc_id, "dominant_type_overall": doc.truth[0].doc_type, "number_of_segments": 0,
           "segments": segments, "document_mixture": [],
           "vendor_signals": find_vendors(doc.bundle.full_text()),
           "self_evaluation": {"confidence": 0.85, "notes": "benchmark gold"}, "classifier": "bench:gold"}
    return finish(cls)


# --------------------------------------------------------------------------- error catalogue


@dataclass
class Injected:
    """A gold classification with one error: the classification, the bundle it is checked
    against (the gold one unless the error is in the document), and how to tell whether an
    accepted output still carries the error."""

    classification: dict[str, Any]
    bundle: DocumentBundle
    persists: Callable[[dict[str, Any]], bool] = field(default=lambda final: True)


@dataclass(frozen=True)
class ErrorClass:
    name: str
    title: str
    #: the specification requires the verifiers to catch it (a BLOCKER or MAJOR of the spec's checks)
    required: bool
    #: which verifier the specification gives it to
    owner: str
    inject: Callable[[BenchDoc, dict[str, Any], random.Random, list[BenchDoc]], Injected | None]


def _copy(cls: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(cls)


def _primary(seg: dict[str, Any]) -> dict[str, Any]:
    return next(tc for tc in seg["classifications"] if tc["presence_level"] == "PRIMARY")


def _types_of(final: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(s.get("dominant_type"), s.get("page_start"), s.get("page_end")) for s in final.get("segments", [])]


def _truth_spans(doc: BenchDoc) -> list[tuple[str, int, int]]:
    return [(t.doc_type, t.page_start, t.page_end) for t in doc.truth]


def _wrong_split(doc: BenchDoc) -> Callable[[dict[str, Any]], bool]:
    return lambda final: _types_of(final) != _truth_spans(doc)


def _swap_type(seg: dict[str, Any], new_type: str, keep_evidence: bool = True) -> None:
    old = _primary(seg)
    ev = old["top_evidence"]
    for tc in seg["classifications"]:
        if tc["doc_type"] == new_type:
            tc.update(presence_level="PRIMARY", confidence=old["confidence"], segment_share=old["segment_share"],
                      top_evidence=ev if keep_evidence else [])
    old.update(presence_level="NO_EVIDENCE", confidence=0.05, segment_share=0.025, top_evidence=[])
    seg["dominant_type"] = new_type


def inject_segment_type_swapped(doc, gold, rng, pool):
    cls = _copy(gold)
    k = rng.randrange(len(cls["segments"]))
    seg = cls["segments"][k]
    _swap_type(seg, rng.choice([t for t in DOC_TYPES if t != seg["dominant_type"]]))
    return Injected(finish(cls), doc.bundle, _wrong_split(doc))


def inject_overall_type_swapped(doc, gold, rng, pool):
    """The overall type names a type no segment has. (Which of the segments' types is "dominant"
    is left to the classifier: a one-page genomic report behind a two-page cover letter may
    rightly be called a Genomic Report.)"""
    cls = _copy(gold)
    present = {t.doc_type for t in doc.truth}
    cls["dominant_type_overall"] = rng.choice([t for t in DOC_TYPES if t not in present])
    return Injected(cls, doc.bundle, lambda final: final.get("dominant_type_overall") not in present)


def _evidence_slot(cls: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A random (segment, evidence item) of a PRIMARY type."""
    slots = [(seg, ev) for seg in cls["segments"] for ev in _primary(seg)["top_evidence"]]
    return rng.choice(slots) if slots else None


def inject_evidence_other_document(doc, gold, rng, pool):
    cls = _copy(gold)
    slot = _evidence_slot(cls, rng)
    others = [d for d in pool if not set(d.source_ids) & set(doc.source_ids)]
    if slot is None or not others:
        return None
    other = rng.choice(others)
    lines = page_lines(other.bundle, range(1, other.bundle.total_pages + 1))
    text = doc.bundle.full_text()
    lines = [s for _, s in lines if s not in text]
    if not lines:
        return None
    slot[1]["snippet"] = rng.choice(lines)
    return Injected(cls, doc.bundle)


def inject_evidence_other_page(doc, gold, rng, pool):
    """The snippet is real, from another page of its segment; the page number names the wrong one."""
    cls = _copy(gold)
    slots = [(seg, ev) for seg in cls["segments"] for ev in _primary(seg)["top_evidence"]
             if seg["page_end"] > seg["page_start"]]
    if not slots:
        return None
    seg, ev = rng.choice(slots)
    snippet = ev["snippet"]

    def on_page(page: Any) -> bool:
        return isinstance(page, int) and 1 <= page <= doc.bundle.total_pages and (
            _norm(snippet) in _norm(doc.bundle.pages[page - 1].text))
    wrong = [p for p in range(seg["page_start"], seg["page_end"] + 1) if not on_page(p)]
    if not wrong:
        return None  # the line is on every page of the segment (a repeated header): no wrong page
    ev["page"] = rng.choice(wrong)

    def persists(final):
        return any(e.get("snippet") == snippet and not on_page(e.get("page"))
                   for s in final.get("segments", []) for tc in s.get("classifications", [])
                   for e in tc.get("top_evidence", []))
    return Injected(cls, doc.bundle, persists)


def inject_evidence_other_segment(doc, gold, rng, pool):
    """Evidence of segment A quoted from a page of segment B (the page number says where it is)."""
    cls = _copy(gold)
    if len(cls["segments"]) < 2:
        return None
    a, b = rng.sample(range(len(cls["segments"])), 2)
    seg_a, seg_b = cls["segments"][a], cls["segments"][b]
    lines = page_lines(doc.bundle, range(seg_b["page_start"], seg_b["page_end"] + 1))
    ev = _primary(seg_a)["top_evidence"]
    if not lines or not ev:
        return None
    page, snippet = rng.choice(lines)
    ev[0].update(snippet=snippet, page=page)
    return Injected(cls, doc.bundle)


def _norm(text: str) -> str:
    from docverify.verify.common import normalise

    return normalise(text)


def _mutate_evidence(doc, gold, rng, pattern: re.Pattern,
                     mutate: Callable[[str, random.Random], str | None] | None):
    """Quote a line of a PRIMARY segment that ``pattern`` finds as the segment's second evidence
    item, changed by ``mutate`` (the control quotes the line unchanged)."""
    cls = _copy(gold)
    options = []
    for seg in cls["segments"]:
        for page, line in page_lines(doc.bundle, range(seg["page_start"], seg["page_end"] + 1)):
            if pattern.search(line):
                options.append((seg, page, line))
    rng.shuffle(options)
    norm_text = _norm(doc.bundle.full_text())
    for seg, page, line in options:
        changed = mutate(line, rng) if mutate else line
        if changed is None:
            continue
        c, whole = _norm(changed), _norm(line)
        # the changed line happens to be real text of the document: not an error — unless it is
        # the line itself cut short ("No evidence of X" quoted as "evidence of X"), found only there
        if mutate and c in norm_text and not (c in whole and norm_text.count(c) == norm_text.count(whole)):
            continue
        # beside the segment's first snippet (which stays): one quote among good ones is wrong
        ev = _primary(seg)["top_evidence"]
        ev[1:] = [{"snippet": changed, "page": page, "anchors_found": []}]
        return Injected(cls, doc.bundle)
    return None


def _change_number(line: str, rng: random.Random) -> str | None:
    nums = list(_NUMBER.finditer(line))
    if not nums:
        return None
    m = rng.choice(nums)
    digits = [i for i, ch in enumerate(m.group()) if ch.isdigit()]
    i = rng.choice(digits)
    old = m.group()[i]
    new = rng.choice([d for d in "0123456789" if d != old and not (i == 0 and d == "0" and len(digits) > 1)])
    value = m.group()[:i] + new + m.group()[i + 1:]
    return line[: m.start()] + value + line[m.end():]


_NEG_FLIP = {"no evidence of": "evidence of", "negative for": "positive for", "without": "with", "no": "",
             "not": "", "denies": "reports"}


_FORM_ANSWER = re.compile(r"(?:[^\w\s.,;]|\byes|\bor)\s*$", re.I)


def _flip_negation(line: str, rng: random.Random) -> str | None:
    """Drop (or reverse) the first negation that governs words after it; a form's answer
    ("Smoker: no") negates nothing in the quote."""
    m = next((m for m in _NEGATION.finditer(line)
              if re.search(r"\w{3}", line[m.end():]) and not _FORM_ANSWER.search(line[:m.start()])), None)
    if not m:
        return None
    repl = _NEG_FLIP[m.group().lower()]
    out = line[: m.start()] + repl + line[m.end():]
    return " ".join(out.split())


def _add_negation(line: str, rng: random.Random) -> str | None:
    """'evidence of X' → 'no evidence of X', 'is X' → 'is not X', 'with' → 'without'."""
    for rx, repl in ((r"\bevidence of\b", "no evidence of"), (r"\b(is|are|was|were)\b", r"\1 not"),
                     (r"\bwith\b", "without"), (r"\bshows\b", "shows no")):
        if re.search(rx, line, re.I) and not _NEGATION.search(line):
            return re.sub(rx, repl, line, count=1, flags=re.I)
    return None


def _swap_laterality(line: str, rng: random.Random) -> str | None:
    def sw(m: re.Match) -> str:
        w = m.group()
        new = "right" if w.lower() == "left" else "left"
        return new.upper() if w.isupper() else new.capitalize() if w[0].isupper() else new
    return _LATERALITY.sub(sw, line, count=1) if _LATERALITY.search(line) else None


_ADDABLE_NEGATION = re.compile(r"\b(evidence of|is|are|was|were|with|shows)\b", re.I)


def _evidence_mutation(pattern: re.Pattern, mutate: Callable[[str, random.Random], str | None] | None):
    """An injector (or, without ``mutate``, a control) quoting a line ``pattern`` finds."""
    def inject(doc, gold, rng, pool):
        return _mutate_evidence(doc, gold, rng, pattern, mutate)
    return inject


def inject_documents_merged(doc, gold, rng, pool):
    """Two adjacent documents in one segment typed as the first (the second's type unseen)."""
    cls = _copy(gold)
    if len(cls["segments"]) < 2:
        return None
    k = rng.randrange(len(cls["segments"]) - 1)
    a, b = cls["segments"][k], cls["segments"][k + 1]
    a["page_end"] = b["page_end"]
    a["segment_page_count"] = a["page_end"] - a["page_start"] + 1
    del cls["segments"][k + 1]
    for i, s in enumerate(cls["segments"], 1):
        s["segment_index"] = i
    return Injected(finish(cls), doc.bundle, _wrong_split(doc))


def inject_boundary_shift(doc, gold, rng, pool):
    """The boundary between two adjacent segments one page off (both keep at least one page)."""
    cls = _copy(gold)
    options = []
    for k in range(len(cls["segments"]) - 1):
        a, b = cls["segments"][k], cls["segments"][k + 1]
        if b["page_end"] > b["page_start"]:
            options.append((k, +1))  # a takes b's first page
        if a["page_end"] > a["page_start"]:
            options.append((k, -1))  # b takes a's last page
    if not options:
        return None
    k, d = rng.choice(options)
    a, b = cls["segments"][k], cls["segments"][k + 1]
    a["page_end"] += d
    b["page_start"] += d
    for s in (a, b):
        s["segment_page_count"] = s["page_end"] - s["page_start"] + 1
        ev = _primary(s)["top_evidence"]
        # a classifier cites evidence inside its own segment: re-pick where the moved page took it
        if any(not s["page_start"] <= e["page"] <= s["page_end"] for e in ev):
            seg = TruthSegment(s["dominant_type"], s["page_start"], s["page_end"])
            _primary(s)["top_evidence"] = pick_evidence(doc.bundle, seg)
    return Injected(finish(cls), doc.bundle, _wrong_split(doc))


def inject_routine_lab_genomic(doc, gold, rng, pool):
    """A routine-lab vendor's document called a Genomic Report."""
    cls = _copy(gold)
    seg = cls["segments"][0]
    if seg["dominant_type"] == "Genomic Report":
        return None
    _swap_type(seg, "Genomic Report")
    cls["vendor_signals"] = sorted(set(cls["vendor_signals"]) | {rng.choice(["Quest Diagnostics", "LabCorp"])})
    return Injected(finish(cls), doc.bundle)


def inject_admin_as_report(doc, gold, rng, pool):
    """An administrative document ('Other') called a report."""
    cls = _copy(gold)
    seg = next((s for s in cls["segments"] if s["dominant_type"] == OTHER), None)
    if seg is None:
        return None
    _swap_type(seg, rng.choice(["Pathology Report", "Radiology Report", "Genomic Report"]))
    return Injected(finish(cls), doc.bundle, _wrong_split(doc))


def inject_shares_not_summing(doc, gold, rng, pool):
    cls = _copy(gold)
    seg = rng.choice(cls["segments"])
    factor = rng.choice([0.8, 0.9, 1.05, 1.1])  # every share stays in [0, 1]
    for tc in seg["classifications"]:
        tc["segment_share"] = round(tc["segment_share"] * factor, 4)

    def persists(final):
        return any(abs(sum(tc.get("segment_share", 0) for tc in s.get("classifications", [])) - 1) > 0.01
                   for s in final.get("segments", []))
    return Injected(cls, doc.bundle, persists)


def inject_segment_count_mismatch(doc, gold, rng, pool):
    """The specification's own V1 example: number_of_segments says one more than the array."""
    cls = _copy(gold)
    cls["number_of_segments"] = len(cls["segments"]) + 1
    return Injected(cls, doc.bundle, lambda final: final.get("number_of_segments") != len(final.get("segments", [])))


def inject_page_count_wrong(doc, gold, rng, pool):
    cls = _copy(gold)
    seg = rng.choice(cls["segments"])
    seg["segment_page_count"] += 1

    def persists(final):
        return any(s.get("segment_page_count") != s.get("page_end", 0) - s.get("page_start", 0) + 1
                   for s in final.get("segments", []))
    return Injected(cls, doc.bundle, persists)


def inject_confidence_out_of_range(doc, gold, rng, pool):
    cls = _copy(gold)
    _primary(rng.choice(cls["segments"]))["confidence"] = rng.choice([1.2, 1.7, -0.1])
    return Injected(cls, doc.bundle)


def inject_page_out_of_bounds(doc, gold, rng, pool):
    cls = _copy(gold)
    seg = cls["segments"][-1]
    seg["page_end"] = doc.bundle.total_pages + 1
    seg["segment_page_count"] = seg["page_end"] - seg["page_start"] + 1
    return Injected(finish(cls), doc.bundle)


def inject_header_footer_evidence(doc, gold, rng, pool):
    """A page footer quoted as evidence (the document carries it: a footer is added to every page)."""
    cls = _copy(gold)
    n = doc.bundle.total_pages
    pages = [p.model_copy(update={"text": p.text + f"\n\nPage {p.page_num} of {n}"}) for p in doc.bundle.pages]
    bundle = doc.bundle.model_copy(update={"pages": pages})
    seg, ev = _evidence_slot(cls, rng) or (None, None)
    if ev is None:
        return None
    ev["snippet"] = f"Page {ev['page']} of {n}"
    return Injected(cls, bundle)


def inject_low_confidence_primary(doc, gold, rng, pool):
    cls = _copy(gold)
    _primary(rng.choice(cls["segments"]))["confidence"] = rng.choice([0.05, 0.1, 0.15])
    return Injected(cls, doc.bundle)


def inject_everything_other(doc, gold, rng, pool):
    """Every segment called 'Other' with no evidence (what a failing model may answer)."""
    cls = _copy(gold)
    if all(s["dominant_type"] == OTHER for s in cls["segments"]):
        return None
    for seg in cls["segments"]:
        if seg["dominant_type"] != OTHER:
            _swap_type(seg, OTHER, keep_evidence=False)
    return Injected(finish(cls), doc.bundle, _wrong_split(doc))


_FIRST = ["Maria", "James", "Aisha", "Wei", "Olga", "Carlos", "Fatima", "John", "Priya", "Tomas"]
_LAST = ["Alvarez", "Brennan", "Chen", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen"]


def _identity_header(rng: random.Random) -> str:
    name = f"{rng.choice(_LAST).upper()}, {rng.choice(_FIRST).upper()}"
    dob = f"{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{rng.randint(1930, 2005)}"
    return f"Patient: {name}   MRN: {rng.randint(10**7, 10**8 - 1)}   DOB: {dob}"


def _with_headers(doc: BenchDoc, headers: list[str]) -> DocumentBundle:
    pages = [p.model_copy(update={"text": f"{h}\n{p.text}"}) for p, h in zip(doc.bundle.pages, headers, strict=True)]
    return doc.bundle.model_copy(update={"pages": pages})


#: a document that names its own patient: a header of an invented one would make it two patients
_OWN_IDENTITY = re.compile(r"\b(?:DOB|D\.O\.B|date of birth|birth ?date|MRN|medical record|patient id)\b", re.I)


def control_identity(doc, gold, rng, pool):
    """Every page carries the same patient header (as a hospital PDF does)."""
    if _OWN_IDENTITY.search(doc.bundle.full_text()):
        return None
    h = _identity_header(rng)
    return Injected(_copy(gold), _with_headers(doc, [h] * doc.bundle.total_pages))


def inject_two_patients(doc, gold, rng, pool):
    """A page of another patient inside a segment (a misfiled record): that page's header names a
    different patient."""
    spans = [s for s in gold["segments"] if s["page_end"] > s["page_start"]]
    if not spans or _OWN_IDENTITY.search(doc.bundle.full_text()):
        return None
    seg = rng.choice(spans)
    h, other = _identity_header(rng), _identity_header(rng)
    odd = rng.randint(seg["page_start"], seg["page_end"])
    headers = [other if p.page_num == odd else h for p in doc.bundle.pages]
    return Injected(_copy(gold), _with_headers(doc, headers))


CATALOGUE: tuple[ErrorClass, ...] = (
    ErrorClass("segment_type_swapped", "a segment's type swapped (the whole document's, for one segment)", True,
               "V2/V3 judgment", inject_segment_type_swapped),
    ErrorClass("overall_type_swapped", "dominant_type_overall names a type no segment has", True, "V2 rules",
               inject_overall_type_swapped),
    ErrorClass("evidence_other_document", "evidence quoted from another document", True, "V4 rules",
               inject_evidence_other_document),
    ErrorClass("evidence_other_page", "evidence cites the wrong page of its segment", True, "V4 rules",
               inject_evidence_other_page),
    ErrorClass("evidence_other_segment", "evidence quoted from another segment", True, "V4 rules",
               inject_evidence_other_segment),
    ErrorClass("number_changed", "a number changed in an evidence snippet", True, "V4 rules",
               _evidence_mutation(_NUMBER, _change_number)),
    ErrorClass("negation_dropped", "a negation dropped from an evidence snippet", True, "V4 rules",
               _evidence_mutation(_NEGATION, _flip_negation)),
    ErrorClass("negation_added", "a negation added to an evidence snippet", True, "V4 rules",
               _evidence_mutation(_ADDABLE_NEGATION, _add_negation)),
    ErrorClass("laterality_swapped", "left and right swapped in an evidence snippet", True, "V4 rules",
               _evidence_mutation(_LATERALITY, _swap_laterality)),
    ErrorClass("documents_merged", "two documents merged into one segment", True, "V2 judgment",
               inject_documents_merged),
    ErrorClass("boundary_shift", "a segment boundary off by one page", True, "V2 judgment",
               inject_boundary_shift),
    ErrorClass("routine_lab_genomic", "Quest/LabCorp in vendor_signals and Genomic Report PRIMARY", True,
               "V3 rules", inject_routine_lab_genomic),
    ErrorClass("admin_as_report", "an administrative form called a report", True, "V3 rules / V2 judgment",
               inject_admin_as_report),
    ErrorClass("shares_not_summing", "segment shares that do not sum to 1", True, "V2 rules",
               inject_shares_not_summing),
    ErrorClass("segment_count_mismatch", "number_of_segments differs from the array (the spec's V1 example)",
               True, "V1 rules", inject_segment_count_mismatch),
    ErrorClass("page_count_wrong", "segment_page_count wrong", True, "V1 rules", inject_page_count_wrong),
    ErrorClass("confidence_out_of_range", "a confidence outside [0, 1]", True, "V1 rules",
               inject_confidence_out_of_range),
    ErrorClass("page_out_of_bounds", "a segment ending after the last page", True, "V1 rules",
               inject_page_out_of_bounds),
    ErrorClass("everything_other", "every segment called Other, with no evidence", True, "V2 judgment",
               inject_everything_other),
    ErrorClass("header_footer_evidence", "a page footer quoted as evidence (spec: MINOR, accepted)", False,
               "V3 rules", inject_header_footer_evidence),
    ErrorClass("low_confidence_primary", "a PRIMARY with confidence ≤ 0.15 (beyond the spec)", False,
               "policy", inject_low_confidence_primary),
    ErrorClass("two_patients", "a page of another patient inside a segment (beyond the spec)", False,
               "policy", inject_two_patients),
)
BY_NAME = {e.name: e for e in CATALOGUE}

#: Correct classifications that must be accepted (besides the gold ones).
CONTROLS: tuple[ErrorClass, ...] = (
    ErrorClass("control_number", "evidence holding a number, quoted faithfully", False, "-", _evidence_mutation(_NUMBER, None)),
    ErrorClass("control_negation", "evidence holding a negation, quoted faithfully", False, "-", _evidence_mutation(_NEGATION, None)),
    ErrorClass("control_laterality", "evidence holding left/right, quoted faithfully", False, "-",
               _evidence_mutation(_LATERALITY, None)),
    ErrorClass("control_identity", "every page headed by the same patient's name, MRN and DOB", False, "-",
               control_identity),
)


CONTROL_TITLES = {c.name: c.title for c in CONTROLS}


# --------------------------------------------------------------------------- running


@dataclass
class CaseResult:
    doc_id: str
    kind: str
    final_decision: str
    final_rule: int | None
    codes: list[str]
    caught: bool
    flagged: bool
    llm_calls: int


def _flagged(result) -> bool:
    return any(a.issues for a in result.attempts)


async def run_case(doc_id: str, kind: str, inj: Injected, judge: Judge, **verify_kw: Any) -> CaseResult:
    """Verify one (possibly erroneous) classification through :func:`docverify.pipeline.document.verify_document`."""
    from docverify.pipeline.document import verify_document

    usage = Usage()
    result = await verify_document(inj.bundle, inj.classification, judge, usage=usage, contain_faults=True,
                                   **verify_kw)
    accepted = result.final_decision == "AUTO_ACCEPT"
    final = result.final_classification if isinstance(result.final_classification, dict) else {}
    caught = not accepted or not inj.persists(final)
    codes = sorted({i.code for a in result.attempts for i in a.issues})
    return CaseResult(doc_id, kind, result.final_decision, result.final_rule, codes, caught, _flagged(result),
                      usage.llm_calls)


def build_cases(docs: list[BenchDoc], seed: int, classes: Iterable[ErrorClass] = CATALOGUE + CONTROLS,
                ) -> list[tuple[BenchDoc, str, Injected]]:
    """Every document's gold classification and, per error class and control, one injected copy
    where the class applies. Seeded per document and class (adding a class changes no other case)."""
    import zlib

    cases = []
    for doc in docs:
        gold = gold_classification(doc)
        cases.append((doc, "gold", Injected(gold, doc.bundle)))
        for ec in classes:
            rng = random.Random(zlib.crc32(f"{seed}:{doc.doc_id}:{ec.name}".encode()))
            inj = ec.inject(doc, gold, rng, docs)
            if inj is not None:
                cases.append((doc, ec.name, inj))
    return cases


async def run_cases(cases: list[tuple[BenchDoc, str, Injected]], judge: Judge, concurrency: int = 8,
                    **verify_kw: Any) -> list[CaseResult]:
    sem = asyncio.Semaphore(concurrency)

    async def one(doc, kind, inj):
        async with sem:
            return await run_case(doc.doc_id, kind, inj, judge, **verify_kw)

    return list(await asyncio.gather(*(one(*c) for c in cases)))


@dataclass
class ClassFigures:
    name: str
    title: str
    required: bool
    n: int
    caught: int
    flagged: int
    llm_calls: int
    missed: list[str]
    escalated: int = 0

    @property
    def rate(self) -> float | None:
        return self.caught / self.n if self.n else None


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Per class: cases, caught, flagged, LLM calls, the documents missed; gold and controls:
    false alarms (escalated) and the codes that raised them."""
    from collections import Counter

    by_kind: dict[str, list[CaseResult]] = {}
    for r in results:
        by_kind.setdefault(r.kind, []).append(r)
    classes = []
    for ec in CATALOGUE:
        rs = by_kind.get(ec.name, [])
        classes.append(ClassFigures(ec.name, ec.title, ec.required, len(rs), sum(r.caught for r in rs),
                                    sum(r.flagged for r in rs), sum(r.llm_calls for r in rs),
                                    sorted(r.doc_id for r in rs if not r.caught),
                                    sum(r.final_decision != "AUTO_ACCEPT" for r in rs)))
    correct = {}
    for kind in ("gold",) + tuple(c.name for c in CONTROLS):
        rs = by_kind.get(kind, [])
        alarms = [r for r in rs if r.final_decision != "AUTO_ACCEPT"]
        correct[kind] = {
            "n": len(rs), "false_alarms": len(alarms), "llm_calls": sum(r.llm_calls for r in rs),
            "codes": Counter(c for r in alarms for c in r.codes),
            "docs": sorted(r.doc_id for r in alarms),
        }
    req = [c for c in classes if c.required]
    total_req = sum(c.n for c in req)
    return {
        "classes": classes,
        "correct": correct,
        "required_caught": sum(c.caught for c in req) / total_req if total_req else None,
        "required_n": total_req,
        "min_required_rate": min((c.rate for c in req if c.n and c.rate is not None), default=None),
    }
