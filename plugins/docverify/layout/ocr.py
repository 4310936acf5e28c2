"""Local OCR of page images. The default engine: **Tesseract** (Debian's ``tesseract-ocr`` 5.3, its
English LSTM model in the package, one subprocess per page with one OpenMP thread; ``make ocr-deps``,
which ``make run`` and ``make test`` run). ADR 0058 chose it by ``scripts/bench_ocr.py``'s figures:
5.9x the pages per CPU-second of the engine before ADR 0047, the most reference words read and the
lowest CER, ~84 MB a call. Where the ``tesseract`` binary is missing the default falls back to
**rapidocr-onnxruntime** (PP-OCRv4 detection + recognition on ONNX Runtime, the default until ADR
0058, 1.65x) with one warning per process naming the fix; the engine id a bundle records says
which one read it. The environment variable ``DOCVERIFY_OCR_ENGINE`` chooses an engine explicitly
(no fallback: a chosen engine that is missing is :class:`OCRUnavailable`): ``tesseract``,
``rapidocr-onnxruntime``, or ``rapidocr-openvino`` (the same PP-OCRv4 models on the OpenVINO runtime,
``rapidocr-openvino:f32`` fixes its precision; ADR 0057: its address space grows past the parse
worker's 2 GiB cap within a few pages, so it is for in-process use such as the bench).

Why these engines: the rapidocr ones install from the package index alone and their wheels *ship
the three ONNX models* (``rapidocr_*/models/*.onnx``, ~16 MB), so nothing is downloaded at run
time — ``rapidocr`` 3.x, their successor, fetches models from a hub on first use and is not used;
Tesseract's English model ships in Debian's package. rapidocr-openvino 1.4.4 imports
``openvino.runtime``, which openvino 2026 removed: :func:`_openvino_runtime_shim` provides it. cv2
comes from ``opencv-python-headless`` (the plain ``opencv-python`` the rapidocr wheels declare needs
the system's libGL; ``requirements-overrides.txt`` drops it).

Used by the local PDF parser (:mod:`docverify.layout.local_pdf`) inside its time-bounded worker
processes, for pages without a text layer that are mostly images. One engine per process (the
rapidocr models load in ~1–2 s; Tesseract loads its model in each call, ~0.02 s), one inference
thread per worker (the workers are the parallelism). A Tesseract call that outlives
:func:`tesseract_timeout_s` (below the pool's per-page limit) is killed and the page stays unread.

A page image is rendered with pypdfium2 so that its longer side is :data:`TARGET_PX` pixels
(whatever the page's nominal size: some scans declare a 4-point page); with rapidocr, text lines
are *detected* on a copy at most :data:`DET_PX` pixels long and *recognised* on crops of the full
image, without the engine's orientation classifier (ADR 0047: on the corpus's TCGA scans this reads
94 % of the reference words instead of 84 %, with half the CER and ~1.5× the speed); Tesseract
gives its own lines. The lines (in reading order: top to bottom, then left to right) are normalised
(NFKC: the recogniser's full-width punctuation becomes ASCII) and grouped into paragraphs at
vertical gaps larger than :data:`PARA_GAP` line heights. The page's confidence is the recogniser's
per-line score averaged with the lines' lengths as weights (Tesseract: its words' mean confidence).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import statistics
import subprocess
import sys
import unicodedata
from dataclasses import dataclass, field
from importlib import metadata as _metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from pypdfium2 import PdfPage
    from rapidocr_onnxruntime import RapidOCR

    #: a page image: height × width × 3 channels
    Image = npt.NDArray[np.uint8]

#: the engines this module can drive: Debian's Tesseract (``tesseract-ocr``, called as a subprocess;
#: the default, ADR 0058), the PP-OCRv4 models on ONNX Runtime (the default until ADR 0058, the
#: fallback) or on the OpenVINO runtime (ADR 0057; opt-in, see below)
ENGINES = ("tesseract", "rapidocr-onnxruntime", "rapidocr-openvino")
#: the engine used when the environment names none (ADR 0058), when its binary is installed
DEFAULT_ENGINE = "tesseract"
#: the default's stand-in where ``tesseract`` is not installed (its models ship in the pinned wheel).
#: Not rapidocr-openvino (ADR 0057, amended): its CPU plugin reserves address space for every new
#: input shape it meets (~1.7 GB after one page, +~125 MB a page with bf16, never given back), so
#: under the parse worker's 2 GiB ``RLIMIT_AS`` its inference fails from the 3rd page of a scan on
FALLBACK_ENGINE = "rapidocr-onnxruntime"
#: environment variable choosing the engine (a parse worker inherits its parent's environment)
ENGINE_ENV = "DOCVERIFY_OCR_ENGINE"
#: the longer side of the rendered page image, in pixels (≈ 155 dpi on a Letter page's 11-inch side,
#: ≈ 145 dpi on A4's); recognition reads its line crops at this resolution
TARGET_PX = 1700
#: text *detection* runs on a copy whose longer side is at most this many pixels (None: on the
#: rendered image itself, the engine's default); the lines it finds are cropped from the full image
DET_PX: int | None = 960
#: the engine's orientation classifier (turns lines it judges upside down before recognition): off,
#: it turned right-way-up lines of the TCGA scans over and cost 5 points of word recall (ADR 0047)
USE_CLS = False
#: a vertical gap above this many median line heights starts a new paragraph
PARA_GAP = 0.9
#: recognised lines scoring below this are dropped (the engine's own default is 0.5)
MIN_LINE_SCORE = 0.5
#: ONNX Runtime threads per engine (each parse worker has its own engine)
THREADS = 1


#: OpenVINO's inference precision asked for (``INFERENCE_PRECISION_HINT``; ADR 0057): bf16 reads the
#: corpus scans as faithfully as f32 at 1.7× its speed; a CPU without bf16 instructions runs f32 (the
#: engine id names the precision run)
OPENVINO_PRECISION = "bf16"
#: Tesseract's language and page segmentation mode (3: automatic, no orientation detection)
TESSERACT_ARGS = ("-l", "eng", "--psm", "3")
#: environment variable with the parse pool's per-page limit in seconds (the pool sets it for its
#: workers): a Tesseract call is killed before it, so a stuck call leaves its page unread rather
#: than the whole file stopped
PAGE_TIMEOUT_ENV = "DOCVERIFY_PARSE_PAGE_TIMEOUT_S"
#: a Tesseract call's limit without a pool (in process: the bench, a test), in seconds
TESSERACT_TIMEOUT_S = 600.0

_log = logging.getLogger(__name__)


def engine_name(engine: str | None = None) -> str:
    """``engine``, else the environment's :data:`ENGINE_ENV`, else :data:`DEFAULT_ENGINE` — or
    :data:`FALLBACK_ENGINE` when the default's binary is missing (:func:`default_engine`)."""
    return engine or os.environ.get(ENGINE_ENV, "").strip() or default_engine()


@functools.lru_cache(maxsize=1)
def default_engine() -> str:
    """:data:`DEFAULT_ENGINE` when ``tesseract`` runs here, else :data:`FALLBACK_ENGINE`, said once
    per process (each parse worker) with the fix: the engine id a bundle records names the one that
    read it, so a night read by the fallback says so in its stage records and report."""
    if _tesseract_version():
        return DEFAULT_ENGINE
    _log.warning(
        "Tesseract, the default local OCR engine (ADR 0058), is not installed: scanned pages are read with "
        "%s instead (about a third of its speed). Install it: make ocr-deps (or apt-get install tesseract-ocr), "
        "or set %s to choose an engine", FALLBACK_ENGINE, ENGINE_ENV)
    return FALLBACK_ENGINE


def engine_version(engine: str | None = None) -> str:
    name = engine_name(engine).partition(":")[0]
    if name == "tesseract":
        return _tesseract_version() or "unavailable"
    if name not in ENGINES:
        return "unavailable"
    try:
        return _metadata.version(name)
    except _metadata.PackageNotFoundError:
        return "unavailable"


def engine_id(engine: str | None = None) -> str:
    """The engine, its version and the settings that change what it reads (``-det960``: detection on
    a ≤ 960 px copy; ``-cls``: the orientation classifier on; Tesseract: its language), e.g.
    ``tesseract-5.3.0-eng`` or ``rapidocr-onnxruntime-1.4.4-det960``: part of an OCR'd bundle's
    ``parser`` (and of the intake OCR cache's key), so a bundle read by another engine or with other
    settings is not reused."""
    full = engine_name(engine)
    name, _sep, precision = full.partition(":")
    if name not in ENGINES:
        return f"{full}-unavailable"
    if name == "tesseract":
        return f"tesseract-{engine_version(name)}-{TESSERACT_ARGS[1]}"
    out = f"{name}-{engine_version(name)}" + (f"-det{DET_PX}" if DET_PX else "") + ("-cls" if USE_CLS else "")
    if name == "rapidocr-openvino":  # the precision the CPU plugin runs (loads the engine once)
        asked = precision or OPENVINO_PRECISION
        try:
            get_engine(full)
        except OCRUnavailable:
            return out + f"-{asked}"
        out += f"-{_OV_EFFECTIVE.get(asked, asked)}"
    return out


@functools.lru_cache(maxsize=1)
def _tesseract_version() -> str:
    exe = shutil.which("tesseract")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    first = (out.stdout or out.stderr).split("\n", 1)[0].split()
    return first[1] if len(first) > 1 and first[0] == "tesseract" else ""


class OCRUnavailable(RuntimeError):
    """The OCR engine cannot be loaded in this environment (package missing or broken)."""


@dataclass
class OCRPage:
    """What OCR read on one page image."""

    paragraphs: list[str] = field(default_factory=list)
    #: length-weighted mean recogniser score of the kept lines, 0 when nothing was read
    confidence: float = 0.0
    lines: int = 0
    image_size: tuple[int, int] = (0, 0)

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class Tesseract:
    """Debian's ``tesseract`` binary (one OpenMP thread per call: the workers are the parallelism)."""

    exe: str
    version: str


#: OpenVINO's inference precision per engine load: what was asked → what the CPU plugin runs
_OV_PRECISION: dict[str, str] = {"asked": OPENVINO_PRECISION}
_OV_EFFECTIVE: dict[str, str] = {}


def _openvino_runtime_shim() -> None:
    """rapidocr-openvino 1.4.4 imports ``Core`` from ``openvino.runtime``, a module openvino 2026 removed
    (``Core`` is at the package's top level since 2023.1): that module is made here, its ``Core`` the
    package's with the inference precision of :data:`OPENVINO_PRECISION` set (OpenVINO's own default
    depends on the CPU: the same engine id would read differently) and the precision it runs recorded
    for :func:`engine_id` (f32 when the CPU refuses the one asked)."""
    if "openvino.runtime" in sys.modules and hasattr(sys.modules["openvino.runtime"], "_docverify"):
        return
    import types

    import openvino

    class Core(openvino.Core):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            asked = _OV_PRECISION["asked"]
            try:
                self.set_property("CPU", {"INFERENCE_PRECISION_HINT": asked})
            except Exception:  # a precision this CPU has no instructions for
                self.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
            got = str(self.get_property("CPU", "INFERENCE_PRECISION_HINT"))
            _OV_EFFECTIVE[asked] = {"bfloat16": "bf16", "float32": "f32", "float16": "f16"}.get(
                got.split("'")[1] if "'" in got else got, got)

    shim = types.ModuleType("openvino.runtime")
    shim.Core = Core  # type: ignore[attr-defined]
    shim._docverify = True  # type: ignore[attr-defined]
    sys.modules["openvino.runtime"] = shim


def get_engine(engine: str | None = None) -> RapidOCR | Tesseract:
    """The process's OCR engine for ``engine`` (default: :func:`engine_name`; ``rapidocr-openvino:bf16``
    names OpenVINO's precision too), loaded once; the rapidocr models come from the installed wheel,
    Tesseract's from Debian's package."""
    return _load_engine(engine_name(engine))


@functools.lru_cache(maxsize=6)
def _load_engine(full: str) -> RapidOCR | Tesseract:
    name, _sep, precision = full.partition(":")
    if name not in ENGINES or (precision and name != "rapidocr-openvino"):
        raise OCRUnavailable(f"unknown OCR engine {full!r} ({ENGINE_ENV}); one of {', '.join(ENGINES)}")
    if name == "tesseract":
        version = _tesseract_version()
        if not version:
            raise OCRUnavailable("tesseract is not installed (Debian's tesseract-ocr: make ocr-deps)")
        return Tesseract(exe=shutil.which("tesseract") or "tesseract", version=version)
    try:
        if name == "rapidocr-openvino":
            _openvino_runtime_shim()
            from rapidocr_openvino import RapidOCR as OpenVINOOCR

            _OV_PRECISION["asked"] = precision or OPENVINO_PRECISION
            return OpenVINOOCR(inference_num_threads=THREADS, print_verbose=False)
        from rapidocr_onnxruntime import RapidOCR
    except Exception as exc:  # ImportError, or cv2/onnxruntime/openvino failing to load their libraries
        raise OCRUnavailable(f"{name} cannot be imported ({type(exc).__name__}: {exc})") from exc
    return RapidOCR(intra_op_num_threads=THREADS, inter_op_num_threads=1, print_verbose=False)


def render(page: PdfPage, target_px: int = TARGET_PX) -> Image:
    """A pypdfium2 page → RGB numpy array whose longer side is ``target_px`` pixels."""
    w, h = page.get_size()
    scale = target_px / max(1e-3, w, h)
    image: Image = page.render(scale=scale).to_numpy()
    return image


def _norm(s: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", s).split())


def tesseract_timeout_s() -> float:
    """Seconds a Tesseract call may take: 80 % of the parse pool's per-page limit when it runs in a
    parse worker (:data:`PAGE_TIMEOUT_ENV`; the rest is the page's rendering), else
    :data:`TESSERACT_TIMEOUT_S`. ``subprocess.run`` kills the call when it runs out: the page's OCR
    raises ``TimeoutExpired`` and the parser counts the page unread."""
    try:
        page_s = float(os.environ.get(PAGE_TIMEOUT_ENV, ""))
    except ValueError:
        return TESSERACT_TIMEOUT_S
    return max(1.0, 0.8 * page_s) if page_s > 0 else TESSERACT_TIMEOUT_S


def _tesseract_lines(image: Image, tess: Tesseract) -> list[tuple[object, object, object]]:
    """Tesseract's lines of ``image`` as ``(box, text, score)``: its TSV words grouped by (block,
    paragraph, line), the box the words' union, the score their mean confidence / 100."""
    import cv2

    ok, png = cv2.imencode(".png", image)
    if not ok:
        return []
    env = {"OMP_THREAD_LIMIT": "1", "PATH": os.environ.get("PATH", "/usr/bin")}
    out = subprocess.run([tess.exe, "stdin", "stdout", *TESSERACT_ARGS, "tsv"], input=png.tobytes(),
                         capture_output=True, env=env, timeout=tesseract_timeout_s(), check=True)
    lines: dict[tuple[str, str, str, str], list[tuple[int, int, int, int, float, str]]] = {}
    for row in out.stdout.decode("utf-8", "replace").splitlines()[1:]:
        f = row.split("\t")
        if len(f) < 12 or f[0] != "5" or not f[11].strip():
            continue
        x, y, w, h, conf = int(f[6]), int(f[7]), int(f[8]), int(f[9]), float(f[10])
        lines.setdefault((f[1], f[2], f[3], f[4]), []).append((x, y, x + w, y + h, conf, f[11]))
    result: list[tuple[object, object, object]] = []
    for words in lines.values():
        x0, y0 = min(w[0] for w in words), min(w[1] for w in words)
        x1, y1 = max(w[2] for w in words), max(w[3] for w in words)
        box = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
        result.append((box, " ".join(w[5] for w in words), max(0.0, sum(w[4] for w in words) / len(words) / 100)))
    return result


def _recognise(image: Image, det_px: int | None, use_cls: bool,
               engine: str | None = None) -> list[tuple[object, object, object]]:
    """The engine's ``(box, text, score)`` lines of ``image``. With ``det_px``, text detection runs on
    a copy whose longer side is at most ``det_px`` pixels and the boxes it finds are scaled back and
    cropped from the full image for recognition (what ``RapidOCR.__call__`` does, minus its
    rescaling; its own ``det_limit_side_len`` cannot shrink a page: with ``limit_type max`` the
    detector picks 960/1500/2000 px by itself). Tesseract has its own layout analysis (``det_px``
    and ``use_cls`` do not apply)."""
    eng = get_engine(engine)
    if isinstance(eng, Tesseract):
        return _tesseract_lines(image, eng)
    if det_px is None:
        result, _elapse = eng(image, use_cls=use_cls)
        return list(result or [])
    import cv2
    import numpy as np

    img = eng.load_img(image)
    h, w = img.shape[:2]
    scale = min(1.0, det_px / max(1, h, w))
    small = img if scale >= 1.0 else cv2.resize(
        img, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    boxes, _elapse = eng.text_det(small)
    if boxes is None or len(boxes) == 0:
        return []
    full = [np.clip(np.asarray(b, dtype=np.float32) / scale, 0, [w, h]).astype(np.float32)
            for b in eng.sorted_boxes(boxes)]
    crops = eng.get_crop_img_list(img, full)
    if use_cls:
        crops, _cls, _elapse = eng.text_cls(crops)
    rec, _elapse = eng.text_rec(crops, False)
    return [(box, r[0], r[1]) for box, r in zip(full, rec, strict=True)]


def read_image(image: Image, *, det_px: int | None = None, use_cls: bool | None = None,
               engine: str | None = None) -> OCRPage:
    """OCR one image (numpy array, RGB or BGR) → :class:`OCRPage`; ``det_px`` / ``use_cls``
    default to :data:`DET_PX` / :data:`USE_CLS`, ``engine`` to :func:`engine_name` (the bench
    compares others)."""
    result = _recognise(image, DET_PX if det_px is None else (det_px or None),
                        USE_CLS if use_cls is None else use_cls, engine)
    rows: list[tuple[float, float, float, str, float]] = []
    for box, text, score in result:
        text = _norm(str(text))
        score = float(score)  # type: ignore[arg-type]
        if not text or score < MIN_LINE_SCORE:
            continue
        ys = [float(pt[1]) for pt in box]  # type: ignore[attr-defined]
        xs = [float(pt[0]) for pt in box]  # type: ignore[attr-defined]
        rows.append((min(ys), max(ys), min(xs), text, score))
    h, w = (image.shape[0], image.shape[1]) if hasattr(image, "shape") else (0, 0)
    if not rows:
        return OCRPage(image_size=(w, h))
    heights = [max(1.0, r[1] - r[0]) for r in rows]
    med = statistics.median(heights)
    # reading order: lines whose tops are within half a line height share a row, left to right
    rows.sort(key=lambda r: (r[0], r[2]))
    ordered: list[list[tuple[float, float, float, str, float]]] = []
    for r in rows:
        if ordered and abs(r[0] - ordered[-1][0][0]) <= 0.5 * med:
            ordered[-1].append(r)
        else:
            ordered.append([r])
    paragraphs: list[str] = []
    current: list[str] = []
    prev_bottom = None
    for row in ordered:
        row.sort(key=lambda r: r[2])
        top = min(r[0] for r in row)
        line = " ".join(r[3] for r in row)
        if current and prev_bottom is not None and top - prev_bottom > PARA_GAP * med:
            paragraphs.append("\n".join(current))
            current = []
        current.append(line)
        prev_bottom = max(r[1] for r in row)
    if current:
        paragraphs.append("\n".join(current))
    total = sum(len(r[3]) for r in rows)
    conf = sum(len(r[3]) * r[4] for r in rows) / total if total else 0.0
    return OCRPage(paragraphs=paragraphs, confidence=round(conf, 4), lines=len(rows), image_size=(w, h))


def read_page(page: PdfPage, target_px: int = TARGET_PX, *, det_px: int | None = None,
              use_cls: bool | None = None, engine: str | None = None) -> OCRPage:
    """Render a pypdfium2 page and OCR it (``det_px``/``use_cls``/``engine``: see :func:`read_image`;
    0 for ``det_px`` = detection on the rendered image)."""
    return read_image(render(page, target_px), det_px=det_px, use_cls=use_cls, engine=engine)
