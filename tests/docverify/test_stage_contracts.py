"""The typed contracts between the stages (``docverify.storage.runstore``'s models and TypedDicts, the
report's sections) read what older nights wrote and write the same JSON as the plain dicts did;
and the lineage choice is explicit: batch mode's collect pass writes no lineage lines, verify does."""

from __future__ import annotations

import json
import logging

import pytest
from tests.batch_stages import copy_samples, run_stages
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.verify import _error_decision, plan_shards, verify_shard
from docverify.storage.runstore import DocResult, ErrorRecord, Manifest, NightIndex, Routes
from docverify.storage.store import ArtifactStore, dumps

DS = "2026-11-22"

# ----------------------------------------------------------------- stored JSON, as written before
ERROR = {"doc_id": "bad", "stage": "layout", "error": "CORRUPT", "message": "file:///in/bad.pdf: not a PDF",
         "file": "file:///in/bad.pdf", "sha256": "ab" * 32}
DOCAI_ERROR = {**ERROR, "error": "DOCAI_FAILED", "parser": "document_ai:layout-parser", "retryable": False}
DECISION = {"decision": "AUTO_ACCEPT", "rule": 7}
ERROR_DECISION = {"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error", "error": "CORRUPT"}
SUMMARY = {"route": "accept", "decision": DECISION, "implementations": ["V1-check:v1"],
           "final_decision": "AUTO_ACCEPT", "rule": 7, "attempts": 1, "stop_reason": "arbiter",
           "issue_codes": [], "issue_codes_final": [], "issue_codes_attempt_0": [], "quality_score": 1.0,
           "fixes": [], "v5_audit": "rule 7",
           # a key of a newer (or older) version: kept as it is
           "extra_key": {"z": 1, "a": [2]}}
# keys out of the models' field order, as an older version may have written them
ROUTES = {"ds": DS, "routes": {"accept": ["ok"], "auto_fix_retry": [], "write_sme_packets": ["bad"]},
          "attempt_0": {"ok": {"rule": 7, "decision": "AUTO_ACCEPT"}, "bad": ERROR_DECISION},
          "errors": {"bad": ERROR}, "new": ["ok"], "documents": {"ok": SUMMARY}}


def test_routes_read_and_write_what_was_stored():
    routes = Routes.model_validate(ROUTES)
    assert routes.errors["bad"] == ErrorRecord(**ERROR) and routes.errors["bad"].sha256 == ERROR["sha256"]
    assert routes.attempt_0["bad"]["error"] == "CORRUPT" and routes.documents["ok"]["rule"] == 7
    assert dumps(routes) == dumps(ROUTES)  # the same bytes: keys, order, extra keys


@pytest.mark.parametrize("record", [ERROR, DOCAI_ERROR, {k: v for k, v in ERROR.items() if k != "sha256"},
                                    {**ERROR, "from_a_later_version": 1}])
def test_an_error_record_is_stored_as_before(record):
    assert dumps(ErrorRecord.model_validate(record)) == dumps(record)


def test_a_documents_result_keeps_its_decision_as_stored():
    for decision in (DECISION, ERROR_DECISION, {"rule": 3, "decision": "AUTO_RETRY", "later": True}):
        stored = {"doc_id": "d", "route": "write_sme_packets", "decision": decision}
        rec = DocResult.model_validate(stored)
        assert rec.decision == decision
        assert json.loads(dumps(rec))["decision"] == decision
        assert list(json.loads(dumps(rec))["decision"]) == list(decision)
    assert _error_decision("CORRUPT") == ERROR_DECISION
    assert list(_error_decision("CORRUPT")) == list(ERROR_DECISION)


def test_the_layout_record_and_the_manifest_read_as_stored():
    doc = {"doc_id": "bad", "pdf_rel": "incoming/x/bad.pdf", "pdf_uri": "file:///in/bad.pdf", "sha256": "",
           "bytes": 3, "classification_rel": None}
    layout = {"stage": "layout", "docs": 1, "errors": 1, "seconds": 0.1, "documents": [doc], "ok": [],
              "failed": {"bad": DOCAI_ERROR}, "new": ["bad"], "parsed": {}, "parser": "document_ai:batch"}
    index = NightIndex.model_validate(layout)
    assert index.failed["bad"].retryable is False and index.failed["bad"].parser == "document_ai:layout-parser"
    assert json.loads(dumps(index.failed["bad"])) == DOCAI_ERROR
    stats = {"stage": "discover", "docs": 1, "errors": 0, "seconds": 0.01, "llm": {"calls": 0},
             "orphan_companions": ["x.classification.json"]}
    manifest = {"ds": DS, "incoming": "file:///in", "documents": [doc], "skipped_over_max_documents": 0,
                "stats": stats}
    m = Manifest.model_validate(manifest)
    assert m.stats == stats and m.as_json() == manifest
    assert dumps(m.as_json()) == dumps(manifest)
    no_stats = {k: v for k, v in manifest.items() if k != "stats"}
    assert Manifest.model_validate(no_stats).as_json() == no_stats


# ----------------------------------------------------------------- a night: records and the report
REPORT_KEYS = ["ds", "run_id", "documents", "routes_attempt_0", "final_routes", "rules", "issues_by_code_attempt_0",
               "issues_by_code_final", "errors", "llm", "implementations", "models", "stage_timings", "per_document", "feedback",
               "trend"]
LLM_KEYS = ["calls", "cache_hits", "input_tokens", "output_tokens", "cached_tokens", "calls_per_document",
            "max_calls_per_document", "cost_usd", "price_model", "price_source", "cost_note", "mode"]


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("night")
    copy_samples(root, DS, ["quest_cbc_panel", "corrupt_truncated", "retry_shares"])
    b = Batch(store=ArtifactStore(root), ds=DS, run_id="manual__contracts")
    run_stages(b, OfflineJudge())
    report.write(b.fresh())
    return b, root


def test_the_stage_records_and_routes_are_typed_and_stored_as_before(night):
    b, root = night
    rs = b.fresh().rs
    stages = {s["stage"] for s in rs.stages()}
    assert {"layout", "verify", "route", "accept", "write_sme_packets"} <= stages
    routes = rs.routes()
    assert routes is not None and set(routes.errors) == {sid("corrupt_truncated")}
    stored = json.loads((root / "runs" / DS / "_routes.json").read_text())
    assert stored["errors"][sid("corrupt_truncated")] == json.loads(
        (root / "runs" / DS / sid("corrupt_truncated") / "error.json").read_text())
    assert list(stored["errors"][sid("corrupt_truncated")]) == ["doc_id", "stage", "error", "message", "file", "sha256"]
    assert stored["attempt_0"][sid("corrupt_truncated")] == {"decision": "ESCALATE_TO_SME", "rule": None,
                                                        "reason": "error", "error": "CORRUPT"}
    layout = json.loads((root / "runs" / DS / "_stages" / "layout.json").read_text())
    assert layout["failed"] == stored["errors"]
    # the models write what they read
    assert dumps({k: v for k, v in routes.model_dump(mode="json").items() if k in stored}) == dumps(stored)
    result = (root / "runs" / DS / sid("quest_cbc_panel") / "result.json").read_bytes()
    assert dumps(DocResult.model_validate_json(result)) == result


def test_the_report_is_the_same_json(night):
    b, root = night
    rep = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    assert list(rep) == REPORT_KEYS and list(rep["llm"]) == LLM_KEYS
    assert rep["errors"] == [{"doc_id": sid("corrupt_truncated"), "stage": "layout", "error": "CORRUPT",
                              "message": rep["errors"][0]["message"]}]
    # ADR 0050: the message names the document's id where the stored error names its file
    stored = json.loads((root / "runs" / DS / sid("corrupt_truncated") / "error.json").read_text())["message"]
    assert "corrupt_truncated" in stored and "corrupt_truncated" not in json.dumps(rep)
    assert rep["errors"][0]["message"].startswith(f"[document {sid('corrupt_truncated')}]"), rep["errors"][0]
    by_id = {d["doc_id"]: d for d in rep["per_document"]}
    assert list(by_id[sid("corrupt_truncated")]) == ["doc_id", "sha256", "review_id", "final_decision", "rule",
                                                     "reason", "error", "attempts", "route", "outputs", "llm"]
    assert list(by_id[sid("quest_cbc_panel")])[:3] == ["doc_id", "sha256", "final_decision"]
    assert list(by_id[sid("quest_cbc_panel")]["llm"]) == ["calls", "cache_hits", "input_tokens", "output_tokens",
                                                     "cached_tokens", "cost_usd"]
    assert set(rep["stage_timings"]["verify"]) == {"seconds", "tasks", "docs"}
    # build() again: the same content (the timings and the trend aside)
    again = report.build(b.fresh())
    assert {k: v for k, v in again.items() if k != "stage_timings"} == {
        k: v for k, v in rep.items() if k not in ("stage_timings", "trend")}


# ----------------------------------------------------------------- lineage: an explicit choice
def _lineage_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage().removeprefix("lineage ")) for r in caplog.records
            if r.name == "docverify.lineage"]


def test_the_collect_pass_writes_no_lineage_and_verify_does(tmp_path, caplog, monkeypatch):
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    from docverify.llm.cache import InMemoryVerdictCache
    from docverify.llm.judge import LLMJudge
    from docverify.stages import batch_mode as llm_batch

    monkeypatch.delenv("AIRFLOW_CTX_TASK_ID", raising=False)
    # a companion classification (read by the pass: the path that logs) and one the classifier makes
    copy_samples(tmp_path, DS, ["quest_cbc_panel", "genomic_brca_ngs"])
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="manual__lineage")
    discover(b.fresh())
    layout_local(b.fresh(), workers=1)
    # never called: the recording judge records the requests, nothing is sent
    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url="http://127.0.0.1:9"))
    judge = LLMJudge(model, "google:gemini-2.5-flash", cache=InMemoryVerdictCache())
    caplog.clear()  # discover and layout log their own lineage lines
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        out = llm_batch.collect(b.fresh(), judge, "classify")
        out2 = llm_batch.collect(b.fresh(), judge, "judgments")
    assert out.requests == 1 and out2.requests > 0  # the pass ran both documents' verify code
    assert _lineage_lines(caplog) == []
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        for i, shard in enumerate(plan_shards(b.fresh())):
            verify_shard(b.fresh(), shard, OfflineJudge(), str(i))
    lines = _lineage_lines(caplog)
    assert {(x["doc_id"], x["task"]) for x in lines if x["task"] == "classify"} == {
        (sid("quest_cbc_panel"), "classify"), (sid("genomic_brca_ngs"), "classify")}
    assert {x["doc_id"] for x in lines if x["task"] == "verify"} == {sid("quest_cbc_panel"), sid("genomic_brca_ngs")}
