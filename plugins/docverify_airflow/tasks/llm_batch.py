"""Batch mode's task bodies (Variable ``docverify_llm_mode = batch``, ADR 0016): per round
(``classify``, then ``judgments``) collect → upload → the provider's batch job operator → ingest,
around the domain core's :mod:`docverify.stages.batch_mode`.

* ``collect`` runs the verify code with a recording judge over the night and uploads the requests
  that miss the verdict cache (JSONL, Files API through the Google provider's
  :class:`GenAIGeminiAPIHook`); it **skips** (and with it the job) in online mode, with the offline
  judge, and when every request is cached — a re-run of a night creates no batch job;
* the job: :class:`docverify_airflow.operators.gemini_batch.NightlyGeminiBatchOperator`;
* ``ingest`` (``all_done_min_one_success``: also after a failed job) downloads the results file and writes the
  answers into the verdict cache; failed, degenerate (:func:`docverify.stages.batch_mode.degenerate_reason`: no
  candidate, a finishReason other than STOP, no output tokens, no tool arguments) and missing items are left to
  verify's online calls (XCom ``degenerate`` counts them).

The Batch API here is the Gemini Developer API's (the provider's hook takes an API key): the LLM
connection must carry ``api_key`` (extra) or a password. For a test endpoint, ``GOOGLE_GEMINI_BASE_URL``
in the workers' and triggerer's environment points google-genai elsewhere (read by the installed
google-genai, ``_base_url.get_base_url``)."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import TYPE_CHECKING, TypedDict

from pydantic import JsonValue

from docverify.llm.judge import LLMJudge
from docverify.stages import batch_mode as llm_batch
from docverify.stages.common import Batch
from docverify.stages.results import Collected, StageXCom
from docverify_airflow import config
from docverify_airflow.night import TaskContext

if TYPE_CHECKING:
    from airflow.providers.google.cloud.hooks.gen_ai import GenAIGeminiAPIHook

log = logging.getLogger(__name__)

#: The connection the provider's hooks are built on (GoogleBaseHook reads it; the Batch API calls
#: themselves authenticate with the API key).
GCP_CONN_ID = "google_cloud_default"


def round_conn(s: config.Settings, round_key: str) -> str:
    """The LLM connection a round's job runs on (ADR 0034): the classifier's for ``classify``, the
    judge's (``docverify_judge_conn_id``, else the classifier's) for ``judgments``."""
    return s.llm_conn if round_key == "classify" else s.judge_conn


def gemini_api_key(s: config.Settings, round_key: str = "classify") -> str:
    """The API key of the round's LLM connection (:func:`round_conn`; extra ``api_key``, else its
    password); ValueError (the task fails at once) when it has none: batch mode needs the Gemini API,
    not Vertex AI."""
    from airflow.sdk import BaseHook

    conn_id = round_conn(s, round_key)
    conn = BaseHook.get_connection(conn_id)
    key = (conn.extra_dejson or {}).get("api_key") or conn.password
    if not key:
        raise ValueError(f"Variable {config.VAR_LLM_MODE}=batch sends the night's requests to the Gemini API's Batch "
                         f"API, which takes an API key: the connection {conn_id!r} has none (extra api_key). Use "
                         f"a Gemini API connection or set {config.VAR_LLM_MODE} to online")
    return key


def hook(s: config.Settings, round_key: str = "classify") -> GenAIGeminiAPIHook:
    from airflow.providers.google.cloud.hooks.gen_ai import GenAIGeminiAPIHook

    return GenAIGeminiAPIHook(gemini_api_key=gemini_api_key(s, round_key), gcp_conn_id=GCP_CONN_ID)


def upload_requests(batch: Batch, out: Collected, api_hook: GenAIGeminiAPIHook) -> str:
    """The round's requests file (in the store) uploaded to the Files API through the provider's
    hook; returns the file's name (``files/…``). The local copy is a temporary file, deleted."""
    if out.rel is None:
        raise ValueError(f"batch {out.round}: no requests file to upload (nothing missed the verdict cache)")
    data = batch.rs.read_bytes(out.rel)
    fd, path = tempfile.mkstemp(prefix=f"docverify-{batch.ds}-{out.round}-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        f = api_hook.upload_file(path_to_file=path, upload_file_config={
            "display_name": f"docverify-{batch.ds}-{out.round}", "mime_type": "jsonl"})
    finally:
        os.unlink(path)
    if not f.name:
        raise RuntimeError(f"batch {out.round}: the Files API answered the upload without a file name")
    log.info("batch %s: %d request(s) uploaded as %s", out.round, out.requests, f.name)
    return f.name


class CollectXCom(TypedDict):
    """``llm_batch_collect_<round>``'s XCom: what the job step sends (the uploaded requests file's name)."""

    round: str
    model: str
    requests: int
    by_kind: dict[str, int]
    file_name: str


class IngestXCom(StageXCom):
    """``llm_batch_ingest_<round>``'s XCom: the round's record's counts and the job's state."""

    requests: int
    succeeded: int
    degenerate: int
    online_fallback: int
    state: str


def results_of(job: llm_batch.JobJSON | None, api_hook: GenAIGeminiAPIHook) -> dict[str, llm_batch.ResultItem] | None:
    """The answers of a finished job (``job.model_dump(mode="json")``): its results file downloaded
    through the hook, or its inline responses; None when the job did not succeed."""
    if not job or not str(job.get("state", "")).endswith("SUCCEEDED"):
        return None
    dest = job.get("dest")
    file_name = dest.get("file_name") if isinstance(dest, dict) else None
    if file_name:
        return llm_batch.results_from_jsonl(api_hook.download_file(file_name=str(file_name)))
    return llm_batch.results_from_inline(job)


def record_job(batch: Batch, round_key: str, name: str, *, source: str, model: str) -> None:
    """The round's batch job in the store (before the job task waits), with the sha256 of the
    requests it was created for: :func:`reattachable_job` finds it again on a retry or re-run."""
    rel = llm_batch.requests_rel(batch, round_key)
    sha = batch.rs.sha256(rel) if batch.rs.exists(rel) else None
    batch.rs.write_json(llm_batch.job_rel(batch, round_key),
                           {"name": name, "input_source": source, "model": model, "requests_sha256": sha})


def recorded_job(batch: Batch, round_key: str) -> str | None:
    """The name of the round's recorded job if it was created for the round's current requests file,
    else None."""
    rec = batch.rs.read_json_if_exists(llm_batch.job_rel(batch, round_key))
    rel = llm_batch.requests_rel(batch, round_key)
    if not isinstance(rec, dict) or not rec.get("name") or not batch.rs.exists(rel):
        return None
    return str(rec["name"]) if rec.get("requests_sha256") == batch.rs.sha256(rel) else None


def reattachable_job(batch: Batch, round_key: str, api_hook: GenAIGeminiAPIHook) -> str | None:
    """The name of the round's recorded job when it is still worth waiting for (pending, running
    or succeeded), else None (none recorded, recorded for other requests, gone, or ended badly:
    a new job is created). Any other error looking it up fails the task (retryably), never
    creates a second job."""
    name = recorded_job(batch, round_key)
    if name is None:
        return None
    try:
        job = api_hook.get_batch_job(job_name=name)
    except Exception as exc:
        if getattr(exc, "code", None) == 404:
            log.warning("batch %s: the recorded job %s is gone (404): a new job is created", round_key, name)
            return None
        raise
    state = job.state.name if job.state is not None else ""
    if state in ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED", "JOB_STATE_CANCELLED"):
        log.warning("batch %s: the recorded job %s ended %s: a new job is created", round_key, name, state)
        return None
    return name


def _recorded_succeeded_job(batch: Batch, round_key: str, s: config.Settings) -> dict[str, JsonValue] | None:
    """The round's recorded job (``model_dump``) when the job task failed but the job SUCCEEDED."""
    name = recorded_job(batch, round_key)
    if name is None:
        return None
    try:
        job = hook(s, round_key).get_batch_job(job_name=name)
    except Exception as exc:  # noqa: BLE001 - the job task's failure stands: requests go online
        log.warning("batch %s: the recorded job %s could not be read (%s)", round_key, name, type(exc).__name__)
        return None
    if job.state is None or not job.state.name.endswith("SUCCEEDED"):
        return None
    log.info("batch %s: the job task failed but the recorded job %s SUCCEEDED: its answers are ingested",
             round_key, name)
    dumped: dict[str, JsonValue] = job.model_dump(mode="json")
    return dumped


def _llm_judge(s: config.Settings) -> LLMJudge | None:
    if s.judge != "llm":
        return None
    judge = config.judge(s)  # the classifier's model, and the judge's when it is another (ADR 0034)
    return judge if isinstance(judge, LLMJudge) else None


def _batching(context: TaskContext) -> tuple[config.Settings, LLMJudge]:
    """The settings and the LLM judge of a night in batch mode; a skip (AirflowSkipException) in
    online mode or with the offline judge."""
    from airflow.sdk.exceptions import AirflowSkipException

    s = config.settings(context)
    if s.llm_mode != "batch":
        raise AirflowSkipException(f"Variable {config.VAR_LLM_MODE} is {s.llm_mode}: LLM requests are sent online")
    judge = _llm_judge(s)
    if judge is None:
        raise AirflowSkipException(f"Variable {config.VAR_JUDGE} is {s.judge}: no LLM request to batch")
    return s, judge


def collect(context: TaskContext, round_key: str) -> CollectXCom:
    """``llm_batch_collect_<round>``: what the job sends (XCom: the uploaded file's name, the model,
    counts) — or a skip."""
    from airflow.sdk.exceptions import AirflowSkipException

    from docverify_airflow.tasks.nightly import make_batch

    s, judge = _batching(context)
    batch = make_batch(context)
    out = llm_batch.collect(batch, judge, round_key, policy=config.policy(s))  # the verify tasks' policy
    if not out.requests:
        raise AirflowSkipException(f"every {round_key} request of this night is in the verdict cache: no batch job")
    return {"round": round_key, "model": out.model, "requests": out.requests, "by_kind": out.by_kind,
            "file_name": upload_requests(batch, out, hook(s, round_key))}


def ingest(context: TaskContext, round_key: str) -> IngestXCom:
    """``llm_batch_ingest_<round>`` (``all_done_min_one_success``: also after a failed job): the job's answers into
    the verdict cache."""
    from docverify_airflow.tasks.nightly import make_batch

    s, judge = _batching(context)
    ti = context["ti"]
    plan = ti.xcom_pull(task_ids=f"llm_batch_collect_{round_key}")
    job = ti.xcom_pull(task_ids=f"llm_batch_job_{round_key}") if plan else None
    batch = make_batch(context)
    if plan and not job:  # the job task failed: a recorded job that succeeded anyway is not lost
        job = _recorded_succeeded_job(batch, round_key, s)
    results = results_of(job, hook(s, round_key)) if job else None
    if plan and not job:
        job = {"name": None, "state": "JOB_FAILED"}  # the job task failed: every request goes online
    out = llm_batch.ingest(batch, judge, round_key, job, results)
    round_ = out.record.get("llm_batch") or {}
    return {**out.xcom(), "requests": round_["requests"], "succeeded": round_["succeeded"],
            "degenerate": round_["degenerate"], "online_fallback": round_["online_fallback"], "state": round_["state"]}
