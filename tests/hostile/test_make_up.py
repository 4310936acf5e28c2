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
from tests.hostile.kit import stand_in_airflow

REPO = pathlib.Path(__file__).resolve().parents[2]

FAKE_AIRFLOW = """#!/usr/bin/env bash
echo "$*" >> "$AIRFLOW_HOME/seen_args"
if [ "$1" = api-server ]; then
  echo "host=$AIRFLOW__API__HOST" > "$AIRFLOW_HOME/seen_env"
  echo '{"admin": "secret"}' > "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
fi
( trap '' HUP; sleep 300 ) & echo $! >> "$AIRFLOW_HOME/children"
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
    home, env = stand_in_airflow(tmp_path, FAKE_AIRFLOW, DOCVERIFY_UP_GRACE_S="3")
    proc = subprocess.Popen([str(REPO / "scripts/up.sh")], env=env, cwd=REPO)
    children = home / "children"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not children.exists() or len(children.read_text().split()) < 8):
        time.sleep(0.1)
    pids = [int(p) for p in children.read_text().split()]
    assert all(_alive(p) for p in pids)
    passwords = home / "simple_auth_manager_passwords.json.generated"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and stat.S_IMODE(passwords.stat().st_mode) != 0o600:
        time.sleep(0.1)
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    assert (home / "seen_env").read_text().strip() == "host=127.0.0.1"
    # every listener on loopback: the api-server bound to 127.0.0.1, no log server started
    seen = sorted((home / "seen_args").read_text().splitlines())
    assert seen == ["api-server --host 127.0.0.1 --port 8080", "dag-processor", "scheduler --skip-serve-logs",
                    "triggerer --skip-serve-logs"]
    assert int((home / "up.pid").read_text()) == proc.pid  # `make run` refuses while it exists

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert [p for p in pids if _alive(p)] == []
    assert not (home / "up.pid").exists()


def test_make_run_refuses_while_make_up_runs_and_names_the_way_out(tmp_path):
    """`make run` and `make up` share the Airflow home: up's scheduler would take over the run's
    tasks (409s, a failed night). While up.pid names a live process, make run stops before touching
    the database, and says what to do instead."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "up.pid").write_text(str(os.getpid()))  # a live process stands in for scripts/up.sh
    out = subprocess.run(["make", "--no-print-directory", "run", f"AIRFLOW_HOME={home}"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "`make up` is running" in out.stdout and "Trigger" in out.stdout and "Ctrl+C" in out.stdout
    assert not (home / "airflow.cfg").exists()  # refused before airflow-init
    # a stale pid file (make up killed hard) does not block make run
    dead = subprocess.Popen(["true"])
    dead.wait()
    (home / "up.pid").write_text(str(dead.pid))
    out = subprocess.run(["make", "--no-print-directory", "not-up", f"AIRFLOW_HOME={home}"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "`make up` is running" not in out.stdout


FLAKY_AIRFLOW = """#!/usr/bin/env bash
echo "$*" >> "$AIRFLOW_HOME/seen_args"
# the scheduler fails once (as Airflow's does on an error in its loop); the triggerer never starts
if [ "$1" = scheduler ] && [ ! -e "$AIRFLOW_HOME/failed_once" ]; then touch "$AIRFLOW_HOME/failed_once"; exit 1; fi
if [ "$1" = triggerer ]; then exit 3; fi
( trap '' HUP; sleep 300 ) & echo $! >> "$AIRFLOW_HOME/children"
echo $$ >> "$AIRFLOW_HOME/children"
wait
"""


@pytest.mark.slow
def test_up_starts_a_component_that_exits_again_and_gives_up_on_one_that_cannot_start(tmp_path):
    """A deployment's supervisor restarts a scheduler that fails; `make up` does too, and says so. A component
    that fails at once every time is given up after DOCVERIFY_UP_MAX_QUICK_EXITS tries, naming it; the
    others keep running, and SIGTERM still leaves nothing behind. (One that exits 0 was asked to stop: the
    users tests' stand-in exits 0 at once, and make up ends.)"""
    home, env = stand_in_airflow(tmp_path, FLAKY_AIRFLOW, DOCVERIFY_UP_GRACE_S="3", DOCVERIFY_UP_RESTART_S="0.2",
                                 DOCVERIFY_UP_MAX_QUICK_EXITS="3")
    proc = subprocess.Popen([str(REPO / "scripts/up.sh")], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    seen = home / "seen_args"

    def starts(component: str) -> int:
        return sum(line.split()[0] == component for line in seen.read_text().splitlines()) if seen.exists() else 0

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (starts("scheduler") < 2 or starts("triggerer") < 3):
        time.sleep(0.1)
    time.sleep(1.0)  # time for a fourth triggerer start, were there one
    assert starts("scheduler") == 2 and starts("triggerer") == 3
    assert starts("dag-processor") == 1 and starts("api-server") == 1
    pids = [int(p) for p in (home / "children").read_text().split()]
    assert len(pids) == 6 and all(_alive(p) for p in pids)  # scheduler (second start), dag-processor, api-server

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert "make up: airflow scheduler exited with 1; starting it again in 0.2 s" in err
    assert "make up: airflow triggerer failed 3 times in a row, each within a minute of its start (last exit " \
           "code 3); not starting it again" in err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert [p for p in pids if _alive(p)] == []
