"""`python -m docverify arbiter --kind v5|cr_v2|decision` on the documents' own examples; bad
input → the project's JSON error and exit 2."""

import json

import pytest
from tests.docverify.test_cli import cli


def ex(repo_dir, name):
    return repo_dir / "include" / "examples" / "arbiters" / name


def test_v5_stays_the_default(repo_dir, tmp_path):
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([{"issue_id": "V2-0001", "agent": "V2", "severity": "MAJOR", "message": "m",
                              "code": "SEGMENT_SHARE_SUM", "auto_fixable": True}]))
    _, default, _ = cli(repo_dir, "arbiter", f, check_code=0)
    _, explicit, _ = cli(repo_dir, "arbiter", "--kind", "v5", f, check_code=0)
    assert default == explicit and (default["decision"], default["rule"]) == ("AUTO_RETRY", 5)


@pytest.mark.slow
def test_cr_v2_examples(repo_dir):
    _, out, _ = cli(repo_dir, "arbiter", "--kind", "cr_v2", ex(repo_dir, "cr_v2_votes.json"), check_code=0)
    got = {k: (r["final_action"], r["flag_reason"], r["rule"]) for k, r in out["results"].items()}
    assert got == {
        "rule1_majority": ("DROP", None, 1),
        "rule1_facet_minority": ("FLAG", "FACET_MINORITY_SIGNAL", 1),
        "rule2_all_different": ("FLAG", "POLARITY_UNCERTAIN", 2),
        "rule2_granularity": ("FLAG", "REDUNDANT_REF_UNCERTAIN", 2),
        "rule2_doc_example_2flip_1keep": ("FLIP", None, 1),
        "rule3_flip_structural": ("FLIP", None, 3),
        "rule3_drop_justified": ("DROP", None, 3),
        "rule3_tie": ("FLAG", "TIE_UNRESOLVED", 3),
        "rule3_tie_granularity": ("FLAG", "REDUNDANT_REF_UNCERTAIN", 3),
        "rule4_merge": ("KEEP", None, 1),
    }
    assert out["results"]["rule4_merge"]["merged"] == ["A"]
    _, v1, _ = cli(repo_dir, "arbiter", "--kind", "cr_v2", "--cr-version", "v1", ex(repo_dir, "cr_v2_votes.json"),
                   check_code=0)
    assert v1["version"] == "v1"
    assert v1["results"]["rule1_facet_minority"]["final_action"] == "DROP"
    assert v1["results"]["rule3_drop_justified"]["flag_reason"] == "TIE_UNRESOLVED"


def test_decision_example_without_model_is_the_fallback(repo_dir):
    _, out, _ = cli(repo_dir, "arbiter", "--kind", "decision", ex(repo_dir, "decision_block.json"), check_code=0)
    d = out["decision"]
    assert (d["decision"], d["confidence"], out["decision_arbiter"]["path"]) == ("BLOCK", 0.8, "fallback")
    assert d["citations_internal"] == [{"policy_id": "FP-01", "text": "Transacciones nocturnas > 3x promedio"}]
    assert d["citations_external"] == [{"source": "merchant_watchlist", "detail": "Confidence: 0.85"}]
    assert d["explanation_audit"].startswith("DECISIÓN: BLOCK (confianza: 0.80) | Riesgo compuesto: 72.0/100 (high)")


@pytest.mark.parametrize("kind, content, code", [
    ("cr_v2", {"actions_by_tuple": {"t": {"A": "KEEP", "B": "KEEP"}}}, "INVALID_VOTES"),
    ("cr_v2", {"actions_by_tuple": {"t": {"A": "KEEP", "B": "KEEP", "C": "NOPE"}}}, "INVALID_VOTES"),
    ("cr_v2", [1, 2], "INVALID_VOTES"),
    ("decision", {"transaction": {"transaction_id": "T"}}, "INVALID_DECISION_INPUT"),
    ("decision", {"transaction": {"transaction_id": "T"}, "evidence": {"composite_risk_score": 500,
                                                                      "risk_category": "low"}}, "INVALID_DECISION_INPUT"),
    ("decision", "not json", "INVALID_JSON"),
])
def test_bad_input_is_a_json_error_exit_2(repo_dir, tmp_path, kind, content, code):
    f = tmp_path / "in.json"
    f.write_text(content if isinstance(content, str) else json.dumps(content))
    rc, out, _ = cli(repo_dir, "arbiter", "--kind", kind, f)
    assert rc == 2 and out["error"] == code and out["file"] == str(f) and out["message"]
