"""Page structure from PDFium's text geometry: lines → paragraphs, tables and block types.

The rules (see :mod:`docverify.layout.local_pdf` for the whole parser): every line is normalised
(:func:`normalise_line`); lines group into paragraphs at a vertical gap larger than ~1.45× the
page's usual line pitch, at a jump back up the page, at a font-size change of more than 30 %, at a
first-line indent and before a list marker; a line is *tabular* when its text rectangles form ≥ 3
separate segments; a page has tables when ≥ 3 lines are tabular, 2 of them consecutive.
"""

from __future__ import annotations

import bisect
import ctypes
import re
import statistics
import unicodedata
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

BlockType = str  # "heading" | "paragraph" | "list_item" | "table"


_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff\ufffe\uffff]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")


def normalise_line(s: str) -> str:
    """One line of PDFium text → clean text (no control characters, no trailing spaces)."""
    s = s.replace("\ufffe", "-")  # PDFium marks a hyphen that it joined across a line break
    s = s.replace("\t", " ")
    s = _CONTROL_RE.sub("", s)
    s = _SURROGATE_RE.sub("\ufffd", s)
    s = s.translate(_LIGATURES)
    s = unicodedata.normalize("NFC", s)
    return s.rstrip()


# --------------------------------------------------------------------------- page layout


@dataclass
class _Line:
    text: str
    blank_before: bool = False
    rects: list[tuple[float, float, float, float]] = field(default_factory=list)
    # filled in by _geometry:
    along: list[tuple[float, float]] = field(default_factory=list)  # intervals along the text direction
    pos: float = 0.0  # centre across the text direction
    size: float = 0.0  # extent across the text direction (≈ font height)
    segments: int = 1
    tabular: bool = False


@dataclass
class PageLayout:
    text: str
    paragraphs: list[str]
    block_types: list[BlockType]
    has_tables: bool


def page_layout(tp: pdfium.PdfTextPage) -> PageLayout:
    lines = _read_lines(tp)
    geom = _geometry(lines)
    paras = _group(lines, geom)
    texts = ["\n".join(ln.text for ln in para) for para in paras]
    has_tables = _page_has_tables(lines)
    median_size = geom.size if geom else 0.0
    kinds = [_block_type(para, txt, has_tables, median_size) for para, txt in zip(paras, texts, strict=True)]
    return PageLayout(text="\n\n".join(texts), paragraphs=texts, block_types=kinds, has_tables=has_tables)


def _read_lines(tp: pdfium.PdfTextPage) -> list[_Line]:
    """PDFium's lines (split on its CRLF), normalised, each with its text rectangles."""
    n_chars = tp.count_chars()
    if n_chars <= 0:
        return []
    raw = tp.get_text_range(0, n_chars, errors="surrogatepass")
    astral = [m.start() for m in _ASTRAL_RE.finditer(raw)]  # 2 UTF-16 units each

    def u16(i: int) -> int:  # python index → UTF-16 text index
        return i + bisect.bisect_left(astral, i) if astral else i

    out: list[_Line] = []
    blank = False
    start = 0
    for piece in raw.split("\r\n"):
        end = start + len(piece)
        sub = [normalise_line(s) for s in re.split(r"[\r\n]", piece)]  # stray CR/LF inside a line
        text = "\n".join(s for s in sub if s.strip())
        if not text.strip():
            blank = bool(out)
        else:
            line = _Line(text=text, blank_before=blank)
            blank = False
            try:
                line.rects = _line_rects(tp, u16(start), u16(end) - 1)
            except Exception:
                line.rects = []
            out.append(line)
        start = end + 2
    return out


def _line_rects(tp: pdfium.PdfTextPage, t_first: int, t_last: int) -> list[tuple[float, float, float, float]]:
    if t_last < t_first:
        return []
    c0 = pdfium_c.FPDFText_GetCharIndexFromTextIndex(tp, t_first)
    c1 = pdfium_c.FPDFText_GetCharIndexFromTextIndex(tp, t_last)
    if c0 < 0 or c1 < c0:
        return []
    n = pdfium_c.FPDFText_CountRects(tp, c0, c1 - c0 + 1)
    rects = []
    left, top, right, bottom = ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    for j in range(max(0, n)):
        if pdfium_c.FPDFText_GetRect(tp, j, left, top, right, bottom):
            lo_x, hi_x = sorted((left.value, right.value))
            lo_y, hi_y = sorted((bottom.value, top.value))
            if hi_x - lo_x > 0 or hi_y - lo_y > 0:
                rects.append((lo_x, lo_y, hi_x, hi_y))
    return rects


@dataclass
class _PageGeom:
    vertical: bool  # text runs along the y axis (rotated page content)
    size: float  # median line height (across the text direction)
    pitch: float  # usual distance between consecutive lines of a paragraph
    direction: float  # +1/-1: sign of the position change from one line to the next


def _geometry(lines: list[_Line]) -> _PageGeom | None:
    with_rects = [ln for ln in lines if ln.rects]
    if not with_rects:
        return None
    # orientation: majority (by characters) of lines whose box is longer along y than along x
    vote_v = vote_h = 0
    for ln in with_rects:
        w = max(r[2] for r in ln.rects) - min(r[0] for r in ln.rects)
        h = max(r[3] for r in ln.rects) - min(r[1] for r in ln.rects)
        if len(ln.text) >= 3:
            if h > w:
                vote_v += len(ln.text)
            else:
                vote_h += len(ln.text)
    vertical = vote_v > vote_h
    for ln in with_rects:
        # across the text direction: the median rectangle (robust to OCR specks and sub/superscripts)
        if vertical:
            ln.along = sorted((r[1], r[3]) for r in ln.rects)
            across = [(r[0], r[2]) for r in ln.rects]
        else:
            ln.along = sorted((r[0], r[2]) for r in ln.rects)
            across = [(r[1], r[3]) for r in ln.rects]
        ln.pos = statistics.median((lo + hi) / 2 for lo, hi in across)
        ln.size = statistics.median(hi - lo for lo, hi in across)
    size = statistics.median(ln.size for ln in with_rects) or 1.0
    gap = 1.5 * size
    for ln in with_rects:
        segs = 0
        last_end = None
        for a, z in ln.along:
            if last_end is None or a - last_end >= gap:
                segs += 1
                last_end = z
            else:
                last_end = max(last_end, z)
        ln.segments = segs
        ln.tabular = segs >= 3
    diffs = [b.pos - a.pos for a, b in zip(lines, lines[1:], strict=False) if a.rects and b.rects and a.pos != b.pos]
    direction = (1.0 if statistics.median(diffs) > 0 else -1.0) if diffs else (1.0 if vertical else -1.0)
    pitches = [
        (b.pos - a.pos) * direction
        for a, b in zip(lines, lines[1:], strict=False)
        if a.rects and b.rects and 0.5 * size < (b.pos - a.pos) * direction < 4 * size
    ]
    pitch = statistics.median(pitches) if pitches else 1.25 * size
    # text-only fallback for lines without rectangles
    for ln in lines:
        if not ln.rects:
            ln.tabular = _tabular_by_spaces(ln.text)
    return _PageGeom(vertical=vertical, size=size, pitch=pitch, direction=direction)


def _tabular_by_spaces(text: str) -> bool:
    return len([c for c in re.split(r" {2,}|\t", text.strip()) if c]) >= 3


_LIST_RE = re.compile(
    r"^\s*(?:[\u2022\u00b7\u25aa\u25cf\u25e6\u2023\u2043\u25a0\u25a1\u2013\u2014*+>-]"
    r"|\(?\d{1,3}[.)]|\(?[A-Za-z][.)]|\(?[ivxIVX]{1,5}[.)])\s+\S"
)


def _starts_list(text: str) -> bool:
    return bool(_LIST_RE.match(text))


def _group(lines: list[_Line], geom: _PageGeom | None) -> list[list[_Line]]:
    if not lines:
        return []
    if geom is None:
        for ln in lines:
            ln.tabular = _tabular_by_spaces(ln.text)
    paras: list[list[_Line]] = [[lines[0]]]
    for prev, cur in zip(lines, lines[1:], strict=False):
        if _breaks(prev, cur, geom, paras[-1]):
            paras.append([cur])
        else:
            paras[-1].append(cur)
    return paras


def _breaks(prev: _Line, cur: _Line, geom: _PageGeom | None, para: list[_Line]) -> bool:
    if cur.blank_before:
        return True
    if _starts_list(cur.text):
        return True
    if geom is None or not prev.rects or not cur.rects:
        return False
    size = geom.size
    step = (cur.pos - prev.pos) * geom.direction
    if step < -0.5 * size:  # back up the page: next column or another region
        return True
    if step > max(1.45 * geom.pitch, geom.pitch + 0.5 * size):  # a vertical gap
        return True
    big, small = max(prev.size, cur.size), min(prev.size, cur.size)
    if small > 0 and big / small > 1.3 and len(prev.text) >= 3 and len(cur.text) >= 3 and abs(step) > 0.5 * size:
        return True  # font size changes: heading ↔ body
    if not geom.vertical and prev.along and cur.along and abs(step) > 0.5 * size:
        indent = cur.along[0][0] - prev.along[0][0]
        first = para[0]
        hanging = _starts_list(first.text)  # continuation lines of a list item are indented
        if 0.8 * size < indent < 8 * size and not hanging and not cur.tabular:
            return True  # first-line indent of a new paragraph
    return False


def _page_has_tables(lines: list[_Line]) -> bool:
    flags = [ln.tabular for ln in lines]
    if sum(flags) < 3:
        return False
    return any(a and b for a, b in zip(flags, flags[1:], strict=False))


_SECTION_RE = re.compile(r"^(?:\d+(?:\.\d+)*|[IVX]{1,5})\.?\s+\S")


def _block_type(para: list[_Line], text: str, page_has_tables: bool, median_size: float) -> BlockType:
    n_tab = sum(1 for ln in para if ln.tabular)
    if page_has_tables and n_tab * 2 >= len(para) and n_tab >= 1:
        return "table"
    if _starts_list(text):
        return "list_item"
    flat = " ".join(text.split())
    words = flat.split()
    if len(para) <= 2 and 0 < len(flat) <= 100 and words:
        letters = [c for c in flat if c.isalpha()]
        upper = sum(1 for c in letters if c.isupper())
        big_font = median_size > 0 and max(ln.size for ln in para) >= 1.25 * median_size and len(letters) >= 2
        caps = len(letters) >= 4 and upper >= 0.85 * len(letters) and len(words) <= 10
        colon = flat.endswith(":") and len(words) <= 6
        section = bool(_SECTION_RE.match(flat)) and len(words) <= 8 and not flat.endswith(".")
        if (big_font and not flat.endswith(".")) or caps or colon or section:
            return "heading"
    return "paragraph"


def clip(s: str, n: int = 200) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
