"""Airflow for the DAG tests: a private AIRFLOW_HOME (SQLite) made once per session, before any
Airflow import. The DAG runs in a subprocess (`airflow dags test`) so that its whole log can be
scanned, exactly as an operator would read it."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from tests.dags.airflow_env import _HOME, REPO, airflow_cmd


@pytest.fixture(scope="session")
def airflow_db() -> pathlib.Path:
    # the airflow.cfg `make` writes (lineage, lean defaults), so a DAG test runs as `make run` does
    subprocess.run([sys.executable, str(REPO / "scripts" / "write_airflow_cfg.py"), str(_HOME / "airflow.cfg")],
                   check=True, capture_output=True)
    proc = airflow_cmd("db", "migrate")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _HOME
