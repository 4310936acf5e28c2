"""The nightly DAG's stages in one process (no Airflow), in the DAG's order: what the batch,
LLM, SME and GCS tests run on the sample batch. Shards run one after another, as under
``airflow dags test``, and every stage gets a fresh :class:`~docverify.stages.common.Batch` (an empty
run-store memo), as every task of the DAG does."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Callable, Iterable
from typing import Any

from docverify.judging.judges import Judge
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.results import Arbitrated
from docverify.stages.routes import accept, write_sme_packets
from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard

SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "include" / "samples"


def copy_samples(root: pathlib.Path, ds: str, names: Iterable[str] | None = None) -> pathlib.Path:
    """The sample PDFs and their companion classifications (all, or those of ``names``) into
    ``root/incoming/<ds>``."""
    incoming = root / "incoming" / ds
    incoming.mkdir(parents=True, exist_ok=True)
    files = SAMPLES.iterdir() if names is None else (f for n in names for f in SAMPLES.glob(f"{n}.*"))
    for f in files:
        if f.suffix == ".pdf" or f.name.endswith(".classification.json"):
            shutil.copy(f, incoming / f.name)
    return incoming


def run_stages(b: Batch, judge: Judge, *, shard_size: int = 25, workers: int = 1,
               before_verify: Callable[[Batch], Any] | None = None) -> Arbitrated:
    """discover → layout (local parser) → [``before_verify``: batch mode's rounds] → per shard:
    verify (classify, V1–V4, V5 on attempt 0) → arbiter → retry → accept → write_sme_packets.
    Returns the arbiter's result (its routes)."""
    discover(b.fresh())
    layout_local(b.fresh(), workers=workers, timeout_s=60)
    if before_verify is not None:
        before_verify(b)
    shards = plan_shards(b.fresh(), shard_size=shard_size)
    for i, shard in enumerate(shards):
        verify_shard(b.fresh(), shard, judge, str(i))
    routes = arbiter(b.fresh(), shards=len(shards))
    for i, shard in enumerate(retry_shards(b.fresh())):
        auto_fix_retry_shard(b.fresh(), shard, judge, str(i))
    accept(b.fresh())
    write_sme_packets(b.fresh())
    return routes


TERMINAL_JOB_STATES = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")


def llm_batch_rounds(judge, *, poll_s: float = 0.02, timeout_s: float = 60.0) -> Callable[[Batch], None]:
    """Batch mode's tasks in one process (``run_stages(before_verify=…)``): per round collect →
    upload through the Google provider's ``GenAIGeminiAPIHook`` → create the job and poll it (the
    hook calls the provider's operator and trigger make) → ingest; a job that does not succeed is
    ingested as ``JOB_FAILED`` (its task fails; ingest runs all_done). The hook's google-genai
    client goes where ``GOOGLE_GEMINI_BASE_URL`` points (the fake)."""
    import time

    from airflow.providers.google.cloud.hooks.gen_ai import GenAIGeminiAPIHook

    from docverify.stages import batch_mode as llm_batch
    from docverify_airflow.tasks.llm_batch import GCP_CONN_ID, results_of, upload_requests

    def run(b: Batch) -> None:
        hook = GenAIGeminiAPIHook(gemini_api_key="fake-key", gcp_conn_id=GCP_CONN_ID)
        for rnd in llm_batch.ROUNDS:
            out = llm_batch.collect(b.fresh(), judge, rnd)
            if not out.requests:
                continue
            name = upload_requests(b, out, hook)
            job = hook.create_batch_job(model=out.model, source=name,
                                        create_batch_job_config={"display_name": f"docverify-{b.ds}-{rnd}"})
            deadline = time.monotonic() + timeout_s
            while job.state.name not in TERMINAL_JOB_STATES and time.monotonic() < deadline:
                time.sleep(poll_s)
                job = hook.get_batch_job(job.name)
            dump = job.model_dump(mode="json")
            if dump["state"] != "JOB_STATE_SUCCEEDED":
                llm_batch.ingest(b.fresh(), judge, rnd, {"name": None, "state": "JOB_FAILED"}, None)
            else:
                llm_batch.ingest(b.fresh(), judge, rnd, dump, results_of(dump, hook))

    return run
