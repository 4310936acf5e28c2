"""Count the artifact-store requests of the in-process sample night (ADR 0010's budget).

Runs the nightly stages in one process (``tests/batch_stages.run_stages``: every stage on a fresh
``Batch``, as every DAG task) on the 13 sample PDFs with the offline judge, then the batch report,
and counts every ``ArtifactStore`` request (exists, read, size, sha256, listing, write, delete);
``--rerun`` counts a second night of the same date on top. Usage::

    PYTHONPATH=plugins:. .venv/bin/python scripts/count_ops.py [--rerun]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import pathlib
import shutil
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

OPS = ("exists", "read_bytes", "size", "sha256", "entries", "list", "write_bytes", "delete", "replace_if", "delete_if")


@contextlib.contextmanager
def counting():
    """Count ArtifactStore requests: yields (by operation, by (stage, operation, file name))."""
    from docverify.storage import store as S

    counts: collections.Counter = collections.Counter()
    detail: collections.Counter = collections.Counter()
    stage = ["-"]
    saved = {name: getattr(S.ArtifactStore, name) for name in OPS}

    def wrap(name, f):
        @functools.wraps(f)
        def w(self, *a, **k):
            counts[name] += 1
            detail[(stage[0], name, str(a[0]).rsplit("/", 1)[-1] if a else "")] += 1
            return f(self, *a, **k)
        return w

    for name, f in saved.items():
        setattr(S.ArtifactStore, name, wrap(name, f))
    try:
        yield counts, detail, stage
    finally:
        for name, f in saved.items():
            setattr(S.ArtifactStore, name, f)


def sample_night(root: pathlib.Path, ds: str = "2026-11-20") -> int:
    inc = root / "incoming" / ds
    inc.mkdir(parents=True, exist_ok=True)
    for f in (REPO / "include" / "samples").iterdir():
        if f.suffix in (".pdf", ".json") and f.name != "expected_routes.json":
            shutil.copy(f, inc / f.name)
    return len(list(inc.glob("*.pdf")))


def night(root: pathlib.Path, stage: list[str], ds: str = "2026-11-20") -> None:
    """The stages of tests/batch_stages.run_stages, naming the stage being counted, + the report."""
    from docverify.judging.judges import OfflineJudge
    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.stages.discover import discover
    from docverify.stages.layout import layout_local
    from docverify.stages.routes import accept, write_sme_packets
    from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard
    from docverify.storage.store import ArtifactStore

    b = Batch(store=ArtifactStore(root), ds=ds, run_id="count")
    judge = OfflineJudge()
    stage[0] = "discover"
    discover(b.fresh())
    stage[0] = "layout"
    layout_local(b.fresh(), workers=1, timeout_s=60)
    stage[0] = "plan_shards"
    shards = plan_shards(b.fresh())
    stage[0] = "verify"
    for i, shard in enumerate(shards):
        verify_shard(b.fresh(), shard, judge, str(i))
    stage[0] = "route"
    arbiter(b.fresh(), shards=len(shards))
    stage[0] = "auto_fix_retry"
    for i, shard in enumerate(retry_shards(b.fresh())):
        auto_fix_retry_shard(b.fresh(), shard, judge, str(i))
    stage[0] = "accept"
    accept(b.fresh())
    stage[0] = "write_sme_packets"
    write_sme_packets(b.fresh())
    stage[0] = "batch_report"
    report.write(b.fresh())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rerun", action="store_true", help="also count a second night of the same date")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        n = sample_night(root)
        for label in ("first night", "re-run") if args.rerun else ("first night",):
            with counting() as (counts, detail, stage):
                night(root, stage)
            total = sum(counts.values())
            print(f"{label}: {n} documents, {total} store operations = {total / n:.2f} per document")
            print("  by operation:", dict(counts.most_common()))
            by_stage = collections.Counter()
            for (s, _, _), v in detail.items():
                by_stage[s] += v
            print("  by stage:", dict(by_stage.most_common()))
            for (s, op, name), v in detail.most_common(args.top):
                print(f"  {v:4d} {s:18s} {op:12s} {name}")


if __name__ == "__main__":
    main()
