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
from typing import NotRequired, TypedDict

import jinja2
import markupsafe

from docverify.domain.classification_view import ClassificationView, EntryView, Number, SegmentView
from docverify.domain.models import (
    DOC_TYPES,
    DocumentBundle,
    SegmentShape,
    SMEIssueSummary,
    SMEPacket,
    StoredContext,
)
from docverify.domain.templating import environment, render
from docverify.sme.context import PdfPages, get_issue_context, load_bundle, load_pdf, stored_context
from docverify.sme.document_view import document_html
from docverify.sme.facts import IMAGE_ONLY_ERRORS, decided_by, file_facts, history_lines, reason_line
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
    message = (packet.error.get("message") if packet.error else "") or ""
    return [("For the operator", message)] if message else []


def _file_facts_markdown(packet: SMEPacket) -> str:
    rows = file_facts(packet)
    if not rows:
        return ""
    rows = [*rows, *_operator_advice(packet)]
    return "### What we know about this file\n\n" + "".join(f"- {k}: {md_escape(v)}\n" for k, v in rows) + "\n"


def _segments(cls: ClassificationView | None) -> list[SegmentView]:
    return cls.segments if cls is not None else []


def _presence(seg: SegmentView) -> dict[str | None, EntryView]:
    """The segment's entries by type (the last of a type, as a dict keeps it)."""
    return {c.doc_type: c for c in seg.classifications}


_SEG_LOC = re.compile(r"segments\[(\d+)\](?:\s*→\s*([^.\[]+?))?(?:\.|$)")
_MIX_LOC = re.compile(r"document_mixture\s*→\s*(.+?)\s*$")


class EvidenceRef(TypedDict):
    """One evidence item of the primary classification that an issue refers to (as stored)."""

    segment_index: Number | None
    doc_type: str | None
    presence_level: str | None
    snippet: str
    page: Number | None
    anchors: list[str]


def issue_evidence(issue: SMEIssueSummary, primary: ClassificationView | None) -> list[EvidenceRef]:
    """The classifier's evidence the issue refers to: ``[{segment_index, doc_type, presence_level,
    snippet, page, anchors}]`` of the entry named by the location (segment and type, or the type
    in the mixture: every segment's entry of that type)."""
    loc = issue.location
    details = issue.details
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
        if seg_idx is not None and seg.segment_index != seg_idx:
            continue
        for t, entry in _presence(seg).items():
            if doc_type is not None and t != doc_type:
                continue
            if doc_type is None and t != seg.dominant_type:
                continue
            out += [{"segment_index": seg.segment_index, "doc_type": t, "presence_level": entry.presence_level,
                     "snippet": ev.snippet or "", "page": ev.page, "anchors": ev.anchors_found or []}
                    for ev in entry.top_evidence]
    return out


# --------------------------------------------------------------------------- HTML
# The page is include/templates/sme_packet.html.j2 (macros in _macros.html.j2, the style sheet in
# sme_packet.css); the functions below prepare its context as plain text, which the template escapes.


#: a fact of the classification as the page lists it: (label, value as stored)
Fact = tuple[str, str | Number | None]


class SegmentRow(TypedDict):
    index: Number | None
    page_start: Number | None
    page_end: Number | None
    dominant: str | None
    #: per type of DOC_TYPES: "<presence> · conf <c> · share <s>", None when the segment has no entry of it
    cells: list[str | None]
    reasoning: str | None


class MixtureRow(TypedDict):
    doc_type: str | None
    presence: str | None
    share: Number | None


class ClassificationPage(TypedDict):
    """A classification as the page shows it (``_macros.html.j2``'s ``classification``)."""

    facts: list[Fact]
    segments: list[SegmentRow]
    mixture: list[MixtureRow]


def _shown(value: Number | str | None) -> Number | str:
    return "" if value is None else value


def _classification_view(cls: ClassificationView | None) -> ClassificationPage | None:
    """A classification as the page shows it: facts, one row per segment (a cell per type: the
    presence, or None), the document mixture."""
    if cls is None:
        return None
    facts: list[Fact] = [
        ("Dominant type", cls.dominant_type_overall), ("Segments", cls.number_of_segments),
        ("Vendor signals", ", ".join(cls.vendor_signals or []) or "none"), ("Classifier", cls.classifier)]
    se = cls.self_evaluation
    if se is not None and (se.notes or se.confidence):
        facts.append(("Self-evaluation", f"{_shown(se.confidence)} — {_shown(se.notes)}"))
    segments: list[SegmentRow] = []
    for seg in cls.segments:
        pres = _presence(seg)
        cells = [f"{c.presence_level} · conf {c.confidence} · share {c.segment_share}"
                 if (c := pres.get(t)) else None for t in DOC_TYPES]
        segments.append({"index": seg.segment_index, "page_start": seg.page_start, "page_end": seg.page_end,
                         "dominant": seg.dominant_type, "cells": cells, "reasoning": seg.reasoning})
    mixture: list[MixtureRow] = [{"doc_type": m.doc_type, "presence": m.presence_level, "share": m.overall_share}
                                 for m in cls.document_mixture]
    return {"facts": facts, "segments": segments, "mixture": mixture}


def _production_rows(packet: SMEPacket) -> list[tuple[str, str]]:
    comp = packet.production_comparison
    if not comp:
        return []
    dom, segs = comp["dominant_type"], comp["segments"]
    pres = comp["presence_differences"]
    return [("Overall", "agrees" if comp["agrees"] else "differs"),
            ("Dominant type", f"primary {dom['primary']} · production {dom['production']}"),
            ("Segments", f"primary {_shapes(segs['primary'])} · production {_shapes(segs['production'])}"),
            ("Presence differences", "; ".join(f"{t}: {v.get('primary')} vs {v.get('production')}"
                                               for t, v in pres.items()) or "none")]


def _shapes(shapes: list[SegmentShape]) -> list[list[Number | str | None]]:
    """Segment shapes as the packet's JSON holds them (lists)."""
    return [list(x) for x in shapes]


class PageTextView(TypedDict):
    """An issue's page-text window as the page shows it (``page`` None: only ``why``)."""

    page: int | None
    why: NotRequired[str]
    state: NotRequired[str]
    how: NotRequired[str]
    before: NotRequired[list[str]]
    match: NotRequired[str]
    after: NotRequired[list[str]]


def _page_text_view(ctx: StoredContext | None) -> PageTextView | None:
    """The page-text window of an issue: page (None: ``why`` there is none), whether the issue's
    text was found and how, the paragraphs before, the match, the paragraphs after."""
    if not ctx:
        return None
    if ctx["page"] is None:
        return {"page": None, "why": ctx.get("why", "")}
    return {"page": ctx["page"], "state": "found" if ctx["found"] else "not found — showing the top of the page",
            "how": f" ({ctx.get('how')}, score {ctx.get('score')})" if ctx["found"] else "",
            "before": ctx["before"], "match": ctx["match"], "after": ctx["after"]}


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
    contexts: dict[str, StoredContext | None] = {}
    for s in packet.issues_summary:
        if bundle is not None:
            contexts[s.issue_id] = stored_context(get_issue_context(bundle, packet, s.issue_id, highlight=False))
        else:
            contexts[s.issue_id] = s.context
    pdf_pages = packet.total_pages or _pdf_page_count(pdf_bytes)
    primary = ClassificationView.read(packet.primary_classification)
    status = packet.review_status
    info: list[tuple[str, str | int | None]] = [
        ("PDF", packet.pdf_filename), ("PDF path", packet.pdf_path),
        ("Pages", packet.total_pages or (f"{pdf_pages} (from the PDF; no text was read)" if pdf_pages
                                         else "none (the file could not be opened as a PDF)")),
        ("Bundle", packet.bundle_path or "none"), ("Run", packet.run_id), ("Packet created", packet.created_at),
        ("Review status", status)]
    if status == "reviewed":
        info += [("Reviewer", packet.reviewer), ("Reviewed at", packet.reviewed_at),
                 ("Ground truth", f"{packet.ground_truth_path} (version {packet.ground_truth_version})")]
    decision: list[tuple[str, str | list[str]]] = [("Decision", packet.v5_decision), ("Rule", decided_by(packet)),
                                       ("Reason", reason_line(packet))]
    if packet.v5_explanation:  # ADR 0013: the V5 decision's explanation for the SME (one line each)
        decision.append(("Why", packet.v5_explanation.splitlines()))
    if packet.jury_votes:
        decision.append(("Jury votes", [_jury_line(v) for v in packet.jury_votes]))
    if packet.error:
        decision += [("Error", packet.error["error"])]
    issues = []
    for s in packet.issues_summary:
        ctx = contexts[s.issue_id]
        evidence = [{**x, "anchors": ", ".join(x["anchors"])} for x in issue_evidence(s, primary)]
        issues.append({"issue_id": s.issue_id, "severity": s.severity, "code": s.code, "agent": s.agent,
                       "formatted": s.formatted, "colour": _SEV_COLOUR.get(str(s.severity), "#555"),
                       "evidence": evidence, "context": _page_text_view(ctx), "page": ctx["page"] if ctx else None})
    original = packet.original_classification
    page = render(
        "sme_packet.html.j2", doc_id=packet.doc_id, total_issues=packet.total_issues, status=status,
        info=info, decision=decision, production=_production_rows(packet), issues=issues,
        document=markupsafe.Markup(document_html(packet, bundle=bundle, pdf_bytes=pdf_bytes)),
        history="\n".join(history_lines(packet)), decided_by=decided_by(packet),
        fixed=bool(packet.attempt_history[1:]), doc_types=DOC_TYPES, primary=_classification_view(primary),
        show_original=original is not None and original != packet.primary_classification,
        original=_classification_view(ClassificationView.read(original)))
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
    if pdf_bytes is None and (bundle is not None or (packet.error and packet.error["error"]) in IMAGE_ONLY_ERRORS):
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
    by_agent = v.get("votes")
    votes = ", ".join(f"{a}={by_agent.get(a) if isinstance(by_agent, dict) else None}" for a in ("A", "B", "C"))
    flag = f" ({v['flag_reason']})" if v.get("flag_reason") else ""
    return f"{v.get('agent', '')} {v.get('code')}: {votes} -> {v.get('final_action')}{flag}, rule {v.get('rule')}"


def _markdown(packet: SMEPacket, para_limit: int, html_uri: str | None, shortened: bool) -> str:
    primary = ClassificationView.read(packet.primary_classification)
    comp = packet.production_comparison
    # the page served by the api-server shows every page once with the issues marked: the form
    # keeps only the matched line of each issue, so the answer fields are a short scroll away
    compact = bool(html_uri and html_uri.startswith("/"))
    issues = []
    for s in packet.issues_summary:
        ctx = s.context
        issues.append({"formatted": s.formatted, "page": ctx["page"] if ctx else None,
                       "state": "matched" if ctx and ctx["found"] else "not found; top of the page",
                       "before": ctx["before"] if ctx else [], "match": ctx["match"] if ctx else None,
                       "after": ctx["after"] if ctx else []})
    table = None
    if primary is not None:
        segments = []
        for seg in primary.segments:
            pres = _presence(seg)
            segments.append({"index": seg.segment_index, "page_start": seg.page_start, "page_end": seg.page_end,
                             "dominant": seg.dominant_type,
                             "cells": [f"{pres[t].presence_level} {pres[t].confidence}" if t in pres
                                       else "—" for t in DOC_TYPES]})
        table = {"dominant": primary.dominant_type_overall,
                 "signals": ", ".join(primary.vendor_signals or []) or "none", "segments": segments}
    text = _inert_markdown(environment()).get_template("sme_packet.md.j2").render(
        doc_id=packet.doc_id,
        title=("AUDIT of an accepted classification — " if packet.review_kind == "audit" else "")
        + (f"V5 {decided_by(packet)}" if packet.v5_rule is not None else decided_by(packet)),
        pdf_filename=packet.pdf_filename, total_pages=packet.total_pages, run_id=packet.run_id,
        decision=packet.v5_decision, reason=packet.v5_reason,
        error={"code": packet.error["error"], "message": packet.error.get("message", "")} if packet.error else None,
        explanation=packet.v5_explanation.splitlines(), jury=[_jury_line(v) for v in packet.jury_votes],
        production={"agrees": comp["agrees"], "dominant": comp["dominant_type"]["production"]}
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
