"""The typed run store: every path of one night's storage layout, and its objects as models.

:class:`RunStore` sits on an :class:`~docverify.storage.store.ArtifactStore` (which keeps the atomic
writes, create-if-absent and the remote handling) for one date partition ``ds``. It is the only
place that builds a path of the layout::

    runs/<ds>/_manifest.json                   Manifest (discover; its ``stats``: the stage's record)
    runs/<ds>/_routes.json                     Routes (the route task)
    runs/<ds>/_stages/layout.json              NightIndex (the layout's record, read by later stages)
    runs/<ds>/_stages/<stage>[_<shard>].json   stage records (verify shards: their summaries)
    runs/<ds>/<doc_id>/bundle.json             DocumentBundle (layout)
    runs/<ds>/<doc_id>/error.json              ErrorRecord of discover / layout
    runs/<ds>/<doc_id>/result.json             DocResult: classification, attempt 0, V5, final result
    accepted/<ds>/<doc_id>.json                accepted classification + provenance
    sme_packets/sme_packet_<review_id>.json    review packet (+ .html)
    ground_truth/gt_<review_id>[.v<n>].json    SME answer
    reports/<ds>/batch_report.json|.md|.html
    withdrawn/<ds>/<kind>_<id>[.<n>].json      outputs of an earlier run moved aside

Request discipline (ADR 0010): one store request per read — a missing object is a ``None`` from a
single read, never ``exists`` then ``read``; every JSON object is read at most once per instance
(a task builds one) and writes update the memo; a directory listed once
(:meth:`RunStore.listing`) answers "absent" for every name it does not hold, without a request;
:meth:`RunStore.write_if_changed` leaves an object whose content is unchanged alone (a re-run
rewrites nothing). :meth:`RunStore.forget` drops a document's objects from the memo once a stage
is done with it, so a shard's memory stays flat.

The instance also offers the read/write methods of an ``ArtifactStore`` (``exists``,
``read_json``, ``read_bytes``, ``write_json``, ``uri``, ``list`` …), memoised the same way, so
helpers written against a store (``sme.write_packet``, ``sme_render.write_packet_html``) run
through it unchanged.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal, NotRequired, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    SerializationInfo,
    SkipValidation,
    with_config,
)
from pydantic_core import to_jsonable_python
from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12

from docverify.domain.models import AttemptRecord, DocumentBundle, VerificationResult
from docverify.storage.paths import bounded_part, check_part, safe_ds
from docverify.storage.store import ArtifactStore, StoragePath, dumps, is_tmp_name

#: Top-level keys that change on every run and do not make an output different.
VOLATILE = ("accepted_at", "created_at", "run_id")

Route = Literal["accept", "auto_fix_retry", "write_sme_packets"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


_T = TypeVar("_T")


def _as_stored(value: object, info: SerializationInfo) -> object:
    return to_jsonable_python(value) if info.mode_is_json() else value


#: A JSON object of a model kept exactly as it was built or read: typed for the code (a TypedDict
#: below), neither validated nor reordered (an older night's record reads as it was written, with
#: every key it has), and serialised as it is — the stored JSON is the same as a plain dict's.
Stored = Annotated[_T, SkipValidation, PlainSerializer(_as_stored)]


# =========================================================================== the JSON contracts
# The objects the stages hand each other through their records stay plain JSON objects (the
# tasks' XCom, the stored records, ``sme.packets.build_packet``'s ``error``); these TypedDicts are
# their contracts. ``NotRequired`` (``total=False`` for ``StageRecord``, the writers' keyword contract): keys
# some records do not carry (older nights, error cases). Read back: ``docverify.storage.stage_records`` (ADR 0056).


@with_config(ConfigDict(extra="allow"))
class V5Decision(TypedDict):
    """Attempt 0's V5 decision as the routes and summaries carry it: ``decision`` and ``rule``; a
    document that ends in an error: ``rule`` None, ``reason`` "error" and its ``error`` code."""

    decision: str
    rule: int | None
    reason: NotRequired[str]
    error: NotRequired[str | None]


class SummaryError(TypedDict):
    """The error of a document's summary (no file, no hash: codes and the message)."""

    stage: str
    error: str
    message: str


@with_config(ConfigDict(extra="allow"))
class JuryVote(TypedDict):
    """One CR_V2 jury vote of a document's attempts (codes only: ADR 0012)."""

    attempt: int
    agent: str
    code: str
    votes: dict[str, str]
    reason_codes: dict[str, str]
    final_action: str
    flag_reason: str | None
    rule: int | str | None
    version: str


@with_config(ConfigDict(extra="allow"))
class DocSummary(TypedDict):
    """What a shard's summary keeps of one document (:func:`docverify.storage.summaries.doc_summary`):
    route and attempt 0's decision always; its error when it has one; the final result's codes and rules
    once it has one (``final_decision`` to ``v5_audit`` together); the jury's votes when the jury ran."""

    route: str
    decision: V5Decision
    error: NotRequired[SummaryError]
    implementations: NotRequired[list[str]]
    final_decision: NotRequired[str]
    rule: NotRequired[int]
    attempts: NotRequired[int]
    stop_reason: NotRequired[str]
    issue_codes: NotRequired[list[str]]
    issue_codes_final: NotRequired[list[str]]
    issue_codes_attempt_0: NotRequired[list[str]]
    quality_score: NotRequired[float]
    fixes: NotRequired[list[str]]
    v5_audit: NotRequired[str]
    jury: NotRequired[list[JuryVote]]


@with_config(ConfigDict(extra="allow"))
class StageRecord(TypedDict, total=False):
    """A stage's record (``runs/<ds>/_stages/<stage>[_<shard>].json``; discover's rides in the
    manifest as ``stats``): :meth:`docverify.stages.common.StageStats.record`'s keys, and each
    stage's own."""

    stage: str
    docs: int
    errors: int
    cache_hits: int
    seconds: float
    llm: dict[str, int]
    llm_per_document: dict[str, dict[str, int]]
    price_model: str | None
    #: the usage per price model when a stage's calls ran on several models (ADR 0034)
    llm_by_model: dict[str, dict[str, int]]
    #: verify: what classified and what judged (:func:`docverify.judging.judges.models_of`, ADR 0034)
    models: dict[str, str | bool | None]
    #: verify / auto_fix_retry: {doc_id: DocSummary}; accept: the doc ids; layout: the manifest's entries
    documents: dict[str, DocSummary] | list[str] | list[dict[str, JsonValue]]
    shard: list[str]
    second_opinion: dict[str, int]
    #: route: the night's :class:`Routes` (JSON)
    night: dict[str, JsonValue]
    counts: dict[str, int]
    written: list[str]
    kept_reviewed: list[str]
    kept: list[str]
    accepted: int
    rate: float
    sample: dict[str, float]
    #: audit_sample: the accepted documents drawn with the largest weight (the independent reading abstained)
    weighted_up: list[str]
    #: layout (a :class:`NightIndex`'s keys)
    ok: list[str]
    failed: dict[str, ErrorRecord] | dict[str, dict[str, JsonValue]]
    new: list[str]
    parsed: dict[str, list[str]]
    parser: str
    parts: int
    #: layout: each OCR'd document's OCR work ({doc_id: {"pages", "seconds"}}) and the totals (ADR 0052)
    ocr: dict[str, dict[str, float]]
    ocr_pages: int
    ocr_seconds: float
    #: a layout part's (``_stages/layout/part_<n>.json``): the plan's token and the part's number
    token: str
    part: int
    #: batch mode's rounds (``docverify.stages.batch_mode``)
    llm_batch: Any
    llm_batch_per_document: dict[str, dict[str, int]]
    #: discover
    max_documents: int
    skipped_over_max_documents: int
    orphan_companions: list[str]
    removed: list[str]
    ignored_files: list[str]


class ManifestDoc(_Open):
    doc_id: str
    pdf_rel: str
    pdf_uri: str
    sha256: str = ""
    bytes: int = 0
    classification_rel: str | None = None
    #: size of the companion classification at discovery (read once, checked before the read)
    classification_bytes: int | None = None
    #: ``<doc>.production.json`` beside the PDF, when there is one (for the SME packet)
    production_rel: str | None = None
    input_error: str | None = None


class Manifest(_Open):
    ds: str
    incoming: str = ""
    documents: list[ManifestDoc] = Field(default_factory=list)
    skipped_over_max_documents: int = 0
    stats: Stored[StageRecord | None] = None

    def by_id(self) -> dict[str, ManifestDoc]:
        return {d.doc_id: d for d in self.documents}

    def as_json(self) -> dict[str, Any]:
        """The stored form: optional keys only where they hold something (the manifest of a night
        without companions or errors reads as it always did)."""
        out = self.model_dump(mode="json", exclude={"stats"} if self.stats is None else set())
        optional = ("classification_bytes", "production_rel", "input_error")
        out["documents"] = [{k: v for k, v in d.items() if not (k in optional and v is None)}
                            for d in out["documents"]]
        return out


class ErrorRecord(_Open):
    """A document's error (``runs/<ds>/<doc_id>/error.json``, a :class:`NightIndex`'s ``failed``,
    the routes' ``errors``, a :class:`DocResult`'s ``error``): the one representation of it. The
    optional keys are written only when set (the JSON reads as it always did)."""

    doc_id: str
    stage: str
    error: str
    message: str
    file: str = ""
    #: the PDF's sha256 (discover, layout, the route stage's "no result")
    sha256: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: Document AI's errors: the parser and whether a re-run sends the document again
    parser: str | None = Field(default=None, exclude_if=lambda v: v is None)
    retryable: bool | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def of(cls, doc: ManifestDoc, code: str, message: str, stage: str, *, sha256: str | None = None,
           parser: str | None = None, retryable: bool | None = None) -> ErrorRecord:
        """The error record of a manifest document (its id and file)."""
        return cls(doc_id=doc.doc_id, stage=stage, error=code, message=message, file=doc.pdf_uri, sha256=sha256,
                   parser=parser, retryable=retryable)


class ClassificationMeta(_Open):
    source: str
    implementation: str | None = None
    bundle_sha256: str = ""
    uri: str | None = None
    judge: str | None = None
    classifier_id: str | None = None


class BundleMeta(BaseModel):
    """What the routes need of a bundle without reading it."""

    file_path: str
    sha256: str
    parser: str
    total_pages: int

    @classmethod
    def of(cls, bundle: DocumentBundle) -> BundleMeta:
        return cls(file_path=bundle.file_path, sha256=bundle.sha256, parser=bundle.parser,
                   total_pages=bundle.total_pages)


class DocResult(BaseModel):
    """``runs/<ds>/<doc_id>/result.json``: the one object the verify task writes per document.

    ``result`` is the final verification (None while the document waits for the retry, which then
    fills it in); ``attempt_0`` is the first attempt of a document routed to the retry;
    ``error`` a classification or verification fault of this document (it escalates)."""

    doc_id: str
    route: Route
    decision: Stored[V5Decision]
    bundle: BundleMeta | None = None
    classification: Any = None
    classification_meta: ClassificationMeta | None = None
    attempt_0: AttemptRecord | None = None
    result: VerificationResult | None = None
    error: ErrorRecord | None = None
    #: ``<doc>.production.json`` beside the PDF (for the SME packet), from the manifest
    production_rel: str | None = None

    @property
    def first_attempt(self) -> AttemptRecord | None:
        """Attempt 0: stored apart while the document waits for the retry, else the result's first."""
        return self.attempt_0 or (self.result.attempts[0] if self.result is not None else None)


class NightIndex(_Open):
    """``runs/<ds>/_stages/layout.json``: the layout stage's record, which every later stage reads
    instead of the manifest and the documents' folders — the manifest's documents (in order),
    those with a bundle (``ok``, in manifest order, with the bundle's ``parsed`` sha256 and parser),
    the error records of those without one (``failed``: discover or layout; the same content as
    their ``error.json``), and ``new``: the documents that had no run folder before this night's
    layout (nothing of theirs — result, packet, accepted record — can exist; nobody asks)."""

    stage: str = "layout"
    documents: list[ManifestDoc] = Field(default_factory=list)
    ok: list[str] = Field(default_factory=list)
    failed: dict[str, ErrorRecord] = Field(default_factory=dict)
    new: list[str] = Field(default_factory=list)
    parsed: dict[str, list[str]] = Field(default_factory=dict)


class Routes(_Open):
    """The arbiter's routes: each route's documents, attempt 0's decisions and the error records of
    documents escalated without a verification (``errors``) — ``runs/<ds>/_routes.json`` — and, in
    the arbiter's stage record, the documents new this run (``new``) and every verified document's
    summary (``documents``: codes and rules)."""

    ds: str
    routes: dict[str, list[str]]
    attempt_0: Stored[dict[str, V5Decision]] = Field(default_factory=dict)
    errors: dict[str, ErrorRecord] = Field(default_factory=dict)
    new: list[str] = Field(default_factory=list)
    documents: Stored[dict[str, DocSummary]] = Field(default_factory=dict)


_ABSENT = object()


class RunStore:
    """One night's objects on ``store`` (see the module docstring)."""

    def __init__(self, store: ArtifactStore, ds: str):
        self.store = store
        self.ds = safe_ds(ds)
        self._memo: dict[str, bytes | None] = {}
        self._listed: dict[str, set[str]] = {}

    # ================================================================== paths (the only copies)
    @property
    def root(self) -> StoragePath:
        return self.store.root

    @property
    def night(self) -> str:
        return f"runs/{self.ds}"

    def run_dir(self, doc_id: str) -> str:
        return ArtifactStore.run_dir(self.ds, doc_id)

    def doc_rel(self, doc_id: str, name: str = "") -> str:
        base = self.run_dir(doc_id)
        return f"{base}/{check_part(name)}" if name else base

    def bundle_rel(self, doc_id: str) -> str:
        return self.doc_rel(doc_id, "bundle.json")

    def error_rel(self, doc_id: str) -> str:
        return self.doc_rel(doc_id, "error.json")

    def result_rel(self, doc_id: str) -> str:
        return self.doc_rel(doc_id, "result.json")

    @property
    def manifest_rel(self) -> str:
        return f"{self.night}/_manifest.json"

    @property
    def routes_rel(self) -> str:
        return f"{self.night}/_routes.json"

    @property
    def stages_dir(self) -> str:
        return f"{self.night}/_stages"

    def stage_rel(self, key: str) -> str:
        return f"{self.stages_dir}/{check_part(key, 'stage')}.json"

    @property
    def accepted_dir(self) -> str:
        return f"accepted/{self.ds}"

    def accepted_rel(self, doc_id: str) -> str:
        return f"{self.accepted_dir}/{check_part(doc_id, 'doc id')}.json"

    PACKETS_DIR = ArtifactStore.PACKETS_DIR
    GROUND_TRUTH_DIR = ArtifactStore.GROUND_TRUTH_DIR

    @staticmethod
    def packet_rel(key: str) -> str:
        return ArtifactStore.packet_rel(key)

    @staticmethod
    def packet_html_rel(key: str) -> str:
        return ArtifactStore.packet_rel(key)[: -len(".json")] + ".html"

    @staticmethod
    def ground_truth_rel(key: str, version: int = 1) -> str:
        return ArtifactStore.ground_truth_rel(key, version)

    @property
    def reports_dir(self) -> str:
        return f"reports/{self.ds}"

    def report_rel(self, ext: str) -> str:
        return f"{self.reports_dir}/batch_report.{ext}"

    def withdrawn_rel(self, kind: str, key: str, n: int = 1) -> str:
        """``withdrawn/<ds>/<kind>_<key>[.<n>].json``; a name that would pass 255 bytes keeps a cut
        key and a hash of it (:func:`~docverify.storage.paths.bounded_part`, ADR 0033): the record names the key."""
        check_part(key, "doc id")
        return f"withdrawn/{self.ds}/{bounded_part(f'{kind}_{key}', (f'.{n}' if n > 1 else '') + '.json')}"

    def uri(self, rel: str) -> str:
        return self.store.uri(rel)

    def path(self, rel: str, *, confine: bool = True) -> StoragePath:
        return self.store.path(rel, confine=confine)

    # ================================================================== memoised requests
    def _known_absent(self, rel: str) -> bool:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            listed = self._listed.get("/".join(parts[:i]))
            if listed is not None and parts[i] not in listed:
                return True
        return False

    def listing(self, rel_dir: str) -> list[tuple[str, str, int]]:
        """The entries directly under ``rel_dir`` (one request); afterwards every name not among
        them is known to be absent (no request to find out)."""
        entries = self.store.entries(rel_dir)
        self._listed[rel_dir.rstrip("/")] = {n for n, _, _ in entries}
        return entries

    def names(self, rel_dir: str) -> set[str]:
        """Names under ``rel_dir`` from its listing (listed once per instance)."""
        key = rel_dir.rstrip("/")
        if key not in self._listed:
            self.listing(key)
        return self._listed[key]

    def read_bytes_if_exists(self, rel: str, *, memo: bool = True) -> bytes | None:
        """The object's bytes or None — one request at most, none when memoised or known absent."""
        hit = self._memo.get(rel, _ABSENT)
        if hit is not _ABSENT:
            return hit  # type: ignore[return-value]
        if self._known_absent(rel):
            data = None
        else:
            try:
                data = self.store.read_bytes(rel)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                data = None
        if memo:
            self._memo[rel] = data
        return data

    def get_json(self, rel: str, *, memo: bool = True) -> Any | None:
        data = self.read_bytes_if_exists(rel, memo=memo)
        return None if data is None else json.loads(data)

    def _remember(self, rel: str, data: bytes | None) -> None:
        self._memo[rel] = data
        d, _, name = rel.rpartition("/")
        listed = self._listed.get(d)
        if listed is not None:
            (listed.add if data is not None else listed.discard)(name)
        elif data is not None:  # a new object makes its folders exist for the listings above it
            parts = rel.split("/")
            for i in range(1, len(parts) - 1):
                above = self._listed.get("/".join(parts[:i]))
                if above is not None:
                    above.add(parts[i])

    def assume_absent(self, rel: str) -> None:
        """Record that ``rel`` does not exist (the caller knows it from a stage's record)."""
        self._memo.setdefault(rel, None)

    def forget(self, doc_id: str | None = None, rels: Iterable[str] = ()) -> None:
        """Drop a document's objects (its run folder's, its accepted record) and ``rels`` from the
        memo (they stay in the store): a stage that is done with a document forgets it, so its
        memory does not grow with the night."""
        prefix = self.run_dir(doc_id) + "/" if doc_id else None
        drop = set(rels) | ({self.accepted_rel(doc_id)} if doc_id else set())
        for rel in list(self._memo):
            if (prefix and rel.startswith(prefix)) or rel in drop:
                del self._memo[rel]

    def write_json(self, rel: str, obj: object, *, overwrite: bool = True) -> bool:
        data = dumps(obj)
        written = self.store.write_bytes(rel, data, overwrite=overwrite)
        if written:
            self._remember(rel, data)
        else:
            self._memo.pop(rel, None)  # someone else's object is there: read it when asked
        return written

    def write_if_changed(self, rel: str, obj: object, volatile: Iterable[str] = VOLATILE) -> bool:
        """Write unless the stored JSON is equal apart from ``volatile`` top-level keys
        (timestamps, run ids): a re-run leaves unchanged outputs byte for byte."""
        data = json.loads(dumps(obj))
        old = self.get_json(rel)
        if isinstance(old, dict) and isinstance(data, dict):
            strip = set(volatile)
            if {k: v for k, v in old.items() if k not in strip} == {k: v for k, v in data.items() if k not in strip}:
                return False
        elif old is not None and old == data:
            return False
        return self.write_json(rel, data)

    def _remember_present(self, rel: str) -> None:
        d, _, name = rel.rpartition("/")
        if d in self._listed:
            self._listed[d].add(name)

    def delete(self, rel: str) -> bool:
        """Remove an object (one request; none when it is known to be absent)."""
        if self._memo.get(rel, _ABSENT) is None or self._known_absent(rel):
            return False
        gone = self.store.delete(rel)
        self._remember(rel, None)
        return gone

    # ------------------------------------------- compare-and-swap, memo-coherent
    def read_versioned(self, rel: str) -> tuple[bytes, str] | None:
        """The object's bytes and version from the store (never from the memo: a conditional
        write must compare with the object as it is now), or None — without a request when the
        object is known absent (a create-if-absent then settles it atomically). The bytes read are
        memoised."""
        if self._memo.get(rel, _ABSENT) is None or self._known_absent(rel):
            return None
        got = self.store.read_versioned(rel)
        self._remember(rel, got[0] if got is not None else None)
        return got

    def replace_if(self, rel: str, data: bytes, version: str) -> bool:
        """:meth:`ArtifactStore.replace_if`; the memo follows (the new bytes, or unknown)."""
        replaced = self.store.replace_if(rel, data, version)
        if replaced:
            self._remember(rel, data)
        else:
            self._memo.pop(rel, None)
        return replaced

    def delete_if(self, rel: str, version: str) -> bool:
        """:meth:`ArtifactStore.delete_if`; the memo follows (absent, or unknown)."""
        deleted = self.store.delete_if(rel, version)
        if deleted:
            self._remember(rel, None)
        else:
            self._memo.pop(rel, None)
        return deleted

    # ------------------------------------------- the ArtifactStore surface, memoised
    def exists(self, rel: str) -> bool:
        if rel in self._memo:
            return self._memo[rel] is not None
        if self._known_absent(rel):
            return False
        d, _, name = rel.rpartition("/")
        if d in self._listed:
            return True
        if rel.endswith(".json"):  # one read answers both questions
            return self.read_bytes_if_exists(rel) is not None
        return self.store.exists(rel)

    def read_json(self, rel: str) -> Any:
        out = self.get_json(rel)
        if out is None:
            raise FileNotFoundError(self.uri(rel))
        return out

    def read_json_if_exists(self, rel: str) -> Any | None:
        return self.get_json(rel)

    def read_bytes(self, rel: str) -> bytes:
        out = self.read_bytes_if_exists(rel, memo=rel.endswith(".json"))
        if out is None:
            raise FileNotFoundError(self.uri(rel))
        return out

    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = True) -> bool:
        written = self.store.write_bytes(rel, data, overwrite=overwrite)
        self._memo.pop(rel, None)
        self._remember_present(rel)  # written, or refused because it exists (create-if-absent)
        return written

    def write_text(self, rel: str, text: str, *, overwrite: bool = True) -> bool:
        return self.write_bytes(rel, text.encode(), overwrite=overwrite)

    def list(self, rel_dir: str, suffix: str = "") -> list[str]:
        return sorted(n for n in self.names(rel_dir) if n.endswith(suffix) and not is_tmp_name(n))

    def entries(self, rel_dir: str) -> builtins.list[tuple[str, str, int]]:
        return self.listing(rel_dir)

    def size(self, rel: str) -> int:
        return self.store.size(rel)

    def sha256(self, rel: str) -> str:
        return self.store.sha256(rel)

    # ================================================================== typed objects
    def manifest(self) -> Manifest:
        data = self.get_json(self.manifest_rel)
        if data is None:
            raise FileNotFoundError(f"{self.uri(self.manifest_rel)}: no manifest (discover has not run for {self.ds})")
        return Manifest.model_validate(data)

    def manifest_if_exists(self) -> Manifest | None:
        data = self.get_json(self.manifest_rel)
        return None if data is None else Manifest.model_validate(data)

    def bundle(self, doc_id: str) -> DocumentBundle | None:
        data = self.get_json(self.bundle_rel(doc_id))
        return None if data is None else DocumentBundle.model_validate(data)

    def error(self, doc_id: str) -> ErrorRecord | None:
        data = self.get_json(self.error_rel(doc_id))
        return None if data is None else ErrorRecord.model_validate(data)

    def result(self, doc_id: str) -> DocResult | None:
        data = self.get_json(self.result_rel(doc_id))
        if data is None:
            return None
        try:
            return DocResult.model_validate(data)
        except ValueError:  # an object of another version: recomputed, never trusted
            return None

    def write_result(self, rec: DocResult) -> bool:
        return self.write_if_changed(self.result_rel(rec.doc_id), rec)

    def night_index(self) -> NightIndex | None:
        data = self.stage("layout")
        return NightIndex.model_validate(data) if data is not None and "ok" in data else None

    def routes(self) -> Routes | None:
        """The arbiter's routes of this run: from its stage record (which also holds this run's
        ``new`` documents and the summaries), else ``_routes.json``."""
        record = self.stage("route") or self.stage("v5_arbiter")  # the routing task's name before ADR 0029
        data = record.get("night") if record else None
        data = data if data is not None else self.get_json(self.routes_rel)
        return None if data is None else Routes.model_validate(data)

    def stage(self, key: str) -> StageRecord | None:
        return self.get_json(self.stage_rel(key))

    def stages(self) -> builtins.list[StageRecord]:
        return [s for n in self.list(self.stages_dir, ".json") if (s := self.get_json(f"{self.stages_dir}/{n}"))]
