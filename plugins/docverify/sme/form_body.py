"""The body of the Airflow human-in-the-loop review task: ids, counts, severities, codes, page
numbers and the classification's page ranges and types, with a link to the review workspace —
never page text, evidence snippets, issue messages (they may quote the page) or the parse
error's message (ADR 0036).

Airflow renders the body (and the subject and params) wherever it shows a Required Action: the
Browse → Required Actions list, the task instance's Required Actions tab, the HITL API. Those
views are readable by anyone who may read the ``sme_review`` Dag — a Viewer — while the page
text is for reviewers only: it is served by the plugin's permission-checked pages
(``/docverify/reviews/…`` and ``/docverify/packets/…``). So the body names *where* to look and
*what* was found (codes and pages), and the workspace shows the page.

Every value from the packet goes through :func:`docverify.sme.render.md_escape` (inert Markdown).
"""

from __future__ import annotations

import urllib.parse
from collections import Counter

from docverify.domain.classification_view import ClassificationView
from docverify.domain.models import SegmentShape, SMEPacket, StoredContext
from docverify.sme.facts import decided_by
from docverify.sme.packets import segment_shape
from docverify.sme.render import md_escape

SEVERITIES = ("BLOCKER", "MAJOR", "MINOR")


def _page_of(issue_context: StoredContext | None) -> str:
    page = issue_context["page"] if issue_context else None
    return str(page) if page is not None else "—"


def _segments(packet: SMEPacket) -> list[SegmentShape]:
    cls = ClassificationView.read(packet.primary_classification)
    return segment_shape(cls) if cls is not None else []


def review_form_markdown(packet: SMEPacket, *, workspace_url: str, packet_url: str | None = None) -> str:
    """The review task's body: what to open and what was found, without any clinical text.

    ``workspace_url``: the review's page in the workspace (relative to the api-server's root);
    ``packet_url``: the packet page, when it is served."""
    audit = packet.review_kind == "audit"
    counts = Counter(str(s.severity) for s in packet.issues_summary)
    severity = " · ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts.get(s)) or "no verifier issues"
    pages = f"{packet.total_pages} page(s)" if packet.total_pages else "page count unknown (no text was read)"
    link = urllib.parse.quote(workspace_url, safe="/?=&%#")
    lines = [f"## {md_escape(packet.doc_id)} — "
             + ("audit: accepted automatically; confirm or correct" if audit else "escalated for your review"),
             "",
             f"**[Open this review in the workspace]({link})**: the pages of the document with the classification "
             "drawn on them, every finding on its page, and the answer checked before it is sent. Page text and "
             "evidence are shown there only (reviewers' pages); this form carries ids, codes and page numbers.",
             ""]
    if packet_url:
        lines += [f"[Full packet page]({urllib.parse.quote(packet_url, safe='/?=&%#')}) (reviewers only: every page "
                  "once, the findings on their pages)", ""]
    if audit:
        decision = "AUTO_ACCEPT (drawn for the nightly audit of accepted documents)"
    elif packet.v5_rule is not None:
        decision = f"{packet.v5_decision} by V5 {decided_by(packet)}"
    else:
        decision = f"{packet.v5_decision}: {decided_by(packet)}"  # the error's code, never its message
    lines += [f"**Document:** {pages} · run {md_escape(packet.run_id)}", "",
              f"**Decision:** {md_escape(decision)}", "",
              f"**Findings:** {packet.total_issues} ({severity})", ""]
    if packet.issues_summary:
        lines += ["| Issue | Severity | Verifier | Code | Page |", "|---|---|---|---|---|"]
        for s in packet.issues_summary:
            lines.append(f"| {md_escape(s.issue_id)} | {md_escape(s.severity)} | {md_escape(s.agent)} | "
                         f"{md_escape(s.code)} | {_page_of(s.context)} |")
        lines.append("")
    segs = _segments(packet)
    if segs:
        lines += ["**Classification to check:** "
                  + "; ".join(f"pages {md_escape(a)}–{md_escape(b)}: {md_escape(t)}" for a, b, t in segs), ""]
    else:
        lines += ["**Classification:** none (the document could not be processed).", ""]
    lines.append("**Answer:** *Agree* keeps the classification as ground truth; *Correct* with the type of each "
                 "page that is wrong (or the whole document's type); *Cannot classify* with a reason.")
    return "\n".join(lines) + "\n"
