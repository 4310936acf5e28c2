"""An empty night is reported as such in every format, not as a green batch of nothing."""

from tests.batch_stages import run_stages

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore


def test_empty_night_says_so(tmp_path):
    b = Batch(store=ArtifactStore(tmp_path), ds="2026-11-20", run_id="scheduled__x")
    run_stages(b, OfflineJudge())
    out = report.write(b)
    assert out["summary"].startswith("batch 2026-11-20: EMPTY NIGHT — 0 documents found")
    md = (tmp_path / "reports" / "2026-11-20" / "batch_report.md").read_text()
    html = (tmp_path / "reports" / "2026-11-20" / "batch_report.html").read_text()
    assert "EMPTY NIGHT" in md and "EMPTY NIGHT" in html
    # it names the folder it read (a mistyped batch_prefix shows), and what it ignored there (ADR 0036)
    folder = b.rs.uri(b.incoming)
    assert f"0 documents found in {folder}," in out["summary"] and folder in html
    assert report.build(b.fresh())["inputs"] == {"folder_read": [folder]}


def test_files_that_are_not_pdfs_are_counted_in_the_report(tmp_path):
    incoming = tmp_path / "incoming" / "2026-11-20"
    incoming.mkdir(parents=True)
    (incoming / "scan.tiff").write_bytes(b"II*\x00")
    b = Batch(store=ArtifactStore(tmp_path), ds="2026-11-20", run_id="scheduled__x")
    run_stages(b, OfflineJudge())
    out = report.write(b)
    assert out["summary"].endswith("; 1 file(s) in the folder ignored (not PDFs)")
    # by token (ADR 0050: a file name may name the patient), listed in the HTML report too (issue 42)
    from docverify.storage.paths import file_token

    assert report.build(b.fresh())["inputs"]["ignored_files"] == [file_token("scan.tiff")]
    html = (tmp_path / "reports" / "2026-11-20" / "batch_report.html").read_text()
    assert file_token("scan.tiff") in html and "scan.tiff" not in html
