"""The SME packets in the browser: a FastAPI app the Airflow api-server mounts at ``/docverify``
(registered by ``plugins/docverify_plugin.py``), behind Airflow's own authentication.

* ``/docverify/reviews/…`` — the SME's review workspace (queue, one page per review, answers
  checked before they are sent): :mod:`docverify_airflow.web.review`;
* ``GET /docverify/packets/`` — the packets waiting for review (HTML list, most severe first);
* ``GET /docverify/packets/{doc_id}`` — one packet's self-contained HTML rendering (page images,
  every issue marked, the whole history), as written by the nightly run;
* ``GET /docverify/reports/`` — the nights that have a batch report (counts, links; Browse →
  Nightly reports); ``GET /docverify/reports/{night}`` — a night's batch report, each escalation
  linked to its review;
* ``GET /docverify/trace/{doc_id}`` — one document's trail across nights and Dags, each step linked
  to its task's log (:mod:`docverify_airflow.web.trail`; the nightly Dag's readers, PHI-prone
  fields for packet readers only);
* ``GET /docverify/trend/`` — the last nights side by side (documents, routes, escalation rate,
  audited accepts, the false-accept rate with its 95 % interval from the answers so far, cost,
  task time), with ``trend.csv`` and ``trend.json`` beside it for a warehouse. Counts only, no
  document text: readable by whoever may read the nightly Dag.

A request for a page holding PHI (packets, reviews) needs a logged-in Airflow user allowed to
answer the ``sme_review`` Dag's reviews (the UI's session cookie or a bearer token): with the
simple auth manager a ``user`` role or above; a ``viewer`` gets 403. The trend and the batch
reports (counts and ids) need read access to the nightly Dag. Documents are read
from the storage root of the Variable ``docverify_storage_root``; a doc id is checked before it
becomes part of a path. Responses forbid framing and caching (the pages hold PHI). People get
pages, not JSON: a browser without a session is sent to Airflow's login and back; an unknown id
or a refused request is a short HTML page naming what to do."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException

from docverify.domain.templating import render
from docverify.reporting import trend
from docverify.reporting.report import feedback_section
from docverify.reporting.trend import COLUMNS, night_counts, read_stored_report, to_csv
from docverify.sme.packets import PacketNotFoundError, html_rel, list_pending_reviews, load_packet, packet_key
from docverify.storage.paths import safe_ds
from docverify_airflow import config
from docverify_airflow.airflow_internals import DagAccessEntity, get_auth_manager, requires_access_dag
from docverify_airflow.web.common import HEADERS, STYLE, check_id, wants_html
from docverify_airflow.web.review import review_document_html
from docverify_airflow.web.review import router as _review_router
from docverify_airflow.web.trail import router as _trace_router

app = FastAPI(title="docverify SME packets", description="SME review packets of the nightly verification")
#: Packets hold PHI: readable by those who may answer the reviews (the ``sme_review`` Dag's
#: human-in-the-loop answer permission: an SME), not by whoever may look at the Dag (a Viewer)
AUTH = [Depends(requires_access_dag("PUT", access_entity=DagAccessEntity.HITL_DETAIL, param_dag_id="sme_review"))]
TREND_AUTH = [Depends(requires_access_dag("GET", param_dag_id="clinical_doc_verification"))]


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """A person gets a page: no session → Airflow's login and back here; 403/404/400 → a short
    page saying what happened. API clients (no text/html in Accept) keep the JSON error."""
    if not wants_html(request):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))
    if exc.status_code == 401:
        target = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        try:
            login = get_auth_manager().get_url_login(next_url=target)
        except RuntimeError:  # outside an api-server (no auth manager initialised): Airflow's login page
            login = f"/auth/login?{urlencode({'next': target})}"
        return RedirectResponse(login, status_code=303)
    path = request.url.path
    # a 404 says what is missing (ADR 0036): a night's report, a packet, a review
    missing = ("No batch report for this night: no nightly run has written one for that date (no run yet, or it "
               "has not finished). The nights that have one are listed in the reports index."
               if "/reports/" in path else
               "No such packet: the address is wrong, or the packet was withdrawn (its PDF left the night's folder)."
               if "/packets/" in path else
               "No such document: no night of the store holds that id (a document's id is its PDF's file name "
               "without .pdf, as the batch report lists it)."
               if "/trace/" in path else
               "No such review: it may have been answered or withdrawn, or the address is wrong.")
    what = {403: "You may not open this page: it holds clinical text, for reviewers only (users who may answer "
                 "the sme_review Dag's reviews). Ask an Airflow admin for that access.",
            404: missing,
            400: "This address is not valid."}.get(exc.status_code, "The request could not be served.")
    body = render("web/error.html.j2", status=exc.status_code, style=Markup(STYLE), what=what, detail=str(exc.detail),
                  to_reports="/reports/" in path or "/trace/" in path)
    return HTMLResponse(body, status_code=exc.status_code, headers=HEADERS)


@app.get("/packets/", response_class=HTMLResponse, dependencies=AUTH)
def pending() -> HTMLResponse:
    rows = list_pending_reviews(config.artifact_store())
    return HTMLResponse(render("web/pending.html.j2", rows=rows), headers=HEADERS)


@app.get("/packets/{doc_id}", response_class=HTMLResponse, dependencies=AUTH)
def packet(doc_id: str) -> HTMLResponse:
    """The packet as the clinician's screen shows the document (ADR 0036): every page once, the
    classification drawn on the pages, the findings on their pages in plain words, technical facts
    folded at the bottom; the review's answer is in the workspace. A packet whose JSON is gone but
    whose rendering the night wrote is served as written."""
    check_id(doc_id)
    store = config.artifact_store()
    try:
        pkt = load_packet(store, doc_id)
    except (PacketNotFoundError, FileNotFoundError, ValueError):
        pkt = None
    if pkt is not None:
        body = render("web/packet.html.j2", title=f"SME packet — {pkt.doc_id}", style=Markup(STYLE), pkt=pkt,
                      key=packet_key(pkt), document=Markup(review_document_html(store, pkt)))
        return HTMLResponse(body, headers=HEADERS)
    try:
        data = store.read_bytes(html_rel(doc_id))
    except FileNotFoundError:
        raise HTTPException(status_code=404, detail=f"no packet for {doc_id}") from None
    return HTMLResponse(data.decode("utf-8", errors="replace"), headers=HEADERS)


@app.get("/reports/", response_class=HTMLResponse, dependencies=TREND_AUTH)
def reports_index() -> HTMLResponse:
    """One row per night that has a batch report, newest first: documents, accepted, escalated,
    documents in error — the report's own counts (:func:`docverify.reporting.trend.night_counts`) —
    an EMPTY NIGHT flagged, with links to the report and to the night's reviews (counts only)."""
    store = config.artifact_store()
    rows = []
    for name, kind, _ in reversed(store.entries("reports")):
        if kind == "file" or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", name):  # a night's folder only
            continue
        try:
            safe_ds(name)
        except ValueError:
            continue
        rep = read_stored_report(store, name)  # as the trend reads it: one that is not a report is skipped
        if rep is None:
            continue
        rows.append({"name": name, "counts": night_counts(rep), "run_id": rep.run_id or ""})
    body = render("web/reports_index.html.j2", rows=rows, style=Markup(STYLE))
    return HTMLResponse(body, headers=HEADERS)


@app.get("/reports/{ds}", response_class=HTMLResponse, dependencies=TREND_AUTH)
def batch_report(ds: str) -> HTMLResponse:
    """A night's batch report (counts, routes, rules, issue codes; each escalated document linked
    to its review), as the nightly run wrote it."""
    try:
        safe_ds(ds)
    except ValueError:
        raise HTTPException(status_code=400, detail="not a night (2026-11-24)") from None
    try:
        data = config.artifact_store().read_bytes(f"reports/{ds}/batch_report.html")
    except FileNotFoundError:
        raise HTTPException(status_code=404, detail=f"no batch report for {ds}") from None
    return HTMLResponse(data.decode("utf-8", errors="replace"), headers=HEADERS)


def _trend_rows() -> list[dict[str, object]]:
    """The trend rows, with the false-accept figures of the answers given so far (an audit is
    answered after its night's report was written)."""
    store = config.artifact_store()
    return trend.build(store, feedback=feedback_section(store))


@app.get("/trend/", response_class=HTMLResponse, dependencies=TREND_AUTH)
def trend_page() -> HTMLResponse:
    rows = _trend_rows()

    def cell(r: dict[str, object], k: str) -> str:
        v = r.get(k)
        if v is None:
            return "n/a"
        if k in ("escalation_rate", "false_accept_rate", "false_accept_ci95_low", "false_accept_ci95_high"):
            return f"{100 * v:.1f} %" if isinstance(v, int | float) else str(v)
        return str(v)
    cells = [[cell(r, k) for k in COLUMNS] for r in reversed(rows)]
    return HTMLResponse(render("web/trend.html.j2", columns=COLUMNS, rows=cells), headers=HEADERS)


@app.get("/trend/trend.csv", dependencies=TREND_AUTH)
def trend_csv() -> Response:
    return Response(to_csv(_trend_rows()), media_type="text/csv",
                    headers={**HEADERS, "Content-Disposition": 'attachment; filename="docverify_trend.csv"'})


@app.get("/trend/trend.json", dependencies=TREND_AUTH)
def trend_json() -> JSONResponse:
    return JSONResponse({"columns": list(COLUMNS), "nights": _trend_rows()}, headers=HEADERS)


app.include_router(_review_router)  # the workspace shares the app
app.include_router(_trace_router)  # one document's trail
