"""Bounded inputs: a companion classification beyond any limit of docverify.storage.limits is a typed
error of its document (tested in the night) and, through the CLI, a JSON error with exit 2 —
never a traceback; the V2 page-overlap check reports at most n − 1 issues for n segments;
error messages never quote the input; the Markdown/HTML report escapes names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from tests.hostile import kit

from docverify.domain.models import ClassificationOutput
from docverify.reporting import report
from docverify.storage.limits import InputError, load_classification
from docverify.verify import v2_consistency

BUNDLE = {"doc_id": "d", "file_path": "d.pdf", "sha256": "0" * 64, "total_pages": 1,
          "processing_timestamp": "2026-11-20T00:00:00Z", "parser": "test",
          "pages": [{"page_num": 1, "text": "CLINICAL NOTE\nChief complaint: cough."}]}


@pytest.mark.parametrize("name", sorted(kit.bad_companions()))
def test_bad_companion_is_a_typed_error_without_its_content(name):
    data, code = kit.bad_companions()[name]
    with pytest.raises(InputError) as exc:
        load_classification(data, f"incoming/{name}.classification.json")
    assert exc.value.code == code
    assert f"{name}.classification.json" in exc.value.message
    assert kit.SECRET_COMPANION not in exc.value.message and "xxxxxxxx" not in exc.value.message


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m docverify …`` as a user runs it (a real process: a traceback would show)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(kit.REPO / "plugins"), str(kit.REPO)])}
    return subprocess.run([sys.executable, "-m", "docverify", *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.mark.parametrize("name", ["comp_list", "comp_null", "comp_truncated", "comp_deep", "comp_nan",
                                  "comp_many_segments", "comp_too_big"])
def test_cli_verify_answers_json_error_and_exit_2(tmp_path, name):
    data, code = kit.bad_companions()[name]
    (tmp_path / "b.json").write_text(json.dumps(BUNDLE))
    (tmp_path / "c.json").write_bytes(data)
    proc = _cli("verify", "--bundle", str(tmp_path / "b.json"), "--classification", str(tmp_path / "c.json"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    out = json.loads(proc.stdout)
    assert out["error"] == ("INVALID_JSON" if code == "INPUT_INVALID_JSON" else code)
    assert out["file"] == str(tmp_path / "c.json") and kit.SECRET_COMPANION not in proc.stdout


def test_cli_verify_with_a_deep_bundle_is_json_not_a_traceback(tmp_path):
    (tmp_path / "b.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    (tmp_path / "c.json").write_text("{}")
    proc = _cli("verify", "--bundle", str(tmp_path / "b.json"), "--classification", str(tmp_path / "c.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"] == "INPUT_TOO_DEEP"


def _overlapping(n: int) -> ClassificationOutput:
    raw = kit._classification("d", segments=n, pages=1)  # every segment claims page 1
    for i, seg in enumerate(raw["segments"]):
        seg["segment_index"] = i + 1
    return ClassificationOutput.model_validate(raw)


def test_page_overlap_reports_at_most_n_minus_1_issues():
    """300 segments on one page gave 44,850 issues and a 117 MB packet; now every overlapping
    segment is named once."""
    issues = v2_consistency.rule_phase(_overlapping(300))
    overlaps = [i for i in issues if i.code == "PAGE_OVERLAP"]
    assert len(overlaps) == 299
    assert {tuple(i.details["segments"]) for i in overlaps} == {(1, k) for k in range(2, 301)}


def test_page_overlap_still_finds_every_overlapping_segment():
    raw = kit._classification("d", segments=4, pages=1)
    spans = [(1, 3), (5, 6), (2, 2), (6, 9)]  # 3 overlaps 1; 4 overlaps 2
    for i, (seg, (lo, hi)) in enumerate(zip(raw["segments"], spans, strict=True)):
        seg.update(segment_index=i + 1, page_start=lo, page_end=hi, segment_page_count=hi - lo + 1)
    found = {tuple(i.details["segments"]): tuple(i.details["pages"])
             for i in v2_consistency.rule_phase(ClassificationOutput.model_validate(raw)) if i.code == "PAGE_OVERLAP"}
    assert found == {(1, 3): (2, 2), (2, 4): (6, 6)}
    raw["segments"] = raw["segments"][:2]
    raw["segments"][1].update(page_start=4, page_end=6)
    assert not [i for i in v2_consistency.rule_phase(ClassificationOutput.model_validate(raw))
                if i.code == "PAGE_OVERLAP"]


def test_not_a_pdf_message_names_the_format_never_the_bytes(tmp_path):
    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import parse_pdf

    p = tmp_path / "plain.pdf"
    p.write_text(kit.SECRET_TEXT)
    with pytest.raises(ParseError) as exc:
        parse_pdf(p)
    assert exc.value.code == "NOT_A_PDF" and "plain text" in exc.value.message
    assert "John" not in exc.value.message and "Patient" not in exc.value.message


def test_report_escapes_names_in_markdown_and_html():
    rep = {"ds": "2026-11-20", "documents": 1, "final_routes": {"ESCALATE_TO_SME": 1}, "rules": {"error": 1},
           "issues_by_code_attempt_0": {}, "llm": {"calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
                                                   "cached_tokens": 0, "cost_usd": 0.0, "price_model": None,
                                                   "price_source": None, "cost_note": None, "calls_per_document": 0,
                                                   "max_calls_per_document": 0},
           "per_document": [{"doc_id": "x", "route": "write_sme_packets", "final_decision": "ESCALATE_TO_SME",
                             "error": "NOT_A_PDF", "outputs": {},
                                 "llm": {"calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
                                         "cached_tokens": 0, "cost_usd": None}}],
           "errors": [{"doc_id": "x", "stage": "layout", "error": "NOT_A_PDF",
                       "message": "gs://b/<img src=x onerror=alert(1)>|[link](http://evil)*.pdf is not a PDF"}],
           "implementations": [], "stage_timings": {}}
    md = report.to_markdown(rep)
    assert not re.search(r"(?<!\\)<img", md) and "](http" not in md and "\\<img" in md
    html = report.to_html(rep)
    assert "<img" not in html and "&lt;img" in html


def test_a_validation_error_names_fields_never_values():
    """A traceback of a failed validation once put an evidence snippet into a task log: models
    hide their input in errors (pydantic ``hide_input_in_errors``)."""
    from pydantic import ValidationError

    raw = kit._classification("d")
    raw["segments"][0]["classifications"][0]["top_evidence"][0]["page"] = kit.SECRET_COMPANION
    with pytest.raises(ValidationError) as exc:
        ClassificationOutput.model_validate(raw)
    assert "page" in str(exc.value) and kit.SECRET_COMPANION not in str(exc.value)


def test_document_ai_output_too_deep_or_not_an_object_is_a_typed_error(tmp_path):
    from docverify.layout import docai
    from docverify.layout.errors import ParseError

    for name, data in (("deep-0.json", b"[" * 1000 + b"]" * 1000), ("list-0.json", b"[1, 2, 3]"),
                       ("nan-0.json", b'{"text": NaN')):
        f = tmp_path / name
        f.write_bytes(data)
        with pytest.raises(ParseError) as exc:
            docai.load_docai_output(f)
        assert exc.value.code == "DOCAI_INVALID_JSON" and name in exc.value.message
