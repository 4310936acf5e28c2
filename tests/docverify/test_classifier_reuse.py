"""A re-run reuses a stored classification only when the same classifier made it: a new
classifier version (or LLM prompt) classifies again; the same one is a cache hit."""

from __future__ import annotations

import json

from tests.batch_stages import run_stages
from tests.docverify.review_night import REPO
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore


class NewerOffline(OfflineJudge):
    @property
    def classifier_id(self) -> str:
        return "offline-v1+offline-lexicon-v999"


def _night(root, judge, run_id):
    incoming = root / "incoming" / "2026-11-20"
    incoming.mkdir(parents=True, exist_ok=True)
    (incoming / "note_mts_19.pdf").write_bytes((REPO / "include" / "samples" / "note_mts_19.pdf").read_bytes())
    b = Batch(store=ArtifactStore(root), ds="2026-11-20", run_id=run_id)
    run_stages(b, judge)
    return json.loads((root / "runs" / "2026-11-20" / "_stages" / "verify_0.json").read_text())


def test_same_classifier_reuses_a_new_one_classifies_again(tmp_path):
    assert _night(tmp_path, OfflineJudge(), "r1")["cache_hits"] == 0
    assert _night(tmp_path, OfflineJudge(), "r2")["cache_hits"] == 1
    assert _night(tmp_path, NewerOffline(), "r3")["cache_hits"] == 0  # upgraded classifier: no stale reuse
    meta = json.loads((tmp_path / "runs" / "2026-11-20" / sid("note_mts_19") / "result.json").read_text())[
        "classification_meta"]
    assert meta["classifier_id"] == "offline-v1+offline-lexicon-v999"


def test_the_llm_classifier_id_names_model_and_prompt():
    from docverify.llm.judge import LLMJudge

    judge = LLMJudge("test", "test-model")
    assert judge.classifier_id.startswith(f"{judge.name}+classifier_v1:")
