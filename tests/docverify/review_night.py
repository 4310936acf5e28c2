"""A real night for the SME tests: the batch stages (no Airflow) on some sample PDFs, as
tests/docverify/test_batch.py runs them. Imported by the SME domain and DAG tests."""

from __future__ import annotations

import pathlib

from tests.batch_stages import copy_samples, run_stages

from docverify.judging.judges import OfflineJudge
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

DS = "2026-11-21"
REPO = pathlib.Path(__file__).resolve().parents[2]
#: escalated: quest (V3 trap), fabricated (V4), requisition (V3 admin), corrupt (parse error);
#: accepted: genomic_brca_ngs
SAMPLES = ("quest_cbc_panel", "fabricated_evidence", "lab_requisition_form", "corrupt_truncated", "genomic_brca_ngs")


def run_night(root: pathlib.Path, names=SAMPLES, extra_files: dict[str, bytes] | None = None) -> Batch:
    """Copy the samples into ``root/incoming/<DS>/`` (plus ``extra_files`` by name) and run every
    stage up to write_sme_packets. Returns the batch."""
    incoming = copy_samples(root, DS, names)
    for name, data in (extra_files or {}).items():
        (incoming / name).write_bytes(data)
    b = night_batch(root)
    run_stages(b, OfflineJudge())
    return b


def night_batch(root: pathlib.Path) -> Batch:
    """The batch :func:`run_night` ran on ``root`` (what it returns), e.g. for a root restored
    from a night run earlier (the ``review_night_root`` fixture)."""
    return Batch(store=ArtifactStore(root), ds=DS, run_id="night-test")
