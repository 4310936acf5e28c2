"""The type checker stays clean: mypy over plugins/ and dags/ with the repository's configuration
([tool.mypy] in pyproject.toml), so ``make test`` fails when typing regresses. ``make lint`` and
``make test-fast`` run mypy directly (this test is slow: a cold cache takes about a minute)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_is_clean_over_plugins_and_dags():
    # the repository's config names the files (plugins, dags); the incremental cache is .mypy_cache/
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_whole_core_is_under_mypys_strict_checks():
    # ADR 0044: strict for every module of the Airflow-free core, not only some layers; ADR 0054: every
    # package of plugins/ (the Airflow side too), and no override relaxes a flag for one of its modules
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in conf.get("overrides", []) if o.get("disallow_untyped_defs")]
    packages = {"docverify", "docverify.*", "docverify_airflow", "docverify_airflow.*", "docverify_documentai",
                "docverify_documentai.*", "docverify_plugin"}
    assert any(packages <= set(o["module"]) for o in strict), strict
    relaxed = [o["module"] for o in conf.get("overrides", [])
               if any(v is False for k, v in o.items() if k != "module")]
    assert relaxed == [], relaxed
    core = next(o for o in strict if "docverify.*" in o["module"])
    for flag in ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                 "disallow_any_generics", "warn_return_any", "no_implicit_reexport", "strict_equality",
                 "warn_unused_ignores", "check_untyped_defs"):
        assert core.get(flag) is True, flag
