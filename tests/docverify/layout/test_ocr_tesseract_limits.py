"""Tesseract, the default OCR engine (ADR 0058), inside the parse worker: it reads under the worker's
address-space cap, a call that hangs is killed before the pool's per-page limit and its page stays
unread (the file is not stopped), and a worker the pool kills takes its Tesseract call with it. A
stand-in ``tesseract`` on the PATH (a shell script that answers ``--version`` and then hangs)
plays the stuck engine."""

from __future__ import annotations

import os
import pathlib
import shutil
import time

import pytest

from docverify.layout import ocr
from docverify.layout.errors import ParseError
from docverify.layout.pool import parse_pdf_bounded
from docverify.storage.limits import PARSE_WORKER_MEMORY_BYTES

SCAN = pathlib.Path(__file__).resolve().parents[3] / "include" / "samples" / "scanned_no_text.pdf"


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a container's pid 1 may not reap orphans)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def stuck_tesseract(tmp_path, monkeypatch) -> pathlib.Path:
    """A ``tesseract`` that hangs on every page (its pid in the returned file); the workers inherit
    the PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pids = tmp_path / "pids"
    exe = bindir / "tesseract"
    exe.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "tesseract 5.3.0"; exit 0; fi\n'
                   f'echo $$ >> {pids}\nexec sleep 300\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv(ocr.ENGINE_ENV, raising=False)
    return pids


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract-ocr is not installed (make ocr-deps)")
def test_the_default_reads_a_scan_in_a_capped_worker(monkeypatch):
    monkeypatch.delenv(ocr.ENGINE_ENV, raising=False)
    monkeypatch.delenv("DOCVERIFY_PARSE_MEMORY_BYTES", raising=False)
    assert PARSE_WORKER_MEMORY_BYTES <= 2 << 30  # the cap Tesseract's calls run under
    bundle = parse_pdf_bounded(SCAN, ocr=True)
    assert "+tesseract-" in bundle.parser and bundle.parser.endswith("-eng")
    page = bundle.pages[0]
    assert page.ocr_confidence is not None and page.ocr_confidence > 0.5
    words = set(page.text.lower().split())
    assert {"radiology", "report", "lungs", "impression:"} <= words, len(words)


@pytest.mark.slow
def test_a_stuck_tesseract_leaves_its_page_unread_not_the_file_stopped(stuck_tesseract):
    t0 = time.monotonic()
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(SCAN, ocr=True, page_timeout_s=3)
    elapsed = time.monotonic() - t0
    # the call's limit is 80 % of the page's (2.4 s): the page ends unread, the worker answers
    assert ei.value.code == "NO_TEXT_LAYER", ei.value.message
    assert "the OCR engine failed on 1 of its 1 image page(s)" in ei.value.message
    assert elapsed < 20
    pids = [int(p) for p in stuck_tesseract.read_text().split()]
    assert len(pids) == 1 and not _running(pids[0])


@pytest.mark.slow
def test_a_worker_killed_mid_page_takes_its_tesseract_call_along(stuck_tesseract):
    # the file's ceiling (2 s) comes before the call's own limit (80 % of 60 s): the pool kills the worker
    with pytest.raises(ParseError) as ei:
        parse_pdf_bounded(SCAN, ocr=True, timeout_s=2, page_timeout_s=60, file_ceiling_s=2)
    assert ei.value.code == "TIMEOUT"
    pids = [int(p) for p in stuck_tesseract.read_text().split()]
    assert len(pids) == 1
    deadline = time.monotonic() + 5
    while _running(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pids[0])
