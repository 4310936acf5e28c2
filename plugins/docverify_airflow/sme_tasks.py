"""Task bodies of the ``sme_review`` DAG: Airflow context in, domain calls (``docverify.sme``) out.

Logs carry doc ids, sources, versions and URIs — never packet or page text (PHI). What they
return to XCom is the same: ids, counts, URIs.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from typing import Any

from docverify_airflow import config

log = logging.getLogger(__name__)

VAR_SME_ASSIGNEES = config.VAR_SME_ASSIGNEES


def _store(context: dict[str, Any] | None = None):
    from docverify.store import ArtifactStore

    return ArtifactStore(config.settings(context).root)


def _assignees(params: dict[str, Any], context: dict[str, Any] | None = None) -> str:
    """The ``assignees`` param, else the Variable ``docverify_sme_assignees`` (comma separated;
    empty = anyone). A Variable that cannot be read fails the task (never "anyone may answer")."""
    value = (params.get("assignees") or "").strip()
    if value:
        return value
    return config.settings(context).sme_assignees


def _owner(context: dict[str, Any]) -> str:
    return f"{context['dag'].dag_id if context.get('dag') else 'sme_review'}/{context.get('run_id', '')}"


def review_kwargs(context: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``SMEReviewOperator`` kwargs dict per pending packet this run claims, most severe
    first, at most ``max_reviews``. A packet open in another active run (claimed, see
    :mod:`docverify.sme_claims`) is left to that run, so runs never block or duplicate each
    other; a manual run picks up every pending packet nobody has open (the catch-up after the DAG
    was paused)."""
    from docverify.sme import list_pending_reviews
    from docverify.sme_claims import claim

    params = context["params"]
    store = _store(context)
    pending = list_pending_reviews(store)
    cap = max(1, int(params.get("max_reviews", 50)))
    assignees = _assignees(params, context)
    hours = float(params.get("response_timeout_hours", 72))
    owner = _owner(context)
    chosen, open_elsewhere = [], 0
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
    from docverify.batch import lineage

    for row in chosen:
        lineage("list_pending_reviews", row["doc_id"], review_id=row["review_id"], rule=row["v5_rule"],
                top_severity=row["top_severity"], issues=row["total_issues"], packet_uri=row["packet_uri"],
                review="opened")
    # the task's doc_id is the review's key (night, file name, content); the subject names the document
    return [{"doc_id": r["review_id"],
             "subject": ("AUDIT of an accepted document: " if r.get("review_kind") == "audit" else "")
                        + f"{r['doc_id']}" + (f" ({r['night']})" if r.get("night") else "") + " — "
                        + (f"V5 rule {r['v5_rule']}" if r["v5_rule"] is not None
                           else f"not processed ({r.get('error') or 'error'})")
                        + (f", {r['top_severity']}" if r["top_severity"] else "")
                        + f", {r['total_issues']} issue(s)",
             "assignees": assignees, "response_timeout_hours": hours} for r in chosen]


def release_claim(context: dict[str, Any], doc_id: str, reason: str) -> None:
    """The review of ``doc_id`` in this run has ended: another run may open the packet again."""
    from docverify.sme_claims import release

    if release(_store(context), doc_id, _owner(context), reason):
        log.info("doc_id=%s: review claim released (%s)", doc_id, reason)


def review_body(doc_id: str) -> str:
    """The form body: the packet as Markdown with a link to its HTML rendering. A packet that is
    no longer pending (answered meanwhile, e.g. from the notebook) skips the task."""
    from docverify.sme import html_rel, load_packet
    from docverify.sme_render import packet_markdown

    store = _store()
    packet = load_packet(store, doc_id)
    if packet.review_status != "pending":
        from airflow.sdk.exceptions import AirflowSkipException

        log.info("doc_id=%s already %s (ground truth %s): no review opened", doc_id, packet.review_status,
                 packet.ground_truth_path)
        raise AirflowSkipException(f"packet {doc_id} is already {packet.review_status}")
    from docverify.sme import packet_key
    from docverify_airflow.packet_app import packet_url

    key = packet_key(packet)
    html = html_rel(key)  # served by the api-server (plugin docverify) behind Airflow's login
    return packet_markdown(packet, html_uri=packet_url(key) if store.exists(html) else None)


def has_primary(doc_id: str) -> bool:
    """Whether the packet carries a primary classification an SME could agree with (a document
    that could not be parsed or classified has none: its form offers only Correct)."""
    from docverify.sme import load_packet

    return isinstance(load_packet(_store(), doc_id).primary_classification, dict)


def timed_out(doc_id: str) -> None:
    """No answer within the response timeout: no ground truth, the packet stays pending."""
    from airflow.sdk.exceptions import AirflowSkipException

    log.warning("doc_id=%s: no answer within the response timeout; no ground truth written, the packet stays "
                "pending for the next review run", doc_id)
    raise AirflowSkipException(f"no SME answer for {doc_id} within the response timeout; packet left pending")


def page_types(doc_id: str) -> list[str | None]:
    """The primary classification's type of each page of the packet's document (None where no
    segment covers it); [] when the page count is unknown (a document that could not be parsed)."""
    from docverify.sme import load_packet

    packet = load_packet(_store(), doc_id)
    total = int(packet.total_pages or 0)
    types: list[str | None] = [None] * total
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else {}
    for seg in primary.get("segments") or []:
        try:
            first, last = int(seg["page_start"]), int(seg["page_end"])
        except (KeyError, TypeError, ValueError):
            continue
        for page in range(max(1, first), min(total, last) + 1):
            types[page - 1] = seg.get("dominant_type")
    return types


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s+(.+?)\s*$")


def parse_segments(raw: Any) -> list[dict] | None:
    """The corrected segments from the form: page ranges (``1-2 Genomic Report; 3 Clinical Note``,
    ``;`` or new lines between ranges, types in any letter case) or, as before, a JSON list.
    Coverage and order are checked by save_review; this reads the syntax and names what is wrong."""
    from docverify.models import DOC_TYPES

    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, list):
        return raw
    text = str(raw).strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"corrected_segments: not valid JSON at character {exc.pos}; or give page ranges "
                             "like 1-2 Genomic Report; 3 Clinical Note") from exc
    by_name = {t.lower(): t for t in DOC_TYPES}
    out = []
    for part in (p for p in re.split(r"[;\n]", text) if p.strip()):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"corrected_segments: cannot read range #{len(out) + 1}; write page ranges like "
                             "1-2 Genomic Report; 3 Clinical Note")
        first, last, kind = int(m.group(1)), int(m.group(2) or m.group(1)), by_name.get(m.group(3).strip().lower())
        if kind is None:
            raise ValueError(f"corrected_segments: range #{len(out) + 1} names no document type; use one of "
                             f"{', '.join(DOC_TYPES)}")
        out.append({"page_start": first, "page_end": last, "dominant_type": kind})
    return out


def segments_from_pages(types: list[str | None]) -> list[dict]:
    """Consecutive pages of one type → one segment."""
    out: list[dict] = []
    for page, kind in enumerate(types, start=1):
        if out and out[-1]["dominant_type"] == kind:
            out[-1]["page_end"] = page
        else:
            out.append({"page_start": page, "page_end": page, "dominant_type": kind})
    return out


def _utc(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value) if value else None


def record_answer(context: dict[str, Any], doc_id: str, answer: dict[str, Any], *,
                  preset_pages: list[str | None] | None = None) -> dict[str, Any]:
    """Save the SME's answer (HITL ``execute_complete`` payload) as ground truth. *Agree* →
    SME_VALIDATED; *Correct* → SME_CORRECTED with the corrected type and/or segments. Returns ids,
    source, version and URI (nothing of the document). ``preset_pages``: the page types the form
    was preset to (:func:`page_types`), when the caller has them already."""
    from docverify.sme import save_review
    from docverify_airflow.sme_form import AGREE, CORRECT, page_field

    chosen = list(answer.get("chosen_options") or [])
    if len(chosen) != 1 or chosen[0] not in (AGREE, CORRECT):
        raise ValueError(f"doc_id={doc_id}: expected exactly one of {AGREE!r}/{CORRECT!r}, got {chosen!r}")
    params = answer.get("params_input") or {}
    user = answer.get("responded_by_user") or {}
    reviewer = (user.get("name") or user.get("id") or "").strip() if isinstance(user, dict) else ""
    if not reviewer:
        raise ValueError(f"doc_id={doc_id}: the answer has no responding user; a ground-truth record needs one")
    agrees = chosen[0] == AGREE
    corrected_type = params.get("corrected_dominant_type") or None
    segments = parse_segments(params.get("corrected_segments"))
    preset = page_types(doc_id) if preset_pages is None else preset_pages
    pages = [params.get(page_field(i)) for i in range(1, len(preset) + 1)] if page_field(1) in params else []
    if pages and pages != preset:  # the page-by-page form: the SME changed a page
        if any(kind is None for kind in pages):
            raise ValueError(f"doc_id={doc_id}: every page needs a type (page "
                             f"{pages.index(None) + 1} has none); choose one of the five types")
        segments = segments_from_pages(pages)
    if agrees and (corrected_type or segments):
        raise ValueError(f"doc_id={doc_id}: 'Agree' was chosen but a correction was filled in; clear this task and "
                         f"answer again with 'Correct' (or with the correction fields empty)")
    ti = context.get("ti") or context.get("task_instance")
    channel = "airflow-hitl:" + "/".join(str(x) for x in (
        getattr(ti, "dag_id", ""), getattr(ti, "run_id", ""), getattr(ti, "task_id", ""))) + \
        f"[{getattr(ti, 'map_index', -1)}]"
    record, uri = save_review(_store(), doc_id, agrees=agrees, corrected_dominant_type=corrected_type,
                              corrected_segments=segments, correction_notes=params.get("notes") or "",
                              reviewer=reviewer, reviewed_at=_utc(answer.get("responded_at")), channel=channel)
    from docverify.batch import lineage

    lineage("review", doc_id, answer=chosen[0], ground_truth_source=record.ground_truth_source,
            version=record.version, output_uri=uri, channel=channel, reviewer=reviewer)
    return {"doc_id": doc_id, "chosen_option": chosen[0], "ground_truth_source": record.ground_truth_source,
            "version": record.version, "uri": uri, "reviewer": reviewer}
