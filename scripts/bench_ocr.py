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
from docverify.verify.common import contains, find_text, normalise  # noqa: E402

THRESHOLDS = (80, 85, 90, 95)
WORD = re.compile(r"[^\W\d_]{4,}")
OUT = REPO / "docs" / "benchmarks" / "ocr.md"


def _pct(k: int, n: int) -> str:
    return f"{100 * k / max(1, n):.1f} %"


_DIGIT = re.compile(r"\d")
_LATERAL = re.compile(r"\b(left|right)\b")
_NEGATION = [(re.compile(r"\b(no|not) (?!\d)"), ""), (re.compile(r"\bnegative\b"), "positive"),
             (re.compile(r"\bwithout\b"), "with")]


def mutate(line: str) -> dict[str, str]:
    """The realistic classifier errors V4 must catch (ADR 0021), made on a normalised line: a digit
    changed (the last digit of the first number, +3), left ↔ right, a negation dropped."""
    out = {}
    m = _DIGIT.search(line)
    if m:
        end = m.start()
        while end + 1 < len(line) and line[end + 1].isdigit():
            end += 1
        out["a digit changed"] = line[:end] + str((int(line[end]) + 3) % 10) + line[end + 1:]
    m = _LATERAL.search(line)
    if m:
        swap = "right" if m.group(1) == "left" else "left"
        out["left ↔ right"] = line[:m.start()] + swap + line[m.end():]
    for rx, repl in _NEGATION:
        m = rx.search(line)
        if m:
            out["a negation dropped"] = line[:m.start()] + repl + line[m.end():]
            break
    return out


def measure_v4(pages: list[tuple[str, str, str]]) -> dict:
    """V4's look-up of reference lines on OCR'd pages: ``pages`` = (file, reference text, OCR text).
    Found by the fuzzy match alone and with the faithfulness check, lines of other documents falsely
    found, and realistic errors caught. Figures only: no text leaves this function."""
    from docverify.verify.v4_evidence import _cfg, critical_tokens

    crit = critical_tokens()
    t_ocr = int(_cfg()["fuzzy_threshold_ocr"])
    found = dict.fromkeys(THRESHOLDS, 0)
    faithful = dict.fromkeys(THRESHOLDS, 0)
    false = dict.fromkeys(THRESHOLDS, 0)
    false_faithful = dict.fromkeys(THRESHOLDS, 0)
    lost_by: dict[str, int] = {}
    mutations: dict[str, list[int]] = {}
    n_lines = n_false = 0
    for f, ref, hyp in pages:
        lines = [ln.strip() for ln in ref.splitlines() if len(ln.strip()) >= 25]
        others = [ln.strip() for f2, ref2, _h in pages if f2 != f for ln in ref2.splitlines()
                  if len(ln.strip()) >= 25][:: 7]
        for ln in lines:
            n_lines += 1
            for t in THRESHOLDS:
                if not contains(hyp, ln, threshold=t):
                    continue
                found[t] += 1
                m = find_text(hyp, ln, threshold=t, critical=crit, ocr=True)
                faithful[t] += m.found
                if t == t_ocr and not m.found:
                    for k in m.differs or {"(no window)": None}:
                        lost_by[k] = lost_by.get(k, 0) + 1
                if t == t_ocr and m.found:
                    for kind, changed in mutate(normalise(ln)).items():
                        c = mutations.setdefault(kind, [0, 0])
                        c[0] += 1
                        c[1] += not contains(hyp, changed, threshold=t, critical=crit, ocr=True)
        for ln in others:
            n_false += 1
            for t in THRESHOLDS:
                false[t] += contains(hyp, ln, threshold=t)
                false_faithful[t] += contains(hyp, ln, threshold=t, critical=crit, ocr=True)
    return {"found": found, "faithful": faithful, "false": false, "false_faithful": false_faithful,
            "n_lines": n_lines, "n_false": n_false, "threshold_ocr": t_ocr, "lost_by": lost_by,
            "mutations": {k: tuple(v) for k, v in sorted(mutations.items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from docverify.domain.resources import default_corpora_dir

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
    v4 = measure_v4([(f, ref, hyp) for f, _p, ref, hyp, *_ in pages])
    found, faithful, false, false_faithful = v4["found"], v4["faithful"], v4["false"], v4["false_faithful"]
    n_lines, n_false, t_ocr = v4["n_lines"], v4["n_false"], v4["threshold_ocr"]
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
        f"{n_false} lines of other TCGA documents looked up in the same pages. *Faithful*: a fuzzy match "
        "must also keep the numbers, units, negation cues and laterality words of the line (ADR 0021, "
        "`faithfulness` in `include/rules/evidence.json`), as V4 requires on an OCR'd page.",
        "",
        "| threshold | own lines found | own lines found, faithful | other documents' lines found (false) "
        "| false, faithful |",
        "|---:|---:|---:|---:|---:|",
    ]
    for t in THRESHOLDS:
        lines.append(f"| {t} | {_pct(found[t], n_lines)} | {_pct(faithful[t], n_lines)} | {_pct(false[t], n_false)} "
                     f"| {_pct(false_faithful[t], n_false)} |")
    lost = found[t_ocr] - faithful[t_ocr]
    lines += [
        "",
        f"At V4's OCR threshold ({t_ocr}) the faithfulness check turns {lost} of the {found[t_ocr]} own lines the "
        f"fuzzy match finds ({_pct(lost, found[t_ocr])}) into not found (V4 would call them fabricated), by "
        f"category: {', '.join(f'{k} {v}' for k, v in sorted(v4['lost_by'].items())) or 'none'}. Both texts are "
        "OCR, so a lost line is either two OCRs reading a digit or a sign differently (the check tolerates "
        "letter/digit confusions, 0/o 1/l 5/s 8/b, a unit read on one side only and a misread cue word, never "
        "one digit for another) or a line the OCR did not read at all, whose fuzzy match was another line "
        "with other numbers (a right rejection).",
        "",
        f"Realistic classifier errors made on the own lines the faithful check finds (threshold {t_ocr}) and "
        "looked up again on the same OCR'd page:",
        "",
        "| change | lines | caught (not found) |",
        "|---|---:|---:|",
    ]
    for kind, (n, caught) in v4["mutations"].items():
        lines.append(f"| {kind} | {n} | {_pct(caught, n)} |")
    lines += ["", "A change not caught is mostly one whose changed form is on the page too (left and right lymph "
              "node lists, numbered blocks), or a quote that stops right after a dropped leading \"no\" (an exact "
              "substring of the page)."]
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
