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
