"""The DAG file imports cleanly, cheaply, and is configured the way operators expect."""

import subprocess
import sys

import pytest
from tests.dags.airflow_env import AIRFLOW_ENV, REPO

DAG_ID = "clinical_doc_verification"


@pytest.fixture(scope="module")
def dag():
    # parsing needs no metadata database: the migrate (airflow_db) is for the tests that run a DAG
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag.dags[DAG_ID]


def test_tags_doc_md_schedule(dag):
    assert dag.doc_md and "clinical_doc_verification" in dag.doc_md
    assert {"docverify", "clinical"} <= set(dag.tags)
    assert dag.catchup is False
    assert dag.timetable.expression == "0 2 * * *"
    assert dag.max_active_runs == 1


def test_old_nights_can_be_backfilled(dag):
    """A date before start_date would run green with no task: the default reaches far back."""
    assert dag.start_date.year <= 2000 and dag.catchup is False


def test_params_are_typed(dag):
    params = dag.params
    assert {"batch_prefix", "shard_size", "max_documents", "reuse_cached"} <= set(params.keys())
    assert params.get_param("shard_size").schema["type"] == "integer"
    assert params.get_param("reuse_cached").schema["type"] == "boolean"


def test_every_task_has_retries_and_a_timeout(dag):
    for t in dag.tasks:
        assert t.execution_timeout is not None, t.task_id
        if t.task_id not in ("batch_report", "fail_run_if_a_task_failed"):
            assert t.retries >= 1, t.task_id


def test_llm_tasks_use_the_llm_pool(dag):
    llm = {"verify", "auto_fix_retry"}
    assert {t.task_id for t in dag.tasks if t.pool == "llm"} == llm


def test_graph_shape(dag):
    t = dag.task_dict
    assert t["route"].__class__.__name__.startswith("_Branch")
    assert set(t["route"].downstream_task_ids) == {"plan_retry_shards", "accept", "write_sme_packets"}
    # one mapped verify task per shard (classify, V1–V4, V5 on attempt 0), then the branch
    assert {"verify", "plan_shards"} <= set(t["route"].upstream_task_ids)
    assert set(t["verify"].upstream_task_ids) == {"plan_shards"}
    assert not {"classify", "v1_schema", "v2_consistency", "v3_traps", "v4_evidence"} & set(t)
    assert t["accept"].trigger_rule == "none_failed_min_one_success"
    assert t["write_sme_packets"].trigger_rule == "none_failed_min_one_success"
    assert {o.name for o in t["accept"].outlets} == {"docverify_accepted"}
    assert {o.name for o in t["write_sme_packets"].outlets} == {"docverify_sme_packets"}
    assert t["batch_report"].trigger_rule == "all_done"
    # a failed task fails the run, although batch_report (all_done) still runs
    watcher = t["fail_run_if_a_task_failed"]
    assert watcher.trigger_rule == "one_failed" and not watcher.downstream_task_ids
    assert set(watcher.upstream_task_ids) == {"accept", "write_sme_packets", "audit_sample", "batch_report"}
    # the nightly audit (issue 21): after accept, like a route; its packets are SME packets
    assert set(t["audit_sample"].upstream_task_ids) == {"accept"}
    assert t["audit_sample"].trigger_rule == "none_failed_min_one_success"
    assert {o.name for o in t["audit_sample"].outlets} == {"docverify_sme_packets"}
    # every other task reaches the watcher through a route whose trigger rule turns a failure
    # upstream into upstream_failed (none_failed_min_one_success), never through all_done alone
    routes = {"accept", "write_sme_packets"}
    for task_id, task in t.items():
        if task_id in routes | {watcher.task_id, "batch_report", "audit_sample"}:
            continue
        assert routes & task.get_flat_relative_ids(upstream=False), task_id
    assert all(t[r].trigger_rule == "none_failed_min_one_success" for r in routes)


def test_failure_notifier_is_wired(dag):
    from docverify_airflow.notify import DocverifyNotifier

    callbacks = dag.on_failure_callback if isinstance(dag.on_failure_callback, list) else [dag.on_failure_callback]
    assert any(isinstance(c, DocverifyNotifier) and c.event == "run_failed" for c in callbacks)
    assert not dag.deadline  # off unless DOCVERIFY_DEADLINE_MINUTES is set (dags test cannot run with one)


def test_deadline_from_the_environment(monkeypatch):
    import runpy

    monkeypatch.setenv("DOCVERIFY_DEADLINE_MINUTES", "90")
    ns = runpy.run_path(str(REPO / "dags" / "clinical_doc_verification.py"))
    dag = ns["clinical_doc_verification"]() if callable(ns.get("clinical_doc_verification")) else None
    alerts = dag.deadline if isinstance(dag.deadline, list) else [dag.deadline]
    assert alerts and alerts[0].callback.path == "docverify_airflow.notify.deadline_missed"
    assert alerts[0].reference.__class__.__name__ == "DagRunQueuedAtDeadline"
    assert alerts[0].interval.total_seconds() == 90 * 60


@pytest.mark.slow
def test_parsing_imports_no_heavy_library():
    """A task process parses the DAG file every time: no PDF, LLM or Google client at parse time."""
    code = ("import sys, runpy; runpy.run_path(sys.argv[1]); "
            "heavy = [m for m in ('pypdfium2', 'pydantic_ai', 'google.genai', 'google.cloud.documentai', 'pdfplumber')"
            " if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    env = {**AIRFLOW_ENV}
    import os
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "dags" / "clinical_doc_verification.py")],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_task_of_the_two_dags_has_its_lineage_datasets():
    """A task added to a Dag without a line in lineage.DATASETS would emit events without datasets
    (ADR 0040): caught here."""
    from airflow.dag_processing.dagbag import DagBag

    from docverify_airflow.lineage.declared import DAGS, DATASETS

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    # tasks that move no data of the store (the fail-the-run leaf) or whose lineage is the provider
    # operator's own (Document AI, the Gemini batch jobs and their collect/ingest steps)
    own = {"document_ai", "fail_run_if_a_task_failed"}
    for dag_id in DAGS:
        for task_id in bag.dags[dag_id].task_ids:
            if task_id in own or task_id.startswith("llm_batch_"):
                continue
            assert task_id in DATASETS, f"{dag_id}.{task_id} declares no dataset: add it to lineage.DATASETS"
