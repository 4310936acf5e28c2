"""The batch report of a night: its figures are the night's routes and decisions (not a second
opinion of them), a hostile file name never becomes markup, and no page text is in any format."""

from __future__ import annotations

import json

from tests.batch_stages import copy_samples, run_stages
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.layout.local_pdf import parse_pdf
from docverify.reporting import report
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


def night(tmp_path, repo_dir, names):
    copy_samples(tmp_path, DS, names)
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="manual__t")
    run_stages(b, OfflineJudge())
    return b, report.write(b)


def test_the_reports_figures_are_the_nights_decisions(tmp_path, repo_dir):
    expected = json.loads((repo_dir / "include" / "samples" / "expected_routes.json").read_text())["routes"]
    names = ["genomic_brca_ngs", "retry_shares", "corrupt_truncated", "quest_cbc_panel"]
    _, out = night(tmp_path, repo_dir, names)
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    by_id = {d["doc_id"]: d for d in rep["per_document"]}
    assert {n: by_id[sid(n)]["final_decision"] for n in names} == {n: expected[n].split("→")[-1] for n in names}
    assert rep["documents"] == 4 and sum(rep["final_routes"].values()) == 4
    assert rep["final_routes"] == {"AUTO_ACCEPT": 1, "AUTO_RETRY→AUTO_ACCEPT": 1, "ESCALATE_TO_SME": 2}
    assert [e["doc_id"] for e in rep["errors"]] == [sid("corrupt_truncated")]
    assert out["summary"].startswith(f"batch {DS}: 4 document(s); routes: ")
    md = (tmp_path / "reports" / DS / "batch_report.md").read_text()
    assert out["summary"] in md and f"**{sid('corrupt_truncated')}**" in md  # the error names the opaque id
    assert report.md("a|b<c>*d*") == "a\\|b\\<c\\>\\*d\\*"


def test_no_page_text_in_any_format(tmp_path, repo_dir):
    names = ["genomic_brca_ngs", "quest_cbc_panel"]
    night(tmp_path, repo_dir, names)
    text = "".join((tmp_path / "reports" / DS / f"batch_report.{ext}").read_text() for ext in ("json", "md", "html"))
    for n in names:
        for page in parse_pdf(repo_dir / "include" / "samples" / f"{n}.pdf").pages:
            for para in page.paragraphs:
                if len(para) > 40:
                    assert para not in text
