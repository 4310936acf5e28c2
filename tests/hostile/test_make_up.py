"""`make up` security defaults (scripts/up.sh), with a stand-in `airflow` on PATH that behaves
like `airflow standalone` (writes the password file, starts child processes that ignore the
terminal): loopback only, password file readable by its owner only, and SIGTERM to the script
leaves none of the processes it started."""

from __future__ import annotations

import os
import pathlib
import signal
import stat
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

FAKE_AIRFLOW = """#!/usr/bin/env bash
echo "host=$AIRFLOW__API__HOST" > "$AIRFLOW_HOME/seen_env"
echo '{"admin": "secret"}' > "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
for i in 1 2 3; do ( trap '' HUP; sleep 300 ) & echo $! >> "$AIRFLOW_HOME/children"; done
echo $$ >> "$AIRFLOW_HOME/children"
wait
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return pathlib.Path(f"/proc/{pid}").exists() and "Z" not in \
        pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.slow
def test_up_binds_loopback_keeps_passwords_private_and_stops_every_process(tmp_path):
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    (bin_dir / "airflow").write_text(FAKE_AIRFLOW)
    (bin_dir / "airflow").chmod(0o755)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "DOCVERIFY_UP_GRACE_S": "3"}
    env.pop("DOCVERIFY_UP_HOST", None)
    proc = subprocess.Popen([str(REPO / "scripts/up.sh")], env=env, cwd=REPO)
    children = home / "children"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not children.exists() or len(children.read_text().split()) < 4):
        time.sleep(0.1)
    pids = [int(p) for p in children.read_text().split()]
    assert all(_alive(p) for p in pids)
    passwords = home / "simple_auth_manager_passwords.json.generated"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and stat.S_IMODE(passwords.stat().st_mode) != 0o600:
        time.sleep(0.1)
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    assert (home / "seen_env").read_text().strip() == "host=127.0.0.1"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert [p for p in pids if _alive(p)] == []
