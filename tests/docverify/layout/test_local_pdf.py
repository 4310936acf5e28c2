"""Local PDF parsing (docverify.layout.local_pdf) against the 45 real PDFs of the shared corpus,
plus PDFs generated here with fpdf2 for the layout heuristics.

The corpus files stay in ../shared/corpora (licences): the ``corpora_dir`` fixture points there.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import os
import pathlib
import pickle
import re
import signal
import time

import pytest

from docverify.domain.models import DocumentBundle
from docverify.layout import local_pdf, ocr
from docverify.layout.errors import PARSE_ERROR_CODES, ParseError
from docverify.layout.local_pdf import PARSER_ID, normalise_line, parse_pdf
from docverify.layout.pool import live_worker_pids, parse_many_bounded, parse_pdf_bounded

pytestmark = pytest.mark.corpus

OK = "OK"

# What really happens to every corpus file (pypdfium2 5.15.2 / PDFium 159). Pinned on purpose:
# a change of library version or heuristic that changes an outcome must be looked at.
EXPECTED: dict[str, str] = {
    "clinical_tcga_brain_textpdf.pdf": OK,
    "clinical_tcga_colon_path.pdf": OK,
    "clinical_tcga_kidney2_duplicate.pdf": OK,
    "clinical_tcga_kidney_path.pdf": OK,
    "clinical_tcga_lung_path.pdf": OK,
    "clinical_tcga_ovary_8pages.pdf": OK,
    "clinical_tcga_prostate_path_qc.pdf": OK,
    "clinical_tcga_uterus_qcform.pdf": OK,
    # PDFium rebuilds the broken xref and recovers one page (as pdf.js does); it holds no text and
    # no image, so there is nothing to classify.
    "corrupt_bad_xref_entry_recoverable.pdf": "NO_TEXT_LAYER",
    "corrupt_bad_xref_widths.pdf": "CORRUPT",
    # Page 1 loads ("Testcase: 'Pages loop'"), page 2 is the loop and cannot be loaded: CORRUPT,
    # quickly (no hang).
    "corrupt_cyclic_page_tree.pdf": "CORRUPT",
    # Repaired by PDFium: one full-page image and 7 stray characters ("2021 3 31") → a scan.
    "corrupt_malformed_pdfplumber932.pdf": "NO_TEXT_LAYER",
    # No xref: PDFium reconstructs one empty page. The JavaScript OpenAction never runs (no form
    # environment is initialised).
    "corrupt_no_xref_js_openaction.pdf": "NO_TEXT_LAYER",
    "corrupt_severe_bug1020226.pdf": "CORRUPT",
    "corrupt_zero_bytes.pdf": "EMPTY_FILE",
    "enc_aes256_empty_user_pw.pdf": OK,
    "enc_aes256_r6_both_pw.pdf": "ENCRYPTED",
    "enc_pdfium_rc4_pw.pdf": "ENCRYPTED",
    "enc_pdfjs_user_owner_pw.pdf": "ENCRYPTED",
    "enc_pdfplumber_pw.pdf": "ENCRYPTED",
    "enc_rc4_40_empty_user_pw.pdf": OK,
    "encoding_arabic_cid_truetype.pdf": OK,
    "encoding_arabic_rotated.pdf": OK,
    "encoding_vertical_cjk.pdf": OK,  # 8 characters, no images: sparse but not a scan
    "form_libreoffice_fillable.pdf": OK,
    "form_sf424_page2.pdf": OK,
    "many_pages_geotopo_117p.pdf": OK,
    "many_pages_pdkids_55p.pdf": OK,
    "multicol_federal_register.pdf": OK,
    "multicol_latex.pdf": OK,
    "multicol_tracemonkey_paper.pdf": OK,
    "normal_google_docs.pdf": OK,
    "normal_minimal_latex.pdf": OK,
    "normal_scotus_transcript_p1.pdf": OK,
    # The four "image-only" scans carry a few stray characters of text ("pdf.js", "Background",
    # "potato image jpeg.img"); only scan_ccitt_fax_g4 has none at all. The sparse-scan rule
    # (no page with 50 characters + page images) catches them.
    "scan_bad_pdfjs.pdf": "NO_TEXT_LAYER",
    "scan_ccitt_fax_g4.pdf": "NO_TEXT_LAYER",
    "scan_fax_decode_parms_10p.pdf": "NO_TEXT_LAYER",
    "scan_imagemagick_6pages.pdf": "NO_TEXT_LAYER",
    "scan_ocr_layer_vicksburg.pdf": OK,
    "table_ca_warn_report.pdf": OK,
    "table_nics_background_checks.pdf": OK,
    "table_nics_rotated.pdf": OK,
    "table_senate_expenditures.pdf": OK,
    # PDFium trusts /Count 1 and loads one empty page (pypdf finds 0 pages): there is no page
    # tree to call empty, so this is NO_TEXT_LAYER, not ZERO_PAGES.
    "zero_pages_malformed_page_dict.pdf": "NO_TEXT_LAYER",
    # PDFium opens the document and reports 0 pages.
    "zero_pages_qpdf_empty.pdf": "ZERO_PAGES",
}

TIMEOUT_S = 30.0
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _pdfs(corpora: pathlib.Path) -> pathlib.Path:
    return corpora / "pdfs"


def _manifest(corpora: pathlib.Path) -> dict[str, dict[str, str]]:
    with (_pdfs(corpora) / "manifest.tsv").open(encoding="utf-8", newline="") as fh:
        return {row["file"]: row for row in csv.DictReader(fh, delimiter="\t")}


def _outcome(result: DocumentBundle | ParseError) -> str:
    return result.code if isinstance(result, ParseError) else OK


def _check_bundle(bundle: DocumentBundle, path: pathlib.Path) -> None:
    assert bundle.doc_id == path.stem
    assert bundle.file_path == str(path.resolve())
    assert bundle.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert bundle.parser == PARSER_ID
    assert ISO_Z.match(bundle.processing_timestamp), bundle.processing_timestamp
    assert bundle.total_pages == len(bundle.pages) >= 1
    assert [p.page_num for p in bundle.pages] == list(range(1, bundle.total_pages + 1))
    for page in bundle.pages:
        assert "\x00" not in page.text and "\r" not in page.text
        assert all(line == line.rstrip() for line in page.text.split("\n"))
        assert len(page.layout_metadata.block_types) == len(page.paragraphs)
        assert set(page.layout_metadata.block_types) <= {"heading", "paragraph", "list_item", "table"}
        for para in page.paragraphs:
            assert para.strip() and para in page.text
        assert page.text == "\n\n".join(page.paragraphs)


# --------------------------------------------------------------------------- the corpus


def test_expectations_cover_the_corpus(corpora_dir):
    files = {p.name for p in _pdfs(corpora_dir).glob("*.pdf")}
    assert files == set(EXPECTED), "the corpus changed: update EXPECTED"
    assert len(files) == 45


@pytest.fixture(scope="module")
def corpus_run(corpora_dir) -> tuple[list[pathlib.Path], list[tuple[str, DocumentBundle | ParseError]], float]:
    """Every corpus PDF through one :func:`parse_many_bounded` call (two workers, each file in a
    child and bounded by ``TIMEOUT_S``), once per test process: the 45 per-file tests and the
    pool test read its results instead of paying a worker start-up (PDFium's import) per file.
    The single-file entry point (``parse_pdf_bounded``) keeps its own tests below (limits,
    timeout, crash, same result as in process)."""
    paths = sorted(_pdfs(corpora_dir).glob("*.pdf"))
    t0 = time.monotonic()
    results = list(parse_many_bounded(paths, workers=2, timeout_s=TIMEOUT_S))
    return paths, results, time.monotonic() - t0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_corpus_pdf_ends_in_a_bundle_or_a_parse_error(corpora_dir, corpus_run, name):
    path = _pdfs(corpora_dir) / name
    _paths, results, _elapsed = corpus_run
    # exactly one result for the file; within its time bound (a file past TIMEOUT_S would be a
    # TIMEOUT, which no file of the corpus EXPECTS)
    [result] = [r for p, r in results if p == str(path)]
    if isinstance(result, ParseError):
        assert result.code in PARSE_ERROR_CODES
        assert name in result.message  # the message names the file
        assert result.to_dict() == {"error": result.code, "message": result.message, "file": str(path)}
    else:
        assert isinstance(result, DocumentBundle)
        _check_bundle(result, path)
    assert _outcome(result) == EXPECTED[name]


def test_manifest_categories(corpora_dir):
    """The manifest's categories agree with the outcomes, and page counts agree with pypdf's probe."""
    manifest = _manifest(corpora_dir)
    must = {
        "encrypted_password_required": {"ENCRYPTED"},
        "encrypted_no_password": {OK},
        "scanned_image_only": {"NO_TEXT_LAYER"},
        "zero_pages": {"ZERO_PAGES", "NO_TEXT_LAYER"},
        "corrupt": set(PARSE_ERROR_CODES) - {"TIMEOUT"},
    }
    for name, row in manifest.items():
        cat = row["category"]
        if cat in must:
            assert EXPECTED[name] in must[cat], (name, cat)
        elif not cat.startswith("corrupt"):
            assert EXPECTED[name] == OK, (name, cat)
    counts = collections.Counter(EXPECTED[n] for n, r in manifest.items() if r["category"] == "encrypted_password_required")
    assert counts == {"ENCRYPTED": 4}


@pytest.mark.slow
def test_page_counts_match_the_manifest_probe(corpora_dir):
    manifest = _manifest(corpora_dir)
    checked = 0
    for name, expected in EXPECTED.items():
        if expected != OK:
            continue
        m = re.search(r"pages=(\d+)", manifest[name]["pypdf6_probe"])
        assert m, name
        bundle = parse_pdf(_pdfs(corpora_dir) / name)
        assert bundle.total_pages == int(m.group(1)), name
        checked += 1
    assert checked == 28


def test_parse_many_bounded_over_the_corpus(corpus_run):
    paths, results, elapsed = corpus_run
    seen = {}
    for path, result in results:
        assert path not in seen
        seen[path] = result
    assert elapsed < 120
    assert set(seen) == {str(p) for p in paths}
    assert {pathlib.Path(p).name: _outcome(r) for p, r in seen.items()} == EXPECTED
    assert not live_worker_pids()


def test_empty_user_password_files_open_with_text(corpora_dir):
    for name in ("enc_rc4_40_empty_user_pw.pdf", "enc_aes256_empty_user_pw.pdf"):
        bundle = parse_pdf(_pdfs(corpora_dir) / name)
        assert bundle.total_pages == 1
        assert "pdf encryption test" in bundle.pages[0].text
        assert "password: asdfzxcv" in bundle.pages[0].text


def test_password_protected_files_are_encrypted(corpora_dir):
    for name in ("enc_pdfjs_user_owner_pw.pdf", "enc_aes256_r6_both_pw.pdf", "enc_pdfium_rc4_pw.pdf", "enc_pdfplumber_pw.pdf"):
        with pytest.raises(ParseError) as ei:
            parse_pdf(_pdfs(corpora_dir) / name)
        assert ei.value.code == "ENCRYPTED"
        assert ei.value.message.startswith(f"{name} is encrypted with a user password")
        assert "password" in ei.value.message.split(";")[1]


def test_zero_bytes_zero_pages_and_scans(corpora_dir):
    pdfs = _pdfs(corpora_dir)
    with pytest.raises(ParseError) as ei:
        parse_pdf(pdfs / "corrupt_zero_bytes.pdf")
    assert ei.value.code == "EMPTY_FILE" and "0 bytes" in ei.value.message
    with pytest.raises(ParseError) as ei:
        parse_pdf(pdfs / "zero_pages_qpdf_empty.pdf")
    assert ei.value.code == "ZERO_PAGES"
    for name in ("scan_ccitt_fax_g4.pdf", "scan_imagemagick_6pages.pdf", "scan_bad_pdfjs.pdf", "scan_fax_decode_parms_10p.pdf"):
        with pytest.raises(ParseError) as ei:
            parse_pdf(pdfs / name)
        assert ei.value.code == "NO_TEXT_LAYER", name
        assert "scan" in ei.value.message and "OCR it or route it through Document AI" in ei.value.message


def test_117_pages(corpora_dir):
    bundle = parse_pdf(_pdfs(corpora_dir) / "many_pages_geotopo_117p.pdf")
    assert bundle.total_pages == 117 and len(bundle.pages) == 117
    assert bundle.pages[-1].page_num == 117
    assert "Vorwort" in bundle.pages[1].text
    assert sum(1 for p in bundle.pages if p.text.strip()) > 100


def test_tcga_pathology_text(corpora_dir):
    pdfs = _pdfs(corpora_dir)
    brain = parse_pdf(pdfs / "clinical_tcga_brain_textpdf.pdf")  # born-digital
    assert "Well-differentiated astrocytoma (WHO grade II)" in brain.pages[0].text
    assert brain.pages[0].paragraphs[-1].startswith("Final Addendum Diagnosis:\nWell-differentiated astrocytoma")
    kidney = parse_pdf(pdfs / "clinical_tcga_kidney_path.pdf")  # scanned, OCR layer
    assert "RENAL CELL CARCINOMA, CONVENTIONAL (CLEAR) CELL TYPE" in kidney.pages[0].text
    assert "perfonned" in kidney.pages[0].text  # the OCR noise is kept verbatim
    ovary = parse_pdf(pdfs / "clinical_tcga_ovary_8pages.pdf")
    assert ovary.total_pages == 8
    assert "Metastatic carcinoma" in ovary.page_text(2)


def test_tables_in_the_corpus(corpora_dir):
    pdfs = _pdfs(corpora_dir)
    for name in ("table_nics_background_checks.pdf", "table_nics_rotated.pdf", "table_senate_expenditures.pdf"):
        page = parse_pdf(pdfs / name).pages[0]
        assert page.layout_metadata.has_tables, name
        assert "table" in page.layout_metadata.block_types, name
    warn = parse_pdf(pdfs / "table_ca_warn_report.pdf")
    assert all(p.layout_metadata.has_tables for p in warn.pages)
    for name in ("clinical_tcga_brain_textpdf.pdf", "multicol_latex.pdf", "normal_minimal_latex.pdf",
                 "clinical_tcga_kidney_path.pdf", "scan_ocr_layer_vicksburg.pdf"):
        assert not any(p.layout_metadata.has_tables for p in parse_pdf(pdfs / name).pages), name


def test_too_large(corpora_dir):
    path = _pdfs(corpora_dir) / "many_pages_geotopo_117p.pdf"
    with pytest.raises(ParseError) as ei:
        parse_pdf(path, max_pages=50)
    assert ei.value.code == "TOO_LARGE"
    assert "117 pages" in ei.value.message and "limit of 50 pages" in ei.value.message
    with pytest.raises(ParseError) as ei:
        parse_pdf(path, max_bytes=1024 * 1024)
    assert ei.value.code == "TOO_LARGE" and "limit of 1 MB" in ei.value.message
    with pytest.raises(ParseError) as ei:  # the limits travel to the child process too
        parse_pdf_bounded(path, timeout_s=TIMEOUT_S, max_pages=100)
    assert ei.value.code == "TOO_LARGE" and "limit of 100 pages" in ei.value.message


def test_doc_id_and_file_uri(corpora_dir):
    path = _pdfs(corpora_dir) / "normal_minimal_latex.pdf"
    bundle = parse_pdf(path, doc_id="DOC-1", file_uri="gs://bucket/in/normal_minimal_latex.pdf")
    assert bundle.doc_id == "DOC-1"
    assert bundle.file_path == "gs://bucket/in/normal_minimal_latex.pdf"


# --------------------------------------------------------------------------- child processes


def _sleepy_parse(path, *, pid_file, **kw):
    """A parse_fn that hangs (runs in the child)."""
    pathlib.Path(pid_file).write_text(str(os.getpid()))
    time.sleep(120)


def _crashing_parse(path, **kw):
    """A parse_fn that segfaults (runs in the child)."""
    os.kill(os.getpid(), signal.SIGSEGV)


def _sometimes_sleepy(path, **kw):
    if "hang" in pathlib.Path(path).name:
        time.sleep(120)
    return parse_pdf(path, **kw)


@pytest.mark.slow
def test_timeout_kills_the_child(corpora_dir, tmp_path):
    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(
            _pdfs(corpora_dir) / "normal_minimal_latex.pdf",
            timeout_s=1.0,
            parse_fn=f"{__name__}:_sleepy_parse",
            pid_file=str(pid_file),
        )
    elapsed = time.monotonic() - t0
    assert ei.value.code == "TIMEOUT"
    assert "normal_minimal_latex.pdf took longer than 1 s" in ei.value.message
    assert 1.0 <= elapsed < 30
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    assert not live_worker_pids()


def test_crash_of_the_child_is_corrupt(corpora_dir):
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(
            _pdfs(corpora_dir) / "normal_minimal_latex.pdf", timeout_s=TIMEOUT_S, parse_fn=f"{__name__}:_crashing_parse"
        )
    assert ei.value.code == "CORRUPT"
    assert "exit code -11" in ei.value.message and "SIGSEGV" in ei.value.message
    assert "normal_minimal_latex.pdf" in ei.value.message


@pytest.mark.slow
def test_a_hung_file_does_not_stop_the_shard(corpora_dir, tmp_path):
    src = _pdfs(corpora_dir)
    hang = tmp_path / "hang.pdf"
    hang.write_bytes((src / "normal_minimal_latex.pdf").read_bytes())
    paths = [src / "clinical_tcga_brain_textpdf.pdf", hang, src / "multicol_latex.pdf", src / "scan_ccitt_fax_g4.pdf"]
    t0 = time.monotonic()
    results = dict(parse_many_bounded(paths, workers=2, timeout_s=2.0, parse_fn=f"{__name__}:_sometimes_sleepy"))
    assert time.monotonic() - t0 < 40
    assert {pathlib.Path(p).name: _outcome(r) for p, r in results.items()} == {
        "clinical_tcga_brain_textpdf.pdf": OK,
        "hang.pdf": "TIMEOUT",
        "multicol_latex.pdf": OK,
        "scan_ccitt_fax_g4.pdf": "NO_TEXT_LAYER",
    }
    assert results[str(src / "multicol_latex.pdf")].total_pages == 3


def test_per_file_keyword_arguments(corpora_dir):
    src = _pdfs(corpora_dir)
    a, b = str(src / "normal_minimal_latex.pdf"), str(src / "multicol_latex.pdf")
    results = dict(parse_many_bounded(
        [a, b], workers=1, timeout_s=TIMEOUT_S, max_pages=2,
        per_file_kw={a: {"doc_id": "D-1", "file_uri": "gs://bucket/a.pdf"}},
    ))
    assert (results[a].doc_id, results[a].file_path) == ("D-1", "gs://bucket/a.pdf")
    assert results[b].code == "TOO_LARGE"  # the shared max_pages=2 applies to the 3-page file


def test_closing_the_generator_stops_the_workers(corpora_dir):
    gen = parse_many_bounded(sorted(_pdfs(corpora_dir).glob("*.pdf")), workers=2, timeout_s=TIMEOUT_S)
    next(gen)
    gen.close()
    assert not live_worker_pids()


def test_truncated_pdfs_never_raise_anything_else(tmp_path, prose_pdf):
    data = prose_pdf.read_bytes()
    paths = []
    for k, cut in enumerate((9, 64, 300, len(data) // 3, len(data) // 2, len(data) - 400, len(data) - 30, len(data) - 1)):
        p = tmp_path / f"cut{k}.pdf"
        p.write_bytes(data[:cut])
        paths.append(p)
    flipped = bytearray(data)
    for i in range(200, len(flipped), 97):
        flipped[i] ^= 0x5A
    (tmp_path / "flipped.pdf").write_bytes(bytes(flipped))
    paths.append(tmp_path / "flipped.pdf")
    results = dict(parse_many_bounded(paths, workers=2, timeout_s=TIMEOUT_S))
    assert len(results) == len(paths)
    for r in results.values():
        assert isinstance(r, DocumentBundle) or r.code in PARSE_ERROR_CODES


# --------------------------------------------------------------------------- generated PDFs

PARAGRAPHS = [
    "The specimen consists of a right kidney weighing 320 grams and measuring 12 x 7 x 5 cm. The capsule "
    "strips with ease and the cut surface shows a well circumscribed tan-yellow mass in the upper pole.",
    "Microscopic examination shows a clear cell renal cell carcinoma with a Fuhrman nuclear grade of two. "
    "There is no invasion of the renal vein and all surgical margins are free of tumour.",
    "Immunohistochemical stains performed on block A3 show the tumour cells to be positive for CD10 and "
    "vimentin and negative for cytokeratin 7, supporting the diagnosis above.",
]
TITLE = "Surgical Pathology Report"
ROWS = [("Test", "Result", "Units", "Reference range")] + [
    (f"Analyte {i}", f"{i * 1.7:.1f}", "mmol/L", f"{i}.0 - {i + 2}.0") for i in range(1, 9)
]
ITEMS = ["- Specimen received fresh in the laboratory", "- Margins inked before sectioning",
         "- Representative sections submitted in cassettes A1 to A6"]


def _new_pdf():
    from fpdf import FPDF  # imported lazily: the child processes of the tests import this module

    pdf = FPDF(format="A4")
    pdf.set_margins(20, 20)
    return pdf


def _prose(pdf) -> None:
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.cell(0, 10, TITLE, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", size=11)
    for para in PARAGRAPHS:
        pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(5)


@pytest.fixture(scope="module")
def prose_pdf(tmp_path_factory) -> pathlib.Path:
    pdf = _new_pdf()
    _prose(pdf)
    path = tmp_path_factory.mktemp("gen") / "prose.pdf"
    pdf.output(str(path))
    return path


@pytest.fixture(scope="module")
def mixed_pdf(tmp_path_factory) -> pathlib.Path:
    """Page 1 prose, page 2 a table, page 3 a bullet list."""
    pdf = _new_pdf()
    _prose(pdf)
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    with pdf.table() as table:
        for r in ROWS:
            row = table.row()
            for c in r:
                row.cell(c)
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for item in ITEMS:
        pdf.cell(0, 7, item, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path_factory.mktemp("gen") / "mixed.pdf"
    pdf.output(str(path))
    return path


def _squash(s: str) -> str:
    return " ".join(s.split())


def test_generated_paragraphs_are_found_verbatim(prose_pdf):
    bundle = parse_pdf(prose_pdf)
    page = bundle.pages[0]
    assert [_squash(p) for p in page.paragraphs] == [TITLE, *PARAGRAPHS]
    for para in page.paragraphs:
        assert para in page.text
    assert "\n" in page.paragraphs[1]  # wrapped lines stay lines inside the paragraph
    assert page.layout_metadata.block_types == ["heading", "paragraph", "paragraph", "paragraph"]
    assert page.layout_metadata.has_tables is False


def test_generated_table_and_list(mixed_pdf):
    bundle = parse_pdf(mixed_pdf)
    prose, table, items = bundle.pages
    assert prose.layout_metadata.has_tables is False
    assert table.layout_metadata.has_tables is True
    assert "table" in table.layout_metadata.block_types
    cell_text = table.paragraphs[table.layout_metadata.block_types.index("table")]
    assert "Analyte 8 13.6 mmol/L 8.0 - 10.0" in cell_text
    assert items.paragraphs == ITEMS
    assert items.layout_metadata.block_types == ["list_item"] * 3
    assert items.layout_metadata.has_tables is False


def test_bounded_result_equals_in_process_result(mixed_pdf):
    a = parse_pdf(mixed_pdf)
    b = parse_pdf_bounded(mixed_pdf, timeout_s=TIMEOUT_S)
    assert isinstance(b, DocumentBundle)
    assert a.model_dump(exclude={"processing_timestamp"}) == b.model_dump(exclude={"processing_timestamp"})


def _image_pdf(path: pathlib.Path, caption: str | None) -> pathlib.Path:
    from PIL import Image, ImageDraw

    img = Image.new("L", (300, 400), 255)
    ImageDraw.Draw(img).rectangle((40, 40, 260, 360), outline=0, width=6)
    pdf = _new_pdf()
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.image(img, x=0, y=0, w=210, h=297)
    if caption:
        pdf.set_font("Helvetica", size=8)
        pdf.set_xy(10, 285)
        pdf.cell(0, 5, caption)
    pdf.output(str(path))
    return path


def test_scan_detection_on_generated_pdfs(tmp_path):
    with pytest.raises(ParseError) as ei:
        parse_pdf(_image_pdf(tmp_path / "scan.pdf", None))
    assert ei.value.code == "NO_TEXT_LAYER" and "scan with no text layer" in ei.value.message
    with pytest.raises(ParseError) as ei:  # a stray caption does not make a text layer
        parse_pdf(_image_pdf(tmp_path / "scan_caption.pdf", "Background"))
    assert ei.value.code == "NO_TEXT_LAYER" and "no usable text layer" in ei.value.message
    # the same page with the rule switched off parses, and keeps the caption
    bundle = parse_pdf(tmp_path / "scan_caption.pdf", scan_max_chars_per_page=0)
    assert bundle.total_pages == 1 and bundle.pages[0].text == "Background"
    # sparse text without images is not a scan
    pdf = _new_pdf()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 6, "Short note.")
    pdf.output(str(tmp_path / "short.pdf"))
    assert parse_pdf(tmp_path / "short.pdf").pages[0].text == "Short note."
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "short.pdf", min_chars_per_doc=100)
    assert ei.value.code == "NO_TEXT_LAYER"
    blank = _new_pdf()
    blank.add_page()
    blank.output(str(tmp_path / "blank.pdf"))
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "blank.pdf")
    assert ei.value.code == "NO_TEXT_LAYER" and "no page images" in ei.value.message


def test_not_a_pdf_and_header_window(tmp_path, prose_pdf):
    (tmp_path / "note.pdf").write_text("hello, this is not a PDF\n")
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "note.pdf")
    assert ei.value.code == "NOT_A_PDF" and ei.value.message.startswith("note.pdf is not a PDF")
    (tmp_path / "image.pdf").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "image.pdf")
    assert ei.value.code == "NOT_A_PDF" and "PNG" in ei.value.message
    data = prose_pdf.read_bytes()
    (tmp_path / "junk_500.pdf").write_bytes(b"x" * 500 + data)  # header within 1024 bytes: fine
    assert parse_pdf(tmp_path / "junk_500.pdf").total_pages == 1
    (tmp_path / "junk_2000.pdf").write_bytes(b"x" * 2000 + data)
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "junk_2000.pdf")
    assert ei.value.code == "NOT_A_PDF"


def test_missing_file_is_a_parse_error(tmp_path):
    with pytest.raises(ParseError) as ei:
        parse_pdf(tmp_path / "nope.pdf")
    assert ei.value.code == "UNSUPPORTED" and "nope.pdf could not be read" in ei.value.message
    with pytest.raises(ParseError):
        parse_pdf_bounded(tmp_path / "nope.pdf", timeout_s=TIMEOUT_S)


# --------------------------------------------------------------------------- small units


def test_normalise_line():
    assert normalise_line("a\x00b\t c\ufffed \ufb01ne  ") == "ab  c-d fine"
    assert normalise_line("e\u0301t\u00e9 \x0c") == "\u00e9t\u00e9"  # NFC, control chars dropped


def test_parse_error_api():
    err = ParseError("ENCRYPTED", "x.pdf is encrypted with a user password; supply it", "in/x.pdf")
    assert err.to_dict() == {"error": "ENCRYPTED", "message": err.message, "file": "in/x.pdf"}
    assert ParseError.from_dict(err.to_dict()).to_dict() == err.to_dict()
    again = pickle.loads(pickle.dumps(err))
    assert (again.code, again.message, again.file) == (err.code, err.message, err.file)
    with pytest.raises(ValueError):
        ParseError("NOPE", "m", "f")
    assert PARSE_ERROR_CODES == ("EMPTY_FILE", "NOT_A_PDF", "CORRUPT", "ENCRYPTED", "ZERO_PAGES",
                                 "NO_TEXT_LAYER", "TOO_LARGE", "TIMEOUT", "UNSUPPORTED",
                                 # the Document AI converter's (docverify.layout.docai)
                                 "DOCAI_INVALID_JSON", "DOCAI_NO_CONTENT", "DOCAI_SHARDS_MISSING",
                                 "DOCAI_SHARDS_INCONSISTENT", "TOO_MANY_PAGES",
                                 # the Document AI layout stages (docverify.stages.layout)
                                 "DOCAI_FAILED", "DOCAI_NO_RESULT",
                                 # a parse worker's bytes are not those discovered (ADR 0052)
                                 "INPUT_CHANGED")
    assert PARSER_ID.startswith("local:pypdfium2-")


# --------------------------------------------------------------------------- local OCR (issue 13)

#: With OCR on, the English fax scan whose images hold real text becomes a bundle; the scans of blank
#: or bar-code-like images stay NO_TEXT_LAYER (OCR reads nothing usable), every other file keeps
#: its outcome. The one-page scan of Chinese print (corrupt_malformed_pdfplumber932.pdf, a signature
#: page) is read by the PP-OCRv4 models (Chinese and Latin) and not by Tesseract's English model,
#: the default's (ADR 0058): NO_TEXT_LAYER there.
CJK_SCAN = "corrupt_malformed_pdfplumber932.pdf"


def _expected_ocr() -> dict[str, str]:
    reads_cjk = ocr.engine_name().startswith("rapidocr")
    return {**EXPECTED, "scan_fax_decode_parms_10p.pdf": OK, CJK_SCAN: OK if reads_cjk else "NO_TEXT_LAYER"}


#: OCR takes 1–5 s a page on one core (more on a loaded machine: the 10-page fax scan took
#: 9 s alone and over 30 s during the full suite on 2 shared cores), so its time bound is larger.
OCR_TIMEOUT_S = 120.0


@pytest.mark.slow
def test_parse_many_bounded_over_the_corpus_with_ocr(corpora_dir):
    paths = sorted(_pdfs(corpora_dir).glob("*.pdf"))
    seen = dict(parse_many_bounded(paths, workers=2, timeout_s=OCR_TIMEOUT_S, ocr=True))
    assert {pathlib.Path(p).name: _outcome(r) for p, r in seen.items()} == _expected_ocr()
    for p, r in seen.items():
        name = pathlib.Path(p).name
        if isinstance(r, ParseError):
            assert r.code in ("NO_TEXT_LAYER", "CORRUPT", "ENCRYPTED", "EMPTY_FILE", "ZERO_PAGES"), name
            continue
        ocr_pages = [pg for pg in r.pages if pg.ocr_confidence is not None]
        if name in ("scan_fax_decode_parms_10p.pdf", CJK_SCAN):
            assert ocr_pages and r.parser == local_pdf.OCR_PARSER_ID() != PARSER_ID
            assert any(pg.text and 0.5 <= pg.ocr_confidence <= 1 for pg in ocr_pages)
        else:  # a page with a text layer is never OCR'd
            assert not ocr_pages and r.parser == PARSER_ID, name
    fax = seen[str(_pdfs(corpora_dir) / "scan_fax_decode_parms_10p.pdf")]
    assert "potato" in fax.full_text().lower()  # the images' words, read by OCR
    failed = seen[str(_pdfs(corpora_dir) / "scan_ccitt_fax_g4.pdf")]
    assert "OCR read no usable text" in failed.message
    assert not live_worker_pids()


def test_ocr_off_keeps_scans_typed_errors(corpora_dir):
    with pytest.raises(ParseError) as ei:
        parse_pdf(_pdfs(corpora_dir) / "scan_fax_decode_parms_10p.pdf", ocr=False)
    assert ei.value.code == "NO_TEXT_LAYER"


def test_ocr_models_ship_in_the_wheel():
    import importlib.util as iu

    spec = iu.find_spec("rapidocr_onnxruntime")
    models = pathlib.Path(spec.origin).parent / "models"
    assert sorted(p.name for p in models.glob("*.onnx")) == [
        "ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx"]


_JOBS_IN_THIS_WORKER = [0]


def _aborts_in_a_used_worker(path, **kw):
    """A parse_fn that aborts on a file named 'fragile' when this worker has parsed another file before it
    (its state, not the file, fails: the OCR engine's memory after a scan did so to a large text page), and
    on a file named 'broken' always."""
    _JOBS_IN_THIS_WORKER[0] += 1
    name = pathlib.Path(path).name
    if "broken" in name or ("fragile" in name and _JOBS_IN_THIS_WORKER[0] > 1):
        os.abort()
    return parse_pdf(path, **kw)


def test_a_crash_in_a_used_worker_is_tried_once_in_a_fresh_one(corpora_dir, tmp_path):
    """A file that crashes a worker after it parsed another gets one fresh worker (and parses there); a file
    that crashes a fresh worker too is CORRUPT, named as a crash."""
    src = _pdfs(corpora_dir) / "normal_minimal_latex.pdf"
    first, fragile, broken = (tmp_path / n for n in ("first.pdf", "fragile.pdf", "broken.pdf"))
    for p in (first, fragile, broken):
        p.write_bytes(src.read_bytes())
    results = dict(parse_many_bounded([first, fragile, broken], workers=1, timeout_s=TIMEOUT_S,
                                      parse_fn=f"{__name__}:_aborts_in_a_used_worker"))
    outcome = {pathlib.Path(p).name: _outcome(r) for p, r in results.items()}
    assert outcome == {"first.pdf": OK, "fragile.pdf": OK, "broken.pdf": "CORRUPT"}
    assert "crashed the PDF parser" in str(results[str(broken)])
