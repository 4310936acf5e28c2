"""scripts/record_suite.py: the suite's figures read from a `make test` log, only from a green one."""

from __future__ import annotations

import pytest
from scripts.record_suite import main, parse, row

GREEN = """ruff ...
All checks passed!
Success: no issues found in 129 source files
........ [100%]
1583 passed, 8 deselected in 654.12s (0:10:54)
........ [100%]
8 passed, 1583 deselected in 902.40s (0:15:02)

real	26m40.532s
user	30m1.000s
"""


def test_a_green_log_gives_both_runs_and_the_wall():
    got = parse(GREEN)
    assert [r["counts"]["passed"] for r in got["runs"]] == [1583, 8]
    assert got["passed"] == 1591 and got["wall"] == pytest.approx(1600.532)
    assert row("2026-11-27", "abc1234", got) == (
        "| 2026-11-27 | abc1234 | 1,591 | 1,583 in 10 min 54 s | 8 in 15 min 02 s | 26 min 41 s |")


@pytest.mark.parametrize("bad", [
    GREEN.replace("8 passed, 1583 deselected", "1 failed, 7 passed, 1583 deselected"),
    "no tests ran in 0.50s\n",
    "ruff failed before pytest\n",
])
def test_a_failed_or_empty_run_is_not_recorded(bad, tmp_path, capsys, monkeypatch):
    with pytest.raises(ValueError):
        parse(bad)
    log = tmp_path / "make_test.log"
    log.write_text(bad)
    monkeypatch.setattr("sys.argv", ["record_suite.py", str(log), "--commit", "abc1234", "--no-write"])
    assert main() == 2
    assert "not recorded" in capsys.readouterr().err
