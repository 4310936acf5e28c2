"""layout: PDFs → DocumentBundles, locally (time-bounded parse workers, OCR for scans) or from Document AI outputs; unchanged bundles are reused."""

from __future__ import annotations

import functools
import hashlib
import logging
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from pydantic import JsonValue

from docverify.domain.models import DocumentBundle
from docverify.layout.docai import bundle_from_docai, load_docai_output
from docverify.layout.errors import INPUT_CHANGED, ParseError
from docverify.layout.pool import DEFAULT_FILE_CEILING_S, DEFAULT_PAGE_TIMEOUT_S, OCRStat, parse_many_bounded
from docverify.layout.split import DEFAULT_SPLIT_SCAN_PAGES
from docverify.stages.common import (
    AIRFLOW_MAP_LIMIT,
    MAX_SHARDS,
    Batch,
    StageStats,
    lineage,
    shard_size_for,
)
from docverify.stages.results import LayoutPart, StageOutcome
from docverify.storage.inputs import GONE, LINK, changed, entry_problem, not_regular, read_regular, real_root
from docverify.storage.limits import (
    MAX_PAGE_CHARS,
    MAX_PDF_BYTES,
    InputError,
)
from docverify.storage.runstore import ErrorRecord, ManifestDoc
from docverify.storage.store import OutsideRootError, StoragePath, local_path

log = logging.getLogger("docverify.stages")

# =========================================================================== layout


def _parser_matches(parser: JsonValue, parsers: Collection[str], prefix: str) -> bool:
    # parser: as a stored record or bundle names it
    """One of ``parsers``, or a parser starting with ``prefix`` (a parser family)."""
    return parser in parsers or bool(prefix and str(parser or "").startswith(prefix))


class _OCRExtra(TypedDict, total=False):
    """A local layout record's OCR keys (ADR 0052): each OCR'd document's pages and seconds, the totals."""

    ocr: dict[str, dict[str, float]]
    ocr_pages: int
    ocr_seconds: float


class _LayoutExtra(_OCRExtra, total=False):
    """A layout record's own keys besides the night's index: the parser, the parts merged, the time."""

    parser: str
    parts: int
    seconds: float


@dataclass
class _Layout:
    """What the layout stage learns per document, saved as its record (a
    :class:`~docverify.storage.runstore.NightIndex`, which the later stages read instead of the manifest):
    the documents with a bundle, the error records of the others, and those whose run folder did
    not exist before (``new``: nothing of theirs to reuse downstream, no request to find out)."""

    batch: Batch
    ok: set[str] = field(default_factory=set)
    errors: dict[str, ErrorRecord] = field(default_factory=dict)
    new: list[str] = field(default_factory=list)
    parsed: dict[str, list[str]] = field(default_factory=dict)
    #: False: the manifest only (the merge of a mapped layout: the plan looked at the night before)
    scan: bool = True
    #: each OCR'd document's OCR work: doc id → {"pages", "seconds"} (ADR 0052)
    ocr: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rs = self.batch.rs
        self.manifest = rs.manifest()
        # one listing: which documents have a run folder; and what this night's earlier layout made
        self.present = rs.names(rs.night) if self.scan else set()
        self.previous = rs.night_index() if self.scan else None

    def seen(self, doc_id: str) -> None:
        if doc_id not in self.present:
            self.new.append(doc_id)

    def reusable(self, doc: ManifestDoc, parsers: Collection[str] = (), prefix: str = "") -> bool:
        """The bundle this night's earlier layout recorded for the same PDF (sha256) by one of
        ``parsers`` (or a parser starting with ``prefix``) — known without reading the bundle."""
        if self.previous is None or doc.doc_id not in self.present:
            return False
        sha, parser = (self.previous.parsed.get(doc.doc_id) or ["", ""])[:2]
        return sha == doc.sha256 and _parser_matches(parser, parsers, prefix)

    def laid_out(self, doc_id: str, sha256: str, parser: str) -> None:
        self.ok.add(doc_id)
        self.parsed[doc_id] = [sha256, parser]
        if self.previous is not None and doc_id in self.previous.failed:  # an earlier error no longer holds
            self.batch.rs.delete(self.batch.rs.error_rel(doc_id))

    def failed(self, doc_id: str, record: ErrorRecord) -> None:
        self.errors[doc_id] = record

    def input_error(self, doc: ManifestDoc) -> None:
        """A document refused at discovery: its error record (one read, refusals only)."""
        stored = self.batch.rs.get_json(self.batch.rs.error_rel(doc.doc_id))
        rec = ErrorRecord.model_validate(stored) if stored else ErrorRecord.of(
            doc, str(doc.input_error), f"{doc.pdf_uri}: refused at discovery ({doc.input_error})", "discover")
        self.failed(doc.doc_id, rec)

    def save(self, stats: StageStats, **extra: Unpack[_LayoutExtra]) -> StageOutcome:
        docs = self.manifest.documents
        return StageOutcome(stats.save(self.batch, documents=[d.model_dump(mode="json", exclude_none=True) for d in docs],
                          ok=[d.doc_id for d in docs if d.doc_id in self.ok and d.doc_id not in self.errors],
                          failed=_errors_json(self.errors), new=self.new, parsed=self.parsed, **extra))


def _errors_json(errors: dict[str, ErrorRecord]) -> dict[str, dict[str, JsonValue]]:
    """Error records as a stage record holds them (``failed``: doc id → the ``error.json`` content)."""
    return {doc_id: rec.model_dump(mode="json") for doc_id, rec in errors.items()}


def _errors_of(stored: Mapping[str, JsonValue]) -> dict[str, ErrorRecord]:
    """A stage record's ``failed`` as stored (JSON), validated into error records."""
    return {doc_id: ErrorRecord.model_validate(rec) for doc_id, rec in stored.items()}


def _docs(batch: Batch) -> list[ManifestDoc]:
    return batch.rs.manifest().documents


#: PDFs per mapped ``layout_parse`` task at least (≈ 1 minute of parsing with 2 parse workers on 2
#: cores); it grows with the night so at most ``max_shards`` such tasks run. Issue 15: one unmapped
#: layout was 615 s of a 10,000-PDF night's 754 s and would reach the 60-minute task timeout near
#: 50,000; in parts of 250 the same night took 830 s and 162 CPU-s more (each part pays a task
#: start-up and its own parse processes), so a part is larger than a verify shard
LAYOUT_SHARD_SIZE = 1000


def _layout_rel(batch: Batch, name: str) -> str:
    """``runs/<ds>/_stages/layout/<name>.json``: the local layout's plan and its parts' records (a
    folder: only the records directly in ``_stages/`` are stages of the batch report)."""
    return f"{batch.rs.stages_dir}/layout/{name}.json"


def _local_parsers(ocr: bool) -> tuple[str, ...]:
    from docverify.layout.local_pdf import OCR_PARSER_ID, PARSER_ID  # imports pypdfium2: not at DAG parse

    return (PARSER_ID, OCR_PARSER_ID()) if ocr else (PARSER_ID,)


def plan_layout_local(batch: Batch, *, ocr: bool = True, shard_size: int = LAYOUT_SHARD_SIZE,
                      max_shards: int = MAX_SHARDS, map_limit: int = AIRFLOW_MAP_LIMIT) -> list[LayoutPart]:
    """The local layout's first step (metadata only, nothing parsed): documents refused at
    discovery and unchanged bundles (``reuse``) are settled here; the PDFs left to parse are split
    into parts of at least ``shard_size`` (at most ``max_shards``), one mapped ``layout_parse``
    task each. Writes the plan (``_stages/layout/plan.json``: what is settled, the parts, a token that the
    parts' records must carry) and returns the parts."""
    import uuid

    shard_size_for(0, shard_size, max_shards, map_limit)  # a bad value fails before anything is read
    reusable = _local_parsers(ocr)
    stats = StageStats("layout")
    state = _Layout(batch)
    docs = state.manifest.documents  # the manifest as _Layout read and validated it
    todo = []
    for doc in docs:
        state.seen(doc.doc_id)
        if doc.input_error:  # refused at discovery: never parsed
            stats.errors += 1
            state.input_error(doc)
            continue
        hit = _bundle_reusable(batch, doc, state, reusable) if batch.reuse else None
        if hit:
            stats.cache_hits += 1
            state.laid_out(doc.doc_id, hit[0], hit[1])
            lineage("layout", doc.doc_id, sha256=doc.sha256, parser=hit[1],
                    cache="hit", output_uri=batch.rs.uri(batch.rs.bundle_rel(doc.doc_id)))
        else:
            todo.append(doc)
    token = uuid.uuid4().hex
    n_parts = -(-len(todo) // shard_size_for(len(todo), shard_size, max_shards, map_limit))
    parts = [LayoutPart(token=token, part=i, doc_ids=ids) for i, ids in enumerate(_balanced(todo, n_parts))]
    previous_failed = set(state.previous.failed) if state.previous is not None else set()
    batch.rs.write_json(_layout_rel(batch, "plan"), {
        **stats.record(), "token": token, "parts": len(parts), "ok": sorted(state.ok), "parsed": state.parsed,
        "failed": _errors_json(state.errors), "new": state.new, "stale_errors": [d.doc_id for d in todo if d.doc_id in previous_failed]})
    log.info("layout plan: %d document(s), %d reused, %d refused at discovery, %d to parse in %d part(s)",
             len(docs), stats.cache_hits, stats.errors, len(todo), len(parts))
    return parts


#: what one PDF costs a part besides its bytes (a child-process round trip, the bundle's write), in bytes
_PER_PDF_BYTES = 64 * 1024


def _balanced(docs: list[ManifestDoc], n: int) -> list[list[str]]:
    """``docs`` in ``n`` parts of about equal parsing cost (longest first onto the least loaded part;
    the cost is the file's size plus a per-file constant), each part in manifest order. Runs of
    like files (a night's scans, copies named alike) would otherwise fill one part: measured, a
    10,000-PDF night in contiguous parts ended on one 445 s part of OCR'd scans while the other
    parts had finished."""
    if n <= 1:
        return [[d.doc_id for d in docs]] if docs else []
    import heapq

    order = {d.doc_id: i for i, d in enumerate(docs)}
    heap = [(0, i) for i in range(n)]
    out: list[list[str]] = [[] for _ in range(n)]
    for d in sorted(docs, key=lambda d: (-d.bytes, order[d.doc_id])):
        load, i = heapq.heappop(heap)
        out[i].append(d.doc_id)
        heapq.heappush(heap, (load + d.bytes + _PER_PDF_BYTES, i))
    return [sorted(ids, key=order.__getitem__) for ids in out if ids]


def layout_local_part(batch: Batch, part: LayoutPart, *, workers: int = 2, timeout_s: float = 60.0,
                      ocr: bool = True, page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S,
                      file_ceiling_s: float = DEFAULT_FILE_CEILING_S,
                      split_scan_pages: int = DEFAULT_SPLIT_SCAN_PAGES) -> StageOutcome:
    """One part of the plan: its PDFs through the local parser, each in a bounded child process
    (``ocr``: scanned pages are OCR'd there, a scan of ``split_scan_pages`` image pages or more in page
    ranges across the ``workers``; ``timeout_s`` to open a PDF, ``page_timeout_s`` per
    page, ``file_ceiling_s`` per PDF: :mod:`docverify.layout.pool`). A file that fails gets ``runs/<ds>/<doc>/error.json``
    and goes to the SME queue; a file whose bytes are not those discovered (their sha256, hashed by the
    worker from the bytes it parses) is ``INPUT_CHANGED`` (ADR 0052). Writes the part's record
    (``_stages/layout/part_<n>.json``, with each OCR'd document's OCR pages and seconds); a retried part
    parses its PDFs again and writes the same bundles."""
    plan = batch.rs.get_json(_layout_rel(batch, "plan")) or {}
    if plan.get("token") != part.token:
        raise RuntimeError(f"{batch.rs.uri(_layout_rel(batch, 'plan'))}: the layout plan was replaced since this "
                           "part was planned (another run of the same night?); clear the run's layout_plan task")
    by_id = {d.doc_id: d for d in _docs(batch)}
    docs = [by_id[i] for i in part.doc_ids]
    stale = set(plan.get("stale_errors", ()))
    stats = StageStats("layout")
    state = _PartState(batch, stale)
    root = real_root(batch.store)
    with tempfile.TemporaryDirectory(prefix="docverify-layout-") as tmp:
        local: dict[str, ManifestDoc] = {}
        for doc in docs:  # an entry that is no longer a regular file: its error, the part goes on (ADR 0033)
            try:
                local[_local_file(batch, doc, tmp)] = doc
            except InputError as exc:
                _input_refused(batch, doc, exc, stats, state)
        # a local root: each worker opens its PDF without following a link, under the root only
        _parse_local(batch, local, stats, state, root, workers=workers, timeout_s=timeout_s, ocr=ocr,
                     page_timeout_s=page_timeout_s, file_ceiling_s=file_ceiling_s, split_scan_pages=split_scan_pages)
    stats.docs = len(docs)
    record = stats.record(token=part.token, part=part.part, parsed=state.parsed, failed=_errors_json(state.errors),
                          ocr=state.ocr)
    batch.rs.write_json(_layout_rel(batch, f"part_{part.part}"), record)
    log.info("layout part %d: %d PDF(s) parsed, %d failed, %.1fs", part.part, len(state.parsed), stats.errors,
             record["seconds"])
    # the task's XCom: the part's counts (its parsed documents are in the record, for the merge)
    return StageOutcome({"stage": record["stage"], "docs": record["docs"], "errors": record["errors"],
                         "seconds": record["seconds"]})


def _parse_local(batch: Batch, local: dict[str, ManifestDoc], stats: StageStats, state: _PartState,
                 root: str | None, *, workers: int, timeout_s: float, ocr: bool, page_timeout_s: float,
                 file_ceiling_s: float, split_scan_pages: int) -> None:
    """The part's local files (path → document) through :func:`parse_many_bounded`, each result recorded:
    the bundle, the parser's error, or the input's refusal — a link or folder swapped in while the part
    ran (``INPUT_NOT_REGULAR``), other bytes than those discovered (``INPUT_CHANGED``). ``root``: a local
    storage root's real path (each worker opens its PDF without following a link, under it), None for a
    remote one."""
    from docverify.layout.local_pdf import PARSER_ID  # imports pypdfium2: not at DAG parse

    expect = {path: {"expect_sha256": doc.sha256} for path, doc in local.items() if doc.sha256}
    ocr_stats: dict[str, OCRStat] = {}
    parse = functools.partial(parse_many_bounded, list(local), per_file_kw=expect, ocr_stats=ocr_stats,
                              workers=workers, timeout_s=timeout_s, ocr=ocr, page_timeout_s=page_timeout_s,
                              file_ceiling_s=file_ceiling_s, split_scan_pages=split_scan_pages)
    results = parse(root=root) if root is not None else parse()
    for path, result in results:
        doc = local[path]
        if path in ocr_stats:
            state.ocr[doc.doc_id] = {"pages": ocr_stats[path]["pages"], "seconds": ocr_stats[path]["seconds"]}
        problem = entry_problem(batch.store, doc.pdf_rel) \
            if root is not None and isinstance(result, ParseError) else None
        if problem:  # swapped while the part ran: the worker refused it, named here
            _input_refused(batch, doc, not_regular(doc.pdf_uri, problem), stats, state)
        elif (result.code == INPUT_CHANGED if isinstance(result, ParseError)
              else bool(doc.sha256) and result.sha256 != doc.sha256):  # replaced since discovery (ADR 0052)
            _input_refused(batch, doc, changed(doc.doc_id, doc.pdf_uri), stats, state)
        else:
            _record_layout(batch, doc, result, getattr(result, "parser", PARSER_ID), ParseError, stats, state)


@dataclass
class _PartState:
    """What one layout part records (the plan has the rest of the :class:`_Layout`)."""

    batch: Batch
    stale: set[str]
    errors: dict[str, ErrorRecord] = field(default_factory=dict)
    parsed: dict[str, list[str]] = field(default_factory=dict)
    #: each OCR'd document's OCR work: doc id → {"pages", "seconds"} (ADR 0052)
    ocr: dict[str, dict[str, float]] = field(default_factory=dict)

    def laid_out(self, doc_id: str, sha256: str, parser: str) -> None:
        self.parsed[doc_id] = [sha256, parser]
        if doc_id in self.stale:  # an earlier error no longer holds
            self.batch.rs.delete(self.batch.rs.error_rel(doc_id))

    def failed(self, doc_id: str, record: ErrorRecord) -> None:
        self.errors[doc_id] = record


def merge_layout_local(batch: Batch, *, ocr: bool = True) -> StageOutcome:
    """The local layout's record (the :class:`~docverify.storage.runstore.NightIndex` every later stage
    reads): the plan plus its parts' records, which must all be this plan's (its token)."""
    from docverify.layout.local_pdf import OCR_PARSER_ID, PARSER_ID  # imports pypdfium2: not at DAG parse

    rs = batch.rs
    plan_rel = _layout_rel(batch, "plan")
    plan = rs.get_json(plan_rel)
    if plan is None:
        raise FileNotFoundError(f"{rs.uri(plan_rel)}: no layout plan; the run's layout_plan task did not run")
    stats = StageStats("layout", errors=int(plan["errors"]), cache_hits=int(plan["cache_hits"]))
    state = _Layout(batch, ok=set(plan["ok"]), errors=_errors_of(plan["failed"]), new=list(plan["new"]),
                    parsed=dict(plan["parsed"]), scan=False)
    seconds = float(plan["seconds"])
    for n in range(int(plan["parts"])):
        rel = _layout_rel(batch, f"part_{n}")
        part = rs.get_json(rel)
        if part is None or part.get("token") != plan["token"]:
            raise RuntimeError(f"{rs.uri(rel)}: {'missing' if part is None else 'from another plan'}; the layout "
                               f"part {n} of this run did not finish: clear its layout_parse task")
        state.ok.update(part["parsed"])
        state.parsed.update(part["parsed"])
        state.errors.update(_errors_of(part["failed"]))
        state.ocr.update(part.get("ocr") or {})
        stats.errors += int(part["errors"])
        seconds += float(part["seconds"])
    stats.docs = len(state.manifest.documents)
    # the stage's implementation: with OCR on, the OCR engine is part of it (each bundle's
    # ``parser`` names the engine only when one of its pages was OCR'd); ``seconds``: the plan's,
    # the parts' and this merge's own time (the parts may run in parallel)
    seconds += time.perf_counter() - stats.started
    return state.save(stats, parser=OCR_PARSER_ID() if ocr else PARSER_ID, parts=int(plan["parts"]),
                      seconds=round(seconds, 3), **_ocr_totals(state.ocr))


def _ocr_totals(per_doc: dict[str, dict[str, float]]) -> _OCRExtra:
    """The layout record's OCR keys (ADR 0052): each OCR'd document's pages and seconds (in manifest
    order as the parts recorded them), and the night's totals."""
    return {"ocr": per_doc, "ocr_pages": int(sum(d["pages"] for d in per_doc.values())),
            "ocr_seconds": round(sum(d["seconds"] for d in per_doc.values()), 3)}


def layout_local(batch: Batch, *, workers: int = 2, timeout_s: float = 60.0, ocr: bool = True,
                 page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S,
                 file_ceiling_s: float = DEFAULT_FILE_CEILING_S,
                 split_scan_pages: int = DEFAULT_SPLIT_SCAN_PAGES) -> StageOutcome:
    """The whole local layout in one call (the in-process runners; the DAG maps the parts):
    :func:`plan_layout_local` in one part, :func:`layout_local_part`, :func:`merge_layout_local`."""
    for part in plan_layout_local(batch, ocr=ocr, shard_size=1, max_shards=1):
        layout_local_part(batch, part, workers=workers, timeout_s=timeout_s, ocr=ocr, page_timeout_s=page_timeout_s,
                          file_ceiling_s=file_ceiling_s, split_scan_pages=split_scan_pages)
    return merge_layout_local(batch, ocr=ocr)


def _local_file(batch: Batch, doc: ManifestDoc, tmp: str) -> str:
    """The local path a parse worker reads: the PDF itself on a local root, else a copy in
    ``tmp``. ``INPUT_NOT_REGULAR`` (an :class:`InputError`) when the entry discovery listed as a
    regular file is now a symbolic link, a folder, a FIFO or gone (ADR 0033)."""
    rel, uri = doc.pdf_rel, doc.pdf_uri
    if real_root(batch.store) is not None:
        problem = entry_problem(batch.store, rel)
        if problem:
            raise not_regular(uri, problem)
        try:
            p = local_path(batch.rs.path(rel))
        except OutsideRootError:  # swapped for a link since the line above
            raise not_regular(uri, LINK) from None
        return str(p)
    target = f"{tmp}/{doc.doc_id}.pdf"
    try:
        data = batch.rs.read_bytes(rel)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise not_regular(uri, GONE) from None
    with open(target, "wb") as fh:
        fh.write(data)
    return target


def _input_refused(batch: Batch, doc: ManifestDoc, exc: InputError, stats: StageStats, state: _Layout | _PartState) -> None:
    """A document whose input was refused when the layout read it (ADR 0033): its error record, as
    a parse error's (its packet follows), the rest of the stage goes on."""
    rs, doc_id = batch.rs, doc.doc_id
    stats.errors += 1
    err_rel = rs.error_rel(doc_id)
    record = ErrorRecord.of(doc, exc.code, exc.message, "layout", sha256=doc.sha256)
    state.failed(doc_id, record)
    rs.write_if_changed(err_rel, record)
    lineage("layout", doc_id, sha256=doc.sha256, cache="miss", error=exc.code,
            output_uri=rs.uri(err_rel))


def _bundle_reusable(batch: Batch, doc: ManifestDoc, state: _Layout | None, parsers: Collection[str] = (),
                     prefix: str = "") -> list[str] | None:
    """[sha256, parser] of a bundle of the same PDF by one of ``parsers`` (or a parser starting with
    ``prefix``), or None: from this night's earlier layout record (no request), else one read of
    the bundle (the bundle is not kept in memory)."""
    if state is not None and state.previous is not None:  # the record says what this night's layout made
        return state.previous.parsed[doc.doc_id][:2] if state.reusable(doc, parsers, prefix) else None
    head = batch.rs.get_json(batch.rs.bundle_rel(doc.doc_id), memo=False)
    if head and head.get("sha256") == doc.sha256 and _parser_matches(head.get("parser"), parsers, prefix):
        return [head["sha256"], head["parser"]]
    return None


def _record_layout(batch: Batch, doc: ManifestDoc, result: DocumentBundle | ParseError, parser: str, error_type: type[ParseError], stats: StageStats,
                   state: _Layout | _PartState) -> None:
    doc_id = doc.doc_id
    rs = batch.rs
    bundle_rel, err_rel = rs.bundle_rel(doc_id), rs.error_rel(doc_id)
    if not isinstance(result, DocumentBundle):  # the parser's error
        stats.errors += 1
        record = ErrorRecord.of(doc, result.code, result.message, "layout", sha256=doc.sha256)
        state.failed(doc_id, record)
        rs.write_if_changed(err_rel, record)
        lineage("layout", doc_id, sha256=doc.sha256, parser=parser, cache="miss",
                error=result.code, output_uri=rs.uri(err_rel))
        return
    longest = max((len(p.text) for p in result.pages), default=0)
    if longest > MAX_PAGE_CHARS:  # one limit for every parser: such a page is never classified
        result = error_type("TOO_LARGE", f"{doc.pdf_uri}: a page holds {longest} characters of text, over the "
                            f"limit of {MAX_PAGE_CHARS} (docverify.storage.limits.MAX_PAGE_CHARS); split or re-export it",
                            doc.pdf_uri)
        return _record_layout(batch, doc, result, parser, error_type, stats, state)
    bundle = result.model_copy(update={"doc_id": doc_id, "file_path": doc.pdf_uri})
    rs.write_json(bundle_rel, bundle)
    rs.forget(rels=[bundle_rel])
    state.laid_out(doc_id, bundle.sha256, bundle.parser)
    lineage("layout", doc_id, sha256=doc.sha256, parser=parser, cache="miss",
            pages=bundle.total_pages, has_tables=any(p.layout_metadata.has_tables for p in bundle.pages),
            output_uri=rs.uri(bundle_rel))


DOCAI_PARSER_PREFIX = "document_ai:"


#: google.rpc codes worth sending a document to Document AI again on a re-run
_DOCAI_RETRYABLE_STATUS = {4, 8, 10, 13, 14}  # DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE


def _docai_reuse(batch: Batch, docs: list[ManifestDoc], parser_prefix: str = DOCAI_PARSER_PREFIX,
                 state: _Layout | None = None) -> tuple[list[ManifestDoc], dict[str, list[str]], dict[str, ErrorRecord]]:
    """(documents to lay out, reused laid-out id → [sha256, parser], reused permanent failures
    id → error record). With the layout's ``state``, this night's earlier record answers without a
    read; else the bundle and error record are read."""
    docs = [d for d in docs if not d.input_error]  # refused at discovery: never sent
    if not batch.reuse:
        return list(docs), {}, {}
    out, ok, failed = [], {}, {}
    rs = batch.rs
    err: ErrorRecord | None
    prev = state.previous if state is not None else None
    for doc in docs:
        doc_id = doc.doc_id
        hit = _bundle_reusable(batch, doc, state, prefix=parser_prefix)
        if hit:
            ok[doc_id] = hit
            continue
        if prev is not None:
            err = prev.failed.get(doc_id) if doc_id in state.present else None  # type: ignore[union-attr]
        else:
            stored = rs.get_json(rs.error_rel(doc_id))
            err = ErrorRecord.model_validate(stored) if stored else None
        if err and err.sha256 == doc.sha256 and str(err.parser or "").startswith(parser_prefix) \
                and err.retryable is False:
            failed[doc_id] = err
            continue
        out.append(doc)
    return out, ok, failed


def docs_to_layout(batch: Batch, docs: list[ManifestDoc] | None = None,
                   parser_prefix: str = DOCAI_PARSER_PREFIX) -> list[ManifestDoc]:
    """The manifest's documents that need a (new) layout: no bundle yet, another PDF (sha256), or
    one made by another parser family. Reused (not returned): a bundle of the same PDF by the
    same parser family, and a permanent Document AI failure of the same PDF (``retryable``
    false in its error record) — a re-run does not pay the service again for either. ``docs``:
    the manifest's documents when the caller has them already."""
    return _docai_reuse(batch, _docs(batch) if docs is None else docs, parser_prefix)[0]


def _docai_error(batch: Batch, doc: ManifestDoc, exc: ParseError, stats: StageStats, state: _Layout, *, retryable: bool) -> None:
    """A Document AI document error: the usual error record plus what a re-run needs to know."""
    stats.errors += 1
    rel = batch.rs.error_rel(doc.doc_id)
    record = ErrorRecord.of(doc, exc.code, exc.message, "layout", sha256=doc.sha256,
                          parser=DOCAI_PARSER_PREFIX + "layout-parser", retryable=retryable)
    state.failed(doc.doc_id, record)
    batch.rs.write_if_changed(rel, record)
    lineage("layout", doc.doc_id, sha256=doc.sha256, parser="document_ai",
            cache="miss", error=exc.code, retryable=retryable, output_uri=batch.rs.uri(rel))


class DocAIResult(TypedDict, total=False):
    """One input's outcome of a Document AI batch operation, as the operator reports it (the core's
    error codes: ``docverify_airflow.document_ai.results_for_layout``)."""

    input_uri: str
    output_uri: str
    ok: bool
    status_code: int | None
    status_message: str | None
    error_code: str | None


def _docai_start(batch: Batch, stats: StageStats) -> tuple[list[ManifestDoc], set[str], _Layout]:
    state = _Layout(batch)
    docs = state.manifest.documents  # the manifest as _Layout read and validated it
    todo, ok, failed = _docai_reuse(batch, docs, state=state)
    for doc in docs:
        state.seen(doc.doc_id)
        if doc.input_error:
            stats.errors += 1
            state.input_error(doc)
    for doc_id, (sha, parser) in ok.items():
        state.laid_out(doc_id, sha, parser)
    for doc_id, record in failed.items():
        state.failed(doc_id, record)
    stats.cache_hits += len(ok) + len(failed)
    return docs, {d.doc_id for d in todo}, state


def layout_docai_outputs(batch: Batch, results: list[DocAIResult], open_output: Callable[[str], StoragePath]
                         ) -> StageOutcome:
    """Layout from a Document AI batch job: ``results`` are the operator's per-input records
    (``input_uri``, ``output_uri``, ``ok``, ``status_code``, ``status_message``, ``error_code``);
    ``open_output(uri)`` gives a pathlike for an output folder (an ObjectStoragePath on the
    Google connection in the DAG). Each folder's JSON shards become the document's bundle; a
    failed document, a missing result or unreadable output becomes the document's error record
    (it goes to the SME queue) — never a failed stage. Documents :func:`docs_to_layout` does not
    list (laid out or failed for good earlier) are reused."""
    stats = StageStats("layout")
    by_uri = {r["input_uri"]: r for r in results}
    docs, todo, state = _docai_start(batch, stats)
    for doc in docs:
        if doc.doc_id not in todo:
            if not doc.input_error:
                lineage("layout", doc.doc_id, sha256=doc.sha256, cache="hit",
                        parser="document_ai")
            continue
        r = by_uri.get(doc.pdf_uri)
        if r is None:
            _docai_error(batch, doc, ParseError("DOCAI_NO_RESULT", f"{doc.pdf_uri}: Document AI returned no "
                         f"result for this document; re-run the DAG run (it is submitted again)", doc.pdf_uri),
                         stats, state, retryable=True)
            continue
        if not r.get("ok"):
            code = r.get("error_code") or "DOCAI_FAILED"
            status = r.get("status_code")
            exc = ParseError(code, f"{doc.pdf_uri}: Document AI could not process it (status {status}: "
                             f"{r.get('status_message') or 'no message'}); check the file, then re-run", doc.pdf_uri)
            _docai_error(batch, doc, exc, stats, state,
                         retryable=code == "DOCAI_FAILED" and status in _DOCAI_RETRYABLE_STATUS)
            continue
        try:
            bundle = bundle_from_docai(load_docai_output(open_output(r["output_uri"])), doc_id=doc.doc_id,
                                       file_path=doc.pdf_uri, sha256=doc.sha256)
        except ParseError as exc:
            _docai_error(batch, doc, exc, stats, state, retryable=False)
            continue
        _record_layout(batch, doc, bundle, bundle.parser, ParseError, stats, state)
    stats.docs = len(docs)
    return state.save(stats, parser="document_ai:batch")


def layout_docai_online(batch: Batch, process: Callable[[bytes], dict[str, Any]], *, max_pages: int = 15
                        ) -> StageOutcome:
    """Layout through Document AI's online endpoint, one document at a time, for a storage root
    Document AI cannot read in batch (a local one). ``process(pdf_bytes)`` returns the Document
    JSON. A PDF over ``max_pages`` (15 for the Layout Parser online) gets the error record
    ``TOO_MANY_PAGES`` naming the fix (a gs:// storage root, so the batch path runs)."""
    from docverify.layout.local_pdf import page_count  # imports pypdfium2: not at DAG parse

    stats = StageStats("layout")
    docs, todo, state = _docai_start(batch, stats)
    for doc in docs:
        if doc.doc_id not in todo:
            continue
        try:  # a regular file still (ADR 0033); within the limit discovery checked
            data = read_regular(batch.store, doc.pdf_rel, doc.pdf_uri, limit=MAX_PDF_BYTES, what="PDF")
        except InputError as exc:
            _input_refused(batch, doc, exc, stats, state)
            continue
        if doc.sha256 and hashlib.sha256(data).hexdigest() != doc.sha256:  # the bytes sent: those discovered
            _input_refused(batch, doc, changed(doc.doc_id, doc.pdf_uri), stats, state)
            continue
        result: DocumentBundle
        try:
            pages = page_count(data, doc.pdf_uri)
            if pages > max_pages:
                raise ParseError("TOO_MANY_PAGES", f"{doc.pdf_uri}: {pages} pages, over the {max_pages}-page limit "
                                 f"of Document AI's online processing; set a gs:// storage root "
                                 f"(docverify_storage_root) so documents go through batch processing", doc.pdf_uri)
            result = bundle_from_docai(process(data), doc_id=doc.doc_id, file_path=doc.pdf_uri,
                                       sha256=doc.sha256)
        except ParseError as exc:
            _docai_error(batch, doc, exc, stats, state, retryable=False)
            continue
        except Exception as exc:  # noqa: BLE001 - one document's fault never fails the stage
            _docai_error(batch, doc, ParseError("DOCAI_FAILED", f"{doc.pdf_uri}: Document AI online processing "
                         f"failed ({type(exc).__name__}); re-run when the service is available", doc.pdf_uri),
                         stats, state, retryable=True)
            continue
        _record_layout(batch, doc, result, result.parser, ParseError, stats, state)
    stats.docs = len(docs)
    return state.save(stats, parser="document_ai:online")
