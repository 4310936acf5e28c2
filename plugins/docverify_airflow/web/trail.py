"""One document's trail in the browser: ``GET /docverify/trace/{doc_id}`` on the api-server.

Every step of :func:`docverify.reporting.trace.document_trace` — first seen, layout, each attempt's issue
codes, severities and pages, the route and its V5 rule, the automatic fixes, the packet, its
withdrawal, the answer (who, when, the ground-truth version), the audits, the batch report — with
a link to the Airflow task instance that logged it (its log is the first tab) and to the packet,
review and report pages.

Who sees what: the page needs read access to the nightly Dag (like the batch reports: ids, codes,
counts). The fields that may name a patient (:data:`docverify.reporting.trace.PHI_FIELDS`: the input URI and
file name, an error's message, the SME's notes) are shown only to users who may read packets —
checked with the packet pages' own permission (answering the ``sme_review`` Dag's reviews); for
others the page says what it hides and why. It never holds page text."""

from __future__ import annotations

import html
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from docverify.reporting.trace import UnknownDocument, document_trace
from docverify.storage.limits import InputError
from docverify_airflow import config
from docverify_airflow.airflow_internals import DagAccessEntity, GetUserDep, requires_access_dag
from docverify_airflow.web.common import HEADERS, STYLE, check_id

#: the batch reports' permission: whoever may read the nightly Dag
READ = [Depends(requires_access_dag("GET", param_dag_id="clinical_doc_verification"))]
#: the packet pages' permission (docverify_airflow.web.packets.AUTH): may answer sme_review reviews = may read PHI
_packet_reader = requires_access_dag("PUT", access_entity=DagAccessEntity.HITL_DETAIL, param_dag_id="sme_review")

router = APIRouter(prefix="/trace")

_NAMES = {"input_uri": "the input file's URI", "file_name": "the file name", "error_message": "error messages",
          "notes": "the SME's notes"}
_KIND = {"discover": "Discovered", "layout": "Layout", "verify": "Verified", "route": "Routed (V5)",
         "auto_fix_retry": "Fixed and retried", "accept": "Accepted", "sme_packet": "Escalated: SME packet",
         "audit_packet": "Audit packet", "withdrawn": "Withdrawn", "answer": "Answered → ground truth",
         "batch_report": "Batch report"}


def may_read_packets(request: Request, user: GetUserDep) -> bool:
    """True when the user passes the packet pages' check (an SME); False on its 403."""
    try:
        _packet_reader(request, user)
    except HTTPException as exc:
        if exc.status_code in (401, 403):
            return False
        raise
    return True


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


#: a task log is a page of the Airflow UI (its own sidebars): opened at top level in a new tab, never
#: inside this page (rel=noopener: the new tab gets no handle on this one)
NEW_TAB = " target='_blank' rel='noopener'"


def _task_link(step: Any) -> str:
    t = step.task
    if t is None:
        return "<span class='muted'>no Airflow task (answered outside Airflow)</span>"
    label = f"{t.dag_id} · {t.task_id}" + (f"[{t.map_index}]" if t.map_index >= 0 else "")
    if t.run_id:
        return (f"<a class='log' href='{_e(t.ui_path())}'{NEW_TAB} title='run {_e(t.run_id)}'>"
                f"task log: {_e(label)}</a>"
                f" <span class='muted'>run {_e(t.run_id)} (from the {_e(t.run_id_from)})</span>")
    return (f"<a class='log' href='{_e(t.ui_path())}'{NEW_TAB}>runs of {_e(t.night)}: {_e(label)}</a> "
            f"<span class='muted'>(no record of this night names its run yet: open the night's run, then the task)</span>")


def _links(step: Any, reader: bool) -> str:
    out = []
    key = step.review_id
    if key and step.kind in ("sme_packet", "audit_packet", "answer"):
        if reader:
            out.append(f"<a class='packet' href='/docverify/packets/{_e(quote(key, safe=''))}'>packet</a>")
            if step.kind != "answer" and step.review_status == "pending":
                out.append(f"<a class='review' href='/docverify/reviews/{_e(quote(key, safe=''))}'>review</a>")
        else:
            out.append("<span class='muted'>packet: for reviewers</span>")
    if step.kind == "batch_report":
        out.append(f"<a class='report' href='/docverify/reports/{_e(quote(step.night, safe=''))}'>batch report</a>")
    return " · ".join(out)


def _attempts(step: Any) -> str:
    if not step.attempts:
        return ""
    rows = []
    for a in step.attempts:
        issues = "".join(
            f"<li><span class='sev {_e(i.severity)}'>{_e(i.severity)}</span> {_e(i.code)} <span class='muted'>"
            f"({_e(i.agent)} {_e(i.issue_id)}{', pages ' + _e(', '.join(map(str, i.pages))) if i.pages else ''}"
            f"{', auto-fixable' if i.auto_fixable else ''})</span></li>" for i in a.issues) or "<li>no issue</li>"
        fixes = f"<div class='muted'>then fixed: {_e('; '.join(a.fixes_after))}</div>" if a.fixes_after else ""
        rows.append(f"<div class='attempt'>attempt {a.attempt}: <b>{_e(a.decision)}</b> rule {_e(a.rule)}"
                    f"<ul>{issues}</ul>{fixes}</div>")
    return "".join(rows)


def _phi(step: Any) -> str:
    parts = []
    if step.input_uri:
        parts.append(f"input <code>{_e(step.input_uri)}</code>")
    if step.error_message:
        parts.append(f"error: {_e(step.error_message)}")
    if step.notes:
        parts.append(f"notes: {_e(step.notes)}")
    return f"<div class='phi'>{' · '.join(parts)}</div>" if parts else ""


def trace_html(trace: Any, reader: bool) -> str:
    """The page's body (``trace`` is already redacted for a reader who may not read packets)."""
    nights: dict[str, list[Any]] = {}
    for s in trace.steps:
        nights.setdefault(s.night, []).append(s)
    sections = []
    for night, steps in nights.items():
        rows = "".join(
            f"<li class='step {_e(s.kind)}' data-kind='{_e(s.kind)}' title='{_e(_KIND.get(s.kind, s.kind))}'>"
            f"<b>{_e(s.title)}</b>"
            f"{' <span class=muted>at ' + _e(s.at) + '</span>' if s.at else ''}"
            f"<div>{_task_link(s)}{' · ' + _links(s, reader) if _links(s, reader) else ''}</div>"
            f"{_attempts(s) if s.kind in ('verify', 'auto_fix_retry') else ''}{_phi(s)}</li>" for s in steps)
        sections.append(f"<h2>Night {_e(night or '(packets of the older layout)')}</h2><ol class='trail'>{rows}</ol>")
    hidden = ""
    if trace.hidden:
        hidden = (f"<p class='warn' id='hidden'>Hidden from you: {_e(', '.join(_NAMES.get(h, h) for h in trace.hidden))}"
                  ". They may name the patient, so only users who may read SME packets (who may answer the sme_review "
                  "Dag's reviews) see them; the document is named by its id. Ask an Airflow admin for that access.</p>")
    return (f"<h1>Trail of {_e(trace.doc_id)}</h1><p class='muted'>{len(trace.nights)} night(s): "
            f"{_e(', '.join(trace.nights))}; first seen {_e(trace.first_seen)}. Each step links to the Airflow task "
            f"whose log holds its lineage line. Ids, codes and pages only: no document text.</p>{hidden}"
            + "".join(sections)
            + "<p class='muted'><a href='/docverify/reports/'>Nightly reports</a> · <a href='/docverify/reviews/'>"
              "Review queue</a></p>")


@router.get("/{doc_id}", response_class=HTMLResponse, dependencies=READ)
def trace_page(doc_id: str, reader: Annotated[bool, Depends(may_read_packets)]) -> HTMLResponse:
    check_id(doc_id)
    try:
        trace = document_trace(config.artifact_store(), doc_id)
    except InputError:
        raise HTTPException(status_code=400, detail="not a document id") from None
    except UnknownDocument:
        raise HTTPException(status_code=404, detail=f"no document {doc_id} in any night") from None
    if not reader:
        trace = trace.redacted()
    style = ("ol.trail{padding-left:1.4em}li.step{margin:.5em 0}.attempt{margin:.2em 0 .2em 1em}"
             ".attempt ul{margin:.1em 0}.phi{color:#444;font-size:.9em}")
    body = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Trail of {_e(doc_id)}</title>"
            f"<style>{STYLE}{style}</style></head><body>{trace_html(trace, reader)}</body></html>")
    return HTMLResponse(body, headers=HEADERS)
