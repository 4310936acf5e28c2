"""An input that changes under the night (ADR 0033): a PDF listed by ``discover`` as a regular
file and replaced before ``layout`` reads it — by a symbolic link (to a file outside the root, to
another input), a folder, a FIFO, or removed — is that document's ``INPUT_NOT_REGULAR``, escalated
with the error in its packet; the other documents of the part are parsed and routed as on a night
without the swap, nothing is read through the link, and a path refusal never becomes a failed
(and retried) task. The same for a companion swapped before ``verify`` reads it. Explicit cases,
a swap while the layout part runs (the parse worker's own no-follow open), Document AI's online
path, the task's retry rule, and a hypothesis property over swaps between discover and layout."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.hostile import kit
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.layout.errors import ParseError
from docverify.layout.local_pdf import parse_pdf
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.storage.store import ArtifactStore

DS = kit.DS
NOTE = kit.sample("note_mts_19.pdf")
GENOMIC = kit.sample("genomic_brca_ngs.pdf")
OTHER_NOTE = kit.text_pdf(kit.CLINICAL_LINES)
#: what an entry named ``*.pdf`` can be; ``removed``: no entry
STATES = ("file", "link_outside", "link_inside", "folder", "fifo", "removed")
#: the words the error message names each state with (docverify.storage.inputs)
WORDS = {"link_outside": "symbolic link", "link_inside": "symbolic link", "folder": "folder",
         "fifo": "FIFO", "removed": "gone"}


def small_night(tmp: pathlib.Path, targets: dict[str, bytes]) -> kit.Night:
    """Two clean documents that are never touched, plus ``targets`` (name → bytes) to swap; a PDF
    and a secret outside the root, where a followed link would lead."""
    root = tmp / "root"
    night = kit.Night(root, tmp / "outside", root / "incoming" / DS)
    night.incoming.mkdir(parents=True)
    night.outside.mkdir()
    (night.outside / "outside.pdf").write_bytes(kit.text_pdf([kit.SECRET_OUTSIDE]))
    (night.outside / "shadow").write_text(kit.SECRET_OUTSIDE + "\n")
    night.add("note_mts_19.pdf", NOTE, "route")
    night.add("genomic_brca_ngs.pdf", GENOMIC, "route")
    for name, data in targets.items():
        night.add(name, data, "route")
    return night


def put(night: kit.Night, name: str, state: str, data: bytes) -> None:
    """Make the entry ``name`` of the incoming folder be ``state`` (whatever it was)."""
    p = night.incoming / name
    if p.is_symlink() or p.is_file() or p.is_fifo():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)
    if state == "file":
        p.write_bytes(data)
    elif state == "link_outside":
        os.symlink(night.outside / "outside.pdf", p)
    elif state == "link_inside":
        os.symlink(night.incoming / "note_mts_19.pdf", p)
    elif state == "folder":
        p.mkdir()
    elif state == "fifo":
        os.mkfifo(p)


def _doc(run: dict, name: str) -> dict:
    return next(d for d in run["batch"].manifest()["documents"] if d["pdf_rel"].endswith("/" + name))


def _one_typed_error(night: kit.Night, run: dict, name: str, code: str = "INPUT_NOT_REGULAR") -> dict:
    """The document of ``name`` ended in exactly one typed error, in its report entry, its error
    record and its one packet; nothing of it was laid out."""
    doc = _doc(run, name)
    entry = next(d for d in run["report"]["per_document"] if d["doc_id"] == doc["doc_id"])
    assert entry["error"] == code and entry["final_decision"] == "ESCALATE_TO_SME", entry
    assert [e["doc_id"] for e in run["report"]["errors"]].count(doc["doc_id"]) == 1
    packets = kit.packets_of(night.root, doc)
    assert len(packets) == 1 and json.loads(packets[0].read_text())["error"]["error"] == code
    err = json.loads((night.root / "runs" / DS / doc["doc_id"] / "error.json").read_text())
    assert err["error"] == code
    assert not (night.root / "runs" / DS / doc["doc_id"] / "bundle.json").exists()  # nothing parsed
    return err


def _outcomes(run: dict) -> dict[str, tuple]:
    """Each document's ending: decision, error code, route (accepted / packet)."""
    root = run["batch"].store.root
    out = {}
    for d in run["report"]["per_document"]:
        accepted = (pathlib.Path(root) / "accepted" / DS / f"{d['doc_id']}.json").exists()
        out[d["doc_id"]] = (d["final_decision"], d.get("error"), accepted)
    return out


# ----------------------------------------------------------------------------- between discover and layout


def test_pdfs_swapped_after_discovery_are_each_their_documents_typed_error_and_the_part_goes_on(tmp_path):
    """Issue 33's case and its kin in one night (one layout part): five PDFs listed as regular
    files are swapped before layout — for a link out of the root, a link to another input, a
    folder, a FIFO, nothing. Each ends in INPUT_NOT_REGULAR naming what it is now; the clean
    documents of the same part are parsed and routed; no stage fails; nothing is read through a
    link (no bundle of the outside PDF's text, its secret nowhere)."""
    swapped = {s: f"swap_{s}.pdf" for s in STATES if s != "file"}
    night = small_night(tmp_path, {name: OTHER_NOTE for name in swapped.values()})
    for name in swapped.values():
        night.expect[name] = ("error", "INPUT_NOT_REGULAR")

    def swap() -> None:
        for state, name in swapped.items():
            put(night, name, state, OTHER_NOTE)

    run = kit.run_night(night, OfflineJudge(), after={"discover": swap})
    kit.check_night(night, run)  # one route each, nothing leaked or accepted silently, nothing outside read
    for state, name in swapped.items():
        err = _one_typed_error(night, run, name)
        assert err["stage"] == "layout" and WORDS[state] in err["message"], err["message"]
        assert kit.SECRET_OUTSIDE not in json.dumps(err)
    layout = json.loads((night.root / "runs" / DS / "_stages" / "layout.json").read_text())
    assert sorted(layout["ok"]) == sorted([sid("genomic_brca_ngs"), sid("note_mts_19")])  # the part went on
    assert layout["errors"] == len(swapped)


def test_a_pdf_swapped_while_its_layout_part_runs_is_refused_by_the_parse_worker(tmp_path, monkeypatch):
    """The swap after the layout's own check (the part's PDFs are handed to the parse workers,
    then one is replaced): the worker opens it without following a link and refuses what is not
    a regular file under the root; the layout names it INPUT_NOT_REGULAR. The other PDFs of the
    part get their bundles."""
    from docverify.stages import layout as layout_stage

    names = {s: f"late_{s}.pdf" for s in ("link_outside", "link_inside", "folder", "removed")}
    night = small_night(tmp_path, {n: OTHER_NOTE for n in names.values()})
    b = Batch(store=ArtifactStore(night.root), ds=DS, run_id="late")
    discover(b.fresh())
    real = layout_stage._local_file
    by_name = {v: k for k, v in names.items()}

    def then_swapped(batch, doc, tmp):  # the layout's check passes, then the file system changes
        path = real(batch, doc, tmp)
        name = doc.pdf_rel.rsplit("/", 1)[-1]
        if name in by_name:
            put(night, name, by_name[name], OTHER_NOTE)
        return path

    monkeypatch.setattr(layout_stage, "_local_file", then_swapped)
    parts = layout_stage.plan_layout_local(b.fresh(), shard_size=1, max_shards=1)
    assert len(parts) == 1
    out = layout_stage.layout_local_part(b.fresh(), parts[0], workers=2, timeout_s=60)
    index = layout_stage.merge_layout_local(b.fresh())
    assert out.errors == len(names) and sorted(index.record["ok"]) == sorted([sid("genomic_brca_ngs"), sid("note_mts_19")])
    for state, name in names.items():
        doc_id = sid(name[:-4])
        rec = index.record["failed"][doc_id]
        assert rec["error"] == "INPUT_NOT_REGULAR" and WORDS[state] in rec["message"], rec
        assert not (night.root / "runs" / DS / doc_id / "bundle.json").exists()


def test_the_parse_worker_never_follows_a_link_of_the_storage_root(tmp_path):
    """``parse_pdf(root=…)`` (what the layout's workers run): a link, a folder, a FIFO, a missing
    file and a file under a folder that resolves outside the root are refused (UNSUPPORTED, the
    layout names them); the CLI's ``parse_pdf`` without ``root`` still follows the path it is given."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "in").mkdir(parents=True)
    outside.mkdir()
    (outside / "o.pdf").write_bytes(OTHER_NOTE)
    (root / "in" / "ok.pdf").write_bytes(OTHER_NOTE)
    os.symlink(outside / "o.pdf", root / "in" / "link.pdf")
    (root / "in" / "dir.pdf").mkdir()
    os.mkfifo(root / "in" / "fifo.pdf")
    os.symlink(outside, root / "escape")
    real = os.path.realpath(root)
    assert parse_pdf(root / "in" / "ok.pdf", root=real).total_pages == 1
    for rel in ("in/link.pdf", "in/dir.pdf", "in/fifo.pdf", "in/gone.pdf", "escape/o.pdf"):
        with pytest.raises(ParseError) as exc:
            parse_pdf(root / rel, root=real)
        assert exc.value.code == "UNSUPPORTED", rel
    assert parse_pdf(root / "in" / "link.pdf").total_pages == 1  # the CLI: the user's own path, followed


def test_document_ai_online_refuses_a_swapped_pdf_without_sending_it(tmp_path):
    """The online Document AI layout (a local root) reads each PDF the same way: a PDF swapped
    for a link after discovery is INPUT_NOT_REGULAR and never sent; the others are laid out."""
    from tests.fake_docai import layout_parser_document

    from docverify.stages.layout import layout_docai_online

    night = small_night(tmp_path, {"swapped.pdf": OTHER_NOTE})
    b = Batch(store=ArtifactStore(night.root), ds=DS, run_id="docai")
    discover(b.fresh())
    put(night, "swapped.pdf", "link_outside", OTHER_NOTE)
    sent: list[bytes] = []

    def process(data: bytes) -> dict:
        sent.append(data)
        return layout_parser_document(data)

    out = layout_docai_online(b.fresh(), process)
    assert out.errors == 1 and sorted(out.record["ok"]) == sorted([sid("genomic_brca_ngs"), sid("note_mts_19")])
    assert out.record["failed"][sid("swapped")]["error"] == "INPUT_NOT_REGULAR"
    assert sorted(sent) == sorted([NOTE, GENOMIC])  # the outside PDF's bytes were never sent


def test_a_companion_swapped_before_verify_is_that_documents_typed_error(tmp_path):
    """A ``<doc>.classification.json`` listed as a regular file and swapped before verify reads it
    (a link to a JSON outside the root, a folder, removed): that document's INPUT_NOT_REGULAR at
    the classify step, escalated with it; a ``<doc>.production.json`` swapped for a link is left out
    of its packet; no link is followed (the outside JSON's text is nowhere); the rest of the night
    is routed."""
    companion = json.dumps(kit._classification("x")).encode()
    states = {"link_outside": "comp_link.pdf", "folder": "comp_folder.pdf", "removed": "comp_gone.pdf"}
    night = small_night(tmp_path, {n: NOTE for n in states.values()})
    (night.outside / "outside.json").write_bytes(companion.replace(kit.SECRET_COMPANION.encode(),
                                                                   kit.SECRET_OUTSIDE.encode()))
    for name in states.values():
        (night.incoming / f"{name[:-4]}.classification.json").write_bytes(companion)
        night.expect[name] = ("error", "INPUT_NOT_REGULAR")
    # a document escalated on its classification's shape (V1 SCHEMA_INVALID), whose production
    # companion is swapped too
    night.add("prod.pdf", NOTE, "escalate")
    (night.incoming / "prod.classification.json").write_text(json.dumps({"doc_id": 5, "segments": "all"}))
    production = night.incoming / "prod.production.json"
    production.write_bytes(companion)

    def swap() -> None:
        production.unlink()
        os.symlink(night.outside / "outside.json", production)
        for state, name in states.items():
            p = night.incoming / f"{name[:-4]}.classification.json"
            p.unlink()
            if state == "link_outside":
                os.symlink(night.outside / "outside.json", p)
            elif state == "folder":
                p.mkdir()

    run = kit.run_night(night, OfflineJudge(), after={"layout": swap})
    (night.outside / "outside.json").unlink()  # check_night lists what it expects outside
    kit.check_night(night, run)
    for state, name in states.items():
        doc = _doc(run, name)
        entry = next(d for d in run["report"]["per_document"] if d["doc_id"] == doc["doc_id"])
        assert entry["error"] == "INPUT_NOT_REGULAR", entry
        packet = json.loads(kit.packets_of(night.root, doc)[0].read_text())
        assert packet["error"]["error"] == "INPUT_NOT_REGULAR" and WORDS[state] in packet["error"]["message"]
    prod_packet = json.loads(kit.packets_of(night.root, _doc(run, "prod.pdf"))[0].read_text())
    assert prod_packet.get("production_classification") is None and not prod_packet.get("error")
    assert kit.SECRET_OUTSIDE not in json.dumps([json.loads(p.read_text())
                                                  for p in (night.root / "sme_packets").glob("*.json")])


def test_on_a_gcs_root_a_pdf_removed_after_discovery_is_that_documents_error(gcs_root):
    """A gs:// root has no links: an object listed by discover and deleted before the layout copies
    it to the parse workers is that document's INPUT_NOT_REGULAR ("gone"), not a failed part
    (it was a FileNotFoundError out of the layout); the other PDF is laid out."""
    from docverify.stages.layout import layout_local

    store = ArtifactStore(gcs_root.path())
    store.write_bytes(f"incoming/{DS}/note_mts_19.pdf", NOTE)
    store.write_bytes(f"incoming/{DS}/gone.pdf", OTHER_NOTE)
    b = Batch(store=store, ds=DS, run_id="gcs")
    discover(b.fresh())
    store.delete(f"incoming/{DS}/gone.pdf")
    out = layout_local(b.fresh(), workers=1, timeout_s=60, ocr=False)
    assert out.record["ok"] == [sid("note_mts_19")] and out.record["failed"][sid("gone")]["error"] == "INPUT_NOT_REGULAR"
    assert "gone" in out.record["failed"][sid("gone")]["message"]


# ----------------------------------------------------------------------------- the task's retry rule


def test_a_path_the_store_refuses_fails_the_task_at_once_and_a_swapped_pdf_fails_no_task(monkeypatch, tmp_path):
    """Airflow's side: a layout_parse task whose part holds a PDF swapped for a link finishes
    (the document's error is in its record); a path the store refuses at the task's level (the
    incoming folder itself a link out of the root) fails the task at once, not retried — another
    try would meet the same link."""
    from airflow.sdk.exceptions import AirflowFailException

    from docverify_airflow.tasks import nightly as tasks

    night = small_night(tmp_path, {"swapped.pdf": OTHER_NOTE})
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(night.root))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_OCR", "false")
    ctx = {"params": {}, "ds": DS, "run_id": "r"}
    tasks.discover(dict(ctx))
    put(night, "swapped.pdf", "link_outside", OTHER_NOTE)
    parts = tasks.layout_plan(dict(ctx))
    outs = [tasks.layout_parse(dict(ctx), part) for part in parts]
    assert sum(o["errors"] for o in outs) == 1
    merged = tasks.layout(dict(ctx))
    assert merged["errors"] == 1

    moved = tmp_path / "moved_incoming"
    shutil.move(str(night.root / "incoming"), moved)
    os.symlink(moved, night.root / "incoming")  # the incoming folder: a link out of the root
    with pytest.raises(AirflowFailException, match="OutsideRootError.*not retried"):
        tasks.discover(dict(ctx))


# ----------------------------------------------------------------------------- the property


@functools.cache
def _baseline() -> dict[str, tuple]:
    """The night with every target a regular file all along (the outcome to compare with)."""
    with tempfile.TemporaryDirectory() as tmp:
        night = small_night(pathlib.Path(tmp), TARGETS)
        run = kit.run_night(night, OfflineJudge(), watch=False)
        kit.check_night(night, run)
        return _outcomes(run)


TARGETS = {"t_note.pdf": NOTE, "t_other.pdf": OTHER_NOTE}
STATE = st.sampled_from(STATES)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(plan=st.fixed_dictionaries({name: st.tuples(STATE, STATE) for name in TARGETS}))
@example(plan={"t_note.pdf": ("file", "link_outside"), "t_other.pdf": ("file", "file")})  # issue 33's case
@example(plan={"t_note.pdf": ("link_inside", "file"), "t_other.pdf": ("file", "removed")})
@example(plan={"t_note.pdf": ("removed", "file"), "t_other.pdf": ("folder", "fifo")})
def test_swaps_between_discover_and_layout_end_in_one_typed_error_and_leave_the_rest_unchanged(plan):
    """Each target is made ``before`` for discover and ``after`` for layout. A target that was not
    a regular file at discovery is refused there; one that was and is no longer one is refused by
    the layout: either way exactly one INPUT_NOT_REGULAR, in its packet. A target absent at
    discovery is not in the night. Every other document — the untouched ones and a target that
    stayed a regular file — ends exactly as on the night without swaps."""
    base = _baseline()
    with tempfile.TemporaryDirectory() as tmp:
        night = small_night(pathlib.Path(tmp), TARGETS)
        for name, (before, _) in plan.items():
            put(night, name, before, TARGETS[name])
            if before == "removed":
                del night.expect[name]
            elif before != "file":
                night.expect[name] = ("error", "INPUT_NOT_REGULAR")

        def swap() -> None:
            for name, (before, after) in plan.items():
                put(night, name, after, TARGETS[name])
                if before == "file" and after != "file":
                    night.expect[name] = ("error", "INPUT_NOT_REGULAR")

        run = kit.run_night(night, OfflineJudge(), after={"discover": swap})
        kit.check_night(night, run)  # one route each; no silent accept, no leak, nothing outside read
        refused = {name for name, (kind, _) in night.expect.items() if kind == "error"}
        for name in refused:
            stage = "discover" if plan[name][0] != "file" else "layout"
            assert _one_typed_error(night, run, name)["stage"] == stage
        outcomes = _outcomes(run)
        kept = {sid(name[:-4]) for name in night.expect if name not in refused}
        assert {k: outcomes[k] for k in kept} == {k: base[k] for k in kept}
        assert set(outcomes) == kept | {_doc(run, n)["doc_id"] for n in refused}
