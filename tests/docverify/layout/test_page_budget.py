"""The parse time budget that grows with the work (issue 40, ADR 0047): the parser reports each page
it finishes, the pool gives the next page ``page_timeout_s`` and the file at most ``file_ceiling_s``.
A long scan is read on the default settings; a stuck page is stopped with a message that names the
pages read, the page and the limit, and never calls a good file malformed.

The slow parses are faked by parse functions (run in the worker) that report pages and sleep; the
30-page scan is made here, in ``tmp_path``, from the page images of the corpus's TCGA scans."""

from __future__ import annotations

import pathlib
import time

import pytest

from docverify.domain.models import DocumentBundle
from docverify.layout import progress
from docverify.layout.errors import ParseError
from docverify.layout.local_pdf import parse_pdf
from docverify.layout.pool import (
    DEFAULT_FILE_CEILING_S,
    DEFAULT_PAGE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    _Limits,
    live_worker_pids,
    parse_many_bounded,
    parse_pdf_bounded,
    timeout_message,
)

pytestmark = pytest.mark.corpus


def _pdf(corpora_dir: pathlib.Path) -> pathlib.Path:
    return corpora_dir / "pdfs" / "normal_minimal_latex.pdf"


# --------------------------------------------------------------------------- parse functions (in the worker)


def _stuck_on_page(path, *, pages, stuck, **kw):
    """Finishes pages 1 … stuck-1 of ``pages`` at once, then hangs on page ``stuck``."""
    progress.page_done(0, pages)
    for k in range(1, stuck):
        progress.page_done(k, pages, k)
    time.sleep(120)


def _slow_pages(path, *, pages, seconds, **kw):
    """``pages`` pages of ``seconds`` each (a long scan), then the real parse of the file."""
    progress.page_done(0, pages)
    for k in range(1, pages + 1):
        time.sleep(seconds)
        progress.page_done(k, pages, k)
    return parse_pdf(path, **kw)


def _many_reports_at_once(path, *, pages, **kw):
    """Hundreds of page reports written in one burst, the answer right behind them: each line is
    read although several arrive in one read of the pipe."""
    for k in range(pages + 1):
        progress.page_done(k, pages)
    return parse_pdf(path, **kw)


# --------------------------------------------------------------------------- the limits


@pytest.mark.slow
def test_a_stuck_page_is_stopped_naming_the_pages_and_the_limit(corpora_dir):
    t0 = time.monotonic()
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(_pdf(corpora_dir), timeout_s=30, page_timeout_s=1.5, file_ceiling_s=60,
                          parse_fn=f"{__name__}:_stuck_on_page", pages=30, stuck=7)
    elapsed = time.monotonic() - t0
    err = ei.value
    assert err.code == "TIMEOUT"
    assert 1.5 <= elapsed < 25  # the page's budget, not the file's 30 s nor the ceiling
    msg = err.message
    assert msg.startswith("normal_minimal_latex.pdf: page 7 of 30 did not finish within the per-page limit of 1.5 s")
    assert "6 of 30 page(s) read, 6 of them by OCR" in msg
    assert "docverify_parse_page_timeout_s" in msg and "Document AI" in msg
    assert "malformed" not in msg and "pathological" not in msg and "repair" not in msg
    assert not live_worker_pids()


@pytest.mark.slow
def test_pages_that_advance_extend_the_deadline(corpora_dir):
    # 8 pages of 0.5 s: 4 s in all, past the 1.5 s to open and any one page's 1.5 s
    bundle = parse_pdf_bounded(_pdf(corpora_dir), timeout_s=1.5, page_timeout_s=1.5, file_ceiling_s=60,
                               parse_fn=f"{__name__}:_slow_pages", pages=8, seconds=0.5)
    assert isinstance(bundle, DocumentBundle) and bundle.total_pages == 1


@pytest.mark.slow
def test_the_ceiling_stops_a_file_whose_pages_still_advance(corpora_dir):
    t0 = time.monotonic()
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(_pdf(corpora_dir), timeout_s=1, page_timeout_s=5, file_ceiling_s=2.5,
                          parse_fn=f"{__name__}:_slow_pages", pages=400, seconds=0.2)
    assert ei.value.code == "TIMEOUT" and time.monotonic() - t0 < 25
    msg = ei.value.message
    assert msg.startswith("normal_minimal_latex.pdf reached the limit of 2.5 s per file "
                          "(Variable docverify_parse_file_ceiling_s) on page ")
    assert " of 400 with " in msg and "page(s) read" in msg and "malformed" not in msg


@pytest.mark.slow
def test_a_parser_that_reports_no_pages_has_the_open_limit_for_the_whole_file(corpora_dir, tmp_path):
    with pytest.raises(ParseError) as ei:  # _sleepy_parse reports nothing and hangs
        parse_pdf_bounded(_pdf(corpora_dir), timeout_s=1, page_timeout_s=60, file_ceiling_s=60,
                          parse_fn="tests.docverify.layout.test_local_pdf:_sleepy_parse",
                          pid_file=str(tmp_path / "pid"))
    msg = ei.value.message
    assert msg.startswith("normal_minimal_latex.pdf took longer than 1 s to parse without reading a page")
    assert "parse_timeout_s" in msg and "malformed" not in msg


def test_a_burst_of_reports_and_the_answer_in_one_read(corpora_dir):
    results = dict(parse_many_bounded([_pdf(corpora_dir)] * 3, workers=1, timeout_s=30,
                                      parse_fn=f"{__name__}:_many_reports_at_once", pages=500))
    assert all(isinstance(r, DocumentBundle) for r in results.values())


def test_the_real_parser_reports_its_pages(corpora_dir):
    seen: list[tuple[int, int, int]] = []
    progress.listen(lambda d, t, o: seen.append((d, t, o)))
    try:
        parse_pdf(corpora_dir / "pdfs" / "multicol_latex.pdf")
    finally:
        progress.listen(None)
    assert seen == [(0, 3, 0), (1, 3, 0), (2, 3, 0), (3, 3, 0)]


def test_timeout_messages_name_the_limit_and_the_fix():
    lim = _Limits(60, 30, 1800)
    page = timeout_message("x.pdf", "page", lim, done=12, total=30, ocr=12, elapsed=400)
    assert page.startswith("x.pdf: page 13 of 30 did not finish within the per-page limit of 30 s")
    assert "12 of 30 page(s) read, 12 of them by OCR" in page
    last = timeout_message("x.pdf", "page", lim, done=30, total=30, ocr=0, elapsed=400)
    assert "all 30 page(s) were read" in last
    ceiling = timeout_message("x.pdf", "ceiling", lim, done=250, total=500, ocr=250, elapsed=1800)
    assert "reached the limit of 1800 s per file" in ceiling and "on page 251 of 500" in ceiling
    opened = timeout_message("x.pdf", "open", lim, done=0, total=0, ocr=0, elapsed=60)
    for msg in (page, last, ceiling, opened):
        assert "Document AI" in msg and "malformed" not in msg and "pathological" not in msg
    with pytest.raises(ValueError, match="page_timeout_s"):
        _Limits(60, 0, 1800)


# --------------------------------------------------------------------------- a long scan, on the defaults


def _scan_of(sources: list[pathlib.Path], out: pathlib.Path, pages: int, dpi: int = 200) -> tuple[pathlib.Path, list[int]]:
    """An image-only PDF of ``pages`` pages: the corpus scans' pages rendered at ``dpi`` (grey JPEG,
    as a scanner or a fax server writes them), round after round until ``pages``; and the number of
    words of each page's source text layer (the upstream OCR's)."""
    import pypdfium2 as pdfium

    images, words = [], []
    for src in sources:
        doc = pdfium.PdfDocument(str(src))
        try:
            for i in range(len(doc)):
                page = doc[i]
                images.append(page.render(scale=dpi / 72, grayscale=True).to_pil())
                words.append(len(page.get_textpage().get_text_range().split()))
        finally:
            doc.close()
    chosen = [images[k % len(images)] for k in range(pages)]
    chosen[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=chosen[1:], quality=60)
    return out, [words[k % len(words)] for k in range(pages)]


@pytest.mark.slow
def test_a_30_page_scan_parses_on_the_default_settings(corpora_dir, tmp_path):
    sources = sorted((corpora_dir / "pdfs").glob("clinical_tcga_*.pdf"))
    path, ref_words = _scan_of(sources, tmp_path / "dense30.pdf", 30)
    assert (DEFAULT_TIMEOUT_S, DEFAULT_PAGE_TIMEOUT_S, DEFAULT_FILE_CEILING_S) == (60, 60, 1800)
    t0 = time.monotonic()
    bundle = parse_pdf_bounded(path, ocr=True)  # the defaults: the night's, unless its settings say otherwise
    seconds = time.monotonic() - t0
    assert bundle.total_pages == len(bundle.pages) == 30
    # every page OCR'd and read (a page of a few handwritten words has 18 in the upstream OCR layer:
    # 5 at least), and the document as a whole: 3/4 of the upstream layer's word count at least
    read = [(p.page_num, p.ocr_confidence, len(p.text.split()), ref) for p, ref in zip(bundle.pages, ref_words, strict=True)]
    assert not [r for r in read if r[1] is None or r[2] < 5], read
    assert sum(r[2] for r in read) >= 0.75 * sum(ref_words), read
    print(f"dense30.pdf: 30 OCR'd pages in {seconds:.1f} s ({seconds / 30:.2f} s a page)")


@pytest.mark.slow
def test_a_100_page_scan_parses_on_the_nights_settings(corpora_dir, tmp_path):
    """The night's layout defaults (2 parse workers, a scan of 8 image pages or more in page ranges
    across them, ADR 0052; the default OCR engine): a 100-page scan is read whole, every page."""
    sources = sorted((corpora_dir / "pdfs").glob("clinical_tcga_*.pdf"))
    path, ref_words = _scan_of(sources, tmp_path / "scan100.pdf", 100)
    stats: dict = {}
    t0 = time.monotonic()
    [(_, bundle)] = list(parse_many_bounded([path], ocr=True, ocr_stats=stats))
    seconds = time.monotonic() - t0
    assert isinstance(bundle, DocumentBundle), bundle
    assert bundle.total_pages == len(bundle.pages) == 100
    assert [p.page_num for p in bundle.pages] == list(range(1, 101))
    read = [(p.page_num, p.ocr_confidence, len(p.text.split()), ref) for p, ref in zip(bundle.pages, ref_words, strict=True)]
    assert not [r for r in read if r[1] is None or r[2] < 5], read
    assert sum(r[2] for r in read) >= 0.75 * sum(ref_words), read
    assert stats[str(path)]["pages"] == 100
    assert not live_worker_pids()
    print(f"scan100.pdf: 100 OCR'd pages in {seconds:.1f} s ({seconds / 100:.2f} s a page, 2 workers)")
