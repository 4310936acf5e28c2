"""The shared pieces of the night's stages: the batch (store, date, prefix), lineage log lines and the per-stage records (timings, counts, LLM usage)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, Unpack

from docverify.judging.judges import Judge, Usage
from docverify.llm.cost import SEVERAL
from docverify.storage.paths import safe_ds, safe_prefix
from docverify.storage.runstore import (
    RunStore,
    StageRecord,
)
from docverify.storage.store import ArtifactStore

T = TypeVar("T")

log = logging.getLogger("docverify.stages")
lineage_log = logging.getLogger("docverify.lineage")
#: where a task's OpenLineage run id is exported while it runs (docverify_airflow.lineage)
OL_RUN_ID_ENV = "DOCVERIFY_OL_RUN_ID"


ROUTES = ("accept", "auto_fix_retry", "write_sme_packets")
#: The task the branch follows for each route (the retry route starts by planning its shards).
ROUTE_TASKS = {"accept": "accept", "auto_fix_retry": "plan_retry_shards", "write_sme_packets": "write_sme_packets"}
#: Mapped task instances per night at most (the shard size grows with the night to stay under it).
MAX_SHARDS = 64
#: Airflow's default ``[core] max_map_length``: more mapped instances than this cannot be created.
AIRFLOW_MAP_LIMIT = 1024


def lineage(step: str, doc_id: str, **fields: object) -> None:
    """One structured line per document per step. Callers pass ids, URIs, hashes, codes — never
    text from the document. ``task`` is the Airflow task whose log holds the line (the task
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

    def run_rel(self, doc_id: str, name: str = "") -> str:
        return self.rs.doc_rel(doc_id, name)

    @property
    def manifest_rel(self) -> str:
        return self.rs.manifest_rel

    @property
    def routes_rel(self) -> str:
        return self.rs.routes_rel

    def manifest(self) -> dict[str, Any]:
        """The manifest as stored (a dict; :meth:`RunStore.manifest` gives the model)."""
        return self.rs.manifest().as_json()


USAGE_KEYS = ("calls", "cache_hits", "input_tokens", "output_tokens", "cached_tokens")


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {"calls": usage.llm_calls, "cache_hits": usage.cache_hits, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cached_tokens": usage.cached_tokens}


@dataclass
class StageStats:
    stage: str
    docs: int = 0
    errors: int = 0
    cache_hits: int = 0
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)
    per_doc: dict[str, dict[str, int]] = field(default_factory=dict)
    price_model: str | None = None
    #: the usage per price model (ADR 0034: the classifier and the judge may run on different models)
    by_model: dict[str, Usage] = field(default_factory=dict)

    def add_usage(self, doc_id: str, usage: Usage | None, judge: Judge | None = None) -> None:
        """Count one document's LLM usage in the stage total and per document, and per the price
        model of ``judge`` (the one whose model made the calls)."""
        if usage is None:
            return
        self.usage.add(usage)
        if judge is not None and judge.price_model:
            if usage.llm_calls or usage.input_tokens or usage.output_tokens:
                self.by_model.setdefault(judge.price_model, Usage()).add(usage)
            # several: "a+b", which cannot be priced from the total; the report prices llm_by_model
            self.price_model = (SEVERAL.join(sorted(self.by_model)) if len(self.by_model) > 1
                                else next(iter(self.by_model), judge.price_model))
        if usage.llm_calls or usage.cache_hits:
            d = self.per_doc.setdefault(doc_id, dict.fromkeys(USAGE_KEYS, 0))
            for key, value in _usage_dict(usage).items():
                d[key] += value

    def record(self, **extra: Unpack[StageRecord]) -> StageRecord:
        return {"stage": self.stage, "docs": self.docs, "errors": self.errors, "cache_hits": self.cache_hits,
                "seconds": round(time.perf_counter() - self.started, 3),
                "llm": _usage_dict(self.usage), "llm_per_document": self.per_doc,
                "price_model": self.price_model,
                **({"llm_by_model": {m: _usage_dict(u) for m, u in sorted(self.by_model.items())}}
                   if len(self.by_model) > 1 else {}), **extra}

    def save(self, batch: Batch, key: str | None = None, **extra: Unpack[StageRecord]) -> StageRecord:
        out = self.record(**extra)
        batch.rs.write_json(batch.rs.stage_rel(key or self.stage), out)
        self.log(out)
        return out

    def log(self, out: StageRecord) -> None:
        log.info("stage %s: %d document(s), %d error(s), %d reused, %.2fs, %d LLM call(s)", self.stage,
                 self.docs, self.errors, self.cache_hits, out["seconds"], self.usage.llm_calls)


async def gather_bounded(factories: list[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run coroutine factories concurrently, at most ``limit`` at a time, in input order."""
    sem = asyncio.Semaphore(max(1, limit))

    async def one(f: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            return await f()

    return await asyncio.gather(*(one(f) for f in factories))


# =========================================================================== shards


def shard_size_for(documents: int, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                   map_limit: int = AIRFLOW_MAP_LIMIT) -> int:
    """Documents per mapped task: ``shard_size`` is the minimum; it grows with the night so the
    number of shards stays at most ``max_shards`` (and never above Airflow's ``map_limit``).
    A bad value is a :class:`ValueError` (deterministic: the task fails at once)."""
    if int(shard_size) < 1:
        raise ValueError(f"shard_size must be at least 1, not {shard_size}")
    if int(max_shards) < 1:
        raise ValueError(f"max_shards must be at least 1, not {max_shards}")
    if int(max_shards) > int(map_limit):
        raise ValueError(f"max_shards={max_shards} is over Airflow's map limit ([core] max_map_length = "
                         f"{map_limit}): lower the param or raise the limit")
    return max(int(shard_size), math.ceil(documents / int(max_shards)) if documents else 1)


def split(ids: list[str], shard_size: int = 25, max_shards: int = MAX_SHARDS,
          map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    size = shard_size_for(len(ids), shard_size, max_shards, map_limit)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


# =========================================================================== discover


def load_stage_stats(batch: Batch) -> list[StageRecord]:
    """Every stage's record of the night: discover's (in the manifest), then ``_stages/``."""
    manifest = batch.rs.get_json(batch.rs.manifest_rel) or {}
    return ([manifest["stats"]] if manifest.get("stats") else []) + batch.rs.stages()
