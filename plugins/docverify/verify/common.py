"""Helpers shared by the verifiers: text normalisation and fuzzy look-ups, locations."""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterator

from rapidfuzz import fuzz

from docverify.models import PRESENCE_RANK, ClassificationOutput, Segment, TypeClassification

#: V3's judgment phase reads only the start of the document (spec slide 5).
V3_CONTEXT_CHARS = 4000

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
_QUOTES = {ord("\u2018"): "'", ord("\u2019"): "'", ord("\u201c"): '"', ord("\u201d"): '"'}
_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for every text comparison
    (NFKC, casefold, unified dashes and quotes, soft hyphens removed, runs of whitespace → one
    space)."""
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "")
    text = text.translate(_DASHES).translate(_QUOTES).casefold()
    return _WS.sub(" ", text).strip()


@functools.lru_cache(maxsize=4096)
def _norm_cached(text: str) -> str:
    return normalise(text)


def contains(haystack: str, needle: str, *, threshold: float = 90.0, fuzzy_min_chars: int = 12) -> bool:
    """Is ``needle`` in ``haystack`` after normalisation, tolerating OCR noise?

    Exact substring first; then, for needles of at least ``fuzzy_min_chars`` characters,
    rapidfuzz's ``partial_ratio`` (best-aligned window) must reach ``threshold``. Short needles
    must match exactly: a fuzzy match of three letters means nothing.
    """
    n = _norm_cached(needle)
    if not n:
        return False
    h = _norm_cached(haystack)
    if n in h:
        return True
    if len(n) < fuzzy_min_chars or not h:
        return False
    return fuzz.partial_ratio(n, h, score_cutoff=threshold) >= threshold


def is_number(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def seg_loc(seg: Segment) -> str:
    return f"segments[{seg.segment_index}]"


def type_loc(seg: Segment, tc: TypeClassification) -> str:
    return f"segments[{seg.segment_index}] → {tc.doc_type}"


def iter_type_entries(cls: ClassificationOutput) -> Iterator[tuple[int, Segment, TypeClassification]]:
    """(position of the segment in the array, segment, type entry) for every entry."""
    for pos, seg in enumerate(cls.segments):
        for tc in seg.classifications:
            yield pos, seg, tc


def segment_text(bundle, seg: Segment) -> str:
    lo, hi = min(seg.page_start, seg.page_end), max(seg.page_start, seg.page_end)
    return "\n\n".join(p.text for p in bundle.pages if lo <= p.page_num <= hi)




def strongest_presence(cls: ClassificationOutput) -> dict[str, str]:
    """The strongest presence level of each type over the mixture and every segment."""
    out: dict[str, str] = {}
    levels = [(m.doc_type, m.presence_level) for m in cls.document_mixture]
    levels += [(tc.doc_type, tc.presence_level) for _, _, tc in iter_type_entries(cls)]
    for doc_type, level in levels:
        if PRESENCE_RANK[level] >= PRESENCE_RANK[out.get(doc_type, "NO_EVIDENCE")]:
            out[doc_type] = level
    return out


def primary_types(cls: ClassificationOutput) -> set[str]:
    """Types marked PRIMARY anywhere (a segment or the mixture)."""
    return {t for t, level in strongest_presence(cls).items() if level == "PRIMARY"}
