"""Train V2's independent reader (``docverify.verify.independent``) on the tuning parts and calibrate its
thresholds; write ``include/models/independent_reader.npz``.

    python scripts/train_independent_reader.py [--corpora DIR] [--out FILE] [--check]

Data: the tuning parts only of ``text_labeled`` + ``text_labeled_more`` (``classifier_split.json``) and
``text_labeled_large`` (``classifier_split_large.json``). Each text gives training samples: the whole text,
its pages cut at 3,000 and at 1,500 characters, and two short parts as real PDFs have them — its opening
(300–1,200 characters: a cover, the head of a form) and its tail (80–400 characters: a signature block, a
disclaimer on a page of its own), lengths drawn per text with a seeded generator — so that a segment, a page
and a short page are all read as a night reads them; each labelled with the text's type.

Model: sublinear tf-idf over hashed word unigrams and bigrams (buckets seen in at least ``MIN_DF``
samples), multinomial logistic regression (scikit-learn, lbfgs, balanced class weights). Numbers only go
into the artefact: bucket indices, idf weights, coefficients, intercepts, the classes, the thresholds.

Thresholds: from out-of-fold probabilities (5 folds grouped by source document) of the tuning part — the
lowest probability at which a segment (the whole text), a page, or a short part (100–400 letters) of the
type it really is would be read as another type in at most ``TARGET_FALSE_ALARM`` of the texts; never
below ``MIN_THRESHOLD``.

``--check`` retrains and compares with the shipped artefact (exit 1 when they differ beyond rounding).
Deterministic: the same data and versions give the same artefact (coefficients rounded to 1e-4).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
from typing import Any

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO / "plugins") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins"))

from docverify.domain.labelled_corpus import part_records, source_group, split_pages  # noqa: E402
from docverify.domain.models import DOC_TYPES  # noqa: E402
from docverify.verify import independent as ind  # noqa: E402

MIN_DF = 3
C = 4.0
FOLDS = 5
TARGET_FALSE_ALARM = 0.01
MIN_THRESHOLD = 0.5
PAGE_CUTS = (3000, 1500)
#: the short parts: an opening of 300–1,200 characters and a tail of 80–400 (seeded per text)
OPENING_CHARS = (300, 1200)
TAIL_CHARS = (80, 400)
SEED = 38
DEFAULT_OUT = REPO / "include" / ind.ARTEFACT


def tune_records(corpora: pathlib.Path) -> list[dict[str, Any]]:
    return sorted(part_records(corpora, REPO, "tune"), key=lambda r: str(r["id"]))


def samples(records: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(text, label, group, kind) — kind ``whole`` or ``page``."""
    out = []
    for r in records:
        text = (r.get("text") or "").strip()
        if not text:
            continue
        group = source_group(r) if "corpus" in r else str(r["id"])
        out.append((text, r["proposed_doc_type"], group, "whole"))
        for cut in PAGE_CUTS:
            pages = split_pages(text, cut)
            if len(pages) > 1:
                out += [(p, r["proposed_doc_type"], group, "page") for p in pages]
        if len(text) > 2 * OPENING_CHARS[1]:
            rng = random.Random(f"{SEED}:{r['id']}")
            opening = text[: rng.randint(*OPENING_CHARS)].strip()
            tail = text[-rng.randint(*TAIL_CHARS):].strip()
            out += [(t, r["proposed_doc_type"], group, "page") for t in (opening, tail) if t]
    return out


def vectorise(counts: list, buckets: np.ndarray | None = None):
    """The samples' sublinear tf matrix (their hashed feature ``counts``) over ``buckets`` (chosen here by
    document frequency when None), the buckets and their document frequencies."""
    from scipy.sparse import csr_matrix

    if buckets is None:
        df: dict[int, int] = {}
        for c in counts:
            for k in c:
                df[k] = df.get(k, 0) + 1
        buckets = np.array(sorted(k for k, v in df.items() if v >= MIN_DF), dtype=np.int64)
    index = {int(b): i for i, b in enumerate(buckets)}
    rows, cols, vals = [], [], []
    for r, c in enumerate(counts):
        for k, v in c.items():
            j = index.get(k)
            if j is not None:
                rows.append(r)
                cols.append(j)
                vals.append(1.0 + np.log(v))
    tf = csr_matrix((vals, (rows, cols)), shape=(len(counts), len(buckets)), dtype=np.float64)
    df_kept = np.bincount(tf.indices, minlength=len(buckets))
    return tf, buckets, df_kept


def finish(tf, idf: np.ndarray):
    from sklearn.preprocessing import normalize

    return normalize(tf.multiply(idf).tocsr(), norm="l2")


def fit(X, y: list[str]):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, class_weight="balanced", max_iter=3000, solver="lbfgs")
    model.fit(X, y)
    return model


def out_of_fold(counts: list, labels: list[str], groups: list[str]) -> np.ndarray:
    """Out-of-fold probabilities (columns in DOC_TYPES order), each fold vectorised on its own training part."""
    from sklearn.model_selection import GroupKFold

    probs = np.zeros((len(counts), len(DOC_TYPES)))
    for train, held in GroupKFold(n_splits=FOLDS).split(counts, labels, groups):
        tf, buckets, df = vectorise([counts[i] for i in train])
        idf = np.log((1 + len(train)) / (1 + df)) + 1.0
        model = fit(finish(tf, idf), [labels[i] for i in train])
        tf_h, _, _ = vectorise([counts[i] for i in held], buckets)
        p = model.predict_proba(finish(tf_h, idf))
        order = [list(model.classes_).index(t) for t in DOC_TYPES]
        probs[held] = p[:, order]
    return probs


def threshold(scores: list[float]) -> float:
    """The lowest threshold at which at most TARGET_FALSE_ALARM of ``scores`` reach it."""
    s = sorted(scores, reverse=True)
    allowed = int(TARGET_FALSE_ALARM * len(s))
    t = s[allowed] + 1e-4 if allowed < len(s) else 0.0
    return round(max(MIN_THRESHOLD, t), 4)


def calibrate(data: list[tuple[str, str, str, str]], probs: np.ndarray) -> dict[str, Any]:
    """Per text: the highest out-of-fold probability of another type on its whole text, and on any of its
    pages that a night would read (≥ MIN_PAGE_LETTERS letters), where that type also beats its own."""
    whole: dict[str, float] = {}
    page: dict[str, float] = {}
    short: dict[str, float] = {}
    col = {t: i for i, t in enumerate(DOC_TYPES)}
    for (text, label, group, kind), p in zip(data, probs, strict=True):
        own = p[col[label]]
        other = max(p[col[t]] for t in DOC_TYPES if t != label)
        score = other if other > own else 0.0
        key = f"{group}|{label}"
        n = ind.letters(text)
        if kind == "whole" and n >= ind.MIN_PAGE_LETTERS:
            whole[key] = max(whole.get(key, 0.0), score)
        elif kind == "page" and n >= ind.MIN_PAGE_LETTERS:
            page[key] = max(page.get(key, 0.0), score)
        elif n >= ind.SHORT_MIN_LETTERS:
            short[key] = max(short.get(key, 0.0), score)
    seg_t = threshold(list(whole.values()))
    page_t = threshold(list(page.values()))
    short_t = threshold(list(short.values()))
    return {"segment_threshold": seg_t, "page_threshold": page_t, "short_threshold": short_t,
            "texts": len(whole), "segment_false_alarms": int(sum(v >= seg_t for v in whole.values())),
            "page_texts": len(page), "page_false_alarms": int(sum(v >= page_t for v in page.values())),
            "short_texts": len(short), "short_false_alarms": int(sum(v >= short_t for v in short.values()))}


def train(corpora: pathlib.Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    data = samples(tune_records(corpora))
    texts = [d[0] for d in data]
    labels = [d[1] for d in data]
    groups = [d[2] for d in data]
    counts = [ind.features(t) for t in texts]
    cal = calibrate(data, out_of_fold(counts, labels, groups))
    tf, buckets, df = vectorise(counts)
    idf = np.log((1 + len(texts)) / (1 + df)) + 1.0
    model = fit(finish(tf, idf), labels)
    order = [list(model.classes_).index(t) for t in DOC_TYPES]
    arrays = {
        "buckets": buckets.astype(np.int32),
        "idf": np.round(idf, 4).astype(np.float32),
        "coef": np.round(model.coef_[order], 4).astype(np.float32),
        "intercept": np.round(model.intercept_[order], 4).astype(np.float32),
        "classes": np.array(DOC_TYPES),
        "segment_threshold": np.array(cal["segment_threshold"]),
        "page_threshold": np.array(cal["page_threshold"]),
        "short_threshold": np.array(cal["short_threshold"]),
    }
    info = {**cal, "samples": len(texts), "buckets": int(len(buckets)),
            "labels": {t: labels.count(t) for t in DOC_TYPES}}
    return arrays, info


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray], tol: float = 2e-4) -> list[str]:
    """The arrays that differ (beyond rounding for the floats)."""
    diff = []
    for k in a:
        x, y = a[k], b.get(k)
        if y is None or x.shape != y.shape:
            diff.append(k)
        elif x.dtype.kind == "f":
            if not np.allclose(x, y, atol=tol, rtol=0):
                diff.append(k)
        elif not np.array_equal(x, y):
            diff.append(k)
    return diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="compare a retrain with the shipped artefact")
    args = ap.parse_args(argv)
    from docverify.domain.resources import default_corpora_dir

    arrays, info = train(args.corpora or default_corpora_dir())
    print(json.dumps(info, indent=1))
    if args.check:
        with np.load(args.out, allow_pickle=False) as z:
            shipped = {k: z[k] for k in z.files}
        diff = same(arrays, shipped)
        print("the shipped artefact equals a retrain" if not diff else f"DIFFERENT: {diff}")
        return 1 if diff else 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("wb") as fh:
        np.savez_compressed(fh, **arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
