"""The review workspace's side of Airflow: which reviews have a human-in-the-loop task waiting,
answering one through the same code path as Airflow's own ``PATCH …/hitlDetails`` endpoint (the
Required Actions form), and starting a review run.

Runs inside the api-server (the workspace is a FastAPI app of the ``docverify`` plugin), so it
reads the metadata database with the request's session. A review is the ``review`` task of an
``sme_review`` run whose rendered map index is the review's key (``map_index_template``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import JsonValue
from sqlalchemy import select
from sqlalchemy.orm import Session

from docverify_airflow.airflow_internals import (
    DagModel,
    DagRun,
    DagRunState,
    DagRunTriggeredByType,
    HITLDetail,
    TaskInstanceState,
    UpdateHITLDetailPayload,
    trigger_dag,
    update_hitl_detail,
)
from docverify_airflow.airflow_internals import TaskInstance as TI

DAG_ID = "sme_review"
TASK_ID = "review"


@dataclass(frozen=True)
class OpenReview:
    """A review task waiting for its answer."""

    review_id: str
    dag_run_id: str
    map_index: int
    options: tuple[str, ...]
    params: dict[str, JsonValue]  # the form's fields as Airflow serialised them: {name: {"value": …, "schema": …}}
    assignees: tuple[str, ...]  # user ids or names allowed to answer; empty = anyone


def open_reviews(session: Session) -> dict[str, OpenReview]:
    """Review key → its waiting task (the newest when several runs have one)."""
    rows = session.execute(
        select(TI.rendered_map_index, TI.run_id, TI.map_index, HITLDetail.options,
               HITLDetail.params, HITLDetail.assignees, HITLDetail.responded_at)
        .join(HITLDetail, HITLDetail.ti_id == TI.id)
        .where(TI.dag_id == DAG_ID, TI.task_id == TASK_ID,
               TI.state.in_([TaskInstanceState.AWAITING_INPUT, TaskInstanceState.DEFERRED]))
        .order_by(TI.start_date)).all()
    out: dict[str, OpenReview] = {}
    for key, run_id, map_index, options, params, assignees, responded_at in rows:
        if not key or responded_at is not None:
            continue
        users = tuple(str(u.get("id") or u.get("name") or "") for u in assignees or [] if isinstance(u, dict))
        out[key] = OpenReview(review_id=key, dag_run_id=run_id, map_index=map_index, options=tuple(options or ()),
                              params=dict(params or {}), assignees=users)
    return out


def form_defaults(review: OpenReview) -> dict[str, JsonValue]:
    """Every field of the review's form with the value it was opened with. Airflow requires an
    answer to carry exactly the form's fields."""
    return {name: (spec.get("value") if isinstance(spec, dict) else spec) for name, spec in review.params.items()}


def submit(session: Session, user: Any, review: OpenReview, chosen: str, params_input: Mapping[str, JsonValue]) -> None:
    """Answer the review as ``user`` — Airflow's own endpoint function, so the checks (one
    response only, assignees, allowed options), the audit columns and the task's resumption are
    exactly those of the Required Actions form. Raises FastAPI's HTTPException (409 answered
    meanwhile, 403 not an assignee, 400 not an option)."""
    fields = form_defaults(review)
    unknown = set(params_input) - set(fields)
    if unknown:
        raise ValueError(f"fields {sorted(unknown)} are not in the review's form")
    fields.update(params_input)
    update_hitl_detail(dag_id=DAG_ID, dag_run_id=review.dag_run_id, task_id=TASK_ID,
                       update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[chosen],
                                                                          params_input=fields),
                       user=user, session=session, map_index=review.map_index)


class ReviewDagState(TypedDict):
    """:func:`review_dag_state`: whether the review Dag is known and paused, and a run of it going."""

    known: bool
    paused: bool
    run_active: bool


def review_dag_state(session: Session) -> ReviewDagState:
    """Whether the review Dag is known and paused, and its runs still going."""
    paused = session.scalar(select(DagModel.is_paused).where(DagModel.dag_id == DAG_ID))
    active = session.scalar(select(DagRun.run_id).where(
        DagRun.dag_id == DAG_ID, DagRun.state.in_([DagRunState.QUEUED, DagRunState.RUNNING])).limit(1))
    return {"known": paused is not None, "paused": bool(paused), "run_active": active is not None}


def start_review_run(session: Session, user_name: str) -> str:
    """A manual ``sme_review`` run: it opens a review for every pending packet nobody has open."""
    run = trigger_dag(DAG_ID, triggered_by=DagRunTriggeredByType.REST_API, triggering_user_name=user_name,
                      note="opened from the review workspace", session=session)
    return run.run_id if run is not None else ""
