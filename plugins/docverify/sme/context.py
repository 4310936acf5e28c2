"""The page text around an issue, for the SME (spec slide 10: "2 paragraphs before + 3 after the
matched evidence location"), and the page image with the matched text highlighted.

How an issue is located (:func:`issue_targets`), first hit wins:

1. V4 evidence issues (``details`` has ``segment_pos``/``doc_type``/``evidence_index``): the
   cited snippet from the primary classification, looked for first on the page V4 found it on
   (``fix_page`` / ``found_on_pages``), then on the claimed page.
2. ``details.snippet`` / ``details.page`` (a V3 pattern hit), then the words the verifier matched
   (``vendors``, ``keywords``, ``lab_markers``, ``patterns``).
3. The ``location`` string: ``segments[<index>] → <type>[.top_evidence[<k>]]`` gives the
   evidence of that entry; ``document_mixture → <type>`` the evidence of the type's strongest entry.
4. Nothing found: the first paragraphs of the segment's (or the document's) first page, with
   ``found`` False.

Text is compared after :func:`docverify.verify.common.normalise` (case, width, dashes,
whitespace), exactly first and then fuzzily with rapidfuzz at V4's threshold
(``include/rules/evidence.json``), over the page's paragraphs joined, so a snippet that runs over
a paragraph break is still found. The window stays inside the page: at the top of a page
``before`` has fewer than 2 paragraphs, at the bottom ``after`` fewer than 3.

The highlight uses the PDF's own text layer (PDFium via pypdfium2): the same normalised search
over the page's characters gives a character range, whose text rectangles
(``FPDFText_CountRects``/``GetRect``) are mapped to pixels of the rendered page with
``FPDF_PageToDevice`` (the transform the renderer uses, so rotation and crop box agree).
No text layer on the page → no image and no boxes.

Page text is PHI: nothing here logs it.
"""

from __future__ import annotations

import base64
import ctypes
import io
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, TypedDict

from pydantic import JsonValue
from rapidfuzz import fuzz

from docverify.domain.classification_view import ClassificationView, EntryView, Number, SegmentView
from docverify.domain.models import PRESENCE_RANK, DocumentBundle, SMEIssueSummary, SMEPacket, StoredContext
from docverify.domain.resources import load_rule
from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore, as_root
from docverify.verify.common import normalise

if TYPE_CHECKING:
    from pypdfium2 import PdfPage, PdfTextPage

BEFORE = 2
AFTER = 3
DEFAULT_SCALE = 1.25  # 90 dpi: readable, ~50–120 KB per grayscale PNG page
_SEG_LOC = re.compile(r"segments\[(\d+)\](?:\s*→\s*([^.\[]+?))?(?:\.top_evidence(?:\[(\d+)\])?)?(?:\.|$)")
_MIX_LOC = re.compile(r"document_mixture\s*→\s*(.+?)\s*$")
_WORD_KEYS = ("vendors", "keywords", "lab_markers", "patterns")


# --------------------------------------------------------------------------- what this module returns


class TextWindow(TypedDict):
    """The paragraphs around a match, all inside one page."""

    before: list[str]
    match: str
    after: list[str]
    paragraph_index: int | None


class IssueLocation(TypedDict):
    """Where an issue was placed (:func:`locate_issue`): the page, its text window and how."""

    page: int | None
    before: list[str]
    match: str
    after: list[str]
    paragraph_index: int | None
    found: bool
    how: str
    score: float
    needle: str
    why: str


class Box(TypedDict):
    x: int
    y: int
    w: int
    h: int


class Highlight(TypedDict):
    """Pixel boxes of the matched text on the page rendered at ``scale``."""

    image_width: int
    image_height: int
    scale: float
    boxes: list[Box]
    how: str
    score: float


class IssueContext(IssueLocation):
    """:func:`get_issue_context`: the issue's location and, when asked and found, its highlight."""

    issue_id: str
    highlight: Highlight | None


Store = ArtifactStore | RunStore


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A text to look for and the pages to look on first (then the rest of the document)."""

    needle: str
    pages: tuple[int, ...] = ()
    why: str = ""


def _segments(primary: ClassificationView | None) -> list[SegmentView]:
    return primary.segments if primary is not None else []


def _evidence(entry: EntryView) -> list[tuple[str, Number | None]]:
    """(snippet, page) of each evidence item of ``entry`` that has a snippet."""
    return [(e.snippet, e.page) for e in entry.top_evidence if e.snippet is not None]


def _ints(*values: JsonValue) -> tuple[int, ...]:
    out: list[int] = []
    for v in values:
        for x in v if isinstance(v, list | tuple) else [v]:
            if isinstance(x, int) and not isinstance(x, bool) and x not in out:
                out.append(x)
    return tuple(out)


def _evidence_targets(entry: EntryView, seg: SegmentView, k: int | None,
                      first_pages: tuple[int, ...], why: str) -> list[Target]:
    ev = _evidence(entry)
    chosen = [ev[k]] if k is not None and 0 <= k < len(ev) else ev
    return [Target(snippet, _ints(*first_pages, page, *seg.pages()), why) for snippet, page in chosen]


def _details(issue: SMEIssueSummary) -> dict[str, JsonValue]:
    """The issue's details as stored (JSON): the verifiers' facts, of a shape per code (only they are dumped,
    not the stored page context beside them)."""
    details: dict[str, JsonValue] = issue.model_dump(mode="json", include={"details"})["details"]
    return details


def issue_targets(issue: SMEIssueSummary, primary: ClassificationView | None) -> list[Target]:
    """What to look for, in order, to place ``issue`` on a page of the document."""
    details = _details(issue)
    location = issue.location
    segs = _segments(primary)
    out: list[Target] = []
    # 1. V4: the cited evidence entry
    pos, k = details.get("segment_pos"), details.get("evidence_index")
    if isinstance(pos, int) and 0 <= pos < len(segs):
        first = _ints(details.get("fix_page"), details.get("found_on_pages") or [], details.get("claimed_page"))
        for entry in segs[pos].classifications:
            if entry.doc_type == details.get("doc_type"):
                out += _evidence_targets(entry, segs[pos], k if isinstance(k, int) else None, first, "cited evidence")
    # 2. what the verifier matched
    page_hint = _ints(details.get("page"))
    if isinstance(snippet := details.get("snippet"), str):
        out.append(Target(snippet, page_hint, "snippet"))
    for key in _WORD_KEYS:
        words = details.get(key)
        if isinstance(words, list):
            out += [Target(w, page_hint, key) for w in words if isinstance(w, str) and w.strip()]
    # 3. the location string
    m = _SEG_LOC.search(location)
    if m:
        idx, doc_type, ev_k = int(m.group(1)), (m.group(2) or "").strip(), m.group(3)
        for seg in segs:
            if seg.segment_index != idx:
                continue
            for entry in seg.classifications:
                if not doc_type or entry.doc_type == doc_type:
                    out += _evidence_targets(entry, seg, int(ev_k) if ev_k else None, (), "location")
            if not doc_type:
                out += [t for e in seg.classifications if e.doc_type == seg.dominant_type
                        for t in _evidence_targets(e, seg, None, (), "segment dominant type")]
    m = _MIX_LOC.search(location)
    if m:
        doc_type = m.group(1).strip()
        ranked = sorted(((PRESENCE_RANK.get(str(e.presence_level), 0), i, seg, e)
                         for i, seg in enumerate(segs) for e in seg.classifications if e.doc_type == doc_type),
                        key=lambda x: (-x[0], x[1]))
        for _, _, seg, entry in ranked:
            out += _evidence_targets(entry, seg, None, (), "mixture type evidence")
    seen: set[tuple[str, tuple[int, ...]]] = set()
    unique = []
    for t in out:
        if normalise(t.needle) and (t.needle, t.pages) not in seen:
            seen.add((t.needle, t.pages))
            unique.append(t)
    return unique


def fallback_page(issue: SMEIssueSummary, primary: ClassificationView | None) -> int:
    """The page shown when nothing of the issue was found: the claimed page, else the first page
    of the segment named by the location, else page 1."""
    details = _details(issue)
    for key in ("claimed_page", "page"):
        if isinstance(page := details.get(key), int) and page >= 1:
            return page
    m = _SEG_LOC.search(issue.location)
    if m:
        for seg in _segments(primary):
            if seg.segment_index == int(m.group(1)) and seg.pages():
                return seg.pages()[0]
    return 1


# --------------------------------------------------------------------------- text windows


def _cfg() -> tuple[float, int]:
    cfg = load_rule("evidence")
    return float(cfg["fuzzy_threshold"]), int(cfg["fuzzy_min_chars"])


def page_paragraphs(bundle: DocumentBundle, page_num: int) -> list[str]:
    """The page's paragraphs (``pages[].paragraphs``; a bundle without them is split on blank
    lines)."""
    for p in bundle.pages:
        if p.page_num == page_num:
            paras = p.paragraphs or [x for x in re.split(r"\n\s*\n", p.text) if x.strip()]
            return [x for x in paras if x.strip()]
    return []


def _joined(paragraphs: list[str]) -> tuple[str, list[int]]:
    """The normalised paragraphs joined by one space, and each paragraph's start offset."""
    starts, parts, pos = [], [], 0
    for p in paragraphs:
        n = normalise(p)
        starts.append(pos)
        parts.append(n)
        pos += len(n) + 1
    return " ".join(parts), starts


def _para_at(starts: list[int], offset: int) -> int:
    i = 0
    for j, s in enumerate(starts):
        if s <= offset:
            i = j
    return i


def find_in_paragraphs(paragraphs: list[str], needle: str) -> tuple[int, int, str, float] | None:
    """(first paragraph, last paragraph, "exact" | "fuzzy", score) of ``needle`` in the
    paragraphs, or None."""
    threshold, min_chars = _cfg()
    n = normalise(needle)
    if not n or not paragraphs:
        return None
    joined, starts = _joined(paragraphs)
    at = joined.find(n)
    if at >= 0:
        return _para_at(starts, at), _para_at(starts, at + len(n) - 1), "exact", 100.0
    if len(n) < min_chars:
        return None
    al = fuzz.partial_ratio_alignment(n, joined, score_cutoff=threshold)
    if al is None or al.score < threshold:
        return None
    return _para_at(starts, al.dest_start), _para_at(starts, max(al.dest_start, al.dest_end - 1)), "fuzzy", round(
        al.score, 1)


def window(paragraphs: list[str], first: int, last: int) -> TextWindow:
    """``before`` (≤ 2 paragraphs), ``match`` (paragraphs first..last), ``after`` (≤ 3), all
    inside the page."""
    return {"before": paragraphs[max(0, first - BEFORE):first],
            "match": "\n\n".join(paragraphs[first:last + 1]),
            "after": paragraphs[last + 1:last + 1 + AFTER],
            "paragraph_index": first}


def named_page(issue: SMEIssueSummary) -> int | None:
    """The first page a finding about pages names (``details["pages"]``: a boundary, a seam, a run of pages read
    as another type, an overlap, pages of two patients), when it quotes no text of its own (no snippet, no cited
    evidence): that page is where to look, not the segment's evidence elsewhere."""
    details = _details(issue)
    pages = details.get("pages")
    if "snippet" in details or "segment_pos" in details or not isinstance(pages, list) or not pages:
        return None
    first = pages[0]
    return first if isinstance(first, int) and not isinstance(first, bool) and first >= 1 else None


def locate_issue(bundle: DocumentBundle, issue: SMEIssueSummary,
                 primary: ClassificationView | None) -> IssueLocation:
    """The text window of one issue: page, before, match, after, found, how, score, needle,
    why (which rule of the module docstring placed it)."""
    all_pages = [p.page_num for p in bundle.pages]
    named = named_page(issue)
    if named in all_pages and (paras := page_paragraphs(bundle, named)):
        return {"page": named, **window(paras, 0, 0), "found": True, "how": "page", "score": 100.0, "needle": "",
                "why": "the page the finding names (its first page)"}
    for target in issue_targets(issue, primary):
        order = [p for p in target.pages if p in all_pages] + [p for p in all_pages if p not in target.pages]
        for page in order:
            paras = page_paragraphs(bundle, page)
            hit = find_in_paragraphs(paras, target.needle)
            if hit:
                first, last, how, score = hit
                return {"page": page, **window(paras, first, last), "found": True, "how": how, "score": score,
                        "needle": target.needle, "why": target.why}
    page = fallback_page(issue, primary)
    if page not in all_pages and all_pages:
        page = all_pages[0]
    paras = page_paragraphs(bundle, page)
    base: TextWindow = window(paras, 0, 0) if paras else {"before": [], "match": "", "after": [],
                                                           "paragraph_index": None}
    return {"page": page if paras else None, **base, "found": False, "how": "not_found" if paras else "no_text",
            "score": 0.0, "needle": "", "why": "nothing of the issue was found in the page text"}


# --------------------------------------------------------------------------- PDF: image and boxes


def _png(gray: bytes, width: int, height: int, stride: int) -> bytes:
    """A grayscale 8-bit PNG (Pillow) from raw rows of ``stride`` bytes. Level 6: measured on a
    sample page at scale 1.5, 9 ms and 54 KB against 61 ms and 52 KB at level 9 (and 45 ms / 47 KB
    for the hand-written encoder this replaced)."""
    from PIL import Image

    out = io.BytesIO()
    Image.frombuffer("L", (width, height), gray, "raw", "L", stride, 1).save(out, "PNG", compress_level=6)
    return out.getvalue()


def _norm_char(c: str) -> str:
    if c == "\ufffe":  # PDFium's line-break hyphen
        return "-"
    if c == "\u00ad":  # soft hyphen: normalise() drops it
        return ""
    if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") or c.isspace():
        return " "
    return normalise(c)


class PdfPages:
    """One open PDF for the packet's pages: text-layer checks, page PNGs, highlight boxes.

    Use as a context manager. PDFium is not thread-safe: every call holds the parser's lock.
    """

    def __init__(self, pdf_bytes: bytes, scale: float = DEFAULT_SCALE):
        import pypdfium2 as pdfium

        from docverify.layout.local_pdf import PDFIUM_LOCK

        self._lock = PDFIUM_LOCK
        self.scale = scale
        with self._lock:
            self._doc = pdfium.PdfDocument(pdf_bytes)
            self.page_count = len(self._doc)
        self._text: dict[int, tuple[tuple[PdfPage, PdfTextPage], str, list[int]]] = {}

    def __enter__(self) -> PdfPages:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for (page, tp), _, _ in self._text.values():
                tp.close()
                page.close()
            self._text.clear()
            self._doc.close()

    def _page_text(self, page_num: int) -> tuple[tuple[PdfPage, PdfTextPage], str, list[int]] | None:
        """((page, textpage), normalised text, source char index of each normalised char)."""
        if not 1 <= page_num <= self.page_count:
            return None
        if page_num not in self._text:
            import pypdfium2.raw as raw

            page = self._doc[page_num - 1]
            tp = page.get_textpage()
            out, src, space = [], [], True
            for i in range(tp.count_chars()):
                for ch in _norm_char(chr(raw.FPDFText_GetUnicode(tp, i) or 32)):
                    if ch == " ":
                        if not space:
                            out.append(" ")
                            src.append(i)
                        space = True
                    else:
                        out.append(ch)
                        src.append(i)
                        space = False
            self._text[page_num] = ((page, tp), "".join(out), src)
        return self._text[page_num]

    def has_text(self, page_num: int) -> bool:
        with self._lock:
            entry = self._page_text(page_num)
            return bool(entry and entry[1].strip())

    def size(self, page_num: int) -> tuple[int, int]:
        """Pixel size of the rendered page (what :meth:`render_png` produces)."""
        with self._lock:
            page = self._doc[page_num - 1]
            return math.ceil(page.get_width() * self.scale), math.ceil(page.get_height() * self.scale)

    def render_png(self, page_num: int) -> tuple[bytes, int, int]:
        """(PNG bytes, width, height) of the page in grayscale at ``scale``."""
        with self._lock:
            page = self._doc[page_num - 1]
            bitmap = page.render(scale=self.scale, grayscale=True)
            try:
                data = bytes(bitmap.buffer)
                width, height, stride = bitmap.width, bitmap.height, bitmap.stride
            finally:
                bitmap.close()
        return _png(data, width, height, stride), width, height

    def find_boxes(self, page_num: int, needle: str) -> Highlight | None:
        """Pixel boxes ``{x, y, w, h}`` of ``needle`` on the rendered page, or None (no text layer
        on the page, or not found)."""
        import pypdfium2.raw as raw

        threshold, min_chars = _cfg()
        n = normalise(needle)
        with self._lock:
            entry = self._page_text(page_num)
            if not entry or not n:
                return None
            (page, tp), text, src = entry
            at, how, score = text.find(n), "exact", 100.0
            if at >= 0:
                start, end = at, at + len(n) - 1
            elif len(n) >= min_chars:
                al = fuzz.partial_ratio_alignment(n, text, score_cutoff=threshold)
                if al is None or al.score < threshold or al.dest_end <= al.dest_start:
                    return None
                start, end, how, score = al.dest_start, al.dest_end - 1, "fuzzy", round(al.score, 1)
            else:
                return None
            first, last = src[start], src[end]
            width, height = math.ceil(page.get_width() * self.scale), math.ceil(page.get_height() * self.scale)
            pos = (0, 0, width, height, 0)
            boxes: list[Box] = []
            for k in range(tp.count_rects(first, last - first + 1)):
                left, bottom, right, top = tp.get_rect(k)
                xs, ys = [], []
                for px, py in ((left, top), (right, bottom)):
                    dx, dy = ctypes.c_int(), ctypes.c_int()
                    raw.FPDF_PageToDevice(page, *pos, px, py, dx, dy)
                    xs.append(dx.value)
                    ys.append(dy.value)
                x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
                if x1 > x0 and y1 > y0:
                    boxes.append({"x": x0, "y": y0, "w": x1 - x0, "h": y1 - y0})
        if not boxes:
            return None
        return {"image_width": width, "image_height": height, "scale": self.scale, "boxes": boxes,
                "how": how, "score": score}


# --------------------------------------------------------------------------- public


def read_uri(store: Store | None, uri: str) -> bytes:
    """Bytes behind a URI the pipeline wrote (``file://…`` / ``gs://…``): through ``store`` when
    the URI is under its root, else through :func:`docverify.storage.store.as_root`."""
    if store is not None:
        root_uri = store.uri("").rstrip("/")
        if uri.startswith(root_uri + "/"):
            return store.read_bytes(uri[len(root_uri) + 1:])
    return as_root(uri).read_bytes()


def load_bundle(store: Store | None, packet: SMEPacket) -> DocumentBundle | None:
    """The packet's bundle, or None when the packet has no bundle (a parse error)."""
    path = packet.bundle_path
    if not path:
        return None
    try:
        return DocumentBundle.model_validate(json.loads(read_uri(store, path)))
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"the bundle of packet {packet.doc_id!r} is missing at {path}: re-run the nightly DAG "
            f"for its date (the bundle is re-made from the PDF)") from exc


def load_pdf(store: Store | None, packet: SMEPacket) -> bytes | None:
    """The packet's PDF bytes, or None when they cannot be read (moved, or no access)."""
    path = packet.pdf_path
    if not path:
        return None
    try:
        return read_uri(store, path)
    except (OSError, ValueError):
        return None


def _issue(packet: SMEPacket, issue_id: str) -> SMEIssueSummary:
    for s in packet.issues_summary:
        if s.issue_id == issue_id:
            return s
    known = ", ".join(sorted(s.issue_id for s in packet.issues_summary)) or "none"
    raise KeyError(f"packet {packet.doc_id!r} has no issue {issue_id!r} (its issues: {known})")


def get_issue_context(source: Store | DocumentBundle | None, packet: SMEPacket, issue_id: str, *,
                      pdf_bytes: bytes | None = None, highlight: bool = True,
                      scale: float = DEFAULT_SCALE) -> IssueContext:
    """The page text around issue ``issue_id`` of ``packet``.

    ``source`` is an :class:`~docverify.storage.store.ArtifactStore` (the bundle and the PDF are read
    from the packet's URIs) or a :class:`DocumentBundle` (then pass ``pdf_bytes`` for boxes).

    Returns ``{issue_id, page, before: list[str], match: str, after: list[str], found, how,
    score, needle, why, paragraph_index, highlight}`` where ``highlight`` is None or
    ``{image_width, image_height, scale, boxes: [{x, y, w, h}], how, score}`` in pixels of the
    page rendered at ``scale`` (:meth:`PdfPages.render_png`).
    """
    issue = _issue(packet, issue_id)
    bundle: DocumentBundle | None
    store: Store | None
    if isinstance(source, DocumentBundle):
        bundle, store = source, None
    else:
        store = source
        bundle = load_bundle(store, packet)
    if bundle is None:
        return {"issue_id": issue_id, "page": None, "before": [], "match": "", "after": [], "found": False,
                "how": "no_bundle", "score": 0.0, "needle": "", "why": "the document has no page text (see the error)",
                "paragraph_index": None, "highlight": None}
    primary = ClassificationView.read(packet.primary_classification)
    ctx: IssueContext = {"issue_id": issue_id, **locate_issue(bundle, issue, primary), "highlight": None}
    if highlight and ctx["found"] and ctx["page"] is not None:  # found: on a page
        if pdf_bytes is None and store is not None:
            pdf_bytes = load_pdf(store, packet)
        if pdf_bytes:
            try:
                with PdfPages(pdf_bytes, scale) as pdf:
                    ctx["highlight"] = pdf.find_boxes(ctx["page"], ctx["needle"])
            except Exception:  # a PDF that no longer opens: the text window is still shown
                ctx["highlight"] = None
    return ctx


def stored_context(ctx: IssueLocation) -> StoredContext:
    """The part of a context kept in the packet JSON (no pixel boxes: they belong to a rendering)."""
    return {"page": ctx["page"], "before": ctx["before"], "match": ctx["match"], "after": ctx["after"],
            "found": ctx["found"], "how": ctx["how"], "score": ctx["score"], "why": ctx["why"],
            "paragraph_index": ctx["paragraph_index"]}


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
