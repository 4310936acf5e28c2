"""Write the sample batch ``include/samples/``: the PDFs the nightly DAG's embedded default runs on,
and the companion ``<doc>.classification.json`` files whose classification is verified as given.

    python scripts/make_samples.py [--out DIR] [--corpora DIR]

Deterministic: the same corpora give the same bytes on every run (fixed creation date, no random
ids, uncompressed page content, images stored with zlib level 0). Three samples are made from real
public texts read from the shared corpora (``--corpora``, else ``$DOCVERIFY_CORPORA``, else
``<repo>/../shared/corpora``); every other text is written here, or comes from
``scripts/support/examples.py`` (the specification's worked examples). ``include/samples/SOURCE.md`` says
where each text came from; ``include/samples/expected_routes.json`` (kept by hand) says which route
each sample is expected to take.

PDF text uses fpdf2's core fonts, so it must be latin-1: other characters are transliterated
(dashes, quotes, bullets) or dropped. After writing, the script parses its own PDFs with
pypdfium2 and fails if an evidence snippet or anchor of a companion classification is not on its
page (or, for the fabricated-evidence sample, if the fabricated snippet *is* found).
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import os
import pathlib
import re
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from fpdf import FPDF  # noqa: E402
from fpdf.enums import XPos, YPos  # noqa: E402
from scripts.support.examples import (  # noqa: E402
    GENOMIC_P1,
    GENOMIC_P2,
    NOTE_P3,
    classification,
    spec_auto_retry,
    spec_fabricated,
)

from docverify.domain.models import ClassificationOutput  # noqa: E402

CREATION_DATE = datetime(2026, 1, 1, tzinfo=UTC)
PRODUCER = "docverify scripts/make_samples.py"
CHARS_PER_PAGE = 2500

# The real records used (see include/samples/SOURCE.md).
TCGA_ID = "tcga-brain-TCGA-19-1787"
IU_ID = "iu-101"
SCAN_IU_ID = "iu-571"  # the report of the scanned sample
MTS_ID = "mts-19"

ADMIN_KEYWORDS = ("requisition", "authorization number", "fax cover", "test request", "specimen receipt")
ROUTINE_VENDORS = ("quest diagnostics", "labcorp", "lab corp")


# =========================================================================== text helpers

_TRANSLIT = {
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"',
    "\u2022": "*", "\u2023": "*", "\u25aa": "*", "\u25cf": "*", "\u00b7": "*",
    "\u2026": "...", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\t": " ",
}


def latin1(text: str) -> str:
    """Text that fpdf2's core fonts can write: printable latin-1 only (plus newlines)."""
    out = []
    for ch in text:
        ch = _TRANSLIT.get(ch, ch)
        if len(ch) > 1:
            out.append(ch)
            continue
        o = ord(ch)
        if ch == "\n" or 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xFF:
            out.append(ch)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
        out.append("".join(c for c in base if 0x20 <= ord(c) <= 0x7E or 0xA0 <= ord(c) <= 0xFF))
    return "".join(out)


def normalise(text: str) -> str:
    """What the checks compare: lower case, runs of whitespace collapsed."""
    return " ".join(text.lower().split())


def chunk_lines(lines: list[str], limit: int = CHARS_PER_PAGE) -> list[list[str]]:
    """Group lines into pages of about ``limit`` characters (never splitting a line)."""
    pages: list[list[str]] = [[]]
    size = 0
    for line in lines:
        if pages[-1] and size + len(line) > limit:
            pages.append([])
            size = 0
        pages[-1].append(line)
        size += len(line) + 1
    return pages


def has_admin_or_vendor(text: str) -> bool:
    low = text.lower()
    return any(k in low for k in ADMIN_KEYWORDS + ROUTINE_VENDORS)


# =========================================================================== PDF writer


class SamplePDF(FPDF):
    """US-letter pages, Helvetica, left-aligned text; a few layout helpers."""

    def __init__(self, title: str) -> None:
        super().__init__(orientation="P", unit="mm", format="letter")
        self.set_creation_date(CREATION_DATE)
        self.set_producer(PRODUCER)
        self.set_creator(PRODUCER)
        self.set_title(latin1(title))
        self.set_compression(False)
        self.set_margins(18, 16, 18)
        self.set_auto_page_break(True, margin=16)
        self.set_text_color(0, 0, 0)

    # -- text blocks
    def title_line(self, text: str, size: float = 15) -> None:
        self.set_font("Helvetica", "B", size)
        self.multi_cell(0, size * 0.5, latin1(text), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(2)

    def heading(self, text: str, size: float = 11) -> None:
        self.ln(1.5)
        self.set_font("Helvetica", "B", size)
        self.multi_cell(0, 5.5, latin1(text), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def para(self, text: str, size: float = 10, style: str = "", h: float = 4.8) -> None:
        self.set_font("Helvetica", style, size)
        self.multi_cell(0, h, latin1(text), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def gap(self, mm: float = 2.5) -> None:
        self.ln(mm)

    def label_value(self, label: str, value: str, size: float = 10) -> None:
        """``Label: value`` with the label in bold, wrapped as one paragraph."""
        self.set_font("Helvetica", "B", size)
        lw = self.get_string_width(latin1(label) + " ") + 0.5
        self.cell(lw, 4.8, latin1(label) + " ")
        self.set_font("Helvetica", "", size)
        self.multi_cell(0, 4.8, latin1(value), align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def table(self, header: list[str], rows: list[list[str]], widths: list[float], size: float = 9,
              h: float = 4.6) -> None:
        self.set_font("Helvetica", "B", size)
        for text, w in zip(header, widths, strict=True):
            self.cell(w, h + 0.6, latin1(text), border="B")
        self.ln(h + 0.6)
        self.set_font("Helvetica", "", size)
        for row in rows:
            for text, w in zip(row, widths, strict=True):
                self.cell(w, h, latin1(text))
            self.ln(h)

    def checkbox(self, label: str, checked: bool, w: float, size: float = 9) -> None:
        """A drawn box (vector lines, no text) followed by its label."""
        x, y = self.get_x(), self.get_y()
        self.set_line_width(0.25)
        self.rect(x + 0.5, y + 0.9, 3, 3)
        if checked:
            self.line(x + 0.5, y + 0.9, x + 3.5, y + 3.9)
            self.line(x + 0.5, y + 3.9, x + 3.5, y + 0.9)
        self.set_x(x + 5)
        self.set_font("Helvetica", "", size)
        self.cell(w - 5, 4.8, latin1(label))

    def footer_text(self, text: str) -> None:
        """A footer line at the bottom of the current page."""
        y = self.get_y()
        auto = self.auto_page_break
        self.set_auto_page_break(False)
        self.set_xy(self.l_margin, self.h - 12)
        self.set_font("Helvetica", "I", 8)
        self.cell(0, 4, latin1(text), align="C")
        self.set_auto_page_break(auto, margin=16)
        self.set_y(y)

    def write_to(self, path: pathlib.Path) -> bytes:
        data = bytes(self.output())
        path.write_bytes(data)
        return data


def pages_pdf(path: pathlib.Path, title: str, pages: list[str], heading_first_line: bool = True) -> bytes:
    """One PDF page per text; the first line of each page in bold when ``heading_first_line``."""
    pdf = SamplePDF(title)
    for text in pages:
        pdf.add_page()
        lines = latin1(text).split("\n")
        if heading_first_line:
            pdf.title_line(lines[0], size=14)
            lines = lines[1:]
        for line in lines:
            pdf.para(line)
            pdf.gap(1.5)
    return pdf.write_to(path)


# =========================================================================== corpora


def corpora_dir(arg: str | None) -> pathlib.Path:
    if arg:
        return pathlib.Path(arg)
    env = os.environ.get("DOCVERIFY_CORPORA")
    if env:
        return pathlib.Path(env)
    from scripts.support.corpora import default_corpora_dir

    return default_corpora_dir()


def load_records(corpora: pathlib.Path) -> dict[str, dict]:
    path = corpora / "text_labeled" / "combined_sample.jsonl"
    with path.open(encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, f)}


def load_csv(path: pathlib.Path) -> dict[str, dict]:
    with path.open(encoding="utf-8", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


# =========================================================================== real texts


def make_pathology(out: pathlib.Path, corpora: pathlib.Path) -> str:
    rec = load_records(corpora)[TCGA_ID]
    assert rec["corpus"] == "tcga_ocr", rec["corpus"]
    text = rec["text"]
    assert not has_admin_or_vendor(text), f"{TCGA_ID} has an administrative keyword or a routine lab vendor"
    doc_id = "path_tcga_" + TCGA_ID.split("TCGA-", 1)[1]
    lines = [ln.rstrip() for ln in latin1(text).split("\n") if ln.strip()]
    pdf = SamplePDF("Surgical pathology report")
    for i, page in enumerate(chunk_lines(lines)):
        pdf.add_page()
        if i == 0:
            pdf.title_line("SURGICAL PATHOLOGY REPORT")
        for line in page:
            pdf.para(line, h=4.6)
    pdf.write_to(out / f"{doc_id}.pdf")
    return doc_id


def make_radiology(out: pathlib.Path, corpora: pathlib.Path) -> str:
    rec = load_csv(corpora / "text_labeled" / "iu_xray_reports" / "iu_xray_sample.csv")[IU_ID]
    doc_id = "radiology_iu_" + IU_ID.split("-", 1)[1]
    radiology_pdf(rec).write_to(out / f"{doc_id}.pdf")
    return doc_id


def radiology_pdf(rec: dict) -> SamplePDF:
    """One IU chest X-ray report laid out as a radiology report page."""
    pdf = SamplePDF("Radiology report")
    pdf.add_page()
    pdf.title_line("RADIOLOGY REPORT")
    for label, field in (("EXAMINATION:", "image"), ("INDICATION:", "indication"), ("COMPARISON:", "comparison")):
        value = " ".join(rec[field].split())
        if value:
            pdf.label_value(label, value)
            pdf.gap(1.5)
    for label, field in (("FINDINGS:", "findings"), ("IMPRESSION:", "impression")):
        value = " ".join(rec[field].split())
        if not value:
            continue
        pdf.heading(label)
        # numbered statements ("1. ... 2. ...") one per line, as radiologists lay them out
        for item in re.split(r"\s+(?=\d{1,2}\.\s)", value):
            pdf.para(item)
        pdf.gap(1.5)
    assert not has_admin_or_vendor(" ".join(rec.values()))
    return pdf


_MTS_SECTION = re.compile(r"(?:^|,)\s*([A-Z][A-Z0-9 /&()'-]*[A-Z)]:)\s*,?\s*")
_MTS_ITEM = re.compile(r",\s*(?=\d{1,2}\.\s)")


def mts_lines(text: str) -> list[str]:
    """MTSamples joins sections as ``...,HEADING:, text``: one line per section, numbered items
    on lines of their own."""
    text = _MTS_SECTION.sub(lambda m: "\n" + m.group(1) + " ", text)
    text = _MTS_ITEM.sub("\n", text)
    return [" ".join(ln.split()) for ln in text.split("\n") if ln.strip()]


def make_note(out: pathlib.Path, corpora: pathlib.Path) -> str:
    rec = load_csv(corpora / "text_labeled" / "mtsamples_subset" / "mtsamples_sample.csv")[MTS_ID]
    assert rec["medical_specialty"].strip() == "General Medicine", rec["medical_specialty"]
    assert not has_admin_or_vendor(rec["text"])
    doc_id = "note_mts_" + MTS_ID.split("-", 1)[1]
    lines = mts_lines(latin1(rec["text"]))
    pdf = SamplePDF("Clinical note")
    for i, page in enumerate(chunk_lines(lines)):
        pdf.add_page()
        if i == 0:
            pdf.title_line("CLINICAL NOTE")
            pdf.para(rec["sample_name"].strip(), style="B")
            pdf.gap(2)
        for line in page:
            head, sep, rest = line.partition(": ")
            if sep and head.isupper():
                pdf.label_value(head + ":", rest)
            else:
                pdf.para(line)
            pdf.gap(1.5)
    pdf.write_to(out / f"{doc_id}.pdf")
    return doc_id


# =========================================================================== written texts

LAB = "Northbridge Molecular Genetics Laboratory"
FICTITIOUS = "Fictitious report written for software testing; it describes no real person."


def make_genomic(out: pathlib.Path) -> str:
    doc_id = "genomic_brca_ngs"
    pdf = SamplePDF("Genomic sequencing report")
    pdf.add_page()
    pdf.title_line("GENOMIC SEQUENCING REPORT")
    pdf.para(LAB, size=11, style="B")
    pdf.para("1200 Example Parkway, Suite 400, Springfield, ST 00000  -  CLIA ID 00D0000000 (placeholder)", size=9)
    pdf.gap(3)
    for label, value in (
        ("Patient:", "SAMPLE, PATIENT A (placeholder)    Sex: Female    Date of birth: [redacted]"),
        ("Accession:", "NB-2026-000123    Specimen: peripheral blood (EDTA)"),
        ("Collected:", "2026-01-05    Received: 2026-01-06    Reported: 2026-01-20"),
        ("Ordering clinician:", "Dr. A. Example, Cancer Genetics Clinic (placeholder)"),
    ):
        pdf.label_value(label, value)
    pdf.heading("TEST PERFORMED")
    pdf.para("Hereditary Breast and Ovarian Cancer Panel: BRCA1/BRCA2 full gene sequencing and "
             "deletion/duplication analysis, with 10 additional genes.")
    pdf.heading("RESULT SUMMARY")
    pdf.para("POSITIVE: one pathogenic variant detected in BRCA2.", style="B")
    pdf.para("One variant of uncertain significance (VUS) detected in ATM.")
    pdf.heading("GENES ANALYZED")
    pdf.para("ATM, BARD1, BRCA1, BRCA2, BRIP1, CDH1, CHEK2, PALB2, PTEN, RAD51C, RAD51D, TP53")
    pdf.heading("METHODOLOGY")
    pdf.para(
        "Genomic DNA extracted from peripheral blood was enriched for the coding exons and flanking intronic "
        "regions (+/- 20 bp) of the genes analyzed by hybridization capture and sequenced by next-generation "
        "sequencing (NGS; paired-end 2 x 150 bp). Reads were aligned to the GRCh38 reference genome. "
        "Minimum read depth 50x; mean coverage 480x. Deletions and duplications were assessed from read "
        "depth and confirmed by MLPA. Reportable variants were confirmed by Sanger sequencing. Variants are "
        "described using HGVS nomenclature and classified according to the ACMG/AMP 2015 guidelines."
    )
    pdf.footer_text(f"{LAB}  -  Accession NB-2026-000123  -  Page 1 of 2")

    pdf.add_page()
    pdf.title_line("VARIANT FINDINGS", size=13)
    pdf.table(
        ["Gene", "Transcript", "DNA change", "Protein change", "Zygosity", "Classification"],
        [["BRCA2", "NM_000059.4", "c.5946del", "p.(Ser1982Argfs*22)", "Heterozygous", "Pathogenic"],
         ["ATM", "NM_000051.4", "c.1229T>C", "p.(Val410Ala)", "Heterozygous", "Uncertain significance"]],
        [18, 26, 24, 36, 25, 45],
    )
    pdf.heading("INTERPRETATION")
    pdf.para(
        "A heterozygous pathogenic frameshift variant, BRCA2 c.5946del (p.Ser1982Argfs*22), was identified. "
        "It creates a premature stop codon and is expected to result in loss of function. Pathogenic germline "
        "BRCA2 variants cause hereditary breast and ovarian cancer syndrome, with increased lifetime risks of "
        "female and male breast cancer, ovarian cancer, prostate cancer and pancreatic cancer."
    )
    pdf.gap(1.5)
    pdf.para(
        "The ATM c.1229T>C (p.Val410Ala) missense variant is classified as a variant of uncertain "
        "significance; it should not be used for clinical decision making. No other pathogenic or likely "
        "pathogenic variants were detected in the genes analyzed."
    )
    pdf.heading("RECOMMENDATIONS")
    pdf.para(
        "Genetic counseling is recommended. Targeted testing of at-risk relatives for the BRCA2 variant is "
        "available. Cancer risk management should follow current guidelines for BRCA2 carriers."
    )
    pdf.heading("LIMITATIONS")
    pdf.para(
        "This assay does not detect low-level mosaicism, deep intronic variants outside the captured regions, "
        "or structural rearrangements with breakpoints in repetitive sequence. Variant classification may "
        "change as evidence accumulates."
    )
    pdf.gap(4)
    pdf.para("Electronically signed by Dr. B. Example, PhD, FACMG, Laboratory Director - 2026-01-20", size=9)
    pdf.para(FICTITIOUS, size=8, style="I")
    pdf.footer_text(f"{LAB}  -  Accession NB-2026-000123  -  Page 2 of 2")
    pdf.write_to(out / f"{doc_id}.pdf")
    return doc_id


CBC_ROWS = [
    ["WHITE BLOOD CELL COUNT (WBC)", "8.2", "", "3.8-10.8", "Thousand/uL"],
    ["RED BLOOD CELL COUNT (RBC)", "4.61", "", "4.20-5.80", "Million/uL"],
    ["HEMOGLOBIN", "13.4", "", "13.2-17.1", "g/dL"],
    ["HEMATOCRIT", "40.1", "", "38.5-50.0", "%"],
    ["MCV", "87.0", "", "80.0-100.0", "fL"],
    ["MCH", "29.1", "", "27.0-33.0", "pg"],
    ["MCHC", "33.4", "", "32.0-36.0", "g/dL"],
    ["RDW", "13.1", "", "11.0-15.0", "%"],
    ["PLATELET COUNT (PLT)", "250", "", "140-400", "Thousand/uL"],
    ["MPV", "10.2", "", "7.5-12.5", "fL"],
    ["ABSOLUTE NEUTROPHILS", "5125", "", "1500-7800", "cells/uL"],
    ["ABSOLUTE LYMPHOCYTES", "2132", "", "850-3900", "cells/uL"],
    ["ABSOLUTE MONOCYTES", "640", "", "200-950", "cells/uL"],
    ["ABSOLUTE EOSINOPHILS", "246", "", "15-500", "cells/uL"],
    ["ABSOLUTE BASOPHILS", "57", "", "0-200", "cells/uL"],
    ["NEUTROPHILS", "62.5", "", "", "%"],
    ["LYMPHOCYTES", "26.0", "", "", "%"],
    ["MONOCYTES", "7.8", "", "", "%"],
    ["EOSINOPHILS", "3.0", "", "", "%"],
    ["BASOPHILS", "0.7", "", "", "%"],
]
BMP_ROWS = [
    ["GLUCOSE", "104", "H", "65-99", "mg/dL"],
    ["UREA NITROGEN (BUN)", "16", "", "7-25", "mg/dL"],
    ["CREATININE", "0.98", "", "0.70-1.30", "mg/dL"],
    ["EGFR", "88", "", "> OR = 60", "mL/min/1.73m2"],
    ["BUN/CREATININE RATIO", "NOT APPLICABLE", "", "6-22", "(calc)"],
    ["SODIUM", "140", "", "135-146", "mmol/L"],
    ["POTASSIUM", "4.3", "", "3.5-5.3", "mmol/L"],
    ["CHLORIDE", "103", "", "98-110", "mmol/L"],
    ["CARBON DIOXIDE", "26", "", "20-32", "mmol/L"],
    ["CALCIUM", "9.6", "", "8.6-10.3", "mg/dL"],
]
CBC_SNIPPET = "COMPLETE BLOOD COUNT (CBC) WITH DIFFERENTIAL/PLATELET"


def make_quest_cbc(out: pathlib.Path) -> tuple[str, dict]:
    doc_id = "quest_cbc_panel"
    pdf = SamplePDF("Quest Diagnostics laboratory report")
    pdf.add_page()
    pdf.title_line("Quest Diagnostics", size=16)
    pdf.para("Laboratory Report  -  Final", size=10, style="B")
    pdf.gap(2)
    for label, value in (
        ("Patient:", "SAMPLE, PATIENT B (placeholder)    Sex: M    Age: 54"),
        ("Specimen:", "QD000000X (placeholder)    Fasting: Yes"),
        ("Collected:", "01/12/2026 07:45    Received: 01/12/2026 09:10    Reported: 01/13/2026 06:02"),
        ("Ordering physician:", "EXAMPLE, CLINICIAN (placeholder)"),
    ):
        pdf.label_value(label, value, size=9)
    widths = [62, 30, 12, 32, 30]
    header = ["Test Name", "Result", "Flag", "Reference Range", "Units"]
    pdf.heading(CBC_SNIPPET, size=10)
    pdf.table(header, CBC_ROWS, widths, h=4.3)
    pdf.heading("BASIC METABOLIC PANEL", size=10)
    pdf.table(header, BMP_ROWS, widths, h=4.3)
    pdf.gap(2)
    pdf.para("Flags: H = above the reference range, L = below the reference range. "
             "Reference ranges are for adults.", size=8)
    pdf.para("Fictitious values written for software testing; they describe no real person.", size=8, style="I")
    pdf.footer_text("Quest Diagnostics  -  SAMPLE, PATIENT B  -  Page 1 of 1")
    pdf.write_to(out / f"{doc_id}.pdf")
    # the classifier's mistake of the specification (slide 5): routine CBC called Genomic PRIMARY
    c = classification(
        [(1, 1, "Genomic Report", {"snippet": CBC_SNIPPET, "page": 1, "anchors_found": ["WBC", "RBC", "PLT"]})],
        doc_id, vendors=["Quest Diagnostics"])
    for tc in c["segments"][0]["classifications"]:
        if tc["doc_type"] == "Genomic Report":
            tc["confidence"] = 0.78
    c["segments"][0]["reasoning"] = ("Panel of gene-like analyte symbols (WBC, RBC, PLT) with results and ranges; "
                                     "read as a genomic result table.")
    c["self_evaluation"] = {"confidence": 0.78, "notes": "Sample companion: the spec's Quest CBC trap."}
    c["classifier"] = "external"
    return doc_id, c


def make_fax_cover(out: pathlib.Path) -> str:
    doc_id = "fax_cover_sheet"
    pdf = SamplePDF("Fax cover sheet")
    pdf.add_page()
    pdf.title_line("FAX COVER SHEET", size=18)
    pdf.para("Riverside Family Medicine (placeholder)  -  44 Example Street, Springfield, ST 00000", size=9)
    pdf.gap(5)
    for label, value in (
        ("Date:", "01/14/2026"),
        ("To:", "Medical Records Department, Lakeview Specialty Clinic"),
        ("Fax:", "(555) 010-2233"),
        ("Phone:", "(555) 010-2200"),
        ("From:", "Front Desk, Riverside Family Medicine"),
        ("Fax:", "(555) 010-7788"),
        ("Phone:", "(555) 010-7700"),
        ("Number of pages (including cover):", "4"),
        ("Re:", "Records for an upcoming appointment"),
    ):
        pdf.label_value(label, value, size=11)
        pdf.gap(1.5)
    pdf.gap(2)
    for label, checked in (("Urgent", False), ("For your records", True), ("Please reply", False),
                           ("Please call", False)):
        pdf.checkbox(label, checked, 40, size=10)
    pdf.ln(8)
    pdf.heading("Comments:")
    pdf.para("Please find the requested records for the patient's appointment on 01/21/2026. "
             "Call our office at the number above if any pages are missing or illegible.", size=11, h=5.4)
    pdf.gap(10)
    pdf.heading("CONFIDENTIALITY NOTICE", size=10)
    pdf.para(
        "The documents accompanying this facsimile transmission contain confidential information that is "
        "legally privileged. This information is intended only for the use of the individual or entity named "
        "above. If you are not the intended recipient, you are hereby notified that any disclosure, copying, "
        "distribution or action taken in reliance on the contents of these documents is strictly prohibited. "
        "If you have received this fax in error, please notify the sender immediately by telephone and "
        "destroy the documents.", size=9, h=4.4)
    pdf.write_to(out / f"{doc_id}.pdf")
    return doc_id


def make_requisition(out: pathlib.Path) -> tuple[str, dict]:
    doc_id = "lab_requisition_form"
    pdf = SamplePDF("Laboratory requisition form")
    pdf.add_page()
    pdf.title_line("LABORATORY TEST REQUISITION FORM", size=15)
    pdf.para("Lakeview Regional Laboratory (placeholder)  -  Test request form  -  Form LRL-100 rev. 3", size=9)
    pdf.gap(3)

    def blanks(pairs: list[tuple[str, str]]) -> None:
        for label, value in pairs:
            pdf.label_value(label, value, size=9)
            pdf.gap(0.8)

    pdf.heading("PATIENT INFORMATION", size=10)
    blanks([("Patient name:", "SAMPLE, PATIENT C (placeholder)"), ("Date of birth:", "____/____/________"),
            ("Sex:", "F"), ("Patient ID:", "__________________")])
    pdf.heading("ORDERING PROVIDER", size=10)
    blanks([("Provider:", "Dr. C. Example (placeholder)"), ("NPI:", "__________________"),
            ("Clinic:", "Riverside Family Medicine (placeholder)")])
    pdf.heading("BILLING AND INSURANCE", size=10)
    blanks([("Bill to:", "Insurance"), ("Insurance carrier:", "__________________"),
            ("Policy number:", "__________________    Group number: ______________"),
            ("Authorization number:", "__________________")])
    pdf.heading("SPECIMEN", size=10)
    blanks([("Collection date/time:", "____/____/________  ____:____")])
    for label, checked in (("Blood", True), ("Urine", False), ("Tissue", False), ("Saliva", False)):
        pdf.checkbox(label, checked, 35)
    pdf.ln(6)
    pdf.heading("TESTS REQUESTED (check all that apply)", size=10)
    groups = [
        ("Chemistry and hematology", [("CBC with differential", True), ("Basic metabolic panel", True),
                                      ("Comprehensive metabolic panel", False), ("Lipid panel", False),
                                      ("Hemoglobin A1c", False), ("TSH", False)]),
        ("Anatomic pathology", [("Surgical pathology (tissue)", False), ("Cytology", False),
                                ("Frozen section", False)]),
        ("Genetic and genomic testing", [("BRCA1/BRCA2 sequencing", False),
                                         ("Hereditary cancer NGS panel", False),
                                         ("Tumor genomic profiling", False)]),
    ]
    for name, tests in groups:
        pdf.para(name + ":", size=9, style="B")
        for i in range(0, len(tests), 3):
            for label, checked in tests[i:i + 3]:
                pdf.checkbox(label, checked, 58)
            pdf.ln(5.2)
    pdf.heading("DIAGNOSIS CODES (ICD-10)", size=10)
    blanks([("Codes:", "__________    __________    __________")])
    pdf.gap(4)
    blanks([("Provider signature:", "______________________________    Date: ____/____/________"),
            ("Test request received by:", "__________________    Specimen receipt date: ____/____/________")])
    pdf.gap(2)
    pdf.para("Blank form written for software testing; it describes no real person.", size=8, style="I")
    pdf.write_to(out / f"{doc_id}.pdf")
    # the classifier's mistake of the specification's trap 2 example (slide 5): a requisition whose
    # pathology checkbox line is read as a pathology report inside the form (EMBEDDED_RAW). A report type
    # only *mentioned* (MENTION_ONLY, what the offline classifier says of it) is no trap (ADR 0046), so the
    # sample carries the mistake as a companion.
    c = classification([(1, 1, "Other", {"snippet": "LABORATORY TEST REQUISITION FORM", "page": 1,
                                         "anchors_found": ["REQUISITION"]})], doc_id)
    seg = c["segments"][0]
    for tc in seg["classifications"]:
        if tc["doc_type"] == "Other":
            tc.update(confidence=0.8, segment_share=0.85)
        elif tc["doc_type"] == "Pathology Report":
            tc.update(presence_level="EMBEDDED_RAW", confidence=0.55, segment_share=0.15, top_evidence=[
                {"snippet": "Surgical pathology (tissue) Cytology Frozen section", "page": 1,
                 "anchors_found": ["Surgical pathology"]}])
    for m in c["document_mixture"]:
        if m["doc_type"] == "Other":
            m["overall_share"] = 0.85
        elif m["doc_type"] == "Pathology Report":
            m.update(presence_level="EMBEDDED_RAW", overall_share=0.15)
    seg["reasoning"] = ("Laboratory requisition form; its anatomic pathology section is read as pathology "
                        "content embedded in the form.")
    c["self_evaluation"] = {"confidence": 0.8, "notes": "Sample companion: the spec's trap 2 example "
                            "(a requisition with Pathology Report EMBEDDED_RAW)."}
    c["classifier"] = "external"
    return doc_id, c


MIXED_PAGES = [
    GENOMIC_P1 + "\nPatient: SAMPLE, PATIENT D (placeholder)    Sex: Female    Date of birth: [redacted]\n"
    "Ordering clinician: Dr. A. Example, Cancer Genetics Clinic (placeholder)\n"
    "Genes analyzed: BRCA1, BRCA2.\n"
    "Coding exons and flanking intronic regions were captured and sequenced to a mean depth of 450x; "
    "deletions and duplications were assessed by read-depth analysis.",
    GENOMIC_P2 + "\nZygosity: heterozygous. Transcript: NM_007294.4.\n"
    "No variants of uncertain significance were detected in BRCA2.\n"
    "Recommendation: genetic counseling for the patient and targeted testing of at-risk relatives.",
    NOTE_P3 + "\nPAST MEDICAL HISTORY: Hypertension, well controlled.\n"
    "FAMILY HISTORY: Mother with breast cancer at age 52.\n"
    "PHYSICAL EXAMINATION: Blood pressure 128/80, pulse 72. No acute distress.\n"
    "FOLLOW-UP: Return to clinic in three months.",
]

RADIOLOGY_MENTION_NOTE = (
    "FOLLOW-UP VISIT NOTE\n"
    "CHIEF COMPLAINT: Follow-up of a cough.\n"
    "HISTORY OF PRESENT ILLNESS: The patient returns two weeks after a course of antibiotics for a "
    "community-acquired pneumonia. The cough has nearly resolved and there is no fever. She denies chest "
    "pain or shortness of breath.\n"
    "RESULTS: The chest x-ray report from the emergency visit was reviewed with the patient; it described a "
    "right lower lobe infiltrate.\n"
    "PHYSICAL EXAMINATION: Temperature 36.8 C, pulse 76, respiratory rate 14, oxygen saturation 98% on room "
    "air. Lungs clear to auscultation bilaterally.\n"
    "ASSESSMENT AND PLAN: Community-acquired pneumonia, clinically resolved. No repeat imaging is needed "
    "unless symptoms recur. Return to clinic as needed."
)

CORRUPT_SOURCE = (
    "DISCHARGE SUMMARY\n"
    "ADMISSION DIAGNOSIS: Cellulitis of the left lower leg.\n"
    "HOSPITAL COURSE: The patient was treated with intravenous antibiotics for three days with steady "
    "improvement of the erythema and swelling, then changed to oral antibiotics.\n"
    "DISCHARGE MEDICATIONS: Cephalexin 500 mg four times daily for seven days.\n"
    "FOLLOW-UP: Primary care clinic in one week."
)


def dash(text: str) -> str:
    """The em dash of the worked examples is not latin-1: '-' in the PDF and in the snippets alike."""
    return text.replace("\u2014", "-").replace("\u2013", "-")


def companion_from_example(c: dict, doc_id: str, notes: str) -> dict:
    c = copy.deepcopy(c)
    c["doc_id"] = doc_id
    for seg in c["segments"]:
        seg["reasoning"] = f"Pages {seg['page_start']}-{seg['page_end']}: {seg['dominant_type']}."
        for tc in seg["classifications"]:
            for ev in tc["top_evidence"]:
                ev["snippet"] = dash(ev["snippet"])
                ev["anchors_found"] = [dash(a) for a in ev["anchors_found"]]
    c["self_evaluation"] = {"confidence": c["self_evaluation"]["confidence"], "notes": notes}
    c["classifier"] = "external"
    return c


def make_retry_shares(out: pathlib.Path) -> tuple[str, dict]:
    doc_id = "retry_shares"
    bundle, c = spec_auto_retry()
    pages_pdf(out / f"{doc_id}.pdf", "Genomic report followed by a progress note",
              [dash(p.text) for p in bundle.pages])
    return doc_id, companion_from_example(
        c, doc_id, "Sample companion: the spec's AUTO_RETRY example (shares sum to 1.06 and 0.97).")


def make_fabricated(out: pathlib.Path) -> tuple[str, dict]:
    doc_id = "fabricated_evidence"
    bundle, c = spec_fabricated()
    pages_pdf(out / f"{doc_id}.pdf", "Genomic report with a history page",
              [dash(p.text) for p in bundle.pages])
    return doc_id, companion_from_example(
        c, doc_id, "Sample companion: the spec's fabricated-evidence example (snippet not on page 3).")


def make_mixed(out: pathlib.Path) -> str:
    doc_id = "mixed_genomic_then_note"
    pages_pdf(out / f"{doc_id}.pdf", "Genomic report followed by a clinical note", [dash(p) for p in MIXED_PAGES])
    return doc_id


def make_radiology_mention(out: pathlib.Path) -> str:
    doc_id = "radiology_mention_only"
    pages_pdf(out / f"{doc_id}.pdf", "Follow-up visit note", [RADIOLOGY_MENTION_NOTE])
    return doc_id


# =========================================================================== broken PDFs


def make_scanned(out: pathlib.Path, corpora: pathlib.Path) -> str:
    """A real report as a scan: the IU chest X-ray report SCAN_IU_ID laid out like
    ``radiology_iu_101``, rendered by pypdfium2 to a 200-dpi grayscale bitmap, JPEG-encoded by
    Pillow (both pinned: the same bytes on every run) and placed as the page's only object: no
    text layer. The local parser OCRs it; with OCR off it is NO_TEXT_LAYER."""
    import pypdfium2 as pdfium

    rec = load_csv(corpora / "text_labeled" / "iu_xray_reports" / "iu_xray_sample.csv")[SCAN_IU_ID]
    source = pdfium.PdfDocument(bytes(radiology_pdf(rec).output()))
    try:
        image = source[0].render(scale=200 / 72, grayscale=True).to_pil().convert("L")
    finally:
        source.close()
    jpeg = io.BytesIO()
    image.save(jpeg, format="JPEG", quality=70, optimize=False, progressive=False)
    doc_id = "scanned_no_text"
    pdf = SamplePDF("Scanned page")
    pdf.add_page()
    pdf.image(io.BytesIO(jpeg.getvalue()), x=0, y=0, w=pdf.w, h=pdf.h)
    pdf.write_to(out / f"{doc_id}.pdf")
    return doc_id


def make_corrupt(out: pathlib.Path) -> str:
    """A valid one-page PDF cut after 40 % of its bytes: no page tree, catalog, xref or trailer."""
    doc_id = "corrupt_truncated"
    pdf = SamplePDF("Discharge summary")
    pdf.add_page()
    lines = CORRUPT_SOURCE.split("\n")
    pdf.title_line(lines[0])
    for line in lines[1:]:
        pdf.para(line)
    data = bytes(pdf.output())
    (out / f"{doc_id}.pdf").write_bytes(data[: int(len(data) * 0.4)])
    return doc_id


# =========================================================================== checks


def page_texts(path: pathlib.Path) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        texts = []
        for i in range(len(pdf)):
            page = pdf[i]
            tp = page.get_textpage()
            texts.append(tp.get_text_range())
            tp.close()
            page.close()
        return texts
    finally:
        pdf.close()


def check_companion(path: pathlib.Path, c: dict, *, expect_found: bool = True) -> None:
    ClassificationOutput.model_validate(c)
    texts = [normalise(t) for t in page_texts(path)]
    for seg in c["segments"]:
        for tc in seg["classifications"]:
            for ev in tc["top_evidence"]:
                page = texts[ev["page"] - 1]
                found = normalise(ev["snippet"]) in page
                if found != expect_found:
                    raise SystemExit(f"{path.name}: snippet {ev['snippet']!r} found={found} on page {ev['page']}")
                if expect_found:
                    for a in ev["anchors_found"]:
                        if normalise(a) not in page:
                            raise SystemExit(f"{path.name}: anchor {a!r} not on page {ev['page']}")


def check_all(out: pathlib.Path, companions: dict[str, dict]) -> None:
    import pypdfium2 as pdfium

    for doc_id, c in companions.items():
        check_companion(out / f"{doc_id}.pdf", c, expect_found=doc_id != "fabricated_evidence")
    for path in sorted(out.glob("*.pdf")):
        if path.stem in ("scanned_no_text", "corrupt_truncated"):
            continue
        texts = page_texts(path)
        if not all(t.strip() for t in texts):
            raise SystemExit(f"{path.name}: a page has no text")
        allowed = ("fax_cover_sheet", "lab_requisition_form", "quest_cbc_panel")  # the trap samples
        if path.stem not in allowed and has_admin_or_vendor(" ".join(texts)):
            raise SystemExit(f"{path.name}: administrative keyword or routine vendor in its text")
    scan = page_texts(out / "scanned_no_text.pdf")
    if not scan or any(t.strip() for t in scan):
        raise SystemExit("scanned_no_text.pdf must have pages and no text")
    try:
        pdfium.PdfDocument(str(out / "corrupt_truncated.pdf"))
    except pdfium.PdfiumError:
        pass
    else:
        raise SystemExit("corrupt_truncated.pdf opened: it must not")


# =========================================================================== main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "include" / "samples"), help="output folder (default include/samples)")
    ap.add_argument("--corpora", default=None,
                    help="shared corpora folder (default $DOCVERIFY_CORPORA, else <repo>/../shared/corpora)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    corpora = corpora_dir(args.corpora)
    if not (corpora / "text_labeled").is_dir():
        print(f"corpora not found at {corpora}: pass --corpora or set DOCVERIFY_CORPORA", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)

    written: list[str] = []
    companions: dict[str, dict] = {}
    builders: list[Callable[[pathlib.Path], str]] = [
        lambda o: make_pathology(o, corpora), lambda o: make_radiology(o, corpora), lambda o: make_note(o, corpora),
        make_genomic, make_fax_cover, make_mixed, make_radiology_mention,
        lambda o: make_scanned(o, corpora), make_corrupt,
    ]
    for build in builders:
        written.append(build(out))
    for build_pair in (make_quest_cbc, make_requisition, make_retry_shares, make_fabricated):
        doc_id, c = build_pair(out)
        ClassificationOutput.model_validate(c)
        (out / f"{doc_id}.classification.json").write_text(json.dumps(c, indent=2) + "\n", encoding="utf-8")
        companions[doc_id] = c
        written.append(doc_id)
    check_all(out, companions)
    total = sum((out / f"{d}.pdf").stat().st_size for d in written)
    for d in sorted(written):
        extra = " + classification.json" if d in companions else ""
        print(f"wrote {out / d}.pdf ({(out / f'{d}.pdf').stat().st_size:,} B){extra}")
    print(f"{len(written)} PDFs, {total:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
