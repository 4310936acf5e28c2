"""One night's batch, stage by stage — the bodies of the nightly DAG's tasks, without Airflow.

Every stage reads its inputs through the night's typed run store (:class:`docverify.runstore.RunStore`:
every path of the layout, one request per read, each object read at most once per task) and
writes its outputs there; what it returns is small (references, ids, counts) and is all that
crosses XCom. The graph: discover → layout → plan_shards → ``verify[shard]`` (classify when no
companion classification, V1, V2–V4 with their judgments concurrent, V5's decision on attempt 0 —
all through :func:`docverify.pipeline.verify_document`; one ``result.json`` per document and one
summary per shard) → ``v5_arbiter`` (the branch, from the shard summaries) → ``auto_fix_retry``
(the same pipeline from the stored attempt 0) → accept / write_sme_packets → batch_report.

Stages are idempotent: a second run of the same date reuses what is unchanged (a bundle whose PDF
has the same sha256, a classification made by the same implementation from the same bundle) and
rewrites an output only when its content changed, so a re-run produces the same files and no
duplicates. A reviewed SME packet and a ground-truth record are never overwritten.

Throttling (:class:`docverify.judges.JudgeThrottled`) is never a document's verdict: it propagates
out of the stage, the task fails and Airflow retries it (what was written is reused).

Lineage: every stage logs one line per document on the ``docverify.lineage`` logger:
``lineage {"task": …, "doc_id": …, …}`` — ids, URIs, hashes, implementations, issue codes,
decisions and rules; never page text, snippets or issue messages (they may hold PHI).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from docverify.judges import Judge, JudgeThrottled, Usage
from docverify.limits import (
    MAX_COMPANION_BYTES,
    MAX_PAGE_CHARS,
    MAX_PDF_BYTES,
    InputError,
    check_size,
    load_classification,
)
from docverify.models import DocumentBundle, VerificationReport, VerificationResult
from docverify.paths import doc_id_for, safe_ds, safe_prefix
from docverify.pipeline import verify_document
from docverify.resources import sha256_bytes
from docverify.runstore import (
    VOLATILE,
    BundleMeta,
    ClassificationMeta,
    DocResult,
    ErrorRecord,
    Manifest,
    ManifestDoc,
    NightIndex,
    Routes,
    RunStore,
)
from docverify.store import ArtifactStore

log = logging.getLogger("docverify.batch")
lineage_log = logging.getLogger("docverify.lineage")

ROUTES = ("accept", "auto_fix_retry", "write_sme_packets")
#: The task the branch follows for each route (the retry route starts by planning its shards).
ROUTE_TASKS = {"accept": "accept", "auto_fix_retry": "plan_retry_shards", "write_sme_packets": "write_sme_packets"}
#: Mapped task instances per night at most (the shard size grows with the night to stay under it).
MAX_SHARDS = 64
#: Airflow's default ``[core] max_map_length``: more mapped instances than this cannot be created.
AIRFLOW_MAP_LIMIT = 1024

__all__ = ["VOLATILE", "ArtifactStore", "Batch", "doc_id_for"]


def lineage(task: str, doc_id: str, **fields: Any) -> None:
    """One structured line per document per task. Callers pass ids, URIs, hashes, codes — never
    text from the document."""
    lineage_log.info("lineage %s", json.dumps({"task": task, "doc_id": doc_id, **fields}, sort_keys=True))


@dataclass
class Batch:
    """What every stage needs: where the artifacts live and which date partition this is. Its
    :attr:`rs` (the typed run store) memoises reads for the life of the object: the DAG builds one
    per task, and so do the in-process stage runners (``tests/batch_stages.py``)."""

    store: ArtifactStore
    ds: str
    run_id: str = ""
    prefix: str = ""  # incoming prefix relative to the root; default incoming/<ds>
    reuse: bool = True
    concurrency: int = 8
    rs: RunStore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        safe_ds(self.ds)  # the date and the batch_prefix param become paths: refused when unsafe
        if self.prefix.strip("/"):
            safe_prefix(self.prefix)
        self.rs = RunStore(self.store, self.ds)

    def fresh(self) -> Batch:
        """The same batch with an empty memo (what the next task of the night sees)."""
        return Batch(store=self.store, ds=self.ds, run_id=self.run_id, prefix=self.prefix, reuse=self.reuse,
                     concurrency=self.concurrency)

    @property
    def incoming(self) -> str:
        return safe_prefix(self.prefix) if self.prefix.strip("/") else f"incoming/{self.ds}"

    def run_rel(self, doc_id: str, name: str = "") -> str:
        return self.rs.doc_rel(doc_id, name)

    @property
    def manifest_rel(self) -> str:
        return self.rs.manifest_rel

    @property
    def routes_rel(self) -> str:
        return self.rs.routes_rel

    def stage_rel(self, stage: str) -> str:
        return self.rs.stage_rel(stage)

    def manifest(self) -> dict:
        """The manifest as stored (a dict; :meth:`RunStore.manifest` gives the model)."""
        return self.rs.manifest().as_json()

    def write_if_changed(self, rel: str, obj: Any, volatile: Iterable[str] = VOLATILE) -> bool:
        return self.rs.write_if_changed(rel, obj, volatile)


USAGE_KEYS = ("calls", "cache_hits", "input_tokens", "output_tokens", "cached_tokens")


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {"calls": usage.llm_calls, "cache_hits": usage.cache_hits, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cached_tokens": usage.cached_tokens}


@dataclass
class StageStats:
    stage: str
    docs: int = 0
    errors: int = 0
    cache_hits: int = 0
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)
    per_doc: dict[str, dict[str, int]] = field(default_factory=dict)
    price_model: str | None = None

    def add_usage(self, doc_id: str, usage: Usage | None, judge: Judge | None = None) -> None:
        """Count one document's LLM usage in the stage total and per document."""
        if usage is None:
            return
        self.usage.add(usage)
        if judge is not None and judge.price_model:
            self.price_model = judge.price_model
        if usage.llm_calls or usage.cache_hits:
            d = self.per_doc.setdefault(doc_id, dict.fromkeys(USAGE_KEYS, 0))
            for key, value in _usage_dict(usage).items():
                d[key] += value

    def record(self, **extra: Any) -> dict:
        return {"stage": self.stage, "docs": self.docs, "errors": self.errors, "cache_hits": self.cache_hits,
                "seconds": round(time.perf_counter() - self.started, 3),
                "llm": _usage_dict(self.usage), "llm_per_document": self.per_doc,
                "price_model": self.price_model, **extra}

    def save(self, batch: Batch, key: str | None = None, **extra: Any) -> dict:
        out = self.record(**extra)
        batch.rs.write_json(batch.rs.stage_rel(key or self.stage), out)
        self.log(out)
        return out

    def log(self, out: dict) -> None:
        log.info("stage %s: %d document(s), %d error(s), %d reused, %.2fs, %d LLM call(s)", self.stage,
                 self.docs, self.errors, self.cache_hits, out["seconds"], self.usage.llm_calls)
        return out


async def gather_bounded(factories: list[Callable[[], Awaitable[Any]]], limit: int) -> list[Any]:
    """Run coroutine factories concurrently, at most ``limit`` at a time, in input order."""
    sem = asyncio.Semaphore(max(1, limit))

    async def one(f):
        async with sem:
            return await f()

    return await asyncio.gather(*(one(f) for f in factories))


# =========================================================================== discover


def _error_record(doc: dict, code: str, message: str, stage: str) -> dict:
    return {"doc_id": doc["doc_id"], "stage": stage, "error": code, "message": message, "file": doc["pdf_uri"]}


def _input_error(batch: Batch, entry: dict, code: str, message: str) -> None:
    """A document refused at discovery (not a regular file, too large): its error record, so it
    is escalated with the error in its packet — counted, never dropped, never read."""
    batch.rs.write_if_changed(batch.rs.error_rel(entry["doc_id"]),
                              {**_error_record(entry, code, message, "discover"), "sha256": entry["sha256"]})


def discover(batch: Batch, max_documents: int = 0) -> dict:
    """List ``<incoming>/*.pdf`` (and companion ``<doc>.classification.json`` /
    ``<doc>.production.json``) into the manifest. Inputs are never modified. A symbolic link or
    another non-regular file named ``*.pdf`` is never followed or read, and a file over
    ``MAX_PDF_BYTES`` is never read: each is an error record of its document
    (``INPUT_NOT_REGULAR`` / ``TOO_LARGE``). Hashes are streamed. A refusal of an earlier run that
    no longer holds (the file was fixed) is cleared, known from the earlier manifest (one read)."""
    rs = batch.rs
    stats = StageStats("discover")
    entries = batch.store.entries(batch.incoming)
    files = {n: size for n, kind, size in entries if kind == "file"}
    pdfs = [(n, kind, size) for n, kind, size in entries if n.lower().endswith(".pdf")]
    skipped = len(pdfs) - max_documents if max_documents and len(pdfs) > max_documents else 0
    if skipped:
        pdfs = pdfs[:max_documents]
    previous = rs.manifest_if_exists()
    refused_before = {d.doc_id for d in previous.documents if d.input_error} if previous else set()
    docs, seen = [], set()
    for name, kind, size in pdfs:
        doc_id = doc_id_for(name)
        if doc_id in seen:  # only when a safe name equals another's encoded id: keep both, distinctly
            doc_id = f"{doc_id}_{sha256_bytes(name.encode('utf-8', 'surrogatepass'))[:16]}"
        seen.add(doc_id)
        rel = f"{batch.incoming}/{name}"
        companion, production = f"{name[:-4]}.classification.json", f"{name[:-4]}.production.json"
        entry: dict[str, Any] = {"doc_id": doc_id, "pdf_rel": rel, "pdf_uri": rs.uri(rel), "sha256": "",
                                 "bytes": size,
                                 "classification_rel": f"{batch.incoming}/{companion}" if companion in files else None}
        if companion in files:
            entry["classification_bytes"] = files[companion]
        if production in files:
            entry["production_rel"] = f"{batch.incoming}/{production}"
        error = None
        if kind != "file":
            error = ("INPUT_NOT_REGULAR", f"{entry['pdf_uri']} is a {'symbolic link' if kind == 'symlink' else kind} "
                     f"entry, not a regular file: it is not followed or read; put the PDF itself in the folder")
        else:
            try:
                check_size(size, MAX_PDF_BYTES, entry["pdf_uri"], "PDF")
                entry["sha256"] = rs.sha256(rel)
            except InputError:
                error = ("TOO_LARGE", f"{entry['pdf_uri']} has {size} bytes, over the limit of {MAX_PDF_BYTES} "
                         f"(docverify.limits.MAX_PDF_BYTES); it was not read — split it")
        if error:
            entry["input_error"] = error[0]
            stats.errors += 1
            _input_error(batch, entry, *error)
        elif doc_id in refused_before:  # the file was fixed since: forget the old refusal
            rs.delete(rs.error_rel(doc_id))
        docs.append(entry)
        lineage("discover", doc_id, input_uri=entry["pdf_uri"], sha256=entry["sha256"], bytes=size,
                provided_classification=entry["classification_rel"] is not None, error=entry.get("input_error"))
    stats.docs = len(docs)
    manifest = Manifest(ds=batch.ds, incoming=rs.uri(batch.incoming), documents=[ManifestDoc(**d) for d in docs],
                        skipped_over_max_documents=skipped)
    # the stage's record rides in the manifest (``stats``, volatile): no object of its own
    out = stats.record(max_documents=max_documents, skipped_over_max_documents=skipped)
    rs.write_if_changed(rs.manifest_rel, {**manifest.as_json(), "stats": out}, volatile=(*VOLATILE, "stats"))
    stats.log(out)
    if not docs:
        log.warning("no PDF under %s: nothing to verify (put files there, or set the batch_prefix param)",
                    rs.uri(batch.incoming))
    return {"manifest": rs.uri(rs.manifest_rel), "documents": len(docs)}


# =========================================================================== layout


@dataclass
class _Layout:
    """What the layout stage learns per document, saved as its record (a
    :class:`~docverify.runstore.NightIndex`, which the later stages read instead of the manifest):
    the documents with a bundle, the error records of the others, and those whose run folder did
    not exist before (``new``: nothing of theirs to reuse downstream, no request to find out)."""

    batch: Batch
    ok: set[str] = field(default_factory=set)
    errors: dict[str, dict] = field(default_factory=dict)
    new: list[str] = field(default_factory=list)
    parsed: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rs = self.batch.rs
        self.manifest = rs.manifest()
        self.present = rs.names(rs.night)  # one listing: which documents have a run folder
        self.previous = rs.night_index()

    def seen(self, doc_id: str) -> None:
        if doc_id not in self.present:
            self.new.append(doc_id)

    def reusable(self, doc: dict, parsers: Iterable[str] = (), prefix: str = "") -> bool:
        """The bundle this night's earlier layout recorded for the same PDF (sha256) by one of
        ``parsers`` (or a parser starting with ``prefix``) — known without reading the bundle."""
        if self.previous is None or doc["doc_id"] not in self.present:
            return False
        sha, parser = (self.previous.parsed.get(doc["doc_id"]) or ["", ""])[:2]
        return sha == doc["sha256"] and (parser in parsers or bool(prefix and parser.startswith(prefix)))

    def laid_out(self, doc_id: str, sha256: str, parser: str) -> None:
        self.ok.add(doc_id)
        self.parsed[doc_id] = [sha256, parser]
        if self.previous is not None and doc_id in self.previous.failed:  # an earlier error no longer holds
            self.batch.rs.delete(self.batch.rs.error_rel(doc_id))

    def failed(self, doc_id: str, record: dict) -> None:
        self.errors[doc_id] = record

    def input_error(self, doc: dict) -> None:
        """A document refused at discovery: its error record (one read, refusals only)."""
        rec = self.batch.rs.get_json(self.batch.rs.error_rel(doc["doc_id"])) or _error_record(
            doc, doc["input_error"], f"{doc['pdf_uri']}: refused at discovery ({doc['input_error']})", "discover")
        self.failed(doc["doc_id"], rec)

    def save(self, stats: StageStats, **extra: Any) -> dict:
        docs = self.manifest.documents
        return stats.save(self.batch, documents=[d.model_dump(mode="json", exclude_none=True) for d in docs],
                          ok=[d.doc_id for d in docs if d.doc_id in self.ok and d.doc_id not in self.errors],
                          failed=self.errors, new=self.new, parsed=self.parsed, **extra)


def _docs(batch: Batch) -> list[dict]:
    return batch.manifest()["documents"]


def layout_local(batch: Batch, *, workers: int = 2, timeout_s: float = 60.0, ocr: bool = True) -> dict:
    """The embedded default's layout: the local PDF parser, each file in a bounded child
    process (``ocr``: scanned pages are OCR'd there). A file that fails gets
    ``runs/<ds>/<doc>/error.json`` and goes to the SME queue."""
    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import OCR_PARSER_ID, PARSER_ID, parse_many_bounded

    reusable = (PARSER_ID, OCR_PARSER_ID()) if ocr else (PARSER_ID,)

    stats = StageStats("layout")
    docs = _docs(batch)
    state = _Layout(batch)
    todo = []
    for doc in docs:
        state.seen(doc["doc_id"])
        if doc.get("input_error"):  # refused at discovery: never parsed
            stats.errors += 1
            state.input_error(doc)
            continue
        hit = _bundle_reusable(batch, doc, reusable, state) if batch.reuse else None
        if hit:
            stats.cache_hits += 1
            state.laid_out(doc["doc_id"], hit[0], hit[1])
            lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=PARSER_ID,
                    cache="hit", output_uri=batch.rs.uri(batch.rs.bundle_rel(doc["doc_id"])))
        else:
            todo.append(doc)
    with tempfile.TemporaryDirectory(prefix="docverify-layout-") as tmp:
        local = {}
        for doc in todo:
            local[_local_file(batch, doc, tmp)] = doc
        for path, result in parse_many_bounded(list(local), workers=workers, timeout_s=timeout_s, ocr=ocr):
            doc = local[path]
            _record_layout(batch, doc, result, getattr(result, "parser", PARSER_ID), ParseError, stats, state)
    stats.docs = len(docs)
    # the stage's implementation: with OCR on, the OCR engine is part of it (each bundle's
    # ``parser`` names the engine only when one of its pages was OCR'd)
    return state.save(stats, parser=OCR_PARSER_ID() if ocr else PARSER_ID)


def _local_file(batch: Batch, doc: dict, tmp: str) -> str:
    from docverify.store import _local_path

    p = _local_path(batch.store.path(doc["pdf_rel"]))
    if p is not None:
        return str(p)
    target = f"{tmp}/{doc['doc_id']}.pdf"
    with open(target, "wb") as fh:
        fh.write(batch.store.read_bytes(doc["pdf_rel"]))
    return target


def _bundle_reusable(batch: Batch, doc: dict, parser: str | tuple[str, ...], state: _Layout) -> list[str] | None:
    """[sha256, parser] of a bundle of the same PDF by one of ``parser``, or None: from this
    night's earlier layout record (no request), else one read of the bundle (none for a document
    without a run folder; the bundle is not kept in memory)."""
    parsers = (parser,) if isinstance(parser, str) else parser
    if state.previous is not None:  # the record says what this night's layout made
        return state.previous.parsed[doc["doc_id"]][:2] if state.reusable(doc, parsers) else None
    head = batch.rs.get_json(batch.rs.bundle_rel(doc["doc_id"]), memo=False)
    if bool(head) and head.get("sha256") == doc["sha256"] and head.get("parser") in parsers:
        return [head["sha256"], head["parser"]]
    return None


def _record_layout(batch: Batch, doc: dict, result: Any, parser: str, error_type: type, stats: StageStats,
                   state: _Layout) -> None:
    doc_id = doc["doc_id"]
    rs = batch.rs
    bundle_rel, err_rel = rs.bundle_rel(doc_id), rs.error_rel(doc_id)
    if isinstance(result, error_type):
        stats.errors += 1
        record = {**_error_record(doc, result.code, result.message, "layout"), "sha256": doc["sha256"]}
        state.failed(doc_id, record)
        rs.write_if_changed(err_rel, record)
        lineage("layout", doc_id, input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=parser, cache="miss",
                error=result.code, output_uri=rs.uri(err_rel))
        return
    longest = max((len(p.text) for p in result.pages), default=0)
    if longest > MAX_PAGE_CHARS:  # one limit for every parser: such a page is never classified
        result = error_type("TOO_LARGE", f"{doc['pdf_uri']}: a page holds {longest} characters of text, over the "
                            f"limit of {MAX_PAGE_CHARS} (docverify.limits.MAX_PAGE_CHARS); split or re-export it",
                            doc["pdf_uri"])
        return _record_layout(batch, doc, result, parser, error_type, stats, state)
    bundle = result.model_copy(update={"doc_id": doc_id, "file_path": doc["pdf_uri"]})
    rs.write_json(bundle_rel, bundle)
    rs.forget(rels=[bundle_rel])
    state.laid_out(doc_id, bundle.sha256, bundle.parser)
    lineage("layout", doc_id, input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=parser, cache="miss",
            pages=bundle.total_pages, has_tables=any(p.layout_metadata.has_tables for p in bundle.pages),
            output_uri=rs.uri(bundle_rel))


DOCAI_PARSER_PREFIX = "document_ai:"


#: google.rpc codes worth sending a document to Document AI again on a re-run
_DOCAI_RETRYABLE_STATUS = {4, 8, 10, 13, 14}  # DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE


def _docai_reuse(batch: Batch, docs: list[dict], parser_prefix: str = DOCAI_PARSER_PREFIX,
                 state: _Layout | None = None) -> tuple[list[dict], dict[str, list[str]], dict[str, dict]]:
    """(documents to lay out, reused laid-out id → [sha256, parser], reused permanent failures
    id → error record). With the layout's ``state``, this night's earlier record answers without a
    read; else the bundle and error record are read."""
    docs = [d for d in docs if not d.get("input_error")]  # refused at discovery: never sent
    if not batch.reuse:
        return list(docs), {}, {}
    out, ok, failed = [], {}, {}
    rs = batch.rs
    prev = state.previous if state is not None else None
    for doc in docs:
        doc_id = doc["doc_id"]
        if prev is not None:
            if state is not None and state.reusable(doc, prefix=parser_prefix):
                ok[doc_id] = prev.parsed[doc_id]
                continue
            err = prev.failed.get(doc_id) if doc_id in state.present else None  # type: ignore[union-attr]
        else:
            head = rs.get_json(rs.bundle_rel(doc_id), memo=False)
            if head and head.get("sha256") == doc["sha256"] and str(head.get("parser", "")).startswith(parser_prefix):
                ok[doc_id] = [head["sha256"], head["parser"]]
                continue
            err = rs.get_json(rs.error_rel(doc_id))
        if err and err.get("sha256") == doc["sha256"] and str(err.get("parser", "")).startswith(parser_prefix) \
                and err.get("retryable") is False:
            failed[doc_id] = err
            continue
        out.append(doc)
    return out, ok, failed


def docs_to_layout(batch: Batch, docs: list[dict] | None = None,
                   parser_prefix: str = DOCAI_PARSER_PREFIX) -> list[dict]:
    """The manifest's documents that need a (new) layout: no bundle yet, another PDF (sha256), or
    one made by another parser family. Reused (not returned): a bundle of the same PDF by the
    same parser family, and a permanent Document AI failure of the same PDF (``retryable``
    false in its error record) — a re-run does not pay the service again for either. ``docs``:
    the manifest's documents when the caller has them already."""
    return _docai_reuse(batch, _docs(batch) if docs is None else docs, parser_prefix)[0]


def _docai_error(batch: Batch, doc: dict, exc: Any, stats: StageStats, state: _Layout, *, retryable: bool) -> None:
    """A Document AI document error: the usual error record plus what a re-run needs to know."""
    stats.errors += 1
    rel = batch.rs.error_rel(doc["doc_id"])
    record = {**_error_record(doc, exc.code, exc.message, "layout"), "sha256": doc["sha256"],
              "parser": DOCAI_PARSER_PREFIX + "layout-parser", "retryable": retryable}
    state.failed(doc["doc_id"], record)
    batch.rs.write_if_changed(rel, record)
    lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser="document_ai",
            cache="miss", error=exc.code, retryable=retryable, output_uri=batch.rs.uri(rel))


def _docai_start(batch: Batch, stats: StageStats) -> tuple[list[dict], set[str], _Layout]:
    docs = _docs(batch)
    state = _Layout(batch)
    todo, ok, failed = _docai_reuse(batch, docs, state=state)
    for doc in docs:
        state.seen(doc["doc_id"])
        if doc.get("input_error"):
            stats.errors += 1
            state.input_error(doc)
    for doc_id, (sha, parser) in ok.items():
        state.laid_out(doc_id, sha, parser)
    for doc_id, record in failed.items():
        state.failed(doc_id, record)
    stats.cache_hits += len(ok) + len(failed)
    return docs, {d["doc_id"] for d in todo}, state


def layout_docai_outputs(batch: Batch, results: list[dict], open_output: Callable[[str], Any]) -> dict:
    """Layout from a Document AI batch job: ``results`` are the operator's per-input records
    (``input_uri``, ``output_uri``, ``ok``, ``status_code``, ``status_message``, ``error_code``);
    ``open_output(uri)`` gives a pathlike for an output folder (an ObjectStoragePath on the
    Google connection in the DAG). Each folder's JSON shards become the document's bundle; a
    failed document, a missing result or unreadable output becomes the document's error record
    (it goes to the SME queue) — never a failed stage. Documents :func:`docs_to_layout` does not
    list (laid out or failed for good earlier) are reused."""
    from docverify.layout.docai import bundle_from_docai, load_docai_output
    from docverify.layout.errors import ParseError

    stats = StageStats("layout")
    by_uri = {r["input_uri"]: r for r in results}
    docs, todo, state = _docai_start(batch, stats)
    for doc in docs:
        if doc["doc_id"] not in todo:
            if not doc.get("input_error"):
                lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], cache="hit",
                        parser="document_ai")
            continue
        r = by_uri.get(doc["pdf_uri"])
        if r is None:
            _docai_error(batch, doc, ParseError("DOCAI_NO_RESULT", f"{doc['pdf_uri']}: Document AI returned no "
                         f"result for this document; re-run the DAG run (it is submitted again)", doc["pdf_uri"]),
                         stats, state, retryable=True)
            continue
        if not r.get("ok"):
            code = r.get("error_code") or "DOCAI_FAILED"
            status = r.get("status_code")
            exc = ParseError(code, f"{doc['pdf_uri']}: Document AI could not process it (status {status}: "
                             f"{r.get('status_message') or 'no message'}); check the file, then re-run", doc["pdf_uri"])
            _docai_error(batch, doc, exc, stats, state,
                         retryable=code == "DOCAI_FAILED" and status in _DOCAI_RETRYABLE_STATUS)
            continue
        try:
            bundle = bundle_from_docai(load_docai_output(open_output(r["output_uri"])), doc_id=doc["doc_id"],
                                       file_path=doc["pdf_uri"], sha256=doc["sha256"])
        except ParseError as exc:
            _docai_error(batch, doc, exc, stats, state, retryable=False)
            continue
        _record_layout(batch, doc, bundle, bundle.parser, ParseError, stats, state)
    stats.docs = len(docs)
    return state.save(stats, parser="document_ai:batch")


def layout_docai_online(batch: Batch, process: Callable[[bytes], dict], *, max_pages: int = 15) -> dict:
    """Layout through Document AI's online endpoint, one document at a time, for a storage root
    Document AI cannot read in batch (a local one). ``process(pdf_bytes)`` returns the Document
    JSON. A PDF over ``max_pages`` (15 for the Layout Parser online) gets the error record
    ``TOO_MANY_PAGES`` naming the fix (a gs:// storage root, so the batch path runs)."""
    from docverify.layout.docai import bundle_from_docai
    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import page_count

    stats = StageStats("layout")
    docs, todo, state = _docai_start(batch, stats)
    for doc in docs:
        if doc["doc_id"] not in todo:
            continue
        data = batch.store.read_bytes(doc["pdf_rel"])
        result: Any
        try:
            pages = page_count(data, doc["pdf_uri"])
            if pages > max_pages:
                raise ParseError("TOO_MANY_PAGES", f"{doc['pdf_uri']}: {pages} pages, over the {max_pages}-page limit "
                                 f"of Document AI's online processing; set a gs:// storage root "
                                 f"(docverify_storage_root) so documents go through batch processing", doc["pdf_uri"])
            result = bundle_from_docai(process(data), doc_id=doc["doc_id"], file_path=doc["pdf_uri"],
                                       sha256=doc["sha256"])
        except ParseError as exc:
            _docai_error(batch, doc, exc, stats, state, retryable=False)
            continue
        except Exception as exc:  # noqa: BLE001 - one document's fault never fails the stage
            _docai_error(batch, doc, ParseError("DOCAI_FAILED", f"{doc['pdf_uri']}: Document AI online processing "
                         f"failed ({type(exc).__name__}); re-run when the service is available", doc["pdf_uri"]),
                         stats, state, retryable=True)
            continue
        _record_layout(batch, doc, result, result.parser, ParseError, stats, state)
    stats.docs = len(docs)
    return state.save(stats, parser="document_ai:online")


# =========================================================================== shards


def night_index(batch: Batch) -> NightIndex:
    """The layout stage's record (one read). A night laid out without it (a test writing bundles
    by hand) is indexed from the manifest, probing each document's folder."""
    rs = batch.rs
    index = rs.night_index()
    if index is not None:
        return index
    docs = rs.manifest().documents
    ok, errors = [], {}
    for d in docs:
        err = rs.error(d.doc_id)
        if d.input_error or err is not None:
            errors[d.doc_id] = err.model_dump(mode="json") if err else _error_record(
                d.model_dump(), d.input_error or "", f"{d.pdf_uri}: refused at discovery", "discover")
        elif rs.exists(rs.bundle_rel(d.doc_id)):
            ok.append(d.doc_id)
    return NightIndex(documents=docs, ok=ok, failed=errors)


def shard_size_for(documents: int, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                   map_limit: int = AIRFLOW_MAP_LIMIT) -> int:
    """Documents per mapped task: ``shard_size`` is the minimum; it grows with the night so the
    number of shards stays at most ``max_shards`` (and never above Airflow's ``map_limit``).
    A bad value is a :class:`ValueError` (deterministic: the task fails at once)."""
    if int(shard_size) < 1:
        raise ValueError(f"shard_size must be at least 1, not {shard_size}")
    if int(max_shards) < 1:
        raise ValueError(f"max_shards must be at least 1, not {max_shards}")
    if int(max_shards) > int(map_limit):
        raise ValueError(f"max_shards={max_shards} is over Airflow's map limit ([core] max_map_length = "
                         f"{map_limit}): lower the param or raise the limit")
    return max(int(shard_size), math.ceil(documents / int(max_shards)) if documents else 1)


def split(ids: list[str], shard_size: int = 25, max_shards: int = MAX_SHARDS,
          map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    size = shard_size_for(len(ids), shard_size, max_shards, map_limit)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def plan_shards(batch: Batch, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    """Documents with a bundle in at most ``max_shards`` shards of at least ``shard_size`` (a shard
    is one mapped ``verify`` task). The plan is the task's return value (XCom): the arbiter gets
    it from there."""
    shard_size_for(0, shard_size, max_shards, map_limit)  # a bad param fails before anything is read
    index = night_index(batch)
    ok = index.ok
    shards = split(ok, shard_size, max_shards, map_limit)
    size = shard_size_for(len(ok), shard_size, max_shards, map_limit)
    log.info("planned %d shard(s) of at most %d for %d document(s); %d document(s) failed layout",
             len(shards), size, len(ok), len(index.failed))
    return shards


def _bundle(batch: Batch, doc_id: str) -> DocumentBundle:
    bundle = batch.rs.bundle(doc_id)
    if bundle is None:
        raise FileNotFoundError(f"{batch.rs.uri(batch.rs.bundle_rel(doc_id))}: no bundle")
    return bundle


# =========================================================================== verify


def read_companion(batch: Batch, rel: str, size: int | None = None) -> dict:
    """A ``<doc>.classification.json`` beside a PDF, within ``docverify.limits`` (size checked
    before the read — from discovery's listing when given; bytes, nesting, numbers, segment
    counts, a JSON object), or InputError."""
    uri = batch.rs.uri(rel)
    check_size(batch.store.size(rel) if size is None else size, MAX_COMPANION_BYTES, uri, "classification")
    data = batch.store.read_bytes(rel)
    check_size(len(data), MAX_COMPANION_BYTES, uri, "classification")  # replaced since discovery
    return load_classification(data, uri)


def _decision_value(d: Any) -> str:
    return str(getattr(d, "value", d))


def _error_result(doc: ManifestDoc, bundle: BundleMeta | None, code: str, message: str, stage: str) -> DocResult:
    return DocResult(doc_id=doc.doc_id, route="write_sme_packets", bundle=bundle, production_rel=doc.production_rel,
                     decision={"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error", "error": code},
                     error=ErrorRecord(doc_id=doc.doc_id, stage=stage, error=code, message=message, file=doc.pdf_uri,
                                       sha256=doc.sha256))


async def _classification(batch: Batch, doc: ManifestDoc, bundle: DocumentBundle, prior: DocResult | None,
                          judge: Judge, stats: StageStats) -> tuple[Any, ClassificationMeta] | DocResult:
    """The document's classification: the companion beside the PDF, the earlier run's (same
    classifier, same bundle), or the judge's classifier. A fault is the document's error result."""
    rs, doc_id = batch.rs, doc.doc_id
    out_uri = rs.uri(rs.result_rel(doc_id))
    if doc.classification_rel:
        try:
            raw = read_companion(batch, doc.classification_rel, doc.classification_bytes)
        except InputError as exc:  # this document only: escalated with the error in its packet
            stats.errors += 1
            lineage("classify", doc_id, source="provided", error=exc.code, input_uri=rs.uri(doc.classification_rel))
            return _error_result(doc, BundleMeta.of(bundle), exc.code, exc.message, "classify")
        meta = ClassificationMeta(source="provided", uri=rs.uri(doc.classification_rel), implementation="provided",
                                  bundle_sha256=bundle.sha256)
        lineage("classify", doc_id, source="provided", input_uri=meta.uri, output_uri=out_uri)
        return raw, meta
    m = prior.classification_meta if prior is not None else None
    if batch.reuse and m is not None and prior is not None and prior.classification is not None \
            and m.source == "classifier" and m.classifier_id == judge.classifier_id and m.bundle_sha256 == bundle.sha256:
        stats.cache_hits += 1
        lineage("classify", doc_id, source="classifier", implementation=m.implementation, cache="hit",
                output_uri=out_uri)
        return prior.classification, m
    try:
        result = await judge.classify(bundle)
    except JudgeThrottled:
        raise  # throttling is not a verdict: the task fails and is retried
    except Exception as exc:  # a classifier fault becomes a document error, never a failed batch
        stats.add_usage(doc_id, getattr(exc, "usage", None), judge)  # a failed call still cost tokens
        stats.errors += 1
        lineage("classify", doc_id, implementation=judge.name, error="CLASSIFICATION_FAILED",
                exception=type(exc).__name__)
        return _error_result(doc, BundleMeta.of(bundle), "CLASSIFICATION_FAILED",
                             f"The classifier {judge.name} failed: {type(exc).__name__}", "classify")
    stats.add_usage(doc_id, result.usage, judge)
    meta = ClassificationMeta(source="classifier", judge=judge.name, implementation=result.implementation,
                              classifier_id=judge.classifier_id, bundle_sha256=bundle.sha256)
    lineage("classify", doc_id, source="classifier", implementation=result.implementation, cache="miss",
            llm_calls=result.usage.llm_calls, dominant_type=result.classification.dominant_type_overall,
            segments=result.classification.number_of_segments, output_uri=out_uri)
    return result.classification.model_dump(mode="json"), meta


def _route(result: VerificationResult) -> str:
    if result.stop_reason == "max_retries":  # verify_document(max_retries=0): V5 wants the retry
        return "auto_fix_retry"
    return "accept" if result.final_decision == "AUTO_ACCEPT" else "write_sme_packets"


async def _verify_one(batch: Batch, doc: ManifestDoc, judge: Judge, stats: StageStats) -> DocResult:
    rs, doc_id = batch.rs, doc.doc_id
    bundle = _bundle(batch, doc_id)
    prior = rs.result(doc_id)
    got = await _classification(batch, doc, bundle, prior, judge, stats)
    if isinstance(got, DocResult):
        return got
    raw, meta = got
    usage = Usage()
    # the one verify path: attempt 0 and its V5 decision (incl. the second opinion the judge carries)
    result = await verify_document(bundle, raw, judge, max_retries=0, usage=usage, contain_faults=True)
    stats.add_usage(doc_id, usage, judge)
    route = _route(result)
    rec0 = result.attempts[0]
    decision = rec0.decision
    rec = DocResult(doc_id=doc_id, route=route, bundle=BundleMeta.of(bundle), classification=raw,
                    classification_meta=meta, production_rel=doc.production_rel,
                    decision={"decision": _decision_value(decision.decision), "rule": decision.rule})
    if route == "auto_fix_retry":
        rec.attempt_0 = rec0
        if prior is not None and prior.attempt_0 == rec0 and prior.classification == raw:
            rec.result = prior.result  # the retry of an earlier run of the same state (it re-checks it)
    else:
        rec.result = result
    judgment = [r for r in rec0.runs if r.phase == "judgment"]
    jury = [{k: v[k] for k in ("code", "votes", "reason_codes", "final_action", "flag_reason", "rule")}
            for r in rec0.runs if r.phase == "jury" for v in r.votes or []]  # issue 14: codes only
    lineage("verify", doc_id, implementation=sorted({f"{r.agent}-{r.phase}:{r.implementation}" for r in rec0.runs}),
            judgment_skipped=bool(judgment) and all(r.skipped for r in judgment),
            llm_calls=usage.llm_calls, cache_hits=usage.cache_hits,
            issue_codes=sorted(i.code for i in rec0.issues), **({"jury": jury} if jury else {}))
    lineage("v5_arbiter", doc_id, decision=_decision_value(decision.decision), rule=decision.rule,
            issue_codes=sorted(i.code for i in rec0.issues), fingerprint=rec0.fingerprint,
            output_uri=rs.uri(rs.result_rel(doc_id)), audit=decision.explanation_audit,
            **({"second_opinion": decision.second_opinion["override"]} if decision.second_opinion else {}))
    return rec


def verify_shard(batch: Batch, shard: list[str], judge: Judge, shard_key: str = "") -> dict:
    """The ``verify[shard]`` task: per document classify (unless a companion classification is
    given or the earlier run's is reusable), V1, V2–V4 (judgments concurrent) and V5 on attempt 0,
    through :func:`docverify.pipeline.verify_document`; one ``result.json`` per document and one
    summary for the shard (routes, decisions, what the report shows) for the arbiter.
    A document's fault is that document's error (it escalates); throttling propagates."""
    from docverify.summaries import doc_summary

    rs = batch.rs
    stats = StageStats("verify")
    index = night_index(batch)
    by_id = {d.doc_id: d for d in index.documents}
    new = set(index.new)
    documents: dict[str, dict] = {}
    so_counts: dict[str, int] = {}

    async def one(doc_id: str) -> None:
        doc = by_id[doc_id]
        if doc_id in new:  # no run folder before this night's layout: no earlier result to read
            rs.assume_absent(rs.result_rel(doc_id))
        try:
            rec = await _verify_one(batch, doc, judge, stats)
        except JudgeThrottled:
            raise
        except Exception as exc:  # noqa: BLE001 - this document only: it escalates, the night goes on
            stats.errors += 1
            lineage("verify", doc_id, error="VERIFICATION_FAILED", exception=type(exc).__name__)
            bundle = rs.bundle(doc_id) if rs.exists(rs.bundle_rel(doc_id)) else None
            rec = _error_result(doc, BundleMeta.of(bundle) if bundle else None, "VERIFICATION_FAILED",
                                f"{doc.pdf_uri}: the verification could not be completed ({type(exc).__name__}); "
                                f"check its classification, then re-run", "verify")
        rs.write_result(rec)
        # a document waiting for the retry: its attempt 0 only (the retry's result is the retry's)
        documents[doc_id] = doc_summary(rec if rec.route != "auto_fix_retry" else rec.model_copy(update={"result": None}))
        a0 = rec.attempt_0 or (rec.result.attempts[0] if rec.result else None)
        so = a0.decision.second_opinion if a0 is not None else None
        if so is not None:
            so_counts["asked"] = so_counts.get("asked", 0) + 1
            so_counts[so["override"]] = so_counts.get(so["override"], 0) + 1
            so_counts["changed"] = so_counts.get("changed", 0) + int(so["changed"])
        rs.forget(doc_id)

    asyncio.run(gather_bounded([lambda d=d: one(d) for d in shard], batch.concurrency))
    stats.docs = len(shard)
    extra: dict[str, Any] = {"second_opinion": so_counts} if getattr(judge, "second_opinion", None) else {}
    return stats.save(batch, f"verify_{shard_key}" if shard_key else None, shard=shard, documents=documents,
                      **extra)


# =========================================================================== V5 arbiter


def arbiter(batch: Batch, shards: int | None = None) -> dict:
    """The V5 branch: the routes of every document from the verify shards' summaries (attempt 0,
    with the second opinion when the judge carries one, was decided in ``verify``),
    ``runs/<ds>/_routes.json``, and the task ids to follow. ``shards``: how many verify shards
    ran (``verify_0`` … in the stage records; the DAG passes the plan's length); None reads every
    verify record of the night.

    Returns ``{"routes": [...task ids to follow...], "counts": …}``. ``accept`` and
    ``write_sme_packets`` are followed whenever documents may reach them — also from the retry.
    A document with no verification result (its shard was not verified) is never accepted: it
    gets the error ``VERIFICATION_FAILED`` and an SME packet.
    """
    rs = batch.rs
    stats = StageStats("v5_arbiter")
    index = night_index(batch)
    summaries: dict[str, dict] = {}
    for i in range(shards or 0):
        summaries.update((rs.stage(f"verify_{i}") or {}).get("documents") or {})
    if shards is None:  # the shard keys are unknown: every verify record of the night
        for s in rs.stages():
            if s.get("stage") == "verify":
                summaries.update(s.get("documents") or {})
    routes: dict[str, list[str]] = {r: [] for r in ROUTES}
    decisions: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    for doc in index.documents:
        doc_id = doc.doc_id
        stats.docs += 1
        if doc_id in index.failed:
            errors[doc_id] = index.failed[doc_id]
            code = errors[doc_id].get("error")
            route, dec = "write_sme_packets", {"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error",
                                               "error": code}
            lineage("v5_arbiter", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error", error=code)
        elif doc_id in summaries:
            route, dec = summaries[doc_id]["route"], summaries[doc_id]["decision"]
        else:  # no verification result (its shard did not run): never accepted
            stats.errors += 1
            errors[doc_id] = {**_error_record(
                doc.model_dump(), "VERIFICATION_FAILED", f"{doc.pdf_uri}: no verification result for this document "
                "(its verify task did not run or failed); re-run", "v5_arbiter"), "sha256": doc.sha256}
            rs.write_if_changed(rs.error_rel(doc_id), errors[doc_id])
            route, dec = "write_sme_packets", {"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error",
                                               "error": "VERIFICATION_FAILED"}
            lineage("v5_arbiter", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error",
                    error="VERIFICATION_FAILED")
        routes[route].append(doc_id)
        decisions[doc_id] = dec
    night = Routes(ds=batch.ds, routes=routes, attempt_0=decisions, errors=errors, new=index.new,
                   documents={d: v for d, v in summaries.items() if d in decisions}).model_dump(mode="json")
    # _routes.json: the routes, attempt 0's decisions and the error records (unchanged on a re-run);
    # the stage's record (rewritten every run) carries them too, with this run's ``new`` documents
    # and the summaries, for the route tasks and the report
    rs.write_if_changed(rs.routes_rel, {k: night[k] for k in ("ds", "routes", "attempt_0", "errors")})
    follow = [r for r in ROUTES if routes[r]]
    if routes["auto_fix_retry"]:  # documents from the retry end in accept or write_sme_packets
        follow = list(ROUTES)
    counts = {k: len(v) for k, v in routes.items()}
    stats.save(batch, counts=counts, night=night)
    log.info("V5 routes: %s; following %s", counts, follow)
    return {"routes": [ROUTE_TASKS[r] for r in follow], "counts": counts}


def retry_shards(batch: Batch, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                 map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    shard_size_for(0, shard_size, max_shards, map_limit)  # a bad param fails before anything is read
    routes = batch.rs.routes()
    return split(routes.routes["auto_fix_retry"] if routes else [], shard_size, max_shards, map_limit)


# =========================================================================== routes


def auto_fix_retry_shard(batch: Batch, shard: list[str], judge: Judge, shard_key: str = "") -> dict:
    """Fix → verify again (same pipeline, V1–V5) for documents routed AUTO_RETRY, from the stored
    attempt 0; the final result goes into the document's ``result.json``."""
    from docverify.summaries import doc_summary

    rs = batch.rs
    stats = StageStats("auto_fix_retry")
    documents: dict[str, dict] = {}

    async def one(doc_id: str) -> None:
        rec = rs.result(doc_id)
        a0 = None if rec is None else rec.attempt_0 or (rec.result.attempts[0] if rec.result else None)
        if rec is None or a0 is None:
            stats.errors += 1
            lineage("auto_fix_retry", doc_id, error="NO_ATTEMPT_0")
            return
        usage = Usage()
        first = VerificationReport(doc_id=doc_id, attempt=0, fingerprint=a0.fingerprint, issues=a0.issues,
                                   runs=a0.runs, quality_score=a0.quality_score)
        try:
            result = await verify_document(_bundle(batch, doc_id), rec.classification, judge, first_report=first,
                                           usage=usage, contain_faults=True)
        except JudgeThrottled:
            raise
        except Exception as exc:  # noqa: BLE001 - this document only: it escalates
            stats.errors += 1
            lineage("auto_fix_retry", doc_id, error="VERIFICATION_FAILED", exception=type(exc).__name__)
            err = _error_result(ManifestDoc(doc_id=doc_id, pdf_rel="", pdf_uri=rec.bundle.file_path if rec.bundle else "",
                                            sha256=rec.bundle.sha256 if rec.bundle else ""),
                                rec.bundle, "VERIFICATION_FAILED", f"the retry could not be completed "
                                f"({type(exc).__name__}); re-run", "auto_fix_retry")
            new = rec.model_copy(update={"error": err.error, "result": None})
        else:
            stats.add_usage(doc_id, usage, judge)
            stats.docs += 1
            new = rec.model_copy(update={"result": result, "error": None})
            lineage("auto_fix_retry", doc_id, attempts=len(result.attempts), final_decision=result.final_decision,
                    rule=result.final_rule, stop_reason=result.stop_reason, llm_calls=usage.llm_calls,
                    fixes=[f.fixer for f in result.fixes_applied],
                    issue_codes=[sorted(i.code for i in a.issues) for a in result.attempts])
        rs.write_result(new)
        documents[doc_id] = doc_summary(new)
        rs.forget(doc_id)

    asyncio.run(gather_bounded([lambda d=d: one(d) for d in shard], batch.concurrency))
    return stats.save(batch, f"auto_fix_retry_{shard_key}" if shard_key else None, documents=documents)


def withdraw(batch: Batch, rel: str, kind: str, doc_id: str, reason: str) -> str | None:
    """Move a stale output of an earlier run of this night aside, never deleting it:
    ``withdrawn/<ds>/<kind>_<doc_id>[.<n>].json`` holds the record, its URI, the reason and the
    run that withdrew it (create-if-absent: an earlier withdrawal is never overwritten). None when
    another run of the same night withdrew it first."""
    from docverify.sme_packets import now_iso

    rs = batch.rs
    record = rs.get_json(rel)
    if record is None:
        return None
    moved = {"withdrawn_at": now_iso(), "run_id": batch.run_id, "reason": reason, "kind": kind,
             "doc_id": doc_id, "original_uri": rs.uri(rel), "record": record}
    n = 1
    while True:
        target = rs.withdrawn_rel(kind, doc_id, n)
        if rs.write_json(target, moved, overwrite=False):
            break
        n += 1
    rs.delete(rel)  # a concurrent run of the night may have moved it already
    lineage("withdraw", doc_id, kind=kind, reason=reason, from_uri=rs.uri(rel), output_uri=rs.uri(target))
    return target


def _review_id(batch: Batch, doc_id: str, sha256: str | None) -> str:
    from docverify.sme_packets import review_id

    return review_id(batch.ds, doc_id, sha256)


def _night_packet_keys(batch: Batch, docs: Iterable[str]) -> dict[str, list[str]]:
    """This night's packet keys per doc id of ``docs`` (``<ds>_<doc_id>_<10 hex>``), from one
    listing (which also tells the run store which packets do not exist)."""
    import re

    docs = set(docs)
    out: dict[str, list[str]] = {}
    prefix = f"sme_packet_{batch.ds}_"
    for name in batch.rs.list(batch.rs.PACKETS_DIR, ".json"):
        if not name.startswith(prefix):
            continue
        m = re.fullmatch(r"(.+)_([0-9a-f]{10})", name[len(prefix):-len(".json")])
        if m and m.group(1) in docs:
            out.setdefault(m.group(1), []).append(name[len("sme_packet_"):-len(".json")])
    return out


def _withdraw_pending_packets(batch: Batch, doc_id: str, current: str, reason: str, keys: dict[str, list[str]], *,
                              keep_current: bool) -> None:
    """*Pending* packets of this night's document from an earlier run: the one of its current
    content ``current`` (unless ``keep_current``: it is being written again) and those of content
    the night no longer holds (the file was replaced). A reviewed packet and ground truth are never
    touched."""
    rs = batch.rs
    for key in keys.get(doc_id, []):
        if key == current and keep_current:
            continue
        rel = rs.packet_rel(key)
        packet = rs.get_json(rel)
        if not isinstance(packet, dict) or packet.get("review_status", "pending") != "pending":
            continue
        why = reason if key == current else f"{reason}; the file now has other content (sha256 {current[-10:]}…)"
        withdraw(batch, rel, "sme_packet", key, why)
        rs.delete(rs.packet_html_rel(key))  # the packet's rendering goes with it


def _earlier_outputs(batch: Batch, routes: Routes, candidates: list[str], *, list_packets: bool = False
                     ) -> dict[str, list[str]]:
    """This night's packet keys of ``candidates`` from earlier runs. A document new this run (no
    run folder before its layout) has no accepted record or packet of an earlier run: when every
    candidate is new, their accepted records are known absent without a request and the packets
    are not listed — unless ``list_packets`` (the packet writer always lists them: a packet an SME
    reviewed is never overwritten, even by a cleared and re-run task); else one listing of the
    night's accepted records and one of the packets."""
    rs = batch.rs
    new = set(routes.new)
    if all(d in new for d in candidates):
        for d in candidates:
            rs.assume_absent(rs.accepted_rel(d))
        return _night_packet_keys(batch, candidates) if list_packets else {}
    rs.names(rs.accepted_dir)
    return _night_packet_keys(batch, candidates)


def accept(batch: Batch) -> dict:
    """Write ``accepted/<ds>/<doc>.json`` for every document whose final decision is
    AUTO_ACCEPT (directly, or after the retry): reads the routes and the result of each document
    it may write (the accept and retry routes), nothing else per document. A pending packet of an
    earlier run of this night for such a document is withdrawn (moved aside with the reason): one
    route per document."""
    from docverify.outputs import accepted_record

    rs = batch.rs
    stats = StageStats("accept")
    written = []
    routes = rs.routes()
    candidates = (routes.routes["accept"] + routes.routes["auto_fix_retry"]) if routes else []
    keys = _earlier_outputs(batch, routes, candidates) if routes else {}
    for doc_id in candidates:
        rec = rs.result(doc_id)
        if rec is None or rec.result is None or rec.result.final_decision != "AUTO_ACCEPT" or rec.bundle is None:
            rs.forget(doc_id)
            continue
        result, meta = rec.result, rec.classification_meta
        rel = rs.accepted_rel(doc_id)
        rs.write_if_changed(rel, accepted_record(
            doc_id, rec.bundle, result, bundle_uri=rs.uri(rs.bundle_rel(doc_id)), run_id=batch.run_id,
            provenance={"classification_source": meta.source if meta else None,
                        "classifier": meta.implementation if meta else None}))
        _withdraw_pending_packets(batch, doc_id, _review_id(batch, doc_id, rec.bundle.sha256),
                                  f"accepted by a later run of {batch.ds} (rule {result.final_rule})", keys,
                                  keep_current=False)
        written.append(doc_id)
        lineage("accept", doc_id, decision="AUTO_ACCEPT", rule=result.final_rule, attempts=len(result.attempts),
                output_uri=rs.uri(rel))
        rs.forget(doc_id)
    stats.docs = len(written)
    stats.save(batch, documents=written)
    return {"accepted": written, "uri": rs.uri(rs.accepted_dir)}


def write_sme_packets(batch: Batch) -> dict:
    """One packet per escalated document (after V5 or after the retry), and per document that
    could not be parsed or classified. A packet an SME already reviewed is kept. Reads the routes,
    the manifest and, per document it may write, its result (and bundle and PDF for the packet)."""
    from docverify.sme_packets import build_packet, write_packet
    from docverify.sme_render import write_packet_html

    rs = batch.rs
    stats = StageStats("write_sme_packets")
    written, kept = [], []
    routes = rs.routes()
    candidates = (routes.routes["write_sme_packets"] + routes.routes["auto_fix_retry"]) if routes else []
    errors = routes.errors if routes else {}
    keys = _earlier_outputs(batch, routes, candidates, list_packets=True) if routes else {}

    def production(doc_id: str, rel: str | None) -> dict | None:
        """A production classification supplied beside the PDF: ``<doc>.production.json``
        (within the companion limits; one that is not is left out of the packet)."""
        if not rel:
            return None
        try:
            return read_companion(batch, rel)
        except (InputError, FileNotFoundError) as exc:
            lineage("write_sme_packets", doc_id, production_error=getattr(exc, "code", "NOT_FOUND"))
            return None

    def finish(doc_id: str, key: str, packet: Any, bundle: DocumentBundle | None, why: str, **fields: Any) -> None:
        _withdraw_pending_packets(batch, doc_id, key, f"escalated again by a later run of {batch.ds}", keys,
                                  keep_current=True)
        uri, outcome = write_packet(rs, packet, write_json=rs.write_if_changed)
        html_uri, _ = write_packet_html(rs, key, bundle=bundle)
        if rs.exists(rs.accepted_rel(doc_id)):
            withdraw(batch, rs.accepted_rel(doc_id), "accepted", doc_id,
                     f"escalated by a later run of {batch.ds} ({why})")
        (kept if outcome == "kept_reviewed" else written).append(doc_id)
        rs.forget(doc_id, rels=[rs.packet_rel(key)])
        lineage("write_sme_packets", doc_id, decision="ESCALATE_TO_SME", output_uri=uri, html_uri=html_uri,
                packet=outcome, **fields)

    for doc_id in candidates:
        if doc_id in errors:  # escalated without a verification: discover / layout / no result
            err = errors[doc_id]
            key = _review_id(batch, doc_id, err.get("sha256"))
            packet = build_packet(doc_id=doc_id, pdf_path=err.get("file", ""), total_pages=0, bundle_path="",
                                  result=None, error=err, run_id=batch.run_id, review_id=key)
            finish(doc_id, key, packet, None, err["error"], rule=None, reason="error", error=err["error"])
            continue
        rec = rs.result(doc_id)
        if rec is None:
            continue
        if rec.error is not None:
            total = rec.bundle.total_pages if rec.bundle else 0
            err_json = rec.error.model_dump(mode="json", exclude={"sha256"})
            key = _review_id(batch, doc_id, rec.bundle.sha256 if rec.bundle else rec.error.model_extra.get("sha256"))
            packet = build_packet(doc_id=doc_id, pdf_path=rec.error.file, total_pages=total,
                                  bundle_path=rs.uri(rs.bundle_rel(doc_id)) if total else "", result=None,
                                  error=err_json, run_id=batch.run_id, review_id=key)
            finish(doc_id, key, packet, None, rec.error.error, rule=None, reason="error", error=rec.error.error)
        elif rec.result is not None and rec.result.final_decision == "ESCALATE_TO_SME":
            result = rec.result
            bundle = _bundle(batch, doc_id)
            key = _review_id(batch, doc_id, bundle.sha256)
            packet = build_packet(doc_id=doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                                  bundle_path=rs.uri(rs.bundle_rel(doc_id)), result=result,
                                  production_classification=production(doc_id, rec.production_rel),
                                  run_id=batch.run_id, bundle=bundle, review_id=key)
            finish(doc_id, key, packet, bundle, f"rule {result.final_rule}", rule=result.final_rule,
                   stop_reason=result.stop_reason, production_supplied=packet.production_classification is not None)
        rs.forget(doc_id)
    stats.docs = len(written) + len(kept)
    stats.save(batch, written=written, kept_reviewed=kept)
    return {"packets": written, "kept_reviewed": kept, "uri": rs.uri(rs.PACKETS_DIR)}


def load_stage_stats(batch: Batch) -> list[dict]:
    """Every stage's record of the night: discover's (in the manifest), then ``_stages/``."""
    manifest = batch.rs.get_json(batch.rs.manifest_rel) or {}
    return ([manifest["stats"]] if manifest.get("stats") else []) + batch.rs.stages()
