"""A reading of the page text made without the classifier's labels, by a method that shares nothing
with the classifier: V2's independent second opinion (ADR 0038).

The offline classifier reads pages with a hand-written lexicon; a judge that reads them with the same
lexicon agrees with the classifier's own mistakes. This reader is a statistical text classifier — a
multinomial logistic regression over hashed word unigrams and bigrams (sublinear tf-idf, L2
normalised) — trained on labelled real texts of the tuning parts only (``scripts/train_independent_reader.py``,
``make independent-reader``). Its artefact ``include/models/independent_reader.npz`` holds numbers only
(bucket indices, idf weights, coefficients; no word, no text), is loaded from the repository without
network, and its content hash is part of the implementation id, so a retrained model is a new
implementation in every report and cache key.

:func:`disagreements` reads each segment (its whole text) and each of its pages without looking at
the classification, then compares: a segment that reads as another type, or a run of pages that read
as another type, with at least the calibrated probability, is ``INDEPENDENT_READING_DISAGREES`` (V2,
MAJOR, not fixable: a person decides), naming both labels and the probability. The thresholds are
calibrated on out-of-fold predictions of the tuning part (the training script writes them into the
artefact): a page or a segment of the type it is labelled with is flagged at most at the rate the
script reports.
"""

from __future__ import annotations

import functools
import hashlib
import math
import pathlib
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from docverify.domain.codes import make_issue
from docverify.domain.models import DOC_TYPES, ClassificationOutput, DocumentBundle, Issue
from docverify.domain.resources import include_dir
from docverify.verify.common import page_runs, page_span, seg_loc, segment_text

if TYPE_CHECKING:  # numpy is imported where a model is loaded, not when the verifiers are (DAG parse time)
    import numpy as np

#: The artefact, relative to ``include/``.
ARTEFACT = "models/independent_reader.npz"
#: Hashed feature space (2**20 buckets: collisions are rare at the vocabulary sizes of the corpora).
N_BUCKETS = 1 << 20
#: A page (or segment) with at least this many letters is read against the page (segment) threshold; one
#: with fewer, down to SHORT_MIN_LETTERS, against the stricter short-text threshold (a cover sheet, a
#: signature block); below that it is not read at all (a blank page, a page number).
MIN_PAGE_LETTERS = 400
SHORT_MIN_LETTERS = 100
_TOKEN = re.compile(r"[a-z][a-z0-9]+")
_LETTERS = re.compile(r"[A-Za-z]")


class ReaderUnavailable(RuntimeError):
    """The artefact is missing or unreadable (names the file and the fix)."""


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (a letter, then letters or digits: numbers alone carry no type)."""
    return _TOKEN.findall(text.lower())


def _bucket(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) & (N_BUCKETS - 1)


def features(text: str) -> Counter[int]:
    """Hashed unigram and bigram counts of ``text``."""
    toks = tokens(text)
    feats = [*toks, *(f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False))]
    return Counter(_bucket(f) for f in feats)


@dataclass(frozen=True)
class Reader:
    """The trained model: for each kept bucket its idf weight and one coefficient per class."""

    buckets: np.ndarray  # int64, sorted
    idf: np.ndarray  # float32, one per bucket
    coef: np.ndarray  # float32, (classes, buckets)
    intercept: np.ndarray  # float32, (classes,)
    classes: tuple[str, ...]
    segment_threshold: float
    page_threshold: float
    short_threshold: float
    digest: str

    def threshold(self, text: str, *, whole: bool) -> float | None:
        """The probability another type needs to be reported on ``text`` (a segment's whole text when
        ``whole``, else a page), by its length; None: too short to read."""
        n = letters(text)
        if n >= MIN_PAGE_LETTERS:
            return self.segment_threshold if whole else self.page_threshold
        return self.short_threshold if n >= SHORT_MIN_LETTERS else None

    @property
    def implementation(self) -> str:
        return f"{_ID_PREFIX}{self.digest[:12]}"

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(column indices, values) of ``text``'s sublinear tf-idf vector over the kept buckets, L2 normalised."""
        import numpy as np

        counts = features(text)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        cols = np.searchsorted(self.buckets, keys)
        cols = np.minimum(cols, len(self.buckets) - 1)
        kept = self.buckets[cols] == keys
        cols, tf = cols[kept], tf[kept]
        vals = (1.0 + np.log(tf)) * self.idf[cols]
        norm = math.sqrt(float(np.dot(vals, vals)))
        return cols, (vals / norm if norm > 0 else vals)

    def probabilities(self, text: str) -> dict[str, float]:
        """P(type | text) over the five types."""
        import numpy as np

        cols, vals = self.vector(text)
        logits = self.intercept.astype(np.float64) + self.coef[:, cols].astype(np.float64) @ vals
        logits -= logits.max()
        p = np.exp(logits)
        p /= p.sum()
        return {c: float(v) for c, v in zip(self.classes, p, strict=True)}


def load(path: pathlib.Path | str | None = None) -> Reader:
    """The reader of ``path`` (default: ``include/models/independent_reader.npz``)."""
    import numpy as np

    p = pathlib.Path(path) if path is not None else include_dir() / ARTEFACT
    try:
        raw = p.read_bytes()
        with np.load(p, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as exc:
        raise ReaderUnavailable(
            f"the independent reader's model {p} cannot be read ({type(exc).__name__}): rebuild it with "
            "`make independent-reader` (scripts/train_independent_reader.py)") from exc
    classes = tuple(str(c) for c in data["classes"])
    if set(classes) != set(DOC_TYPES):
        raise ReaderUnavailable(f"{p}: its classes {classes} are not the five document types; retrain it")
    return Reader(buckets=data["buckets"].astype(np.int64), idf=data["idf"].astype(np.float32),
                  coef=data["coef"].astype(np.float32), intercept=data["intercept"].astype(np.float32),
                  classes=classes, segment_threshold=float(data["segment_threshold"]),
                  page_threshold=float(data["page_threshold"]), short_threshold=float(data["short_threshold"]),
                  digest=hashlib.sha256(raw).hexdigest())


@functools.cache
def default_reader() -> Reader:
    """The repository's reader, loaded once per process."""
    return load()


def implementation_id(path: pathlib.Path | str | None = None) -> str:
    """The reader's implementation id from its artefact's bytes (hashed, not parsed: cheap at import);
    ``independent-reader-missing`` when there is none (the judgment then fails, never accepts)."""
    p = pathlib.Path(path) if path is not None else include_dir() / ARTEFACT
    try:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return "independent-reader-missing"
    return f"{_ID_PREFIX}{digest[:12]}"


_ID_PREFIX = "independent-reader-logreg-"


def letters(text: str) -> int:
    return len(_LETTERS.findall(text))


def _best_other(probs: dict[str, float], own: str) -> tuple[str, float]:
    other = max((t for t in probs if t != own), key=lambda t: probs[t])
    return other, probs[other]


def disagreements(bundle: DocumentBundle, cls: ClassificationOutput, reader: Reader | None = None) -> list[Issue]:
    """Each segment, and each page of it with enough text, read without the classification; a reading of
    another type than the segment's ``dominant_type`` with at least the calibrated probability is one issue
    per segment (the whole segment) or per run of pages (a part of it)."""
    r = reader or default_reader()
    issues: list[Issue] = []
    pages_by_num = {p.page_num: p for p in bundle.pages}
    for seg in cls.segments:
        own = seg.dominant_type
        text = segment_text(bundle, seg)
        limit = r.threshold(text, whole=True)
        if limit is None:
            continue
        probs = r.probabilities(text)
        other, p_other = _best_other(probs, own)
        base = {"segment_index": seg.segment_index, "labelled": own, "implementation": r.implementation}
        if p_other >= limit and p_other > probs[own]:
            issues.append(make_issue(
                "INDEPENDENT_READING_DISAGREES",
                f"Segment {seg.segment_index} is labelled {own}, but a reading of its text made without the "
                f"classifier's labels finds {other} (probability {p_other:.2f}; {own} {probs[own]:.2f})",
                agent="V2", location=f"{seg_loc(seg)}.dominant_type",
                suggested_fix=f"Check the segment's type: {other} or {own}?",
                details={**base, "read_as": other, "probability": round(p_other, 4),
                         "labelled_probability": round(probs[own], 4),
                         "pages": [seg.page_start, seg.page_end]},
            ))
            continue
        if seg.page_end <= seg.page_start:
            continue
        foreign: dict[int, tuple[str, float]] = {}  # page → (type read, probability)
        for num in range(seg.page_start, seg.page_end + 1):
            page = pages_by_num.get(num)
            page_limit = r.threshold(page.text, whole=False) if page is not None else None
            if page is None or page_limit is None:
                continue
            pp = r.probabilities(page.text)
            t, p = _best_other(pp, own)
            if p >= page_limit and p > pp[own]:
                foreign[num] = (t, p)
        for t, a, b in page_runs((num, read[0]) for num, read in foreign.items()):
            p = min(foreign[num][1] for num in range(a, b + 1))  # the run's lowest probability
            pages = page_span(a, b)
            issues.append(make_issue(
                "INDEPENDENT_READING_DISAGREES",
                f"Segment {seg.segment_index} is labelled {own}, but its {pages} read as {t} in a reading made "
                f"without the classifier's labels (probability ≥ {p:.2f}): another document in this segment, or "
                f"a boundary off?",
                agent="V2", location=f"{seg_loc(seg)} → {t}",
                suggested_fix=f"Check the segment's boundaries: {pages} may be a {t} of its own",
                details={**base, "read_as": t, "probability": round(p, 4), "pages": [a, b]},
            ))
    return issues

