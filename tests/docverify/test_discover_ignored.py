"""A file in the night's folder that is neither a PDF nor a companion is not read, and never
vanishes without a trace (ADR 0036): it is listed in the manifest and counted in the log."""

from __future__ import annotations

import logging

from tests.batch_stages import copy_samples

from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.storage.paths import file_token
from docverify.storage.store import ArtifactStore

DS = "2026-11-21"


def test_files_that_are_not_pdfs_are_listed_as_ignored(tmp_path, caplog):
    incoming = copy_samples(tmp_path, DS, ["quest_cbc_panel"])
    (incoming / "scan_0001.tiff").write_bytes(b"II*\x00")
    (incoming / "notes.docx").write_bytes(b"PK")
    (incoming / "old").mkdir()
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="r1")
    with caplog.at_level(logging.WARNING):
        out = discover(b)
    assert out.documents == 1
    manifest = b.fresh().rs.manifest_if_exists()
    assert sorted((manifest.model_extra or {})["ignored_files"]) == ["notes.docx", "old", "scan_0001.tiff"]
    assert any("3 file(s)" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    # the log counts them with opaque tokens, in the manifest's order: a name may name the patient (ADR 0050)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert not any(n in logged for n in ("notes", "scan_0001", "old'", "quest_cbc_panel")), logged
    assert all(file_token(n) in logged for n in ("notes.docx", "old", "scan_0001.tiff"))
    # a folder of PDFs and companions only has nothing ignored
    (incoming / "scan_0001.tiff").unlink()
    (incoming / "notes.docx").unlink()
    (incoming / "old").rmdir()
    discover(b.fresh())
    assert "ignored_files" not in (b.fresh().rs.manifest_if_exists().model_extra or {})
