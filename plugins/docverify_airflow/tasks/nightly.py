"""Task bodies of the nightly DAG: Airflow context in, domain calls (``docverify.stages.*``) out.

The DAG file only wires these; each returns references and counts (XCom-sized), never
documents.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from pydantic import JsonValue

from docverify.reporting.contract import FalseAcceptJSON, ReportOutputs
from docverify.stages.audit import audit_sample as audit_sample_stage
from docverify.stages.common import AIRFLOW_MAP_LIMIT, Batch, shard_size_for
from docverify.stages.discover import discover as discover_stage
from docverify.stages.layout import (
    layout_docai_online,
    layout_docai_outputs,
    layout_local_part,
    merge_layout_local,
    plan_layout_local,
)
from docverify.stages.results import DiscoveredXCom, LayoutPart, LayoutPartXCom, StageXCom, WrittenXCom
from docverify.stages.routes import accept as accept_stage
from docverify.stages.routes import write_sme_packets as write_sme_packets_stage
from docverify.stages.verify import arbiter, auto_fix_retry_shard, retry_shards, verify_shard
from docverify.stages.verify import plan_shards as plan_shards_stage
from docverify.storage.store import ArtifactStore
from docverify_airflow import config
from docverify_airflow.config.params import NightParams
from docverify_airflow.lineage import declared as lineage
from docverify_airflow.night import TaskContext, night_of
from docverify_airflow.tasks import wiring

if TYPE_CHECKING:
    from docverify_airflow.tasks.document_ai import DocAIRequest

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
#: a stage that cuts the night's documents into shards: (batch, shard_size, max_shards, map limit) → shards
ShardPlanner = Callable[[Batch, int, int, int], list[list[str]]]


def retry_rule(fn: Callable[P, R]) -> Callable[P, R]:
    """The one retry rule of the nightly tasks: a deterministic failure — a configuration value
    or an input that is wrong (``ValueError``: an unknown judge, an unsafe ``batch_prefix``, a
    malformed processor name, an invalid stored record) — fails the task **at once**
    (``AirflowFailException``: another try would repeat it); anything else (an unreadable
    Variable, a storage or network error) fails the try and Airflow retries it with its
    exponential backoff (``retries``/``retry_delay`` of the DAG). LLM calls inside a task have
    their own transient-fault retries (``docverify.llm.faults.BackoffRetry``). Issue 22: a misconfigured LLM
    connection (``ConfigurationFault``) or a spent daily quota (``DailyQuotaExhausted``) fails at once
    too — a retry would get the same answer; a ``ServiceOutage`` past its waiting budget is retried.
    A path the store refuses (``OutsideRootError``: a folder of the storage root that resolves
    outside it) is deterministic too: another try meets the same link (ADR 0033). An input that
    changed under the night is never the task's failure: it is that document's error."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from docverify.llm.faults import ConfigurationFault, DailyQuotaExhausted
        from docverify.storage.store import OutsideRootError

        try:
            return fn(*args, **kwargs)
        except (ValueError, OutsideRootError, ConfigurationFault, DailyQuotaExhausted) as exc:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"{type(exc).__name__}: {exc} (deterministic: not retried)") from exc

    return wrapper


def batch_prefix(params: Mapping[str, JsonValue], ds: str) -> str:
    """The ``batch_prefix`` param for the run of ``ds`` (:meth:`NightParams.prefix`); ``params``: the run's, as
    they came (validated here)."""
    return NightParams.model_validate(params).prefix(ds)


def make_batch(context: TaskContext) -> Batch:
    p = NightParams.of(context)
    store = ArtifactStore(config.settings(context).root)
    ds = night_of(context)
    return Batch(store=store, ds=ds, run_id=str(context.get("run_id", "")),
                   prefix=p.prefix(ds), reuse=p.reuse_cached, concurrency=p.concurrency)


def lineage_uris(context: TaskContext, roles: Sequence[str]) -> list[str]:
    """The night's datasets of these roles (``docverify_airflow.lineage.declared.DATASETS``) as URIs."""
    batch = make_batch(context)
    return lineage.uris_for(roles, batch.store, batch.rs, batch.incoming)


#: every task body below: its OpenLineage datasets and counts, its run id on the lineage lines
traced = lineage.task(lineage_uris)


@retry_rule
@traced
def discover(context: TaskContext) -> DiscoveredXCom:
    batch = make_batch(context)
    out = discover_stage(batch, NightParams.of(context).max_documents)
    log.info("discovered %d PDF(s) under %s", out.documents, batch.rs.uri(batch.incoming))
    if not out.documents:  # an empty night is reported (batch report) and alerted, never silently green
        from docverify_airflow import notify

        notify.send("empty_night", context, incoming=batch.rs.uri(batch.incoming))
    return out.xcom()


@retry_rule
@traced
def plan_document_ai(context: TaskContext) -> DocAIRequest:
    """The ``document_ai`` task's request (or why it skips): see :func:`docverify_airflow.tasks.document_ai.plan`."""
    from docverify_airflow.tasks import document_ai

    return document_ai.plan(make_batch(context), config.settings(context))


@retry_rule
@traced
def layout_plan(context: TaskContext) -> list[LayoutPartXCom]:
    """The local layout's parts (one mapped ``layout_parse`` each), after settling what needs no
    parsing (refused at discovery, unchanged bundles); none with Document AI (``layout`` does it
    all) — the mapped task is then skipped. A bad ``layout_shard_size``/``max_shards`` fails at once."""
    batch, s = make_batch(context), config.settings(context)
    if s.layout != "local":
        log.info("layout plan: Variable %s = %s, nothing to parse locally", config.VAR_LAYOUT, s.layout)
        return []
    p = NightParams.of(context)
    parts = plan_layout_local(batch, ocr=s.ocr, shard_size=p.layout_shard_size, max_shards=p.max_shards,
                              map_limit=map_limit())
    return [p.xcom() for p in parts]


@retry_rule
@traced
def layout_parse(context: TaskContext, part: Mapping[str, JsonValue]) -> StageXCom:
    """One part of the local layout: its PDFs through the parser's bounded child processes (the DAG
    param ``parse_timeout_s`` to open a PDF, the Variables ``docverify_parse_page_timeout_s`` per page
    and ``docverify_parse_file_ceiling_s`` per PDF, ADR 0047; a long scan's pages across the parse workers from
    ``docverify_parse_split_scan_pages`` image pages, ADR 0052)."""
    p, s = NightParams.of(context), config.settings(context)
    return layout_local_part(make_batch(context), LayoutPart.from_xcom(part), workers=p.parse_workers,
                             timeout_s=p.parse_timeout_s, ocr=s.ocr,
                             page_timeout_s=s.parse_page_timeout_s, file_ceiling_s=s.parse_file_ceiling_s,
                             split_scan_pages=s.parse_split_scan_pages).xcom()


@retry_rule
@traced
def layout(context: TaskContext) -> StageXCom:
    """The Variable ``docverify_layout`` picks the parser: ``local`` (pypdfium2 in bounded child
    processes, mapped: this task merges the ``layout_parse`` parts' records into the night's index)
    or ``document_ai``: on a gs:// root, the bundles come from the outputs of the ``document_ai``
    batch task (its XCom); on a local root, each PDF goes to the processor online."""
    batch, s = make_batch(context), config.settings(context)
    if s.layout == "local":
        return merge_layout_local(batch, ocr=s.ocr).xcom()
    conn_id = s.docai_conn_id
    if config.is_remote(batch.store.root):
        from airflow.sdk import ObjectStoragePath

        from docverify_airflow.tasks.document_ai import results_for_layout

        results = results_for_layout(context["ti"].xcom_pull(task_ids="document_ai"))
        return layout_docai_outputs(batch, results, lambda uri: ObjectStoragePath(uri, conn_id=conn_id)).xcom()
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    hook, name = DocumentAIHook(gcp_conn_id=conn_id), s.processor_name()
    return layout_docai_online(batch, lambda data: hook.process_document(name, data)).xcom()


def map_limit() -> int:
    """Airflow's ``[core] max_map_length``: more mapped task instances cannot be created."""
    from airflow.sdk import conf

    return conf.getint("core", "max_map_length", fallback=AIRFLOW_MAP_LIMIT)


def _shards(context: TaskContext, ids_of: ShardPlanner) -> list[list[str]]:
    """With the LLM judge the night's shards are at most ``docverify_llm_shards`` (the llm pool's
    slots): they all run at once and keep the quota busy to the end; more shards than slots run in
    waves, and the quota idles while a wave's tasks start (ADR 0015: a 1,000-document night at
    1,000 RPM took 1.41× the quota bound with 64 shards in 8 waves, 1.06× with 8 shards)."""
    p = NightParams.of(context)
    shard_size, max_shards, limit = p.shard_size, p.max_shards, map_limit()
    shard_size_for(0, shard_size, max_shards, limit)  # a bad param fails as such, before any cap hides it
    s = config.settings(context)
    if s.judge == "llm" and s.llm_shards < max_shards:
        log.info("LLM judge: at most %d shard(s) (Variable %s = the llm pool's slots), not %d", s.llm_shards,
                 config.VAR_LLM_SHARDS, max_shards)
        max_shards = s.llm_shards
    return ids_of(make_batch(context), shard_size, max_shards, limit)


@retry_rule
@traced
def plan_shards(context: TaskContext) -> list[list[str]]:
    """At most ``max_shards`` shards (``shard_size`` is their minimum size); a bad value or one over
    Airflow's map limit is a ValueError → fails at once (``retry_rule``), never retried."""
    return _shards(context, plan_shards_stage)


def _key(context: TaskContext) -> str:
    return str(context["ti"].map_index)


@retry_rule
@traced
def verify(context: TaskContext, shard: list[str]) -> StageXCom:
    """One shard: classify, V1–V4 and V5 on attempt 0 per document (``docverify.stages.verify.verify_shard``)."""
    _, deps = wiring.task_deps(context)
    return verify_shard(make_batch(context), shard, deps, _key(context)).xcom_with_routes()


@retry_rule
@traced
def route(context: TaskContext, shards: list[list[str]]) -> list[str]:
    """The branch: the task ids of the routes that have documents (from the verify shards' summaries;
    the second opinion, when on, was asked in ``verify`` — its VerifyDeps carry it)."""
    return arbiter(make_batch(context), shards=len(shards)).routes


@retry_rule
@traced
def plan_retry_shards(context: TaskContext) -> list[list[str]]:
    return _shards(context, retry_shards)


@retry_rule
@traced
def auto_fix_retry(context: TaskContext, shard: list[str]) -> StageXCom:
    _, deps = wiring.task_deps(context)
    return auto_fix_retry_shard(make_batch(context), shard, deps, _key(context)).xcom_with_routes()


@retry_rule
@traced
def accept(context: TaskContext) -> WrittenXCom:
    out = accept_stage(make_batch(context))
    if not out.accepted:
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException("no document reached accept in this run")
    return out.xcom()


@retry_rule
@traced
def audit_sample(context: TaskContext) -> WrittenXCom:
    """The night's audit of accepted documents (Variable ``docverify_audit_rate``; 0 = off): audit
    packets for the sample, reviewed in the ``sme_review`` DAG like escalations."""
    rate = config.settings(context).audit_rate
    out = audit_sample_stage(make_batch(context), rate)
    log.info("audit: %d accepted document(s), rate %.3f, sample %s; %d packet(s) written, %d kept",
             out.accepted, rate, out.sample, len(out.packets), len(out.kept))
    if out.packets:
        from docverify_airflow import notify

        notify.send("reviews_waiting", context, packets=len(out.packets), uri=out.uri, kind="audit")
    if not out.packets and not out.kept:
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException("no audit sample this run (no accepted document, or docverify_audit_rate is 0)")
    return out.xcom()


@retry_rule
@traced
def write_sme_packets(context: TaskContext) -> WrittenXCom:
    out = write_sme_packets_stage(make_batch(context))
    if out.packets:
        from docverify_airflow import notify

        notify.send("reviews_waiting", context, packets=len(out.packets), uri=out.uri)
        log.info("%d packet(s) to review: Browse → Required Actions (DAG sme_review); readable pages on the "
                 "api-server at /docverify/packets/", len(out.packets))
    if not out.packets and not out.kept_reviewed:
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException("no document was escalated in this run")
    return out.xcom()


class BatchReportXCom(ReportOutputs):
    """``batch_report``'s XCom: ``report.write``'s outputs and the night facet's data (without the
    false-accept figures: they only decide the alert)."""

    night: lineage.NightFacet


@retry_rule
@traced
def batch_report(context: TaskContext) -> BatchReportXCom:
    """The night's report; the XCom: what :func:`docverify.reporting.report.write` returns, the night's
    facts with the verification policy (the OpenLineage night facet), without the false-accept figures
    (they only decide the alert)."""
    from docverify.reporting import report

    written = report.write(make_batch(context))
    log.info("%s", written["summary"])
    log.info("report: %s | %s | %s", written["json"], written["markdown"], written["html"])
    _false_accept_alert(context, written["false_accept_night"], written["html"])
    policy = config.policy(config.settings(context)).model_dump(mode="json")
    return {"summary": written["summary"], "json": written["json"], "markdown": written["markdown"],
            "html": written["html"], "final_routes": written["final_routes"], "errors": written["errors"],
            "trend": written["trend"], "night": {**written["night"], "policy": policy}}


def _false_accept_alert(context: TaskContext, fa: FalseAcceptJSON | None, report_uri: str) -> None:
    """Notify when the night's false-accept interval lies above ``docverify_audit_alert_rate``
    (its lower bound exceeds the threshold). Never fails the report."""
    rate = fa["rate"] if fa else None
    if fa is None or rate is None:
        return
    threshold = config.settings(context).audit_alert_rate
    if fa["ci95_low"] > threshold:
        from docverify_airflow import notify

        log.warning("false-accept rate %.3f (95%% CI %.3f–%.3f, n=%d) above docverify_audit_alert_rate=%.3f",
                    rate, fa["ci95_low"], fa["ci95_high"], fa["n"], threshold)
        notify.send("false_accept_high", context, rate=f"{100 * rate:.1f}%", low=f"{100 * fa['ci95_low']:.1f}%",
                    high=f"{100 * fa['ci95_high']:.1f}%", n=fa["n"], threshold=threshold, report=report_uri)


def fail_run(context: TaskContext) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    raise AirflowFailException(
        "a task of this run failed (see the failed task's log); the batch report was still written "
        "and lists the documents that were not verified"
    )
