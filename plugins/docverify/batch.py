"""One night's batch, stage by stage — the bodies of the nightly DAG's tasks, without Airflow.

Every stage reads its inputs from the artifact store and writes its outputs there; what it
returns is small (references, ids, counts) and is all that crosses XCom. Stages are idempotent:
a second run of the same date reuses what is unchanged (a bundle whose PDF has the same sha256,
a classification made by the same implementation from the same bundle) and rewrites an output
only when its content changed, so a re-run produces the same files and no duplicates. A
reviewed SME packet and a ground-truth record are never overwritten.

Lineage: every stage logs one line per document on the ``docverify.lineage`` logger:
``lineage {"task": …, "doc_id": …, …}`` — ids, URIs, hashes, implementations, issue codes,
decisions and rules; never page text, snippets or issue messages (they may hold PHI).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from docverify.codes import make_issue
from docverify.judges import Judge, Usage
from docverify.limits import (
    MAX_COMPANION_BYTES,
    MAX_PAGE_CHARS,
    MAX_PDF_BYTES,
    InputError,
    check_size,
    load_classification,
)
from docverify.models import DocumentBundle, Issue, VerificationResult
from docverify.outputs import write_outcome
from docverify.paths import doc_id_for, safe_ds, safe_prefix
from docverify.pipeline import AGENTS, AgentOutcome, assemble, run_agent, run_v1, verify_document
from docverify.resources import sha256_bytes
from docverify.retry import attempt_record, make_result
from docverify.sme import build_packet, write_packet
from docverify.store import ArtifactStore, dumps
from docverify.verify.v1_schema import parse

log = logging.getLogger("docverify.batch")
lineage_log = logging.getLogger("docverify.lineage")

ROUTES = ("accept", "auto_fix_retry", "write_sme_packets")
#: The task the branch follows for each route (the retry route starts by planning its shards).
ROUTE_TASKS = {"accept": "accept", "auto_fix_retry": "plan_retry_shards", "write_sme_packets": "write_sme_packets"}
#: Top-level keys that change on every run and do not make an output different.
VOLATILE = ("accepted_at", "created_at", "run_id")


def lineage(task: str, doc_id: str, **fields: Any) -> None:
    """One structured line per document per task. Callers pass ids, URIs, hashes, codes — never
    text from the document."""
    lineage_log.info("lineage %s", json.dumps({"task": task, "doc_id": doc_id, **fields}, sort_keys=True))


@dataclass
class Batch:
    """What every stage needs: where the artifacts live and which date partition this is."""

    store: ArtifactStore
    ds: str
    run_id: str = ""
    prefix: str = ""  # incoming prefix relative to the root; default incoming/<ds>
    reuse: bool = True
    concurrency: int = 8

    def __post_init__(self) -> None:
        safe_ds(self.ds)  # the date and the batch_prefix param become paths: refused when unsafe
        if self.prefix.strip("/"):
            safe_prefix(self.prefix)

    @property
    def incoming(self) -> str:
        return safe_prefix(self.prefix) if self.prefix.strip("/") else f"incoming/{self.ds}"

    def run_rel(self, doc_id: str, name: str = "") -> str:
        base = ArtifactStore.run_dir(self.ds, doc_id)
        return f"{base}/{name}" if name else base

    @property
    def manifest_rel(self) -> str:
        return f"runs/{self.ds}/_manifest.json"

    @property
    def routes_rel(self) -> str:
        return f"runs/{self.ds}/_routes.json"

    def stage_rel(self, stage: str) -> str:
        return f"runs/{self.ds}/_stages/{stage}.json"

    def manifest(self) -> dict:
        return self.store.read_json(self.manifest_rel)

    def write_if_changed(self, rel: str, obj: Any, volatile: Iterable[str] = VOLATILE) -> bool:
        """Write unless the stored JSON is equal apart from ``volatile`` top-level keys
        (timestamps, run ids): a re-run leaves unchanged outputs byte for byte."""
        data = json.loads(dumps(obj))
        if self.store.exists(rel):
            old = self.store.read_json(rel)
            strip = set(volatile)
            if {k: v for k, v in old.items() if k not in strip} == {k: v for k, v in data.items() if k not in strip}:
                return False
        self.store.write_json(rel, data)
        return True


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

    def save(self, batch: Batch, key: str | None = None, **extra: Any) -> dict:
        out = {"stage": self.stage, "docs": self.docs, "errors": self.errors, "cache_hits": self.cache_hits,
               "seconds": round(time.perf_counter() - self.started, 3),
               "llm": _usage_dict(self.usage), "llm_per_document": self.per_doc,
               "price_model": self.price_model, **extra}
        batch.store.write_json(batch.stage_rel(key or self.stage), out)
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


def _input_error(batch: Batch, entry: dict, code: str, message: str) -> None:
    """A document refused at discovery (not a regular file, too large): its error record, so it
    is escalated with the error in its packet — counted, never dropped, never read."""
    batch.write_if_changed(batch.run_rel(entry["doc_id"], "error.json"),
                           {**_error_record(entry, code, message, "discover"), "sha256": entry["sha256"]})


def discover(batch: Batch, max_documents: int = 0) -> dict:
    """List ``<incoming>/*.pdf`` (and companion ``<doc>.classification.json``) into the
    manifest. Inputs are never modified. A symbolic link or another non-regular file named
    ``*.pdf`` is never followed or read, and a file over ``MAX_PDF_BYTES`` is never read: each is
    an error record of its document (``INPUT_NOT_REGULAR`` / ``TOO_LARGE``). Hashes are streamed."""
    stats = StageStats("discover")
    entries = batch.store.entries(batch.incoming)
    files = {n for n, kind, _ in entries if kind == "file"}
    pdfs = [(n, kind, size) for n, kind, size in entries if n.lower().endswith(".pdf")]
    skipped = len(pdfs) - max_documents if max_documents and len(pdfs) > max_documents else 0
    if skipped:
        pdfs = pdfs[:max_documents]
    docs, seen = [], set()
    for name, kind, size in pdfs:
        doc_id = doc_id_for(name)
        if doc_id in seen:  # only when a safe name equals another's encoded id: keep both, distinctly
            doc_id = f"{doc_id}_{sha256_bytes(name.encode('utf-8', 'surrogatepass'))[:16]}"
        seen.add(doc_id)
        rel = f"{batch.incoming}/{name}"
        companion = f"{name[:-4]}.classification.json"
        entry = {"doc_id": doc_id, "pdf_rel": rel, "pdf_uri": batch.store.uri(rel), "sha256": "",
                 "bytes": size, "classification_rel": f"{batch.incoming}/{companion}" if companion in files else None}
        error = None
        if kind != "file":
            error = ("INPUT_NOT_REGULAR", f"{entry['pdf_uri']} is a {'symbolic link' if kind == 'symlink' else kind} "
                     f"entry, not a regular file: it is not followed or read; put the PDF itself in the folder")
        else:
            try:
                check_size(size, MAX_PDF_BYTES, entry["pdf_uri"], "PDF")
                entry["sha256"] = batch.store.sha256(rel)
            except InputError:
                error = ("TOO_LARGE", f"{entry['pdf_uri']} has {size} bytes, over the limit of {MAX_PDF_BYTES} "
                         f"(docverify.limits.MAX_PDF_BYTES); it was not read — split it")
        if error:
            entry["input_error"] = error[0]
            stats.errors += 1
            _input_error(batch, entry, *error)
        elif batch.store.exists(batch.run_rel(doc_id, "error.json")):
            old = batch.store.read_json(batch.run_rel(doc_id, "error.json"))
            if old.get("stage") == "discover":  # the file was fixed since: forget the old refusal
                _clear_error(batch, doc_id)
        docs.append(entry)
        lineage("discover", doc_id, input_uri=entry["pdf_uri"], sha256=entry["sha256"], bytes=size,
                provided_classification=entry["classification_rel"] is not None, error=entry.get("input_error"))
    stats.docs = len(docs)
    manifest = {"ds": batch.ds, "incoming": batch.store.uri(batch.incoming), "documents": docs,
                "skipped_over_max_documents": skipped}
    batch.write_if_changed(batch.manifest_rel, manifest)
    stats.save(batch, max_documents=max_documents, skipped_over_max_documents=skipped)
    if not docs:
        log.warning("no PDF under %s: nothing to verify (put files there, or set the batch_prefix param)",
                    batch.store.uri(batch.incoming))
    return {"manifest": batch.store.uri(batch.manifest_rel), "documents": len(docs)}


# =========================================================================== layout


def _error_record(doc: dict, code: str, message: str, stage: str) -> dict:
    return {"doc_id": doc["doc_id"], "stage": stage, "error": code, "message": message, "file": doc["pdf_uri"]}


def layout_local(batch: Batch, *, workers: int = 2, timeout_s: float = 60.0, ocr: bool = True) -> dict:
    """The embedded default's layout: the local PDF parser, each file in a bounded child
    process (``ocr``: scanned pages are OCR'd there). A file that fails gets
    ``runs/<ds>/<doc>/error.json`` and goes to the SME queue."""
    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import OCR_PARSER_ID, PARSER_ID, parse_many_bounded

    reusable = (PARSER_ID, OCR_PARSER_ID()) if ocr else (PARSER_ID,)

    stats = StageStats("layout")
    docs = batch.manifest()["documents"]
    todo = []
    for doc in docs:
        if doc.get("input_error"):  # refused at discovery: never parsed
            stats.errors += 1
            continue
        if batch.reuse and _bundle_reusable(batch, doc, reusable):
            stats.cache_hits += 1
            lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=PARSER_ID,
                    cache="hit", output_uri=batch.store.uri(batch.run_rel(doc["doc_id"], "bundle.json")))
        else:
            todo.append(doc)
    with tempfile.TemporaryDirectory(prefix="docverify-layout-") as tmp:
        local = {}
        for doc in todo:
            local[_local_file(batch, doc, tmp)] = doc
        for path, result in parse_many_bounded(list(local), workers=workers, timeout_s=timeout_s, ocr=ocr):
            doc = local[path]
            _record_layout(batch, doc, result, getattr(result, "parser", PARSER_ID), ParseError, stats)
    stats.docs = len(docs)
    # the stage's implementation: with OCR on, the OCR engine is part of it (each bundle's
    # ``parser`` names the engine only when one of its pages was OCR'd)
    return stats.save(batch, parser=OCR_PARSER_ID() if ocr else PARSER_ID)


def _local_file(batch: Batch, doc: dict, tmp: str) -> str:
    from docverify.store import _local_path

    p = _local_path(batch.store.path(doc["pdf_rel"]))
    if p is not None:
        return str(p)
    target = f"{tmp}/{doc['doc_id']}.pdf"
    with open(target, "wb") as fh:
        fh.write(batch.store.read_bytes(doc["pdf_rel"]))
    return target


def _bundle_reusable(batch: Batch, doc: dict, parser: str | tuple[str, ...]) -> bool:
    rel = batch.run_rel(doc["doc_id"], "bundle.json")
    if not batch.store.exists(rel):
        return False
    head = batch.store.read_json(rel)
    parsers = (parser,) if isinstance(parser, str) else parser
    if head.get("sha256") == doc["sha256"] and head.get("parser") in parsers:
        _clear_error(batch, doc["doc_id"])
        return True
    return False


def _clear_error(batch: Batch, doc_id: str) -> None:
    """Forget an earlier run's error for a document that now gets through (a re-run after a
    transient fault)."""
    err = batch.run_rel(doc_id, "error.json")
    if batch.store.exists(err):
        with contextlib.suppress(FileNotFoundError):  # a concurrent run of the night cleared it
            batch.store.path(err).unlink()


def _record_layout(batch: Batch, doc: dict, result: Any, parser: str, error_type: type, stats: StageStats) -> None:
    doc_id = doc["doc_id"]
    bundle_rel, err_rel = batch.run_rel(doc_id, "bundle.json"), batch.run_rel(doc_id, "error.json")
    if isinstance(result, error_type):
        stats.errors += 1
        batch.write_if_changed(err_rel, _error_record(doc, result.code, result.message, "layout"))
        lineage("layout", doc_id, input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=parser, cache="miss",
                error=result.code, output_uri=batch.store.uri(err_rel))
        return
    longest = max((len(p.text) for p in result.pages), default=0)
    if longest > MAX_PAGE_CHARS:  # one limit for every parser: such a page is never classified
        result = error_type("TOO_LARGE", f"{doc['pdf_uri']}: a page holds {longest} characters of text, over the "
                            f"limit of {MAX_PAGE_CHARS} (docverify.limits.MAX_PAGE_CHARS); split or re-export it",
                            doc["pdf_uri"])
        return _record_layout(batch, doc, result, parser, error_type, stats)
    bundle = result.model_copy(update={"doc_id": doc_id, "file_path": doc["pdf_uri"]})
    batch.store.write_json(bundle_rel, bundle)
    _clear_error(batch, doc_id)
    lineage("layout", doc_id, input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser=parser, cache="miss",
            pages=bundle.total_pages, has_tables=any(p.layout_metadata.has_tables for p in bundle.pages),
            output_uri=batch.store.uri(bundle_rel))


DOCAI_PARSER_PREFIX = "document_ai:"


#: google.rpc codes worth sending a document to Document AI again on a re-run
_DOCAI_RETRYABLE_STATUS = {4, 8, 10, 13, 14}  # DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE


def docs_to_layout(batch: Batch, docs: list[dict] | None = None,
                   parser_prefix: str = DOCAI_PARSER_PREFIX) -> list[dict]:
    """The manifest's documents that need a (new) layout: no bundle yet, another PDF (sha256), or
    one made by another parser family. Reused (not returned): a bundle of the same PDF by the
    same parser family, and a permanent Document AI failure of the same PDF (``retryable``
    false in its error record) — a re-run does not pay the service again for either. ``docs``:
    the manifest's documents when the caller has them already."""
    docs = batch.manifest()["documents"] if docs is None else docs
    docs = [d for d in docs if not d.get("input_error")]  # refused at discovery: never sent
    if not batch.reuse:
        return list(docs)
    out = []
    for doc in docs:
        head = batch.store.read_json_if_exists(batch.run_rel(doc["doc_id"], "bundle.json"))
        if head and head.get("sha256") == doc["sha256"] and str(head.get("parser", "")).startswith(parser_prefix):
            continue
        err = batch.store.read_json_if_exists(batch.run_rel(doc["doc_id"], "error.json"))
        if err and err.get("sha256") == doc["sha256"] and err.get("parser", "").startswith(parser_prefix) \
                and err.get("retryable") is False:
            continue
        out.append(doc)
    return out


def _docai_error(batch: Batch, doc: dict, exc: Any, stats: StageStats, *, retryable: bool) -> None:
    """A Document AI document error: the usual error record plus what a re-run needs to know."""
    stats.errors += 1
    rel = batch.run_rel(doc["doc_id"], "error.json")
    batch.write_if_changed(rel, {**_error_record(doc, exc.code, exc.message, "layout"), "sha256": doc["sha256"],
                                 "parser": DOCAI_PARSER_PREFIX + "layout-parser", "retryable": retryable})
    lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], parser="document_ai",
            cache="miss", error=exc.code, retryable=retryable, output_uri=batch.store.uri(rel))


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
    docs = batch.manifest()["documents"]
    todo = {d["doc_id"] for d in docs_to_layout(batch, docs)}
    for doc in docs:
        if doc["doc_id"] not in todo:
            stats.cache_hits += 1
            lineage("layout", doc["doc_id"], input_uri=doc["pdf_uri"], sha256=doc["sha256"], cache="hit",
                    parser="document_ai")
            continue
        r = by_uri.get(doc["pdf_uri"])
        if r is None:
            _docai_error(batch, doc, ParseError("DOCAI_NO_RESULT", f"{doc['pdf_uri']}: Document AI returned no "
                         f"result for this document; re-run the DAG run (it is submitted again)", doc["pdf_uri"]),
                         stats, retryable=True)
            continue
        if not r.get("ok"):
            code = r.get("error_code") or "DOCAI_FAILED"
            status = r.get("status_code")
            exc = ParseError(code, f"{doc['pdf_uri']}: Document AI could not process it (status {status}: "
                             f"{r.get('status_message') or 'no message'}); check the file, then re-run", doc["pdf_uri"])
            _docai_error(batch, doc, exc, stats, retryable=code == "DOCAI_FAILED" and status in _DOCAI_RETRYABLE_STATUS)
            continue
        try:
            bundle = bundle_from_docai(load_docai_output(open_output(r["output_uri"])), doc_id=doc["doc_id"],
                                       file_path=doc["pdf_uri"], sha256=doc["sha256"])
        except ParseError as exc:
            _docai_error(batch, doc, exc, stats, retryable=False)
            continue
        _record_layout(batch, doc, bundle, bundle.parser, ParseError, stats)
    stats.docs = len(docs)
    return stats.save(batch, parser="document_ai:batch")


def layout_docai_online(batch: Batch, process: Callable[[bytes], dict], *, max_pages: int = 15) -> dict:
    """Layout through Document AI's online endpoint, one document at a time, for a storage root
    Document AI cannot read in batch (a local one). ``process(pdf_bytes)`` returns the Document
    JSON. A PDF over ``max_pages`` (15 for the Layout Parser online) gets the error record
    ``TOO_MANY_PAGES`` naming the fix (a gs:// storage root, so the batch path runs)."""
    from docverify.layout.docai import bundle_from_docai
    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import page_count

    stats = StageStats("layout")
    docs = batch.manifest()["documents"]
    todo = {d["doc_id"] for d in docs_to_layout(batch, docs)}
    for doc in docs:
        if doc["doc_id"] not in todo:
            stats.cache_hits += 1
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
            _docai_error(batch, doc, exc, stats, retryable=False)
            continue
        except Exception as exc:  # noqa: BLE001 - one document's fault never fails the stage
            _docai_error(batch, doc, ParseError("DOCAI_FAILED", f"{doc['pdf_uri']}: Document AI online processing "
                         f"failed ({type(exc).__name__}); re-run when the service is available", doc["pdf_uri"]),
                         stats, retryable=True)
            continue
        _record_layout(batch, doc, result, result.parser, ParseError, stats)
    stats.docs = len(docs)
    return stats.save(batch, parser="document_ai:online")


# =========================================================================== shards


def failed_documents(batch: Batch) -> list[str]:
    return [d["doc_id"] for d in batch.manifest()["documents"]
            if batch.store.exists(batch.run_rel(d["doc_id"], "error.json"))]


def plan_shards(batch: Batch, shard_size: int = 25) -> list[list[str]]:
    """Documents with a bundle, in shards of ``shard_size`` (a shard is one mapped task)."""
    ok = [d["doc_id"] for d in batch.manifest()["documents"]
          if batch.store.exists(batch.run_rel(d["doc_id"], "bundle.json"))
          and not batch.store.exists(batch.run_rel(d["doc_id"], "error.json"))]
    size = max(1, int(shard_size))
    shards = [ok[i:i + size] for i in range(0, len(ok), size)]
    log.info("planned %d shard(s) of at most %d for %d document(s); %d document(s) failed layout",
             len(shards), size, len(ok), len(failed_documents(batch)))
    return shards


def _bundle(batch: Batch, doc_id: str) -> DocumentBundle:
    return DocumentBundle.model_validate(batch.store.read_json(batch.run_rel(doc_id, "bundle.json")))


# =========================================================================== classify


def read_companion(batch: Batch, rel: str) -> dict:
    """A ``<doc>.classification.json`` beside a PDF, within ``docverify.limits`` (size checked
    before the read; bytes, nesting, numbers, segment counts, a JSON object), or InputError."""
    uri = batch.store.uri(rel)
    check_size(batch.store.size(rel), MAX_COMPANION_BYTES, uri, "classification")
    return load_classification(batch.store.read_bytes(rel), uri)


async def _classify_one(batch: Batch, doc: dict, judge: Judge, stats: StageStats) -> None:
    doc_id = doc["doc_id"]
    rel, meta_rel = batch.run_rel(doc_id, "classification.json"), batch.run_rel(doc_id, "classification_meta.json")
    bundle = _bundle(batch, doc_id)
    if doc.get("classification_rel"):
        try:
            raw = read_companion(batch, doc["classification_rel"])
        except InputError as exc:  # this document only: escalated with the error in its packet
            stats.errors += 1
            batch.write_if_changed(batch.run_rel(doc_id, "error.json"),
                                   _error_record(doc, exc.code, exc.message, "classify"))
            lineage("classify", doc_id, source="provided", error=exc.code,
                    input_uri=batch.store.uri(doc["classification_rel"]))
            return
        _clear_error(batch, doc_id)
        batch.write_if_changed(rel, raw)
        meta = {"source": "provided", "uri": batch.store.uri(doc["classification_rel"]), "implementation": "provided",
                "bundle_sha256": bundle.sha256}
        batch.write_if_changed(meta_rel, meta)
        lineage("classify", doc_id, source="provided", input_uri=meta["uri"], output_uri=batch.store.uri(rel))
        return
    if batch.reuse and batch.store.exists(meta_rel) and batch.store.exists(rel):
        meta = batch.store.read_json(meta_rel)
        if meta.get("source") == "classifier" and meta.get("classifier_id") == judge.classifier_id \
                and meta.get("bundle_sha256") == bundle.sha256:
            stats.cache_hits += 1
            lineage("classify", doc_id, source="classifier", implementation=meta.get("implementation"), cache="hit",
                    output_uri=batch.store.uri(rel))
            return
    try:
        result = await judge.classify(bundle)
    except Exception as exc:  # a classifier fault becomes a document error, never a failed batch
        stats.add_usage(doc_id, getattr(exc, "usage", None), judge)  # a failed call still cost tokens
        stats.errors += 1
        err = {"doc_id": doc_id, "stage": "classify", "error": "CLASSIFICATION_FAILED",
               "message": f"The classifier {judge.name} failed: {type(exc).__name__}", "file": doc["pdf_uri"]}
        batch.write_if_changed(batch.run_rel(doc_id, "error.json"), err)
        lineage("classify", doc_id, implementation=judge.name, error="CLASSIFICATION_FAILED", exception=type(exc).__name__)
        return
    stats.add_usage(doc_id, result.usage, judge)
    _clear_error(batch, doc_id)
    batch.write_if_changed(rel, result.classification)
    batch.write_if_changed(meta_rel, {"source": "classifier", "judge": judge.name, "implementation": result.implementation,
                                      "classifier_id": judge.classifier_id, "bundle_sha256": bundle.sha256})
    lineage("classify", doc_id, source="classifier", implementation=result.implementation, cache="miss",
            llm_calls=result.usage.llm_calls, dominant_type=result.classification.dominant_type_overall,
            segments=result.classification.number_of_segments, output_uri=batch.store.uri(rel))


def classify_shard(batch: Batch, shard: list[str], judge: Judge, shard_key: str = "") -> dict:
    stats = StageStats("classify")
    by_id = {d["doc_id"]: d for d in batch.manifest()["documents"]}
    asyncio.run(gather_bounded([lambda d=by_id[i]: _classify_one(batch, d, judge, stats) for i in shard],
                               batch.concurrency))
    stats.docs = len(shard)
    return stats.save(batch, f"classify_{shard_key}" if shard_key else None, shard=shard)


# =========================================================================== V1–V4 (attempt 0)


def _classification(batch: Batch, doc_id: str) -> Any:
    rel = batch.run_rel(doc_id, "classification.json")
    return batch.store.read_json(rel) if batch.store.exists(rel) else None


def _agent_rel(batch: Batch, doc_id: str, agent: str) -> str:
    return f"{ArtifactStore.attempt_dir(batch.ds, doc_id, 0)}/{agent}.json"


def _save_outcome(batch: Batch, doc_id: str, agent: str, outcome: AgentOutcome) -> None:
    batch.write_if_changed(_agent_rel(batch, doc_id, agent), {
        "agent": agent, "issues": [i.model_dump(mode="json") for i in outcome.issues],
        "runs": [r.model_dump(mode="json") for r in outcome.runs]})


def _load_outcome(batch: Batch, doc_id: str, agent: str) -> AgentOutcome | None:
    from docverify.models import VerifierRun

    rel = _agent_rel(batch, doc_id, agent)
    if not batch.store.exists(rel):
        return None
    data = batch.store.read_json(rel)
    return AgentOutcome([Issue.model_validate(i) for i in data["issues"]],
                        [VerifierRun.model_validate(r) for r in data["runs"]])


def v1_shard(batch: Batch, shard: list[str], shard_key: str = "") -> dict:
    stats = StageStats("V1")
    for doc_id in shard:
        raw = _classification(batch, doc_id)
        if raw is None:  # classification failed: recorded as a document error
            continue
        try:
            _, outcome = run_v1(_bundle(batch, doc_id), raw)
        except Exception as exc:  # noqa: BLE001 - this document only: no V1 result → VERIFICATION_INCOMPLETE
            stats.errors += 1
            lineage("V1", doc_id, error="VERIFIER_FAILED", exception=type(exc).__name__)
            continue
        _save_outcome(batch, doc_id, "V1", outcome)
        stats.docs += 1
        lineage("V1", doc_id, implementation="rules-v1", issue_codes=sorted(i.code for i in outcome.issues))
    return stats.save(batch, f"V1_{shard_key}" if shard_key else None)


def agent_shard(batch: Batch, agent: str, shard: list[str], judge: Judge, shard_key: str = "") -> dict:
    """V2, V3 or V4 (rule phase + judgment phase) for every document of a shard."""
    stats = StageStats(agent)

    async def one(doc_id: str) -> None:
        try:
            await one_doc(doc_id)
        except Exception as exc:  # noqa: BLE001 - this document only: no result → VERIFICATION_INCOMPLETE
            stats.errors += 1
            lineage(agent, doc_id, error="VERIFIER_FAILED", exception=type(exc).__name__)

    async def one_doc(doc_id: str) -> None:
        raw = _classification(batch, doc_id)
        if raw is None:
            return
        bundle = _bundle(batch, doc_id)
        cls, _ = parse(raw)
        if cls is None:  # SCHEMA_INVALID: V1 already reported it; nothing else can be read
            _save_outcome(batch, doc_id, agent, AgentOutcome([], []))
            return
        outcome = await run_agent(agent, bundle, cls, judge)
        stats.add_usage(doc_id, outcome.usage, judge)
        stats.docs += 1
        _save_outcome(batch, doc_id, agent, outcome)
        judgment = [r for r in outcome.runs if r.phase == "judgment"]
        jury = [{k: v[k] for k in ("code", "votes", "reason_codes", "final_action", "flag_reason", "rule")}
                for r in outcome.runs if r.phase == "jury" for v in r.votes or []]  # issue 14: codes only
        lineage(agent, doc_id, implementation=[r.implementation for r in outcome.runs],
                judgment_skipped=bool(judgment and judgment[0].skipped),
                llm_calls=outcome.usage.llm_calls, cache_hits=outcome.usage.cache_hits,
                issue_codes=sorted(i.code for i in outcome.issues), **({"jury": jury} if jury else {}))

    asyncio.run(gather_bounded([lambda d=d: one(d) for d in shard], batch.concurrency))
    return stats.save(batch, f"{agent}_{shard_key}" if shard_key else None)


# =========================================================================== V5 arbiter


def arbiter(batch: Batch, second_opinion: Any = None) -> dict:
    """Assemble attempt 0 of every document, decide, and split the documents by route
    (``runs/<ds>/_routes.json``).

    Returns ``{"routes": [...task ids to follow...], "counts": …}``.
    ``accept`` and ``write_sme_packets`` are followed whenever documents may reach them — also
    from the retry, whose outcomes they read from the store.
    """
    stats = StageStats("v5_arbiter")
    so_counts: dict[str, int] = {}
    routes: dict[str, list[str]] = {"accept": [], "auto_fix_retry": [], "write_sme_packets": []}
    decisions = {}
    for doc in batch.manifest()["documents"]:
        doc_id = doc["doc_id"]
        stats.docs += 1
        try:
            route, decisions[doc_id] = _decide(batch, doc, second_opinion, stats, so_counts)
        except Exception as exc:  # noqa: BLE001 - this document only, never the night
            stats.errors += 1
            batch.write_if_changed(batch.run_rel(doc_id, "error.json"), _error_record(
                doc, "VERIFICATION_FAILED", f"{doc['pdf_uri']}: the verification could not be assembled "
                f"({type(exc).__name__}); check its classification, then re-run", "v5_arbiter"))
            route, decisions[doc_id] = "write_sme_packets", {"decision": "ESCALATE_TO_SME", "rule": None,
                                                             "reason": "error", "error": "VERIFICATION_FAILED"}
            lineage("v5_arbiter", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error",
                    error="VERIFICATION_FAILED", exception=type(exc).__name__)
        routes[route].append(doc_id)
    batch.write_if_changed(batch.routes_rel, {"ds": batch.ds, "routes": routes, "attempt_0": decisions})
    follow = [r for r in ROUTES if routes[r]]
    if routes["auto_fix_retry"]:  # documents from the retry end in accept or write_sme_packets
        follow = list(ROUTES)
    counts = {k: len(v) for k, v in routes.items()}
    stats.save(batch, counts=counts, **({"second_opinion": so_counts} if second_opinion is not None else {}))
    log.info("V5 routes: %s; following %s", counts, follow)
    return {"routes": [ROUTE_TASKS[r] for r in follow], "counts": counts}


def _decide(batch: Batch, doc: dict, second_opinion: Any = None, stats: StageStats | None = None,
            so_counts: dict[str, int] | None = None) -> tuple[str, dict]:
    """Attempt 0 of one document → (route, decision summary)."""
    doc_id = doc["doc_id"]
    if batch.store.exists(batch.run_rel(doc_id, "error.json")):
        err = batch.store.read_json(batch.run_rel(doc_id, "error.json"))
        lineage("v5_arbiter", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error", error=err["error"])
        return "write_sme_packets", {"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error",
                                     "error": err["error"]}
    raw = _classification(batch, doc_id)
    outcomes = [_load_outcome(batch, doc_id, a) for a in ("V1", *AGENTS)]
    missing = [a for a, o in zip(("V1", *AGENTS), outcomes, strict=True) if o is None]
    if missing:  # a verifier task failed for this document: never accept silently
        outcomes = [o or AgentOutcome([], []) for o in outcomes]
        outcomes.append(AgentOutcome([make_issue(
            "VERIFICATION_INCOMPLETE", f"No result from {', '.join(missing)} for this document",
            agent=missing[0])], []))
    cls, _ = parse(raw)
    report = assemble(doc_id, 0, cls if cls is not None else raw, outcomes)
    rec = attempt_record(report)
    # --- issue 14: the V5 second opinion (optional; it can only make the route stricter)
    if second_opinion is not None:
        from docverify.arbiters.second_opinion import record_second_opinion

        rec = record_second_opinion(second_opinion, _bundle(batch, doc_id), cls, report, rec, stats,
                                    so_counts if so_counts is not None else {})
    decision = rec.decision
    base = ArtifactStore.attempt_dir(batch.ds, doc_id, 0)
    batch.write_if_changed(f"{base}/report.json", report)
    batch.write_if_changed(f"{base}/v5_arbiter_decision.json", decision)
    repair = rec.blocker_repair and cls is not None  # auto-fixable BLOCKERs: fixed once before rule 1
    if decision.decision != "AUTO_RETRY" and not repair:  # decided on attempt 0: the final result
        batch.write_if_changed(_final_rel(batch, doc_id), make_result(
            doc_id, [rec], [], cls, raw, "arbiter" if cls is not None else "schema", ""))
    route = "auto_fix_retry" if repair else {
        "AUTO_ACCEPT": "accept", "AUTO_RETRY": "auto_fix_retry", "ESCALATE_TO_SME": "write_sme_packets"}[
        decision.decision]
    lineage("v5_arbiter", doc_id, decision=decision.decision, rule=decision.rule,
            issue_codes=sorted(i.code for i in report.issues), fingerprint=report.fingerprint,
            output_uri=batch.store.uri(f"{base}/v5_arbiter_decision.json"), audit=decision.explanation_audit,
            **({"second_opinion": decision.second_opinion["override"]} if decision.second_opinion else {}))
    return route, {"decision": decision.decision, "rule": decision.rule}


def retry_shards(batch: Batch, shard_size: int = 25) -> list[list[str]]:
    retry = batch.store.read_json(batch.routes_rel)["routes"]["auto_fix_retry"]
    size = max(1, int(shard_size))
    return [retry[i:i + size] for i in range(0, len(retry), size)]


# =========================================================================== routes


def _final_rel(batch: Batch, doc_id: str) -> str:
    return batch.run_rel(doc_id, "verification.json")


def _attempt0(batch: Batch, doc_id: str):
    from docverify.models import VerificationReport

    return VerificationReport.model_validate(
        batch.store.read_json(f"{ArtifactStore.attempt_dir(batch.ds, doc_id, 0)}/report.json"))


def auto_fix_retry_shard(batch: Batch, shard: list[str], judge: Judge, shard_key: str = "") -> dict:
    """Fix → verify again (same V1–V5) for documents routed AUTO_RETRY, from attempt 0."""
    stats = StageStats("auto_fix_retry")

    async def one(doc_id: str) -> None:
        bundle = _bundle(batch, doc_id)
        usage = Usage()
        result = await verify_document(bundle, _classification(batch, doc_id), judge,
                                       first_report=_attempt0(batch, doc_id), usage=usage)
        stats.add_usage(doc_id, usage, judge)
        stats.docs += 1
        _write_result(batch, result)
        lineage("auto_fix_retry", doc_id, attempts=len(result.attempts), final_decision=result.final_decision,
                rule=result.final_rule, stop_reason=result.stop_reason, llm_calls=usage.llm_calls,
                fixes=[f.fixer for f in result.fixes_applied],
                issue_codes=[sorted(i.code for i in a.issues) for a in result.attempts])

    asyncio.run(gather_bounded([lambda d=d: one(d) for d in shard], batch.concurrency))
    return stats.save(batch, f"auto_fix_retry_{shard_key}" if shard_key else None)


def _write_result(batch: Batch, result: VerificationResult) -> None:
    from docverify.outputs import write_attempts

    write_attempts(batch.store, batch.ds, result, batch.write_if_changed)


def _final_results(batch: Batch) -> dict[str, VerificationResult]:
    """The final result of every verified document: written by the arbiter for documents it
    decided on attempt 0, by the retry for the others."""
    routes = batch.store.read_json(batch.routes_rel)["routes"]
    errors = _errors(batch)
    retried = set(routes["auto_fix_retry"])
    out = {}
    for doc_id in routes["accept"] + routes["write_sme_packets"] + routes["auto_fix_retry"]:
        rel = _final_rel(batch, doc_id)
        if doc_id in errors or not batch.store.exists(rel):
            continue
        res = VerificationResult.model_validate(batch.store.read_json(rel))
        if doc_id in retried and len(res.attempts) == 1 and res.stop_reason == "arbiter":
            continue  # an earlier run's attempt-0 result: the retry has not run for it
        out[doc_id] = res
    return out


def _errors(batch: Batch) -> dict[str, dict]:
    out = {}
    for d in batch.manifest()["documents"]:
        rel = batch.run_rel(d["doc_id"], "error.json")
        if batch.store.exists(rel):
            out[d["doc_id"]] = batch.store.read_json(rel)
    return out


def withdraw(batch: Batch, rel: str, kind: str, doc_id: str, reason: str) -> str | None:
    """Move a stale output of an earlier run of this night aside, never deleting it:
    ``withdrawn/<ds>/<kind>_<doc_id>[.<n>].json`` holds the record, its URI, the reason and the
    run that withdrew it (create-if-absent: an earlier withdrawal is never overwritten). None when
    another run of the same night withdrew it first."""
    from docverify.sme import now_iso

    record = batch.store.read_json_if_exists(rel)
    if record is None:
        return None
    moved = {"withdrawn_at": now_iso(), "run_id": batch.run_id, "reason": reason, "kind": kind,
             "doc_id": doc_id, "original_uri": batch.store.uri(rel), "record": record}
    n = 1
    while True:
        target = f"withdrawn/{batch.ds}/{kind}_{doc_id}" + (f".{n}" if n > 1 else "") + ".json"
        if batch.store.write_json(target, moved, overwrite=False):
            break
        n += 1
    with contextlib.suppress(FileNotFoundError):  # a concurrent run of the night moved it already
        batch.store.path(rel).unlink()
    lineage("withdraw", doc_id, kind=kind, reason=reason, from_uri=batch.store.uri(rel),
            output_uri=batch.store.uri(target))
    return target


def _review_id(batch: Batch, doc: dict) -> str:
    from docverify.sme import review_id

    return review_id(batch.ds, doc["doc_id"], doc.get("sha256"))


def _night_packet_keys(batch: Batch, docs: Iterable[str]) -> dict[str, list[str]]:
    """This night's packet keys per doc id of ``docs`` (``<ds>_<doc_id>_<10 hex>``), from one listing."""
    import re

    docs = set(docs)
    out: dict[str, list[str]] = {}
    prefix = f"sme_packet_{batch.ds}_"
    for name in batch.store.list("sme_packets", ".json"):
        if not name.startswith(prefix):
            continue
        m = re.fullmatch(r"(.+)_([0-9a-f]{10})", name[len(prefix):-len(".json")])
        if m and m.group(1) in docs:
            out.setdefault(m.group(1), []).append(name[len("sme_packet_"):-len(".json")])
    return out


def _withdraw_pending_packets(batch: Batch, doc: dict, reason: str, keys: dict[str, list[str]], *,
                              keep_current: bool) -> None:
    """*Pending* packets of this night's document from an earlier run: the one of its current
    content (unless ``keep_current``: it is being written again) and those of content the night no
    longer holds (the file was replaced). A reviewed packet and ground truth are never touched."""
    from docverify.sme import html_rel

    current = _review_id(batch, doc)
    for key in keys.get(doc["doc_id"], []):
        if key == current and keep_current:
            continue
        rel = ArtifactStore.packet_rel(key)
        packet = batch.store.read_json_if_exists(rel)
        if not isinstance(packet, dict) or packet.get("review_status", "pending") != "pending":
            continue
        why = reason if key == current else f"{reason}; the file now has other content (sha256 {current[-10:]}…)"
        withdraw(batch, rel, "sme_packet", key, why)
        with contextlib.suppress(FileNotFoundError):  # the packet's rendering goes with it
            batch.store.path(html_rel(key)).unlink()


def accept(batch: Batch) -> dict:
    """Write ``accepted/<ds>/<doc>.json`` for every document whose final decision is
    AUTO_ACCEPT (directly, or after the retry). A pending packet of an earlier run of this night
    for such a document is withdrawn (moved aside with the reason): one route per document."""
    stats = StageStats("accept")
    written = []
    by_id = {d["doc_id"]: d for d in batch.manifest()["documents"]}
    keys = _night_packet_keys(batch, by_id)
    for doc_id, result in _final_results(batch).items():
        if result.final_decision != "AUTO_ACCEPT":
            continue
        outputs = _write_final(batch, doc_id, result)
        _withdraw_pending_packets(batch, by_id[doc_id], f"accepted by a later run of {batch.ds} "
                                  f"(rule {result.final_rule})", keys, keep_current=False)
        written.append(doc_id)
        lineage("accept", doc_id, decision="AUTO_ACCEPT", rule=result.final_rule, attempts=len(result.attempts),
                output_uri=outputs.get("accepted"))
    stats.docs = len(written)
    stats.save(batch, documents=written)
    return {"accepted": written, "uri": batch.store.uri(f"accepted/{batch.ds}")}


def _write_final(batch: Batch, doc_id: str, result: VerificationResult) -> dict:
    """Accepted record or SME packet, rewritten only when its content changed."""
    bundle = _bundle(batch, doc_id)
    meta_rel = batch.run_rel(doc_id, "classification_meta.json")
    meta = batch.store.read_json(meta_rel) if batch.store.exists(meta_rel) else {}
    return write_outcome(batch.store, batch.ds, bundle, result, run_id=batch.run_id,
                         provenance={"classification_source": meta.get("source"),
                                     "classifier": meta.get("implementation")},
                         write_json=batch.write_if_changed)


def write_sme_packets(batch: Batch) -> dict:
    """One packet per escalated document (after V5 or after the retry), and per document that
    could not be parsed or classified. A packet an SME already reviewed is kept."""
    from docverify.outputs import write_attempts
    from docverify.sme_render import write_packet_html

    stats = StageStats("write_sme_packets")
    written, kept = [], []
    by_id = {d["doc_id"]: d for d in batch.manifest()["documents"]}
    keys = _night_packet_keys(batch, by_id)

    def production(doc_id: str) -> dict | None:
        """A production classification supplied beside the PDF: ``<doc>.production.json``
        (within the companion limits; one that is not is left out of the packet)."""
        rel = by_id[doc_id]["pdf_rel"][: -len(".pdf")] + ".production.json"
        if not batch.store.exists(rel):
            return None
        try:
            return read_companion(batch, rel)
        except InputError as exc:
            lineage("write_sme_packets", doc_id, production_error=exc.code)
            return None

    def withdraw_accepted(doc_id: str, why: str) -> None:
        rel = f"accepted/{batch.ds}/{doc_id}.json"
        if batch.store.exists(rel):
            withdraw(batch, rel, "accepted", doc_id, f"escalated by a later run of {batch.ds} ({why})")

    for doc_id, result in _final_results(batch).items():
        if result.final_decision != "ESCALATE_TO_SME":
            continue
        bundle = _bundle(batch, doc_id)
        write_attempts(batch.store, batch.ds, result, batch.write_if_changed)
        key = _review_id(batch, by_id[doc_id])
        packet = build_packet(doc_id=doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                              bundle_path=batch.store.uri(batch.run_rel(doc_id, "bundle.json")), result=result,
                              production_classification=production(doc_id), run_id=batch.run_id, bundle=bundle,
                              review_id=key)
        _withdraw_pending_packets(batch, by_id[doc_id], f"escalated again by a later run of {batch.ds}", keys,
                                  keep_current=True)
        uri, outcome = write_packet(batch.store, packet, write_json=batch.write_if_changed)
        html_uri, _ = write_packet_html(batch.store, key, bundle=bundle)
        withdraw_accepted(doc_id, f"rule {result.final_rule}")
        (kept if outcome == "kept_reviewed" else written).append(doc_id)
        lineage("write_sme_packets", doc_id, decision="ESCALATE_TO_SME", rule=result.final_rule,
                stop_reason=result.stop_reason, output_uri=uri, html_uri=html_uri, packet=outcome,
                production_supplied=packet.production_classification is not None)
    for doc_id, err in _errors(batch).items():
        bundle_rel = batch.run_rel(doc_id, "bundle.json")
        total = batch.store.read_json(bundle_rel)["total_pages"] if batch.store.exists(bundle_rel) else 0
        key = _review_id(batch, by_id[doc_id])
        packet = build_packet(doc_id=doc_id, pdf_path=by_id[doc_id]["pdf_uri"], total_pages=total,
                              bundle_path=batch.store.uri(bundle_rel) if total else "", result=None,
                              error=err, run_id=batch.run_id, review_id=key)
        _withdraw_pending_packets(batch, by_id[doc_id], f"escalated again by a later run of {batch.ds}", keys,
                                  keep_current=True)
        uri, outcome = write_packet(batch.store, packet, write_json=batch.write_if_changed)
        html_uri, _ = write_packet_html(batch.store, key)
        withdraw_accepted(doc_id, err["error"])
        (kept if outcome == "kept_reviewed" else written).append(doc_id)
        lineage("write_sme_packets", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error", error=err["error"],
                output_uri=uri, html_uri=html_uri, packet=outcome)
    stats.docs = len(written) + len(kept)
    stats.save(batch, written=written, kept_reviewed=kept)
    return {"packets": written, "kept_reviewed": kept, "uri": batch.store.uri("sme_packets")}


def load_stage_stats(batch: Batch) -> list[dict]:
    rel = f"runs/{batch.ds}/_stages"
    return [batch.store.read_json(f"{rel}/{n}") for n in batch.store.list(rel, ".json")]
