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
MAJOR, not fixable: a person decides), naming both labels and the probability; a run at a segment's start
or end read at least at the boundary threshold is ``SEGMENT_BOUNDARY_MISPLACED`` (fixable: split there), and
a reading of a clinical type on a text unlike the training material abstains (ADR 0049). The thresholds are
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from docverify.domain.codes import make_issue
from docverify.domain.models import DOC_TYPES, ClassificationOutput, DocumentBundle, Issue, Page, Segment
from docverify.domain.resources import include_dir
from docverify.verify.common import page_runs, page_span, seg_loc, segment_text

if TYPE_CHECKING:  # numpy is imported where a model is loaded, not when the verifiers are (DAG parse time)
    import numpy as np

#: The artefact, relative to ``include/``.
ARTEFACT = "models/independent_reader.npz"
#: Hashed feature space (2**20 buckets: collisions are rare at the vocabulary sizes of the corpora).
N_BUCKETS = 1 << 20
#: A page (or segment) with at least this many letters is read against the page (segment) threshold; one
#: with fewer, down to SHORT_MIN_LETTERS, against the short-text threshold (a cover sheet, a signature
#: block); down to TINY_MIN_LETTERS against the tiny-text threshold (a report's last lines, a form's few
#: labels); below that it is not read at all (a blank page, a page number).
MIN_PAGE_LETTERS = 400
SHORT_MIN_LETTERS = 100
TINY_MIN_LETTERS = 40
_TOKEN = re.compile(r"[a-z][a-z0-9]+")
_LETTERS = re.compile(r"[A-Za-z]")
OTHER = "Other"


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
    tiny_threshold: float
    #: a run of pages at a segment's edge read as another type at least this surely is a boundary to move
    #: (``SEGMENT_BOUNDARY_MISPLACED``, fixed without a person); below it a person decides
    boundary_threshold: float
    #: a text whose familiarity is below this (a page or segment of MIN_PAGE_LETTERS letters or more) or below
    #: ``novelty_short_threshold`` (a shorter one) is unlike the training material: a reading of a clinical
    #: type on it abstains
    novelty_threshold: float
    novelty_short_threshold: float
    #: the k-means centroids of the training samples, sparse, sorted by column: (column, centroid, value)
    centroid_cols: np.ndarray  # int64, sorted
    centroid_rows: np.ndarray  # int64
    centroid_vals: np.ndarray  # float32
    digest: str

    def threshold(self, text: str, *, whole: bool) -> float | None:
        """The probability another type needs to be reported on ``text`` (a segment's whole text when
        ``whole``, else a page), by its length; None: too short to read."""
        return self.limit(letters(text), whole=whole)

    def limit(self, n: int, *, whole: bool) -> float | None:
        """:meth:`threshold` of a text of ``n`` letters."""
        if n >= MIN_PAGE_LETTERS:
            return self.segment_threshold if whole else self.page_threshold
        if n >= SHORT_MIN_LETTERS:
            return self.short_threshold
        return self.tiny_threshold if n >= TINY_MIN_LETTERS else None

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

    def familiarity(self, text: str) -> float:
        """How much ``text`` looks like the material the reader was trained on: the best cosine of its
        tf-idf vector with a centroid of the training samples (0: nothing in common; 1: a centroid)."""
        cols, vals = self.vector(text)
        return self._familiarity(cols, vals)

    def _familiarity(self, cols: np.ndarray, vals: np.ndarray) -> float:
        import numpy as np

        if len(cols) == 0:
            return 0.0
        order = np.argsort(cols)
        cols, vals = cols[order], vals[order]
        hit = np.isin(self.centroid_cols, cols, assume_unique=False)
        if not hit.any():
            return 0.0
        at = np.searchsorted(cols, self.centroid_cols[hit])
        sims = np.bincount(self.centroid_rows[hit], weights=self.centroid_vals[hit].astype(np.float64) * vals[at])
        return float(sims.max())

    def read(self, text: str, n_letters: int | None = None) -> Reading:
        """``text`` read: its probabilities now, its familiarity from the same vector when asked (it costs
        more than the probabilities and is needed only where the reading disagrees). ``n_letters``: its
        letter count, when the caller has it."""
        cols, vals = self.vector(text)
        return Reading(self._probabilities(cols, vals), letters(text) if n_letters is None else n_letters,
                       self, cols, vals)

    def probabilities(self, text: str) -> dict[str, float]:
        """P(type | text) over the five types."""
        cols, vals = self.vector(text)
        return self._probabilities(cols, vals)

    def _probabilities(self, cols: np.ndarray, vals: np.ndarray) -> dict[str, float]:
        import numpy as np

        logits = self.intercept.astype(np.float64) + self.coef[:, cols].astype(np.float64) @ vals
        logits -= logits.max()
        p = np.exp(logits)
        p /= p.sum()
        return {c: float(v) for c, v in zip(self.classes, p, strict=True)}


@dataclass(frozen=True, eq=False)
class Reading:
    """One text as ``reader`` read it: P(type | text), its letter count, and how familiar it is
    (:meth:`Reader.familiarity`, computed from the text's vector on first use)."""

    probs: dict[str, float]
    letters: int
    reader: Reader = field(repr=False)
    cols: np.ndarray = field(repr=False)
    vals: np.ndarray = field(repr=False)

    @functools.cached_property
    def familiarity(self) -> float:
        return self.reader._familiarity(self.cols, self.vals)

    @property
    def novelty_threshold(self) -> float:
        r = self.reader
        return r.novelty_threshold if self.letters >= MIN_PAGE_LETTERS else r.novelty_short_threshold

    def abstains(self, read_as: str) -> bool:
        """Whether a reading of ``read_as`` on this text is withheld: a clinical type read on a text less
        familiar than its length class's threshold. "Other" is the open class (a text unlike the reports the
        reader learned from is evidence for it): a reading of Other never abstains."""
        return read_as != OTHER and self.familiarity < self.novelty_threshold


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
    missing = {"tiny_threshold", "boundary_threshold", "novelty_threshold", "novelty_short_threshold", "centroid_rows",
               "centroid_cols", "centroid_vals"} - set(data)
    if missing:
        raise ReaderUnavailable(f"{p} has no {', '.join(sorted(missing))} (an older artefact): rebuild it with "
                                "`make independent-reader`")
    order = np.argsort(data["centroid_cols"], kind="stable")
    return Reader(buckets=data["buckets"].astype(np.int64), idf=data["idf"].astype(np.float32),
                  coef=data["coef"].astype(np.float32), intercept=data["intercept"].astype(np.float32),
                  classes=classes, segment_threshold=float(data["segment_threshold"]),
                  page_threshold=float(data["page_threshold"]), short_threshold=float(data["short_threshold"]),
                  tiny_threshold=float(data["tiny_threshold"]),
                  boundary_threshold=float(data["boundary_threshold"]),
                  novelty_threshold=float(data["novelty_threshold"]),
                  novelty_short_threshold=float(data["novelty_short_threshold"]),
                  centroid_cols=data["centroid_cols"].astype(np.int64)[order],
                  centroid_rows=data["centroid_rows"].astype(np.int64)[order],
                  centroid_vals=data["centroid_vals"].astype(np.float32)[order],
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
    per segment (the whole segment) or per run of pages (a part of it):

    * ``SEGMENT_BOUNDARY_MISPLACED`` (MAJOR, fixable: the segment is split there and verified again) — a run
      of pages at the start or the end of a multi-page segment, not all of it, read as another type at least
      at the boundary threshold: a form or a report absorbed into its neighbour;
    * ``INDEPENDENT_READING_DISAGREES`` (MAJOR, a person decides) — the whole segment, an edge run below the
      boundary threshold, or a run inside it (neither its first nor its last page) read at least at the
      boundary threshold: another document inside a segment means two boundaries, so it needs the surer
      reading a split needs (ADR 0067; a report's appendix or methods page reads weakly as Other);
    * ``INDEPENDENT_READING_ABSTAINS`` (MINOR) — instead of either, when the text read is unlike the reader's
      training material (familiarity under its novelty threshold): the reading cannot tell "another type"
      from "never seen", so it says so; the document is accepted if nothing else stops it, and weighted up
      in the night's audit sample."""
    r = reader or default_reader()
    issues: list[Issue] = []
    pages_by_num = {p.page_num: p for p in bundle.pages}
    for seg in cls.segments:
        own = seg.dominant_type
        base = {"segment_index": seg.segment_index, "labelled": own, "implementation": r.implementation}
        text = segment_text(bundle, seg)
        n = letters(text)
        limit = r.limit(n, whole=True)
        if limit is not None:
            reading = r.read(text, n)
            other, p_other = _best_other(reading.probs, own)
            if p_other >= limit and p_other > reading.probs[own]:
                issues.append(_segment_issue(seg, own, other, p_other, reading, base))
                continue
        if seg.page_end > seg.page_start:
            issues += _page_issues(seg, own, pages_by_num, r, base)
    return issues


def _read_how(reading: Reading) -> dict[str, object]:
    return {"familiarity": round(reading.familiarity, 4), "novelty_threshold": reading.novelty_threshold}


def _abstains(seg: Segment, own: str, other: str, p: float, pages: tuple[int, int], familiarity: float,
              threshold: float, base: dict[str, object]) -> Issue:
    where = page_span(*pages)
    return make_issue(
        "INDEPENDENT_READING_ABSTAINS",
        f"Segment {seg.segment_index} is labelled {own}; a reading of its {where} made without the classifier's "
        f"labels leans to {other} (probability {p:.2f}), but the text is unlike the material it was trained on "
        f"(familiarity {familiarity:.2f} < {threshold:.2f}): it abstains",
        agent="V2", location=f"{seg_loc(seg)}.dominant_type",
        suggested_fix="Nothing to fix automatically: the document is weighted up in the night's audit sample",
        details={**base, "read_as": other, "probability": round(p, 4), "pages": list(pages),
                 "familiarity": round(familiarity, 4), "novelty_threshold": threshold},
    )


def _segment_issue(seg: Segment, own: str, other: str, p_other: float, reading: Reading,
                   base: dict[str, object]) -> Issue:
    if reading.abstains(other):
        return _abstains(seg, own, other, p_other, (seg.page_start, seg.page_end), reading.familiarity,
                         reading.novelty_threshold, base)
    return make_issue(
        "INDEPENDENT_READING_DISAGREES",
        f"Segment {seg.segment_index} is labelled {own}, but a reading of its text made without the "
        f"classifier's labels finds {other} (probability {p_other:.2f}; {own} {reading.probs[own]:.2f})",
        agent="V2", location=f"{seg_loc(seg)}.dominant_type",
        suggested_fix=f"Check the segment's type: {other} or {own}?",
        details={**base, "read_as": other, "probability": round(p_other, 4),
                 "labelled_probability": round(reading.probs[own], 4),
                 "pages": [seg.page_start, seg.page_end], **_read_how(reading)},
    )


def _page_issues(seg: Segment, own: str, pages_by_num: dict[int, Page], r: Reader,
                 base: dict[str, object]) -> list[Issue]:
    """The pages of a multi-page segment read one by one: runs of pages read as another type."""
    foreign: dict[int, tuple[str, float, Reading]] = {}  # page → (type read, probability, the reading)
    for num in range(seg.page_start, seg.page_end + 1):
        page = pages_by_num.get(num)
        n = letters(page.text) if page is not None else 0
        page_limit = r.limit(n, whole=False)
        if page is None or page_limit is None:
            continue
        reading = r.read(page.text, n)
        t, p = _best_other(reading.probs, own)
        if p >= page_limit and p > reading.probs[own]:
            foreign[num] = (t, p, reading)
    issues: list[Issue] = []
    familiar = [(num, f[0]) for num, f in foreign.items() if not f[2].abstains(f[0])]
    unfamiliar = [(num, f[0]) for num, f in foreign.items() if f[2].abstains(f[0])]
    for t, a, b in page_runs(familiar):
        p = min(foreign[num][1] for num in range(a, b + 1))  # the run's lowest probability
        if a > seg.page_start and b < seg.page_end and p < r.boundary_threshold:
            continue  # a run inside a segment needs two boundaries: it must read as surely as a split (ADR 0067)
        fam = min(foreign[num][2].familiarity for num in range(a, b + 1))
        pages = page_span(a, b)
        how = {"familiarity": round(fam, 4),
               "novelty_threshold": min(foreign[num][2].novelty_threshold for num in range(a, b + 1))}
        at_edge = (a == seg.page_start) != (b == seg.page_end)
        if at_edge and p >= r.boundary_threshold:
            split = b + 1 if a == seg.page_start else a
            issues.append(make_issue(
                "SEGMENT_BOUNDARY_MISPLACED",
                f"Segment {seg.segment_index} is labelled {own}, but its {pages} at its "
                f"{'start' if a == seg.page_start else 'end'} read as {t} in a reading made without the "
                f"classifier's labels (probability ≥ {p:.2f}): another document begins on page {split}?",
                agent="V2", location=f"{seg_loc(seg)} → {t}",
                suggested_fix=f"Split segment {seg.segment_index}: {pages} as a {t} segment of its own",
                details={**base, "read_as": t, "probability": round(p, 4), "pages": [a, b],
                         "boundary_threshold": r.boundary_threshold, **how},
            ))
            continue
        issues.append(make_issue(
            "INDEPENDENT_READING_DISAGREES",
            f"Segment {seg.segment_index} is labelled {own}, but its {pages} read as {t} in a reading made "
            f"without the classifier's labels (probability ≥ {p:.2f}): another document in this segment, or "
            f"a boundary off?",
            agent="V2", location=f"{seg_loc(seg)} → {t}",
            suggested_fix=f"Check the segment's boundaries: {pages} may be a {t} of its own",
            details={**base, "read_as": t, "probability": round(p, 4), "pages": [a, b], **how},
        ))
    for t, a, b in page_runs(unfamiliar):
        p = min(foreign[num][1] for num in range(a, b + 1))
        fam = max(foreign[num][2].familiarity for num in range(a, b + 1))
        limit = max(foreign[num][2].novelty_threshold for num in range(a, b + 1))
        issues.append(_abstains(seg, own, t, p, (a, b), fam, limit, base))
    return issues
