"""Issue 10, item 6: packets that tell the whole story (original classification, every attempt
with its issues and the fixes between them, the final decision), and a parse error shown as its
own reason — not "rule 1" — in packets, the batch report and `make run`'s summary."""

import json
import subprocess
import sys

from scripts.support.examples import genomic_then_note, mutate
from tests.docverify.review_night import DS, REPO, run_night
from tests.docverify.run_sync import verify_document_sync
from tests.packets import packet_file
from tests.sample_ids import sid

from docverify.domain.policy import VerifyPolicy
from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.sme.facts import decided_by
from docverify.sme.packets import build_packet
from docverify.sme.render import packet_html, packet_markdown


def _repaired_then_escalated():
    """Attempt 0: an auto-fixable BLOCKER (number_of_segments) and an anchor on another page;
    the repair (switched on: VerifyPolicy(blocker_repair=True)) fixes the count, attempt 1 escalates
    by rule 4 on the anchor."""
    b, c = genomic_then_note()
    c2 = mutate(c, lambda c: (c.update(number_of_segments=5),
                              c["segments"][0]["classifications"][2]["top_evidence"][0].update(
                                  anchors_found=["VARIANT FINDINGS"])))
    return b, verify_document_sync(b, c2, OfflineJudge(), policy=VerifyPolicy(blocker_repair=True))


def test_the_packet_has_the_original_every_attempt_its_fixes_and_the_final_decision():
    b, result = _repaired_then_escalated()
    packet = build_packet(doc_id=b.doc_id, pdf_path=b.file_path, total_pages=3, bundle_path="", result=result,
                          bundle=b)
    assert packet.original_classification["number_of_segments"] == 5
    assert packet.primary_classification["number_of_segments"] == 2
    first, second = packet.attempt_history
    assert (first["decision"], first["rule"], first["blocker_repair"]) == ("ESCALATE_TO_SME", 1, True)
    assert [i["code"] for i in first["issues"]] == ["SEGMENT_COUNT_MISMATCH", "ANCHOR_NOT_ON_PAGE"]
    assert [f["fixer"] for f in first["fixes_after"]] == ["fix_segment_count"]
    assert first["skipped_judgments"]  # no judgment on the broken attempt
    assert (second["decision"], second["rule"], second["fixes_after"]) == ("ESCALATE_TO_SME", 4, [])
    assert (packet.v5_rule, packet.escalation_reason, decided_by(packet)) == (4, "arbiter", "rule 4")
    md = packet_markdown(packet)
    assert "### History (attempts, issues, fixes)" in md
    assert "fix fix_segment_count (SEGMENT_COUNT_MISMATCH): Set number_of_segments from 5 to 2" in md
    assert "Final: ESCALATE_TO_SME — rule 4" in md
    html = packet_html(packet)
    assert "Original classification (what the classifier said, before any fix)" in html
    assert "(after the automatic fixes)" in html


def test_a_parse_error_is_its_own_reason_everywhere(tmp_path):
    b = run_night(tmp_path, names=("corrupt_truncated", "genomic_brca_ngs"))
    packet = json.loads(packet_file(tmp_path, sid("corrupt_truncated"), ".json").read_text())
    assert packet["v5_rule"] is None and packet["escalation_reason"] == "error"
    assert packet["v5_reason"].startswith("Not verified: the document could not be processed (CORRUPT")
    assert "Rule 1" not in packet["v5_reason"] and packet["attempt_history"] == []
    md = packet_file(tmp_path, sid("corrupt_truncated"), ".html").read_text()
    assert "not processed: CORRUPT" in md
    report.write(b)
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    entry = next(d for d in rep["per_document"] if d["doc_id"] == sid("corrupt_truncated"))
    assert (entry["rule"], entry["reason"], report.rule_label(entry)) == (None, "error", "error CORRUPT")
    assert rep["rules"].get("error") == 1 and "rule 1" not in rep["rules"]
    assert "| error CORRUPT |" in (tmp_path / "reports" / DS / "batch_report.md").read_text()
    routes = json.loads((tmp_path / "runs" / DS / "_routes.json").read_text())
    assert routes["attempt_0"][sid("corrupt_truncated")]["rule"] is None
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "show_report.py"), str(tmp_path), DS],
                         capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if sid("corrupt_truncated") in x and "ESCALATE_TO_SME" in x)
    assert line.rstrip().endswith("error CORRUPT") and "rule" not in line
