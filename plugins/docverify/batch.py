"""One night's batch, stage by stage — the bodies of the nightly DAG's tasks, without Airflow.

The stages live in :mod:`docverify.stages` (``common``, ``discover``, ``layout``, ``verify``,
``routes``); this module gathers their entry points under one name (``from docverify import batch``).

Every stage reads its inputs through the night's typed run store (:class:`docverify.runstore.RunStore`:
every path of the layout, one request per read, each object read at most once per task) and
writes its outputs there; what it returns is small (references, ids, counts) and is all that
crosses XCom. The graph: discover → layout → plan_shards → ``verify[shard]`` (classify when no
companion classification, V1, V2–V4 with their judgments concurrent, V5's decision on attempt 0 —
all through :func:`docverify.pipeline.verify_document`; one ``result.json`` per document and one
summary per shard) → ``route`` (the branch, from the shard summaries) → ``auto_fix_retry``
(the same pipeline from the stored attempt 0) → accept / write_sme_packets → batch_report.

Stages are idempotent: a second run of the same date reuses what is unchanged (a bundle whose PDF
has the same sha256, a classification made by the same implementation from the same bundle) and
rewrites an output only when its content changed, so a re-run produces the same files and no
duplicates. A reviewed SME packet and a ground-truth record are never overwritten.

Throttling (:class:`docverify.judges.JudgeThrottled`) is never a document's verdict: it propagates
out of the stage, the task fails and Airflow retries it (what was written is reused).

Lineage: every stage logs one line per document on the ``docverify.lineage`` logger:
``lineage {"task": …, "doc_id": …, …}`` — ids, URIs, hashes, implementations, issue codes,
decisions and rules; never page text, snippets or issue messages (they may hold PHI).
"""

from __future__ import annotations

from docverify.paths import doc_id_for
from docverify.runstore import VOLATILE
from docverify.stages.audit import audit_sample
from docverify.stages.common import (
    AIRFLOW_MAP_LIMIT,
    MAX_SHARDS,
    ROUTE_TASKS,
    ROUTES,
    Batch,
    StageStats,
    lineage,
    load_stage_stats,
)
from docverify.stages.discover import discover
from docverify.stages.layout import (
    DOCAI_PARSER_PREFIX,
    LAYOUT_SHARD_SIZE,
    docs_to_layout,
    layout_docai_online,
    layout_docai_outputs,
    layout_local,
    layout_local_part,
    merge_layout_local,
    plan_layout_local,
)
from docverify.stages.routes import accept, withdraw, write_sme_packets
from docverify.stages.verify import (
    arbiter,
    auto_fix_retry_shard,
    night_index,
    plan_shards,
    read_companion,
    retry_shards,
    shard_size_for,
    split,
    verify_shard,
)
from docverify.store import ArtifactStore

__all__ = [
    "AIRFLOW_MAP_LIMIT", "DOCAI_PARSER_PREFIX", "LAYOUT_SHARD_SIZE", "MAX_SHARDS", "ROUTES", "ROUTE_TASKS",
    "VOLATILE", "ArtifactStore", "Batch", "StageStats", "accept", "audit_sample", "arbiter", "auto_fix_retry_shard", "discover",
    "doc_id_for", "docs_to_layout", "layout_docai_online", "layout_docai_outputs", "layout_local",
    "layout_local_part", "lineage", "load_stage_stats", "merge_layout_local", "night_index", "plan_layout_local",
    "plan_shards", "read_companion", "retry_shards", "shard_size_for", "split", "verify_shard", "withdraw",
    "write_sme_packets",
]
