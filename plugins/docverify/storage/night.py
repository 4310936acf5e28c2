"""The night as the report reads it: the batch (store, date, prefix, its run store), every stage's
record of the night, and the lineage line each stage writes per document.

The stages (``docverify.stages``) and the report (``docverify.reporting``) both use these, so they live
below both (ADR 0053: the report imported them from ``stages/common.py``, an arrow up the folders);
``docverify.stages.common`` re-exports them for the stages and the Airflow side."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from docverify.storage.paths import safe_ds, safe_prefix
from docverify.storage.runstore import RunStore, StageRecord
from docverify.storage.stage_records import NightStages
from docverify.storage.store import ArtifactStore

lineage_log = logging.getLogger("docverify.lineage")
#: where a task's OpenLineage run id is exported while it runs (docverify_airflow.lineage.declared)
OL_RUN_ID_ENV = "DOCVERIFY_OL_RUN_ID"


def lineage(step: str, doc_id: str, **fields: object) -> None:
    """One structured line per document per step. Callers pass ids, output URIs, hashes, codes —
    never text from the document, never an input's URI or file name (it may name the patient:
    ADR 0050; the manifest maps the doc id to its file). ``task`` is the Airflow task whose log
    holds the line (the task
    runner exports it as ``AIRFLOW_CTX_TASK_ID``); ``step`` is added when the step has another
    name (``classify`` and ``v5_arbiter`` run inside ``verify``). Outside Airflow, ``task`` is
    the step. ``ol_run_id``: the task's OpenLineage run id, when the glue exported it (ADR 0040),
    so the line joins to the task's events."""
    task = os.environ.get("AIRFLOW_CTX_TASK_ID") or step
    run = os.environ.get(OL_RUN_ID_ENV)
    line = {"task": task, "doc_id": doc_id, **({"step": step} if step != task else {}),
            **({"ol_run_id": run} if run else {}), **fields}
    lineage_log.info("lineage %s", json.dumps(line, sort_keys=True))


def no_lineage(step: str, doc_id: str, **fields: object) -> None:
    """:func:`lineage`'s stand-in where a pass writes none: batch mode's collect pass runs the
    verify code to record the night's LLM requests, and its documents' lineage is the verify
    task's, not the pass's (the caller chooses: ``lineage_on=False``)."""


@dataclass
class Batch:
    """What every stage needs: where the artifacts live and which date partition this is. Its
    :attr:`rs` (the typed run store) memoises reads for the life of the object: the DAG builds one
    per task, and so do the in-process stage runners (``tests/batch_stages.py``)."""

    store: ArtifactStore
    ds: str
    run_id: str = ""
    prefix: str = ""  # incoming prefix relative to the root; default incoming/<ds>
    reuse: bool = True
    concurrency: int = 8
    rs: RunStore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        safe_ds(self.ds)  # the date and the batch_prefix param become paths: refused when unsafe
        if self.prefix.strip("/"):
            safe_prefix(self.prefix)
        self.rs = RunStore(self.store, self.ds)

    def fresh(self) -> Batch:
        """The same batch with an empty memo (what the next task of the night sees)."""
        return Batch(store=self.store, ds=self.ds, run_id=self.run_id, prefix=self.prefix, reuse=self.reuse,
                     concurrency=self.concurrency)

    @property
    def incoming(self) -> str:
        return safe_prefix(self.prefix) if self.prefix.strip("/") else f"incoming/{self.ds}"

    @property
    def manifest_rel(self) -> str:
        return self.rs.manifest_rel

    @property
    def routes_rel(self) -> str:
        return self.rs.routes_rel

    def manifest(self) -> dict[str, Any]:
        """The manifest as stored (a dict; :meth:`RunStore.manifest` gives the model)."""
        return self.rs.manifest().as_json()


def load_stage_stats(batch: Batch) -> list[StageRecord]:
    """Every stage's record of the night: discover's (in the manifest), then ``_stages/``."""
    manifest = batch.rs.get_json(batch.rs.manifest_rel) or {}
    return ([manifest["stats"]] if manifest.get("stats") else []) + batch.rs.stages()


def load_stage_records(batch: Batch) -> NightStages:
    """:func:`load_stage_stats` validated once into each stage's model (ADR 0056)."""
    return NightStages.of(load_stage_stats(batch))
