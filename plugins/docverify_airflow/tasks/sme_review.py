"""Task bodies of the ``sme_review`` DAG: Airflow context in, domain calls (``docverify.sme.*``) out.

Logs carry doc ids, sources, versions and URIs — never packet or page text (PHI). What they
return to XCom is the same: ids, counts, URIs.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import JsonValue

from docverify_airflow import config
from docverify_airflow.config.params import ReviewParams
from docverify_airflow.lineage import declared as lineage
from docverify_airflow.night import TaskContext
from docverify_airflow.web.urls import packet_url, review_url

if TYPE_CHECKING:
    from airflow.providers.standard.triggers.hitl import HITLTriggerEventSuccessPayload

log = logging.getLogger(__name__)

VAR_SME_ASSIGNEES = config.VAR_SME_ASSIGNEES


def _assignees(p: ReviewParams, context: TaskContext | None = None) -> str:
    """The ``assignees`` param (its names, comma separated), else the Variable ``docverify_sme_assignees``
    (empty = anyone). A Variable that cannot be read fails the task (never "anyone may answer")."""
    if p.assignees:
        return ",".join(p.assignees)
    return config.settings(context).sme_assignees


def _owner(context: TaskContext) -> str:
    return f"{context['dag'].dag_id if context.get('dag') else 'sme_review'}/{context.get('run_id', '')}"


def lineage_uris(context: TaskContext, roles: Sequence[str]) -> list[str]:
    """The review Dag's datasets of these roles (``docverify_airflow.lineage.declared.DATASETS``): the
    packets and the ground truth, whatever the night."""
    return lineage.uris_for(roles, config.artifact_store(context))


class ReviewKwargs(TypedDict):
    """One ``SMEReviewOperator``'s arguments (:func:`review_kwargs`, mapped)."""

    doc_id: str  # the review's key
    subject: str
    assignees: str
    response_timeout_hours: float


class SavedAnswer(TypedDict):
    """What :func:`record_answer` saved: ids, source, version and URI (nothing of the document)."""

    doc_id: str
    chosen_option: str
    ground_truth_source: str
    version: int
    uri: str
    reviewer: str


@lineage.task(lineage_uris)
def review_kwargs(context: TaskContext) -> list[ReviewKwargs]:
    """One ``SMEReviewOperator`` kwargs dict per pending packet this run claims, most severe
    first, at most ``max_reviews``. A packet open in another active run (claimed, see
    :mod:`docverify.sme.claims`) is left to that run, so runs never block or duplicate each
    other; a manual run picks up every pending packet nobody has open (the catch-up after the DAG
    was paused)."""
    from docverify.sme.claims import claim
    from docverify.sme.packets import list_pending_reviews

    p = ReviewParams.of(context)
    store = config.artifact_store(context)
    pending = list_pending_reviews(store)
    cap, assignees, hours = p.max_reviews, _assignees(p, context), p.response_timeout_hours
    owner = _owner(context)
    chosen: list[dict[str, Any]] = []
    open_elsewhere = 0
    for row in pending:
        if len(chosen) >= cap:
            break
        if claim(store, row["review_id"], owner, dt.timedelta(hours=hours)):
            chosen.append(row)
        else:
            open_elsewhere += 1
    log.info("%d pending packet(s) under %s; opening %d review(s) (max_reviews=%d), %d open in another run, "
             "assignees: %s", len(pending), store.uri("sme_packets"), len(chosen), cap, open_elsewhere,
             assignees or "anyone")
    from docverify.stages.common import lineage

    for row in chosen:
        lineage("list_pending_reviews", row["doc_id"], review_id=row["review_id"], rule=row["v5_rule"],
                top_severity=row["top_severity"], issues=row["total_issues"], packet_uri=row["packet_uri"],
                review="opened")
    # the task's doc_id is the review's key (night, opaque doc id, content); the subject names the document
    return [{"doc_id": r["review_id"], "subject": review_subject(r), "assignees": assignees,
             "response_timeout_hours": hours} for r in chosen]


def review_subject(row: dict[str, Any]) -> str:
    """The review's headline in Required Actions, most telling first (the list cuts long ones):
    ``[BLOCKER] quest_cbc_panel (2026-11-24) — V5 rule 2, 3 issue(s)``."""
    return ((f"[{row['top_severity']}] " if row.get("top_severity") else "")
            + ("AUDIT of an accepted document: " if row.get("review_kind") == "audit" else "")
            + f"{row['doc_id']}" + (f" ({row['night']})" if row.get("night") else "") + " — "
            + (f"V5 rule {row['v5_rule']}" if row.get("v5_rule") is not None
               else f"not processed ({row.get('error') or 'error'})")
            + f", {row.get('total_issues', 0)} issue(s)")


def record_refusal(context: TaskContext, doc_id: str, reason: str, answer: HITLTriggerEventSuccessPayload) -> None:
    """An answer the rules refused: kept beside the packet (the workspace shows it on the review)
    and logged. The reason names pages and types only, never document text."""
    from docverify.sme.packets import refusal_rel

    user = answer.get("responded_by_user")
    who = (user.get("name") or user.get("id") or "") if isinstance(user, dict) else ""
    config.artifact_store(context).write_json(refusal_rel(doc_id), {"review_id": doc_id, "reason": reason, "user": who,
                                                     "at": _utc(dt.datetime.now(dt.UTC))})
    log.warning("doc_id=%s: the answer of %s was refused and the review is open again: %s", doc_id, who or "?",
                reason)


def clear_refusal(context: TaskContext, doc_id: str) -> None:
    from docverify.sme.packets import refusal_rel

    config.artifact_store(context).delete(refusal_rel(doc_id))


def release_claim(context: TaskContext, doc_id: str, reason: str) -> None:
    """The review of ``doc_id`` in this run has ended: another run may open the packet again."""
    from docverify.sme.claims import release

    if release(config.artifact_store(context), doc_id, _owner(context), reason):
        log.info("doc_id=%s: review claim released (%s)", doc_id, reason)


def review_body(doc_id: str) -> str:
    """The form body: ids, counts, severities, codes, pages and a link to the review workspace —
    never page text, evidence or issue messages (Airflow shows the body to Viewers, ADR 0036;
    :func:`docverify.sme.form_body.review_form_markdown`). A packet that is no longer pending
    (answered meanwhile, e.g. from the notebook) skips the task."""
    from docverify.sme.form_body import review_form_markdown
    from docverify.sme.packets import html_rel, load_packet

    store = config.artifact_store()
    packet = load_packet(store, doc_id)
    if packet.review_status != "pending":
        from airflow.sdk.exceptions import AirflowSkipException

        log.info("doc_id=%s already %s (ground truth %s): no review opened", doc_id, packet.review_status,
                 packet.ground_truth_path)
        raise AirflowSkipException(f"packet {doc_id} is already {packet.review_status}")
    from docverify.sme.packets import packet_key

    key = packet_key(packet)
    html = html_rel(key)  # served by the api-server (plugin docverify) behind the reviewers' permission
    return review_form_markdown(packet, workspace_url=review_url(key),
                                packet_url=packet_url(key) if store.exists(html) else None)


def has_primary(doc_id: str) -> bool:
    """Whether the packet carries a primary classification an SME could agree with (a document
    that could not be parsed or classified has none: its form offers only Correct)."""
    from docverify.sme.packets import load_packet

    return isinstance(load_packet(config.artifact_store(), doc_id).primary_classification, dict)


def timed_out(doc_id: str) -> None:
    """No answer within the response timeout: no ground truth, the packet stays pending."""
    from airflow.sdk.exceptions import AirflowSkipException

    log.warning("doc_id=%s: no answer within the response timeout; no ground truth written, the packet stays "
                "pending for the next review run", doc_id)
    raise AirflowSkipException(f"no SME answer for {doc_id} within the response timeout; packet left pending")


def page_types(doc_id: str) -> list[str | None]:
    """The primary classification's type of each page of the packet's document (None where no
    segment covers it); [] when the page count is unknown (:func:`docverify.sme.answer.page_types`)."""
    from docverify.sme.answer import page_types as types_of
    from docverify.sme.packets import load_packet

    return types_of(load_packet(config.artifact_store(), doc_id))


def parse_segments(raw: JsonValue) -> list[dict[str, object]] | None:
    """The corrected segments from the form (:func:`docverify.sme.answer.parse_segments`)."""
    from docverify.sme.answer import parse_segments as parse

    return parse(raw)


def segments_from_pages(types: list[str | None]) -> list[dict[str, object]]:
    """Consecutive pages of one type → one segment (:func:`docverify.sme.answer.segments_from_pages`)."""
    from docverify.sme.answer import segments_from_pages as segments

    return segments(types)


def _utc(value: dt.datetime | str | None) -> str | None:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return aware.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value) if value else None


def record_answer(context: TaskContext, doc_id: str, answer: HITLTriggerEventSuccessPayload, *,
                  preset_pages: list[str | None] | None = None) -> SavedAnswer:
    """Save the SME's answer (HITL ``execute_complete`` payload) as ground truth through
    :mod:`docverify.sme.answer` (the rules every channel shares): *Agree* → SME_VALIDATED;
    *Correct* → SME_CORRECTED with the corrected type, page types and/or segments; *Cannot
    classify* → SME_UNCLASSIFIABLE with its reason. Returns ids, source, version and URI (nothing
    of the document). ``preset_pages``: the page types the form was preset to (:func:`page_types`),
    when the caller has them already.

    Raises:
        docverify.sme.answer.AnswerRefused: the rules refuse the answer (``reason`` says what to
            change; nothing is written).
        ValueError: the payload names no responding user.
    """
    from docverify.sme.answer import answer_from_form, save_answer

    params = answer.get("params_input") or {}
    user = answer.get("responded_by_user")
    reviewer = (user.get("name") or user.get("id") or "").strip() if isinstance(user, dict) else ""
    if not reviewer:
        raise ValueError(f"doc_id={doc_id}: the answer has no responding user; a ground-truth record needs one")
    preset = page_types(doc_id) if preset_pages is None else preset_pages
    review = answer_from_form(list(answer.get("chosen_options") or []), params, preset)
    ti = context.get("ti") or context.get("task_instance")
    channel = "airflow-hitl:" + "/".join(str(x) for x in (
        getattr(ti, "dag_id", ""), getattr(ti, "run_id", ""), getattr(ti, "task_id", ""))) + \
        f"[{getattr(ti, 'map_index', -1)}]"
    record, uri = save_answer(config.artifact_store(), doc_id, review, reviewer=reviewer,
                              reviewed_at=_utc(answer.get("responded_at")), channel=channel)
    from docverify.stages.common import lineage

    lineage("review", doc_id, answer=review.choice, ground_truth_source=record.ground_truth_source,
            version=record.version, output_uri=uri, channel=channel, reviewer=reviewer)
    return {"doc_id": doc_id, "chosen_option": review.choice, "ground_truth_source": record.ground_truth_source,
            "version": record.version, "uri": uri, "reviewer": reviewer}
