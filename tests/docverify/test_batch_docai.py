"""The Document AI layout stages without Airflow: batch outputs → bundles, per-document failures
→ error records (never a failed stage), the online path's 15-page limit, and re-run economics
(bundles and permanent failures are not sent again; transient ones are)."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.fake_docai import layout_parser_document
from tests.sample_ids import sid

from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import docs_to_layout, layout_docai_online, layout_docai_outputs
from docverify.stages.verify import plan_shards
from docverify.storage.store import ArtifactStore

DS = "2026-11-18"
NAMES = ["genomic_brca_ngs", "note_mts_19", "corrupt_truncated", "fax_cover_sheet"]


@pytest.fixture
def batch(tmp_path, repo_dir):
    incoming = tmp_path / "incoming" / DS
    incoming.mkdir(parents=True)
    for n in NAMES:
        shutil.copy(repo_dir / "include" / "samples" / f"{n}.pdf", incoming / f"{n}.pdf")
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="docai-test")
    discover(b)
    return b


def _outputs(b: Batch, tmp_path, failing: dict[str, int]) -> list[dict]:
    """Write Layout-Parser-shaped outputs for each document (as a batch job would) and return
    the operator's per-input results; ``failing`` = doc_id → google.rpc status code."""
    results = []
    for doc in b.manifest()["documents"]:
        if doc["doc_id"] in failing:
            results.append({"input_uri": doc["pdf_uri"], "output_uri": None, "ok": False,
                            "status_code": failing[doc["doc_id"]], "status_message": "Unsupported input file format.",
                            "error_code": None})
            continue
        folder = tmp_path / "docai_out" / doc["doc_id"]
        folder.mkdir(parents=True)
        (folder / f"{doc['doc_id']}-0.json").write_text(json.dumps(
            layout_parser_document(b.store.read_bytes(doc["pdf_rel"]))))
        results.append({"input_uri": doc["pdf_uri"], "output_uri": str(folder), "ok": True, "status_code": 0,
                        "status_message": "", "error_code": None})
    return results


def test_outputs_become_bundles_and_failures_error_records(batch, tmp_path):
    results = _outputs(batch, tmp_path, {sid("corrupt_truncated"): 3})
    results = [r for r in results if "fax_cover_sheet" not in r["input_uri"]]  # the job said nothing about it
    out = layout_docai_outputs(batch, results, lambda uri: __import__("pathlib").Path(uri))
    assert out.errors == 2 and out.docs == 4
    bundle = json.loads((tmp_path / "runs" / DS / sid("genomic_brca_ngs") / "bundle.json").read_text())
    assert bundle["parser"] == "document_ai:layout-parser" and bundle["total_pages"] == 2
    assert bundle["file_path"].endswith("genomic_brca_ngs.pdf") and bundle["sha256"]
    err = json.loads((tmp_path / "runs" / DS / sid("corrupt_truncated") / "error.json").read_text())
    assert err["error"] == "DOCAI_FAILED" and "status 3" in err["message"] and err["retryable"] is False
    missing = json.loads((tmp_path / "runs" / DS / sid("fax_cover_sheet") / "error.json").read_text())
    assert missing["error"] == "DOCAI_NO_RESULT" and missing["retryable"] is True
    assert plan_shards(batch, 10) == [[sid("genomic_brca_ngs"), sid("note_mts_19")]]

    # a re-run sends only the document whose failure may pass: not the bundles, not the corrupt PDF
    assert [d.doc_id for d in docs_to_layout(batch)] == [sid("fax_cover_sheet")]
    batch.reuse = False
    assert len(docs_to_layout(batch)) == 4  # reuse_cached=false sends everything again


def test_transient_status_is_sent_again(batch, tmp_path):
    layout_docai_outputs(batch, _outputs(batch, tmp_path, {sid("corrupt_truncated"): 14}),
                           lambda uri: __import__("pathlib").Path(uri))
    assert [d.doc_id for d in docs_to_layout(batch)] == [sid("corrupt_truncated")]


def test_unreadable_output_is_the_documents_error(batch, tmp_path):
    results = _outputs(batch, tmp_path, {sid("corrupt_truncated"): 3})
    (tmp_path / "docai_out" / sid("note_mts_19") / f"{sid('note_mts_19')}-0.json").write_text("{not json")
    out = layout_docai_outputs(batch, results, lambda uri: __import__("pathlib").Path(uri))
    err = json.loads((tmp_path / "runs" / DS / sid("note_mts_19") / "error.json").read_text())
    assert err["error"] == "DOCAI_INVALID_JSON" and out.errors == 2


def test_online_path_limit_and_faults(batch, tmp_path):
    calls = []

    def process(data: bytes) -> dict:
        calls.append(len(data))
        if len(calls) == 2:
            raise ConnectionError("service unavailable")
        return layout_parser_document(data)

    out = layout_docai_online(batch, process, max_pages=1)
    errors = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "runs" / DS).glob("*/error.json")}
    # genomic_brca_ngs has 2 pages: refused before any request, with the fix in the message
    assert errors[sid("genomic_brca_ngs")]["error"] == "TOO_MANY_PAGES" and "gs://" in errors[sid("genomic_brca_ngs")]["message"]
    assert errors[sid("corrupt_truncated")]["error"] in ("CORRUPT", "ENCRYPTED")
    assert len(calls) == 2 and out.errors == 3
    transient = [k for k, e in errors.items() if e["error"] == "DOCAI_FAILED"]
    assert len(transient) == 1 and errors[transient[0]]["retryable"] is True
    assert [d.doc_id for d in docs_to_layout(batch)] == transient
