"""V2's independent reader (ADR 0038): a statistical model that reads the page text without the
classifier's labels and shares nothing with the classifier's lexicon."""

from __future__ import annotations

import ast
import pathlib
import shutil
import sys

import pytest
from scripts.support.labelled_corpus import part_records
from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification

from docverify.domain.models import DOC_TYPES
from docverify.reporting.labelled_sample import split_pages
from docverify.verify import independent as ind
from docverify.verify import v2_consistency

REPO = pathlib.Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "docverify" / "verify" / "independent.py"


def test_the_reader_shares_no_code_with_the_classifier():
    """Independence by construction: the reader imports neither the classifier nor its lexicon."""
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.startswith(("docverify.domain.lexicon", "docverify.classify"))}


def test_the_shipped_model_loads_without_network_and_names_its_hash():
    reader = ind.load()
    assert set(reader.classes) == set(DOC_TYPES)
    assert 0.5 <= reader.segment_threshold < 1 and 0.5 <= reader.page_threshold < 1
    assert reader.implementation == ind.implementation_id()
    assert reader.implementation in v2_consistency.OFFLINE_IMPLEMENTATION
    assert len(reader.buckets) == reader.coef.shape[1] == len(reader.idf)


def test_a_missing_model_is_a_clear_error_and_never_an_accept(tmp_path, monkeypatch):
    with pytest.raises(ind.ReaderUnavailable, match="make independent-reader"):
        ind.load(tmp_path / "absent.npz")
    assert ind.implementation_id(tmp_path / "absent.npz") == "independent-reader-missing"


def _test_records(corpora_dir) -> dict[str, list[dict]]:
    """The test part's texts over 2,500 characters, by type, in id order."""
    by_type: dict[str, list[dict]] = {}
    for r in sorted(part_records(corpora_dir, REPO, "test"), key=lambda r: str(r["id"])):
        if len(r["text"]) > 2500:
            by_type.setdefault(r["proposed_doc_type"], []).append(r)
    return by_type


@pytest.mark.parametrize("true_type, wrong_type", [
    ("Radiology Report", "Pathology Report"), ("Pathology Report", "Clinical Note"),
    ("Clinical Note", "Radiology Report"),
])
def test_a_wrong_label_on_real_held_out_text_is_read_as_the_true_type(corpora_dir, true_type, wrong_type):
    """Texts of the test part (never trained on): the first three of the type, labelled wrongly, are each
    reported naming both types; labelled rightly, none is."""
    reader = ind.default_reader()
    for rec in _test_records(corpora_dir)[true_type][:3]:
        b = _bundle(split_pages(rec["text"]))
        n = b.total_pages
        assert ind.disagreements(b, _classification([(1, n, true_type)]), reader) == []
        [issue] = ind.disagreements(b, _classification([(1, n, wrong_type)]), reader)
        assert issue.code == "INDEPENDENT_READING_DISAGREES" and issue.severity == "MAJOR" and not issue.auto_fixable
        assert issue.details["read_as"] == true_type and issue.details["labelled"] == wrong_type
        assert wrong_type in issue.message and true_type in issue.message


def test_pages_of_another_document_inside_a_segment_are_one_issue_naming_them(corpora_dir):
    """A radiology report's pages followed by a pathology report's, all called one Radiology segment: the
    pathology pages are read as Pathology Report (the whole segment may still read as radiology)."""
    recs = _test_records(corpora_dir)
    rad = split_pages(recs["Radiology Report"][0]["text"], 1500)
    path = split_pages(recs["Pathology Report"][1]["text"], 1500)[:2]
    b = _bundle(rad + rad + path)  # radiology outweighs the foreign pages in the segment's whole text
    n = b.total_pages
    issues = ind.disagreements(b, _classification([(1, n, "Radiology Report")]))
    assert issues, "the foreign pages were not read"
    foreign = [i for i in issues if i.details["read_as"] == "Pathology Report"]
    assert foreign and foreign[0].details["pages"][1] == n


def test_v2_offline_judgment_carries_the_reading_once_per_segment(corpora_dir):
    rec = _test_records(corpora_dir)["Pathology Report"][2]
    b = _bundle(split_pages(rec["text"]))
    issues = v2_consistency.offline_judgment(b, _classification([(1, b.total_pages, "Radiology Report")]))
    per_segment = [i for i in issues if i.code in ("LABEL_TEXT_MISMATCH", "INDEPENDENT_READING_DISAGREES")
                   and i.details.get("segment_index") == 1]
    assert len(per_segment) == 1


@pytest.mark.slow
def test_the_shipped_model_equals_a_retrain(corpora_dir, tmp_path):
    """`make independent-reader` reproduces the shipped artefact (coefficients rounded to 1e-4)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import train_independent_reader as t
    finally:
        sys.path.remove(str(REPO / "scripts"))
    shutil.copy(REPO / "include" / ind.ARTEFACT, tmp_path / "shipped.npz")
    assert t.main(["--corpora", str(corpora_dir), "--out", str(tmp_path / "shipped.npz"), "--check"]) == 0
