"""The bytes discovered are the bytes read (issue 42 item 5, ADR 0052): a PDF replaced by another
regular file after ``discover`` hashed it is that document's ``INPUT_CHANGED`` — found by the parse
worker from the very bytes it would parse (no second read), named by the document's id, never
laid out under the old id — and every other document of the night ends as on a night without the
replacement. The same for Document AI's online path (the bytes it would send)."""

from __future__ import annotations

import hashlib
import json

import pytest
from tests.hostile import kit
from tests.hostile.test_swaps import (
    DS,
    GENOMIC,
    NOTE,
    OTHER_NOTE,
    _doc,
    _one_typed_error,
    _outcomes,
    small_night,
)

from docverify.judging.judges import OfflineJudge
from docverify.layout.errors import ParseError
from docverify.layout.local_pdf import parse_pdf
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.storage.store import ArtifactStore

#: what the replaced file holds after discovery: another PDF, readable, of another document
REPLACEMENT = kit.text_pdf(["DISCHARGE SUMMARY", "Another patient's letter, put in the folder after discovery."])


def _clean_ids(run: dict) -> set[str]:
    return {_doc(run, n)["doc_id"] for n in ("note_mts_19.pdf", "genomic_brca_ngs.pdf")}


def test_a_pdf_replaced_after_discovery_is_its_input_changed_and_the_others_end_as_without_it(tmp_path):
    night = small_night(tmp_path / "changed", {"replaced.pdf": OTHER_NOTE})
    night.expect["replaced.pdf"] = ("error", "INPUT_CHANGED")
    run = kit.run_night(night, OfflineJudge(), workers=1,
                        after={"discover": lambda: (night.incoming / "replaced.pdf").write_bytes(REPLACEMENT)})
    kit.check_night(night, run)  # one route each, nothing accepted silently
    doc = _doc(run, "replaced.pdf")
    assert doc["sha256"] == hashlib.sha256(OTHER_NOTE).hexdigest()  # discovery hashed the first bytes
    err = _one_typed_error(night, run, "replaced.pdf", "INPUT_CHANGED")  # its packet, no bundle
    assert err["stage"] == "layout"
    assert err["message"].startswith(f"{doc['doc_id']}: the PDF read for this document is not the one")
    assert "re-run the night" in err["message"] and "replaced.pdf" not in err["message"]
    layout = json.loads((night.root / "runs" / DS / "_stages" / "layout.json").read_text())
    assert set(layout["ok"]) == _clean_ids(run) and layout["errors"] == 1
    assert layout["failed"][doc["doc_id"]]["error"] == "INPUT_CHANGED"

    # the same night without the replacement: the other documents end the same way
    clean = small_night(tmp_path / "clean", {"replaced.pdf": OTHER_NOTE})
    base = kit.run_night(clean, OfflineJudge(), workers=1)
    ids = _clean_ids(run)
    assert ids == _clean_ids(base)
    assert {k: v for k, v in _outcomes(run).items() if k in ids} == \
        {k: v for k, v in _outcomes(base).items() if k in ids}
    assert _outcomes(base)[_doc(base, "replaced.pdf")["doc_id"]][1] is None  # not an error there


def test_the_parser_refuses_bytes_with_another_hash_before_reading_them(tmp_path):
    p = tmp_path / "x.pdf"
    p.write_bytes(NOTE)
    assert parse_pdf(p, expect_sha256=hashlib.sha256(NOTE).hexdigest()).total_pages >= 1
    p.write_bytes(GENOMIC)
    with pytest.raises(ParseError) as ei:
        parse_pdf(p, expect_sha256=hashlib.sha256(NOTE).hexdigest())
    assert ei.value.code == "INPUT_CHANGED"
    p.write_bytes(b"not a pdf at all")  # the hash is checked first: a changed file is INPUT_CHANGED whatever it holds
    with pytest.raises(ParseError) as ei:
        parse_pdf(p, expect_sha256=hashlib.sha256(NOTE).hexdigest())
    assert ei.value.code == "INPUT_CHANGED"


def test_document_ai_online_does_not_send_a_replaced_pdf(tmp_path):
    from tests.fake_docai import layout_parser_document

    from docverify.stages.layout import layout_docai_online

    night = small_night(tmp_path, {"replaced.pdf": OTHER_NOTE})
    b = Batch(store=ArtifactStore(night.root), ds=DS, run_id="docai")
    discover(b.fresh())
    (night.incoming / "replaced.pdf").write_bytes(REPLACEMENT)
    sent: list[bytes] = []

    def process(data: bytes) -> dict:
        sent.append(data)
        return layout_parser_document(data)

    out = layout_docai_online(b.fresh(), process)
    replaced = next(d for d in b.rs.manifest().documents if d.pdf_rel.endswith("/replaced.pdf"))
    assert out.errors == 1 and len(out.record["ok"]) == 2
    rec = out.record["failed"][replaced.doc_id]
    assert rec["error"] == "INPUT_CHANGED" and rec["message"].startswith(replaced.doc_id)
    assert sorted(sent) == sorted([NOTE, GENOMIC])  # the replacement's bytes were never sent
