"""The OpenLineage glue (ADR 0040) in one process: what a task declares, what the extractor hands the
provider's listener, the datasets' names, the facets against their schemas, and the run id a
``lineage`` line carries. The events of a whole night: tests/dags/test_dag_run.py (console
transport, `airflow dags test`) and tests/e2e/test_operator_night.py (HTTP transport to a loopback
receiver, real scheduler)."""

from __future__ import annotations

import json
import logging
import os
from types import SimpleNamespace

import pytest
from tests.lineage_events import check_facet, parse

from docverify.stages.common import OL_RUN_ID_ENV, lineage
from docverify.storage.runstore import RunStore
from docverify_airflow.lineage import declared as L
from docverify_airflow.lineage.extractor import (
    DocverifyExtractor,
    DocverifyNightRunFacet,
    dataset,
    facets,
    night_facet,
)


def _context(task_id: str = "verify", map_index: int = 3, dag_id: str = "clinical_doc_verification"):
    ti = SimpleNamespace(dag_id=dag_id, task_id=task_id, map_index=map_index, try_number=1, run_id="r1",
                         logical_date=None)
    return {"ti": ti}


def _uris(context, roles):
    store = SimpleNamespace(uri=lambda rel: f"gs://bucket/docverify/{rel}")  # the store's naming, no bucket needed
    return L.uris_for(roles, store, RunStore(store, "2026-11-27"), "incoming/2026-11-27")


@pytest.fixture(autouse=True)
def _clean():
    L._DECLARED.clear()
    yield
    L._DECLARED.clear()


def test_datasets_are_named_as_airflow_names_assets():
    local, remote = dataset("file:///srv/data/runs/2026-11-27"), dataset("gs://bucket/docverify/sme_packets")
    assert (local.namespace, local.name) == ("file", "/srv/data/runs/2026-11-27")
    assert (remote.namespace, remote.name) == ("gs://bucket", "docverify/sme_packets")
    # the same answer as Airflow's own translation of a gs:// asset (the google provider)
    from airflow.providers.google.assets.gcs import convert_asset_to_openlineage
    from airflow.sdk import Asset

    ol = convert_asset_to_openlineage(Asset(uri="gs://bucket/docverify/sme_packets"), None)
    assert (ol.namespace, ol.name) == (remote.namespace, remote.name)


def test_a_task_declares_its_roles_datasets_and_counts():
    @L.task(_uris)
    def verify(context, shard):
        return {"stage": "verify", "docs": len(shard), "errors": 0, "routes": {"accept": 2},
                "doc_ids": ["a", "b"], "uri": "gs://bucket/docverify/runs/2026-11-27/a/result.json",
                "note": "a free sentence with spaces and punctuation, longer than any code is."}

    verify(_context(), ["a", "b"])
    got = L.declared("clinical_doc_verification", "verify", 3)
    assert got is not None
    assert got.inputs == ["gs://bucket/docverify/runs/2026-11-27"] == got.outputs
    counts = got.counts
    # numbers, short codes and {name: number} maps; a list only as its length; never URIs or sentences
    assert counts == {"stage": "verify", "docs": 2, "errors": 0, "routes": {"accept": 2}, "doc_ids_count": 2}


def test_a_failing_task_still_declares_and_restores_the_run_id(monkeypatch):
    monkeypatch.setattr(L, "ol_run_id", lambda context: "01a21c30-f808-7888-8e3a-d7703d6113a3")
    monkeypatch.setenv(OL_RUN_ID_ENV, "outer")
    seen = {}

    @L.task(_uris)
    def accept(context):
        seen["env"] = os.environ.get(OL_RUN_ID_ENV)
        raise RuntimeError("storage down")

    with pytest.raises(RuntimeError):
        accept(_context("accept", -1))
    assert seen["env"] == "01a21c30-f808-7888-8e3a-d7703d6113a3"
    assert os.environ[OL_RUN_ID_ENV] == "outer"
    got = L.declared("clinical_doc_verification", "accept", None)
    assert got is not None and got.outputs == ["gs://bucket/docverify/accepted/2026-11-27"]
    assert got.counts == {}


def test_a_lineage_line_carries_the_tasks_run_id(monkeypatch, caplog):
    monkeypatch.setenv(OL_RUN_ID_ENV, "01a21c30-f808-7888-8e3a-d7703d6113a3")
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        lineage("accept", "doc-1", decision="AUTO_ACCEPT")
    line = json.loads(caplog.records[-1].getMessage().removeprefix("lineage "))
    assert line["ol_run_id"] == "01a21c30-f808-7888-8e3a-d7703d6113a3" and line["doc_id"] == "doc-1"
    monkeypatch.delenv(OL_RUN_ID_ENV)
    lineage("accept", "doc-1")
    assert "ol_run_id" not in json.loads(caplog.records[-1].getMessage().removeprefix("lineage "))


def test_the_run_id_is_the_providers_for_that_task_instance():
    import datetime as dt

    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

    when = dt.datetime(2026, 11, 27, 2, tzinfo=dt.UTC)
    ti = SimpleNamespace(dag_id="clinical_doc_verification", task_id="verify", map_index=2, try_number=1,
                         logical_date=when, dag_run=SimpleNamespace(logical_date=when, run_after=when),
                         get_template_context=dict)
    expected = OpenLineageAdapter.build_task_instance_run_id(dag_id="clinical_doc_verification", task_id="verify",
                                                             try_number=1, logical_date=when, map_index=2)
    assert L.ol_run_id({"ti": ti}) == str(expected)
    assert L.ol_run_id({}) is None


def _extract(dag_id: str, task_id: str, map_index: int):
    op = SimpleNamespace(dag_id=dag_id, task_id=task_id, task_type="_PythonDecoratedOperator")
    return DocverifyExtractor(op).extract_on_complete(SimpleNamespace(map_index=map_index))


def test_the_extractor_hands_over_what_the_task_declared():
    L.declare(_context("write_sme_packets", -1), inputs=["file:///srv/data/runs/2026-11-27"],
              outputs=["file:///srv/data/sme_packets"], counts={"packets": 4})
    got = _extract("clinical_doc_verification", "write_sme_packets", -1)
    assert [(d.namespace, d.name) for d in got.inputs] == [("file", "/srv/data/runs/2026-11-27")]
    assert [(d.namespace, d.name) for d in got.outputs] == [("file", "/srv/data/sme_packets")]
    task = got.run_facets["docverify_task"]
    assert (task.dag_id, task.task_id, task.map_index, task.counts) == (
        "clinical_doc_verification", "write_sme_packets", -1, {"packets": 4})
    assert "docverify_night" not in got.run_facets
    # START: the body has not run yet; another Dag's task, or nothing declared: the provider's own fallback
    op = SimpleNamespace(dag_id="clinical_doc_verification", task_id="write_sme_packets", task_type="x")
    assert DocverifyExtractor(op).extract() is None
    assert _extract("someone_elses_dag", "write_sme_packets", -1) is None
    assert _extract("clinical_doc_verification", "accept", -1) is None


def test_facets_serialise_and_match_their_schemas():
    from openlineage.client.serde import Serde

    from docverify_airflow.lineage.extractor import DocverifyTaskRunFacet

    task = json.loads(Serde.to_json(DocverifyTaskRunFacet(dag_id="d", task_id="t", map_index=-1,
                                                          counts={"docs": 3, "routes": {"accept": 3}})))
    check_facet("docverify_task", task)
    night = {"night": "2026-11-27", "documents": 13, "final_routes": {"AUTO_ACCEPT": 9}, "rules": {"rule 7": 9},
             "issue_codes": {}, "error_codes": {"CORRUPT": 1}, "implementations": ["classifier:offline-lexicon-v4"],
             "models": {"classifier": ["offline-v1"], "judge": ["offline-v1"]}, "llm": {"calls": 0, "cost_usd": 0.0},
             "policy": {"blocker_repair": False}}
    facet = night_facet(night)
    assert isinstance(facet, DocverifyNightRunFacet)
    check_facet("docverify_night", json.loads(Serde.to_json(facet)))
    # the glue names the same fields (it imports no OpenLineage class)
    assert tuple(a.name for a in DocverifyNightRunFacet.__attrs_attrs__ if not a.name.startswith("_")) == L.NIGHT_FIELDS
    with pytest.raises(KeyError, match="policy"):  # a night without its policy is refused, not emitted half
        L.declare(_context("batch_report", -1), night={k: v for k, v in night.items() if k != "policy"})
    L.declare(_context("batch_report", -1), night=night, counts={"errors": 1})
    found = L.declared("clinical_doc_verification", "batch_report", -1)
    assert found is not None
    assert set(facets(found, "clinical_doc_verification", "batch_report", -1)) == {"docverify_task", "docverify_night"}


def test_an_event_with_our_datasets_parses_with_the_client_classes():
    event = {"eventType": "COMPLETE", "eventTime": "2026-11-27T02:00:00+00:00", "producer": "p",
             "run": {"runId": "01a21c30-f808-7888-8e3a-d7703d6113a3"},
             "job": {"namespace": "docverify", "name": "clinical_doc_verification.accept"},
             "inputs": [{"namespace": "file", "name": "/srv/data/runs/2026-11-27"}], "outputs": []}
    assert parse(event).run.runId == "01a21c30-f808-7888-8e3a-d7703d6113a3"
    with pytest.raises(ValueError):
        parse({**event, "run": {"runId": "not-a-uuid"}})


def test_the_review_dags_folders_need_no_night():
    store = SimpleNamespace(uri=lambda rel: f"file:///srv/data/{rel}")
    assert L.uris_for([L.PACKETS, L.GROUND_TRUTH], store) == [
        "file:///srv/data/sme_packets", "file:///srv/data/ground_truth"]
    with pytest.raises(ValueError, match="night"):
        L.uris_for([L.RUNS], store)
