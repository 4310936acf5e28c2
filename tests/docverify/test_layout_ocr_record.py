"""Each document's OCR work in the layout stage record, and the night's totals in the batch report
(issue 40 item 4, ADR 0052): a night of one scanned sample and one text PDF, in process."""

from __future__ import annotations

import json

import pytest
from tests.hostile import kit

from docverify.judging.judges import OfflineJudge
from docverify.reporting.report import to_markdown


def _id(run: dict, name: str) -> str:
    return next(d["doc_id"] for d in run["batch"].manifest()["documents"] if d["pdf_rel"].endswith("/" + name))


def test_the_layout_record_and_the_report_carry_the_ocr_pages_and_seconds(tmp_path):
    root = tmp_path / "root"
    night = kit.Night(root, tmp_path / "outside", root / "incoming" / kit.DS)
    night.incoming.mkdir(parents=True)
    night.add("scanned_no_text.pdf", kit.sample("scanned_no_text.pdf"), "route")
    night.add("note_mts_19.pdf", kit.sample("note_mts_19.pdf"), "route")
    run = kit.run_night(night, OfflineJudge(), workers=1, watch=False)
    layout = json.loads((root / "runs" / kit.DS / "_stages" / "layout.json").read_text())
    scan, note = _id(run, "scanned_no_text.pdf"), _id(run, "note_mts_19.pdf")
    assert set(layout["ocr"]) == {scan}  # the text PDF had nothing to OCR
    assert layout["ocr"][scan]["pages"] == 1 and 0 < layout["ocr"][scan]["seconds"] < 120
    assert layout["ocr_pages"] == 1 and layout["ocr_seconds"] == layout["ocr"][scan]["seconds"]
    assert note in layout["ok"] and scan in layout["ok"]
    rep = run["report"]
    assert rep["ocr"] == {"documents": 1, "pages": 1, "seconds": layout["ocr_seconds"]}
    md = to_markdown(rep)
    assert f"OCR (layout): 1 page(s) of 1 document(s) in {layout['ocr_seconds']:.1f} s" in md


@pytest.mark.slow
def test_a_scan_split_across_the_workers_is_one_bundle_and_one_ocr_record(tmp_path):
    """Through the layout stage (2 workers, split from 4 image pages, the manifest's sha256 handed to
    the workers): the generated 6-page scan is one bundle of its 6 pages in order with the manifest's
    hash, its OCR work one record entry of 6 pages. (That the pool reads such a scan in two ranges, by
    two processes, is shown in tests/docverify/layout/test_scan_split.py.)"""
    from tests.docverify.layout.test_scan_split import WORDS, _scan

    from docverify.stages.common import Batch
    from docverify.stages.discover import discover
    from docverify.stages.layout import layout_local
    from docverify.storage.store import ArtifactStore

    root = tmp_path / "root"
    incoming = root / "incoming" / kit.DS
    incoming.mkdir(parents=True)
    _scan(incoming / "scan6.pdf")
    b = Batch(store=ArtifactStore(root), ds=kit.DS, run_id="split")
    discover(b.fresh())
    out = layout_local(b.fresh(), workers=2, timeout_s=60, split_scan_pages=4)
    [doc] = b.fresh().rs.manifest().documents
    assert out.record["ok"] == [doc.doc_id] and out.errors == 0
    bundle = json.loads((root / "runs" / kit.DS / doc.doc_id / "bundle.json").read_text())
    assert [p["page_num"] for p in bundle["pages"]] == [1, 2, 3, 4, 5, 6]
    assert all(w in p["text"].upper() for w, p in zip(WORDS, bundle["pages"], strict=True))
    assert bundle["sha256"] == doc.sha256
    assert out.record["ocr"][doc.doc_id]["pages"] == 6 == out.record["ocr_pages"]
