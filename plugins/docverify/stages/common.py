"""The shared pieces of the night's stages: the per-stage records (timings, counts, LLM usage), bounded
concurrency and shards; the batch, its stage records and the lineage line are
:mod:`docverify.storage.night`'s (the report reads them too), re-exported here for the stages."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar, Unpack

from docverify.judging.judges import Judge, Usage
from docverify.llm.cost import SEVERAL

# the night's batch, stage records and lineage line live below the report (storage/night.py); the
# stages and the Airflow side import them from here too
from docverify.storage.night import OL_RUN_ID_ENV as OL_RUN_ID_ENV
from docverify.storage.night import Batch as Batch
from docverify.storage.night import lineage as lineage
from docverify.storage.night import load_stage_stats as load_stage_stats
from docverify.storage.night import no_lineage as no_lineage
from docverify.storage.runstore import StageRecord

T = TypeVar("T")

log = logging.getLogger("docverify.stages")


ROUTES = ("accept", "auto_fix_retry", "write_sme_packets")
#: The task the branch follows for each route (the retry route starts by planning its shards).
ROUTE_TASKS = {"accept": "accept", "auto_fix_retry": "plan_retry_shards", "write_sme_packets": "write_sme_packets"}
#: Mapped task instances per night at most (the shard size grows with the night to stay under it).
MAX_SHARDS = 64
#: Airflow's default ``[core] max_map_length``: more mapped instances than this cannot be created.
AIRFLOW_MAP_LIMIT = 1024


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
