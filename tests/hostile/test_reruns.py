"""Re-runs converge: after any re-run each document is in exactly one route; a stale accepted
record or pending packet of an earlier run of the same night is withdrawn (moved aside with a
reason, never deleted); reviewed packets and ground truth are never touched; a run killed with
SIGKILL after any stage, or two runs of one night at once, end like one clean run."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from tests.hostile import kit
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.routes import accept, write_sme_packets
from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard
from docverify.storage.store import ArtifactStore, is_tmp_name

DS = kit.DS


class Outage(OfflineJudge):
    """The offline judge whose classifier is down, as during an LLM outage."""

    name = "test-outage"

    async def classify(self, bundle):
        raise ConnectionError("endpoint down")


def _doc(night: kit.Night, doc_id: str) -> dict:
    manifest = json.loads((night.root / "runs" / DS / "_manifest.json").read_text())
    return next(d for d in manifest["documents"] if d["doc_id"] == doc_id)


def small_night(tmp_path) -> kit.Night:
    root = tmp_path / "root"
    night = kit.Night(root, tmp_path / "outside", root / "incoming" / DS)
    night.incoming.mkdir(parents=True)
    night.outside.mkdir()
    (night.outside / "outside.pdf").write_bytes(b"")
    (night.outside / "shadow").write_text("")
    night.add("note_mts_19.pdf", kit.sample("note_mts_19.pdf"), "route")
    night.add("retry_shares.pdf", kit.sample("retry_shares.pdf"), "route")
    (night.incoming / "retry_shares.classification.json").write_bytes(kit.sample("retry_shares.classification.json"))
    night.add("quest_cbc_panel.pdf", kit.sample("quest_cbc_panel.pdf"), "escalate")
    (night.incoming / "quest_cbc_panel.classification.json").write_bytes(
        kit.sample("quest_cbc_panel.classification.json"))
    night.add("plaintext.pdf", kit.SECRET_TEXT.encode(), "error", "NOT_A_PDF")
    night.add("comp_list.pdf", kit.sample("note_mts_19.pdf"), "error", "INPUT_NOT_OBJECT")
    (night.incoming / "comp_list.classification.json").write_bytes(b"[1,2,3]")
    return night


@pytest.mark.slow
def test_accepted_then_escalated_withdraws_the_accepted_record(tmp_path):
    night = small_night(tmp_path)
    kit.check_night(night, kit.run_night(night, OfflineJudge(), run_id="run1"))
    assert (night.root / "accepted" / DS / f"{sid('note_mts_19')}.json").exists()
    # the night's companion for note_mts_19 arrives broken: the re-run escalates it
    (night.incoming / "note_mts_19.classification.json").write_bytes(b"null")
    night.expect["note_mts_19.pdf"] = ("error", "INPUT_NOT_OBJECT")
    run2 = kit.run_night(night, OfflineJudge(), run_id="run2")
    kit.check_night(night, run2)
    assert not (night.root / "accepted" / DS / f"{sid('note_mts_19')}.json").exists()
    [moved_file] = kit.withdrawn_of(night.root, "accepted", sid("note_mts_19"))
    moved = json.loads(moved_file.read_text())
    assert moved["run_id"] == "run2" and "INPUT_NOT_OBJECT" in moved["reason"]
    assert moved["record"]["doc_id"] == sid("note_mts_19") and moved["record"]["run_id"] == "run1"
    report_docs = {d["doc_id"]: d for d in run2["report"]["per_document"]}
    assert "accepted" not in report_docs[sid("note_mts_19")]["outputs"]


@pytest.mark.slow
def test_after_an_outage_recovered_documents_lose_their_pending_packet(tmp_path):
    night = small_night(tmp_path)
    run1 = kit.run_night(night, Outage(), run_id="run1")
    assert {d["doc_id"]: d.get("error") for d in run1["report"]["per_document"]}[sid("note_mts_19")] == \
        "CLASSIFICATION_FAILED"
    doc = _doc(night, sid("note_mts_19"))
    [packet] = kit.packets_of(night.root, doc)
    run2 = kit.run_night(night, OfflineJudge(), run_id="run2")
    kit.check_night(night, run2)
    assert (night.root / "accepted" / DS / f"{sid('note_mts_19')}.json").exists()
    assert not packet.exists() and not packet.with_suffix(".html").exists()
    [moved_file] = kit.withdrawn_of(night.root, "sme_packet", sid("note_mts_19"))
    moved = json.loads(moved_file.read_text())
    assert moved["record"]["error"]["error"] == "CLASSIFICATION_FAILED" and "accepted" in moved["reason"]
    # a third run changes nothing: the withdrawal is not repeated, outputs stay byte for byte
    before = {p: p.read_bytes() for p in night.root.rglob("*.json") if "_stages" not in p.parts
              and "reports" not in p.parts}
    kit.run_night(night, OfflineJudge(), run_id="run3")
    after = {p: p.read_bytes() for p in night.root.rglob("*.json") if "_stages" not in p.parts
             and "reports" not in p.parts}
    assert after == before


@pytest.mark.slow
def test_a_reviewed_packet_and_its_ground_truth_are_never_withdrawn(tmp_path):
    from docverify.sme.helper import SMEReviewHelper

    night = small_night(tmp_path)
    kit.run_night(night, Outage(), run_id="run1", watch=False)
    SMEReviewHelper(night.root).save_review(sid("note_mts_19"), agrees=False, corrected_dominant_type="Clinical Note",
                                            reviewer="dr.test")
    [packet_file] = kit.packets_of(night.root, _doc(night, sid("note_mts_19")))
    packet = packet_file.read_bytes()
    [gt_file] = (night.root / "ground_truth").glob(f"gt_*{sid('note_mts_19')}*.json")
    gt = gt_file.read_bytes()
    kit.run_night(night, OfflineJudge(), run_id="run2", watch=False)
    assert packet_file.read_bytes() == packet
    assert gt_file.read_bytes() == gt
    assert not (night.root / "withdrawn").exists()


STAGES = ["discover", "layout", "verify", "arbiter", "retry", "accept", "packets"]


def _stages_until(b: Batch, last: str, judge) -> None:
    discover(b.fresh())
    if last == "discover":
        return
    layout_local(b.fresh(), workers=1, timeout_s=60)
    if last == "layout":
        return
    shards = plan_shards(b.fresh(), shard_size=2)
    for i, shard in enumerate(shards):
        verify_shard(b.fresh(), shard, judge, str(i))
    if last == "verify":
        return
    arbiter(b.fresh(), shards=len(shards))
    if last == "arbiter":
        return
    for i, shard in enumerate(retry_shards(b.fresh())):
        auto_fix_retry_shard(b.fresh(), shard, judge, str(i))
    if last == "retry":
        return
    accept(b.fresh())
    if last == "accept":
        return
    write_sme_packets(b.fresh())


def _in_child(fn) -> int:
    """Run ``fn`` in a forked child that is SIGKILLed when it returns; the child's exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            fn()
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.slow
@pytest.mark.parametrize("last", STAGES)
def test_sigkill_after_any_stage_then_a_rerun_ends_like_a_clean_run(tmp_path, last):
    night = small_night(tmp_path)
    status = _in_child(lambda: _stages_until(Batch(store=ArtifactStore(night.root), ds=DS, run_id="killed"),
                                             last, OfflineJudge()))
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    kit.check_night(night, kit.run_night(night, OfflineJudge(), run_id="rerun"))
    assert not [p for p in night.root.rglob("*") if is_tmp_name(p.name)]


@pytest.mark.slow
def test_sigkill_in_the_middle_of_a_stage_then_a_rerun(tmp_path):
    """Killed at an arbitrary moment (not between stages): atomic writes leave no torn file."""
    night = small_night(tmp_path)
    for delay in (0.3, 0.8, 1.5):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                kit.run_night(night, OfflineJudge(), run_id="killed", watch=False)
            finally:
                os._exit(0)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for p in night.root.rglob("*.json"):
        json.loads(p.read_text())  # no torn JSON
    kit.check_night(night, kit.run_night(night, OfflineJudge(), run_id="rerun"))


@pytest.mark.slow
def test_two_runs_of_one_night_at_once(tmp_path):
    night = small_night(tmp_path)
    pids = []
    for run_id in ("a", "b"):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                kit.run_night(night, OfflineJudge(), run_id=run_id, watch=False)
            except BaseException:  # noqa: BLE001 - reported through the exit status
                code = 1
            os._exit(code)
        pids.append(pid)
    statuses = [os.waitpid(p, 0)[1] for p in pids]
    assert all(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0 for s in statuses)
    b = Batch(store=ArtifactStore(night.root), ds=DS, run_id="check")
    report.write(b)
    rep = json.loads((night.root / "reports" / DS / "batch_report.json").read_text())
    kit.check_night(night, {"batch": b, "report": rep, "xcom": [], "logs": [], "outside": []})
