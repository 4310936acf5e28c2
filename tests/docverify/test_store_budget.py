"""Issue 12's budget: the sample night costs at most 10 artifact-store operations per document
(plus 3 per night for the report's trend export)
(every request the stages and the report send: reads, writes, listings, hashes, deletes), a re-run
of the same night fewer, and no operation is an ``exists`` probe before a read. Counted by
scripts/count_ops.py's wrapper around ``ArtifactStore`` (the stages run in the DAG's order, each on
a fresh Batch, as each task of the DAG)."""

from __future__ import annotations

import json

import pytest
from scripts.count_ops import counting, night, sample_night
from tests.sample_ids import expected_routes as sample_routes

from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore

BUDGET_PER_DOCUMENT = 10
#: per night, not per document: the report's trend export (one listing of reports/, trend.json,
#: trend.csv; issue 21)
PER_NIGHT = 3
DS = "2026-11-20"


@pytest.mark.slow
def test_sample_night_and_its_rerun_stay_within_the_store_budget(tmp_path, repo_dir):
    n = sample_night(tmp_path, DS)
    with counting() as (first, detail, stage):
        night(tmp_path, stage, DS)
    with counting() as (again, _, stage):
        night(tmp_path, stage, DS)
    total, rerun = sum(first.values()), sum(again.values())
    print(f"store operations: first night {total} ({total / n:.2f}/document), re-run {rerun} ({rerun / n:.2f})")
    assert total <= BUDGET_PER_DOCUMENT * n + PER_NIGHT, dict(first)
    assert rerun < total and rerun <= BUDGET_PER_DOCUMENT * n + PER_NIGHT, dict(again)
    assert first["exists"] == again["exists"] == 0  # one request per read: never exists-then-read
    # each stage reads a document's bundle or result once: no object read twice in one stage
    reads = {k: v for k, v in detail.items() if k[1] == "read_bytes" and k[2] in ("bundle.json", "result.json")}
    per_stage_doc_reads = max(v / (n if k[0] != "auto_fix_retry" else 1) for k, v in reads.items())
    assert per_stage_doc_reads <= 1, reads
    # the routes are the sample's (the cheaper night computes the same thing)
    expected = sample_routes()  # by doc id (ADR 0050)
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    got = {d["doc_id"]: ("AUTO_RETRY→" + d["final_decision"]) if d.get("route") == "auto_fix_retry"
           else d["final_decision"] for d in rep["per_document"]}
    assert got == expected


def test_the_run_store_reads_each_object_once_and_knows_absence_from_a_listing(tmp_path):
    store = ArtifactStore(tmp_path)
    store.write_json("runs/2026-11-20/a/bundle.json", {"x": 1})
    rs = RunStore(store, "2026-11-20")
    with counting() as (counts, _, _stage):
        assert rs.get_json("runs/2026-11-20/a/bundle.json") == {"x": 1}
        assert rs.exists("runs/2026-11-20/a/bundle.json")  # memoised: no second request
        assert rs.read_json("runs/2026-11-20/a/bundle.json") == {"x": 1}
        assert rs.get_json("runs/2026-11-20/a/missing.json") is None  # one read, no exists probe
        assert rs.get_json("runs/2026-11-20/a/missing.json") is None
        rs.listing("runs/2026-11-20")
        assert rs.result("zz") is None  # "zz" has no folder: known absent without a request
        assert not rs.write_if_changed("runs/2026-11-20/a/bundle.json", {"x": 1})  # unchanged: not rewritten
        assert rs.write_if_changed("runs/2026-11-20/a/bundle.json", {"x": 2})
        assert rs.get_json("runs/2026-11-20/a/bundle.json") == {"x": 2}  # the memo follows the write
    assert dict(counts) == {"read_bytes": 2, "entries": 1, "write_bytes": 1}
    assert json.loads((tmp_path / "runs/2026-11-20/a/bundle.json").read_text()) == {"x": 2}
