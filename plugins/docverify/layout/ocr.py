"""Local OCR of page images: **rapidocr-onnxruntime** (PP-OCRv4 detection + recognition on ONNX
Runtime, Apache-2.0).

Why this engine: it installs from the package index alone (no system package such as Tesseract)
and its wheel *ships its three ONNX models* (``rapidocr_onnxruntime/models/*.onnx``, ~16 MB), so
nothing is downloaded at run time — ``rapidocr`` 3.x, its successor, fetches models from a hub
on first use and is not used. cv2 comes from ``opencv-python-headless`` (the plain
``opencv-python`` it declares needs the system's libGL; ``requirements-overrides.txt`` drops it).

Used by the local PDF parser (:mod:`docverify.layout.local_pdf`) inside its time-bounded worker
processes, for pages without a text layer that are mostly images. One engine per process (the
models load in ~0.3 s), one ONNX Runtime thread per worker (the workers are the parallelism).

A page image is rendered with pypdfium2 so that its longer side is :data:`TARGET_PX` pixels
(whatever the page's nominal size: some scans declare a 4-point page), recognised, and its lines
(in reading order: top to bottom, then left to right) are normalised (NFKC: the recogniser's
full-width punctuation becomes ASCII) and grouped into paragraphs at vertical gaps larger than
:data:`PARA_GAP` line heights. The page's confidence is the recogniser's per-line score
averaged with the lines' lengths as weights.
"""

from __future__ import annotations

import functools
import statistics
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

ENGINE = "rapidocr-onnxruntime"
#: the longer side of the rendered page image, in pixels (≈ 200 dpi on a Letter page)
TARGET_PX = 1700
#: a vertical gap above this many median line heights starts a new paragraph
PARA_GAP = 0.9
#: recognised lines scoring below this are dropped (the engine's own default is 0.5)
MIN_LINE_SCORE = 0.5
#: ONNX Runtime threads per engine (each parse worker has its own engine)
THREADS = 1


def engine_version() -> str:
    try:
        return _metadata.version(ENGINE)
    except _metadata.PackageNotFoundError:
        return "unavailable"


def engine_id() -> str:
    return f"{ENGINE}-{engine_version()}"


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


@functools.lru_cache(maxsize=1)
def get_engine() -> RapidOCR:
    """The process's OCR engine (loaded once; models from the installed wheel)."""
    try:
        from rapidocr_onnxruntime import RapidOCR
    except Exception as exc:  # ImportError, or cv2/onnxruntime failing to load their libraries
        raise OCRUnavailable(f"{ENGINE} cannot be imported ({type(exc).__name__}: {exc})") from exc
    return RapidOCR(intra_op_num_threads=THREADS, inter_op_num_threads=1, print_verbose=False)


def render(page: PdfPage, target_px: int = TARGET_PX) -> Image:
    """A pypdfium2 page → RGB numpy array whose longer side is ``target_px`` pixels."""
    w, h = page.get_size()
    scale = target_px / max(1e-3, w, h)
    image: Image = page.render(scale=scale).to_numpy()
    return image


def _norm(s: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", s).split())


def read_image(image: Image) -> OCRPage:
    """OCR one image (numpy array, RGB or BGR) → :class:`OCRPage`."""
    engine = get_engine()
    result, _elapse = engine(image)
    rows: list[tuple[float, float, float, str, float]] = []
    for box, text, score in result or []:
        text = _norm(str(text))
        score = float(score)
        if not text or score < MIN_LINE_SCORE:
            continue
        ys = [float(pt[1]) for pt in box]
        xs = [float(pt[0]) for pt in box]
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


def read_page(page: PdfPage, target_px: int = TARGET_PX) -> OCRPage:
    """Render a pypdfium2 page and OCR it."""
    return read_image(render(page, target_px))
