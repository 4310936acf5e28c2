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

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from docverify.domain.templating import render
from docverify.reporting.trace import Step, Trace, UnknownDocument, document_trace
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


def trace_html(trace: Trace, reader: bool) -> str:
    """The page (``trace`` is already redacted for a reader who may not read packets), rendered from
    ``include/templates/web/trail.html.j2`` with autoescape: every id, code and PHI field is escaped there."""
    nights: dict[str, list[Step]] = {}
    for s in trace.steps:
        nights.setdefault(s.night, []).append(s)
    style = ("ol.trail{padding-left:1.4em}li.step{margin:.5em 0}.attempt{margin:.2em 0 .2em 1em}"
             ".attempt ul{margin:.1em 0}.phi{color:#444;font-size:.9em}")
    return render("web/trail.html.j2", doc_id=trace.doc_id, trace=trace, reader=reader, nights=nights, kinds=_KIND,
                  hidden=[_NAMES.get(h, h) for h in trace.hidden], quote=quote, style=Markup(STYLE + style))


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
    return HTMLResponse(trace_html(trace, reader), headers=HEADERS)
