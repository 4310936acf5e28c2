"""An outage costs a wait, not a night of escalations (scripts/bench_outage.py, small): a tiny night
through the real stages with the LLM judge against the fake Gemini endpoint, once without and once
with an overload window (the real 503 UNAVAILABLE body, read from the shared corpora) — the same
route for every document, nothing marked VERIFICATION_INCOMPLETE / CLASSIFICATION_FAILED; and with
the waiting budget below the window, the judge raises ServiceOutage (the task fails, Airflow
retries it) instead of marking a document."""

from __future__ import annotations

import json

import pytest
from scripts.bench_outage import run_night
from tests.fake_gemini import overload_body

from docverify.llm.faults import ServiceOutage

# documents the classifier reads and V2–V4 judge: 4 requests each, 12 in all
NAMES = ["genomic_brca_ngs", "note_mts_19", "radiology_iu_101"]
FAST = {"names": NAMES, "initial_wait_s": 0.2, "max_backoff_s": 1.0}


def test_the_overload_body_is_the_recorded_one(corpora_dir):
    recorded = json.loads((corpora_dir / "realapi" / "errors" / "errors_from_issues.json").read_text())
    assert overload_body() == recorded["err_503_overloaded"]["body"]
    assert overload_body()["error"]["status"] == "UNAVAILABLE"


@pytest.mark.slow
def test_an_outage_within_the_budget_changes_no_route(tmp_path, corpora_dir):
    base = run_night(tmp_path / "base", **FAST)
    out = run_night(tmp_path / "outage", outage_s=3.0, after_requests=2, budget_s=30.0, **FAST)
    assert base.documents == out.documents == len(NAMES)
    assert out.overloaded > 0 and out.window_s == 3.0  # the window opened and refused requests
    assert out.openings >= 1 and out.probes >= 1  # ... enough of them to open the circuit breaker
    assert out.routes == base.routes
    assert (out.incomplete, out.classification_failed) == (base.incomplete, base.classification_failed) == (0, 0)
    # the outage was waited out: every call of the night without it was answered after all, some after the window
    assert out.requests - out.overloaded == base.requests
    assert out.first_served_after_s is not None


def test_an_outage_past_the_budget_fails_the_task_instead(tmp_path, corpora_dir):
    with pytest.raises(ServiceOutage, match="docverify_llm_throttle_wait_s"):
        run_night(tmp_path / "outage", outage_s=60.0, after_requests=2, budget_s=1.0, **FAST)
    # no document was marked for it: nothing the verify stage wrote names either code
    written = [p.read_text() for p in (tmp_path / "outage" / "runs").rglob("*.json")]
    assert not any("VERIFICATION_INCOMPLETE" in t or "CLASSIFICATION_FAILED" in t for t in written)
