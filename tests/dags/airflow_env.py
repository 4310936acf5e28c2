"""The private Airflow of the DAG tests: one AIRFLOW_HOME (SQLite) per test session, set
before any Airflow import. Imported by conftest.py and by the tests under one module name."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
_HOME = pathlib.Path(os.environ.get("DOCVERIFY_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="docverify-airflow-"))
os.environ["DOCVERIFY_TEST_AIRFLOW_HOME"] = str(_HOME)
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
