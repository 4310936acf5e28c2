"""The OpenLineage side of :mod:`docverify_airflow.lineage.declared` (ADR 0040): the custom run facets, the
datasets, and the extractor registered in ``[openlineage] extractors`` for the two Dags' task types.
Imported by the provider's listener (and by a task ending), never at Dag parse time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attr
from airflow.providers.openlineage.extractors.base import BaseExtractor, OperatorLineage
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import RunFacet
from pydantic import JsonValue

from docverify.reporting.contract import NightLLM, NightModels
from docverify_airflow.lineage.declared import DAGS, Counts, Declared, NightFacet, declared

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

#: The schemas of the custom facets ship in the repository (include/openlineage/); the URL names
#: them where a reader of an event can find them.
SCHEMA_BASE = "https://github.com/docverify/docverify/blob/main/include/openlineage/"


@attr.define
class DocverifyTaskRunFacet(RunFacet):
    """A docverify task's counts: numbers, booleans and short codes from its result, no text."""

    dag_id: str
    task_id: str
    map_index: int
    counts: Counts

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_BASE + "DocverifyTaskRunFacet.json#/$defs/DocverifyTaskRunFacet"


@attr.define
class DocverifyNightRunFacet(RunFacet):
    """The night: documents, routes, V5 rules, issue codes, what classified and judged, LLM use and
    cost, the verification policy. Counts, codes and implementation ids only."""

    night: str
    documents: int
    final_routes: dict[str, int]
    rules: dict[str, int]
    issue_codes: dict[str, int]
    error_codes: dict[str, int]
    implementations: list[str]
    models: NightModels
    llm: NightLLM
    policy: dict[str, JsonValue]

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_BASE + "DocverifyNightRunFacet.json#/$defs/DocverifyNightRunFacet"


def facets(found: Declared, dag_id: str, task_id: str, map_index: int) -> dict[str, RunFacet]:
    """The run facets of what a task declared."""
    out: dict[str, RunFacet] = {}
    if found.counts is not None:
        out["docverify_task"] = DocverifyTaskRunFacet(dag_id=dag_id, task_id=task_id, map_index=int(map_index),
                                                      counts=found.counts)
    if found.night is not None:
        out["docverify_night"] = night_facet(found.night)
    return out


def night_facet(night: NightFacet) -> DocverifyNightRunFacet:
    return DocverifyNightRunFacet(
        night=night["night"], documents=night["documents"], final_routes=night["final_routes"], rules=night["rules"],
        issue_codes=night["issue_codes"], error_codes=night["error_codes"], implementations=night["implementations"],
        models=night["models"], llm=night["llm"], policy=night["policy"])


def dataset(uri: str) -> Dataset:
    """An OpenLineage dataset for a storage URI, named as Airflow's asset translations name it
    (``file`` + absolute path; ``gs://<bucket>`` + key)."""
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return Dataset(namespace=f"file://{parts.netloc}" if parts.netloc else "file", name=parts.path)
    return Dataset(namespace=f"{parts.scheme}://{parts.netloc}", name=parts.path.lstrip("/") or "/")


class DocverifyExtractor(BaseExtractor):
    """The extractor of the two Dags' tasks: the datasets and facets the task body declared
    (:func:`task`). For a task of another Dag it returns nothing, and the provider falls back to
    what it does without an extractor (hook lineage, then the task's inlets and outlets)."""

    @classmethod
    def get_operator_classnames(cls) -> list[str]:
        return ["_PythonDecoratedOperator", "_BranchPythonDecoratedOperator", "SMEReviewOperator"]

    def _execute_extraction(self) -> OperatorLineage[Dataset, RunFacet] | None:
        return None  # START: the body has not run; its datasets are known when it ends

    def extract_on_complete(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage[Dataset, RunFacet] | None:
        op = self.operator
        if getattr(op, "dag_id", None) not in DAGS:
            return None
        found = declared(op.dag_id, op.task_id, getattr(task_instance, "map_index", -1))
        if found is None:
            return None
        map_index = getattr(task_instance, "map_index", -1)
        return OperatorLineage(inputs=[dataset(u) for u in found.inputs],
                               outputs=[dataset(u) for u in found.outputs],
                               run_facets=facets(found, op.dag_id, op.task_id, -1 if map_index is None else map_index))

    def extract_on_failure(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage[Dataset, RunFacet] | None:
        return self.extract_on_complete(task_instance)
