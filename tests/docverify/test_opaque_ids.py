"""ADR 0050's migration: a night first run under the ids of before (made from the file name), then
re-run with the opaque ids. The old ids are documents no longer listed: their accepted record and
pending packet are withdrawn with the reason; the night holds each file once, under its new id;
an answered packet stays, and the file gets a new review."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

import pytest
from tests.batch_stages import copy_samples, run_stages
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.sme.packets import list_pending_reviews
from docverify.stages.common import Batch
from docverify.storage.paths import name_bytes
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"
NAMES = ["note_mts_19", "quest_cbc_panel", "lab_requisition_form"]


def old_doc_id_for(name: str) -> str:
    """The rule of before ADR 0050 (a safe stem was its own id; else a readable prefix + 10 hex)."""
    base = name.rsplit("/", 1)[-1]
    stem = base[:-4] if base.lower().endswith(".pdf") else base
    if base.endswith(".pdf") and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", stem) and len(stem) <= 80:
        return stem
    folded = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode()
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", folded).strip("._-")[:80].rstrip("._-") or "doc"
    return f"{readable}_{hashlib.sha256(name_bytes(base)).hexdigest()[:10]}"


@pytest.fixture
def old_night(tmp_path, monkeypatch):
    copy_samples(tmp_path, DS, NAMES)
    with monkeypatch.context() as m:
        m.setattr("docverify.stages.discover.doc_id_for", old_doc_id_for)
        run_stages(Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="before"), OfflineJudge())
    store = ArtifactStore(tmp_path)
    assert (tmp_path / "accepted" / DS / "note_mts_19.json").is_file()
    assert {r["doc_id"] for r in list_pending_reviews(store)} == {"quest_cbc_panel", "lab_requisition_form"}
    return tmp_path, store


def test_a_rerun_after_the_change_withdraws_the_old_ids_and_holds_each_file_once(old_night):
    root, store = old_night
    from docverify.sme.helper import SMEReviewHelper

    SMEReviewHelper(root).save_review("lab_requisition_form", agrees=True, reviewer="dr.before")  # answered
    b = Batch(store=store, ds=DS, run_id="after")
    run_stages(b, OfflineJudge())
    report.write(b.fresh())
    new = {n: sid(n) for n in NAMES}
    assert sorted(p.stem for p in (root / "accepted" / DS).glob("*.json")) == [new["note_mts_19"]]
    moved = json.loads((root / "withdrawn" / DS / "accepted_note_mts_19.json").read_text())
    assert "no longer in the incoming folder" in moved["reason"] and moved["run_id"] == "after"
    withdrawn = sorted(p.name for p in (root / "withdrawn" / DS).glob("sme_packet_*.json"))
    assert len(withdrawn) == 1 and "_quest_cbc_panel_" in withdrawn[0]  # the pending one; the answered one stays
    pending = {r["doc_id"] for r in list_pending_reviews(store)}
    assert pending == {new["quest_cbc_panel"], new["lab_requisition_form"]}  # each file once, a new review
    answered = list((root / "sme_packets").glob("sme_packet_*_lab_requisition_form_*.json"))
    assert len(answered) == 1 and json.loads(answered[0].read_text())["review_status"] == "reviewed"
    rep = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    assert rep["documents"] == 3 and sorted(d["doc_id"] for d in rep["per_document"]) == sorted(new.values())
    assert sorted(rep["inputs"]["removed"]) == ["note_mts_19", "quest_cbc_panel"]  # the answered one: nothing withdrawn
