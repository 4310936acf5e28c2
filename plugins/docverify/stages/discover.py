"""discover: list the night's PDFs and companion classifications, hash them, write the manifest (unsafe or oversized inputs become typed input errors)."""

from __future__ import annotations

import logging
from typing import TypedDict

from docverify.domain.resources import sha256_bytes
from docverify.stages.common import Batch, StageStats, lineage
from docverify.stages.results import Discovered
from docverify.stages.routes import withdraw_removed
from docverify.storage.inputs import sha256_regular
from docverify.storage.limits import (
    INPUT_UNSAFE_NAME,
    MAX_PDF_BYTES,
    InputError,
    check_size,
)
from docverify.storage.paths import doc_id_for, file_token, name_problem, printable_name, quoted_name
from docverify.storage.runstore import (
    VOLATILE,
    ErrorRecord,
    Manifest,
    ManifestDoc,
)

log = logging.getLogger("docverify.stages")


class _Listed(TypedDict, total=False):
    """What the listing found besides the PDFs (in the manifest and discover's record, only when any)."""

    orphan_companions: list[str]
    removed: list[str]
    ignored_files: list[str]


def _input_error(batch: Batch, entry: ManifestDoc, code: str, message: str) -> None:
    """A document refused at discovery (not a regular file, too large): its error record, so it
    is escalated with the error in its packet — counted, never dropped, never read."""
    batch.rs.write_if_changed(batch.rs.error_rel(entry.doc_id),
                              ErrorRecord.of(entry, code, message, "discover", sha256=entry.sha256))


def _tokens(listed: _Listed) -> _Listed:
    """The listing with file names replaced by opaque tokens (:func:`~docverify.storage.paths.file_token`,
    same order): what the stage record and the report carry; the manifest keeps the names."""
    out: _Listed = {}
    if "orphan_companions" in listed:
        out["orphan_companions"] = [file_token(n) for n in listed["orphan_companions"]]
    if "ignored_files" in listed:
        out["ignored_files"] = [file_token(n) for n in listed["ignored_files"]]
    if "removed" in listed:
        out["removed"] = listed["removed"]
    return out


def discover(batch: Batch, max_documents: int = 0) -> Discovered:
    """List ``<incoming>/*.pdf`` (and companion ``<doc>.classification.json`` /
    ``<doc>.production.json``) into the manifest. Inputs are never modified. A symbolic link or
    another non-regular file named ``*.pdf`` is never followed or read, and a file over
    ``MAX_PDF_BYTES`` is never read: each is an error record of its document
    (``INPUT_NOT_REGULAR`` / ``TOO_LARGE``). Hashes are streamed. A refusal of an earlier run that
    no longer holds (the file was fixed) is cleared, known from the earlier manifest (one read).

    The boundary is total (ADR 0024): a name that cannot name a stored object (a control
    character, a backslash, bytes that are not UTF-8, over 255 bytes — :func:`~docverify.storage.paths.
    name_problem`) is one document with the error ``INPUT_UNSAFE_NAME``, never read, named by its
    doc id (an opaque hash of the name's bytes), its escaped name (``pdf_rel``) and
    its percent-encoded URI. Outputs of a PDF no longer listed are withdrawn
    (:func:`~docverify.stages.routes.withdraw_removed`); companions without their PDF are named
    in the manifest (``orphan_companions``), counted with opaque tokens in the log and the batch
    report; any other entry (not a PDF, not a companion) is named in the manifest
    (``ignored_files``), counted with opaque tokens in the log and the report (ADR 0050: no file
    name where a Viewer or a log sees it)."""
    rs = batch.rs
    stats = StageStats("discover")
    entries = batch.rs.listing(batch.incoming)
    files = {n: size for n, kind, size in entries if kind == "file"}
    pdfs = [(n, kind, size) for n, kind, size in entries if n.lower().endswith(".pdf")]
    ids, seen = [], set()
    for name, _, _ in pdfs:  # every listed PDF's id (also those over max_documents: they are present)
        doc_id = doc_id_for(name)
        if doc_id in seen:  # only when a safe name equals another's encoded id: keep both, distinctly
            doc_id = f"{doc_id}_{sha256_bytes(name.encode('utf-8', 'surrogatepass'))[:16]}"
        seen.add(doc_id)
        ids.append(doc_id)
    stems = {n[:-4] for n, _, _ in pdfs}
    orphans = [printable_name(n) for n in files
               if (n.endswith(".classification.json") and n[: -len(".classification.json")] not in stems)
               or (n.endswith(".production.json") and n[: -len(".production.json")] not in stems)]
    # anything else in the folder is not read, but never vanishes without a trace (ADR 0036)
    ignored = [printable_name(n) for n, _, _ in entries if not n.lower().endswith(".pdf")
               and not n.endswith((".classification.json", ".production.json"))]
    skipped = len(pdfs) - max_documents if max_documents and len(pdfs) > max_documents else 0
    if skipped:
        pdfs = pdfs[:max_documents]
    previous = rs.manifest_if_exists()
    refused_before = {d.doc_id for d in previous.documents if d.input_error} if previous else set()
    docs = []
    for (name, kind, size), doc_id in zip(pdfs, ids, strict=False):
        problem = name_problem(name)
        if problem:  # never read; named by its escaped form and its percent-encoded bytes only
            shown = printable_name(name)
            rel, uri = f"{batch.incoming}/{shown}", f"{rs.uri(batch.incoming)}/{quoted_name(name)}"
        else:
            rel = f"{batch.incoming}/{name}"
            uri = rs.uri(rel)
        companion, production = f"{name[:-4]}.classification.json", f"{name[:-4]}.production.json"
        has_companion = companion in files and not problem
        entry = ManifestDoc(doc_id=doc_id, pdf_rel=rel, pdf_uri=uri, sha256="", bytes=size,
                            classification_rel=f"{batch.incoming}/{companion}" if has_companion else None)
        if has_companion:
            entry.classification_bytes = files[companion]
        if production in files and not problem:
            entry.production_rel = f"{batch.incoming}/{production}"
        error = None
        if problem:
            error = (INPUT_UNSAFE_NAME, f"{uri}: the file name {shown!r} cannot name a stored object ({problem}); "
                     f"it was not read — rename it (letters, digits, '.', '_', '-'; UTF-8) and run the night again")
        elif kind != "file":
            error = ("INPUT_NOT_REGULAR", f"{entry.pdf_uri} is a {'symbolic link' if kind == 'symlink' else kind} "
                     f"entry, not a regular file: it is not followed or read; put the PDF itself in the folder")
        else:
            try:
                check_size(size, MAX_PDF_BYTES, entry.pdf_uri, "PDF")
            except InputError:
                error = ("TOO_LARGE", f"{entry.pdf_uri} has {size} bytes, over the limit of {MAX_PDF_BYTES} "
                         f"(docverify.storage.limits.MAX_PDF_BYTES); it was not read — split it")
            else:
                try:  # the entry listed, never a link put in its place since (ADR 0033)
                    entry.sha256 = sha256_regular(batch.store, rel, entry.pdf_uri)
                except InputError as exc:
                    error = (exc.code, exc.message)
        if error:
            entry.input_error = error[0]
            stats.errors += 1
            _input_error(batch, entry, *error)
        elif doc_id in refused_before:  # the file was fixed since: forget the old refusal
            rs.delete(rs.error_rel(doc_id))
        docs.append(entry)
        # no input URI: it names the file (ADR 0050); the manifest maps the doc id to it
        lineage("discover", doc_id, sha256=entry.sha256, bytes=size,
                provided_classification=entry.classification_rel is not None, error=entry.input_error)
    stats.docs = len(docs)
    # a re-run reconciles the night's outputs with its inputs: a PDF removed since an earlier run
    # has its accepted record and pending packets withdrawn (with the reason), before the manifest
    # forgets it (a run killed in between withdraws them on the next); a night without a manifest
    # yet has no outputs (every route runs after discover): nothing to list
    removed = withdraw_removed(batch, set(ids)) if previous is not None else []
    # counts and opaque ids only: a file name may name the patient (ADR 0050); the names are in the manifest
    if removed:
        log.warning("%d document(s) no longer in %s: their accepted record / pending packets were withdrawn: %s",
                    len(removed), rs.uri(batch.incoming), removed[:20])
    if orphans:
        log.warning("%d companion file(s) in %s without their PDF (not used; named in the manifest): %s",
                    len(orphans), rs.uri(batch.incoming), [file_token(n) for n in orphans[:20]])
    if ignored:
        log.warning("%d file(s) in %s are neither PDFs nor companions and were ignored (named in the manifest): %s",
                    len(ignored), rs.uri(batch.incoming), [file_token(n) for n in ignored[:20]])
    extra: _Listed = {}
    if orphans:
        extra["orphan_companions"] = orphans
    if removed:
        extra["removed"] = removed
    if ignored:
        extra["ignored_files"] = ignored
    manifest = Manifest(ds=batch.ds, incoming=rs.uri(batch.incoming), documents=docs,
                        skipped_over_max_documents=skipped, **extra)
    # the stage's record rides in the manifest (``stats``, volatile): no object of its own
    out = stats.record(max_documents=max_documents, skipped_over_max_documents=skipped, **_tokens(extra))
    rs.write_if_changed(rs.manifest_rel, {**manifest.as_json(), "stats": out}, volatile=(*VOLATILE, "stats"))
    stats.log(out)
    if not docs:
        log.warning("no PDF under %s: nothing to verify (put files there, or set the batch_prefix param)",
                    rs.uri(batch.incoming))
    return Discovered(manifest=rs.uri(rs.manifest_rel), documents=len(docs))
