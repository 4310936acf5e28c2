"""The document as the clinician's screen shows it (ADR 0036, ADR 0051): every page of the document
once, in order, as an image that fits the window (its height at most the window's, with a zoom
toggle in CSS) or as its text where there is no image, the classification drawn on the pages (a
band where each segment begins: "Pages 1–5: Genomic Report (primary)"), a jump-to-page list, each
finding attached to the page it concerns with the matched text — and every keyword a trap finding
names — outlined on the image, findings about the whole document after the pages, and the
technical facts (codes, issue ids, paths, URIs, run ids, the attempts) folded away.

The lead sentence says what is wrong in the finding's own terms (the headline of its code, from
``include/rules/plain_words.json``) and names the page it is on, with a link to that page; the
BLOCKER paragraph is said once. A file with no page to look at (empty, damaged, not a PDF, locked)
says so once, with the facts known of it and the operator's advice labelled as the operator's.

The markup is ``include/templates/sme_document.html.j2`` (autoescaped; this module prepares plain
text). Used by the review workspace (``docverify_airflow.web.review``), which puts the answer panel
beside it, by the served packet page and by the packet's HTML file (:mod:`docverify.sme.render`).
Holds PHI: served only on the reviewers' pages.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypedDict

from docverify.domain.classification_view import ClassificationView, Number
from docverify.domain.codes import blocker_why, plain_words
from docverify.domain.models import DOC_TYPES, DocumentBundle, SMEIssueSummary, SMEPacket, StoredContext
from docverify.domain.resources import load_rule
from docverify.domain.templating import render
from docverify.sme.context import Box, PdfPages, get_issue_context, png_data_uri, stored_context
from docverify.sme.facts import decided_by, file_facts, history_lines, packet_has_pages, reason_line

log = logging.getLogger("docverify.sme")

#: pages drawn as images (a longer document shows the rest as text); the scale gives ~1,000 px wide
MAX_IMAGES = 60
SCALE = 1.6
_SEV_COLOUR = {"BLOCKER": "#b00020", "MAJOR": "#a04a00", "MINOR": "#5f6b00"}


def code_headline(code: str) -> str:
    """A few words saying what a finding of ``code`` is about, for a clinician (``headlines`` of
    ``include/rules/plain_words.json``); the catalogue's title, else the code, when it has none."""
    words = (load_rule("plain_words").get("headlines") or {}).get(code)
    return str(words) if words else plain_words(code).rstrip(".")


def presence_words(level: str | None) -> str:
    """A presence level in words ("content embedded in the page …"), else the level as given."""
    return str((load_rule("plain_words").get("presence") or {}).get(str(level)) or str(level).lower())


def finding_about(s: SMEIssueSummary) -> str:
    """What a finding is about, from its facts: the type and the presence the classification gives
    it, the type a second reading found, the words it names on the page ('' when none)."""
    d = s.details or {}
    parts = []
    if isinstance(d.get("doc_type"), str) and d.get("presence_level"):
        parts.append(f"The classification gives {d['doc_type']} here as {presence_words(d['presence_level'])} "
                     f"({d['presence_level']}).")
    if isinstance(d.get("read_as"), str):
        parts.append(f"Read without the classifier's answer, these pages read as {d['read_as']}.")
    words = [str(k) for k in d.get("keywords") or [] if isinstance(k, str)]
    if words:
        parts.append(f"Paperwork words on the page (each boxed): {', '.join(repr(w) for w in words)}.")
    return " ".join(parts)


def unreadable_words(packet: SMEPacket) -> str:
    """What an unreadable file's error means for a clinician (one sentence, no advice)."""
    table = load_rule("plain_words").get("unreadable") or {}
    code = packet.error["error"] if packet.error else ""
    return str(table.get(code) or table.get("_default") or "The file could not be read.")


#: the answer form's type choice of one page: its field ``name``, the ``current`` value, the ``blank`` choice
PageControl = Mapping[str, str | None]


def _page_of(ctx: StoredContext | None) -> int | None:
    return ctx["page"] if ctx else None


def _finding_pages(packet: SMEPacket, contexts: Mapping[str, StoredContext | None], n_pages: int) -> list[int]:
    """The pages the findings are on, most severe finding's first (the packet's issue order)."""
    out: list[int] = []
    for s in packet.issues_summary:
        page = _page_of(contexts.get(s.issue_id))
        if page is not None and 1 <= page <= n_pages and page not in out:
            out.append(page)
    return out


def headline(packet: SMEPacket, finding_pages: list[int] | None = None) -> str:
    """One sentence saying why this review is here: an audit of an accepted document, an
    escalation with what its most severe finding says in a clinician's words (and the page it is
    on), or a file with no page to look at."""
    if packet.review_kind == "audit":
        return ("Accepted automatically; confirm or correct. This document was drawn for the nightly audit of "
                "accepted documents: check that the classification drawn on the pages is right.")
    if packet.v5_rule is None:
        if not packet_has_pages(packet):
            words = unreadable_words(packet)
            return f"Nothing to look at: {words[:1].lower()}{words[1:]} Answer Cannot classify."
        err = (packet.error and packet.error["error"]) or "error"
        return f"No text could be read from this file ({err}): classify it from its pages, or answer Cannot classify."
    if not packet.issues_summary:
        return f"Escalated for your review: {packet.v5_reason}"
    first = packet.issues_summary[0]
    more = len({s.code for s in packet.issues_summary} - {first.code})
    where = ""
    if finding_pages:
        where = f" — page {finding_pages[0]}" if len(finding_pages) == 1 else \
            f" — pages {', '.join(map(str, finding_pages))}"
    return (f"Escalated for your review: {code_headline(first.code)}{where}"
            + (f" (and {more} other kind{'s' if more > 1 else ''} of finding)" if more else "") + ".")


class SegmentBand(TypedDict):
    """A segment of the primary classification as the page band shows it."""

    start: Number | None
    end: Number | None
    type: str | None
    label: str


class PageImage(TypedDict):
    uri: str
    width: int
    height: int
    boxes: list[dict[str, str]]


class Finding(TypedDict):
    """A finding as the page shows it (plain text; the template escapes it)."""

    issue_id: str
    severity: str
    code: str
    agent: str
    headline: str
    plain: str
    about: str
    message: str
    page: int | None
    colour: str


class PageView(TypedDict):
    num: int
    band: SegmentBand | None
    type: str | None
    image: PageImage | None
    text: str | None
    findings: list[Finding]
    control: PageControl | None


class DocumentView(TypedDict):
    """The context of ``include/templates/sme_document.html.j2``."""

    doc_id: str
    audit: bool
    headline: str
    finding_pages: list[int]
    segments: list[SegmentBand]
    n_pages: int
    whole: list[Finding]
    pages: list[PageView]
    facts: list[tuple[str, str]]
    unreadable: bool
    operator_advice: str
    technical: list[tuple[str, str]]
    history: list[str]
    explanation: list[str]
    blocker_why: str
    doc_types: tuple[str, ...]


def _segments(packet: SMEPacket) -> list[SegmentBand]:
    cls = ClassificationView.read(packet.primary_classification)
    out: list[SegmentBand] = []
    for seg in cls.segments if cls is not None else []:
        dom = seg.dominant_type
        level = next((c.presence_level for c in seg.classifications if c.doc_type == dom), None)
        a, b = seg.page_start, seg.page_end
        pages = f"Page {a}" if a == b else f"Pages {a}–{b}"
        out.append({"start": a, "end": b, "type": dom,
                    "label": f"{pages}: {dom}" + (f" ({str(level).lower().replace('_', ' ')})" if level else "")})
    return out


def _finding(s: SMEIssueSummary, page: int | None) -> Finding:
    return {"issue_id": s.issue_id, "severity": str(s.severity), "code": s.code, "agent": s.agent,
            "headline": code_headline(s.code), "plain": plain_words(s.code), "about": finding_about(s),
            "message": s.message, "page": page, "colour": _SEV_COLOUR.get(str(s.severity), "#555")}


#: an issue's page-text window (None: the packet keeps none) and the text matched on the page ("" when unknown)
_Context = tuple[StoredContext | None, str]


def _context(bundle: DocumentBundle | None, packet: SMEPacket, s: SMEIssueSummary) -> _Context:
    """The issue's window: located again in the bundle when there is one, else as the packet keeps it."""
    if bundle is None:
        return s.context, ""
    ctx = get_issue_context(bundle, packet, s.issue_id, highlight=False)
    return stored_context(ctx), ctx["needle"]


def _boxes(pdf: PdfPages, page: int, needle: str, issue_id: str, w: int, h: int) -> list[dict[str, str]]:
    found = pdf.find_boxes(page, needle) if needle else None
    boxes: list[Box] = found["boxes"] if found else []
    return [{"left": f"{100 * b['x'] / w:.3f}", "top": f"{100 * b['y'] / h:.3f}", "width": f"{100 * b['w'] / w:.3f}",
             "height": f"{100 * b['h'] / h:.3f}", "issue_id": issue_id} for b in boxes]


def _page_boxes(pdf: PdfPages, p: int, packet: SMEPacket, contexts: Mapping[str, _Context],
                w: int, h: int) -> list[dict[str, str]]:
    """The outlines on page ``p``: each finding's matched text, and every keyword a finding names
    (a trap-2 finding's paperwork words), when the page has a text layer."""
    if not pdf.has_text(p):
        return []
    out: list[dict[str, str]] = []
    for s in packet.issues_summary:
        ctx, needle = contexts[s.issue_id]
        if _page_of(ctx) != p:
            continue
        if ctx and ctx["found"]:
            out += _boxes(pdf, p, needle, s.issue_id, w, h)
        for word in (s.details or {}).get("keywords") or []:
            if isinstance(word, str):
                out += _boxes(pdf, p, word, s.issue_id, w, h)
    return list({(b["left"], b["top"], b["width"], b["height"]): b for b in out}.values())


def _images(packet: SMEPacket, pdf_bytes: bytes | None, n_pages: int,
            contexts: Mapping[str, _Context]) -> tuple[dict[int, PageImage], int]:
    """Page → its image with the outlines; and the page count (the PDF's when the packet has none)."""
    images: dict[int, PageImage] = {}
    if not pdf_bytes:
        return images, n_pages
    try:
        with PdfPages(pdf_bytes, SCALE) as pdf:
            n_pages = n_pages or pdf.page_count
            for p in range(1, min(pdf.page_count, n_pages, MAX_IMAGES) + 1):
                png, w, h = pdf.render_png(p)
                images[p] = {"uri": png_data_uri(png), "width": w, "height": h,
                             "boxes": _page_boxes(pdf, p, packet, contexts, w, h)}
    except Exception as exc:  # an unreadable PDF: the pages are shown as text
        log.warning("packet %s: page images left out (%s)", packet.doc_id, type(exc).__name__)
        images = {}
    return images, n_pages


def _pages(packet: SMEPacket, bundle: DocumentBundle | None, n_pages: int, images: Mapping[int, PageImage],
           by_page: Mapping[int, list[Finding]],
           page_controls: Mapping[int, PageControl] | None) -> list[PageView]:
    segments = _segments(packet)
    starts = {s["start"]: s for s in segments}
    pages: list[PageView] = []
    for p in range(1, n_pages + 1):
        seg = next((s for s in segments if isinstance(s["start"], int) and isinstance(s["end"], int)
                    and s["start"] <= p <= s["end"]), None)
        text = bundle.page_text(p) if bundle is not None else None
        pages.append({"num": p, "band": starts.get(p), "type": seg["type"] if seg else None,
                      "image": images.get(p), "text": None if p in images else (text or ""),
                      "findings": by_page.get(p, []), "control": (page_controls or {}).get(p)})
    return pages


def document_view(packet: SMEPacket, *, bundle: DocumentBundle | None, pdf_bytes: bytes | None,
                  page_controls: Mapping[int, PageControl] | None = None) -> DocumentView:
    """The template's context: pages (each once, in order, with its segment band, image or text and
    findings), findings about the whole document, the jump-to-page list, technical rows.
    ``page_controls``: page → the answer form's type choice for it (``{"name", "current",
    "blank"}``), drawn beside the page and bound to the form ``answer`` (the workspace); None on
    the packet page."""
    contexts = {s.issue_id: _context(bundle, packet, s) for s in packet.issues_summary}
    n_pages = packet.total_pages or (bundle.total_pages if bundle is not None else 0)
    images, n_pages = _images(packet, pdf_bytes, n_pages, contexts)
    by_page: dict[int, list[Finding]] = {}
    whole: list[Finding] = []
    page_of = {issue_id: _page_of(ctx) for issue_id, (ctx, _) in contexts.items()}
    for s in packet.issues_summary:
        page = page_of[s.issue_id]
        if page is not None and 1 <= page <= n_pages:
            by_page.setdefault(page, []).append(_finding(s, page))
        else:
            whole.append(_finding(s, None))
    finding_pages = _finding_pages(packet, {k: ctx for k, (ctx, _) in contexts.items()}, n_pages)
    technical: list[tuple[str, str]] = [
        ("Review", packet.review_id or packet.doc_id), ("PDF", packet.pdf_filename), ("PDF path", packet.pdf_path),
        ("Bundle", packet.bundle_path or "none"), ("Run", packet.run_id), ("Packet created", packet.created_at),
        ("Decision", f"{packet.v5_decision} — {decided_by(packet)}"), ("Reason", reason_line(packet))]
    unreadable = packet.v5_rule is None and not packet_has_pages(packet)
    return {"doc_id": packet.doc_id, "audit": packet.review_kind == "audit", "headline": headline(packet, finding_pages),
            "finding_pages": finding_pages, "segments": _segments(packet), "n_pages": n_pages, "whole": whole,
            "pages": _pages(packet, bundle, n_pages, images, by_page, page_controls),
            "facts": file_facts(packet), "unreadable": unreadable,
            "operator_advice": str(packet.error.get("message") or "") if packet.error else "",
            "technical": technical, "history": history_lines(packet),
            "explanation": packet.v5_explanation.splitlines() if packet.v5_explanation else [],
            "blocker_why": blocker_why() if any(str(s.severity) == "BLOCKER" for s in packet.issues_summary) else "",
            "doc_types": DOC_TYPES}


def document_html(packet: SMEPacket, *, bundle: DocumentBundle | None, pdf_bytes: bytes | None,
                  page_controls: Mapping[int, PageControl] | None = None) -> str:
    """The document pane as HTML (a fragment: no ``<html>``; its style sheet inside)."""
    return render("sme_document.html.j2", **document_view(packet, bundle=bundle, pdf_bytes=pdf_bytes,
                                                          page_controls=page_controls))
