"""Airflow for the DAG tests: a private AIRFLOW_HOME (SQLite) made once per session, before any
Airflow import. The DAG runs in a subprocess (`airflow dags test`) so that its whole log can be
scanned, exactly as an operator would read it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_HOME = pathlib.Path(tempfile.mkdtemp(prefix="docverify-airflow-"))
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "PYTHONPATH": f"{REPO / 'plugins'}{os.pathsep}{REPO}",
}
os.environ.update(AIRFLOW_ENV)


def airflow_cmd(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    bindir = pathlib.Path(sys.executable).parent
    full_env = {**os.environ, **AIRFLOW_ENV, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    return subprocess.run([str(bindir / "airflow"), *args], env=full_env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.fixture(scope="session")
def airflow_db() -> pathlib.Path:
    proc = airflow_cmd("db", "migrate")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _HOME
