"""The nightly DAG on a distributed executor (issue 15 item 9): scripts/celery_stack.py starts
Redis and PostgreSQL on loopback (Debian packages, temporary data directories), the four Airflow
components with the CeleryExecutor and two Celery workers, each in its own temp folder; the store
is a ``gs://`` root on the GCS emulator. A night of the sample PDFs repeated under distinct names
(300 by default; DOCVERIFY_CELERY_DOCUMENTS changes it) is triggered through the REST API.

Asserted: the run succeeds and every document takes its sample's expected route (the routes the
LocalExecutor / ``dags test`` runs assert), task instances ran on both workers (their ``hostname``
in the REST API) and each worker's own task logs are exactly those task instances, the workers
share nothing but the store and the metadata database (separate working directories; no XCom of
the run names a local path, the XComs that name a location name the gs:// store), and stop() ends
every process of the stack."""

from __future__ import annotations

import os
import uuid

import psutil
import pytest
from scripts.celery_stack import DAG, CeleryStack, checks, local_paths_in, missing_binaries, night

DOCUMENTS = int(os.environ.get("DOCVERIFY_CELERY_DOCUMENTS", "300"))
DS = "2026-11-03"


@pytest.fixture(scope="module")
def celery_night(gcs_emulator, tmp_path_factory):
    if missing := missing_binaries():  # `make test` installs them (make celery-deps)
        pytest.skip(f"the Celery topology needs {'; '.join(missing)}: run `make celery-deps`")
    prefix = f"celery-night-{uuid.uuid4().hex[:8]}"
    stack = CeleryStack(tmp_path_factory.mktemp("celery") / "airflow", gcs_emulator.root_uri(prefix),
                        env={**gcs_emulator.env, "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline"},
                        variables={"docverify_storage_conn_id": gcs_emulator.conn_id})
    stack.start()
    try:
        stack.settle(DAG)
        result = night(stack, gcs_emulator, prefix, DS, DOCUMENTS)
        pids = stack.pids() + stack.service_pids()
        dirs = [*stack.worker_dirs.values(), stack.postgres.root]
    finally:
        stack.stop()
        gcs_emulator.delete_prefix(prefix)
    return stack, result, pids, dirs


def test_every_document_takes_its_samples_route(celery_night):
    _, result, *_ = celery_night
    assert result["state"] == "success"
    assert result["documents"] == result["reported"] == DOCUMENTS
    assert result["route_mismatches"] == {}
    assert {"AUTO_ACCEPT", "ESCALATE_TO_SME", "AUTO_RETRY→AUTO_ACCEPT"} <= set(result["routes"])


def test_tasks_ran_on_both_workers(celery_night):
    stack, result, *_ = celery_night
    assert result["hostnames"] == ["worker1", "worker2"] == stack.worker_names
    assert all(n > 0 for n in result["per_worker"].values()), result["per_worker"]
    assert sum(result["per_worker"].values()) <= result["task_instances"]
    # a worker's local task logs are the task instances the API places on it, and only those
    assert result["log_mismatch"] == {}


def test_workers_share_nothing_but_the_store_and_the_metadata_db(celery_night):
    _, result, *_ = celery_night
    cwds = result["worker_cwds"]
    assert len(cwds) == 2 and len(set(cwds.values())) == 2
    assert result["xcoms"] > 0 and result["xcom_local_paths"] == []
    assert result["xcom_store_refs"] > 0  # what tasks hand on names the store, not a disk
    assert checks(result, ["worker1", "worker2"]) == []


def test_stop_ends_every_process_and_removes_the_temp_folders(celery_night):
    stack, _, pids, dirs = celery_night
    assert len(pids) > 6  # 4 components, 2 workers (+ their children), Redis, PostgreSQL
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    assert alive == [] and stack.procs == {}
    assert not any(d.exists() for d in dirs)


def test_the_checks_catch_a_local_path_and_a_lone_worker():
    """The checks above can fail: a local path in an XCom and a run on one worker are reported."""
    ok = {"state": "success", "documents": 2, "reported": 2, "route_mismatches": {}, "hostnames": ["worker1", "worker2"],
          "log_mismatch": {}, "worker_cwds": {"worker1": "/a", "worker2": "/b"}, "xcom_local_paths": []}
    assert checks(ok, ["worker1", "worker2"]) == []
    assert local_paths_in({"uri": "/tmp/docverify-worker1-x/tmp/a.json"}, ["/tmp/"]) == ["/tmp/"]
    assert local_paths_in({"uri": "gs://bucket/runs/a.json"}, ["/tmp/", "/work/repo"]) == []
    bad = {**ok, "hostnames": ["worker1"], "xcom_local_paths": ["layout[-1] return_value: ['/tmp/']"],
           "worker_cwds": {"worker1": "/a", "worker2": "/a"}}
    assert len(checks(bad, ["worker1", "worker2"])) == 3
