"""The audit sample and the false-accept estimate (docverify.reporting.audit_sample, issue 21)."""

from __future__ import annotations

import random

import pytest

from docverify.reporting.audit_sample import (
    draw_sample,
    error_kinds,
    false_accept_estimate,
    inclusion_probabilities,
    wilson_interval,
)


def _population(seed: int = 7, n: int = 1000, errors: int = 30) -> tuple[list[tuple[str, float]], set[str]]:
    """1,000 accepts with confidences in [0.5, 1]; 3 % wrong, the wrong ones more often among the
    less confident (so an unweighted estimate would be biased)."""
    rng = random.Random(seed)
    docs = [(f"doc{i:04d}", rng.uniform(0.5, 1.0)) for i in range(n)]
    weights = [1.6 - c for _, c in docs]
    wrong: set[str] = set()
    while len(wrong) < errors:
        wrong.add(rng.choices(docs, weights=weights)[0][0])
    return docs, wrong


def test_sample_is_reproducible_and_at_least_one():
    docs, _ = _population()
    assert draw_sample("2026-01-05", docs, 0.02) == draw_sample("2026-01-05", list(reversed(docs)), 0.02)
    assert draw_sample("2026-01-05", docs, 0.02) != draw_sample("2026-01-06", docs, 0.02)
    assert draw_sample("2026-01-05", docs, 0.0) == []
    assert draw_sample("2026-01-05", [], 0.5) == []
    for k in range(50):  # a single accept at 2 %: still one audited, with its exact probability
        ((doc, p),) = draw_sample(f"night-{k}", [("only", 0.9)], 0.02)
        assert doc == "only" and p == pytest.approx(1.0)
    with pytest.raises(ValueError):
        draw_sample("2026-01-05", docs, 1.5)


def test_low_confidence_is_sampled_more():
    probs = inclusion_probabilities([0.0, 0.5, 1.0], 0.5)
    assert probs[0] > probs[1] > probs[2] and sum(probs) == pytest.approx(1.5)
    assert inclusion_probabilities([0.0, 1.0], 1.0) == [1.0, 1.0]  # capped
    docs, _ = _population()
    low = high = 0
    for k in range(200):
        for doc, _ in draw_sample(f"n{k}", docs, 0.05):
            conf = dict(docs)[doc]
            low += conf < 0.75
            high += conf >= 0.75
    assert low > 1.3 * high


def test_wilson_interval():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.161, abs=1e-3)
    low, high = wilson_interval(3, 100)
    assert low == pytest.approx(0.0103, abs=1e-3) and high == pytest.approx(0.0845, abs=1e-3)


def test_weighted_estimate():
    equal = false_accept_estimate([(True, 0.1)] * 3 + [(False, 0.1)] * 97)
    assert equal.rate == pytest.approx(0.03) and equal.n_eff == pytest.approx(100)
    assert (equal.low, equal.high) == pytest.approx(wilson_interval(3, 100))
    # a corrected document drawn with a small probability stands for more accepts
    est = false_accept_estimate([(True, 0.05), (False, 0.5), (False, 0.5)])
    assert est.rate == pytest.approx(20 / 24) and est.n == 3 and est.k == 1 and est.n_eff < 3
    assert false_accept_estimate([]).rate is None
    assert "n=0" in false_accept_estimate([]).show()


@pytest.mark.parametrize("rate", [0.02, 0.1])
def test_interval_covers_the_true_rate_of_a_simulated_population(rate):
    docs, wrong = _population()
    truth = len(wrong) / len(docs)
    draws, covered, total = 400, 0, 0.0
    for k in range(draws):
        sample = draw_sample(f"sim-{rate}-{k}", docs, rate)
        est = false_accept_estimate([(doc in wrong, p) for doc, p in sample])
        covered += est.low <= truth <= est.high
        total += est.rate
    assert covered / draws >= 0.90
    if rate == 0.1:  # the weighted estimate is unbiased (the mean over draws near the truth)
        assert total / draws == pytest.approx(truth, abs=0.008)


def test_error_kinds():
    accepted = {"dominant_type_overall": "Lab Report",
                "segments": [{"page_start": 1, "page_end": 2, "dominant_type": "Lab Report"}]}
    retyped = {"dominant_type_overall": "Clinical Note",
               "segments": [{"page_start": 1, "page_end": 2, "dominant_type": "Clinical Note"}]}
    split = {"dominant_type_overall": "Lab Report",
             "segments": [{"page_start": 1, "page_end": 1, "dominant_type": "Lab Report"},
                          {"page_start": 2, "page_end": 2, "dominant_type": "Clinical Note"}]}
    assert error_kinds(accepted, retyped) == ["type"]
    assert error_kinds(accepted, split) == ["boundary"]
    assert error_kinds(accepted, dict(accepted, document_mixture=[1])) == ["evidence"]
