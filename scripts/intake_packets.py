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

**Scanned forms**: ``ocr_pages`` maps ``(packet id, form record id, real page index)`` to what OCR read on a
rendering of that page (:class:`Scan`: its text and the OCR's confidence); that page of that packet takes the
text, carries the confidence as ``Page.ocr_confidence`` (as the local PDF parser records it on a page it OCR'd)
and is marked ``ocr``. A scan is of one packet's pages: the same form page in another packet keeps its text layer. The
packets' structure never depends on ``ocr_pages`` (the same seed gives the same packets, documents, page
cuts and positions with and without it; only the texts of the OCR'd pages differ).

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

from docverify.domain.models import DocumentBundle  # noqa: E402
from docverify.reporting.labelled_sample import PAGE_BREAK, text_page  # noqa: E402

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


#: a scanned form page: ``(packet id, form record id, real page index)``
ScanKey = tuple[str, str, int]


@dataclass(frozen=True)
class Scan:
    """What the local OCR read on a scanned page: its text, and its confidence (the length-weighted mean score of
    the lines kept, :attr:`docverify.layout.ocr.OCRPage.confidence`; 0 when it read nothing)."""

    text: str
    confidence: float


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


def _bundle(doc_id: str, pages: list[str], scans: Mapping[int, float] | None = None) -> DocumentBundle:
    """The packet's bundle; ``scans``: page number → the OCR's confidence of a page read from its image."""
    scans = scans or {}
    return DocumentBundle(doc_id=doc_id, file_path=f"corpus://intake/{doc_id}", total_pages=len(pages),
                          parser="bench:intake-packet",
                          pages=[text_page(j, t).model_copy(update={"ocr_confidence": scans.get(j)})
                                 for j, t in enumerate(pages, 1)])


def make_intake_packets(records: Iterable[Mapping[str, Any]], n: int, seed: int, *,
                        ocr_pages: Mapping[ScanKey, Scan] | None = None) -> list[IntakePacket]:
    """``n`` intake packets made of ``records`` (one part's records: its clinical texts and its
    ``forms_real`` forms, as :func:`labelled_corpus.part_records` gives them), seeded by ``seed``.
    ``ocr_pages``: ``(packet id, form record id, real page index)`` → what OCR read on a scanned form page."""
    from bench_classifier import report_part

    recs = sorted(records, key=lambda r: str(r["id"]))
    forms = [r for r in recs if is_form(r) and form_real_pages(r)]
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for r in recs:
        if r.get("proposed_doc_type") in CLINICAL_TYPES and not is_form(r) and (r.get("text") or "").strip():
            by_type.setdefault(str(r["proposed_doc_type"]), []).append(r)
    if not forms or not by_type:
        raise ValueError("intake packets need forms_real forms and clinical texts in the records")
    types = sorted(by_type)
    ocr_pages = ocr_pages or {}
    rng = random.Random(seed)
    out: list[IntakePacket] = []
    for i in range(n):
        packet_id = f"intake-{seed}-{i}"
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
        report_pages = [report_part(rng, r, by_type[t]) for t, r in reports]  # (pages, the record they are of)
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
        confidences: dict[int, float] = {}
        source_ids: list[str] = []
        for what, item in layout:
            start = len(pages) + 1
            if what == "report":
                (t, _), (texts, rid) = item
                pages += texts
                truth.append((t, start, len(pages)))
                source_ids.append(rid)
                continue
            form, real, whole, position = item
            form_texts = dict(form_real_pages(form))
            keys = [(str(form["id"]), j) for j in real]
            scans = [ocr_pages.get((packet_id, *key)) for key in keys]
            confidences.update({len(pages) + j: scan.confidence for j, scan in enumerate(scans, 1) if scan is not None})
            pages += [form_texts.get(key[1], "") if scan is None else scan.text
                      for key, scan in zip(keys, scans, strict=True)]
            ocr_keys.update(key for key, scan in zip(keys, scans, strict=True) if scan is not None)
            truth.append((OTHER, start, len(pages)))
            source_ids.append(str(form["id"]))
            placements.append(FormPlacement(str(form["id"]), str((form.get("labels") or {}).get("kind")), position,
                                            start, len(pages), tuple(real), whole, all(s is not None for s in scans)))
        out.append(IntakePacket(_bundle(packet_id, pages, confidences), truth, placements, source_ids,
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


# --------------------------------------------------------------------------- scanned forms (OCR)

#: where the OCR'd texts of rendered form pages are kept (git-ignored: ``/build/``)
OCR_CACHE = REPO / "build" / "ocr_cache"
#: a scanned page: US Letter at 200 dpi (1,700 × 2,200 pixels, the project's OCR renders PDFs at about that)
DPI = 200
PAGE_INCHES = (8.5, 11.0)
MARGIN_INCHES = 0.75
#: the font sizes tried, in points, largest first: a page is drawn at the largest whose lines fit
FONT_POINTS = (10.0, 9.0, 8.0, 7.0)
#: a common sans-serif TrueType font (Debian's fonts-dejavu-core); Pillow's own default font without it
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
              "/usr/share/fonts/dejavu/DejaVuSans.ttf")


def font_name() -> str:
    """The font scanned pages are drawn with (for the report's meta)."""
    path = next((p for p in FONT_PATHS if pathlib.Path(p).is_file()), None)
    return pathlib.Path(path).stem if path else "Pillow default font (no TrueType font found)"


def _font(points: float):
    from PIL import ImageFont

    px = round(points / 72 * DPI)
    path = next((p for p in FONT_PATHS if pathlib.Path(p).is_file()), None)
    return ImageFont.truetype(path, px) if path else ImageFont.load_default(px)


def _wrap(text: str, font, width: int) -> list[str]:
    """The text's lines, each wrapped at spaces to ``width`` pixels (a word longer than the line is cut)."""
    lines: list[str] = []
    for raw in text.splitlines():
        words = raw.split()
        if not words:
            lines.append("")
            continue
        line = ""
        for w in words:
            cand = f"{line} {w}" if line else w
            if font.getlength(cand) <= width:
                line = cand
                continue
            if line:
                lines.append(line)
            while font.getlength(w) > width:  # a very long token: cut it
                k = max(1, int(len(w) * width / font.getlength(w)))
                lines.append(w[:k])
                w = w[k:]
            line = w
        lines.append(line)
    return lines


def render_page(text: str):
    """A page image (Pillow, RGB) of ``text`` as a scanner sees a printed page: black text on white, Letter
    at :data:`DPI`, margins of :data:`MARGIN_INCHES`; the largest of :data:`FONT_POINTS` whose wrapped lines
    fit the page (at the smallest, lines beyond the page's foot are lost, as on paper)."""
    from PIL import Image, ImageDraw

    w, h = (round(x * DPI) for x in PAGE_INCHES)
    margin = round(MARGIN_INCHES * DPI)
    for points in FONT_POINTS:
        font = _font(points)
        step = round(points / 72 * DPI * 1.3)
        lines = _wrap(text, font, w - 2 * margin)
        if len(lines) * step <= h - 2 * margin:
            break
    image = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(image)
    y = margin
    for line in lines:
        if y + step > h - margin:
            break
        if line:
            draw.text((margin, y), line, fill="black", font=font)
        y += step
    return image


def ocr_input(text: str):
    """The image the project's OCR reads for a scanned page of ``text``: the :func:`render_page` scan, scaled
    as the local PDF parser renders a scanned page (longer side :data:`docverify.layout.ocr.TARGET_PX`)."""
    from PIL import Image

    from docverify.layout.ocr import TARGET_PX

    image = render_page(text)
    scale = TARGET_PX / max(image.size)
    return image.resize((round(image.size[0] * scale), round(image.size[1] * scale)), Image.Resampling.LANCZOS)


def ocr_page(text: str, cache: pathlib.Path = OCR_CACHE) -> Scan:
    """``text`` rendered as a scanned page (:func:`ocr_input`) and read back by the project's local OCR
    (:func:`docverify.layout.ocr.read_image`): its text and confidence, cached in ``cache/<sha256 of the OCR's
    settings and the image read>.json`` (another engine, version or setting reads the page again)."""
    import hashlib
    import json

    import numpy as np

    from docverify.layout.ocr import engine_id

    image = ocr_input(text)
    digest = hashlib.sha256(f"{engine_id()}|{image.size}|{image.mode}|".encode() + image.tobytes()).hexdigest()
    path = cache / f"{digest}.json"
    if path.is_file():
        kept = json.loads(path.read_text(encoding="utf-8"))
        return Scan(kept["text"], float(kept["confidence"]))
    from docverify.layout.ocr import read_image

    read = read_image(np.asarray(image))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"text": read.text, "confidence": read.confidence}), encoding="utf-8")
    tmp.replace(path)
    return Scan(read.text, read.confidence)


def ocr_sample(packets: Iterable[IntakePacket], k: int, seed: int) -> list[ScanKey]:
    """At most ``k`` form pages to scan: the packets in a seeded order, every form page of a packet taken
    while it fits, so whole packets arrive scanned. A scan is of one packet: a form page that also sits in
    another packet keeps its text layer there (one scanned page does not recur across the part)."""
    order = list(packets)
    random.Random(seed).shuffle(order)
    chosen: list[ScanKey] = []
    for p in order:
        keys = [(p.doc_id, rid, j) for rid, j in form_pages_used([p])]
        if len(chosen) + len(keys) <= k:
            chosen += keys
        if len(chosen) >= k:
            break
    return chosen


def ocr_pages_for(records: Iterable[Mapping[str, Any]], keys: Iterable[ScanKey],
                  cache: pathlib.Path = OCR_CACHE) -> dict[ScanKey, Scan]:
    """``(packet id, form record id, real page index)`` → what OCR read on that page (:func:`ocr_page`; a page
    scanned in two packets is OCR'd once: the second takes the cached reading)."""
    by_id = {str(r["id"]): r for r in records}
    out: dict[ScanKey, Scan] = {}
    for pid, rid, j in keys:
        text = dict(form_real_pages(by_id[rid])).get(j)
        if text is not None:
            out[(pid, rid, j)] = ocr_page(text, cache)
    return out


# --------------------------------------------------------------------------- split scores

Span = tuple[str, int, int]


def merge_adjacent_others(spans: Iterable[Span]) -> list[Span]:
    """Adjacent Other segments as one (two forms in a row: the headline reading, see :func:`split_scores`)."""
    out: list[Span] = []
    for t, a, b in sorted(spans, key=lambda s: (s[1], s[2])):
        if out and t == OTHER and out[-1][0] == OTHER and out[-1][2] + 1 == a:
            out[-1] = (OTHER, out[-1][1], b)
        else:
            out.append((t, a, b))
    return out


def boundaries(spans: Iterable[Span]) -> set[int]:
    """The pages where a new document starts, page 1 excluded."""
    return {a for _, a, _ in spans if a > 1}


def boundary_prf(truth: Iterable[Span], pred: Iterable[Span]) -> tuple[float, float, float]:
    """Boundary precision, recall and F1 (DocSplit's partial credit): a boundary is right when the predicted
    split starts a document on the same page. With no predicted (true) boundary, precision (recall) is 1 when
    there is no true (predicted) one either, else 0."""
    t, p = boundaries(truth), boundaries(pred)
    hit = len(t & p)
    precision = hit / len(p) if p else float(not t)
    recall = hit / len(t) if t else float(not p)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _entropy(counts: Iterable[int], n: int) -> float:
    import math

    return -sum(c / n * math.log(c / n) for c in counts if c)


def v_measure(truth: Iterable[Span], pred: Iterable[Span], pages: int) -> float:
    """V-measure (Rosenberg & Hirschberg 2007) of the pages' clustering into documents, types ignored: the
    harmonic mean of homogeneity (each predicted document holds one true one) and completeness (each true
    document lies in one predicted one). A page no predicted segment covers is a cluster of its own."""
    from collections import Counter

    def labels(spans: Iterable[Span]) -> list[int]:
        lab = [-p for p in range(1, pages + 1)]  # uncovered pages: clusters of their own
        for k, (_, a, b) in enumerate(spans):
            for p in range(max(1, a), min(pages, b) + 1):
                lab[p - 1] = k
        return lab

    c, k = labels(truth), labels(pred)
    n = len(c)
    if not n:
        return 1.0
    h_c, h_k = _entropy(Counter(c).values(), n), _entropy(Counter(k).values(), n)
    joint = Counter(zip(c, k, strict=True))
    h_ck = _entropy(joint.values(), n) - h_k  # H(C|K)
    h_kc = _entropy(joint.values(), n) - h_c  # H(K|C)
    hom = 1.0 if h_c == 0 else 1 - h_ck / h_c
    com = 1.0 if h_k == 0 else 1 - h_kc / h_k
    return 2 * hom * com / (hom + com) if hom + com else 0.0


def split_scores(truth: list[Span], pred: list[Span], pages: int) -> dict[str, float | bool]:
    """One packet's split scores. ``exact``: the same segments, types and page ranges, every form its own
    segment; ``exact_merged`` (the headline): the same after adjacent Other segments are merged on both
    sides — two different forms in a row read as one Other segment are not an error that matters (nothing
    clinical is mis-filed, and a blank form seldom says where it ends). Boundary P/R/F1 and V-measure are
    scored on the merged reading too."""
    t, p = merge_adjacent_others(truth), merge_adjacent_others(pred)
    precision, recall, f1 = boundary_prf(t, p)
    return {"exact": sorted(pred, key=lambda s: (s[1], s[2])) == truth, "exact_merged": p == t,
            "boundary_precision": precision, "boundary_recall": recall, "boundary_f1": f1,
            "v_measure": v_measure(t, p, pages)}


def form_found(form: FormPlacement, truth: list[Span], pred: list[Span]) -> bool:
    """The form's run of Other pages (the form with any form next to it) is a predicted Other segment of the
    same pages — it was neither absorbed into a report nor cut, nor did it absorb a report page."""
    run = next(s for s in merge_adjacent_others(truth) if s[1] <= form.page_start <= s[2])
    return run in merge_adjacent_others(pred)
