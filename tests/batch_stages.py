"""The nightly DAG's stages in one process (no Airflow), in the DAG's order: what the batch,
LLM, SME and GCS tests run on the sample batch. Shards run one after another, as under
``airflow dags test``, and every stage gets a fresh :class:`~docverify.batch.Batch` (an empty
run-store memo), as every task of the DAG does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from docverify import batch as B
from docverify.judges import Judge


def run_stages(b: B.Batch, judge: Judge, *, shard_size: int = 25, workers: int = 1,
               before_verify: Callable[[B.Batch], Any] | None = None) -> dict:
    """discover → layout (local parser) → [``before_verify``: batch mode's rounds] → per shard:
    verify (classify, V1–V4, V5 on attempt 0) → arbiter → retry → accept → write_sme_packets.
    Returns the arbiter's result (its routes)."""
    B.discover(b.fresh())
    B.layout_local(b.fresh(), workers=workers, timeout_s=60)
    if before_verify is not None:
        before_verify(b)
    shards = B.plan_shards(b.fresh(), shard_size=shard_size)
    for i, shard in enumerate(shards):
        B.verify_shard(b.fresh(), shard, judge, str(i))
    routes = B.arbiter(b.fresh(), shards=len(shards))
    for i, shard in enumerate(B.retry_shards(b.fresh())):
        B.auto_fix_retry_shard(b.fresh(), shard, judge, str(i))
    B.accept(b.fresh())
    B.write_sme_packets(b.fresh())
    return routes
