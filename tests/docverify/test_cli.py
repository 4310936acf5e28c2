"""`python -m docverify` end to end, in a subprocess, on the spec's worked examples."""

import json
import os
import subprocess
import sys

import pytest
from tests.packets import packet_file


def cli(repo_dir, *args, check_code=None):
    env = {**os.environ, "PYTHONPATH": f"{repo_dir / 'plugins'}"}
    env.pop("DOCVERIFY_MODEL", None)
    p = subprocess.run([sys.executable, "-m", "docverify", *map(str, args)], cwd=repo_dir, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    if check_code is not None:
        assert p.returncode == check_code, (p.stdout, p.stderr)
    return p.returncode, json.loads(p.stdout), p.stderr


def example(repo_dir, name):
    d = repo_dir / "include" / "examples" / name
    return d / "bundle.json", d / "classification.json"


def test_verify_spec_auto_retry_example(repo_dir, tmp_path):
    b, c = example(repo_dir, "spec_auto_retry")
    _, out, err = cli(repo_dir, "verify", "--bundle", b, "--classification", c, "--out", tmp_path, check_code=0)
    a0, a1 = out["attempts"]
    assert (a0["decision"]["decision"], a0["decision"]["rule"]) == ("AUTO_RETRY", 5)
    assert sorted((i["severity"], i["auto_fixable"]) for i in a0["issues"]) == \
        [("MAJOR", True), ("MAJOR", True), ("MINOR", False)]
    assert (a1["decision"]["decision"], out["final_decision"]) == ("AUTO_ACCEPT", "AUTO_ACCEPT")
    assert {f["codes"][0] for f in out["fixes_applied"]} == {"SEGMENT_SHARE_SUM", "MIXTURE_SHARE_SUM"}
    # the judgment phases that ran are named: the offline implementations
    impls = {r["implementation"] for r in a0["runs"] if r["phase"] == "judgment"}
    assert impls and all(i.startswith("offline-") for i in impls)
    # artifacts, the way the DAG writes them
    run = tmp_path / "runs" / "adhoc" / "doc2_6"
    for rel in ["bundle.json", "classification.json", "attempt_0/report.json", "attempt_0/v5_arbiter_decision.json",
                "attempt_1/v5_arbiter_decision.json"]:
        assert (run / rel).is_file(), rel
    accepted = json.loads((tmp_path / "accepted" / "adhoc" / "doc2_6.json").read_text())
    assert accepted["decision"]["rule"] == 6
    assert json.loads((run / "attempt_0/v5_arbiter_decision.json").read_text())["decision"] == "AUTO_RETRY"


def test_verify_spec_escalate_example(repo_dir, tmp_path):
    b, c = example(repo_dir, "spec_escalate")
    _, out, _ = cli(repo_dir, "verify", "--bundle", b, "--classification", c, "--out", tmp_path, check_code=0)
    assert (out["final_decision"], out["final_rule"], len(out["attempts"])) == ("ESCALATE_TO_SME", 1, 1)
    codes = [i["code"] for i in out["attempts"][0]["issues"]]
    assert "TRAP_ROUTINE_LAB_GENOMIC" in codes
    packet = json.loads(packet_file(tmp_path, "quest_cbc", ".json", night="adhoc").read_text())
    assert packet["review_status"] == "pending" and packet["issues_summary"][0]["severity"] == "BLOCKER"


def test_verify_fabricated_example(repo_dir):
    b, c = example(repo_dir, "spec_fabricated")
    _, out, _ = cli(repo_dir, "verify", "--bundle", b, "--classification", c, check_code=0)
    assert out["final_decision"] == "ESCALATE_TO_SME"
    assert "EVIDENCE_FABRICATED" in [i["code"] for i in out["attempts"][0]["issues"]]


def test_arbiter_command(repo_dir, tmp_path):
    issues = [{"issue_id": "V2-0001", "agent": "V2", "severity": "MAJOR", "message": "m", "code": "SEGMENT_SHARE_SUM",
               "auto_fixable": True}]
    f = tmp_path / "issues.json"
    f.write_text(json.dumps(issues))
    _, out, _ = cli(repo_dir, "arbiter", f, check_code=0)
    assert (out["decision"], out["rule"]) == ("AUTO_RETRY", 5)


@pytest.mark.slow
def test_classify_then_verify_round_trip(repo_dir, tmp_path):
    b, _ = example(repo_dir, "spec_auto_retry")
    _, cls, _ = cli(repo_dir, "classify", b, check_code=0)
    assert cls["classifier"].startswith("offline-")
    f = tmp_path / "c.json"
    f.write_text(json.dumps(cls))
    _, out, _ = cli(repo_dir, "verify", "--bundle", b, "--classification", f, check_code=0)
    assert out["attempts"][0]["decision"]["rule"] in (6, 7)  # the offline classifier's own output is consistent


@pytest.mark.parametrize("args,code", [
    (["verify", "--bundle", "missing.json", "--classification", "x.json"], "FILE_NOT_FOUND"),
    (["arbiter", "pyproject.toml"], "INVALID_JSON"),
    (["parse", "nope.pdf"], "FILE_NOT_FOUND"),
])
def test_input_errors_are_json_with_exit_code_2(repo_dir, args, code):
    rc, out, _ = cli(repo_dir, *args)
    assert rc == 2 and out["error"] == code and out["file"]


def test_parse_error_is_typed(repo_dir, tmp_path):
    f = tmp_path / "empty.pdf"
    f.write_bytes(b"")
    rc, out, _ = cli(repo_dir, "parse", f)
    assert rc == 2 and out["error"] == "EMPTY_FILE" and out["file"].endswith("empty.pdf")
