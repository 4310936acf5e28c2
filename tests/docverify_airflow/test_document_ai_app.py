"""The application's side of Document AI (docverify_airflow.tasks.document_ai and the nightly operator):
the plan from the Variables, the package's error codes in the core's terms, and an operator that
only skips when told — its templated fields come from the plan, never from execute()."""

from __future__ import annotations

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


def test_every_package_error_code_maps_onto_a_core_parse_error_code():
    from docverify.layout.errors import PARSE_ERROR_CODES
    from docverify_airflow.tasks.document_ai import ERROR_CODES, results_for_layout
    from docverify_documentai.errors import DocumentAIErrorCode

    assert set(ERROR_CODES) == set(DocumentAIErrorCode)
    assert set(ERROR_CODES.values()) <= set(PARSE_ERROR_CODES)
    results = [{"input_uri": "gs://b/a.pdf", "ok": True, "error_code": None},
               {"input_uri": "gs://b/x.txt", "ok": False, "error_code": "UNSUPPORTED"},
               {"input_uri": "gs://b/h.pdf", "ok": False, "error_code": "TOO_MANY_PAGES"}]
    assert [r["error_code"] for r in results_for_layout(results)] == [None, "UNSUPPORTED", "TOO_MANY_PAGES"]
    assert results_for_layout(None) == []  # the operator skipped


def _batch(tmp_path):
    from docverify.stages.common import Batch
    from docverify.storage.store import ArtifactStore

    return Batch(store=ArtifactStore(tmp_path), ds="2026-11-20", run_id="r", prefix="", reuse=True, concurrency=1)


def test_plan_skips_on_the_local_layout_and_a_local_root(tmp_path):
    from docverify_airflow import config
    from docverify_airflow.tasks import document_ai

    local = config.Settings.parse({})
    request = document_ai.plan(_batch(tmp_path), local)
    assert request["skip"].startswith("docverify_layout=local") and request["gcs_input_uris"] == []
    assert set(request) == {"skip", "project_id", "location", "processor_id", "processor_version", "gcs_input_uris",
                            "gcs_output_uri", "gcp_conn_id", "poll_interval"}
    docai = config.Settings.parse({"docverify_layout": "document_ai", "docverify_docai_poll_s": "5"})
    request = document_ai.plan(_batch(tmp_path), docai)
    assert "not gs://" in request["skip"] and request["poll_interval"] == 5.0


def test_nightly_operator_only_skips_when_told():
    from airflow.sdk.exceptions import AirflowSkipException

    from docverify_airflow.operators.layout import NightlyDocumentAIOperator
    from docverify_documentai.operators.document_ai import DocumentAIBatchProcessOperator

    kw = {"processor_id": "p", "gcs_output_uri": "gs://o/docai/", "gcs_input_uris": ["gs://i/a.pdf"]}
    op = NightlyDocumentAIOperator(task_id="document_ai", skip_reason="docverify_layout=local: …", **kw)
    assert {"skip_reason", "poll_interval"} <= set(op.template_fields)
    assert set(DocumentAIBatchProcessOperator.template_fields) <= set(op.template_fields)
    before = {f: getattr(op, f) for f in op.template_fields}
    with pytest.raises(AirflowSkipException, match="docverify_layout=local"):
        op.execute({})
    assert {f: getattr(op, f) for f in op.template_fields} == before
    # the class adds nothing but the skip: execute_complete and the rest are the package's
    assert {k for k, v in vars(NightlyDocumentAIOperator).items() if callable(v)} == {"__init__", "execute"}

