"""Calibrate the offline classifier's document confidence (ADR 0035).

Classifies every single document of the tuning parts (``docs/benchmarks/classifier_split.json``,
``classifier_split_large.json`` and, since offline-lexicon-v8, ``forms_split.json``: text_labeled +
text_labeled_more + text_labeled_large + forms_real) with the raw
confidence (``classify_offline(..., calibrate=False)``), and fits Platt scaling (a logistic regression
of "the dominant type is right" on the raw confidence, scikit-learn) on them. The test parts are never
read for the fit; ``--report`` scores confidence against correctness on them (AUROC, ECE in 10 equal
bins, Brier), raw and calibrated.

    python scripts/calibrate_classifier.py [--write] [--report] [--corpora DIR]

``--write`` stores ``include/rules/classifier_calibration.json``;
without it, prints the fit and whether it equals the shipped one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
for _p in (REPO / "plugins", REPO):  # direct runs without PYTHONPATH (scripts.support)
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from scripts.support.labelled_corpus import part_records as labelled_part_records  # noqa: E402

from docverify.classify.calibration import platt  # noqa: E402
from docverify.classify.offline import IMPLEMENTATION, classify_offline  # noqa: E402
from docverify.reporting.labelled_sample import to_bundle  # noqa: E402

OUT = REPO / "include" / "rules" / "classifier_calibration.json"
#: parameters are stored rounded, so that a retrain on another machine compares equal
DIGITS = 6
BINS = 10


def part_records(corpora: pathlib.Path, part: str) -> list[dict[str, Any]]:
    """The records of one part (``tune`` or ``test``) of both committed splits."""
    return labelled_part_records(corpora, REPO, part)


def raw_scores(records: list[dict[str, Any]]) -> tuple[list[float], list[int]]:
    """(raw confidence, 1 if the dominant type is right) per record."""
    xs, ys = [], []
    for r in records:
        out = classify_offline(to_bundle(r), calibrate=False)
        xs.append(out.self_evaluation.confidence)
        ys.append(int(out.dominant_type_overall == r["proposed_doc_type"]))
    return xs, ys


def fit(xs: list[float], ys: list[int]) -> tuple[float, float]:
    """Platt scaling: (a, b) of ``1 / (1 + exp(-(a x + b)))``, maximum likelihood (no regularisation)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, max_iter=10_000, tol=1e-10)
    model.fit([[x] for x in xs], ys)
    return round(float(model.coef_[0][0]), DIGITS), round(float(model.intercept_[0]), DIGITS)


def scores(ps: list[float], ys: list[int]) -> dict[str, float | None]:
    """AUROC (None when one class is missing), ECE over BINS equal-width bins, Brier score."""
    from sklearn.metrics import roc_auc_score

    n = len(ps)
    auroc = float(roc_auc_score(ys, ps)) if 0 < sum(ys) < n else None
    ece = 0.0
    for k in range(BINS):
        idx = [i for i, p in enumerate(ps) if (k / BINS <= p < (k + 1) / BINS) or (k == BINS - 1 and p == 1.0)]
        if idx:
            ece += len(idx) / n * abs(sum(ys[i] for i in idx) / len(idx) - sum(ps[i] for i in idx) / len(idx))
    brier = sum((p - y) ** 2 for p, y in zip(ps, ys, strict=True)) / n
    return {"auroc": auroc, "ece": ece, "brier": brier}


def calibration_record(corpora: pathlib.Path) -> dict[str, Any]:
    xs, ys = raw_scores(part_records(corpora, "tune"))
    a, b = fit(xs, ys)
    return {
        "version": f"platt-{IMPLEMENTATION}",
        "about": "Platt scaling of the offline classifier's raw document confidence (ADR 0035): "
                 "p(dominant type right) = 1 / (1 + exp(-(a * raw + b))). Fitted by scripts/calibrate_classifier.py "
                 "on the tuning parts of docs/benchmarks/classifier_split.json, classifier_split_large.json and "
                 "forms_split.json only.",
        "method": "platt",
        "implementation": IMPLEMENTATION,
        "a": a,
        "b": b,
        "fitted_on": {"documents": len(ys), "wrong": len(ys) - sum(ys)},
    }


def report(corpora: pathlib.Path, cal: dict[str, Any]) -> dict[str, Any]:
    """Confidence against correctness on each part, raw and calibrated (the test part: reported only)."""
    out: dict[str, Any] = {}
    for part in ("tune", "test"):
        xs, ys = raw_scores(part_records(corpora, part))
        cs = [platt(x, cal["a"], cal["b"]) for x in xs]
        wrong = [x for x, y in zip(xs, ys, strict=True) if not y]
        out[part] = {"documents": len(ys), "wrong": len(wrong), "raw": scores(xs, ys), "calibrated": scores(cs, ys),
                     "raw_of_wrong": sorted(round(x, 3) for x in wrong),
                     "raw_right_min": min((x for x, y in zip(xs, ys, strict=True) if y), default=None)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(REPO)}")
    ap.add_argument("--report", action="store_true", help="AUROC/ECE/Brier on both parts, raw and calibrated")
    args = ap.parse_args(argv)
    if args.corpora is None:
        from scripts.support.corpora import default_corpora_dir

        args.corpora = default_corpora_dir()
    cal = calibration_record(args.corpora)
    shipped = json.loads(OUT.read_text(encoding="utf-8")) if OUT.is_file() else None
    if args.write:
        OUT.write_text(json.dumps(cal, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"fit": cal, "equals_shipped": shipped == cal}, indent=2))
    if args.report:
        print(json.dumps(report(args.corpora, cal), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
