"""scripts/cv_intake.py: the tuning part's out-of-fold intake figures hold back whole sources — a form's
repository, a report's source group — so the reader of a fold has never read a packet's form or report."""

from __future__ import annotations

import pathlib
import sys
from collections import defaultdict

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cv(corpora_dir):
    for p in (str(REPO / "scripts"), str(REPO)):
        if p not in sys.path:
            sys.path.insert(0, p)
    import cv_intake

    return cv_intake


@pytest.fixture(scope="module")
def tune(cv, corpora_dir):
    return cv.e2e.part_records(corpora_dir, "tune")


def test_no_source_spans_two_folds_and_every_fold_holds_forms_and_every_type(cv, tune):
    folds_of = defaultdict(set)
    for r in tune:
        folds_of[cv.group_of(r)].add(cv.fold_of(cv.group_of(r), 3))
    assert all(len(f) == 1 for f in folds_of.values())
    assert len({cv.group_of(r) for r in tune if cv.ip.is_form(r)}) >= 20  # forms grouped by repository, not by form
    for k in range(3):
        held = [r for r in tune if cv.fold_of(cv.group_of(r), 3) == k]
        assert sum(cv.ip.is_form(r) for r in held) >= 10
        assert {r["proposed_doc_type"] for r in held if not cv.ip.is_form(r)} >= {
            "Clinical Note", "Pathology Report", "Genomic Report", "Radiology Report"}


def test_the_cached_reader_is_keyed_by_the_records_it_is_trained_on(cv, tune):
    assert cv.reader_key(tune) == cv.reader_key(list(reversed(tune)))
    assert cv.reader_key(tune) != cv.reader_key(tune[1:])


def test_the_cached_reader_is_keyed_by_the_code_it_is_trained_with_not_by_the_verifiers(cv, tune, monkeypatch):
    key = cv.reader_key(tune)
    monkeypatch.setattr(cv.ind, "MIN_PAGE_LETTERS", cv.ind.MIN_PAGE_LETTERS + 1)  # a length class moves: retrain
    assert cv.reader_key(tune) != key
    monkeypatch.undo()
    assert cv.reader_key(tune) == key
    assert b"def disagreements" not in cv.training_code()  # how the verifiers use a reading needs no retrain
