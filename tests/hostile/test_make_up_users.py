"""SME and Viewer users that outlive `make clean` (ADR 0036): `DOCVERIFY_USERS` in the operator's
environment becomes the simple auth manager's user list when `make up` starts (admin kept), and a
malformed entry stops `make up` with the form to use. A stand-in `airflow` records what the
api-server would have been given."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from tests.hostile.kit import stand_in_airflow

REPO = pathlib.Path(__file__).resolve().parents[2]

FAKE_AIRFLOW = """#!/usr/bin/env bash
if [ "$1" = api-server ]; then
  echo "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-unset}" > "$AIRFLOW_HOME/seen_users"
fi
exit 0
"""


def _up(tmp_path: pathlib.Path, **env: str) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
    home, full = stand_in_airflow(tmp_path, FAKE_AIRFLOW, **{"DOCVERIFY_UP_GRACE_S": "1", **env})
    out = subprocess.run([str(REPO / "scripts/up.sh")], env=full, cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    return out, home


@pytest.mark.slow
def test_docverify_users_become_the_login_users(tmp_path):
    out, home = _up(tmp_path, DOCVERIFY_USERS="sme.anna:user, viewer.bob:viewer")
    assert (home / "seen_users").read_text().strip() == "admin:admin,sme.anna:user,viewer.bob:viewer", out.stderr


@pytest.mark.slow
def test_without_docverify_users_airflow_keeps_its_default(tmp_path):
    out, home = _up(tmp_path)
    assert (home / "seen_users").read_text().strip() == "unset", out.stderr


def test_a_malformed_entry_stops_make_up_naming_the_form(tmp_path):
    out, home = _up(tmp_path, DOCVERIFY_USERS="sme.anna:reviewer")
    assert out.returncode == 2 and "'sme.anna:reviewer' is not name:role" in out.stderr
    assert not (home / "seen_users").exists()
