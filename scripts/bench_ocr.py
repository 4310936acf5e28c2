"""Measure the local OCR (rapidocr-onnxruntime) on the corpus scans that carry a reference text
layer: the TCGA pathology reports (``pdfs/clinical_tcga_*.pdf``, scanned pages with an OCR text
layer made upstream).

Each page is rendered with pypdfium2 exactly as the parser does for a page without a text layer
(:func:`docverify.layout.ocr.read_page`), OCR'd, and compared with the page's own text layer:

* **CER** = Levenshtein distance / length of the reference, both normalised as V4 compares text
  (:func:`docverify.verify.common.normalise`: NFKC, casefold, whitespace runs → one space);
  reported over all characters (micro) and per page (median). The reference layer is itself an
  OCR of the same scan, so the figure is the disagreement of two OCRs, an upper bound of our error;
  CER also counts a different reading order (columns, tables) as errors, hence the order-free
  share of reference words (≥ 4 letters) the OCR also read.
* **V4 tolerance**: every reference line of ≥ 25 characters is a snippet an LLM could quote from
  the real text; the share found in the OCR'd page by V4's ``contains`` at fuzzy thresholds 80–95,
  and, as the false-match check, the share of lines of *other* TCGA documents found there.
* **pages/s** of render + OCR, one process, one ONNX Runtime thread (as in a parse worker), and
  the process's peak RSS.

    python scripts/bench_ocr.py [--corpora DIR] [--no-write]

Writes ``docs/benchmarks/ocr.md``. Page text is never printed (figures and file names only).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import pathlib
import re
import resource
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))

import pypdfium2 as pdfium  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from docverify.layout import ocr  # noqa: E402
from docverify.verify.common import contains, normalise  # noqa: E402

THRESHOLDS = (80, 85, 90, 95)
WORD = re.compile(r"[^\W\d_]{4,}")
OUT = REPO / "docs" / "benchmarks" / "ocr.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from docverify.resources import default_corpora_dir

    pdfs = sorted(((args.corpora or default_corpora_dir()) / "pdfs").glob("clinical_tcga_*.pdf"))
    t_load = time.perf_counter()
    ocr.get_engine()
    load_s = time.perf_counter() - t_load
    pages = []  # (file, page, ref, hyp, conf, seconds)
    for path in pdfs:
        doc = pdfium.PdfDocument(str(path))
        try:
            for i in range(len(doc)):
                page = doc[i]
                tp = page.get_textpage()
                ref = tp.get_text_range()
                tp.close()
                t0 = time.perf_counter()
                read = ocr.read_page(page)
                pages.append((path.name, i + 1, ref, read.text, read.confidence, time.perf_counter() - t0))
                page.close()
        finally:
            doc.close()
    dist = ref_chars = words_n = words_found = 0
    cers = []
    for _f, _p, ref, hyp, _c, _s in pages:
        r, h = normalise(ref), normalise(hyp)
        d = Levenshtein.distance(r, h)
        dist += d
        ref_chars += len(r)
        cers.append(d / max(1, len(r)))
        hyp_words = set(WORD.findall(h))
        ref_words = WORD.findall(r)
        words_n += len(ref_words)
        words_found += sum(w in hyp_words for w in ref_words)
    found = dict.fromkeys(THRESHOLDS, 0)
    false = dict.fromkeys(THRESHOLDS, 0)
    n_lines = n_false = 0
    for f, _p, ref, hyp, _c, _s in pages:
        lines = [ln.strip() for ln in ref.splitlines() if len(ln.strip()) >= 25]
        others = [ln.strip() for f2, _p2, ref2, *_ in pages if f2 != f for ln in ref2.splitlines()
                  if len(ln.strip()) >= 25][:: 7]
        for ln in lines:
            n_lines += 1
            for t in THRESHOLDS:
                found[t] += contains(hyp, ln, threshold=t)
        for ln in others:
            n_false += 1
            for t in THRESHOLDS:
                false[t] += contains(hyp, ln, threshold=t)
    secs = sum(p[5] for p in pages)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "# Local OCR benchmark",
        "",
        f"- date: {_dt.date.today().isoformat()}",
        f"- engine: `{ocr.engine_id()}` (PP-OCRv4 ONNX models shipped in the wheel), pages rendered at "
        f"{ocr.TARGET_PX} px on the longer side, {ocr.THREADS} ONNX Runtime thread",
        f"- data: {len(pdfs)} TCGA pathology scans of the shared corpus ({len(pages)} pages) that carry a reference "
        "text layer; the rendered image is OCR'd and compared with the layer (itself an upstream OCR)",
        f"- script: `scripts/bench_ocr.py`; engine load {load_s:.2f} s",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| pages/s (render + OCR, one process) | **{len(pages) / secs:.2f}** ({secs:.1f} s for {len(pages)} pages) |",
        f"| CER, all characters | **{100 * dist / max(1, ref_chars):.1f} %** ({dist} edits / {ref_chars} characters) |",
        f"| CER, median page | {100 * statistics.median(cers):.1f} % |",
        f"| reference words (≥ 4 letters) also read by OCR, order-free | {100 * words_found / max(1, words_n):.1f} % "
        f"of {words_n} |",
        f"| mean OCR confidence | {statistics.mean(p[4] for p in pages):.3f} |",
        f"| peak RSS of the process | {rss:.0f} MB |",
        "",
        "## V4's fuzzy match on OCR'd pages",
        "",
        f"Reference lines of ≥ 25 characters ({n_lines}) looked up in the OCR'd text of their own page "
        f"with V4's `contains` (exact, then rapidfuzz `partial_ratio` ≥ threshold); false matches: "
        f"{n_false} lines of other TCGA documents looked up in the same pages.",
        "",
        "| threshold | own lines found | other documents' lines found (false) |",
        "|---:|---:|---:|",
    ]
    for t in THRESHOLDS:
        lines.append(f"| {t} | {100 * found[t] / max(1, n_lines):.1f} % | {100 * false[t] / max(1, n_false):.1f} % |")
    lines += ["", "## Per page", "", "| file | page | CER | confidence | seconds |", "|---|---:|---:|---:|---:|"]
    for (f, p, *_rest), cer in zip(pages, cers, strict=True):
        lines.append(f"| {f} | {p} | {100 * cer:.1f} % | {_rest[2]:.3f} | {_rest[3]:.2f} |")
    md = "\n".join(lines) + "\n"
    if not args.no_write:
        OUT.write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
