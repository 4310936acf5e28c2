"""A long scan's pages read across the parse workers (issue 40 item 2, ADR 0052): the pool splits a
file with enough image-only pages into page ranges, the workers OCR their ranges, and the pages come
back merged in order — the same bundle as one worker reading it whole. A range that crashes or
hangs is the file's typed error naming its pages; the other files of the call are not touched.

The scans are made here: pages of large printed words (Pillow), saved as an image-only PDF."""

from __future__ import annotations

import json
import os
import pathlib
import re
import time

import pytest

from docverify.domain.models import DocumentBundle
from docverify.layout import ocr, progress
from docverify.layout.errors import ParseError
from docverify.layout.local_pdf import parse_pdf
from docverify.layout.pool import _Limits, live_worker_pids, parse_many_bounded, timeout_message
from docverify.layout.split import ScanSplit, page_ranges

WORDS = ["ALPHA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT"]


def _scan(out: pathlib.Path, words: list[str] = WORDS) -> pathlib.Path:
    """An image-only PDF: page k carries ``words[k]`` in large letters (and lines that are the same
    on every page), 100 dpi, grey."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=56)
    pages = []
    for k, word in enumerate(words):
        img = Image.new("L", (850, 1100), 255)
        draw = ImageDraw.Draw(img)
        draw.text((80, 120), f"PAGE {k + 1} {word}", fill=0, font=font)
        for row, line in enumerate(("PATHOLOGY REPORT", "SPECIMEN LEFT LUNG", "DIAGNOSIS BENIGN")):
            draw.text((80, 300 + 150 * row), line, fill=0, font=font)
        pages.append(img)
    pages[0].save(out, "PDF", resolution=100, save_all=True, append_images=pages[1:])
    return out


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> pathlib.Path:
    return _scan(tmp_path_factory.mktemp("scan") / "scan6.pdf")


# --------------------------------------------------------------------------- parse functions (in the worker)


def _logged(path, *, log, **kw):
    """parse_pdf, noting which process got which job (whole file or page range) in ``log``."""
    with open(log, "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "range": kw.get("page_range"),
                             "split": kw.get("split_scan_pages", 0)}) + "\n")
    return parse_pdf(path, **kw)


def _crash_in_range(path, *, crash_first, **kw):
    """A worker that dies on the page range starting at ``crash_first`` (after reporting it open);
    the other ranges are read without OCR (fast: this test is about the failure)."""
    rng = kw.get("page_range")
    if rng and rng[0] == crash_first:
        progress.page_done(rng[0] - 1, 6)
        os._exit(3)
    return parse_pdf(path, **({**kw, "ocr": False} if rng else kw))


def _stuck_in_range(path, *, stuck_first, **kw):
    """Hangs on the second page of the range starting at ``stuck_first``."""
    rng = kw.get("page_range")
    if rng and rng[0] == stuck_first:
        progress.page_done(rng[0] - 1, 6)
        progress.page_done(rng[0], 6, 1)
        time.sleep(120)
    return parse_pdf(path, **({**kw, "ocr": False} if rng else kw))


# --------------------------------------------------------------------------- the ranges


def test_page_ranges_cover_the_pages_in_order():
    assert page_ranges(30, 2) == [(1, 15), (16, 30)]
    assert page_ranges(7, 3) == [(1, 3), (4, 5), (6, 7)]
    assert page_ranges(3, 8) == [(1, 1), (2, 2), (3, 3)]
    for total in range(1, 40):
        for parts in range(1, 6):
            got = page_ranges(total, parts)
            assert [p for a, b in got for p in range(a, b + 1)] == list(range(1, total + 1))
            assert max(b - a for a, b in got) - min(b - a for a, b in got) <= 1


@pytest.mark.corpus
def test_the_parser_asks_for_a_split_only_for_a_scan_with_enough_image_pages(scan, corpora_dir):
    with pytest.raises(ScanSplit) as ei:
        parse_pdf(scan, ocr=True, split_scan_pages=4)
    assert (ei.value.total, ei.value.image_pages) == (6, 6)
    # OCR off, or a text PDF: read whole, as before
    with pytest.raises(ParseError) as no_ocr:
        parse_pdf(scan, ocr=False, split_scan_pages=4)
    assert no_ocr.value.code == "NO_TEXT_LAYER"
    text = corpora_dir / "pdfs" / "many_pages_pdkids_55p.pdf"
    assert parse_pdf(text, ocr=True, split_scan_pages=4).total_pages == 55
    part = parse_pdf(scan, ocr=True, page_range=(2, 3))  # a page range: its pages, the document's count
    assert [p.page_num for p in part.pages] == [2, 3] and part.total_pages == 6
    assert "BRAVO" in part.pages[0].text.upper() and part.pages[1].ocr_confidence
    with pytest.raises(ParseError) as ei:
        parse_pdf(scan, ocr=True, page_range=(5, 7))
    assert ei.value.code == "UNSUPPORTED" and "the document has 6" in ei.value.message


# --------------------------------------------------------------------------- two workers = one worker


@pytest.mark.slow
def test_a_scan_read_by_two_workers_gives_the_pages_of_one_worker_in_order(scan, tmp_path):
    log = tmp_path / "jobs.jsonl"
    one_stats: dict = {}
    [(_, one)] = list(parse_many_bounded([scan], workers=1, ocr=True, split_scan_pages=4, ocr_stats=one_stats))
    two_stats: dict = {}
    [(_, two)] = list(parse_many_bounded([scan], workers=2, ocr=True, split_scan_pages=4, ocr_stats=two_stats,
                                         parse_fn=f"{__name__}:_logged", log=str(log)))
    assert isinstance(one, DocumentBundle) and isinstance(two, DocumentBundle), (one, two)
    assert [p.page_num for p in two.pages] == [1, 2, 3, 4, 5, 6] and two.total_pages == 6
    assert [p.text for p in two.pages] == [p.text for p in one.pages]
    assert [p.ocr_confidence for p in two.pages] == [p.ocr_confidence for p in one.pages]
    assert (two.parser, two.sha256) == (one.parser, one.sha256) and two.parser.endswith("+" + ocr.engine_id())
    for k, page in enumerate(two.pages):  # each page's own word, on its own page
        assert WORDS[k] in page.text.upper(), (k, page.text)
    jobs = [json.loads(line) for line in log.read_text().splitlines()]
    assert jobs[0]["range"] is None and jobs[0]["split"] == 4  # asked whole, answered "split"
    ranges = {tuple(j["range"]): j["pid"] for j in jobs[1:]}
    assert set(ranges) == {(1, 3), (4, 6)} and len(set(ranges.values())) == 2  # two workers, one range each
    assert one_stats[str(scan)]["pages"] == two_stats[str(scan)]["pages"] == 6
    assert two_stats[str(scan)]["seconds"] > 0
    assert not live_worker_pids()


# --------------------------------------------------------------------------- a range that fails


@pytest.mark.corpus
def test_a_range_that_crashes_is_the_files_corrupt_and_the_other_files_are_read(scan, corpora_dir):
    text = corpora_dir / "pdfs" / "normal_minimal_latex.pdf"
    results = dict(parse_many_bounded([scan, text], workers=2, ocr=True, split_scan_pages=4,
                                      parse_fn=f"{__name__}:_crash_in_range", crash_first=1))
    assert isinstance(results[str(text)], DocumentBundle)
    err = results[str(scan)]
    assert isinstance(err, ParseError) and err.code == "CORRUPT", err
    assert "scan6.pdf crashed the PDF parser (child process exit code 3) on page 1 of 6 (pages 1-3" in err.message
    assert re.search(r"; \d of 6 page\(s\) read\)", err.message), err.message
    assert not live_worker_pids()


@pytest.mark.slow
@pytest.mark.corpus
def test_a_range_that_hangs_is_the_files_timeout_naming_its_page(scan, corpora_dir):
    text = corpora_dir / "pdfs" / "normal_minimal_latex.pdf"
    t0 = time.monotonic()
    results = dict(parse_many_bounded([scan, text], workers=2, ocr=True, split_scan_pages=4, timeout_s=30,
                                      page_timeout_s=3, parse_fn=f"{__name__}:_stuck_in_range", stuck_first=4))
    assert time.monotonic() - t0 < 60
    assert isinstance(results[str(text)], DocumentBundle)
    err = results[str(scan)]
    assert isinstance(err, ParseError) and err.code == "TIMEOUT", err
    msg = err.message
    assert msg.startswith("scan6.pdf: page 5 of 6 did not finish within the per-page limit of 3 s"), msg
    assert re.search(r"with \d of 6 page\(s\) read, 1 of them by OCR; the scan was read in page ranges across "
                     r"the parse workers, this one pages 4-6", msg), msg
    assert "malformed" not in msg
    assert not live_worker_pids()


def test_a_range_timeout_message_in_the_documents_terms():
    lim = _Limits(60, 30, 1800)
    msg = timeout_message("x.pdf", "page", lim, done=17, total=30, ocr=3, elapsed=90, read=9, span=(16, 30))
    assert msg.startswith("x.pdf: page 18 of 30 did not finish")
    assert "9 of 30 page(s) read, 3 of them by OCR; the scan was read in page ranges" in msg
    assert "this one pages 16-30" in msg
    last = timeout_message("x.pdf", "page", lim, done=30, total=30, ocr=0, elapsed=90, read=30, span=(16, 30))
    assert last.startswith("x.pdf: pages 16-30 of 30 were read")
