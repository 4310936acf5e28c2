"""The local OCR's engines (ADR 0057, 0058): which one runs (Tesseract by default, rapidocr-onnxruntime
where its binary is missing), its id (part of an OCR'd bundle's parser and of the intake OCR cache's
key), and each engine reading a rendered page. An engine's test is skipped only when the engine is
not installed; the fallback engine is in the pinned requirements (`make venv`), and `make test` and
`make run` install Debian's tesseract-ocr (`make ocr-deps`)."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil

import pypdfium2 as pdfium
import pytest
from fpdf import FPDF

from docverify.layout import ocr

#: a page a clinician could have faxed: words, numbers, laterality (made up, no patient)
LINES = [
    "SURGICAL PATHOLOGY REPORT",
    "Specimen: left breast, lumpectomy",
    "Invasive ductal carcinoma, grade 2",
    "Tumour size 14 mm, margins negative",
    "Lymph nodes: 0 of 3 involved",
]
WORD = re.compile(r"[a-z]{4,}|\d+")


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


@pytest.fixture(scope="module")
def page_pdf(tmp_path_factory) -> pathlib.Path:
    pdf = FPDF(format="letter")
    pdf.add_page()
    pdf.set_font("Helvetica", size=13)
    for line in LINES:
        pdf.cell(0, 12, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path_factory.mktemp("ocr") / "page.pdf"
    pdf.output(str(path))
    return path


def _installed(engine: str) -> bool:
    if engine == "tesseract":
        return shutil.which("tesseract") is not None
    return importlib.util.find_spec(engine.replace("-", "_")) is not None


@pytest.mark.parametrize("engine", ["rapidocr-openvino", "rapidocr-openvino:bf16", "rapidocr-onnxruntime",
                                    "tesseract"])
@pytest.mark.slow
def test_each_engine_reads_a_rendered_page(page_pdf, engine):
    if not _installed(engine.partition(":")[0]):
        pytest.skip(f"{engine} is not installed")
    doc = pdfium.PdfDocument(str(page_pdf))
    try:
        read = ocr.read_page(doc[0], engine=engine)
    finally:
        doc.close()
    want = _words("\n".join(LINES))
    got = _words(read.text)
    assert len(want & got) >= 0.9 * len(want), sorted(want - got)
    assert {"left", "carcinoma", "14", "negative"} <= got  # the words V4 must find unchanged
    assert read.lines >= len(LINES) - 1 and 0.5 <= read.confidence <= 1
    # reading order: the title first, the nodes last
    assert read.text.lower().index("pathology") < read.text.lower().index("nodes")


def test_the_default_engine_is_installed_and_named():
    """The default runs wherever `make test` ran (its ocr-deps installs tesseract-ocr); its fallback
    wherever `make venv` ran (its package is pinned)."""
    assert (ocr.DEFAULT_ENGINE, ocr.FALLBACK_ENGINE) == ("tesseract", "rapidocr-onnxruntime")
    assert ocr.DEFAULT_ENGINE in ocr.ENGINES and ocr.FALLBACK_ENGINE in ocr.ENGINES
    assert _installed(ocr.DEFAULT_ENGINE), "make ocr-deps (Debian's tesseract-ocr)"
    assert _installed(ocr.FALLBACK_ENGINE)
    ocr.get_engine(ocr.DEFAULT_ENGINE)
    ocr.get_engine(ocr.FALLBACK_ENGINE)


@pytest.fixture
def no_cached_default():
    """default_engine() and the Tesseract version are looked up once per process: forget them around
    a test that changes what is installed."""
    ocr.default_engine.cache_clear()
    ocr._tesseract_version.cache_clear()
    yield
    ocr.default_engine.cache_clear()
    ocr._tesseract_version.cache_clear()


def test_the_environment_chooses_the_engine_and_the_id_follows(monkeypatch, no_cached_default):
    monkeypatch.delenv(ocr.ENGINE_ENV, raising=False)
    assert ocr.engine_name() == ocr.default_engine()
    if _installed("tesseract"):
        assert ocr.engine_name() == "tesseract"
        assert re.fullmatch(r"tesseract-\d+\.\d+\.\d+-eng", ocr.engine_id())
    monkeypatch.setenv(ocr.ENGINE_ENV, "rapidocr-onnxruntime")
    assert ocr.engine_name() == "rapidocr-onnxruntime"
    assert ocr.engine_id().startswith("rapidocr-onnxruntime-1.4.4-")
    ids = {ocr.engine_id(e) for e in ("rapidocr-openvino", "rapidocr-onnxruntime", "tesseract")}
    assert len(ids) == 3  # a bundle OCR'd by one engine is never reused as another's
    assert ocr.engine_id("rapidocr-onnxruntime") == f"rapidocr-onnxruntime-1.4.4-det{ocr.DET_PX}"


def test_without_tesseract_the_default_falls_back_with_one_warning(monkeypatch, caplog, tmp_path,
                                                                   no_cached_default):
    """No tesseract on the PATH: the default is rapidocr-onnxruntime, said once per process with the
    fix, and the engine id names the engine that reads (what a night's stage records and report
    show); an engine chosen explicitly is not replaced: it is unavailable."""
    monkeypatch.delenv(ocr.ENGINE_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no tesseract
    with caplog.at_level("WARNING", logger="docverify.layout.ocr"):
        assert ocr.engine_name() == ocr.FALLBACK_ENGINE
        assert ocr.engine_id() == f"rapidocr-onnxruntime-1.4.4-det{ocr.DET_PX}"
        assert ocr.engine_name() == ocr.FALLBACK_ENGINE
    warnings = [r.getMessage() for r in caplog.records if r.name == "docverify.layout.ocr"]
    assert len(warnings) == 1, warnings
    assert "Tesseract" in warnings[0] and "make ocr-deps" in warnings[0]
    assert "apt-get install tesseract-ocr" in warnings[0] and ocr.FALLBACK_ENGINE in warnings[0]
    monkeypatch.setenv(ocr.ENGINE_ENV, "tesseract")
    with pytest.raises(ocr.OCRUnavailable, match="make ocr-deps"):
        ocr._load_engine.__wrapped__("tesseract")  # not the process's cached engine
    assert ocr.engine_id() == "tesseract-unavailable-eng"


def test_a_tesseract_call_ends_before_the_pools_page_limit(monkeypatch):
    monkeypatch.delenv(ocr.PAGE_TIMEOUT_ENV, raising=False)
    assert ocr.tesseract_timeout_s() == ocr.TESSERACT_TIMEOUT_S  # in process: no pool's limit
    monkeypatch.setenv(ocr.PAGE_TIMEOUT_ENV, "60")
    assert ocr.tesseract_timeout_s() == 48
    monkeypatch.setenv(ocr.PAGE_TIMEOUT_ENV, "0.5")
    assert ocr.tesseract_timeout_s() == 1
    monkeypatch.setenv(ocr.PAGE_TIMEOUT_ENV, "soon")
    assert ocr.tesseract_timeout_s() == ocr.TESSERACT_TIMEOUT_S


def test_an_unknown_engine_is_unavailable_not_a_crash(monkeypatch):
    monkeypatch.setenv(ocr.ENGINE_ENV, "abbyy")
    with pytest.raises(ocr.OCRUnavailable, match="unknown OCR engine 'abbyy'"):
        ocr.get_engine()
    assert ocr.engine_id() == "abbyy-unavailable"
    with pytest.raises(ocr.OCRUnavailable):
        ocr.get_engine("rapidocr-onnxruntime:bf16")  # a precision is OpenVINO's only


@pytest.mark.skipif(not _installed("rapidocr-openvino"), reason="rapidocr-openvino is not installed")
def test_openvino_id_names_the_precision_it_runs():
    """OpenVINO's own default precision depends on the CPU (bf16 where it has the instructions): the id
    carries the precision the plugin runs, so reads at another precision are not reused."""
    assert ocr.engine_id("rapidocr-openvino") == f"rapidocr-openvino-1.4.4-det{ocr.DET_PX}-{ocr.OPENVINO_PRECISION}"
    assert ocr.engine_id("rapidocr-openvino:f32").endswith("-f32")
    assert re.search(r"-(bf16|f32)$", ocr.engine_id("rapidocr-openvino:bf16"))


@pytest.mark.parametrize("package", ["rapidocr_onnxruntime", "rapidocr_openvino"])
def test_ocr_models_ship_in_the_wheel(package):
    spec = importlib.util.find_spec(package)
    if spec is None:
        pytest.skip(f"{package} is not installed")
    models = pathlib.Path(spec.origin).parent / "models"
    assert sorted(p.name for p in models.glob("*.onnx")) == [
        "ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx"]


def test_a_page_the_engine_fails_on_is_not_a_blank_page(monkeypatch, caplog):
    """An engine that raises (e.g. OpenVINO past the worker's address-space cap, ADR 0057's amendment)
    leaves the page unread (confidence None, not the 0.0 of a page read blank), counted and logged
    by the exception's type only (its text may quote the page)."""
    from docverify.layout import local_pdf
    from docverify.layout.structure import PageLayout

    def boom(page):
        raise MemoryError("SECRET page words")

    monkeypatch.setattr(ocr, "read_page", boom)
    state = local_pdf._OCRState()
    before = PageLayout(text="", paragraphs=[], block_types=[], has_tables=False)
    with caplog.at_level("WARNING", logger="docverify.layout.local_pdf"):
        result, conf = local_pdf._ocr_page(object(), before, state)  # type: ignore[arg-type]
    assert result is before and conf is None
    assert (state.tried, state.read, state.failed) == (1, 0, 1)
    assert "MemoryError" in caplog.text and "SECRET" not in caplog.text
    assert "failed on 1 of its 1 image page(s)" in local_pdf._ocr_note(state)
