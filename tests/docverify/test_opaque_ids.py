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


def test_a_message_for_viewers_names_the_id_in_every_place_it_named_the_file():
    from docverify.storage.paths import doc_id_for, file_token, redact_names

    name = "Befund Müller (Kopie).pdf"
    doc = doc_id_for(name)
    uri, rel = "file:///s/incoming/2026-11-20/Befund%20M%C3%BCller%20%28Kopie%29.pdf", f"incoming/2026-11-20/{name}"
    message = (f"{uri}: the PDF could not be parsed (PDFium: Failed to load {rel}); 'Befund Müller (Kopie)' "
               f"is cut after 40 % of its bytes")
    shown = redact_names(message, doc, uri, rel)
    assert shown == (f"[document {doc}]: the PDF could not be parsed (PDFium: Failed to load [document {doc}]); "
                     f"'[document {doc}]' is cut after 40 % of its bytes")
    assert "Müller" not in shown and "M%C3%BC" not in shown
    # one pass: a file called doc.pdf does not eat the words the replacement brings
    assert redact_names("doc.pdf: bad", "doc-1", "incoming/x/doc.pdf") == "[document doc-1]: bad"
    assert redact_names("no name here", "doc-1", None) == "no name here"
    assert re.fullmatch(r"file-[0-9a-f]{12}", file_token("Müller notes.txt"))
    assert file_token("a/Müller notes.txt") == file_token("Müller notes.txt") != file_token("Muller notes.txt")
