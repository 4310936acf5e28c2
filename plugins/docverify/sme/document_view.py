"""The document as the clinician's screen shows it (ADR 0036): every page of the document once, in
order, as an image fit to the width of the pane (or as its text where there is no image), the
classification drawn on the pages (a band where each segment begins: "Pages 1–5: Genomic Report
(primary)"), each finding attached to the page it concerns with the matched text outlined on the
image, findings about the whole document after the pages, and the technical facts (paths, URIs,
run ids, the attempts) folded away at the bottom.

The markup is ``include/templates/sme_document.html.j2`` (autoescaped; this module prepares plain
text). Used by the review workspace (``docverify_airflow.review_app``), which puts the answer panel
beside it. Holds PHI: served only on the reviewers' pages.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypedDict

from docverify.domain.codes import blocker_why, plain_words
from docverify.domain.models import DOC_TYPES, DocumentBundle, SMEIssueSummary, SMEPacket
from docverify.domain.templating import render
from docverify.sme.context import PdfPages, get_issue_context, png_data_uri
from docverify.sme.render import decided_by, file_facts, history_lines

log = logging.getLogger("docverify.sme")

#: pages drawn as images (a longer document shows the rest as text); the scale gives ~1,000 px wide
MAX_IMAGES = 60
SCALE = 1.6
_SEV_COLOUR = {"BLOCKER": "#b00020", "MAJOR": "#a04a00", "MINOR": "#5f6b00"}


def headline(packet: SMEPacket) -> str:
    """One sentence saying why this review is here: an audit of an accepted document, an
    escalation with its rule's reason, or a file that could not be read."""
    if packet.review_kind == "audit":
        return ("Accepted automatically; confirm or correct. This document was drawn for the nightly audit of "
                "accepted documents: check that the classification drawn on the pages is right.")
    if packet.v5_rule is None:
        err = (packet.error or {}).get("error") or "error"
        return f"This file could not be processed ({err}): classify it from its pages, or answer Cannot classify."
    return f"Escalated for your review: {packet.v5_reason}"


class SegmentBand(TypedDict):
    """A segment of the primary classification as the page band shows it."""

    start: object
    end: object
    type: object
    label: str


class PageImage(TypedDict):
    uri: str
    width: int
    height: int
    boxes: list[dict[str, str]]


def _segments(packet: SMEPacket) -> list[SegmentBand]:
    cls = packet.primary_classification if isinstance(packet.primary_classification, dict) else {}
    out: list[SegmentBand] = []
    for seg in cls.get("segments") or []:
        if not isinstance(seg, dict):
            continue
        dom = seg.get("dominant_type")
        level = next((c.get("presence_level") for c in seg.get("classifications") or []
                      if isinstance(c, dict) and c.get("doc_type") == dom), None)
        a, b = seg.get("page_start"), seg.get("page_end")
        pages = f"Page {a}" if a == b else f"Pages {a}–{b}"
        out.append({"start": a, "end": b, "type": dom,
                    "label": f"{pages}: {dom}" + (f" ({str(level).lower().replace('_', ' ')})" if level else "")})
    return out


def _finding(s: SMEIssueSummary) -> dict[str, str]:
    return {"issue_id": s.issue_id, "severity": str(s.severity), "code": s.code, "agent": s.agent,
            "plain": plain_words(s.code), "message": s.message, "colour": _SEV_COLOUR.get(str(s.severity), "#555")}


def document_view(packet: SMEPacket, *, bundle: DocumentBundle | None, pdf_bytes: bytes | None,
                  page_controls: Mapping[int, Mapping[str, object]] | None = None) -> dict[str, object]:
    """The template's context: pages (each once, in order, with its segment band, image or text and
    findings), findings about the whole document, technical rows. ``page_controls``: page → the
    answer form's type choice for it (``{"name", "current", "blank"}``), drawn beside the page and
    bound to the form ``answer`` (the workspace); None on the packet page."""
    contexts: dict[str, Mapping[str, object]] = {
        s.issue_id: (get_issue_context(bundle, packet, s.issue_id, highlight=False) if bundle is not None
                     else dict(s.context or {})) for s in packet.issues_summary}
    n_pages = packet.total_pages or (bundle.total_pages if bundle is not None else 0)
    images: dict[int, PageImage] = {}
    if pdf_bytes:
        try:
            with PdfPages(pdf_bytes, SCALE) as pdf:
                n_pages = n_pages or pdf.page_count
                for p in range(1, min(pdf.page_count, n_pages, MAX_IMAGES) + 1):
                    png, w, h = pdf.render_png(p)
                    boxes = []
                    for s in packet.issues_summary:
                        ctx = contexts[s.issue_id]
                        if ctx.get("page") == p and ctx.get("found") and pdf.has_text(p):
                            found = pdf.find_boxes(p, str(ctx.get("needle", "")))
                            boxes += [{"left": f"{100 * b['x'] / w:.3f}", "top": f"{100 * b['y'] / h:.3f}",
                                       "width": f"{100 * b['w'] / w:.3f}", "height": f"{100 * b['h'] / h:.3f}",
                                       "issue_id": s.issue_id} for b in (found["boxes"] if found else [])]
                    images[p] = {"uri": png_data_uri(png), "width": w, "height": h, "boxes": boxes}
        except Exception as exc:  # an unreadable PDF: the pages are shown as text
            log.warning("packet %s: page images left out (%s)", packet.doc_id, type(exc).__name__)
            images = {}
    segments = _segments(packet)
    starts = {s["start"]: s for s in segments}
    by_page: dict[int, list[dict[str, str]]] = {}
    whole: list[dict[str, str]] = []
    for s in packet.issues_summary:
        page = contexts[s.issue_id].get("page")
        if isinstance(page, int) and 1 <= page <= n_pages:
            by_page.setdefault(page, []).append(_finding(s))
        else:
            whole.append(_finding(s))
    pages = []
    for p in range(1, n_pages + 1):
        seg = next((s for s in segments if isinstance(s["start"], int) and isinstance(s["end"], int)
                    and s["start"] <= p <= s["end"]), None)
        text = bundle.page_text(p) if bundle is not None else None
        pages.append({"num": p, "band": starts.get(p), "type": seg["type"] if seg else None,
                      "image": images.get(p), "text": None if p in images else (text or ""),
                      "findings": by_page.get(p, []), "control": (page_controls or {}).get(p)})
    technical: list[tuple[str, object]] = [
        ("Review", packet.review_id or packet.doc_id), ("PDF", packet.pdf_filename), ("PDF path", packet.pdf_path),
        ("Bundle", packet.bundle_path or "none"), ("Run", packet.run_id), ("Packet created", packet.created_at),
        ("Decision", f"{packet.v5_decision} — {decided_by(packet)}"), ("Reason", packet.v5_reason)]
    return {"doc_id": packet.doc_id, "audit": packet.review_kind == "audit", "headline": headline(packet),
            "segments": segments, "pages": pages, "n_pages": n_pages, "whole": whole,
            "facts": file_facts(packet), "technical": technical, "history": history_lines(packet),
            "explanation": packet.v5_explanation.splitlines() if packet.v5_explanation else [],
            "blocker_why": blocker_why(), "doc_types": DOC_TYPES}


def document_html(packet: SMEPacket, *, bundle: DocumentBundle | None, pdf_bytes: bytes | None,
                  page_controls: Mapping[int, Mapping[str, object]] | None = None) -> str:
    """The document pane as HTML (a fragment: no ``<html>``; its style sheet inside)."""
    return render("sme_document.html.j2", **document_view(packet, bundle=bundle, pdf_bytes=pdf_bytes,
                                                          page_controls=page_controls))
