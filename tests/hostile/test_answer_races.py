"""Answered reviews are untouchable (ADR 0030): a re-run's rewrite or withdrawal of an SME packet
races an SME's answer, with the re-run's store write held back as a remote store's latency holds
it (the write waits until the SME's answer is saved: deterministic, no sleeps to tune). Whatever
the order, the answered packet stays reviewed, the ground truth's ``packet_path`` names a packet,
and no pending packet comes back. Then a threaded stress of both races."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

from docverify.sme.ground_truth import save_review
from docverify.sme.packets import build_packet, load_packet, write_packet
from docverify.stages.common import Batch
from docverify.stages.routes import _withdraw_pending_packets, withdraw
from docverify.storage import store as store_mod
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"
DOC = "quest_cbc_panel"
KEY = f"{DS}_{DOC}_0123456789"
REL = ArtifactStore.packet_rel(KEY)


def _packet(message: str):
    """A packet of a document that could not be processed (no classification to agree with)."""
    return build_packet(doc_id=DOC, pdf_path=f"incoming/{DS}/{DOC}.pdf", total_pages=1, bundle_path="", result=None,
                        error={"error": "CLASSIFICATION_FAILED", "message": message}, run_id="run1", review_id=KEY)


def _answer(store: ArtifactStore) -> None:
    save_review(store, KEY, agrees=False, corrected_dominant_type="Clinical Note", reviewer="dr.a")


def _assert_answer_survived(root) -> None:
    packet = json.loads((root / REL).read_text())
    assert packet["review_status"] == "reviewed" and packet["ground_truth_version"] == 1
    gt = json.loads((root / "ground_truth" / f"gt_{KEY}.json").read_text())
    assert gt["packet_path"] == ArtifactStore(root).uri(REL) and (root / REL).exists()
    assert packet["ground_truth_path"] == ArtifactStore(root).uri(f"ground_truth/gt_{KEY}.json")


class HeldWrite:
    """Holds the re-run thread's first call of one of ``methods`` (``replace_if``, ``write_bytes``
    of a withdrawn copy …) on a name ``when`` accepts until the SME's answer is saved, as a slow
    remote write would: the re-run has read the packet pending, the SME answers, then the re-run's
    write goes out."""

    def __init__(self, monkeypatch, methods: tuple[str, ...], when=lambda rel: True):
        self.reached, self.release = threading.Event(), threading.Event()
        self.thread: threading.Thread | None = None
        for method in methods:
            monkeypatch.setattr(ArtifactStore, method, self._held(getattr(ArtifactStore, method), when))

    def _held(self, real, when):
        def wrapper(store, rel, *a, **k):
            if threading.current_thread() is self.thread and when(rel) and not self.reached.is_set():
                self.reached.set()
                assert self.release.wait(10), "the SME's answer never came"
            return real(store, rel, *a, **k)

        return wrapper

    def run(self, fn) -> dict:
        out: dict = {}

        def target():
            try:
                out["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
                out["error"] = exc

        self.thread = threading.Thread(target=target)
        self.thread.start()
        return out

    def answer_meanwhile(self, store: ArtifactStore, out: dict) -> None:
        assert self.reached.wait(10), "the re-run never reached its write"
        _answer(store)
        self.release.set()
        assert self.thread is not None
        self.thread.join(20)
        if "error" in out:
            raise out["error"]


def test_a_rerun_rewriting_a_packet_never_sets_an_answered_one_back_to_pending(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path)
    assert write_packet(store, _packet("run 1"))[1] == "written"
    # the packet's write (a plain write or the compare-and-swap) is the slow one
    held = HeldWrite(monkeypatch, ("write_bytes", "replace_if"), when=lambda rel: rel == REL)
    rs = Batch(store=store, ds=DS, run_id="run2").rs
    # the re-run's packet differs (the error message changed): it will be rewritten while pending
    out = held.run(lambda: write_packet(rs, _packet("run 2"), write_json=rs.write_if_changed))
    held.answer_meanwhile(store, out)
    assert out["value"][1] == "kept_reviewed"
    _assert_answer_survived(tmp_path)
    assert json.loads((tmp_path / REL).read_text())["error"]["message"] == "run 1"  # what the SME answered
    assert rs.get_json(REL)["review_status"] == "reviewed"  # the run store's memo follows the store


def test_a_rerun_withdrawing_a_packet_never_deletes_an_answered_one(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path)
    write_packet(store, _packet("run 1"))
    # the copy to withdrawn/ is the slow write: the SME answers between the read and the delete
    held = HeldWrite(monkeypatch, ("write_bytes",), when=lambda rel: rel.startswith("withdrawn/"))
    batch = Batch(store=store, ds=DS, run_id="run2")
    out = held.run(lambda: withdraw(batch, REL, "sme_packet", KEY, "accepted by a later run"))
    held.answer_meanwhile(store, out)
    assert out["value"] is None  # not withdrawn: the answered packet was kept
    _assert_answer_survived(tmp_path)
    assert not (tmp_path / "withdrawn").exists() or not any((tmp_path / "withdrawn").rglob("*.json"))


def test_the_stage_withdrawal_keeps_an_answered_packet_and_its_rendering(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path)
    write_packet(store, _packet("run 1"))
    store.write_text(REL[: -len(".json")] + ".html", "<html></html>")
    held = HeldWrite(monkeypatch, ("delete", "delete_if"), when=lambda rel: rel == REL)
    batch = Batch(store=store, ds=DS, run_id="run2")
    out = held.run(lambda: _withdraw_pending_packets(batch, DOC, KEY, "accepted by a later run", {DOC: [KEY]},
                                                     keep_current=False))
    held.answer_meanwhile(store, out)
    _assert_answer_survived(tmp_path)
    assert (tmp_path / (REL[: -len(".json")] + ".html")).exists()
    assert not any((tmp_path / "withdrawn").rglob("*.json"))


def test_a_packet_withdrawn_while_the_sme_answers_is_put_back_answered(tmp_path, monkeypatch):
    """The other order: the withdrawal's delete lands after the SME loaded the packet and before
    the answer marks it — the answer puts the packet back, reviewed, so its ground truth names a
    packet (the withdrawn copy stays as the record of the withdrawal)."""
    store = ArtifactStore(tmp_path)
    write_packet(store, _packet("run 1"))
    batch = Batch(store=store, ds=DS, run_id="run2")
    real, done = ArtifactStore.write_bytes, []

    def write_bytes(self, rel, data, **k):
        written = real(self, rel, data, **k)
        if rel.startswith("ground_truth/") and not done:  # the answer is saved; its packet not yet marked
            done.append(withdraw(batch, REL, "sme_packet", KEY, "accepted by a later run"))
        return written

    monkeypatch.setattr(ArtifactStore, "write_bytes", write_bytes)
    _answer(store)
    assert done and done[0] is not None  # the withdrawal did happen
    _assert_answer_survived(tmp_path)


def test_a_reviewed_packet_is_never_withdrawn_nor_rewritten(tmp_path):
    store = ArtifactStore(tmp_path)
    write_packet(store, _packet("run 1"))
    _answer(store)
    before = (tmp_path / REL).read_bytes()
    batch = Batch(store=store, ds=DS, run_id="run2")
    assert withdraw(batch, REL, "sme_packet", KEY, "accepted by a later run") is None
    assert write_packet(batch.rs, _packet("run 2"), write_json=batch.rs.write_if_changed)[1] == "kept_reviewed"
    assert (tmp_path / REL).read_bytes() == before


def test_an_unchanged_pending_packet_is_left_byte_for_byte(tmp_path):
    store = ArtifactStore(tmp_path)
    write_packet(store, _packet("run 1"))
    before = (tmp_path / REL).read_bytes()
    again = _packet("run 1").model_copy(update={"run_id": "run2", "created_at": "2030-01-01T00:00:00Z"})
    rs = Batch(store=store, ds=DS, run_id="run2").rs
    assert write_packet(rs, again, write_json=rs.write_if_changed)[1] == "written"
    assert (tmp_path / REL).read_bytes() == before


@pytest.mark.parametrize("rerun", ["rewrite", "withdraw"])
def test_stress_rerun_against_the_sme_answer(tmp_path, monkeypatch, rerun):
    """20 rounds, each a re-run (rewrite or withdrawal) and an SME's answer started together, with
    the store's replace/delete slowed so the two overlap: the answer always survives, reviewed and
    named by its ground truth; no pending packet is left beside an answer. A withdrawal starts 0-40 ms
    after the answer (by round), and in the last round after the answer is saved: on a loaded machine
    the withdrawal, which has less to do, won all 20 rounds, and the answered side was never raced."""
    real_replace = store_mod.os.replace

    def slow_replace(src, dst):
        threading.Event().wait(0.01)
        real_replace(src, dst)

    monkeypatch.setattr(store_mod.os, "replace", slow_replace)
    answered = 0
    for i in range(20):
        root = tmp_path / f"round{i}"
        store = ArtifactStore(root)
        write_packet(store, _packet("run 1"))
        batch = Batch(store=store, ds=DS, run_id=f"rerun{i}")
        barrier = threading.Barrier(2)
        answered_now = threading.Event()
        errors: list[BaseException] = []

        def rerun_side(batch=batch, barrier=barrier, i=i, answered_now=answered_now):
            barrier.wait()
            if rerun == "rewrite":
                write_packet(batch.rs, _packet(f"run 2 round {i}"), write_json=batch.rs.write_if_changed)
                return
            if i == 19:
                answered_now.wait(30)  # the last round: the answer is saved, then the withdrawal comes
            else:
                threading.Event().wait(0.01 * (i % 5))
            withdraw(batch, REL, "sme_packet", KEY, "accepted by a later run")

        def sme_side(store=store, barrier=barrier, answered_now=answered_now):
            barrier.wait()
            try:
                with contextlib.suppress(FileNotFoundError):  # withdrawn before the SME opened it: no answer
                    _answer(store)
            finally:
                answered_now.set()

        threads = [threading.Thread(target=_catch, args=(f, errors)) for f in (rerun_side, sme_side)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        if (root / "ground_truth" / f"gt_{KEY}.json").exists():
            answered += 1
            _assert_answer_survived(root)
        else:  # the withdrawal won before the SME loaded the packet: it is withdrawn, not pending
            assert rerun == "withdraw" and not (root / REL).exists()
        assert load_packet(store, KEY).review_status == "reviewed" if (root / REL).exists() else True
    assert answered >= (20 if rerun == "rewrite" else 1)


def _catch(fn, errors: list) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
        errors.append(exc)
