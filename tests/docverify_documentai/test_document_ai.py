"""Document AI hook, trigger and operators against a local fake Document AI REST server.

The real ``google-cloud-documentai`` client (REST transport) talks to a ``http.server`` thread on
127.0.0.1 that serves ``:process`` with the real Layout Parser output of the shared corpora,
``:batchProcess`` with a long-running operation, and ``GET /v1/<operation>`` (not done twice, then
done with per-document statuses). No credentials: the Google connection comes from the environment
variable ``AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT`` with the provider's own ``is_anonymous`` extra (→
``google.auth.credentials.AnonymousCredentials``), its ``project`` extra, and
``documentai_api_endpoint`` pointing the hook at the fake server.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import importlib
import json
import subprocess
import sys
import threading

import pytest
from tests.dags.airflow_env import AIRFLOW_ENV, REPO  # sets AIRFLOW_HOME before any Airflow import
from tests.fake_docai import _META_TYPE, FakeDocumentAI, _handler  # noqa: F401

PROJECT = "test-project"
LOCATION = "us"
PROCESSOR = f"projects/{PROJECT}/locations/{LOCATION}/processors/layout1"
OUTPUT = "gs://docverify-out/docai"


@pytest.fixture(scope="module")
def layout_json(corpora_dir) -> dict:
    return json.loads((corpora_dir / "docai" / "layout_parser.json").read_text())


@pytest.fixture(scope="module")
def fake_server(layout_json):
    fake = FakeDocumentAI(layout_json)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def fake(fake_server, monkeypatch):
    """The fake server, reset, and the default Google connection pointing at it (anonymous)."""
    fake_server.reset()
    extra = {"is_anonymous": True, "project": PROJECT, "documentai_api_endpoint": fake_server.url}
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
    )
    return fake_server


@pytest.fixture(scope="module")
def gcs_emulator():
    """A real GCS emulator (gcp-storage-emulator, in memory) on a free local port."""
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    yield f"http://127.0.0.1:{server._api._httpd.server_address[1]}"
    server.stop()


def _shard_writer(client):
    """Writes a Document the way a batch job does: ``<folder>/<input stem>-<k>.json``, two shards
    (one top-level layout block each) with ``shardInfo``."""

    def write(folder: str, input_uri: str, document: dict) -> None:
        bucket, _, prefix = folder.removeprefix("gs://").partition("/")
        stem = input_uri.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        blocks = document["documentLayout"]["blocks"]
        for k, block in enumerate(blocks):
            shard = {"documentLayout": {"blocks": [block]},
                     "shardInfo": {"shardIndex": str(k), "shardCount": str(len(blocks))} if k else {"shardCount": str(len(blocks))}}
            client.bucket(bucket).blob(f"{prefix}/{stem}-{k}.json").upload_from_string(json.dumps(shard))

    return write


def _fast_retry():
    from docverify_documentai.hooks.document_ai import default_retry

    return default_retry(initial=0.01, maximum=0.05, timeout=10)


def _run_trigger(trigger):
    async def first_event():
        async for event in trigger.run():
            return event
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first_event(), timeout=30))


def _pdf(path, pages: int):
    from fpdf import FPDF

    pdf = FPDF()
    for i in range(pages):
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.cell(text=f"synthetic page {i + 1}")
    pdf.output(str(path))
    return path


# ---------------------------------------------------------------------------------------------
# pure helpers


def test_plan_requests_splits_dedupes_and_rejects():
    from docverify_documentai.operators.document_ai import plan_requests

    uris = [f"gs://b/in/{i:05d}.pdf" for i in range(12001)]
    plan = plan_requests([*uris, uris[3], "gs://b/in/notes.txt", "gs://b/in/huge.pdf"],
                         page_counts={"gs://b/in/huge.pdf": 501, uris[0]: 500})
    assert [len(r) for r in plan.requests] == [5000, 5000, 2001]
    assert [u for r in plan.requests for u in r] == uris  # order kept, duplicate dropped, 500 pages allowed
    assert {(e.file, e.code) for e in plan.rejected} == {("gs://b/in/notes.txt", "UNSUPPORTED"),
                                                        ("gs://b/in/huge.pdf", "TOO_MANY_PAGES")}
    huge = next(e for e in plan.rejected if e.code == "TOO_MANY_PAGES")
    assert "501 pages" in huge.message and "500" in huge.message
    assert [len(r) for r in plan_requests(uris[:7], max_files=3).requests] == [3, 3, 1]
    with pytest.raises(ValueError):
        plan_requests(uris, max_files=0)


def test_check_page_limit_says_what_to_do():
    from docverify_documentai.errors import DocumentAIInputError
    from docverify_documentai.utils.document_ai import check_page_limit

    check_page_limit("gs://b/a.pdf", 15, 15, online=True)  # at the limit: fine
    with pytest.raises(DocumentAIInputError, match="DocumentAIBatchProcessOperator") as online:
        check_page_limit("gs://b/a.pdf", 16, 15, online=True)
    with pytest.raises(DocumentAIInputError, match="split the PDF") as huge:
        check_page_limit("gs://b/a.pdf", 501, 15, online=True)
    assert online.value.code == huge.value.code == "TOO_MANY_PAGES" and online.value.file == "gs://b/a.pdf"


def test_summarize_operation_fills_proto3_defaults():
    from docverify_documentai.utils.document_ai import map_results, summarize_operation

    op = summarize_operation({"name": "projects/p/locations/us/operations/1",
                              "metadata": {"state": "RUNNING"}})
    assert op["done"] is False and op["failed"] is False and op["statuses"] == []
    done = summarize_operation({
        "name": "n", "done": True, "metadata": {"state": "SUCCEEDED", "individualProcessStatuses": [
            {"inputGcsSource": "gs://b/a.pdf", "status": {}, "outputGcsDestination": "gs://o/1/0"},
            {"inputGcsSource": "gs://b/c.pdf", "status": {"code": 3, "message": "bad"}}]}})
    results = map_results([done], ["gs://b/a.pdf", "gs://b/c.pdf", "gs://b/lost.pdf"])
    assert [(r["input_uri"], r["ok"], r["status_code"]) for r in results] == [
        ("gs://b/a.pdf", True, 0), ("gs://b/c.pdf", False, 3), ("gs://b/lost.pdf", False, 2)]
    assert results[0]["output_uri"] == "gs://o/1/0" and results[1]["output_uri"] is None


@pytest.mark.slow
def test_operator_module_does_not_import_the_documentai_client_at_parse_time():
    code = ("import sys, docverify_documentai.operators.document_ai as m; "
            "print('google.cloud.documentai' in sys.modules, 'docverify_documentai.hooks.document_ai' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**AIRFLOW_ENV, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------------------------------------
# the hook


def test_hook_builds_client_from_connection(fake):
    from google.auth.credentials import AnonymousCredentials

    from docverify_documentai.hooks.document_ai import DocumentAIHook

    hook = DocumentAIHook()
    assert hook.project_id == PROJECT
    assert isinstance(hook.get_credentials(), AnonymousCredentials)
    assert hook.transport == "rest" and hook.endpoint_for("eu") == fake.url
    assert hook.get_conn("us") is hook.get_conn("us")
    plain = DocumentAIHook(api_endpoint=None, transport="rest")
    plain.api_endpoint = None
    assert plain.endpoint_for("eu") == "eu-documentai.googleapis.com"
    with pytest.raises(ValueError, match="transport"):
        DocumentAIHook(transport="carrier-pigeon")
    with pytest.raises(ValueError, match="REST"):
        DocumentAIHook(transport="grpc")  # the connection's endpoint is http://: gRPC cannot take it


def test_hook_process_document_returns_the_real_layout_json(fake, layout_json):
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    document = DocumentAIHook().process_document(PROCESSOR, b"%PDF-1.7 fake", "application/pdf")
    assert document == layout_json  # the proto3-JSON round trip of the real fixture is exact
    assert len(document["documentLayout"]["blocks"]) == 2
    method, path, body = fake.requests[-1]
    assert (method, path) == ("POST", f"/v1/{PROCESSOR}:process")
    assert base64.b64decode(body["rawDocument"]["content"]) == b"%PDF-1.7 fake"
    assert body["rawDocument"]["mimeType"] == "application/pdf"


def test_hook_retries_503_then_succeeds(fake):
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    fake.fail_process = 2
    document = DocumentAIHook().process_document(PROCESSOR, b"%PDF", retry=_fast_retry())
    assert "documentLayout" in document
    assert [p for _, p, _ in fake.requests].count(f"/v1/{PROCESSOR}:process") == 3


def test_hook_does_not_retry_a_client_error(fake):
    from google.api_core.exceptions import BadRequest

    from docverify_documentai.hooks.document_ai import DocumentAIHook

    fake.fail_process, fake.fail_status = 3, 400
    with pytest.raises(BadRequest):
        DocumentAIHook().process_document(PROCESSOR, b"%PDF", retry=_fast_retry())
    assert len(fake.requests) == 1


def test_hook_batch_and_polling(fake):
    from docverify_documentai.hooks.document_ai import DocumentAIHook
    from docverify_documentai.utils.document_ai import summarize_operation

    hook = DocumentAIHook()
    inputs = ["gs://docverify-in/2026-11-20/a.pdf", "gs://docverify-in/2026-11-20/bad_scan.tiff"]
    name = hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=inputs)
    assert name.startswith(f"projects/{PROJECT}/locations/us/operations/")
    body = fake.batch_calls()[-1]
    assert [d["mimeType"] for d in body["inputDocuments"]["gcsDocuments"]["documents"]] == [
        "application/pdf", "image/tiff"]
    assert body["documentOutputConfig"]["gcsOutputConfig"]["gcsUri"] == OUTPUT
    polls = [hook.get_operation(name) for _ in range(3)]
    assert [p["done"] for p in polls] == [False, False, True]
    statuses = polls[-1]["metadata"]["individualProcessStatuses"]
    # one document failed: Document AI's partial failure (the operation's error, statuses kept)
    assert polls[-1]["metadata"]["state"] == "FAILED"
    assert polls[-1]["error"] == {"code": 3, "message": "Failed to process all documents."}
    assert statuses[0]["outputGcsDestination"] == f"{OUTPUT}/{name.rsplit('/', 1)[-1]}/0"
    summary = summarize_operation(polls[-1])
    assert [(s["status_code"], s["output_uri"] is not None) for s in summary["statuses"]] == [(0, True), (3, False)]
    with pytest.raises(ValueError, match="exactly one"):
        hook.batch_process_documents(PROCESSOR, OUTPUT)
    with pytest.raises(ValueError, match="known extension"):
        hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://b/x.txt"])


# ---------------------------------------------------------------------------------------------
# the trigger


def _trigger(names, **kw):
    from docverify_documentai.triggers.document_ai import DocumentAIBatchOperationTrigger

    return DocumentAIBatchOperationTrigger(operation_names=names, poll_interval=0.01, **kw)


def test_trigger_serialize_round_trip():
    trigger = _trigger(["projects/p/locations/us/operations/1"], max_poll_failures=3, api_endpoint="http://x:1")
    classpath, kwargs = trigger.serialize()
    assert classpath == "docverify_documentai.triggers.document_ai.DocumentAIBatchOperationTrigger"
    json.dumps(kwargs)  # stored by the triggerer as JSON
    module, _, cls = classpath.rpartition(".")
    again = getattr(importlib.import_module(module), cls)(**kwargs)  # what the triggerer does
    assert again.serialize() == (classpath, kwargs)


def test_trigger_polls_until_done(fake):
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    name = DocumentAIHook().batch_process_documents(
        PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf", "gs://in/bad.pdf"])
    event = _run_trigger(_trigger([name]))
    assert event.payload["status"] == "success"
    (op,) = event.payload["operations"]
    assert fake.operations[name]["polls"] == 3  # not done, not done, done
    assert [(s["input_uri"], s["status_code"]) for s in op["statuses"]] == [("gs://in/a.pdf", 0), ("gs://in/bad.pdf", 3)]


def test_trigger_survives_transient_poll_failures(fake):
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    name = DocumentAIHook().batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf"])
    fake.fail_get = 2
    event = _run_trigger(_trigger([name], max_poll_failures=3))
    assert event.payload["status"] == "success"
    gets = [p for m, p, _ in fake.requests if m == "GET"]
    assert len(gets) == 5  # two 503s, then not done twice, then done


def test_trigger_gives_up_after_bounded_failures(fake):
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    name = DocumentAIHook().batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf"])
    fake.fail_get = 10
    event = _run_trigger(_trigger([name], max_poll_failures=3))
    assert event.payload["status"] == "error" and event.payload["operation"] == name
    assert "3 consecutive polls failed" in event.payload["message"]
    assert len([1 for m, _, _ in fake.requests if m == "GET"]) == 3


def test_trigger_fails_fast_on_a_permanent_error(fake):
    event = _run_trigger(_trigger([f"projects/{PROJECT}/locations/us/operations/404404"]))
    assert event.payload["status"] == "error" and "NotFound" in event.payload["message"]
    assert len(fake.requests) == 1


# ---------------------------------------------------------------------------------------------
# the operators


def _batch_op(**kw):
    from docverify_documentai.operators.document_ai import DocumentAIBatchProcessOperator

    kw.setdefault("processor_id", "layout1")
    kw.setdefault("gcs_output_uri", OUTPUT)
    kw.setdefault("deferrable", True)
    return DocumentAIBatchProcessOperator(task_id="docai_batch", poll_interval=0.01, **kw)


def _defer_and_resume(op):
    from airflow.sdk.exceptions import TaskDeferred

    with pytest.raises(TaskDeferred) as info:
        op.execute({})
    deferred = info.value
    assert deferred.method_name == "execute_complete"
    classpath, kwargs = deferred.trigger.serialize()
    assert classpath.startswith("docverify_documentai.triggers.document_ai.")
    event = _run_trigger(deferred.trigger)
    return deferred, event, (lambda: getattr(op, deferred.method_name)({}, event.payload, **(deferred.kwargs or {})))


def test_batch_operator_defers_and_maps_each_input(fake):
    inputs = ["gs://in/2026-11-20/a.pdf", "gs://in/2026-11-20/bad_scan.pdf", "gs://in/2026-11-20/c.PDF",
              "gs://in/2026-11-20/readme.txt", "gs://in/2026-11-20/huge.pdf"]
    op = _batch_op(gcs_input_uris=inputs, page_counts={"gs://in/2026-11-20/huge.pdf": 640})
    deferred, event, resume = _defer_and_resume(op)
    assert deferred.trigger.operation_names == list(fake.operations)
    (body,) = fake.batch_calls()
    sent = [d["gcsUri"] for d in body["inputDocuments"]["gcsDocuments"]["documents"]]
    assert sent == inputs[:3]  # the .txt and the 640-page PDF are never sent
    results = resume()
    by_uri = {r["input_uri"]: r for r in results}
    assert [r["input_uri"] for r in results] == inputs[:3] + ["gs://in/2026-11-20/readme.txt", "gs://in/2026-11-20/huge.pdf"]
    (name,) = fake.operations
    op_id = name.rsplit("/", 1)[-1]
    assert by_uri[inputs[0]] == {"input_uri": inputs[0], "output_uri": f"{OUTPUT}/{op_id}/0", "operation": name,
                                 "status_code": 0, "status_message": "", "ok": True, "error_code": None}
    assert by_uri[inputs[2]]["output_uri"] == f"{OUTPUT}/{op_id}/2" and by_uri[inputs[2]]["ok"]
    bad = by_uri[inputs[1]]
    assert (bad["ok"], bad["status_code"], bad["output_uri"]) == (False, 3, None)
    assert "Unsupported" in bad["status_message"]
    assert (by_uri[inputs[4]]["ok"], by_uri[inputs[4]]["error_code"]) == (False, "TOO_MANY_PAGES")
    assert by_uri[inputs[3]]["error_code"] == "UNSUPPORTED"
    json.dumps(results)  # XCom-serialisable


@pytest.mark.slow
def test_batch_operator_splits_over_5000_files(fake):
    fake.not_done_polls = 0
    inputs = [f"gs://in/big/{i:05d}.pdf" for i in range(5001)]
    deferred, event, resume = _defer_and_resume(_batch_op(gcs_input_uris=inputs))
    calls = fake.batch_calls()
    assert [len(c["inputDocuments"]["gcsDocuments"]["documents"]) for c in calls] == [5000, 1]
    assert len(deferred.trigger.operation_names) == 2
    results = resume()
    assert len(results) == 5001 and all(r["ok"] for r in results)
    assert results[-1]["operation"] == deferred.trigger.operation_names[1]
    assert results[-1]["output_uri"].endswith("/0")  # index within its own request


def test_batch_operator_whole_operation_failure_raises(fake):
    from docverify_documentai.operators.document_ai import DocumentAIBatchOperationFailed

    deferred, event, resume = _defer_and_resume(_batch_op(processor_id="broken", gcs_input_uris=["gs://in/a.pdf"]))
    assert event.payload["status"] == "error"
    (name,) = fake.operations
    with pytest.raises(DocumentAIBatchOperationFailed) as info:
        resume()
    message = str(info.value)
    assert name in message and "roles/documentai.apiUser" in message and "'broken'" in message


def test_batch_operator_lost_operation_raises(fake):
    from docverify_documentai.operators.document_ai import DocumentAIBatchOperationFailed

    op = _batch_op(gcs_input_uris=["gs://in/a.pdf"])
    event = {"status": "error", "operation": "projects/p/locations/us/operations/9", "operations": [],
             "message": "could not follow Document AI operation projects/p/locations/us/operations/9: boom"}
    with pytest.raises(DocumentAIBatchOperationFailed, match="gcloud documentai operations describe"):
        op.execute_complete({}, event, rejected=[])


def test_batch_operator_non_deferrable_polls_in_execute(fake):
    fake.fail_get = 1  # one transient failure on the way
    results = _batch_op(gcs_input_uris=["gs://in/a.pdf", "gs://in/bad.pdf"], deferrable=False).execute({})
    assert [(r["input_uri"], r["ok"]) for r in results] == [("gs://in/a.pdf", True), ("gs://in/bad.pdf", False)]


def test_batch_operator_templated_fields_and_input_check():
    op = _batch_op(gcs_input_uris="gs://in/a.pdf, gs://in/b.pdf")
    assert {"project_id", "location", "processor_id", "processor_version", "gcs_input_uris", "gcs_input_prefix",
            "gcs_output_uri", "gcp_conn_id", "impersonation_chain"} == set(op.template_fields)
    assert op.deferrable is True  # as asked (_batch_op); the default follows Airflow's config, see below
    assert op.input_uris() == ["gs://in/a.pdf", "gs://in/b.pdf"]
    from airflow.sdk.exceptions import AirflowException

    with pytest.raises(AirflowException, match="exactly one"):
        _batch_op(gcs_input_uris=["gs://in/a.pdf"], gcs_input_prefix="gs://in/").input_uris()


def test_online_operator_writes_the_document(fake, tmp_path, layout_json):
    from docverify_documentai.operators.document_ai import DocumentAIProcessDocumentOperator

    pdf = _pdf(tmp_path / "small.pdf", 3)
    out = tmp_path / "small.docai.json"
    result = DocumentAIProcessDocumentOperator(
        task_id="docai_online", processor_id="layout1", input_path=str(pdf), output_path=str(out)
    ).execute({})
    assert result == {"input_uri": str(pdf), "output_uri": str(out), "pages": 3, "ok": True}
    assert json.loads(out.read_text()) == layout_json
    _, path, body = fake.requests[-1]
    assert path == f"/v1/{PROCESSOR}:process"
    assert base64.b64decode(body["rawDocument"]["content"]) == pdf.read_bytes()


def test_online_operator_refuses_more_than_15_pages(fake, tmp_path):
    from docverify_documentai.operators.document_ai import (
        DocumentAIPageLimitError,
        DocumentAIProcessDocumentOperator,
    )

    pdf = _pdf(tmp_path / "long.pdf", 16)
    op = DocumentAIProcessDocumentOperator(task_id="docai_online", processor_id="layout1", input_path=str(pdf))
    with pytest.raises(DocumentAIPageLimitError) as info:
        op.execute({})
    assert (info.value.pages, info.value.limit, info.value.code) == (16, 15, "TOO_MANY_PAGES")
    assert "DocumentAIBatchProcessOperator" in str(info.value) and str(pdf) in str(info.value)
    assert fake.requests == []  # nothing was sent



def test_batch_operator_over_a_prefix_reports_sharded_output_folders(fake, gcs_emulator, monkeypatch):
    """gcs_input_prefix is listed through the connection (GCS emulator), only readable files are
    sent, and each input's output folder holds exactly that input's shards."""
    from airflow.providers.google.cloud.hooks.gcs import GCSHook

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    gcs = GCSHook()
    client = gcs.get_conn()
    for bucket in ("docverify-in", "docverify-out"):
        if client.lookup_bucket(bucket) is None:
            client.create_bucket(bucket)
    for name in ("incoming/2026-11-20/a.pdf", "incoming/2026-11-20/b.pdf", "incoming/2026-11-20/bad_fax.tif",
                 "incoming/2026-11-20/manifest.csv", "incoming/2026-11-19/old.pdf"):
        gcs.upload("docverify-in", name, data=b"%PDF-1.4 placeholder")
    fake.write_shards = _shard_writer(client)
    fake.not_done_polls = 1

    results = _batch_op(gcs_input_prefix="gs://docverify-in/incoming/2026-11-20/", gcs_output_uri="gs://docverify-out/docai",
                        deferrable=False).execute({})
    sent = [d["gcsUri"] for d in fake.batch_calls()[0]["inputDocuments"]["gcsDocuments"]["documents"]]
    assert sent == ["gs://docverify-in/incoming/2026-11-20/a.pdf", "gs://docverify-in/incoming/2026-11-20/b.pdf",
                    "gs://docverify-in/incoming/2026-11-20/bad_fax.tif"]  # no .csv, nothing from the 19th
    assert [(r["input_uri"].rsplit("/", 1)[-1], r["ok"]) for r in results] == [
        ("a.pdf", True), ("b.pdf", True), ("bad_fax.tif", False)]
    for r in results[:2]:
        bucket, _, folder = r["output_uri"].removeprefix("gs://").partition("/")
        stem = r["input_uri"].rsplit("/", 1)[-1].removesuffix(".pdf")
        shards = gcs.list(bucket, prefix=folder + "/")
        assert shards == [f"{folder}/{stem}-0.json", f"{folder}/{stem}-1.json"]
        first = json.loads(gcs.download(bucket, shards[0]))
        assert first["shardInfo"]["shardCount"] == "2" and first["documentLayout"]["blocks"]
    from airflow.sdk.exceptions import AirflowException

    with pytest.raises(AirflowException, match="no document"):
        _batch_op(gcs_input_prefix="gs://docverify-in/nothing-here/").execute({})


def test_async_hook_builds_the_grpc_asyncio_client(fake):
    """With transport=grpc the trigger's hook uses the library's asyncio client (built here, not called:
    the fake server speaks REST)."""
    from docverify_documentai.hooks.document_ai import DocumentAIAsyncHook

    async def build():
        hook = DocumentAIAsyncHook(transport="grpc", api_endpoint="127.0.0.1:1")
        client = await hook.get_async_client("eu")
        return hook, client, await hook.get_async_client("eu")

    hook, client, again = asyncio.run(build())
    assert client is again
    assert type(client).__name__ == "DocumentProcessorServiceAsyncClient"
    assert type(client.transport).__name__ == "DocumentProcessorServiceGrpcAsyncIOTransport"
    assert client.transport._host == "127.0.0.1:1"


def test_operators_serialize_in_a_dag():
    """DAG files use these operators: the DAG (with templated fields) survives Airflow's serialization."""
    import datetime

    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    from docverify_documentai.operators.document_ai import (
        DocumentAIBatchProcessOperator,
        DocumentAIProcessDocumentOperator,
    )

    with DAG("docai_serialization", schedule=None, start_date=datetime.datetime(2026, 1, 1)) as dag:
        DocumentAIBatchProcessOperator(task_id="batch", processor_id="p", gcs_output_uri="gs://o/{{ ds }}/",
                                       gcs_input_prefix="gs://i/{{ ds }}/")
        DocumentAIProcessDocumentOperator(task_id="online", processor_id="p", input_path="gs://i/{{ ds }}/a.pdf")
    again = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert again.task_dict["batch"].gcs_input_prefix == "gs://i/{{ ds }}/"
    assert "gcs_input_uris" in again.task_dict["batch"].template_fields
    assert again.task_dict["online"].input_path == "gs://i/{{ ds }}/a.pdf"


# ---------------------------------------------------------------------------------------------
# the package's shape


def test_the_package_imports_nothing_of_the_application():
    """docverify_documentai could be lifted into its own distribution: no module of it imports
    docverify or docverify_airflow (checked on the syntax tree, every import form)."""
    import ast

    package = REPO / "plugins" / "docverify_documentai"
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                names = [str(node.args[0].value)]
            found += [f"{path.relative_to(package)}: {n}" for n in names
                      if n.split(".")[0] in ("docverify", "docverify_airflow")]
    assert len(list(package.rglob("*.py"))) >= 9
    assert found == []


def test_operators_are_google_cloud_operators_and_deferrable_follows_the_config(monkeypatch):
    from airflow.providers.google.cloud.operators.cloud_base import GoogleCloudBaseOperator

    from docverify_documentai.operators import document_ai as ops

    assert issubclass(ops.DocumentAIBatchProcessOperator, GoogleCloudBaseOperator)
    assert issubclass(ops.DocumentAIProcessDocumentOperator, GoogleCloudBaseOperator)
    for value in ("True", "False"):
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", value)
        module = importlib.reload(ops)  # the default is read when the module is imported, as in the provider
        op = module.DocumentAIBatchProcessOperator(task_id="b", processor_id="p", gcs_output_uri=OUTPUT,
                                                   gcs_input_uris=["gs://in/a.pdf"])
        assert op.deferrable is (value == "True")
    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE")
    importlib.reload(ops)


def test_processor_names_go_through_the_client_helpers():
    from docverify_documentai.hooks.document_ai import DocumentAIHook, location_of

    name = DocumentAIHook.processor_name("p", "eu", "abc", "v2")
    assert name == "projects/p/locations/eu/processors/abc/processorVersions/v2"
    assert DocumentAIHook.parse_processor_name(name) == {"project": "p", "location": "eu", "processor_id": "abc",
                                                        "processor_version": "v2"}
    assert DocumentAIHook.parse_processor_name(DocumentAIHook.processor_name("p", "us", "abc"))["processor_version"] is None
    assert location_of("projects/p/locations/eu/operations/123") == "eu" and location_of(name) == "eu"
    for bad in ("", "projects/p/locations/us/processors/a/b", "projects/p/processors/a"):
        with pytest.raises(ValueError, match="not a Document AI processor"):
            DocumentAIHook.parse_processor_name(bad)


def test_hook_wait_for_operations_owns_the_synchronous_wait(fake):
    """The hook's wait: the same loop as the trigger (not done twice, a transient failure, done)."""
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    hook = DocumentAIHook()
    name = hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf", "gs://in/bad.pdf"])
    fake.fail_get = 1
    event = hook.wait_for_operations([name], poll_interval=0.01, max_poll_failures=2)
    assert event["status"] == "success" and [s["status_code"] for s in event["operations"][0]["statuses"]] == [0, 3]
    assert len([1 for m, _, _ in fake.requests if m == "GET"]) == 4  # one 503, not done twice, done
    fake.fail_get = 10
    event = hook.wait_for_operations([name], poll_interval=0.01, max_poll_failures=2)
    assert event["status"] == "error" and "2 consecutive polls failed" in event["message"]
    fake.fail_get = 0
    fake.not_done_polls = 1000
    other = hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf"])
    event = hook.wait_for_operations([other], poll_interval=0.01, timeout=0.05)
    assert event["status"] == "error" and "timed out" in event["message"]


def test_page_count_without_the_application(tmp_path):
    from docverify_documentai.errors import DocumentAIErrorCode, DocumentAIInputError
    from docverify_documentai.utils.document_ai import page_count

    assert page_count(_pdf(tmp_path / "seven.pdf", 7).read_bytes(), "seven.pdf") == 7
    with pytest.raises(DocumentAIInputError, match="nope.pdf: its pages cannot be counted") as info:
        page_count(b"not a pdf at all", "nope.pdf")
    assert info.value.code is DocumentAIErrorCode.NOT_A_PDF and info.value.to_dict()["error"] == "NOT_A_PDF"


# ---------------------------------------------------------------------------------------------
# real faults (issue 22 items 5 and 6): a partial failure keeps what succeeded; unknown fields


def _recorded_operations(corpora_dir) -> dict:
    ops = {}
    for f in ("operations.json", "operations_recorded.json"):
        ops.update({k: v["body"] for k, v in json.loads((corpora_dir / "realapi" / "docai_ops" / f).read_text()).items()})
    return ops


def _keys(value, prefix=""):
    """Every key path of a JSON value (list items merged), for shape comparisons."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(value, list):
        for v in value:
            out |= _keys(v, prefix)
    return out


def test_fake_partial_failure_is_shaped_like_the_real_operations(fake, corpora_dir):
    """The fake's partial failure uses only fields the real v1 operations of
    shared/corpora/realapi/docai_ops/ carry (plus the operation's ``error`` and a failed
    document's status code/message), and carries every field they do."""
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    fake.not_done_polls = 0
    hook = DocumentAIHook()
    name = hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=["gs://in/a.pdf", "gs://in/bad_scan.pdf"])
    raw = fake.handle("GET", f"/v1/{name}", None)[1]
    assert raw["done"] is True and raw["error"] == {"code": 3, "message": "Failed to process all documents."}
    assert "response" not in raw and raw["metadata"]["state"] == "FAILED"
    ok, bad = raw["metadata"]["individualProcessStatuses"]
    assert ok["status"] == {} and ok["outputGcsDestination"] and bad["status"]["code"] == 3 and "outputGcsDestination" not in bad
    real = [op for key, op in _recorded_operations(corpora_dir).items() if "v1beta3" not in key]
    real_keys = set().union(*(_keys(op) for op in real))
    extra = _keys(raw) - real_keys
    assert extra == {"error", "error.code", "error.message", "metadata.individualProcessStatuses.status.code",
                     "metadata.individualProcessStatuses.status.message"}, extra
    fake_ok = fake.handle("GET", f"/v1/{hook.batch_process_documents(PROCESSOR, OUTPUT, gcs_input_uris=['gs://in/c.pdf'])}", None)[1]
    assert _keys(fake_ok) - {"metadata.individualProcessStatuses.humanReviewStatus.stateMessage"} >= \
        real_keys - {"metadata.individualProcessStatuses.humanReviewStatus.stateMessage"}


def test_partial_failure_keeps_the_documents_that_succeeded(fake):
    """Error code 3 "Failed to process all documents." on the operation: the OK documents are read
    from their outputs, the failed one gets its status and message, the task goes on."""
    inputs = ["gs://in/n/a.pdf", "gs://in/n/bad_scan.pdf", "gs://in/n/c.pdf"]
    deferred, event, resume = _defer_and_resume(_batch_op(gcs_input_uris=inputs))
    assert event.payload["status"] == "success" and "partial failure" in event.payload["message"]
    (op,) = event.payload["operations"]
    assert op["error"] == {"code": 3, "message": "Failed to process all documents."}
    assert op["partial"] is True and op["failed"] is False
    results = {r["input_uri"]: r for r in resume()}
    assert results[inputs[0]]["ok"] and results[inputs[2]]["ok"] and results[inputs[0]]["output_uri"]
    bad = results[inputs[1]]
    assert (bad["ok"], bad["status_code"], bad["output_uri"]) == (False, 3, None)
    assert bad["status_message"] == "Unsupported input file format."


@pytest.mark.parametrize(("codes", "failed", "partial"), [
    ([0, 3], False, True),  # partial failure: keep the OK one
    ([3, 3], False, True),  # every document bad on its own: each gets its error, the night goes on
    ([7, 7], True, False),  # PERMISSION_DENIED everywhere (the output bucket): the configuration's
    ([13, 14], True, False),  # the service's: the task fails and Airflow retries it
    ([7, 3], False, True),  # mixed: per document
    ([], True, False),  # no usable per-document status
])
def test_per_document_statuses_decide_an_operation_that_ended_with_an_error(codes, failed, partial):
    from docverify_documentai.utils.document_ai import summarize_operation

    statuses = [{"inputGcsSource": f"gs://in/{i}.pdf", "status": {"code": c, "message": "m"} if c else {},
                 **({"outputGcsDestination": f"gs://o/1/{i}"} if c == 0 else {})} for i, c in enumerate(codes)]
    op = summarize_operation({"name": "n", "done": True, "error": {"code": 3, "message": "Failed to process all documents."},
                              "metadata": {"state": "FAILED", "individualProcessStatuses": statuses}})
    assert (op["failed"], op["partial"]) == (failed, partial)


def test_whole_failure_names_the_per_document_codes(fake):
    from docverify_documentai.operators.document_ai import DocumentAIBatchOperationFailed

    op = _batch_op(gcs_input_uris=["gs://in/a.pdf"])
    failed = {"name": "projects/p/locations/us/operations/5", "done": True, "state": "FAILED", "failed": True,
              "partial": False, "error": {"code": 3, "message": "Failed to process all documents."},
              "statuses": [{"input_uri": "gs://in/a.pdf", "output_uri": None, "status_code": 7,
                            "status_message": "Permission denied on gs://out"}]}
    with pytest.raises(DocumentAIBatchOperationFailed, match="1× 7 Permission denied on gs://out"):
        op.execute_complete({}, {"status": "error", "operations": [failed], "message": "x"}, rejected=[])


@pytest.mark.parametrize("key", ["real_v1_succeeded_bodhi", "docs_v1_succeeded_hitl_error"])
def test_get_operation_ignores_fields_google_adds_tomorrow(fake, corpora_dir, key):
    """A recorded real operation plus invented fields (top level, in the metadata, in a document's
    status) parses over REST, through the hook and the trigger."""
    from docverify_documentai.hooks.document_ai import DocumentAIHook

    body = json.loads(json.dumps(_recorded_operations(corpora_dir)[key]))
    body["inventedTopLevelField"] = {"nested": [1, 2]}
    body["metadata"]["inventedProgress"] = "42"
    body["metadata"]["individualProcessStatuses"][0]["inventedDocumentField"] = {"pages": "3"}
    name = "projects/test-project/locations/us/operations/" + body["name"].rsplit("/", 1)[-1]
    body["name"] = name
    fake.operations_served[name] = body
    op = DocumentAIHook().get_operation(name, retry=_fast_retry())
    assert op["done"] is True and op["metadata"]["state"] == "SUCCEEDED" and "inventedTopLevelField" not in op
    (status,) = op["metadata"]["individualProcessStatuses"]
    assert status["outputGcsDestination"].endswith("/0") and "inventedDocumentField" not in status
    event = _run_trigger(_trigger([name])).payload
    assert event["status"] == "success" and event["operations"][0]["statuses"][0]["status_code"] == 0
