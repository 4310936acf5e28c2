"""Readable renderings of an SME packet: a self-contained HTML page (beside the packet JSON) and
Markdown (the body of the Airflow human-in-the-loop task).

HTML: document info, decision, the primary classification (segments table, mixture), the
issues BLOCKER → MAJOR → MINOR in the spec's format, each with the evidence it refers to, the
page text around it (2 paragraphs before, 3 after) and, when the PDF has a text layer, the page
image with the matched text boxed. Everything from the packet or the document is escaped; page
images are embedded once per page (CSS background, base64 PNG) and shared by the issues on
that page. No script, no external resource.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

from docverify.models import DOC_TYPES, DocumentBundle, SMEPacket
from docverify.sme_context import (
    DEFAULT_SCALE,
    PdfPages,
    get_issue_context,
    load_bundle,
    load_pdf,
    png_data_uri,
)
from docverify.store import ArtifactStore

log = logging.getLogger("docverify.sme")

MAX_PAGE_IMAGES = 8
MARKDOWN_MAX_BYTES = 20_000
_SEV_COLOUR = {"BLOCKER": "#b00020", "MAJOR": "#c35a00", "MINOR": "#5f6b00", "ERROR": "#b00020"}


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _segments(cls: dict | None) -> list[dict]:
    segs = (cls or {}).get("segments")
    return [s for s in segs if isinstance(s, dict)] if isinstance(segs, list) else []


def _presence(seg: dict) -> dict[str, dict]:
    return {c.get("doc_type"): c for c in seg.get("classifications") or [] if isinstance(c, dict)}


_SEG_LOC = re.compile(r"segments\[(\d+)\](?:\s*→\s*([^.\[]+?))?(?:\.|$)")
_MIX_LOC = re.compile(r"document_mixture\s*→\s*(.+?)\s*$")


def issue_evidence(issue: dict, primary: dict | None) -> list[dict]:
    """The classifier's evidence the issue refers to: ``[{segment_index, doc_type, presence_level,
    snippet, page, anchors}]`` of the entry named by the location (segment and type, or the type
    in the mixture: every segment's entry of that type)."""
    loc = issue.get("location") or ""
    details = issue.get("details") or {}
    seg_idx, doc_type = None, None
    m = _SEG_LOC.search(loc)
    if m:
        seg_idx, doc_type = int(m.group(1)), (m.group(2) or "").strip() or None
    else:
        m = _MIX_LOC.search(loc)
        if m:
            doc_type = m.group(1).strip()
    if isinstance(details.get("doc_type"), str):
        doc_type = doc_type or details["doc_type"]
    if seg_idx is None and doc_type is None:
        return []
    out = []
    for seg in _segments(primary):
        if seg_idx is not None and seg.get("segment_index") != seg_idx:
            continue
        for t, entry in _presence(seg).items():
            if doc_type is not None and t != doc_type:
                continue
            if doc_type is None and t != seg.get("dominant_type"):
                continue
            for ev in entry.get("top_evidence") or []:
                if isinstance(ev, dict):
                    out.append({"segment_index": seg.get("segment_index"), "doc_type": t,
                                "presence_level": entry.get("presence_level"), "snippet": ev.get("snippet", ""),
                                "page": ev.get("page"), "anchors": ev.get("anchors_found") or []})
    return out


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
main{max-width:1060px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:0 0 6px}
table{border-collapse:collapse;width:100%;background:#fff;margin:6px 0}
th,td{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top} th{background:#eef0f2}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0} dt{color:#555} dd{margin:0}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #ddd;padding:8px;margin:6px 0}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;color:#fff;font-size:12px;font-weight:600}
.issue{background:#fff;border:1px solid #ddd;border-left:5px solid #999;padding:12px;margin:12px 0}
.ctx p{margin:4px 0;padding:4px 8px;white-space:pre-wrap;word-break:break-word}
.ctx .around{color:#555;background:#fafafa;border-left:3px solid #ddd}
.ctx .hit{background:#fff6cc;border-left:3px solid #e0a800}
.pageimg{position:relative;width:100%;background-size:100% 100%;border:1px solid #bbb;margin:8px 0;background-color:#fff}
.pageimg .box{position:absolute;border:2px solid #e00000;background:rgba(255,230,0,.35);box-sizing:border-box}
.muted{color:#666} .small{font-size:12px}
"""


def _dl(rows: list[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _classification_html(cls: dict | None) -> str:
    if not isinstance(cls, dict):
        return "<p class='muted'>No classification (the document could not be processed).</p>"
    rows = [("Dominant type", _e(cls.get("dominant_type_overall"))),
            ("Segments", _e(cls.get("number_of_segments"))),
            ("Vendor signals", _e(", ".join(map(str, cls.get("vendor_signals") or [])) or "none")),
            ("Classifier", _e(cls.get("classifier", "")))]
    se = cls.get("self_evaluation") or {}
    if isinstance(se, dict) and (se.get("notes") or se.get("confidence")):
        rows.append(("Self-evaluation", _e(f"{se.get('confidence', '')} — {se.get('notes', '')}")))
    head = "".join(f"<th>{_e(t)}</th>" for t in DOC_TYPES)
    body = []
    for seg in _segments(cls):
        pres = _presence(seg)
        cells = []
        for t in DOC_TYPES:
            c = pres.get(t)
            cells.append("<td>" + (_e(f"{c.get('presence_level')} · conf {c.get('confidence')} · share "
                                       f"{c.get('segment_share')}") if c else "<span class='muted'>—</span>") + "</td>")
        body.append(f"<tr><td>{_e(seg.get('segment_index'))}</td><td>{_e(seg.get('page_start'))}–"
                    f"{_e(seg.get('page_end'))}</td><td><b>{_e(seg.get('dominant_type'))}</b></td>{''.join(cells)}</tr>")
        if seg.get("reasoning"):
            body.append(f"<tr><td></td><td colspan='{len(DOC_TYPES) + 2}' class='small muted'>Reasoning: "
                        f"{_e(seg.get('reasoning'))}</td></tr>")
    mix = "".join(f"<tr><td>{_e(m.get('doc_type'))}</td><td>{_e(m.get('presence_level'))}</td>"
                  f"<td>{_e(m.get('overall_share'))}</td></tr>"
                  for m in cls.get("document_mixture") or [] if isinstance(m, dict))
    return (_dl(rows) + f"<table><tr><th>#</th><th>Pages</th><th>Dominant type</th>{head}</tr>{''.join(body)}</table>"
            + (f"<h3>Document mixture</h3><table><tr><th>Type</th><th>Presence</th><th>Overall share</th></tr>{mix}"
               f"</table>" if mix else ""))


def _production_html(packet: SMEPacket) -> str:
    comp = packet.production_comparison
    if not comp:
        return ""
    dom, segs = comp.get("dominant_type", {}), comp.get("segments", {})
    pres = comp.get("presence_differences") or {}
    rows = [("Overall", _e("agrees" if comp.get("agrees") else "differs")),
            ("Dominant type", _e(f"primary {dom.get('primary')} · production {dom.get('production')}")),
            ("Segments", _e(f"primary {segs.get('primary')} · production {segs.get('production')}")),
            ("Presence differences", _e("; ".join(f"{t}: {v.get('primary')} vs {v.get('production')}"
                                                  for t, v in pres.items()) or "none"))]
    return "<h2>Production comparison</h2>" + _dl(rows)


def _context_html(ctx: dict | None) -> str:
    if not ctx:
        return "<p class='muted'>No page-text context.</p>"
    if ctx.get("page") is None:
        return f"<p class='muted'>No page text: {_e(ctx.get('why', ''))}.</p>"
    state = ("found" if ctx.get("found") else "not found — showing the top of the page")
    how = f" ({ctx.get('how')}, score {ctx.get('score')})" if ctx.get("found") else ""
    parts = [f"<p class='small muted'>Page {_e(ctx['page'])}: the issue's text {_e(state)}{_e(how)}</p>"]
    parts += [f"<p class='around'>{_e(p)}</p>" for p in ctx.get("before") or []]
    if ctx.get("match"):
        parts.append(f"<p class='hit'>{_e(ctx['match'])}</p>")
    parts += [f"<p class='around'>{_e(p)}</p>" for p in ctx.get("after") or []]
    return "<div class='ctx'>" + "".join(parts) + "</div>"


def _figure_html(ctx: dict, issue_id: str) -> str:
    hl = ctx.get("highlight")
    if not hl:
        return ""
    w, h = hl["image_width"], hl["image_height"]
    boxes = "".join(
        f"<div class='box' style='left:{100 * b['x'] / w:.3f}%;top:{100 * b['y'] / h:.3f}%;"
        f"width:{100 * b['w'] / w:.3f}%;height:{100 * b['h'] / h:.3f}%'></div>" for b in hl["boxes"])
    return (f"<figure><div class='pageimg page-{int(ctx['page'])}' style='aspect-ratio:{w}/{h}' role='img' "
            f"aria-label='Page {int(ctx['page'])} with the text of {_e(issue_id)} boxed'>{boxes}</div>"
            f"<figcaption class='small muted'>Page {int(ctx['page'])}: "
            + (f"the matched text boxed ({len(hl['boxes'])} line(s))." if hl["boxes"] else
               "the issue's text was not found on this page's text layer (nothing boxed).")
            + "</figcaption></figure>")


def packet_html(packet: SMEPacket, *, bundle: DocumentBundle | None = None, pdf_bytes: bytes | None = None,
                scale: float = DEFAULT_SCALE, max_page_images: int = MAX_PAGE_IMAGES) -> str:
    """The packet as one self-contained HTML page. With ``bundle`` the page-text windows are
    computed (else the ones stored in the packet are used); with ``pdf_bytes`` pages with a text
    layer are embedded with the matched text boxed (at most ``max_page_images`` pages)."""
    contexts: dict[str, dict] = {}
    for s in packet.issues_summary:
        if bundle is not None:
            contexts[s.issue_id] = get_issue_context(bundle, packet, s.issue_id, highlight=False)
        else:
            contexts[s.issue_id] = dict(s.context or {})
    page_css = []
    if pdf_bytes and bundle is not None:
        try:
            with PdfPages(pdf_bytes, scale) as pdf:
                pages: list[int] = []
                for s in packet.issues_summary:
                    ctx = contexts[s.issue_id]
                    page = ctx.get("page")
                    if page is None or not 1 <= page <= pdf.page_count:
                        continue
                    if page not in pages and len(pages) >= max_page_images:
                        continue
                    # a scanned (OCR'd) page has no text layer to box: it is shown as an image, unboxed
                    found = pdf.find_boxes(page, ctx.get("needle", "")) \
                        if ctx.get("found") and pdf.has_text(page) else None
                    width, height = pdf.size(page)
                    # not found (e.g. a fabricated snippet): the page is shown without a box
                    ctx["highlight"] = found or {"image_width": width, "image_height": height, "scale": scale,
                                                 "boxes": []}
                    if page not in pages:
                        pages.append(page)
                for page in pages:
                    png, _, _ = pdf.render_png(page)
                    page_css.append(f".page-{page}{{background-image:url({png_data_uri(png)})}}")
        except Exception as exc:  # an unreadable PDF: the packet is still rendered, without images
            log.warning("packet %s: page images left out (%s)", packet.doc_id, type(exc).__name__)
            for ctx in contexts.values():
                ctx.pop("highlight", None)
    # a document that could not be read (a scan OCR read nothing on, a timeout, …) still shows its
    # pages as images when its PDF opens: the SME answers from what the pages show
    page_images, pdf_pages = [], packet.total_pages
    if pdf_bytes and bundle is None and packet.error:
        try:
            with PdfPages(pdf_bytes, scale) as pdf:
                pdf_pages = pdf.page_count
                for page in range(1, min(pdf.page_count, max_page_images) + 1):
                    png, _, _ = pdf.render_png(page)
                    page_images.append(f"<figure><img alt='page {page}' src='{png_data_uri(png)}'>"
                                       f"<figcaption>page {page}</figcaption></figure>")
        except Exception as exc:  # not a readable PDF at all (corrupt, encrypted): no images
            log.warning("packet %s: page images left out (%s)", packet.doc_id, type(exc).__name__)
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    status = packet.review_status
    info = [("PDF", _e(packet.pdf_filename)), ("PDF path", _e(packet.pdf_path)),
            ("Pages", _e(packet.total_pages or (f"{pdf_pages} (from the PDF; no text was read)" if pdf_pages
                                                else "unknown (the PDF could not be opened)"))), ("Bundle", _e(packet.bundle_path or "none")),
            ("Run", _e(packet.run_id)), ("Packet created", _e(packet.created_at)), ("Review status", _e(status))]
    if status == "reviewed":
        info += [("Reviewer", _e(packet.reviewer)), ("Reviewed at", _e(packet.reviewed_at)),
                 ("Ground truth", _e(f"{packet.ground_truth_path} (version {packet.ground_truth_version})"))]
    decision = [("Decision", _e(packet.v5_decision)), ("Rule", _e(decided_by(packet))), ("Reason", _e(packet.v5_reason))]
    if packet.v5_explanation:  # issue 14: the V5 decision's explanation for the SME
        decision.append(("Why", "<br>".join(_e(line) for line in packet.v5_explanation.splitlines())))
    if packet.jury_votes:
        decision.append(("Jury votes", "<br>".join(_e(_jury_line(v)) for v in packet.jury_votes)))
    if packet.error:
        decision += [("Error", _e(packet.error.get("error"))), ("Error message", _e(packet.error.get("message", "")))]
    issues = []
    for s in packet.issues_summary:
        d = s.model_dump(mode="json")
        ctx = contexts[s.issue_id]
        ev = issue_evidence(d, primary)
        ev_html = ("<table><tr><th>Segment</th><th>Type</th><th>Presence</th><th>Page</th><th>Snippet</th>"
                   "<th>Anchors</th></tr>" + "".join(
                       f"<tr><td>{_e(x['segment_index'])}</td><td>{_e(x['doc_type'])}</td><td>"
                       f"{_e(x['presence_level'])}</td><td>{_e(x['page'])}</td><td>{_e(x['snippet'])}</td><td>"
                       f"{_e(', '.join(map(str, x['anchors'])))}</td></tr>" for x in ev) + "</table>") if ev else \
            "<p class='muted small'>No classifier evidence is attached to this location.</p>"
        colour = _SEV_COLOUR.get(str(s.severity), "#555")
        issues.append(
            f"<section class='issue' id='{_e(s.issue_id)}' style='border-left-color:{colour}'>"
            f"<h3><span class='badge' style='background:{colour}'>{_e(s.severity)}</span> {_e(s.issue_id)} · "
            f"{_e(s.code)} <span class='muted small'>(Agent: {_e(s.agent)})</span></h3>"
            f"<pre>{_e(s.formatted)}</pre><h4>Evidence</h4>{ev_html}<h4>Page text</h4>{_context_html(ctx)}"
            f"{_figure_html(ctx, s.issue_id)}</section>")
    if not issues:
        issues.append("<p class='muted'>No verifier issues: the document was escalated because it could not be "
                      "processed (see the decision).</p>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>SME packet — {_e(packet.doc_id)}"
        f"</title><style>{_CSS}{''.join(page_css)}</style></head><body><main>"
        f"<h1>SME review packet — {_e(packet.doc_id)}</h1>"
        f"<p class='muted'>{_e(packet.total_issues)} issue(s) · status {_e(status)}. Contains clinical text: "
        f"handle as PHI.</p>"
        f"<h2>Document</h2>{_dl(info)}<h2>Decision</h2>{_dl(decision)}{_production_html(packet)}"
        + (f"<h2>Pages ({len(page_images)} of {pdf_pages})</h2>{''.join(page_images)}" if page_images else "")
        + f"<h2>Issues (BLOCKER → MAJOR → MINOR)</h2>{''.join(issues)}"
        f"<h2>History: attempts, issues and fixes</h2>{_history_html(packet)}"
        f"<h2>Primary classification{' (after the automatic fixes)' if packet.attempt_history[1:] else ''}</h2>"
        f"{_classification_html(primary)}"
        + (f"<h2>Original classification (what the classifier said, before any fix)</h2>"
           f"{_classification_html(packet.original_classification)}"
           if packet.original_classification is not None and packet.original_classification != primary else "") +
        "</main></body></html>\n")


def decided_by(packet: SMEPacket) -> str:
    """'rule 4', 'rule 5 (max_retries)', or 'not processed: CORRUPT' — a parse error is its own
    reason, never a V5 rule (issue 10)."""
    if packet.v5_rule is None:
        return f"not processed: {(packet.error or {}).get('error', 'error')}"
    stop = packet.escalation_reason
    return f"rule {packet.v5_rule}" + (f" ({stop})" if stop not in ("arbiter", "error") else "")


def history_lines(packet: SMEPacket) -> list[str]:
    """One line per attempt and per fix after it (plain text; escape for the medium)."""
    out = []
    for a in packet.attempt_history:
        codes = ", ".join(f"{i['issue_id']} {i['severity']} {i['code']}" for i in a["issues"]) or "no issues"
        repair = " — every BLOCKER auto-fixable: repaired once before rule 1" if a.get("blocker_repair") else ""
        out.append(f"Attempt {a['attempt']}: {a['decision']} by rule {a['rule']}{repair} — {codes}")
        out += [f"  skipped {s}" for s in a.get("skipped_judgments", [])[:1]]
        out += [f"  fix {f['fixer']} ({', '.join(f['codes'])}): {f['description']}" for f in a["fixes_after"]]
    if packet.attempt_history:
        out.append(f"Final: {packet.v5_decision} — {decided_by(packet)}")
    return out


def _history_html(packet: SMEPacket) -> str:
    if not packet.attempt_history:
        return f"<p class='muted'>No attempt: {_e(decided_by(packet))}.</p>"
    return "<pre>" + _e("\n".join(history_lines(packet))) + "</pre>"


#: parse errors of a PDF that opened and holds pages, only without readable text
IMAGE_ONLY_ERRORS = ("NO_TEXT_LAYER",)


def write_packet_html(store: ArtifactStore, doc_id: str, *, bundle: DocumentBundle | None = None,
                      pdf_bytes: bytes | None = None) -> tuple[str, bool]:
    """Render the stored packet of ``doc_id`` to ``sme_packets/sme_packet_<doc_id>.html``
    (bundle and PDF read from the packet's URIs unless given). Written only when the bytes
    changed. Returns (uri, written)."""
    from docverify.sme import html_rel, load_packet, packet_key

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


def _fence(text: str, info: str = "text") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _cell(value: Any) -> str:
    s = " ".join(str("" if value is None else value).split())
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _inline(value: Any) -> str:
    """Text for a Markdown line: no HTML, no emphasis/link syntax."""
    s = " ".join(str("" if value is None else value).split())
    return re.sub(r"([\\`*_\[\]<>#|!])", r"\\\1", s)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def packet_markdown(packet: SMEPacket, *, max_bytes: int = MARKDOWN_MAX_BYTES, html_uri: str | None = None) -> str:
    """The packet as Markdown (no HTML) for a review form: document, decision, the issues with
    their page-text windows (stored in the packet), and the primary classification as a compact
    table. At most ``max_bytes`` UTF-8 bytes: long paragraphs are clipped first, then the tail is
    cut with a note."""
    for k, para_limit in enumerate((1200, 400, 160)):
        text = _markdown(packet, para_limit, html_uri)
        if k:
            text += (f"\n_Page-text paragraphs shortened to {para_limit} characters to fit the form; the full text "
                     f"is in the HTML/JSON packet._\n")
        if len(text.encode()) <= max_bytes:
            return text
    note = "\n\n… (truncated to stay under the size limit: the full packet is in the HTML/JSON file)\n"
    budget = max_bytes - len(note.encode())
    cut = text.encode()[:budget].decode("utf-8", errors="ignore")
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    if cut.count("```") % 2:  # do not leave a code block open
        cut = cut[: cut.rfind("```")].rstrip()
    return cut + note


def _jury_line(v: dict) -> str:
    votes = ", ".join(f"{a}={v.get('votes', {}).get(a)}" for a in ("A", "B", "C"))
    flag = f" ({v['flag_reason']})" if v.get("flag_reason") else ""
    return f"{v.get('agent', '')} {v.get('code')}: {votes} -> {v.get('final_action')}{flag}, rule {v.get('rule')}"


def _markdown(packet: SMEPacket, para_limit: int, html_uri: str | None) -> str:
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    title = f"V5 {decided_by(packet)}" if packet.v5_rule is not None else decided_by(packet)
    out = [f"## {_inline(packet.doc_id)} — {_inline(title)}", "",
           f"**Document:** {_inline(packet.pdf_filename)} · "
           + (f"{packet.total_pages} page(s)" if packet.total_pages else "no page text read (page images on the packet page)")
           + f" · run {_inline(packet.run_id)}",
           f"**Decision:** {packet.v5_decision} — {_inline(packet.v5_reason)}"]
    if packet.error:
        out.append(f"**Error:** {_inline(packet.error.get('error'))} — {_inline(packet.error.get('message', ''))}")
    if packet.v5_explanation:  # issue 14
        out.append("**Why:** " + " ".join(_inline(line) for line in packet.v5_explanation.splitlines()))
    if packet.jury_votes:
        out.append("**Jury votes:** " + "; ".join(_inline(_jury_line(v)) for v in packet.jury_votes))
    if packet.production_comparison:
        c = packet.production_comparison
        out.append(f"**Production classifier:** {'agrees' if c.get('agrees') else 'differs'} (dominant type "
                   f"{_inline(c.get('dominant_type', {}).get('production'))})")
    if html_uri:
        if html_uri.startswith("/"):  # served by the Airflow api-server: a link the SME clicks
            out.append(f"**[Full packet with page images]({html_uri.replace(')', '%29').replace(' ', '%20')})** "
                       "(every page once, every issue marked, the history of the attempts)")
        else:
            out.append(f"**Full packet with page images** (open the file in a browser): `{html_uri.replace('`', '%60')}`")
    out = [line for pair in zip(out, [""] * len(out), strict=True) for line in pair]  # one paragraph per line
    out += [f"### Issues ({packet.total_issues}, BLOCKER → MAJOR → MINOR)"]
    for s in packet.issues_summary:
        out += ["", _fence(s.formatted)]
        ctx = s.context or {}
        # the page served by the api-server shows every page once with the issues marked: the form
        # keeps only the matched line of each issue, so the answer fields are a short scroll away
        compact = bool(html_uri and html_uri.startswith("/"))
        if ctx.get("page") is not None:
            state = "matched" if ctx.get("found") else "not found; top of the page"
            block = [f"[page {ctx['page']}, {state}]"]
            block += [] if compact else [f"  {_clip(p, para_limit)}" for p in ctx.get("before") or []]
            if ctx.get("match"):
                block.append(f">> {_clip(ctx['match'], min(para_limit, 240) if compact else para_limit)}")
            block += [] if compact else [f"  {_clip(p, para_limit)}" for p in ctx.get("after") or []]
            out.append(_fence("\n".join(block)))
    if not packet.issues_summary:
        out += ["", "No verifier issues: the document could not be processed (see the error)."]
    if packet.attempt_history:
        out += ["", "### History (attempts, issues, fixes)", "", _fence("\n".join(history_lines(packet)))]
    out += ["", "### Primary classification"]
    if primary is None:
        out.append("None (the document could not be processed).")
    else:
        out.append(f"Dominant type: **{_inline(primary.get('dominant_type_overall'))}** · vendor signals: "
                   f"{_inline(', '.join(map(str, primary.get('vendor_signals') or [])) or 'none')}")
        out += ["", "| # | Pages | Dominant | " + " | ".join(DOC_TYPES) + " |",
                "|---|---|---|" + "---|" * len(DOC_TYPES)]
        for seg in _segments(primary):
            pres = _presence(seg)
            cells = [_cell(f"{pres[t].get('presence_level')} {pres[t].get('confidence')}") if t in pres else "—"
                     for t in DOC_TYPES]
            out.append(f"| {_cell(seg.get('segment_index'))} | {_cell(seg.get('page_start'))}–"
                       f"{_cell(seg.get('page_end'))} | {_cell(seg.get('dominant_type'))} | " + " | ".join(cells) + " |")
    out += ["", "**Answer:** *Agree* keeps this classification as ground truth. *Correct* with the corrected "
            "dominant type and/or the type of each page that is wrong (the pages are preset to what the classifier "
            "said; for a long document, page ranges such as " + _inline("1-2 Genomic Report; 3 Clinical Note") + ")."]
    return "\n".join(out) + "\n"
