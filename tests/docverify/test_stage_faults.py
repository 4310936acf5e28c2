"""Faults inside the nightly stages: throttling propagates out of a stage (the task fails and
Airflow retries it — never a document's verdict), any other judge fault is that document's error;
and the shard planner sizes shards from the night (issue 15 item 4)."""

from __future__ import annotations

import shutil

import pytest
from tests.sample_ids import sid

from docverify.judging.judges import JudgeThrottled, OfflineJudge
from docverify.stages.common import Batch, split
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


class ThrottledAt(OfflineJudge):
    """The offline judge whose ``method`` is throttled (429 beyond the waiting budget)."""

    def __init__(self, step: str):
        super().__init__()
        self.step = step  # "classify" or a verifier's agent id

    async def classify(self, bundle):
        if self.step == "classify":
            raise JudgeThrottled("429 RESOURCE_EXHAUSTED beyond the waiting budget")
        return await super().classify(bundle)

    async def judge(self, agent, bundle, classification):
        if self.step == agent:
            raise JudgeThrottled("429 RESOURCE_EXHAUSTED beyond the waiting budget")
        return await super().judge(agent, bundle, classification)


def _laid_out(tmp_path, repo_dir, names) -> tuple[Batch, list[list[str]]]:
    incoming = tmp_path / "incoming" / DS
    incoming.mkdir(parents=True)
    for n in names:
        shutil.copy(repo_dir / "include" / "samples" / f"{n}.pdf", incoming / f"{n}.pdf")
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="t")
    discover(b.fresh())
    layout_local(b.fresh(), workers=1, ocr=False)
    return b, plan_shards(b.fresh())


@pytest.mark.parametrize("method", ["classify", "V2", "V3", "V4"])
def test_throttling_propagates_out_of_the_verify_stage(tmp_path, repo_dir, method):
    b, [shard] = _laid_out(tmp_path, repo_dir, ["note_mts_19"])
    with pytest.raises(JudgeThrottled):
        verify_shard(b.fresh(), shard, ThrottledAt(method), "0")
    # nothing recorded as the document's verdict: no result, no error, no stage summary
    assert b.fresh().rs.result(sid("note_mts_19")) is None
    assert not (tmp_path / "runs" / DS / "_stages" / "verify_0.json").exists()
    # Airflow's retry of the task, once the quota allows, verifies it
    verify_shard(b.fresh(), shard, OfflineJudge(), "0")
    assert b.fresh().rs.result(sid("note_mts_19")).result.final_decision == "AUTO_ACCEPT"


def test_throttling_propagates_out_of_the_retry_stage(tmp_path, repo_dir):
    incoming = tmp_path / "incoming" / DS
    incoming.mkdir(parents=True)
    for f in ("retry_shares.pdf", "retry_shares.classification.json"):
        shutil.copy(repo_dir / "include" / "samples" / f, incoming / f)
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="t")
    discover(b.fresh())
    layout_local(b.fresh(), workers=1, ocr=False)
    [shard] = plan_shards(b.fresh())
    verify_shard(b.fresh(), shard, OfflineJudge(), "0")
    arbiter(b.fresh(), shards=1)
    [retry] = retry_shards(b.fresh())
    with pytest.raises(JudgeThrottled):
        auto_fix_retry_shard(b.fresh(), retry, ThrottledAt("V4"), "0")
    assert b.fresh().rs.result(sid("retry_shares")).result is None  # still waiting for the retry


def test_another_judge_fault_is_the_documents_error_not_the_stages(tmp_path, repo_dir):
    class Broken(OfflineJudge):
        async def judge(self, agent, bundle, classification):
            if agent == "V3":
                raise ConnectionError("endpoint down")
            return await super().judge(agent, bundle, classification)

    b, [shard] = _laid_out(tmp_path, repo_dir, ["note_mts_19"])
    verify_shard(b.fresh(), shard, Broken(), "0")
    rec = b.fresh().rs.result(sid("note_mts_19"))
    assert rec.result.final_decision == "ESCALATE_TO_SME"  # never a silent accept
    assert "VERIFICATION_INCOMPLETE" in [i.code for i in rec.result.attempts[0].issues]


def test_shards_are_sized_from_the_night():
    ids = [f"doc{i:05d}" for i in range(30_000)]
    shards = split(ids, shard_size=25, max_shards=64)
    assert len(shards) <= 64 and [d for s in shards for d in s] == ids
    assert max(len(s) for s in shards) == 469  # ceil(30000 / 64)
    assert split(ids[:13], shard_size=25) == [ids[:13]]  # a small night: shard_size is the minimum
    assert len(split(ids[:1000], shard_size=5)) == 63  # 16 per shard (ceil(1000/64)), not 200 shards
    assert split([], shard_size=25) == []
    assert len(split(ids, shard_size=1, max_shards=1024)) <= 1024


@pytest.mark.parametrize("kw", [{"shard_size": 0}, {"max_shards": 0}, {"max_shards": 2000}])
def test_a_bad_shard_param_is_a_value_error(kw):
    with pytest.raises(ValueError):
        split(["a"], **kw)
