"""Lineage lines name the Airflow task whose log holds them, and the step when it differs."""

from __future__ import annotations

import json
import logging

from docverify.stages.common import lineage


def _lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage().removeprefix("lineage ")) for r in caplog.records if r.name == "docverify.lineage"]


def test_a_step_inside_a_task_names_both(caplog, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "verify")
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        lineage("v5_arbiter", "doc1", decision="AUTO_ACCEPT")
        lineage("verify", "doc1", rule=7)
    assert _lines(caplog) == [{"task": "verify", "step": "v5_arbiter", "doc_id": "doc1", "decision": "AUTO_ACCEPT"},
                              {"task": "verify", "doc_id": "doc1", "rule": 7}]


def test_outside_airflow_the_step_is_the_task(caplog, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CTX_TASK_ID", raising=False)
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        lineage("classify", "doc2", cache="hit")
    assert _lines(caplog) == [{"task": "classify", "doc_id": "doc2", "cache": "hit"}]
