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
(whatever the page's nominal size: some scans declare a 4-point page); text lines are *detected*
on a copy at most :data:`DET_PX` pixels long and *recognised* on crops of the full image, without
the engine's orientation classifier (ADR 0047: on the corpus's TCGA scans this reads 94 % of the
reference words instead of 84 %, with half the CER and ~1.5× the speed, ``scripts/bench_ocr.py``);
its lines
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


def engine_version() -> str:
    try:
        return _metadata.version(ENGINE)
    except _metadata.PackageNotFoundError:
        return "unavailable"


def engine_id() -> str:
    """The engine, its version and the settings that change what it reads (``-det960``: detection on
    a ≤ 960 px copy; ``-cls``: the orientation classifier on), e.g. ``rapidocr-onnxruntime-1.4.4-det960``:
    part of an OCR'd bundle's ``parser``, so a bundle read with other settings is not reused."""
    return f"{ENGINE}-{engine_version()}" + (f"-det{DET_PX}" if DET_PX else "") + ("-cls" if USE_CLS else "")


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


def _recognise(image: Image, det_px: int | None, use_cls: bool) -> list[tuple[object, object, object]]:
    """The engine's ``(box, text, score)`` lines of ``image``. With ``det_px``, text detection runs on
    a copy whose longer side is at most ``det_px`` pixels and the boxes it finds are scaled back and
    cropped from the full image for recognition (what ``RapidOCR.__call__`` does, minus its
    rescaling; its own ``det_limit_side_len`` cannot shrink a page: with ``limit_type max`` the
    detector picks 960/1500/2000 px by itself)."""
    engine = get_engine()
    if det_px is None:
        result, _elapse = engine(image, use_cls=use_cls)
        return list(result or [])
    import cv2
    import numpy as np

    img = engine.load_img(image)
    h, w = img.shape[:2]
    scale = min(1.0, det_px / max(1, h, w))
    small = img if scale >= 1.0 else cv2.resize(
        img, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    boxes, _elapse = engine.text_det(small)
    if boxes is None or len(boxes) == 0:
        return []
    full = [np.clip(np.asarray(b, dtype=np.float32) / scale, 0, [w, h]).astype(np.float32)
            for b in engine.sorted_boxes(boxes)]
    crops = engine.get_crop_img_list(img, full)
    if use_cls:
        crops, _cls, _elapse = engine.text_cls(crops)
    rec, _elapse = engine.text_rec(crops, False)
    return [(box, r[0], r[1]) for box, r in zip(full, rec, strict=True)]


def read_image(image: Image, *, det_px: int | None = None, use_cls: bool | None = None) -> OCRPage:
    """OCR one image (numpy array, RGB or BGR) → :class:`OCRPage`; ``det_px`` / ``use_cls``
    default to :data:`DET_PX` / :data:`USE_CLS` (the bench compares others)."""
    result = _recognise(image, DET_PX if det_px is None else (det_px or None),
                        USE_CLS if use_cls is None else use_cls)
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
              use_cls: bool | None = None) -> OCRPage:
    """Render a pypdfium2 page and OCR it (``det_px``/``use_cls``: see :func:`read_image`; 0 for
    ``det_px`` = detection on the rendered image)."""
    return read_image(render(page, target_px), det_px=det_px, use_cls=use_cls)
