"""The nightly DAG's stages in one process (no Airflow), in the DAG's order: what the batch,
LLM, SME and GCS tests run on the sample batch. Shards run one after another, as under
``airflow dags test``."""

from __future__ import annotations

from docverify import batch as B
from docverify.judges import Judge


def run_stages(b: B.Batch, judge: Judge, *, shard_size: int = 25, workers: int = 1) -> dict:
    """discover → layout (local parser) → per shard: classify, V1, V2–V4 → arbiter → retry →
    accept → write_sme_packets. Returns the arbiter's result (its routes)."""
    B.discover(b)
    B.layout_local(b, workers=workers, timeout_s=60)
    for i, shard in enumerate(B.plan_shards(b, shard_size=shard_size)):
        B.classify_shard(b, shard, judge, str(i))
        B.v1_shard(b, shard, str(i))
        for agent in ("V2", "V3", "V4"):
            B.agent_shard(b, agent, shard, judge, str(i))
    routes = B.arbiter(b, second_opinion=getattr(judge, "second_opinion", None))
    for i, shard in enumerate(B.retry_shards(b)):
        B.auto_fix_retry_shard(b, shard, judge, str(i))
    B.accept(b)
    B.write_sme_packets(b)
    return routes
