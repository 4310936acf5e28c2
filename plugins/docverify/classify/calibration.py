"""The offline classifier's confidence, calibrated (ADR 0035).

The classifier's raw document confidence (the page-weighted confidence of its segments' dominant types,
:func:`docverify.classify.offline.classify_offline` with ``calibrate=False``) is a score, not a
probability. :func:`calibrated` maps it to the probability that the dominant type is right by Platt
scaling, ``p = 1 / (1 + exp(-(a * raw + b)))``, with ``a`` and ``b`` fitted by
``scripts/calibrate_classifier.py`` on the tuning parts of the labelled corpora only and shipped in
``include/rules/classifier_calibration.json`` (a test checks the shipped figures equal a retrain).
"""

from __future__ import annotations

import functools
import math
from typing import Literal, NotRequired, TypedDict

from docverify.domain.resources import load_rule

RULE = "classifier_calibration"


class FittedOn(TypedDict):
    documents: int
    wrong: int


class Calibration(TypedDict):
    """``include/rules/classifier_calibration.json``: a Platt calibration and where it comes from."""

    version: str
    method: Literal["platt"]
    a: float
    b: float
    about: NotRequired[str]
    implementation: NotRequired[str]
    fitted_on: NotRequired[FittedOn]


class CalibrationError(ValueError):
    """``include/rules/classifier_calibration.json`` is not a Platt calibration."""


@functools.cache
def calibration() -> Calibration:
    """The shipped calibration (``include/rules/classifier_calibration.json``), checked."""
    cfg: Calibration = load_rule(RULE)
    if cfg.get("method") != "platt" or not all(isinstance(cfg.get(k), (int, float)) for k in ("a", "b")):
        raise CalibrationError(
            "include/rules/classifier_calibration.json must hold method 'platt' and numbers a and b: "
            "re-create it with `python scripts/calibrate_classifier.py --write`"
        )
    return cfg


def platt(raw: float, a: float, b: float) -> float:
    z = a * raw + b
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def calibrated(raw: float) -> float:
    """The probability that the classifier's dominant type is right, given its raw confidence."""
    cfg = calibration()
    return platt(raw, float(cfg["a"]), float(cfg["b"]))
