"""A labelled text's page as a night holds a PDF's page (``labelled_sample.text_page``, what ``docverify evaluate``
and the benchmarks build their bundles from): cleaned as the local parser cleans a text layer, so a text read
from a UTF-16 layer byte by byte (a NUL between its letters, as one TCGA report of the shared corpus is) reads as
the report it is, not as nothing."""

from __future__ import annotations

from docverify.classify.offline import classify_offline
from docverify.domain.models import DocumentBundle, Page
from docverify.reporting.labelled_sample import text_page, to_bundle

REPORT = ("Pathology Report\nDIAGNOSIS\n(A) LEFT KIDNEY AND ADRENAL GLAND: RENAL CELL CARCINOMA, CHROMOPHOBE TYPE, "
          "FUHRMAN NUCLEAR GRADE 3 (10.5 CM). TUMOR CONFINED TO THE KIDNEY.  \nUreteral, vascular and soft tissue "
          "margins of resection free of tumor. One perinephric lymph node, no tumor present.\n\n"
          "GROSS DESCRIPTION\nReceived in formalin, a left radical nephrectomy specimen with the adrenal gland.\n"
          "MICROSCOPIC DESCRIPTION\nSections show chromophobe renal cell carcinoma.")
UTF16 = "".join("\x00" + c for c in REPORT)


def test_a_nul_between_every_letter_is_removed_and_nothing_else_changes_but_trailing_spaces():
    page = text_page(1, UTF16)
    assert "\x00" not in page.text
    assert page.text == "\n".join(line.rstrip() for line in REPORT.split("\n"))
    assert page.paragraphs == [p for p in page.text.split("\n\n") if p.strip()] and len(page.paragraphs) == 2


def test_the_classifier_reads_the_cleaned_page_as_the_report_it_is():
    bundle = to_bundle({"id": "r1", "corpus": "c", "text": UTF16})
    assert bundle.pages[0].text.startswith("Pathology Report\nDIAGNOSIS")
    assert classify_offline(bundle).dominant_type_overall == "Pathology Report"
    # the same text uncleaned (as the benchmarks built it before) has no cue at all
    raw = DocumentBundle(doc_id="r0", file_path="x", total_pages=1, pages=[Page(page_num=1, text=UTF16)])
    assert classify_offline(raw).dominant_type_overall == "Other"
