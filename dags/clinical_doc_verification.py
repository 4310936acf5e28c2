"""The nightly DAG: verify AI classifications of one night's clinical PDFs.

Wiring only: every task body lives in ``plugins/docverify_airflow/tasks/nightly.py`` and calls the
domain core (``plugins/docverify``). Heavy imports (PDF parsing, LLM clients) happen inside the
task bodies, never at parse time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import pendulum

# airflow.sdk's __init__.pyi does not list the deadline names its __init__.py exports
from airflow.sdk import (  # type: ignore[attr-defined]
    AsyncCallback,
    DeadlineAlert,
    DeadlineReference,
    dag,
    get_current_context,
    task,
)

from docverify_airflow.assets import ACCEPTED, SME_PACKETS
from docverify_airflow.config.params import NightParams
from docverify_airflow.notify import DocverifyNotifier
from docverify_airflow.operators.gemini_batch import NightlyGeminiBatchOperator
from docverify_airflow.operators.layout import NightlyDocumentAIOperator

DOC_MD = """
# clinical_doc_verification

One run = one batch = the date partition `<storage_root>/incoming/{{ ds }}/` (or the
`batch_prefix` param). Each PDF is parsed to a DocumentBundle (`document_ai`: Layout Parser batch
on a gs:// root when Variable `docverify_layout` is `document_ai`, as planned by `plan_document_ai`, skipped
otherwise; on the embedded default `layout_plan` settles what needs no parsing and maps the rest over
`layout_parse[part]` tasks of at least `layout_shard_size` PDFs; `layout` writes the night's index: the
local parts merged, or the Document AI outputs), then
`plan_shards` splits the documents into at most `max_shards` shards of at least `shard_size`, and
one mapped `verify[shard]` task per shard classifies each document (unless a companion
classification is given), runs V1–V4 (the V2–V4 judgments concurrently) and V5 on attempt 0 (one
`result.json` per document); `route` (the branch: V5 decided inside `verify`) routes them from the
shards' summaries:

* **accept** → `accepted/<ds>/<doc>.json`
* **plan_retry_shards → auto_fix_retry** → fix the shares, verify again (≤ 2 retries, MD5 cycle stop) → accept or escalate
* **write_sme_packets** → `sme_packets/sme_packet_<doc>.json` (also for PDFs that could not be parsed)
* **audit_sample** (after accept) → a sample of the accepts as audit packets `sme_packet_<doc>_audit.json`

`batch_report` writes `reports/<ds>/batch_report.{json,md,html}`. Re-runs are idempotent and
reuse unchanged bundles and classifications (`reuse_cached`). Storage root: Variable
`docverify_storage_root` (default `data` in the repository; `gs://…` in production); judge:
Variable `docverify_judge` (`offline` | `llm`, the model from the `docverify_llm` connection). With
Variable `docverify_llm_mode` = `batch` the `llm_batch_*` tasks send the night's uncached LLM requests
to Gemini batch jobs first (deferred; up to 24 h) and verify runs from the verdict cache; in online
mode (the default) they skip. Page text never goes to the logs: the
`lineage` lines carry ids, hashes, codes and decisions only.
"""

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "docverify",
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "execution_timeout": timedelta(minutes=60),
}
# A run not done this long after it was queued alerts (channels: Variables docverify_notify_*). Set
# DOCVERIFY_DEADLINE_MINUTES in the deployment's environment (make up / the browser test: 240). Unset
# = no deadline: `airflow dags test` of Airflow 3.3.2 fails on a Dag with a DeadlineAlert (StatementError
# in DeadlineAlert.get_by_id), and make run and the DAG tests use `dags test`.
_DEADLINE_MINUTES = int(os.environ.get("DOCVERIFY_DEADLINE_MINUTES", "0") or 0)
DEADLINE = timedelta(minutes=_DEADLINE_MINUTES) if _DEADLINE_MINUTES > 0 else None
LLM = {"pool": "llm"}  # tasks that may call an LLM take slots from the llm pool
# layout_parse tasks of one run at once (each runs parse_workers parser processes): 2 fits the
# embedded default's 2 cores; a deployment with more workers sets DOCVERIFY_LAYOUT_TASKS
LAYOUT_TASKS = int(os.environ.get("DOCVERIFY_LAYOUT_TASKS", "2") or 2)


@dag(
    dag_id="clinical_doc_verification",
    schedule=os.environ.get("DOCVERIFY_SCHEDULE", "0 2 * * *"),
    # Airflow creates no task for a date before start_date (a backfill or `dags test` of such a date
    # runs green with nothing verified): the default lies far back so every real night can be
    # re-verified; catchup=False keeps unpausing to the latest night. DOCVERIFY_START_DATE moves it.
    start_date=cast(datetime, pendulum.parse(os.environ.get("DOCVERIFY_START_DATE", "2000-01-01"), tz="UTC")),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    on_failure_callback=DocverifyNotifier("run_failed"),
    deadline=DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=DEADLINE,
                           callback=AsyncCallback("docverify_airflow.notify.deadline_missed",
                                                  kwargs={"deadline": f"within {DEADLINE} of being queued"}))
    if DEADLINE else None,
    doc_md=DOC_MD,
    tags=["docverify", "clinical", "verification"],
    params=NightParams.dag_params(),  # the form's fields: docverify_airflow.config.params.NightParams
)
def clinical_doc_verification():
    from docverify_airflow.tasks import nightly as T

    @task
    def discover() -> Mapping[str, object]:
        return T.discover(get_current_context())

    @task(multiple_outputs=True)
    def plan_document_ai() -> Mapping[str, object]:
        return T.plan_document_ai(get_current_context())

    @task(trigger_rule="none_failed")  # runs after document_ai whether it ran or skipped itself
    def layout_plan() -> Sequence[Mapping[str, object]]:
        return T.layout_plan(get_current_context())

    # mapped over the plan's parts (none with Document AI: skipped); at most LAYOUT_TASKS at once,
    # each with parse_workers parser processes
    @task(max_active_tis_per_dagrun=LAYOUT_TASKS)
    def layout_parse(part: dict) -> Mapping[str, object]:
        return T.layout_parse(get_current_context(), part)

    @task(trigger_rule="none_failed")  # after the parts (skipped when there is nothing to parse)
    def layout() -> Mapping[str, object]:
        return T.layout(get_current_context())

    @task(trigger_rule="none_failed")  # after layout and batch mode's last ingest (skipped online)
    def plan_shards() -> list[list[str]]:  # reads the night's index that layout wrote (the store, not XCom)
        return T.plan_shards(get_current_context())

    @task(**LLM)
    def verify(shard: list[str]) -> Mapping[str, object]:
        return T.verify(get_current_context(), shard)

    @task.branch(trigger_rule="none_failed")
    def route(shards: list[list[str]]) -> list[str]:  # the shard plan: which verify records to read
        return T.route(get_current_context(), shards)

    @task
    def plan_retry_shards() -> list[list[str]]:
        return T.plan_retry_shards(get_current_context())

    @task(**LLM)
    def auto_fix_retry(shard: list[str]) -> Mapping[str, object]:
        return T.auto_fix_retry(get_current_context(), shard)

    @task(trigger_rule="none_failed_min_one_success", outlets=[ACCEPTED])
    def accept() -> Mapping[str, object]:
        return T.accept(get_current_context())

    @task(trigger_rule="none_failed_min_one_success", outlets=[SME_PACKETS])
    def write_sme_packets() -> Mapping[str, object]:
        return T.write_sme_packets(get_current_context())

    @task(trigger_rule="none_failed_min_one_success", outlets=[SME_PACKETS])
    def audit_sample() -> Mapping[str, object]:
        return T.audit_sample(get_current_context())

    @task(trigger_rule="all_done", retries=0)
    def batch_report() -> Mapping[str, object]:
        return T.batch_report(get_current_context())

    @task(trigger_rule="one_failed", retries=0)
    def fail_run_if_a_task_failed() -> None:
        """batch_report runs whatever happened (all_done), so as the only leaf it would mark a
        run with a failed task successful. This leaf runs only when a task failed, and fails."""
        T.fail_run(get_current_context())

    found = discover()
    # Document AI batch on a gs:// root, as planned from the Variables (the request arrives by XCom);
    # it skips when the plan says so (local layout, local root, nothing new). The wait is deferred to
    # the triggerer whatever [operators] default_deferrable says: a night's batch can take hours.
    request = plan_document_ai()
    found >> request
    docai = NightlyDocumentAIOperator(
        task_id="document_ai", retries=1, deferrable=True, skip_reason=request["skip"],
        project_id=request["project_id"], location=request["location"], processor_id=request["processor_id"],
        processor_version=request["processor_version"], gcs_input_uris=request["gcs_input_uris"],
        gcs_output_uri=request["gcs_output_uri"], gcp_conn_id=request["gcp_conn_id"],
        poll_interval=request["poll_interval"])
    parts = layout_plan()
    docai >> parts
    laid_out = layout()
    layout_parse.expand(part=parts) >> laid_out
    # Batch mode (Variable docverify_llm_mode=batch, ADR 0016): two rounds (the judgments' prompts
    # need the classification) of collect → Gemini batch job (deferred) → ingest into the verdict
    # cache, then verify runs from the cache. The tasks are always in the graph and skip themselves in
    # online mode (the mode is a Variable, read at run time, never at parse time), so an online night
    # runs the same tasks as before plus these skipped ones.
    ingested = laid_out
    for rnd in ("classify", "judgments"):
        ingested = _batch_round(rnd, ingested, laid_out)
    shards = plan_shards()
    [laid_out, ingested] >> shards
    verified = verify.expand(shard=shards)
    routed = route(shards)  # reads the routes V5 decided in verify; it decides nothing (docs/architecture.md, Names)
    verified >> routed
    retry_shards = plan_retry_shards()
    retry = auto_fix_retry.expand(shard=retry_shards)
    routes = [accept(), write_sme_packets()]
    routed >> [retry_shards, *routes]
    retry >> routes
    audit = audit_sample()  # a sample of the night's accepts → audit packets (ADR 0023)
    routes[0] >> audit
    report = batch_report()
    [*routes, audit] >> report
    # The watcher hangs off the leaves only (a graph that reads at fit size): a failure anywhere
    # upstream reaches the routes as upstream_failed (their trigger rule none_failed_min_one_success),
    # and one_failed fires on failed or upstream_failed. Not downstream of the branch itself: a
    # branch skips every direct downstream it does not follow.
    [*routes, audit, report] >> fail_run_if_a_task_failed()


def _batch_round(rnd: str, after, laid_out):
    """One round of batch mode: ``llm_batch_collect_<rnd>`` (skips online, with the offline judge, or
    when every request is cached) → ``llm_batch_job_<rnd>`` (the provider's deferrable batch job
    operator) → ``llm_batch_ingest_<rnd>`` (after the job whatever its outcome: a failed job leaves
    every request to verify's online calls). Returns the ingest task."""

    @task(task_id=f"llm_batch_collect_{rnd}", multiple_outputs=True, trigger_rule="none_failed")
    def collect() -> dict:
        from docverify_airflow.tasks import llm_batch

        return dict(llm_batch.collect(get_current_context(), rnd))  # a typed XCom (TypedDict) as the dict the Dag declares

    @task(task_id=f"llm_batch_ingest_{rnd}", trigger_rule="all_done_min_one_success")
    def ingest() -> dict:
        from docverify_airflow.tasks import llm_batch

        return dict(llm_batch.ingest(get_current_context(), rnd))  # a typed XCom (TypedDict) as the dict the Dag declares

    plan = collect()
    [after, laid_out] >> plan
    # retries=1: a transient fault creating or following the job (the retry re-attaches to the job
    # recorded in the store, ADR 0019); a job that ran and failed is not retried
    # (AirflowFailException): its requests go to verify online instead of waiting for a second job
    job = NightlyGeminiBatchOperator(task_id=f"llm_batch_job_{rnd}", model=plan["model"],  # type: ignore[index]
                                     input_source=plan["file_name"], retries=1,  # type: ignore[index]
                                     execution_timeout=timedelta(hours=25))
    done = ingest()
    plan >> job >> done
    return done


clinical_doc_verification()
