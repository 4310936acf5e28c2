"""Readable renderings of an SME packet: a self-contained HTML page (beside the packet JSON) and
Markdown (the body of the Airflow human-in-the-loop task).

HTML: document info, then the document as the clinician's screen shows it (the same rendering,
:func:`docverify.sme.document_view.document_html`: every page once, fit to the window, the
classification drawn on the pages, each finding on its page in a clinician's words with its text
and keywords boxed; ADR 0051), decision, the issues BLOCKER → MAJOR → MINOR in the spec's format,
each with the evidence it refers to, the page text around it (2 paragraphs before, 3 after) and a
link to its page, the history, the primary classification (segments table, mixture). Everything
from the packet or the document is escaped; page images are data URIs. No script, no external
resource.

The markup is in ``include/templates/`` (``sme_packet.html.j2`` with ``_macros.html.j2`` and
``sme_packet.css``; ``sme_packet.md.j2``), rendered by :func:`docverify.domain.templating.render`: this
module reads the packet, the bundle and the PDF and prepares the templates' context as plain text
(the HTML template escapes it; the Markdown one escapes through its ``md_*`` filters).

Markdown is inert: the form's Markdown is rendered in the reviewer's browser, so every value from
the packet or the document that is not inside a code block goes through one function,
:func:`md_escape` (the template's ``md_inline`` and ``md_cell`` are that function here): no image
(``![…](…)``, fetched from any host), link, autolink, raw HTML, emphasis or table cell break can
come out of a document's text, a file name or a companion classification.

A packet without a primary classification (the document could not be read) shows "What we know
about this file": its name, size in bytes, page count and the parse error's code, and the error's
message labelled as the operator's advice — never text of the document.
"""

from __future__ import annotations

import functools
import logging
import re
import urllib.parse
from collections.abc import Mapping
from typing import TypedDict

import jinja2
import markupsafe

from docverify.domain.models import DOC_TYPES, DocumentBundle, SMEPacket
from docverify.domain.templating import environment, render
from docverify.sme.context import PdfPages, get_issue_context, load_bundle, load_pdf
from docverify.sme.document_view import document_html
from docverify.sme.facts import IMAGE_ONLY_ERRORS, decided_by, file_facts, history_lines, reason_line
from docverify.sme.jsonish import items, mapping, objects
from docverify.sme.packets import html_rel, load_packet, packet_key
from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore

log = logging.getLogger("docverify.sme")

MARKDOWN_MAX_BYTES = 20_000
_SEV_COLOUR = {"BLOCKER": "#b00020", "MAJOR": "#c35a00", "MINOR": "#5f6b00", "ERROR": "#b00020"}


_MD_SPECIAL = re.compile(r"([\\`*_\[\]()<>#!|~&:@])")


def md_escape(value: object) -> str:
    """``value`` as inert Markdown text on one line: whitespace collapsed; every character that
    opens Markdown, GFM or HTML syntax inside a line (backslash, backtick, ``* _ [ ] ( ) < > # ! | ~
    & : @``) backslash-escaped, and ``www.`` broken, so no image, link, autolink (``http://…``,
    ``www.…``, ``a@b.c``), raw HTML, entity, emphasis, code span, strikethrough, heading or table
    cell comes out of it. ``None`` is empty."""
    s = " ".join(str("" if value is None else value).split())
    return re.sub(r"(?i)\b(www)\.", r"\1\\.", _MD_SPECIAL.sub(r"\\\1", s))


@functools.cache
def _inert_markdown(base: jinja2.Environment) -> jinja2.Environment:
    """The project's environment with ``md_inline`` and ``md_cell`` replaced by :func:`md_escape`
    (an overlay: its own filters and template cache)."""
    env = base.overlay(cache_size=50)
    env.filters = {**base.filters, "md_inline": md_escape, "md_cell": md_escape}
    return env


def _operator_advice(packet: SMEPacket) -> list[tuple[str, str]]:
    """The error's message, labelled as the operator's (it says how to repair or re-send the file)."""
    message = str((packet.error or {}).get("message") or "")
    return [("For the operator", message)] if message else []


def _file_facts_markdown(packet: SMEPacket) -> str:
    rows = file_facts(packet)
    if not rows:
        return ""
    rows = [*rows, *_operator_advice(packet)]
    return "### What we know about this file\n\n" + "".join(f"- {k}: {md_escape(v)}\n" for k, v in rows) + "\n"


def _segments(cls: Mapping[str, object] | None) -> list[Mapping[str, object]]:
    return objects((cls or {}).get("segments"))


def _presence(seg: Mapping[str, object]) -> dict[object, Mapping[str, object]]:
    return {c.get("doc_type"): c for c in items(seg.get("classifications") or []) if isinstance(c, dict)}


_SEG_LOC = re.compile(r"segments\[(\d+)\](?:\s*→\s*([^.\[]+?))?(?:\.|$)")
_MIX_LOC = re.compile(r"document_mixture\s*→\s*(.+?)\s*$")


class EvidenceRef(TypedDict):
    """One evidence item of the primary classification that an issue refers to (as stored)."""

    segment_index: object
    doc_type: object
    presence_level: object
    snippet: object
    page: object
    anchors: list[object]


def issue_evidence(issue: Mapping[str, object], primary: Mapping[str, object] | None) -> list[EvidenceRef]:
    """The classifier's evidence the issue refers to: ``[{segment_index, doc_type, presence_level,
    snippet, page, anchors}]`` of the entry named by the location (segment and type, or the type
    in the mixture: every segment's entry of that type)."""
    loc = str(issue.get("location") or "")
    details = mapping(issue.get("details"))
    seg_idx, doc_type = None, None
    m = _SEG_LOC.search(loc)
    if m:
        seg_idx, doc_type = int(m.group(1)), (m.group(2) or "").strip() or None
    else:
        m = _MIX_LOC.search(loc)
        if m:
            doc_type = m.group(1).strip()
    if isinstance(detail_type := details.get("doc_type"), str):
        doc_type = doc_type or detail_type
    if seg_idx is None and doc_type is None:
        return []
    out: list[EvidenceRef] = []
    for seg in _segments(primary):
        if seg_idx is not None and seg.get("segment_index") != seg_idx:
            continue
        for t, entry in _presence(seg).items():
            if doc_type is not None and t != doc_type:
                continue
            if doc_type is None and t != seg.get("dominant_type"):
                continue
            for ev in items(entry.get("top_evidence") or []):
                if isinstance(ev, dict):
                    out.append({"segment_index": seg.get("segment_index"), "doc_type": t,
                                "presence_level": entry.get("presence_level"), "snippet": ev.get("snippet", ""),
                                "page": ev.get("page"), "anchors": list(items(ev.get("anchors_found") or []))})
    return out


# --------------------------------------------------------------------------- HTML
# The page is include/templates/sme_packet.html.j2 (macros in _macros.html.j2, the style sheet in
# sme_packet.css); the functions below prepare its context as plain text, which the template escapes.


def _classification_view(cls: Mapping[str, object] | None) -> dict[str, object] | None:
    """A classification as the page shows it: facts, one row per segment (a cell per type: the
    presence, or None), the document mixture."""
    if not isinstance(cls, dict):
        return None
    facts: list[tuple[str, object]] = [
        ("Dominant type", cls.get("dominant_type_overall")), ("Segments", cls.get("number_of_segments")),
        ("Vendor signals", ", ".join(map(str, items(cls.get("vendor_signals") or []))) or "none"),
        ("Classifier", cls.get("classifier", ""))]
    se = cls.get("self_evaluation") or {}
    if isinstance(se, dict) and (se.get("notes") or se.get("confidence")):
        facts.append(("Self-evaluation", f"{se.get('confidence', '')} — {se.get('notes', '')}"))
    segments = []
    for seg in _segments(cls):
        pres = _presence(seg)
        cells = [f"{c.get('presence_level')} · conf {c.get('confidence')} · share {c.get('segment_share')}"
                 if (c := pres.get(t)) else None for t in DOC_TYPES]
        segments.append({"index": seg.get("segment_index"), "page_start": seg.get("page_start"),
                         "page_end": seg.get("page_end"), "dominant": seg.get("dominant_type"), "cells": cells,
                         "reasoning": seg.get("reasoning")})
    mixture = [{"doc_type": m.get("doc_type"), "presence": m.get("presence_level"), "share": m.get("overall_share")}
               for m in items(cls.get("document_mixture") or []) if isinstance(m, dict)]
    return {"facts": facts, "segments": segments, "mixture": mixture}


def _production_rows(packet: SMEPacket) -> list[tuple[str, str]]:
    comp = packet.production_comparison
    if not comp:
        return []
    dom, segs = comp.get("dominant_type", {}), comp.get("segments", {})
    pres = comp.get("presence_differences") or {}
    return [("Overall", "agrees" if comp.get("agrees") else "differs"),
            ("Dominant type", f"primary {dom.get('primary')} · production {dom.get('production')}"),
            ("Segments", f"primary {segs.get('primary')} · production {segs.get('production')}"),
            ("Presence differences", "; ".join(f"{t}: {v.get('primary')} vs {v.get('production')}"
                                               for t, v in pres.items()) or "none")]


def _page_text_view(ctx: Mapping[str, object] | None) -> dict[str, object] | None:
    """The page-text window of an issue: page (None: ``why`` there is none), whether the issue's
    text was found and how, the paragraphs before, the match, the paragraphs after."""
    if not ctx:
        return None
    if ctx.get("page") is None:
        return {"page": None, "why": ctx.get("why", "")}
    return {"page": ctx["page"], "state": "found" if ctx.get("found") else "not found — showing the top of the page",
            "how": f" ({ctx.get('how')}, score {ctx.get('score')})" if ctx.get("found") else "",
            "before": ctx.get("before") or [], "match": ctx.get("match"), "after": ctx.get("after") or []}


def _pdf_page_count(pdf_bytes: bytes | None) -> int:
    if not pdf_bytes:
        return 0
    try:
        with PdfPages(pdf_bytes) as pdf:
            return pdf.page_count
    except Exception:  # not a readable PDF at all (corrupt, encrypted)
        return 0


def packet_html(packet: SMEPacket, *, bundle: DocumentBundle | None = None, pdf_bytes: bytes | None = None) -> str:
    """The packet as one self-contained HTML page. With ``bundle`` the page-text windows are
    computed (else the ones stored in the packet are used); with ``pdf_bytes`` the document's pages
    are drawn as the clinician's screen draws them (:func:`~docverify.sme.document_view.document_html`)."""
    contexts: dict[str, dict[str, object]] = {}
    for s in packet.issues_summary:
        if bundle is not None:
            contexts[s.issue_id] = dict(get_issue_context(bundle, packet, s.issue_id, highlight=False))
        else:
            contexts[s.issue_id] = dict(s.context or {})
    pdf_pages = packet.total_pages or _pdf_page_count(pdf_bytes)
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    status = packet.review_status
    info: list[tuple[str, object]] = [
        ("PDF", packet.pdf_filename), ("PDF path", packet.pdf_path),
        ("Pages", packet.total_pages or (f"{pdf_pages} (from the PDF; no text was read)" if pdf_pages
                                         else "none (the file could not be opened as a PDF)")),
        ("Bundle", packet.bundle_path or "none"), ("Run", packet.run_id), ("Packet created", packet.created_at),
        ("Review status", status)]
    if status == "reviewed":
        info += [("Reviewer", packet.reviewer), ("Reviewed at", packet.reviewed_at),
                 ("Ground truth", f"{packet.ground_truth_path} (version {packet.ground_truth_version})")]
    decision: list[tuple[str, object]] = [("Decision", packet.v5_decision), ("Rule", decided_by(packet)),
                                       ("Reason", reason_line(packet))]
    if packet.v5_explanation:  # ADR 0013: the V5 decision's explanation for the SME (one line each)
        decision.append(("Why", packet.v5_explanation.splitlines()))
    if packet.jury_votes:
        decision.append(("Jury votes", [_jury_line(v) for v in packet.jury_votes]))
    if packet.error:
        decision += [("Error", packet.error.get("error"))]
    issues = []
    for s in packet.issues_summary:
        ctx = contexts[s.issue_id]
        evidence = [{**x, "anchors": ", ".join(map(str, x["anchors"]))}
                    for x in issue_evidence(s.model_dump(mode="json"), primary)]
        issues.append({"issue_id": s.issue_id, "severity": s.severity, "code": s.code, "agent": s.agent,
                       "formatted": s.formatted, "colour": _SEV_COLOUR.get(str(s.severity), "#555"),
                       "evidence": evidence, "context": _page_text_view(ctx),
                       "page": page if isinstance(page := ctx.get("page"), int) else None})
    original = packet.original_classification
    page = render(
        "sme_packet.html.j2", doc_id=packet.doc_id, total_issues=packet.total_issues, status=status,
        info=info, decision=decision, production=_production_rows(packet), issues=issues,
        document=markupsafe.Markup(document_html(packet, bundle=bundle, pdf_bytes=pdf_bytes)),
        history="\n".join(history_lines(packet)), decided_by=decided_by(packet),
        fixed=bool(packet.attempt_history[1:]), doc_types=DOC_TYPES, primary=_classification_view(primary),
        show_original=original is not None and original != primary, original=_classification_view(original))
    return page


def write_packet_html(store: ArtifactStore | RunStore, doc_id: str, *, bundle: DocumentBundle | None = None,
                      pdf_bytes: bytes | None = None) -> tuple[str, bool]:
    """Render the stored packet of ``doc_id`` to ``sme_packets/sme_packet_<doc_id>.html``
    (bundle and PDF read from the packet's URIs unless given). Written only when the bytes
    changed. Returns (uri, written)."""
    packet = load_packet(store, doc_id)
    if bundle is None:
        try:
            bundle = load_bundle(store, packet)
        except FileNotFoundError:
            bundle = None
    # a document whose PDF opened but gave no text (a scan) is shown as page images; never read the
    # input of any other error (it may be a FIFO, a link out of the folder, a huge or corrupt file)
    if pdf_bytes is None and (bundle is not None or (packet.error or {}).get("error") in IMAGE_ONLY_ERRORS):
        pdf_bytes = load_pdf(store, packet)
    data = packet_html(packet, bundle=bundle, pdf_bytes=pdf_bytes).encode()
    rel = html_rel(packet_key(packet))
    if store.exists(rel) and store.read_bytes(rel) == data:
        return store.uri(rel), False
    store.write_bytes(rel, data)
    return store.uri(rel), True


# --------------------------------------------------------------------------- Markdown
# The form's text is include/templates/sme_packet.md.j2; the functions below prepare its context.


def packet_markdown(packet: SMEPacket, *, max_bytes: int = MARKDOWN_MAX_BYTES, html_uri: str | None = None) -> str:
    """The packet as Markdown (no HTML) for a review form: document, decision, the issues with
    their page-text windows (stored in the packet), and the primary classification as a compact
    table. At most ``max_bytes`` UTF-8 bytes: long paragraphs are clipped first, then the tail is
    cut with a note."""
    for k, para_limit in enumerate((1200, 400, 160)):
        text = _markdown(packet, para_limit, html_uri, shortened=bool(k))
        if len(text.encode()) <= max_bytes:
            return text
    note = "\n\n… (truncated to stay under the size limit: the full packet is in the HTML/JSON file)\n"
    budget = max_bytes - len(note.encode())
    cut = text.encode()[:budget].decode("utf-8", errors="ignore")
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    if cut.count("```") % 2:  # do not leave a code block open
        cut = cut[: cut.rfind("```")].rstrip()
    return cut + note


def _jury_line(v: Mapping[str, object]) -> str:
    votes = ", ".join(f"{a}={mapping(v.get('votes', {})).get(a)}" for a in ("A", "B", "C"))
    flag = f" ({v['flag_reason']})" if v.get("flag_reason") else ""
    return f"{v.get('agent', '')} {v.get('code')}: {votes} -> {v.get('final_action')}{flag}, rule {v.get('rule')}"


def _markdown(packet: SMEPacket, para_limit: int, html_uri: str | None, shortened: bool) -> str:
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    comp = packet.production_comparison
    # the page served by the api-server shows every page once with the issues marked: the form
    # keeps only the matched line of each issue, so the answer fields are a short scroll away
    compact = bool(html_uri and html_uri.startswith("/"))
    issues = []
    for s in packet.issues_summary:
        ctx = s.context or {}
        issues.append({"formatted": s.formatted, "page": ctx.get("page"),
                       "state": "matched" if ctx.get("found") else "not found; top of the page",
                       "before": ctx.get("before") or [], "match": ctx.get("match"), "after": ctx.get("after") or []})
    table = None
    if primary is not None:
        segments = []
        for seg in _segments(primary):
            pres = _presence(seg)
            segments.append({"index": seg.get("segment_index"), "page_start": seg.get("page_start"),
                             "page_end": seg.get("page_end"), "dominant": seg.get("dominant_type"),
                             "cells": [f"{pres[t].get('presence_level')} {pres[t].get('confidence')}" if t in pres
                                       else "—" for t in DOC_TYPES]})
        table = {"dominant": primary.get("dominant_type_overall"),
                 "signals": ", ".join(map(str, primary.get("vendor_signals") or [])) or "none", "segments": segments}
    text = _inert_markdown(environment()).get_template("sme_packet.md.j2").render(
        doc_id=packet.doc_id,
        title=("AUDIT of an accepted classification — " if packet.review_kind == "audit" else "")
        + (f"V5 {decided_by(packet)}" if packet.v5_rule is not None else decided_by(packet)),
        pdf_filename=packet.pdf_filename, total_pages=packet.total_pages, run_id=packet.run_id,
        decision=packet.v5_decision, reason=packet.v5_reason,
        error={"code": packet.error.get("error"), "message": packet.error.get("message", "")} if packet.error else None,
        explanation=packet.v5_explanation.splitlines(), jury=[_jury_line(v) for v in packet.jury_votes],
        production={"agrees": comp.get("agrees"), "dominant": comp.get("dominant_type", {}).get("production")}
        if comp else None,
        html_link=urllib.parse.quote(html_uri, safe="/?=&%#") if html_uri and html_uri.startswith("/") else None,
        html_file=urllib.parse.quote(html_uri, safe="/:?=&%#@+,;~") if html_uri else None,
        total_issues=packet.total_issues, issues=issues, compact=compact, para_limit=para_limit,
        match_limit=min(para_limit, 240) if compact else para_limit, history=history_lines(packet),
        primary=table, doc_types=DOC_TYPES, shortened=shortened)
    facts = _file_facts_markdown(packet)
    marker = "\n### Issues ("
    if facts and marker in text:
        text = text.replace(marker, "\n" + facts + marker[1:], 1)
    return text
