"""The SME's review workspace, served by the ``docverify`` plugin under ``/docverify/reviews/``.

* ``GET  /reviews/`` — the queue: every pending review (filter by night, severity, kind, who has
  it open); audits of accepted documents in their own table; a button that opens reviews when
  packets wait with no review task (the review Dag did not run since they were written).
* ``GET  /reviews/{review_id}`` — one review: the packet (page images, issues, history) on the
  left, the answer on the right, visible without scrolling. Opening it takes a 20-minute lease
  for the user, so two SMEs never answer the same review; **Release** gives it back.
* ``POST /reviews/{review_id}`` — the answer. It is checked on the server with the rules the
  review task applies (:mod:`docverify.sme.answer`); a refused answer comes back with its reason
  and nothing is sent. A valid one completes the review's human-in-the-loop task through
  Airflow's own endpoint function, so the Dag, the audit trail and the ground truth are those of
  the Required Actions form; then the next review opens.
* ``GET  /reviews/next`` — the next open review after ``after`` in queue order.

Keyboard: ``a`` Agree, ``c`` Correct, ``x`` Cannot classify, ``Ctrl+Enter`` send, ``n`` next,
``r`` release. Pages carry no script from elsewhere (CSP with a per-response nonce); every
input-derived text is escaped. Logs name review ids and users, never document text."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from docverify.domain.models import DOC_TYPES, SMEPacket
from docverify.domain.templating import render
from docverify.sme.answer import (
    AGREE,
    CANNOT_CLASSIFY,
    CORRECT,
    UNCLASSIFIABLE_REASONS,
    AnswerRefused,
    answer_from_form,
    check_answer,
    page_types,
)
from docverify.sme.claims import claim, current_claim, is_free, release
from docverify.sme.context import load_bundle, load_pdf
from docverify.sme.document_view import PageControl, code_headline, document_html
from docverify.sme.facts import IMAGE_ONLY_ERRORS
from docverify.sme.packets import (
    PacketNotFoundError,
    list_pending_reviews,
    load_packet,
    refusal_rel,
)
from docverify.storage.store import ArtifactStore
from docverify_airflow import config
from docverify_airflow.airflow_internals import (
    DagAccessEntity,
    GetUserDep,
    SessionDep,
    conf,
    requires_access_dag,
)
from docverify_airflow.web import hitl
from docverify_airflow.web.common import HEADERS, SAFE_ID, STYLE, check_id
from docverify_airflow.web.sme_form import MAX_PAGE_FIELDS, page_field

log = logging.getLogger(__name__)

#: Every page of the workspace shows PHI: only those who may answer the reviews (an SME; a Viewer
#: of the Dag gets 403), the same permission Airflow's own answer endpoint checks
ANSWER = [Depends(requires_access_dag("PUT", access_entity=DagAccessEntity.HITL_DETAIL, param_dag_id="sme_review"))]
READ = ANSWER
#: a row of the review queue: a pending packet's row (docverify.sme.packets.list_pending_reviews) with
#: its waiting task and the holder of its lease
Row = dict[str, Any]
LEASE = dt.timedelta(minutes=20)
SEVERITIES = ("BLOCKER", "MAJOR", "MINOR", "ERROR")

router = APIRouter(prefix="/reviews")


# --------------------------------------------------------------------------- helpers
def _user_name(user: Any) -> str:
    return str(user.get_name() or user.get_id() or "").strip()


def _token(review_id: str, user: str) -> str:
    """The form's anti-forgery token: bound to the review and the user, keyed by the api-server's
    secret (a page of another site cannot know it)."""
    key = (conf.get("api", "secret_key", fallback="") or "docverify").encode()
    return hmac.new(key, f"{review_id}\x00{user}".encode(), hashlib.sha256).hexdigest()


def _lease_key(review_id: str) -> str:
    return f"workspace/{review_id}"


def _lease(store: ArtifactStore, review_id: str) -> dict[str, object] | None:
    held = current_claim(store, _lease_key(review_id))
    return None if is_free(held, dt.datetime.now(dt.UTC)) else held


def _lease_holder(store: ArtifactStore, review_id: str) -> str:
    held = _lease(store, review_id)
    return str(held.get("owner", "")).removeprefix("user:") if held else ""


def _take_lease(store: ArtifactStore, review_id: str, user: str) -> bool:
    return claim(store, _lease_key(review_id), f"user:{user}", LEASE, margin=dt.timedelta(0))


def _release_lease(store: ArtifactStore, review_id: str, user: str, reason: str) -> bool:
    return release(store, _lease_key(review_id), f"user:{user}", reason)


def _refusal(store: ArtifactStore, review_id: str) -> Row | None:
    """The reason the review task refused the last answer given in the Required Actions form."""
    value = store.read_json_if_exists(refusal_rel(review_id))
    return value if isinstance(value, dict) else None


def _queue(store: ArtifactStore, session: Session, *, night: str = "", severity: str = "", kind: str = "", reviewer: str = "") -> list[Row]:
    tasks = hitl.open_reviews(session)
    rows = []
    for r in list_pending_reviews(store):
        r = {**r, "task": tasks.get(r["review_id"]), "holder": _lease_holder(store, r["review_id"])}
        if night and r["night"] != night:
            continue
        if severity and (r["top_severity"] or "") != severity:
            continue
        if kind and r.get("review_kind", "escalation") != kind:
            continue
        if reviewer and r["holder"] != reviewer:
            continue
        rows.append(r)
    return rows


def _queue_parts(rows: list[Row], me: str, skipped: set[str]) -> dict[str, list[Row]]:
    """Every row of the queue in exactly one part: the one count behind the heading, the Start
    button and the line between them (issue 42: the heading counted every pending packet, 22, the
    button only the reviews you can open, 21, and nothing said what the other one was)."""
    parts: dict[str, list[Row]] = {"mine": [], "free": [], "held": [], "skipped": [], "not_open": []}
    for r in rows:
        part = ("skipped" if r["review_id"] in skipped else "not_open" if not r["task"] else
                "mine" if r["holder"] == me else "free" if not r["holder"] else "held")
        parts[part].append(r)
    return parts


def _counts_rest(parts: dict[str, list[Row]]) -> list[str]:
    """What the heading's count holds besides the reviews you can open, one phrase per kind (issue 42)."""
    rest = [f"{len(parts['held'])} being reviewed by someone else" if parts["held"] else "",
            f"{len(parts['skipped'])} skipped in this session" if parts["skipped"] else "",
            f"{len(parts['not_open'])} with no review task open yet (a review run opens it; an answer just sent "
            "is being saved)" if parts["not_open"] else ""]
    return [x for x in rest if x]


def _unreadable_table(rows: list[Row], filters: dict[str, str], me: str, skipped: set[str]) -> str:
    """The files with no page to look at, after the others, marked as an operator's work (ADR 0051)."""
    if not rows:
        return ""
    return _queue_table(rows, filters, me, skipped, heading=True)


def _reviewable_first(rows: list[Row]) -> list[Row]:
    """``rows`` with the documents that have a page to look at first, order kept otherwise (ADR 0051)."""
    return [r for r in rows if r.get("has_pages", True)] + [r for r in rows if not r.get("has_pages", True)]


def _doc_name(store: ArtifactStore, review_id: str) -> str:
    """The document's name of a review (its file's doc id), else the review id as given."""
    if not SAFE_ID.fullmatch(review_id) or ".." in review_id:
        return ""
    try:
        return load_packet(store, review_id).doc_id
    except (PacketNotFoundError, FileNotFoundError, ValueError):
        return review_id


SKIPPED_COOKIE = "docverify_skipped"


def _skipped(request: Request) -> list[str]:
    """The reviews this browser session skipped (ADR 0036): a session cookie of review ids, each
    checked like any id; they are not offered again until the reviewer brings them back."""
    raw = request.cookies.get(SKIPPED_COOKIE, "")
    return [i for i in raw.split(",") if i and SAFE_ID.fullmatch(i) and ".." not in i][:500]


def _set_skipped(response: Response, ids: list[str]) -> None:
    response.set_cookie(SKIPPED_COOKIE, ",".join(dict.fromkeys(ids)), path="/docverify/reviews", httponly=True,
                        samesite="strict")


def _filters(request: Request) -> dict[str, str]:
    return {k: request.query_params.get(k, "") for k in ("night", "severity", "kind", "reviewer")
            if request.query_params.get(k)}


def _page(title: str, body: str, *, nonce: str = "", script: str = "", status: int = 200) -> HTMLResponse:
    """A workspace page (``include/templates/web/page.html.j2``): ``body`` is the page's markup; with a
    nonce, ``script`` runs (the only script the Content-Security-Policy allows)."""
    script_src = f"; script-src 'nonce-{nonce}'" if nonce else ""
    csp = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-src 'self'; form-action 'self'; "
           f"frame-ancestors 'self'; base-uri 'none'{script_src}")
    page = render("web/page.html.j2", title=title, style=Markup(STYLE), body=Markup(body), nonce=nonce,
                  script=Markup(script))
    return HTMLResponse(page, status_code=status, headers={**HEADERS, "Content-Security-Policy": csp})


# --------------------------------------------------------------------------- the queue
def _queue_table(rows: list[Row], filters: dict[str, str], me: str = "", skipped: set[str] | None = None, *,
                 heading: bool = False) -> str:
    """The queue's table (``include/templates/web/queue_table.html.j2``, autoescaped): each row's night,
    document, severity, why it waits and its state for ``me``; ``heading``: the unreadable files' part."""
    q = f"?{urlencode(filters)}" if filters else ""
    return render("web/queue_table.html.j2", rows=rows, q=q, me=me, skipped=skipped or set(), heading=heading,
                  headline=code_headline)


@router.get("/", response_class=HTMLResponse, dependencies=READ)
def queue(request: Request, session: SessionDep, user: GetUserDep, opened: str = "", saved: str = "") -> HTMLResponse:
    store = config.artifact_store()
    filters = _filters(request)
    rows = _queue(store, session, **filters)
    # a file with no page to look at is an operator's work (ADR 0051): its own table, after the others
    escalations = [r for r in rows if r.get("review_kind", "escalation") != "audit" and r.get("has_pages", True)]
    audits = [r for r in rows if r.get("review_kind") == "audit"]
    unreadable = [r for r in rows if not r.get("has_pages", True)]
    waiting = [r for r in rows if r["task"] is None]
    nights = sorted({r["night"] for r in _queue(store, session) if r["night"]}, reverse=True)
    state = hitl.review_dag_state(session)

    me, skipped = _user_name(user), set(_skipped(request))
    # yours first (resume where you were), then the open ones; skipped ones wait until brought back;
    # a document with a page to look at before any file without one (ADR 0051)
    parts = _queue_parts(rows, me, skipped)  # one count: the heading's parts (issue 42)
    mine, free = parts["mine"], parts["free"]
    paused = bool(state["known"] and state["paused"])
    body = render(
        "web/queue.html.j2", total=len(rows), saved_name=_doc_name(store, saved) if saved else None, opened=opened,
        paused=paused, first=next(iter(_reviewable_first(mine + free)), None), n_mine=len(mine),
        n_open=len(mine) + len(free), n_skipped=len(parts["skipped"]),
        q=f"?{urlencode(filters)}" if filters else "", counts_rest=_counts_rest(parts),
        filters=filters, selects=[("night", nights, "Night"), ("severity", list(SEVERITIES), "Severity"),
                                  ("kind", ["escalation", "audit"], "Kind")],
        open_token=_token("open", me) if waiting and not state["run_active"] and not paused else "",
        n_waiting=len(waiting), n_escalations=len(escalations),
        escalations=Markup(_queue_table(escalations, filters, me, skipped)), n_audits=len(audits),
        audits=Markup(_queue_table(audits, filters, me, skipped)) if audits else "",
        unreadable=Markup(_unreadable_table(unreadable, filters, me, skipped)))
    return _page("Reviews waiting", body)


@router.post("/open", dependencies=ANSWER)
def open_waiting(session: SessionDep, user: GetUserDep, token: Annotated[str, Form()] = "") -> RedirectResponse:
    name = _user_name(user)
    if not hmac.compare_digest(token, _token("open", name)):
        raise HTTPException(status_code=400, detail="the form is stale: reload the page")
    run_id = hitl.start_review_run(session, name)
    log.info("review run %s started from the workspace by %s", run_id, name)
    return RedirectResponse(f"./?{urlencode({'opened': run_id})}", status_code=303)


@router.get("/next", dependencies=READ)
def next_review(request: Request, session: SessionDep, user: GetUserDep, after: str = "") -> RedirectResponse:
    filters = _filters(request)
    name = _user_name(user)
    skipped = _skipped(request)
    if request.query_params.get("skip") and after:
        check_id(after)
        skipped.append(after)  # a skip holds for the session (ADR 0036)
    rows = [r for r in _queue(config.artifact_store(), session, **filters) if r["task"] and r["holder"] in ("", name)]
    ids = [r["review_id"] for r in rows if r["review_id"] not in skipped]
    later = ids[ids.index(after) + 1:] + ids[:ids.index(after)] if after in ids else ids
    later = [i for i in later if i != after]
    # your own open reviews first (resume where you were); a file with no page to look at only when
    # no document with pages waits (ADR 0051)
    mine = {r["review_id"] for r in rows if r["holder"] == name}
    later = [i for i in later if i in mine] + [i for i in later if i not in mine]
    pages = {r["review_id"] for r in rows if r.get("has_pages", True)}
    later = [i for i in later if i in pages] + [i for i in later if i not in pages]
    saved = request.query_params.get("saved", "")
    if not later:
        extra = urlencode({**filters, **({"saved": saved} if saved else {})})
        response = RedirectResponse(f"./{f'?{extra}' if extra else ''}", status_code=303)
    else:
        extra = urlencode({**filters, **({"saved": saved} if saved else {})})
        response = RedirectResponse(f"{later[0]}{f'?{extra}' if extra else ''}", status_code=303)
    if request.query_params.get("skip"):
        _set_skipped(response, skipped)
    return response


@router.get("/unskip", dependencies=READ)
def unskip(request: Request) -> RedirectResponse:
    """Offer the reviews skipped in this session again."""
    filters = _filters(request)
    response = RedirectResponse(f"./{f'?{urlencode(filters)}' if filters else ''}", status_code=303)
    response.delete_cookie(SKIPPED_COOKIE, path="/docverify/reviews")
    return response


# --------------------------------------------------------------------------- one review
SCRIPT = """
const f=document.getElementById('answer');
function pick(v){const r=f.querySelector("input[name=choice][value='"+v+"']");if(r){r.checked=true;show();}}
function show(){const c=(f.querySelector('input[name=choice]:checked')||{}).value||'';
 document.getElementById('correct-fields').hidden=c!=='Correct';
 document.getElementById('cannot-fields').hidden=c!=='Cannot classify';}
f.addEventListener('change',show);show();
document.querySelectorAll('select[form=answer]').forEach(s=>s.addEventListener('change',()=>pick('Correct')));
document.addEventListener('keydown',e=>{
 const t=e.target.tagName;if(e.ctrlKey&&e.key==='Enter'){f.requestSubmit();return;}
 if(t==='INPUT'&&e.target.type!=='radio'||t==='TEXTAREA'||t==='SELECT'||e.ctrlKey||e.metaKey||e.altKey)return;
 if(e.key==='a')pick('Agree');else if(e.key==='c')pick('Correct');else if(e.key==='x')pick('Cannot classify');
 else if(e.key==='n')document.getElementById('next').click();
 else if(e.key==='r')document.getElementById('release').click();});
"""


def page_controls(task: hitl.OpenReview, preset: list[str | None], values: Mapping[str, str]) -> dict[int, PageControl]:
    """The answer form's type choice of each page, drawn beside its page (page → name, current value,
    the empty choice of a page the classifier left without a type); {} when the form takes page
    ranges instead (long documents, unknown page count)."""
    if not (preset and len(preset) <= MAX_PAGE_FIELDS and page_field(1) in task.params):
        return {}
    return {i: {"name": page_field(i), "current": values.get(page_field(i), kind),
                "blank": None if kind else "— choose a type —"} for i, kind in enumerate(preset, start=1)}


#: what each choice of the answer form means, beside it
HINTS = {AGREE: "the classification is right", CORRECT: "change the type of the pages that are wrong",
         CANNOT_CLASSIFY: "unreadable, wrong file, needs a re-scan"}


def _answer_form(review_id: str, packet: SMEPacket, task: hitl.OpenReview, user: str, *, preset: list[str | None],
                 values: Mapping[str, str],
                 choice: str, refused: str, q: str) -> str:
    """The answer form (``include/templates/web/answer_form.html.j2``, autoescaped) of the options the
    review task offers; the types are chosen beside the pages when :func:`page_controls` draws them."""
    options = [o for o in (AGREE, CORRECT, CANNOT_CLASSIFY) if o in task.options]
    return render("web/answer_form.html.j2", review_id=review_id, q=Markup(q), token=_token(review_id, user),
                  refused=refused, options=options, choice=choice, hints=HINTS,
                  keys={o: "x" if o == CANNOT_CLASSIFY else o[0].lower() for o in options},
                  beside_pages=bool(page_controls(task, preset, values)), values=values, doc_types=DOC_TYPES,
                  reasons=UNCLASSIFIABLE_REASONS, next_query=urlencode({"after": review_id, "skip": "1"}),
                  next_tail=("&" + q[1:]) if q else "")


#: the review page scrolls as one (no nested frame); the answer panel stays beside the pages
DOCUMENT_FIRST = (".review{height:auto;align-items:flex-start}.left{overflow:visible}.left h1{margin:.1em 0}"
                  ".crumbs{margin:0}.right{position:sticky;top:0;max-height:100vh;overflow:auto;align-self:flex-start}")


def review_document_html(store: ArtifactStore, packet: SMEPacket, controls: Mapping[int, PageControl] | None = None) -> str:
    """The document pane (:func:`docverify.sme.document_view.document_html`): the bundle and the
    PDF of the packet; the PDF of a document that could not be parsed only when it opened without
    text (a scan), never the input of another error (it may be a FIFO, a link, a huge file)."""
    try:
        bundle = load_bundle(store, packet)
    except FileNotFoundError:
        bundle = None
    readable = bundle is not None or (packet.error is not None and packet.error.get("error") in IMAGE_ONLY_ERRORS)
    return document_html(packet, bundle=bundle, pdf_bytes=load_pdf(store, packet) if readable else None,
                         page_controls=controls)


def _review_page(store: ArtifactStore, session: Session, review_id: str, user: str, request: Request, *, values: Mapping[str, str] | None = None,
                 choice: str = "", refused: str = "", status: int = 200) -> HTMLResponse:
    q = f"?{urlencode(_filters(request))}" if _filters(request) else ""
    try:
        packet = load_packet(store, review_id)
    except (PacketNotFoundError, ValueError):
        raise HTTPException(status_code=404, detail=f"no review {review_id}") from None
    task = hitl.open_reviews(session).get(review_id)
    title = f"Review {packet.doc_id}"
    page = functools.partial(render, "web/review.html.j2", packet=packet, q=Markup(q), quote=quote,
                             next_query=Markup(urlencode({"after": review_id})))
    if packet.review_status != "pending":
        return _page(title, page(state="answered"))
    if task is None:
        return _page(title, page(state="no_task"), status=409)
    holder = _lease_holder(store, review_id)
    if holder and holder != user:
        return _page(title, page(state="held", holder=holder, lease_minutes=int(LEASE.total_seconds() // 60)),
                     status=409)
    if task.assignees and user not in task.assignees:
        return _page(title, page(state="assigned"), status=403)
    _take_lease(store, review_id, user)
    last = _refusal(store, review_id)
    if not refused and last:
        refused = f"your last answer in Required Actions was refused: {last.get('reason', '')}"
    preset = page_types(packet)
    form = _answer_form(review_id, packet, task, user, preset=preset, values=values or {}, choice=choice,
                        refused=refused, q=q)
    # the document first (ADR 0036): every page once, the classification drawn on it, the answer beside;
    # and, after an answer, which one was sent and which review this is
    saved = request.query_params.get("saved", "")
    body = page(state="open", document_first=Markup(DOCUMENT_FIRST), form=Markup(form),
                saved_name=_doc_name(store, saved) if saved else None,
                document=Markup(review_document_html(store, packet, page_controls(task, preset, values or {}))))
    return _page(title, body, nonce=secrets.token_urlsafe(16), script=SCRIPT, status=status)


def _submit_retrying_a_busy_database(session: Session, user: Any, review_id: str, choice: str,
                                      fields: Mapping[str, str | None]) -> bool:
    """Send the answer; a metadata database that is busy (SQLite's "database is locked" while the
    scheduler writes) rolls the attempt back and tries again, at most 5 times. False: nothing sent."""
    for attempt in range(5):
        task = hitl.open_reviews(session).get(review_id)
        if task is None:
            return True  # answered meanwhile (this request's earlier attempt committed, or another)
        try:
            hitl.submit(session, user, task, choice, fields)
            session.commit()
            return True
        except OperationalError as exc:
            session.rollback()
            log.warning("review %s: the metadata database was busy (%s); try %d of 5", review_id,
                        type(exc.orig).__name__, attempt + 1)
            time.sleep(0.5 * (attempt + 1))
    return False


@router.get("/{review_id}", response_class=HTMLResponse, dependencies=READ)
def review(review_id: str, request: Request, session: SessionDep, user: GetUserDep) -> HTMLResponse:
    check_id(review_id)
    return _review_page(config.artifact_store(), session, review_id, _user_name(user), request)


@router.post("/{review_id}/release", dependencies=ANSWER)
def release_review(review_id: str, request: Request, user: GetUserDep,
                   token: Annotated[str, Form()] = "") -> RedirectResponse:
    check_id(review_id)
    name = _user_name(user)
    if not hmac.compare_digest(token, _token(review_id, name)):
        raise HTTPException(status_code=400, detail="the form is stale: reload the page")
    _release_lease(config.artifact_store(), review_id, name, "released")
    q = urlencode(_filters(request))
    return RedirectResponse(f"../{f'?{q}' if q else ''}", status_code=303)


@router.post("/{review_id}", response_class=HTMLResponse, dependencies=ANSWER)
async def answer(review_id: str, request: Request, session: SessionDep, user: GetUserDep) -> Response:
    """Read the form (async), then check and send the answer in a worker thread, as FastAPI runs a sync
    endpoint: sending waits on the metadata database, and a wait on the event loop would stall every request
    of the API server, the execution API's included -- with SQLite, the very request whose commit holds the
    lock the answer waits for."""
    check_id(review_id)
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    return await run_in_threadpool(_answer, review_id, request, session, user, values)


def _answer(review_id: str, request: Request, session: Session, user: Any, values: dict[str, str]) -> Response:
    name = _user_name(user)
    if not hmac.compare_digest(values.pop("token", ""), _token(review_id, name)):
        raise HTTPException(status_code=400, detail="the form is stale: reload the review page")
    choice = values.pop("choice", "")
    store = config.artifact_store()
    task = hitl.open_reviews(session).get(review_id)
    holder = _lease_holder(store, review_id)
    if task is None or (holder and holder != name):
        return _review_page(store, session, review_id, name, request)  # answered, closed or taken meanwhile
    packet = load_packet(store, review_id)
    preset = page_types(packet)
    fields = {k: (v or None) for k, v in values.items() if k in task.params}
    if "notes" in task.params:
        fields["notes"] = values.get("notes", "")
    try:
        if not choice:
            raise AnswerRefused("choose an answer: Agree, Correct or Cannot classify")
        if choice not in task.options:
            raise AnswerRefused(f"{choice!r} is not an answer this review offers ({', '.join(task.options)})")
        checked = answer_from_form([choice], fields, preset)
        check_answer(store, review_id, checked)
    except AnswerRefused as exc:
        log.info("review %s: answer of %s refused before sending (%s)", review_id, name, exc.reason)
        return _review_page(store, session, review_id, name, request, values=values, choice=choice,
                            refused=exc.reason, status=422)
    if not _submit_retrying_a_busy_database(session, user, review_id, choice, fields):
        return _review_page(store, session, review_id, name, request, values=values, choice=choice, status=503,
                            refused="the database was busy and nothing was sent: press Send again")
    _release_lease(store, review_id, name, "answered")
    log.info("review %s: %s answered %s from the workspace", review_id, name, choice)
    q = urlencode({**_filters(request), "after": review_id, "saved": review_id})
    return RedirectResponse(f"next?{q}", status_code=303)
