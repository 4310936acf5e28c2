"""A packet and its ground truth belong to one document of one night with its content: the same
file name on another night, or with other bytes, is a new review; the same night with the same
bytes is the same review (byte-identical re-run); packets of the older layout still work."""

from __future__ import annotations

import json
import shutil

from tests.batch_stages import run_stages
from tests.docverify.review_night import REPO
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.sme.ground_truth import ground_truth_versions, save_review
from docverify.sme.helper import SMEReviewHelper
from docverify.sme.packets import list_pending_reviews, load_packet, resolve_key, review_id
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

SAMPLES = REPO / "include" / "samples"


def _night(root, ds, names=("quest_cbc_panel", "genomic_brca_ngs"), run_id="run", copy=True):
    incoming = root / "incoming" / ds
    incoming.mkdir(parents=True, exist_ok=True)
    for n in names if copy else ():
        for f in SAMPLES.glob(f"{n}.*"):
            shutil.copy(f, incoming / f.name)
    b = Batch(store=ArtifactStore(root), ds=ds, run_id=run_id)
    run_stages(b, OfflineJudge())
    return b


def _keys(store):
    return sorted(r["review_id"] for r in list_pending_reviews(store))


def test_the_same_file_name_on_two_nights_is_two_reviews(tmp_path):
    store = ArtifactStore(tmp_path)
    _night(tmp_path, "2026-11-20")
    [first] = _keys(store)
    save_review(store, first, agrees=True, reviewer="dr.a")  # night 1 answered
    _night(tmp_path, "2026-11-21")  # the same PDF name (and bytes) arrives again
    [second] = _keys(store)
    assert second != first and second.startswith(f"2026-11-21_{sid('quest_cbc_panel')}_")
    # night 1's answer stays with night 1; night 2 is a review of its own, pending
    assert load_packet(store, first).review_status == "reviewed"
    assert load_packet(store, second).review_status == "pending"
    assert [r.review_id for r in ground_truth_versions(store, first)] == [first]
    assert not (tmp_path / "ground_truth" / f"gt_{second}.json").exists()


def test_other_bytes_on_the_same_night_are_a_new_review_and_the_old_pending_one_is_withdrawn(tmp_path):
    store = ArtifactStore(tmp_path)
    _night(tmp_path, "2026-11-20")
    [old] = _keys(store)
    pdf = tmp_path / "incoming" / "2026-11-20" / "quest_cbc_panel.pdf"
    pdf.write_bytes(pdf.read_bytes() + b"\n%% re-delivered\n")  # same name, other content
    _night(tmp_path, "2026-11-20", run_id="rerun", copy=False)
    [new] = _keys(store)
    assert new != old and new.startswith(f"2026-11-20_{sid('quest_cbc_panel')}_")
    assert not (tmp_path / "sme_packets" / f"sme_packet_{old}.json").exists()
    moved = json.loads((tmp_path / "withdrawn" / "2026-11-20" / f"sme_packet_{old}.json").read_text())
    assert "other content" in moved["reason"] and moved["record"]["review_status"] == "pending"


def test_a_reviewed_packet_of_old_content_is_never_touched(tmp_path):
    store = ArtifactStore(tmp_path)
    _night(tmp_path, "2026-11-20")
    [old] = _keys(store)
    save_review(store, old, agrees=True, reviewer="dr.a")
    before = (tmp_path / "sme_packets" / f"sme_packet_{old}.json").read_bytes()
    pdf = tmp_path / "incoming" / "2026-11-20" / "quest_cbc_panel.pdf"
    pdf.write_bytes(pdf.read_bytes() + b"\n%% re-delivered\n")
    _night(tmp_path, "2026-11-20", run_id="rerun", copy=False)
    assert (tmp_path / "sme_packets" / f"sme_packet_{old}.json").read_bytes() == before
    assert len(_keys(store)) == 1 and _keys(store)[0] != old  # the new content waits for its own review


def test_a_rerun_with_the_same_bytes_is_the_same_review_byte_for_byte(tmp_path):
    _night(tmp_path, "2026-11-20")
    folder = tmp_path / "sme_packets"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    _night(tmp_path, "2026-11-20", run_id="rerun")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert not (tmp_path / "withdrawn").exists()


def test_the_key_names_night_file_and_content():
    assert review_id("2026-11-20", "a", "0123456789abcdef") == "2026-11-20_a_0123456789"
    assert review_id("2026-11-20", "a", "") == "2026-11-20_a"


def test_a_bare_doc_id_resolves_while_it_is_unambiguous_and_old_packets_still_read(tmp_path):
    store = ArtifactStore(tmp_path)
    _night(tmp_path, "2026-11-20")
    helper = SMEReviewHelper(str(tmp_path))
    assert helper.load_packet(sid("quest_cbc_panel")).doc_id == sid("quest_cbc_panel")
    _night(tmp_path, "2026-11-21")
    try:
        resolve_key(store, sid("quest_cbc_panel"))
        raise AssertionError("two reviews of one file name must not resolve silently")
    except FileNotFoundError as exc:
        assert f"2 reviews of document '{sid('quest_cbc_panel')}'" in str(exc)
    # a packet of the older layout (sme_packet_<doc_id>.json, no review_id) is still listed and answered
    key = _keys(store)[0]
    legacy = json.loads((tmp_path / "sme_packets" / f"sme_packet_{key}.json").read_text())
    legacy.pop("review_id")
    legacy["doc_id"] = "legacy_doc"
    (tmp_path / "sme_packets" / "sme_packet_legacy_doc.json").write_text(json.dumps(legacy))
    assert "legacy_doc" in _keys(store)
    rec, uri = save_review(store, "legacy_doc", agrees=True, reviewer="dr.a")
    assert uri.endswith("/ground_truth/gt_legacy_doc.json") and rec.review_id == ""
