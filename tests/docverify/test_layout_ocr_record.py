"""Each document's OCR work in the layout stage record, and the night's totals in the batch report
(issue 40 item 4, ADR 0052): a night of one scanned sample and one text PDF, in process."""

from __future__ import annotations

import json

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
