"""Issue 42, the operator's loose ends in the batch report: every escalated or audited document
links to its review, the files discover ignored are listed in the HTML and Markdown reports too
(by token: ADR 0050), the headline counts are the trend's and the reports index's (one source),
and an EMPTY NIGHT says so in the counts line."""

from __future__ import annotations

import json
import re

import pytest
from tests.docverify.review_night import DS, run_night

from docverify.reporting import report, trend
from docverify.stages.audit import audit_sample
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

NOTES = b"call the ward back about the scan\n"


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_links") / "root"
    names = ("quest_cbc_panel", "corrupt_truncated", "genomic_brca_ngs", "retry_shares", "note_mts_19")
    b = run_night(root, names, extra_files={"notes.txt": NOTES})
    audit_sample(b.fresh(), rate=1.0)  # every accept drawn: each accepted row has an audit review
    report.write(b.fresh())
    rep = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    html = (root / "reports" / DS / "batch_report.html").read_text()
    md = (root / "reports" / DS / "batch_report.md").read_text()
    return root, rep, html, md


def _packet_keys(root) -> set[str]:
    return {p.name.removeprefix("sme_packet_").removesuffix(".json") for p in (root / "sme_packets").glob("*.json")}


def test_every_escalated_or_audited_row_links_to_its_review(night):
    root, rep, html, _ = night
    rows = re.findall(r"<tr><td>(.*?)</td>.*?</tr>", html.split("<table class='docs'>")[1].split("</table>")[0])
    assert len(rows) == rep["documents"] == 5
    links = dict(re.findall(r"<tr><td>([^<]*)</td>(?:(?!</tr>).)*?href='/docverify/reviews/([^']+)'",
                            html.split("<table class='docs'>")[1]))
    escalated = {d["doc_id"] for d in rep["per_document"] if d["final_decision"] == "ESCALATE_TO_SME"}
    audited = set(rep["audit"]["sample"])
    assert escalated and audited and not escalated & audited
    assert set(links) == escalated | audited  # every one, and only those
    assert set(links.values()) <= _packet_keys(root)  # each link is a packet the workspace serves
    assert {d for d, k in links.items() if k.endswith("_audit")} == audited


def test_ignored_files_are_listed_in_every_format(night):
    _, rep, html, md = night
    ignored = rep["inputs"]["ignored_files"]
    assert len(ignored) == 1
    for text in (html, md):
        assert "1 file(s) in the folder ignored" in text and ignored[0] in text
        assert "_manifest.json" in text  # where the names are
    if ignored != ["notes.txt"]:  # listed by token (ADR 0050): the name stays in the manifest
        assert "notes.txt" not in html and "notes.txt" not in md


def test_the_reports_counts_are_the_trends(night):
    _, rep, html, md = night
    c = trend.night_counts(rep)
    [row] = [r for r in rep["trend"] if r["night"] == DS]
    assert (row["documents"], row["accepted"], row["escalated"]) == (c.documents, c.accepted, c.escalated)
    assert c.retried_accepted == 1 and c.accepted == rep["final_routes"]["AUTO_ACCEPT"] + 1  # retry_shares
    line = f"{c.documents} document(s): {c.accepted} accepted (1 after the automatic fix and retry), {c.escalated} "
    assert line in html and line in md
    trend_row = f"| {DS} | {c.documents} | {c.accepted} | {c.escalated} |"
    assert trend_row in md


def test_an_empty_night_says_so_in_its_counts(tmp_path):
    from tests.batch_stages import run_stages

    from docverify.judging.judges import OfflineJudge

    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="scheduled__x")
    run_stages(b, OfflineJudge())
    report.write(b.fresh())
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    assert trend.night_counts(rep).empty
    assert "EMPTY NIGHT: no PDF found" in (tmp_path / "reports" / DS / "batch_report.html").read_text()

