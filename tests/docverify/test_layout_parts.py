"""The local layout mapped over parts (issue 15: one unmapped layout task was 615 s of a
10,000-document night and would reach the 60-minute task timeout near 50,000 PDFs): a plan that
settles what needs no parsing, parts of at least ``shard_size`` PDFs (at most ``max_shards``),
and a merge into the night's index — the same index as the whole layout in one part."""

import pytest
from tests.batch_stages import copy_samples

from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import (
    _balanced,
    layout_local,
    layout_local_part,
    merge_layout_local,
    plan_layout_local,
)
from docverify.storage.runstore import ManifestDoc
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


def night(root, names=None) -> Batch:
    copy_samples(root, DS, names)
    b = Batch(store=ArtifactStore(root), ds=DS, run_id="test")
    discover(b.fresh())
    return b


def index_of(b: Batch) -> dict:
    idx = b.fresh().rs.night_index()
    return {"ok": idx.ok, "failed": sorted(idx.failed), "parsed": idx.parsed, "new": sorted(idx.new)}


def mapped_layout(b: Batch, shard_size: int, max_shards: int = 64) -> tuple[list[dict], dict]:
    parts = plan_layout_local(b.fresh(), shard_size=shard_size, max_shards=max_shards)
    for part in parts:  # each part in its own task: a fresh batch (no memo shared with the plan)
        layout_local_part(b.fresh(), part, workers=1)
    return parts, merge_layout_local(b.fresh())


@pytest.mark.slow
def test_parts_merge_into_the_same_index_as_one_layout(tmp_path):
    one = night(tmp_path / "one")
    layout_local(one.fresh(), workers=1)
    many = night(tmp_path / "many")
    parts, record = mapped_layout(many, shard_size=3)
    docs = many.fresh().rs.manifest().documents
    refused = [d for d in docs if d.input_error]
    assert len(parts) == -(-(len(docs) - len(refused)) // 3) > 1  # every PDF to parse, 3 a part
    assert sorted(i for p in parts for i in p.doc_ids) == sorted(d.doc_id for d in docs if not d.input_error)
    assert index_of(many) == index_of(one)
    assert record.docs == len(docs) and record.record["parts"] == len(parts)
    assert record.errors == len(index_of(one)["failed"]) > 0  # the corrupt and refused files are counted


def test_parts_stay_within_max_shards(tmp_path):
    b = night(tmp_path)
    parts = plan_layout_local(b.fresh(), shard_size=1, max_shards=4)
    assert len(parts) == 4 and all(p.doc_ids for p in parts)
    with pytest.raises(ValueError, match="shard_size"):
        plan_layout_local(b.fresh(), shard_size=0)


@pytest.mark.slow
def test_a_rerun_plans_no_part_for_unchanged_bundles(tmp_path):
    b = night(tmp_path)
    mapped_layout(b, shard_size=3)
    first = index_of(b)
    parts, record = mapped_layout(b, shard_size=3)
    # only the files that failed to parse are parsed again (their error may have been transient)
    again = sorted(i for p in parts for i in p.doc_ids)
    assert again and set(again) <= set(first["failed"])
    assert record.cache_hits == len(first["ok"])
    assert index_of(b) == {**first, "new": []}  # nothing is new the second time


def test_a_part_of_another_plan_is_refused(tmp_path):
    b = night(tmp_path, ["note_mts_19", "retry_shares", "genomic_brca_ngs"])
    old = plan_layout_local(b.fresh(), shard_size=1)
    layout_local_part(b.fresh(), old[0], workers=1)
    new = plan_layout_local(b.fresh(), shard_size=1)  # a second run planned the night again
    assert len(new) == 2  # the bundle the old part wrote is reused
    with pytest.raises(RuntimeError, match="layout plan was replaced"):
        layout_local_part(b.fresh(), old[1], workers=1)
    with pytest.raises(RuntimeError, match="part_0.json: from another plan"):
        merge_layout_local(b.fresh())  # part 0 on the store is the old plan's
    for part in new:
        layout_local_part(b.fresh(), part, workers=1)
    assert merge_layout_local(b.fresh()).record["parts"] == 2
    assert len(index_of(b)["ok"]) == 3


def test_a_missing_part_names_the_task_to_clear(tmp_path):
    b = night(tmp_path, ["note_mts_19", "retry_shares"])
    plan_layout_local(b.fresh(), shard_size=1)
    with pytest.raises(RuntimeError, match="part_0.json: missing.*clear its layout_parse task"):
        merge_layout_local(b.fresh())


def test_parts_balance_runs_of_large_files():
    # four big scans named alike (contiguous in the manifest) and twelve small text PDFs: split in
    # manifest order, one part would get every scan; balanced, each part gets one
    docs = [ManifestDoc(doc_id=f"scan_{i}", pdf_rel="", pdf_uri="", bytes=2_000_000) for i in range(4)]
    docs += [ManifestDoc(doc_id=f"note_{i:02d}", pdf_rel="", pdf_uri="", bytes=30_000) for i in range(12)]
    parts = _balanced(docs, 4)
    assert sorted(i for p in parts for i in p) == sorted(d.doc_id for d in docs)
    assert [sum(i.startswith("scan") for i in p) for p in parts] == [1, 1, 1, 1]
    assert all(len(p) == 4 for p in parts) and parts[0][0] == "scan_0"  # manifest order inside a part
    assert _balanced([], 3) == [] and _balanced(docs[:2], 1) == [["scan_0", "scan_1"]]
