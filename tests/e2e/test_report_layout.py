"""The batch report in a real browser window (issue 42): a 250-character file name, an id or a
message without a space never widens a table past the window, and the files discover ignored are
listed. No Airflow here: the report of an in-process night, opened from disk in headless Chromium
at 1400×1000 (a screenshot lands in build/e2e/)."""

from __future__ import annotations

import json

from tests.docverify.review_night import DS, REPO, run_night
from tests.e2e.conftest import SHOTS

from docverify.reporting import report

LONG = "Befund_Mueller_Roentgen_Thorax_" + "x" * 215 + ".pdf"  # 250 characters


def test_long_names_wrap_inside_the_window(driver, tmp_path):
    assert len(LONG) == 250
    pdf = (REPO / "include" / "samples" / "genomic_brca_ngs.pdf").read_bytes()
    b = run_night(tmp_path / "root", ("quest_cbc_panel", "corrupt_truncated"),
                  extra_files={LONG: pdf, "notes.txt": b"call the ward\n"})
    report.write(b.fresh())
    out = tmp_path / "root" / "reports" / DS
    rep = json.loads((out / "batch_report.json").read_text())
    # whatever the ids are (opaque since ADR 0050), the layout must hold for a long id and message too
    rep["per_document"][0]["doc_id"] = "doc_" + "y" * 246
    rep["errors"].append({"doc_id": "z" * 250, "stage": "layout", "error": "CORRUPT", "message": "m" * 300})
    page = tmp_path / "long.html"
    page.write_text(report.to_html(rep))
    for path, name in ((out / "batch_report.html", "report_long_name"), (page, "report_long_id")):
        driver.get(path.as_uri())
        widths = driver.execute_script(
            "return {page: document.documentElement.scrollWidth, window: window.innerWidth,"
            " tables: [...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().right)}")
        driver.save_screenshot(str(SHOTS / f"{name}.png"))
        assert widths["page"] <= widths["window"], (name, widths)
        assert widths["tables"] and max(widths["tables"]) <= widths["window"], (name, widths)
        body = driver.find_element("tag name", "body").text
        assert "1 file(s) in the folder ignored" in body and "_manifest.json" in body, name
