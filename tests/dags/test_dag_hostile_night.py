"""The nightly DAG (`airflow dags test`, a subprocess) on a night with one hostile input of every
kind (tests/hostile/kit.py): the run completes, every clean document is routed, every hostile one
is escalated with a typed error, and no input text reaches the task log, an XCom value or any
report file."""

from __future__ import annotations

import json

import pytest
from tests.dags.airflow_env import airflow_cmd
from tests.hostile import kit

from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore


def _xcom_values(ds_run_id_prefix: str = "") -> list:
    from airflow.models import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as s:
        run = (s.query(DagRun).filter(DagRun.dag_id == "clinical_doc_verification")
               .order_by(DagRun.id.desc()).first())
        rows = s.query(XComModel).filter(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id).all()
        return [r.value for r in rows]


@pytest.mark.slow
def test_hostile_night_through_the_dag(airflow_db, tmp_path, corpora_dir):
    night = kit.make_night(tmp_path, corpora=corpora_dir)
    proc = airflow_cmd("dags", "test", "clinical_doc_verification", kit.DS,
                       env={"AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT": str(night.root),
                            "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline"})
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    xcom = _xcom_values()
    assert xcom, "no XCom values were recorded"
    b = Batch(store=ArtifactStore(night.root), ds=kit.DS, run_id="check")
    rep = json.loads((night.root / "reports" / kit.DS / "batch_report.json").read_text())
    figures = kit.check_night(night, {"batch": b, "report": rep, "xcom": xcom, "logs": [log], "outside": []})
    assert figures["lost"] == figures["silent_accepts"] == 0 and figures["hostile"] >= 25
    assert "Traceback" not in log
