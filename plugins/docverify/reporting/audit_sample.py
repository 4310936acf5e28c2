"""The nightly audit of accepted documents (ADR 0023): which accepts an SME looks at again, and
what their answers say about the false-accept rate. Pure: no I/O, no Airflow.

Sampling (:func:`draw_sample`)
    Poisson sampling with unequal probabilities. Each accepted document gets the weight
    ``1.5 - confidence`` (its classifier confidence clipped to [0, 1], so weights lie in
    [0.5, 1.5]: the least confident document is three times as likely to be drawn as a fully
    confident one). The inclusion probabilities are the weights scaled so they sum to
    ``rate × N`` (the expected sample size), capped at 1 (the excess is spread over the others).
    Each document is then drawn independently with its probability, from a random generator
    seeded with ``sha256("audit:" + ds)``: a re-run of the night over the same accepts draws the
    same sample. When the draw is empty but a document was accepted, one document is drawn with
    probability ∝ its inclusion probability (same seed). The probabilities returned are the exact
    first-order inclusion probabilities of this two-step design,
    ``π'_i = π_i + P(empty) · π_i / Σπ`` with ``P(empty) = Π(1 - π_j)``, so the weighted estimate
    below stays unbiased.

Estimate (:func:`false_accept_estimate`)
    Each audited document is weighted ``1/π'`` (Horvitz–Thompson); the false-accept rate is the
    weighted share of audited documents the SME corrected (the Hájek ratio form of the HT
    estimator: Σ y/π / Σ 1/π — it needs no population size, so it also serves a document type
    or several nights pooled). The 95 % interval is **Wilson's** score interval computed on the
    *effective* sample size ``n_eff = (Σw)² / Σw²`` (Kish) with ``k = rate × n_eff``: with equal
    weights it is exactly the Wilson interval of k corrected out of n audited; unequal weights
    shrink n_eff and widen the interval accordingly.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import JsonValue
from typing_extensions import TypedDict

from docverify.domain.classification_view import ClassificationView, Number

DEFAULT_RATE = 0.02
CONFIDENCE_OFFSET = 1.5
#: Issue codes of an accepted document that make it count as the least confident one (confidence 0, the
#: largest weight): the independent reading leaned to another type on a text unlike its training material
#: and abstained — the accept rests on the classifier alone.
UNSURE_CODES = frozenset({"INDEPENDENT_READING_ABSTAINS"})


def seed_of(ds: str) -> int:
    """The night's seed: the first 16 hex digits of ``sha256("audit:" + ds)``."""
    return int(hashlib.sha256(f"audit:{ds}".encode()).hexdigest()[:16], 16)


def inclusion_probabilities(confidences: Sequence[float], rate: float) -> list[float]:
    """π_i ∝ (1.5 − confidence_i), scaled to sum to ``rate × N``, capped at 1 (the capped
    documents' excess spread over the others until none exceeds 1)."""
    n = len(confidences)
    if n == 0 or rate <= 0:
        return [0.0] * n
    weights = [CONFIDENCE_OFFSET - min(1.0, max(0.0, float(c))) for c in confidences]
    target = min(float(n), rate * n)
    probs = [0.0] * n
    free = set(range(n))
    remaining = target
    while free:
        total = sum(weights[i] for i in free)
        capped = {i for i in free if remaining * weights[i] / total >= 1.0}
        if not capped:
            for i in free:
                probs[i] = remaining * weights[i] / total
            break
        for i in capped:
            probs[i] = 1.0
        free -= capped
        remaining -= len(capped)
        if remaining <= 0:
            break
    return probs


def draw_sample(ds: str, accepted: Iterable[tuple[str, float]], rate: float = DEFAULT_RATE
                ) -> list[tuple[str, float]]:
    """The night's audit sample among ``accepted`` ``(doc_id, classifier confidence)``:
    ``[(doc_id, inclusion probability)]`` in doc-id order. Reproducible for the same ``ds`` and
    accepts, at least one document when any was accepted and ``rate`` > 0, none when ``rate`` is 0
    (the module docstring says how)."""
    docs = sorted({d: c for d, c in accepted}.items())
    if not docs or rate <= 0:
        return []
    if rate > 1:
        raise ValueError(f"audit rate {rate!r}: give a share in [0, 1] (0 = no audit)")
    pis = inclusion_probabilities([c for _, c in docs], rate)
    p_empty = math.prod(1.0 - p for p in pis)
    total = sum(pis)
    exact = [p + p_empty * p / total for p in pis]
    rng = random.Random(seed_of(ds))
    chosen = [i for i, p in enumerate(pis) if rng.random() < p]
    if not chosen:
        pick, acc = rng.random() * total, 0.0
        for i, p in enumerate(pis):
            acc += p
            if pick < acc:
                chosen = [i]
                break
        else:
            chosen = [len(pis) - 1]
    return [(docs[i][0], min(1.0, exact[i])) for i in chosen]


def wilson_interval(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of ``k`` successes out of ``n`` (both may be fractional: an
    effective count); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, k / n))
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


class EstimateJSON(TypedDict):
    """:meth:`Estimate.as_dict`."""

    rate: float | None
    ci95: list[float]
    n: int
    corrected: int
    n_effective: float
    interval: str
    weighting: str


@dataclass(frozen=True)
class Estimate:
    """A weighted false-accept estimate: ``rate`` (None when nothing was audited), its 95 %
    Wilson interval on the effective n, the audited count ``n``, the corrected count ``k`` and
    ``n_eff``."""

    rate: float | None
    low: float
    high: float
    n: int
    k: int
    n_eff: float

    def as_dict(self) -> EstimateJSON:
        return {"rate": self.rate, "ci95": [self.low, self.high], "n": self.n, "corrected": self.k,
                "n_effective": round(self.n_eff, 3), "interval": "wilson on the effective n (Kish)",
                "weighting": "horvitz-thompson 1/inclusion probability (hajek ratio)"}

    def show(self) -> str:
        if self.rate is None:
            return "n/a (n=0 audited)"
        return (f"{100 * self.rate:.1f}% (95% CI {100 * self.low:.1f}–{100 * self.high:.1f}%, "
                f"{self.k} corrected of n={self.n} audited)")


def false_accept_estimate(audits: Iterable[tuple[bool, float]], z: float = 1.96) -> Estimate:
    """``audits``: ``(corrected, inclusion probability)`` per answered audit. The weighted share
    corrected with its Wilson interval on the effective n (module docstring)."""
    items = [(bool(y), max(1e-9, float(p or 1.0))) for y, p in audits]
    if not items:
        return Estimate(None, 0.0, 1.0, 0, 0, 0.0)
    weights = [1.0 / p for _, p in items]
    sw, sw2 = sum(weights), sum(w * w for w in weights)
    rate = sum(w for (y, _), w in zip(items, weights, strict=True) if y) / sw
    n_eff = sw * sw / sw2
    low, high = wilson_interval(rate * n_eff, n_eff, z)
    return Estimate(rate, low, high, len(items), sum(y for y, _ in items), n_eff)


def sampling_confidence(classification: JsonValue, codes: Iterable[str]) -> float:
    """The confidence a document is drawn with: 0 when its final issues hold one of :data:`UNSURE_CODES`
    (weight 1.5, the most likely to be drawn), else :func:`classification_confidence`."""
    if UNSURE_CODES.intersection(codes):
        return 0.0
    return classification_confidence(_view(classification))


def _view(classification: JsonValue) -> ClassificationView:
    """A classification as stored (raw JSON), read once (none: an empty one)."""
    return ClassificationView.read(classification if isinstance(classification, dict) else None) or ClassificationView()


def classification_confidence(classification: ClassificationView) -> float:
    """The classifier's confidence in a classification: ``self_evaluation.confidence`` when
    set (> 0), else the confidence of the dominant type in the segments that carry it (their
    mean), else 0.5 (also for a classification that is no JSON object)."""
    conf = classification.self_evaluation.confidence if classification.self_evaluation else None
    if conf is not None and conf > 0:
        return min(1.0, float(conf))
    dominant = classification.dominant_type_overall
    found = [float(c.confidence) for s in classification.segments for c in s.classifications
             if c.doc_type == dominant and c.confidence is not None]
    return min(1.0, max(0.0, sum(found) / len(found))) if found else 0.5


def _shape(cls: ClassificationView) -> list[tuple[Number | None, Number | None]]:
    """The page ranges of a classification's segments."""
    return [(s.page_start, s.page_end) for s in cls.segments]


def error_kinds(accepted: JsonValue, corrected: JsonValue) -> list[str]:
    """What an SME's correction of an accepted classification (both as stored) changed: ``type`` (the
    dominant type, or a segment's type), ``boundary`` (the segments' page ranges), ``evidence``
    (neither: presence levels, mixture or evidence)."""
    a, c = _view(accepted), _view(corrected)
    kinds = []
    seg_types = [s.dominant_type for s in a.segments]
    new_types = [s.dominant_type for s in c.segments]
    if _shape(a) != _shape(c):
        kinds.append("boundary")
    if a.dominant_type_overall != c.dominant_type_overall or (_shape(a) == _shape(c) and seg_types != new_types):
        kinds.append("type")
    return kinds or ["evidence"]
