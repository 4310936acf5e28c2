"""A night with one hostile input of every kind (tests/hostile/kit.py): the clean documents are
routed as on any night, every hostile one is escalated with a typed error in its packet, and
nothing is lost, leaked, silently accepted, or read/written outside the storage root."""

from __future__ import annotations

import json
import os
import pathlib
import re

import pytest
from tests.hostile import kit
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.storage.store import ArtifactStore


@pytest.fixture
def night(tmp_path, corpora_dir):
    return kit.make_night(tmp_path, corpora=corpora_dir)


@pytest.mark.slow
def test_hostile_night_completes_with_nothing_lost_leaked_or_silently_accepted(night):
    run = kit.run_night(night, OfflineJudge())
    figures = kit.check_night(night, run)
    assert figures["lost"] == figures["silent_accepts"] == figures["outside_accesses"] == 0
    # the clean documents (and the oddly named copies of one) were verified and accepted as usual
    rep = {d["doc_id"]: d for d in run["report"]["per_document"]}
    assert rep[sid("note_mts_19")]["final_decision"] == rep[sid("genomic_brca_ngs")]["final_decision"] == "AUTO_ACCEPT"
    # every hostile input is in the report's error list with its code, counted
    assert len(run["report"]["errors"]) == figures["escalated_with_error"] >= 25


@pytest.mark.slow
def test_names_become_distinct_opaque_ids(night):
    kit.run_night(night, OfflineJudge(), watch=False)
    ids = {d["pdf_rel"].rsplit("/", 1)[-1]: d["doc_id"] for d in
           ArtifactStore(night.root).read_json(f"runs/{kit.DS}/_manifest.json")["documents"]}
    # ADR 0050: doc- + 12 hex whatever the name, one id per name (a.pdf and a.PDF too), the name not in it
    assert all(re.fullmatch(r"doc-[0-9a-f]{12}", i) for i in ids.values()), ids
    assert len(set(ids.values())) == len(ids)
    assert ids["a.pdf"] != ids["a.PDF"] and ids["日本語.pdf"] != ids["中文.pdf"]
    assert all(sid(name[:-4]) == i for name, i in ids.items() if name.endswith(".pdf"))
    # the 250-character name: accepted record, packet names and temp names all fit
    long_id = ids["x" * 246 + ".pdf"]
    assert (night.root / "accepted" / kit.DS / f"{long_id}.json").exists()


@pytest.mark.slow
def test_symlinks_and_special_files_are_never_followed_or_read(night):
    run = kit.run_night(night, OfflineJudge())
    err = json.loads((night.root / "runs" / kit.DS / sid("link_to_shadow") / "error.json").read_text())
    assert err["error"] == "INPUT_NOT_REGULAR" and "symbolic link" in err["message"]
    assert kit.SECRET_OUTSIDE not in json.dumps(run["report"])
    # the PDF outside the folder was not processed: no bundle for the link
    assert not (night.root / "runs" / kit.DS / sid("link_to_outside_pdf") / "bundle.json").exists()
    assert not (night.root / "runs" / kit.DS / sid("fifo") / "bundle.json").exists()
    assert run["outside"] == []


def test_a_file_over_the_size_limit_is_refused_before_any_read(tmp_path):
    incoming = tmp_path / "incoming" / kit.DS
    incoming.mkdir(parents=True)
    big = incoming / "huge.pdf"
    with open(big, "wb") as fh:  # 3 GB, sparse: nothing is stored, nothing may be read
        fh.truncate(3 * 1024 ** 3)
    b = Batch(store=ArtifactStore(tmp_path), ds=kit.DS)
    opened = []

    def hook(event, args):
        if event == "open" and args and str(args[0]).endswith("huge.pdf"):
            opened.append(args)

    watch = kit.AccessWatch(tmp_path, tmp_path)
    with watch:
        import sys
        sys.addaudithook(hook)
        discover(b)
    [doc] = b.manifest()["documents"]
    assert doc["input_error"] == "TOO_LARGE" and doc["sha256"] == ""
    assert opened == []
    assert b.store.read_json(f"runs/{kit.DS}/{sid('huge')}/error.json")["error"] == "TOO_LARGE"


@pytest.mark.slow
def test_heavy_hostile_night_20000_pages_5mb_page_flate_bomb(tmp_path, corpora_dir):
    """The same night plus the heavy inputs: each is a typed error of its own document, in
    bounded time and memory (the parse worker's RLIMIT_AS turns the 1 GB flate bomb into an
    error instead of gigabytes)."""
    night = kit.make_night(tmp_path, corpora=corpora_dir, heavy=True)
    run = kit.run_night(night, OfflineJudge())
    figures = kit.check_night(night, run)
    assert figures["lost"] == figures["silent_accepts"] == 0
    errors = {e["doc_id"]: e["error"] for e in run["report"]["errors"]}
    assert errors[sid("blank_20000_pages")] == "TOO_LARGE" and errors[sid("text_5mb_one_page")] == "TOO_LARGE"
    assert errors[sid("flate_bomb")] in ("TOO_LARGE", "CORRUPT")
    assert kit.peak_rss_mb() < 2048 + 512  # the worker cap (2 GiB) plus the test process


def test_parse_workers_run_under_the_memory_cap(tmp_path, monkeypatch):
    from docverify.layout.errors import ParseError
    from docverify.layout.pool import parse_pdf_bounded
    from docverify.storage.limits import PARSE_WORKER_MEMORY_BYTES

    pdf = tmp_path / "x.pdf"
    pdf.write_bytes(kit.text_pdf(kit.CLINICAL_LINES))
    with pytest.raises(ParseError) as exc:
        parse_pdf_bounded(pdf, parse_fn="tests.hostile.worker_probe:report_rlimit")
    assert exc.value.message == f"RLIMIT_AS={PARSE_WORKER_MEMORY_BYTES}"
    monkeypatch.setenv("DOCVERIFY_PARSE_MEMORY_BYTES", str(512 * 1024 * 1024))
    with pytest.raises(ParseError) as exc:
        parse_pdf_bounded(pdf, parse_fn="tests.hostile.worker_probe:report_rlimit")
    assert exc.value.message == f"RLIMIT_AS={512 * 1024 * 1024}"
    assert os.environ["DOCVERIFY_PARSE_MEMORY_BYTES"]


def test_a_worker_that_ran_out_of_memory_never_parses_the_next_file(tmp_path):
    """After a MemoryError (a decompression bomb caught in Python) the worker's heap may stay near
    the cap; the next file must not inherit it (seen: a 5 MB text page parsed after the flate bomb
    in the same worker crashed as CORRUPT instead of TOO_LARGE): the pool replaces that worker."""
    from docverify.layout.pool import live_worker_pids, parse_many_bounded

    names = ["a.pdf", "bomb.pdf", "b.pdf", "c.pdf"]
    for name in names:
        (tmp_path / name).write_bytes(b"%PDF-1.4")
    out = {pathlib.Path(p).name: r for p, r in parse_many_bounded(
        [tmp_path / n for n in names], workers=1, parse_fn="tests.hostile.worker_probe:memory_bomb_or_pid")}
    assert out["bomb.pdf"].code == "TOO_LARGE" and "decompression bomb" in out["bomb.pdf"].message
    pids = {n: out[n].message for n in ("a.pdf", "b.pdf", "c.pdf")}
    assert pids["a.pdf"] != pids["b.pdf"]  # a fresh worker after the bomb
    assert pids["b.pdf"] == pids["c.pdf"]  # and reused as before
    assert not live_worker_pids()
