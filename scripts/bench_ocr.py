"""Measure the local OCR engines (:data:`docverify.layout.ocr.ENGINES`) on the corpus scans that carry a reference text
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
* **pages/s** of render + OCR, one process, one inference thread (as in a parse worker; Tesseract:
  one OpenMP thread, its subprocess's CPU time counted), and each variant's peak RSS (a child
  process OCRing a few pages with it alone).

Every figure is given for each engine and setting of :data:`VARIANTS` side by side, measured in the
same run (the variants take turns page by page): the engine before ADR 0047 (ONNX Runtime, 1700 px,
orientation classifier on), the ADR 0047 settings on ONNX Runtime and on OpenVINO (ADR 0057), and
Debian's Tesseract (the default since ADR 0058). A variant whose engine is not installed is named as
not measured.

    python scripts/bench_ocr.py [--corpora DIR] [--no-write]

Writes ``docs/benchmarks/ocr.md``. Page text is never printed (figures and file names only).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import pathlib
import re
import resource
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

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


#: the engines and settings compared side by side: (name, description, read_page keyword arguments)
VARIANTS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("ONNX Runtime, 1700 px, cls on", "rapidocr-onnxruntime's own pipeline on the 1700 px page: detection on the "
     "full image, orientation classifier on (the default until ADR 0047)",
     {"engine": "rapidocr-onnxruntime", "det_px": 0, "use_cls": True}),
    ("ONNX Runtime, det ≤ 960 px", "rapidocr-onnxruntime, detection on a ≤ 960 px copy, recognition on the 1700 px "
     "page's crops, orientation classifier off (ADR 0047)",
     {"engine": "rapidocr-onnxruntime", "det_px": 960, "use_cls": False}),
    ("OpenVINO f32, det ≤ 960 px", "the same models and settings on the OpenVINO runtime (rapidocr-openvino, "
     "openvino 2026), inference precision f32", {"engine": "rapidocr-openvino:f32", "det_px": 960, "use_cls": False}),
    ("OpenVINO bf16, det ≤ 960 px", "the same on OpenVINO in bf16 (OpenVINO's own default on a CPU with bf16 "
     "instructions, f32 elsewhere)", {"engine": "rapidocr-openvino:bf16", "det_px": 960, "use_cls": False}),
    ("Tesseract (Debian)", "Debian's tesseract-ocr 5.3 (LSTM, eng, page segmentation 3) on the 1700 px page, "
     "one OpenMP thread, its TSV lines (the default since ADR 0058)", {"engine": "tesseract", "det_px": 0, "use_cls": False}),
)
#: pages OCR'd by the child that measures a variant's peak memory alone
RSS_PAGES = 4


def _variant_kw(name: str) -> dict[str, object]:
    return next(kw for n, _d, kw in VARIANTS if n == name)


def _full(engine: str) -> str:
    return engine if ":" in engine or engine != "rapidocr-openvino" else f"{engine}:{ocr.OPENVINO_PRECISION}"


def _is_default(kw: dict[str, object]) -> bool:
    if _full(str(kw["engine"])) != _full(ocr.engine_name()):
        return False
    return kw["engine"] == "tesseract" or ((kw["det_px"] or None) == ocr.DET_PX and kw["use_cls"] == ocr.USE_CLS)


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (Tesseract's subprocesses)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _children_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _rss_mb(field: str = "VmHWM") -> float:
    """This process's peak RSS in MB: ``VmHWM`` (Linux's ``ru_maxrss`` survives ``exec``, so a child
    started by a large parent would report the parent's peak), else ``ru_maxrss``; ``field="VmPeak"``:
    its peak address space (what a parse worker's ``RLIMIT_AS`` counts; 0 where unknown)."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if field == "VmHWM" else 0.0


def _rss_probe(pdfs: list[pathlib.Path], name: str) -> int:
    """Child mode: OCR the first :data:`RSS_PAGES` pages with one variant only; print the peak RSS."""
    kw = _variant_kw(name)
    ocr.get_engine(str(kw["engine"]))
    done = 0
    for path in pdfs:
        doc = pdfium.PdfDocument(str(path))
        try:
            for i in range(len(doc)):
                if done >= RSS_PAGES:
                    break
                page = doc[i]
                ocr.read_page(page, **kw)  # type: ignore[arg-type]
                page.close()
                done += 1
        finally:
            doc.close()
    child = _children_rss_mb()
    # a child's ru_maxrss keeps its parent's peak from before exec: an upper bound of a tesseract call's own
    tess = f"; + ≤ {child:.0f} MB per tesseract call" if kw["engine"] == "tesseract" else ""
    print(f"{_rss_mb():.0f} MB (address space {_rss_mb('VmPeak'):.0f} MB{tess})")
    return 0


def _peak_rss(name: str, corpora: pathlib.Path | None) -> str:
    import subprocess

    cmd = [sys.executable, __file__, "--rss-probe", name] + (["--corpora", str(corpora)] if corpora else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else "n/a"


def _figures(pages: list[tuple[str, int, str]], hyps: list[tuple[str, float, float, float]]) -> dict:
    """CER, word recall and V4's look-ups of one variant: ``pages`` (file, page, reference) and
    ``hyps`` (OCR text, confidence, seconds, CPU seconds) in the same order."""
    dist = ref_chars = words_n = words_found = 0
    cers = []
    for (_f, _p, ref), (hyp, _c, _s, _cpu) in zip(pages, hyps, strict=True):
        r, h = normalise(ref), normalise(hyp)
        d = Levenshtein.distance(r, h)
        dist += d
        ref_chars += len(r)
        cers.append(d / max(1, len(r)))
        hyp_words = set(WORD.findall(h))
        ref_words = WORD.findall(r)
        words_n += len(ref_words)
        words_found += sum(w in hyp_words for w in ref_words)
    secs = sum(h[2] for h in hyps)
    cpu = sum(h[3] for h in hyps)
    return {"secs": secs, "pps": len(hyps) / max(1e-9, secs), "cpu": cpu, "ppcpu": len(hyps) / max(1e-9, cpu), "cer": dist / max(1, ref_chars), "dist": dist,
            "ref_chars": ref_chars, "cers": cers, "words": words_found / max(1, words_n), "words_n": words_n,
            "conf": statistics.mean(h[1] for h in hyps) if hyps else 0.0,
            "v4": measure_v4([(f, ref, h[0]) for (f, _p, ref), h in zip(pages, hyps, strict=True)])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--rss-probe", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from scripts.support.corpora import default_corpora_dir

    pdfs = sorted(((args.corpora or default_corpora_dir()) / "pdfs").glob("clinical_tcga_*.pdf"))
    if args.rss_probe:
        return _rss_probe(pdfs, args.rss_probe)
    load_s: dict[str, float] = {}
    missing: dict[str, str] = {}
    for name, _d, kw in VARIANTS:
        t_load = time.perf_counter()
        try:
            ocr.get_engine(str(kw["engine"]))
        except ocr.OCRUnavailable as exc:
            missing[name] = str(exc)
        load_s.setdefault(str(kw["engine"]), time.perf_counter() - t_load)
    variants = tuple(v for v in VARIANTS if v[0] not in missing)
    pages: list[tuple[str, int, str]] = []  # (file, page, reference)
    # (text, confidence, seconds, CPU seconds)
    hyps: dict[str, list[tuple[str, float, float, float]]] = {n: [] for n, _d, _k in variants}
    for path in pdfs:
        doc = pdfium.PdfDocument(str(path))
        try:
            for i in range(len(doc)):
                page = doc[i]
                tp = page.get_textpage()
                pages.append((path.name, i + 1, tp.get_text_range()))
                tp.close()
                # the variants take turns, starting with another one on each page: a busy machine's
                # slow spells fall on all of them alike
                k = len(pages) % len(variants)
                for name, _d, kw in variants[k:] + variants[:k]:
                    t0, c0 = time.perf_counter(), _cpu()
                    read = ocr.read_page(page, **kw)  # type: ignore[arg-type]
                    hyps[name].append((read.text, read.confidence, time.perf_counter() - t0, _cpu() - c0))
                page.close()
        finally:
            doc.close()
    rss_all = _rss_mb()
    load_avg = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    figs = {name: _figures(pages, hyps[name]) for name, _d, _k in variants}
    rss = {name: _peak_rss(name, args.corpora) for name, _d, _k in variants}
    base = figs[variants[0][0]]
    lines = [
        "# Local OCR benchmark",
        "",
        f"- date: {_dt.date.today().isoformat()}",
        f"- the parser's engine: `{ocr.engine_id()}` (ADR 0058: `{ocr.DEFAULT_ENGINE}`, `{ocr.FALLBACK_ENGINE}` "
        f"where tesseract is not installed; `{ocr.ENGINE_ENV}` chooses another of "
        f"{', '.join(f'`{e}`' for e in ocr.ENGINES)}); pages rendered at "
        f"{ocr.TARGET_PX} px on the longer side (≈ 155 dpi on a Letter page), {ocr.THREADS} inference thread; "
        f"rapidocr: detection on {f'a ≤ {ocr.DET_PX} px copy' if ocr.DET_PX else 'the full image'}, "
        f"orientation classifier {'on' if ocr.USE_CLS else 'off'} (ADR 0047); the PP-OCRv4 ONNX models ship in "
        "each rapidocr wheel, Tesseract's in Debian's package",
        f"- data: {len(pdfs)} TCGA pathology scans of the shared corpus ({len(pages)} pages) that carry a reference "
        "text layer; the rendered image is OCR'd and compared with the layer (itself an upstream OCR)",
        "- script: `scripts/bench_ocr.py`; engine load "
        + ", ".join(f"{e} {s:.2f} s" for e, s in load_s.items() if e not in {str(k['engine']) for n, _d, k in VARIANTS
                                                                           if n in missing})
        + "; the variants take turns page by page (each page starts with another one), so the machine's load "
        f"falls on all of them alike; load average at the end of the OCR (1 / 5 / 15 min): {load_avg} on "
        f"{os.cpu_count()} cores",
        "- engine ids: " + ", ".join(f"`{ocr.engine_id(str(k['engine']))}`" for _n, _d, k in variants),
        "- not measured (engine not installed): " + ("; ".join(f"{n}: {m}" for n, m in missing.items()) or "none"),
        "",
        "## The variants side by side",
        "",
        "| variant | pages/s | pages per CPU-second | × the first (CPU) | reference words read | CER (all characters) "
        "| CER (median page) "
        "| V4 own lines found, faithful (threshold {t}) | V4 false, faithful | mean confidence | peak RSS |".format(
            t=base["v4"]["threshold_ocr"]),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, _d, kw in variants:
        f = figs[name]
        v4, t = f["v4"], f["v4"]["threshold_ocr"]
        mark = " **(default)**" if _is_default(kw) else ""
        lines.append(
            f"| {name}{mark} | {f['pps']:.2f} ({f['secs']:.1f} s) | **{f['ppcpu']:.2f}** ({f['cpu']:.1f} CPU-s) "
            f"| {f['ppcpu'] / base['ppcpu']:.2f}× "
            f"| {100 * f['words']:.1f} % | {100 * f['cer']:.1f} % | {100 * statistics.median(f['cers']):.1f} % "
            f"| {_pct(v4['faithful'][t], v4['n_lines'])} | {_pct(v4['false_faithful'][t], v4['n_false'])} "
            f"| {f['conf']:.3f} | {rss[name]} |")
    lines += [""] + [f"- *{name}*: {d}." for name, d, _k in variants] + [
        f"- pages/s: render + OCR of the {len(pages)} pages, one process, one thread, wall clock (on a shared machine "
        "it counts the other processes' turns too); pages per CPU-second: the same over this process's CPU time "
        "and its Tesseract subprocesses' "
        "(the comparison that holds on a busy machine); reference words: the layer's "
        f"words of ≥ 4 letters ({base['words_n']}) also read, order-free; peak RSS: a child process OCRing "
        f"{RSS_PAGES} pages with that variant alone (this process, all variants: {rss_all:.0f} MB), and its peak "
        "address space (VmPeak: what a parse worker's 2 GiB `RLIMIT_AS` counts; OpenVINO's grows with every new "
        "input shape, ADR 0057's amendment).",
        "",
        "## V4's fuzzy match on OCR'd pages",
        "",
        f"Reference lines of ≥ 25 characters ({base['v4']['n_lines']}) looked up in the OCR'd text of their own page "
        f"with V4's `contains` (exact, then rapidfuzz `partial_ratio` ≥ threshold); false matches: "
        f"{base['v4']['n_false']} lines of other TCGA documents looked up in the same pages. *Faithful*: a fuzzy match "
        "must also keep the numbers, units, negation cues and laterality words of the line (ADR 0021, "
        "`faithfulness` in `include/rules/evidence.json`), as V4 requires on an OCR'd page. Each cell: own lines "
        "found / found faithful / other documents' lines found (false) / false, faithful.",
        "",
        "| threshold | " + " | ".join(n for n, _d, _k in variants) + " |",
        "|---:|" + "---:|" * len(variants),
    ]
    for t in THRESHOLDS:
        cells = []
        for name, _d, _k in variants:
            v4 = figs[name]["v4"]
            cells.append(f"{_pct(v4['found'][t], v4['n_lines'])} / {_pct(v4['faithful'][t], v4['n_lines'])} / "
                         f"{_pct(v4['false'][t], v4['n_false'])} / {_pct(v4['false_faithful'][t], v4['n_false'])}")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += ["", f"At V4's OCR threshold ({base['v4']['threshold_ocr']}) the faithfulness check turns own lines the "
              "fuzzy match finds into not found (V4 would call them fabricated):", ""]
    for name, _d, _k in variants:
        v4 = figs[name]["v4"]
        t = v4["threshold_ocr"]
        lost = v4["found"][t] - v4["faithful"][t]
        lines.append(f"- {name}: {lost} of {v4['found'][t]} ({_pct(lost, v4['found'][t])}), by category: "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(v4['lost_by'].items())) or 'none'}")
    lines += [
        "",
        "Both texts are OCR, so a lost line is either two OCRs reading a digit or a sign differently (the check "
        "tolerates letter/digit confusions, 0/o 1/l 5/s 8/b, a unit read on one side only and a misread cue word, "
        "never one digit for another) or a line the OCR did not read at all, whose fuzzy match was another line "
        "with other numbers (a right rejection).",
        "",
        "Realistic classifier errors made on the own lines the faithful check finds (V4's OCR threshold) and "
        "looked up again on the same OCR'd page (lines / caught, i.e. not found):",
        "",
        "| change | " + " | ".join(n for n, _d, _k in variants) + " |",
        "|---|" + "---:|" * len(variants),
    ]
    kinds = sorted({k for name, _d, _k in variants for k in figs[name]["v4"]["mutations"]})
    for kind in kinds:
        cells = []
        for name, _d, _k in variants:
            n, caught = figs[name]["v4"]["mutations"].get(kind, (0, 0))
            cells.append(f"{n} / {_pct(caught, n)}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += ["", "A change not caught is mostly one whose changed form is on the page too (left and right lymph "
              "node lists, numbered blocks), or a quote that stops right after a dropped leading \"no\" (an exact "
              "substring of the page)."]
    lines += ["", "## Per page (CER / CPU seconds)", "", "| file | page | " + " | ".join(n for n, _d, _k in variants) + " |",
              "|---|---:|" + "---:|" * len(variants)]
    for j, (fname, pno, _ref) in enumerate(pages):
        lines.append(f"| {fname} | {pno} | " + " | ".join(
            f"{100 * figs[n]['cers'][j]:.1f} % / {hyps[n][j][3]:.2f}" for n, _d, _k in variants) + " |")
    md = "\n".join(lines) + "\n"
    if not args.no_write:
        OUT.write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
