"""`evaluate` with the CR_V2 jury's decisions: per '<code> → <jury decision>' the reviewed
documents the SME validated or corrected (only when the jury ran; absent otherwise)."""

from __future__ import annotations

from tests.docverify.test_evaluate import NOTE, PATH, build_scenario, classification, put_gt, put_packet

from docverify.reporting.evaluate import evaluate_store
from docverify.reporting.evaluate_render import render_markdown


def verification(doc_id: str, votes: list[tuple[str, str]]) -> dict:
    return {"doc_id": doc_id, "attempts": [{"attempt": 0, "runs": [
        {"agent": "V4", "phase": "jury", "implementation": "cr_v2-jury[…]",
         "votes": [{"code": c, "final_action": a, "votes": {"A": a, "B": a, "C": a}, "rule": 1} for c, a in votes]}]}]}


def test_false_alarms_with_the_jury_decisions(tmp_path):
    s = build_scenario(tmp_path)
    assert "false_alarm_by_jury" not in evaluate_store(s).model_dump(mode="json")  # no jury ran
    # H: the jury kept EVIDENCE_WEAK and dropped ANCHOR_NOT_ON_PAGE; the SME validated (a false alarm)
    h = classification("H", PATH, [(1, 2, PATH)])
    put_packet(s, "H", h, ["EVIDENCE_WEAK"], rule=4, total_pages=2)
    put_gt(s, "H", "SME_VALIDATED", h)
    s.write_json("runs/2026-11-20/H/verification.json",
                 verification("H", [("EVIDENCE_WEAK", "KEEP"), ("ANCHOR_NOT_ON_PAGE", "DROP")]))
    # I: the jury kept EVIDENCE_WEAK; the SME corrected
    put_packet(s, "I", classification("I", PATH, [(1, 1, PATH)]), ["EVIDENCE_WEAK"], rule=4, total_pages=1)
    put_gt(s, "I", "SME_CORRECTED", classification("I", NOTE, [(1, 1, NOTE)]))
    s.write_json("runs/2026-11-20/I/verification.json", verification("I", [("EVIDENCE_WEAK", "KEEP")] * 2))
    f = evaluate_store(s)
    got = {k: (v.n, v.validated, v.corrected) for k, v in f.false_alarm_by_jury.items()}
    assert got == {"EVIDENCE_WEAK → KEEP": (2, 1, 1), "ANCHOR_NOT_ON_PAGE → DROP": (1, 1, 0)}
    assert f.false_alarm_by_jury["EVIDENCE_WEAK → KEEP"].false_alarm_rate == 0.5
    assert "CR_V2 jury's decision" in render_markdown(f)
