"""The sample batch include/samples/: reproducible from scripts/make_samples.py, companions valid,
evidence really on the PDF pages, broken samples broken the way they should be."""

import json
import subprocess
import sys

import pypdfium2 as pdfium
import pytest

from docverify.domain.models import ClassificationOutput

COMPANIONS = ("quest_cbc_panel", "lab_requisition_form", "retry_shares", "fabricated_evidence")
EXPECTED_PDFS = {
    "path_tcga_19-1787", "radiology_iu_101", "note_mts_19", "genomic_brca_ngs", "quest_cbc_panel",
    "fax_cover_sheet", "lab_requisition_form", "mixed_genomic_then_note", "retry_shares",
    "fabricated_evidence", "scanned_no_text", "corrupt_truncated", "radiology_mention_only",
}
ROUTES = {"AUTO_ACCEPT", "AUTO_RETRY→AUTO_ACCEPT", "ESCALATE_TO_SME"}


@pytest.fixture(scope="module")
def samples(repo_dir):
    return repo_dir / "include" / "samples"


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def page_texts(path) -> list[str]:
    pdf = pdfium.PdfDocument(str(path))
    try:
        return [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    finally:
        pdf.close()


def companion(samples, doc_id) -> dict:
    return json.loads((samples / f"{doc_id}.classification.json").read_text(encoding="utf-8"))


def evidence(c: dict):
    for seg in c["segments"]:
        for tc in seg["classifications"]:
            yield from tc["top_evidence"]


def generated_names(folder) -> set[str]:
    return {p.name for p in folder.iterdir() if p.suffix == ".pdf" or p.name.endswith(".classification.json")}


@pytest.mark.corpus
def test_generator_reproduces_committed_samples(repo_dir, samples, corpora_dir, tmp_path):
    out = tmp_path / "samples"
    p = subprocess.run([sys.executable, str(repo_dir / "scripts" / "make_samples.py"), "--out", str(out),
                        "--corpora", str(corpora_dir)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    names = generated_names(out)
    assert names == generated_names(samples), "committed samples differ from the generator's file list"
    differ = [n for n in sorted(names) if (out / n).read_bytes() != (samples / n).read_bytes()]
    assert not differ, f"regenerate with `make samples`: these differ from the generator's output: {differ}"


def test_sample_set_and_size(samples):
    assert {p.stem for p in samples.glob("*.pdf")} == EXPECTED_PDFS
    assert {p.name.split(".")[0] for p in samples.glob("*.classification.json")} == set(COMPANIONS)
    assert sum(p.stat().st_size for p in samples.iterdir() if p.is_file()) < 300_000
    assert (samples / "SOURCE.md").is_file()


def test_expected_routes_name_every_sample(samples):
    data = json.loads((samples / "expected_routes.json").read_text(encoding="utf-8"))
    assert set(data["routes"]) == EXPECTED_PDFS
    assert set(data["routes"].values()) <= ROUTES
    assert set(data["routes"].values()) == ROUTES, "the batch must take all three routes"
    assert set(data["demonstrates"]) == EXPECTED_PDFS


@pytest.mark.parametrize("doc_id", COMPANIONS)
def test_companion_is_a_classification_output(samples, doc_id):
    c = companion(samples, doc_id)
    assert ClassificationOutput.model_validate(c).doc_id == doc_id
    pages = len(page_texts(samples / f"{doc_id}.pdf"))
    assert all(1 <= s["page_start"] <= s["page_end"] <= pages for s in c["segments"])


@pytest.mark.parametrize("doc_id", ["retry_shares", "quest_cbc_panel", "lab_requisition_form"])
def test_evidence_is_on_its_pdf_page(samples, doc_id):
    texts = [norm(t) for t in page_texts(samples / f"{doc_id}.pdf")]
    evs = list(evidence(companion(samples, doc_id)))
    assert evs
    for ev in evs:
        assert norm(ev["snippet"]) in texts[ev["page"] - 1], ev
        for anchor in ev["anchors_found"]:
            assert norm(anchor) in texts[ev["page"] - 1], (anchor, ev)


def test_fabricated_snippet_is_nowhere_in_its_pdf(samples):
    text = norm(" ".join(page_texts(samples / "fabricated_evidence.pdf")))
    evs = list(evidence(companion(samples, "fabricated_evidence")))
    assert evs and all(norm(ev["snippet"]) not in text for ev in evs)


def test_retry_shares_keeps_the_spec_share_errors(samples):
    c = companion(samples, "retry_shares")
    seg1 = sum(tc["segment_share"] for tc in c["segments"][0]["classifications"])
    mixture = sum(m["overall_share"] for m in c["document_mixture"])
    assert seg1 == pytest.approx(1.06) and mixture == pytest.approx(0.97)
    genomic2 = next(tc for tc in c["segments"][1]["classifications"] if tc["doc_type"] == "Genomic Report")
    assert genomic2["presence_level"] == "MENTION_ONLY" and genomic2["top_evidence"] == []


def test_quest_companion_is_the_trap(samples):
    c = companion(samples, "quest_cbc_panel")
    assert c["vendor_signals"] == ["Quest Diagnostics"]
    genomic = next(tc for tc in c["segments"][0]["classifications"] if tc["doc_type"] == "Genomic Report")
    assert genomic["presence_level"] == "PRIMARY"
    assert "quest diagnostics" in norm(page_texts(samples / "quest_cbc_panel.pdf")[0])


def test_requisition_companion_is_the_spec_trap_2(samples):
    """The specification's trap 2 example (slide 5): a requisition with Pathology Report EMBEDDED_RAW.
    A report type the form only mentions (MENTION_ONLY) would be no trap (ADR 0046)."""
    c = companion(samples, "lab_requisition_form")
    [seg] = c["segments"]
    levels = {tc["doc_type"]: tc["presence_level"] for tc in seg["classifications"]}
    assert levels == {"Clinical Note": "NO_EVIDENCE", "Pathology Report": "EMBEDDED_RAW", "Genomic Report": "NO_EVIDENCE",
                      "Radiology Report": "NO_EVIDENCE", "Other": "PRIMARY"}
    assert seg["dominant_type"] == c["dominant_type_overall"] == "Other"
    assert "requisition" in norm(page_texts(samples / "lab_requisition_form.pdf")[0])


def test_text_samples_have_text_on_every_page(samples):
    for p in samples.glob("*.pdf"):
        if p.stem in ("scanned_no_text", "corrupt_truncated"):
            continue
        texts = page_texts(p)
        assert texts and all(t.strip() for t in texts), p.name


def test_scanned_sample_has_pages_but_no_text(samples):
    texts = page_texts(samples / "scanned_no_text.pdf")
    assert len(texts) >= 1
    assert all(not t.strip() for t in texts)


def test_corrupt_sample_does_not_open(samples):
    path = samples / "corrupt_truncated.pdf"
    assert path.read_bytes().startswith(b"%PDF-")
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(path))
