"""Intake packets: PDFs as hospital document intake receives them — real forms before, between and
after the reports (issue 39).

:func:`make_intake_packets` joins 2–6 documents of one part of the labelled corpora into one bundle:

* **reports** — 1–4 texts of the four clinical types (Clinical Note, Pathology Report, Genomic Report,
  Radiology Report), of different types, from the part's non-form records, cut into pages as
  :func:`bench_classifier.make_hard_multidocs` cuts them (a short report is one page; else pages of
  1,500–4,000 characters, a third of them ending on a page holding only the last 80–400 characters);
* **forms** — 1–3 of the part's ``forms_real`` records (label Other, a ``kind`` each): mostly **one
  real page** of a form (a one-page form: a one-page form's page, else the form's first page, sometimes
  another of its pages), sometimes the **whole** multi-page form (its real pages, at most
  :data:`WHOLE_MAX_PAGES`). The forms of a packet are different records, so two adjacent forms are two
  documents (two Other segments).

**Position** of a form: ``first`` (before the first report), ``middle`` (between two reports) or ``last``
(after the last report) — the slot it sits in, so the second of two forms opening a packet is still
``first``: the report it touches is what makes a slot hard. Every packet has a form at the position
``POSITIONS[i % 3]`` (balanced: each position gets a third of the packets), the others (0–2 more) at
slots drawn at random. Which form goes where follows intake practice as a preference (weights, not a
rule, since a part may hold none of a kind): fax covers, requisitions, registration and claims are drawn
first; consents, releases (``roi_authorization``), questionnaires between or after the reports.

**Scanned forms**: ``ocr_pages`` maps ``(form record id, real page index)`` to the text OCR read on a
rendering of that page (:mod:`intake_ocr`); a form page found in it takes that text and is marked
``ocr``. The packets' structure never depends on ``ocr_pages`` (the same seed gives the same packets,
documents, page cuts and positions with and without it; only the texts of the OCR'd pages differ).

Seeded and deterministic. Figures and record ids only: no corpus text leaves the process.
"""

from __future__ import annotations

import pathlib
import random
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
for _p in (REPO / "plugins", REPO / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from docverify.domain.labelled_corpus import PAGE_BREAK  # noqa: E402
from docverify.domain.models import DocumentBundle, Page  # noqa: E402

OTHER = "Other"
CLINICAL_TYPES = ("Clinical Note", "Genomic Report", "Pathology Report", "Radiology Report")
POSITIONS = ("first", "middle", "last")
#: a whole form enters a packet with at most this many of its real pages (its first ones)
WHOLE_MAX_PAGES = 6
#: the share of forms entering a packet whole (when the form has two real pages or more)
WHOLE_SHARE = 0.25
#: the number of reports of a packet, drawn from this tuple (a middle slot needs two)
REPORTS = (1, 2, 2, 3, 3, 4)
#: how many forms besides the one at the packet's own position: drawn from this tuple
EXTRA_FORMS = (0, 0, 0, 1, 1, 2)
#: the preference of a form kind for a position (weight; any kind not named weighs 1)
KIND_WEIGHTS: dict[str, dict[str, float]] = {
    "first": {"fax_cover": 6, "requisition": 5, "registration": 4, "claim": 3, "questionnaire": 2},
    "middle": {"consent": 4, "roi_authorization": 4, "questionnaire": 3, "registration": 2},
    "last": {"consent": 4, "roi_authorization": 4, "claim": 3, "prescription": 3, "questionnaire": 2},
}


@dataclass(frozen=True)
class FormPlacement:
    """One form of a packet: which record, which of its real pages, where it sits."""

    record_id: str
    kind: str
    position: str  # first | middle | last
    page_start: int  # in the packet
    page_end: int
    real_pages: tuple[int, ...]  # indexes of the form's real pages used (0-based)
    whole: bool  # the whole form (its real pages), not one page of it
    ocr: bool = False  # every page of it is OCR'd text

    @property
    def one_page(self) -> bool:
        return self.page_start == self.page_end


@dataclass
class IntakePacket:
    """One intake packet: the bundle, its true segments ``(type, page_start, page_end)`` in page order
    (every document its own segment, two adjacent forms two Other segments), its forms, its records."""

    bundle: DocumentBundle
    truth: list[tuple[str, int, int]]
    forms: list[FormPlacement]
    source_ids: list[str] = field(default_factory=list)
    #: the ``(form record id, real page index)`` keys of its pages whose text is OCR'd
    ocr_keys: frozenset[tuple[str, int]] = frozenset()

    @property
    def doc_id(self) -> str:
        return self.bundle.doc_id

    @property
    def ocr(self) -> bool:
        """Some page of the packet is OCR'd text (a scanned form)."""
        return bool(self.ocr_keys)

    @property
    def positions(self) -> set[str]:
        return {f.position for f in self.forms}


def is_form(record: Mapping[str, Any]) -> bool:
    """A ``forms_real`` record (as :func:`labelled_corpus.load_forms_records` shapes it)."""
    labels = record.get("labels") or {}
    return record.get("proposed_doc_type") == OTHER and "pages_in_pdf" in labels and "kind" in labels


def form_real_pages(record: Mapping[str, Any]) -> list[tuple[int, str]]:
    """A form's real pages that hold text: ``(index of the real page, its text)``; the index counts
    every page between form feeds, empty ones too, so it names the same page whatever is skipped."""
    chunks = (record.get("text") or "").split(PAGE_BREAK)
    return [(i, c.strip()) for i, c in enumerate(chunks) if c.strip()]


def _report_pages(rng: random.Random, record: Mapping[str, Any], short: list[Mapping[str, Any]]) -> list[str]:
    """A report's pages as :func:`bench_classifier.make_hard_multidocs` cuts a clinical text."""
    from bench_classifier import HARD_PAGE_CHARS, TAIL_CHARS, _cut_after, split_pages

    text = record.get("text") or ""
    if short and rng.random() < 0.25:
        texts = [str(rng.choice(short)["text"]).strip()]
    else:
        page_chars = rng.randint(*HARD_PAGE_CHARS)
        tail = rng.randint(*TAIL_CHARS)
        if len(text) > page_chars and rng.random() < 1 / 3:
            cut = _cut_after(text, len(text) - tail)
            head, last = text[:cut], text[cut:].strip()
            texts = split_pages(head, page_chars) + ([last] if last else [])
        else:
            texts = split_pages(text, page_chars)
    return [x for x in texts if x.strip()] or [text.strip()]


def _pick_form(rng: random.Random, forms: list[Mapping[str, Any]], position: str,
               used: set[str]) -> Mapping[str, Any]:
    pool = [f for f in forms if str(f["id"]) not in used] or forms
    prefs = KIND_WEIGHTS[position]
    weights = [prefs.get(str((f.get("labels") or {}).get("kind")), 1.0) for f in pool]
    return rng.choices(pool, weights=weights, k=1)[0]


def _form_pages(rng: random.Random, form: Mapping[str, Any]) -> tuple[list[int], bool]:
    """Which real pages of ``form`` enter the packet, and whether it is the whole form."""
    real = [i for i, _ in form_real_pages(form)]
    if not real:
        return [0], False
    if len(real) >= 2 and rng.random() < WHOLE_SHARE:
        return real[:WHOLE_MAX_PAGES], True
    if len(real) == 1 or rng.random() < 0.7:
        return [real[0]], len(real) == 1
    return [rng.choice(real[1:])], False


def _bundle(doc_id: str, pages: list[str]) -> DocumentBundle:
    return DocumentBundle(doc_id=doc_id, file_path=f"corpus://intake/{doc_id}", total_pages=len(pages),
                          parser="bench:intake-packet",
                          pages=[Page(page_num=j, text=t, paragraphs=[p for p in t.split("\n\n") if p.strip()])
                                 for j, t in enumerate(pages, 1)])


def make_intake_packets(records: Iterable[Mapping[str, Any]], n: int, seed: int, *,
                        ocr_pages: Mapping[tuple[str, int], str] | None = None) -> list[IntakePacket]:
    """``n`` intake packets made of ``records`` (one part's records: its clinical texts and its
    ``forms_real`` forms, as :func:`labelled_corpus.part_records` gives them), seeded by ``seed``.
    ``ocr_pages``: ``(form record id, real page index)`` → OCR'd text for the scanned form pages."""
    from bench_classifier import SHORT_CHARS

    recs = sorted(records, key=lambda r: str(r["id"]))
    forms = [r for r in recs if is_form(r) and form_real_pages(r)]
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for r in recs:
        if r.get("proposed_doc_type") in CLINICAL_TYPES and not is_form(r) and (r.get("text") or "").strip():
            by_type.setdefault(str(r["proposed_doc_type"]), []).append(r)
    if not forms or not by_type:
        raise ValueError("intake packets need forms_real forms and clinical texts in the records")
    short = {t: [r for r in rs if len(str(r["text"]).strip()) <= SHORT_CHARS] for t, rs in by_type.items()}
    types = sorted(by_type)
    ocr_pages = ocr_pages or {}
    rng = random.Random(seed)
    out: list[IntakePacket] = []
    for i in range(n):
        own = POSITIONS[i % 3]
        k_reports = rng.choice(REPORTS)
        if own == "middle":
            k_reports = max(2, k_reports)
        k_reports = min(k_reports, len(types))
        k_forms = min(1 + rng.choice(EXTRA_FORMS), 6 - k_reports)
        chosen = rng.sample(types, k_reports)
        # slots: 0 = before the first report, j = after report j (k_reports = after the last)
        slots = [0 if own == "first" else k_reports if own == "last" else rng.randint(1, k_reports - 1)]
        slots += [rng.randint(0, k_reports) for _ in range(k_forms - 1)]
        # draw the documents in a fixed order, then lay them out
        reports = [(t, rng.choice(by_type[t])) for t in chosen]
        report_pages = [_report_pages(rng, r, short[t]) for t, r in reports]
        used: set[str] = set()
        placed: dict[int, list[tuple[Mapping[str, Any], list[int], bool, str]]] = {}
        for slot in slots:
            position = "first" if slot == 0 else "last" if slot == k_reports else "middle"
            form = _pick_form(rng, forms, position, used)
            used.add(str(form["id"]))
            real, whole = _form_pages(rng, form)
            placed.setdefault(slot, []).append((form, real, whole, position))
        # lay the documents out: the forms of slot 0, report 1, the forms of slot 1, ...
        layout: list[tuple[str, Any]] = [("form", f) for f in placed.get(0, [])]
        for j, report in enumerate(zip(reports, report_pages, strict=True), 1):
            layout.append(("report", report))
            layout += [("form", f) for f in placed.get(j, [])]
        pages: list[str] = []
        truth: list[tuple[str, int, int]] = []
        placements: list[FormPlacement] = []
        ocr_keys: set[tuple[str, int]] = set()
        source_ids: list[str] = []
        for what, item in layout:
            start = len(pages) + 1
            if what == "report":
                (t, rec), texts = item
                pages += texts
                truth.append((t, start, len(pages)))
                source_ids.append(str(rec["id"]))
                continue
            form, real, whole, position = item
            form_texts = dict(form_real_pages(form))
            keys = [(str(form["id"]), j) for j in real]
            pages += [ocr_pages[key] if key in ocr_pages else form_texts.get(key[1], "") for key in keys]
            ocr_keys.update(key for key in keys if key in ocr_pages)
            truth.append((OTHER, start, len(pages)))
            source_ids.append(str(form["id"]))
            placements.append(FormPlacement(str(form["id"]), str((form.get("labels") or {}).get("kind")), position,
                                            start, len(pages), tuple(real), whole, all(k in ocr_pages for k in keys)))
        out.append(IntakePacket(_bundle(f"intake-{seed}-{i}", pages), truth, placements, source_ids,
                                frozenset(ocr_keys)))
    return out


def form_pages_used(packets: Iterable[IntakePacket]) -> list[tuple[str, int]]:
    """The ``(form record id, real page index)`` keys of every form page in ``packets``, first use first."""
    seen: dict[tuple[str, int], None] = {}
    for p in packets:
        for f in p.forms:
            for j in f.real_pages:
                seen.setdefault((f.record_id, j), None)
    return list(seen)
