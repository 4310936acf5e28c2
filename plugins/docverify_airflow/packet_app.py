"""The SME packets in the browser: a FastAPI app the Airflow api-server mounts at ``/docverify``
(registered by ``plugins/docverify_plugin.py``), behind Airflow's own authentication.

* ``GET /docverify/packets/`` — the packets waiting for review (HTML list, newest night first);
* ``GET /docverify/packets/{doc_id}`` — one packet's self-contained HTML rendering (page images,
  every issue marked, the whole history), as written by the nightly run;
* ``GET /docverify/trend/`` — the last nights side by side (documents, routes, escalation rate,
  audited accepts, the false-accept rate with its 95 % interval from the answers so far, cost,
  task time), with ``trend.csv`` and ``trend.json`` beside it for a warehouse. Counts only, no
  document text: readable by whoever may read the nightly Dag.

A request needs a logged-in Airflow user allowed to read the ``sme_review`` Dag (the UI's session
cookie or a bearer token), exactly like the Required Actions it belongs to. Documents are read
from the storage root of the Variable ``docverify_storage_root``; a doc id is checked before it
becomes part of a path. Responses forbid framing and caching (the pages hold PHI)."""

from __future__ import annotations

import html
import re

from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, Response

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "SAMEORIGIN", "X-Content-Type-Options": "nosniff",
           "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                                      "frame-ancestors 'self'"}

app = FastAPI(title="docverify SME packets", description="SME review packets of the nightly verification")
AUTH = [Depends(requires_access_dag("GET", param_dag_id="sme_review"))]
TREND_AUTH = [Depends(requires_access_dag("GET", param_dag_id="clinical_doc_verification"))]


def _store():
    from docverify.store import ArtifactStore
    from docverify_airflow import config

    return ArtifactStore(config.settings().root)


def packet_url(doc_id: str) -> str:
    """The packet's address on the api-server, relative to its root (works behind any host name)."""
    return f"/docverify/packets/{doc_id}"


@app.get("/packets/", response_class=HTMLResponse, dependencies=AUTH)
def pending() -> HTMLResponse:
    from docverify.sme import list_pending_reviews

    rows = list_pending_reviews(_store())
    items = "".join(
        f'<tr><td><a href="{html.escape(r["review_id"])}">{html.escape(r["doc_id"])}</a></td>'
        f'<td>{html.escape(r["review_id"])}</td>'
        f'<td>{html.escape(str(r.get("v5_rule") if r.get("v5_rule") is not None else "error"))}</td>'
        f'<td>{html.escape(str(r.get("top_severity") or ""))}</td><td>{html.escape(str(r.get("total_issues")))}</td>'
        f'<td>{html.escape(str(r.get("created_at") or ""))}</td></tr>' for r in rows)
    body = ("<!doctype html><html><head><meta charset='utf-8'><title>SME packets</title><style>"
            "body{font-family:sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left}</style></head><body>"
            f"<h1>SME packets waiting for review ({len(rows)})</h1><p>Answer them in Airflow: Browse → Required "
            "Actions.</p><table><tr><th>document</th><th>review (night, file, content)</th><th>V5 rule</th><th>top severity</th><th>issues</th>"
            f"<th>created</th></tr>{items}</table></body></html>")
    return HTMLResponse(body, headers=HEADERS)


@app.get("/packets/{doc_id}", response_class=HTMLResponse, dependencies=AUTH)
def packet(doc_id: str) -> HTMLResponse:
    if not SAFE_ID.fullmatch(doc_id) or ".." in doc_id:  # fullmatch: '$' passes a final newline
        raise HTTPException(status_code=400, detail="not a document id")
    from docverify.sme import html_rel

    try:
        data = _store().read_bytes(html_rel(doc_id))
    except FileNotFoundError:
        raise HTTPException(status_code=404, detail=f"no packet for {doc_id}") from None
    return HTMLResponse(data.decode("utf-8", errors="replace"), headers=HEADERS)


def _trend_rows() -> list[dict]:
    """The trend rows, with the false-accept figures of the answers given so far (an audit is
    answered after its night's report was written)."""
    from docverify import trend
    from docverify.report import feedback_section

    store = _store()
    return trend.build(store, feedback=feedback_section(store))


@app.get("/trend/", response_class=HTMLResponse, dependencies=TREND_AUTH)
def trend_page() -> HTMLResponse:
    from docverify.trend import COLUMNS

    rows = _trend_rows()

    def cell(r: dict, k: str) -> str:
        v = r.get(k)
        if v is None:
            return "n/a"
        if k in ("escalation_rate", "false_accept_rate", "false_accept_ci95_low", "false_accept_ci95_high"):
            return f"{100 * v:.1f} %"
        return str(v)
    head = "".join(f"<th>{html.escape(k.replace('_', ' '))}</th>" for k in COLUMNS)
    body_rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell(r, k))}</td>" for k in COLUMNS) + "</tr>"
                        for r in reversed(rows))
    body = ("<!doctype html><html><head><meta charset='utf-8'><title>Verification trend</title><style>"
            "body{font-family:sans-serif;margin:2em}td,th{padding:.3em .6em;text-align:right}"
            "th{font-size:.85em}tr:nth-child(even){background:#f4f4f4}</style></head><body>"
            f"<h1>The last {len(rows)} night(s)</h1><p>The false-accept rate is the weighted share of audited "
            "accepts an SME corrected, with its 95 % Wilson interval and n (answers so far); read the upper bound "
            "while n is small. Export: <a href='trend.csv'>trend.csv</a> · <a href='trend.json'>trend.json</a></p>"
            f"<table><tr>{head}</tr>{body_rows}</table></body></html>")
    return HTMLResponse(body, headers=HEADERS)


@app.get("/trend/trend.csv", dependencies=TREND_AUTH)
def trend_csv() -> Response:
    from docverify.trend import to_csv

    return Response(to_csv(_trend_rows()), media_type="text/csv",
                    headers={**HEADERS, "Content-Disposition": 'attachment; filename="docverify_trend.csv"'})


@app.get("/trend/trend.json", dependencies=TREND_AUTH)
def trend_json() -> JSONResponse:
    from docverify.trend import COLUMNS

    return JSONResponse({"columns": list(COLUMNS), "nights": _trend_rows()}, headers=HEADERS)
