"""One document's whole trail, across nights and both Dags, from what the store already holds.

:func:`document_trace` reads, for one doc id, every night that has a run folder for it
(``runs/<night>/<doc_id>/result.json`` or ``error.json``), that night's manifest, stage records
(which ``layout_parse`` part, ``verify`` shard and ``auto_fix_retry`` shard held it), accepted
record, SME packets (escalation and audit), withdrawn copies, batch report, and every ground-truth
version answering its packets — nothing else, and nothing is written. The result is a
:class:`Trace`: an ordered list of :class:`Step`, each naming the Airflow task whose log holds its
lineage line (:class:`TaskRef`: Dag id, run id, task id, map index).

Run ids: the stage records carry none, so a night's steps take the run id of the night's batch
report (the report is written at the end of every run: its run is the night's latest, the one
whose records these are); a packet, an accepted record and a withdrawn copy name the run that
wrote them; an answer names its ``sme_review`` run, task and map index (the ground truth's
``channel``). When a night has no report yet (its run has not finished) the step has no run id and
:meth:`TaskRef.ui_path` gives the Dag's runs of that logical date instead (ADR 0041).

PHI: a trace carries ids, hashes, codes, severities, page numbers, rules, decisions, times and
user names — never page text, evidence snippets, reasoning or issue messages. A few fields may
name the patient indirectly and are listed in :data:`PHI_FIELDS` (the input URI and file name,
an error's message, the SME's notes); :meth:`Trace.redacted` blanks them for readers who may not
read packets."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel, Field, JsonValue, ValidationError, computed_field

from docverify.domain.models import AttemptRecord, FixApplied, VerificationResult
from docverify.domain.read_models import StoredRead
from docverify.storage.paths import safe_id
from docverify.storage.runstore import (
    BundleMeta,
    DocResult,
    ErrorRecord,
    Manifest,
    ManifestDoc,
    RunStore,
    StageRecord,
)
from docverify.storage.stage_records import LayoutRead, StageRead, VerifyRead, stage_read
from docverify.storage.store import ArtifactStore, uri_of

NIGHTLY_DAG = "clinical_doc_verification"
#: fields of a :class:`Step` that may name a patient indirectly (shown to packet readers only)
PHI_FIELDS = ("input_uri", "file_name", "error_message", "notes")
#: issue details that name pages (V4's claimed page and where the text was found, V2's pages …)
_PAGE_KEYS = ("page", "claimed_page", "pages", "found_on_pages", "page_start", "page_end")
_CHANNEL = re.compile(r"airflow-hitl:(?P<dag>[^/]+)/(?P<run>.+)/(?P<task>[^/\[]+)\[(?P<map>-?\d+)\]")

StepKind = Literal["discover", "layout", "verify", "route", "auto_fix_retry", "accept", "sme_packet", "audit_packet",
                   "withdrawn", "answer", "batch_report"]


class UnknownDocument(LookupError):
    """No night of the store holds the doc id; the message names the fix."""

    code = "UNKNOWN_DOCUMENT"

    def __init__(self, doc_id: str, root: str, nights: int):
        self.doc_id = doc_id
        self.message = (f"no document {doc_id!r} in any of the {nights} night(s) under {root}: give the doc id as the "
                        f"batch report lists it (doc- and 12 hex digits, e.g. doc-965f10f14f36: docverify doc-id <file name> "
                        f"gives a file's; "
                        f"reports/<night>/batch_report.json → per_document[].doc_id), and the storage root the "
                        f"nightly Dag writes to (Variable docverify_storage_root)")
        super().__init__(self.message)

    def to_dict(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message, "file": ""}


class TaskRef(BaseModel):
    """The Airflow task instance whose log holds a step's lineage line."""

    dag_id: str
    task_id: str
    map_index: int = -1
    run_id: str | None = Field(default=None, description="None: the store names only the night (no finished run "
                               "wrote a record naming its run); ui_path() then lists the Dag's runs of that date")
    night: str = ""
    run_id_from: str = Field(default="", description="which record named the run: batch report, SME packet, "
                             "accepted record, withdrawn copy, ground truth (channel); empty when none did")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ui(self) -> str:
        """:meth:`ui_path`, in the JSON."""
        return self.ui_path()

    def ui_path(self) -> str:
        """The task instance in Airflow 3's UI, relative to its base URL (its log is the first tab):
        ``/dags/<dag>/runs/<run>/tasks/<task>[/mapped/<i>]``; without a run id, the Dag's runs of
        the night's logical date."""
        if self.run_id:
            path = f"/dags/{quote(self.dag_id, safe='')}/runs/{quote(self.run_id, safe='')}/tasks/" \
                   f"{quote(self.task_id, safe='')}"
            return path + (f"/mapped/{self.map_index}" if self.map_index >= 0 else "")
        q = {"logical_date_gte": f"{self.night}T00:00:00Z", "logical_date_lte": f"{self.night}T23:59:59Z"} \
            if re.fullmatch(r"\d{4}-\d\d-\d\d", self.night) else {}
        return f"/dags/{quote(self.dag_id, safe='')}/runs" + (f"?{urlencode(q)}" if q else "")


class IssueRef(BaseModel):
    """An issue by its codes and pages (never its message: it may quote the document)."""

    issue_id: str
    agent: str
    code: str
    severity: str
    pages: list[int] = Field(default_factory=list)
    auto_fixable: bool = False


class AttemptTrace(BaseModel):
    attempt: int
    decision: str
    rule: int | None
    issues: list[IssueRef] = Field(default_factory=list)
    fixes_after: list[str] = Field(default_factory=list, description="fixer (codes) applied after this attempt")


class Step(BaseModel):
    """One step of the trail. Which fields are set depends on ``kind``; none holds document text."""

    kind: StepKind
    night: str = Field(description="the nightly partition this step belongs to")
    title: str = Field(description="one line for a person: ids, codes, decisions")
    task: TaskRef | None = None
    at: str | None = Field(default=None, description="when, where the store records it (UTC)")
    first_seen: bool = False
    # discover / layout
    sha256: str | None = None
    size_bytes: int | None = None
    input_uri: str | None = None
    file_name: str | None = None
    parser: str | None = None
    total_pages: int | None = None
    parsed_this_run: bool | None = None
    # verify / retry / route
    classification_source: str | None = None
    classifier: str | None = None
    attempts: list[AttemptTrace] = Field(default_factory=list)
    decision: str | None = None
    rule: int | None = None
    route: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    error_message: str | None = None
    # packets, answers
    review_id: str | None = None
    review_kind: str | None = None
    review_status: str | None = None
    inclusion_probability: float | None = None
    withdrawn_reason: str | None = None
    reviewer: str | None = None
    ground_truth_source: str | None = None
    ground_truth_version: int | None = None
    unclassifiable_reason: str | None = None
    channel: str | None = None
    notes: str | None = None
    record: str | None = Field(default=None, description="the record's path under the storage root")


class Trace(BaseModel):
    doc_id: str
    nights: list[str]
    first_seen: str | None = Field(description="the first night that holds the document")
    steps: list[Step]
    hidden: list[str] = Field(default_factory=list, description="PHI-prone fields blanked by redacted()")

    def redacted(self) -> Trace:
        """The trace with :data:`PHI_FIELDS` blanked (for readers who may not read packets)."""
        hidden = sorted({f for s in self.steps for f in PHI_FIELDS if getattr(s, f)})
        steps = [s.model_copy(update=dict.fromkeys(PHI_FIELDS)) for s in self.steps]
        return self.model_copy(update={"steps": steps, "hidden": hidden})


# =========================================================================== reading the store


_R = TypeVar("_R", bound=BaseModel)


class _ReportRead(StoredRead):
    run_id: str | None = None


class _AcceptedRead(StoredRead):
    run_id: str | None = None
    accepted_at: str | None = None


class _WithdrawnRecordRead(StoredRead):
    doc_id: str | None = None


class _WithdrawnRead(StoredRead):
    """``withdrawn/<night>/<kind>_<key>[.<n>].json``: the copy, why and by which run it was moved."""

    doc_id: str | None = None
    reason: str | None = None
    run_id: str | None = None
    withdrawn_at: str | None = None
    record: _WithdrawnRecordRead | None = None


def _read(model: type[_R], raw: JsonValue) -> _R | None:
    """``raw`` as ``model`` when it is a JSON object of that shape, else None (not trusted)."""
    if not isinstance(raw, dict):
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _pages(details: Mapping[str, JsonValue]) -> list[int]:
    out: set[int] = set()
    for k in _PAGE_KEYS:
        v = details.get(k)
        for p in v if isinstance(v, list) else [v]:
            if isinstance(p, int) and not isinstance(p, bool) and p > 0:
                out.add(p)
    return sorted(out)


def _attempts(attempts: list[AttemptRecord], fixes_applied: list[FixApplied]) -> list[AttemptTrace]:
    fixes: dict[int, list[str]] = {}
    for f in fixes_applied:
        fixes.setdefault(f.attempt, []).append(f"{f.fixer} ({', '.join(f.codes)})")
    return [AttemptTrace(
        attempt=a.attempt, decision=str(a.decision.decision), rule=a.decision.rule,
        issues=[IssueRef(issue_id=i.issue_id, agent=i.agent, code=i.code, severity=str(i.severity),
                         pages=_pages(i.details), auto_fixable=i.auto_fixable) for i in a.issues],
        fixes_after=fixes.get(a.attempt, [])) for a in attempts]


def _codes(a: AttemptTrace) -> str:
    if not a.issues:
        return "no issue"
    return ", ".join(f"{i.code} {i.severity}" + (f" p.{','.join(map(str, i.pages))}" if i.pages else "")
                     for i in a.issues)


class _Night:
    """What one night's records say about the document (each object read at most once)."""

    def __init__(self, store: ArtifactStore, ds: str, doc_id: str):
        self.rs = RunStore(store, ds)
        self.ds, self.doc_id = ds, doc_id
        self.result = self.rs.result(doc_id)  # None: none, or one of another version (not trusted)
        self.error = self._error() if self.result is None else None
        self._stages: list[str] | None = None
        self.report: _ReportRead | None = None  # the night's batch report as stored (read by document_trace)

    def _error(self) -> ErrorRecord | None:
        try:
            return self.rs.error(self.doc_id)
        except ValidationError:  # an error record of another shape is not trusted
            return None

    @property
    def present(self) -> bool:
        return self.result is not None or self.error is not None

    def stage_names(self) -> list[str]:
        if self._stages is None:
            self._stages = self.rs.list(self.rs.stages_dir, ".json")
        return self._stages

    def _record(self, rel: str) -> StageRead | None:
        """A stage record validated into its stage's model; None when there is none or it is of another shape."""
        raw: StageRecord | None = self.rs.get_json(rel)
        try:
            return stage_read(raw) if isinstance(raw, dict) else None
        except ValidationError:
            return None

    def shard_of(self, stage: str) -> int | None:
        """The map index of the ``stage`` shard whose record holds the document (a verify shard's
        ``shard``, else its summaries' ``documents``)."""
        for name in self.stage_names():
            m = re.fullmatch(rf"{stage}_(\d+)\.json", name)
            if not m:
                continue
            rec = self._record(f"{self.rs.stages_dir}/{name}")
            if not isinstance(rec, VerifyRead):
                continue
            held = rec.shard if "shard" in rec.model_fields_set else rec.documents
            if self.doc_id in held:
                return int(m.group(1))
        return None

    def layout_part(self) -> tuple[int | None, bool]:
        """(map index of the ``layout_parse`` part that parsed or failed it this run, parsed?)."""
        folder = f"{self.rs.stages_dir}/layout"
        for name in self.rs.list(folder, ".json"):
            m = re.fullmatch(r"part_(\d+)\.json", name)
            if not m:
                continue
            rec = self._record(f"{folder}/{name}")
            if not isinstance(rec, LayoutRead):
                continue
            if self.doc_id in rec.parsed:
                return int(m.group(1)), True
            if self.doc_id in rec.failed:
                return int(m.group(1)), False
        return None, False


def _task(n: _Night, task_id: str, map_index: int = -1, run_id: str | None = None, source: str = "") -> TaskRef:
    if run_id is None and n.report is not None and n.report.run_id:
        run_id, source = n.report.run_id, "batch report"
    return TaskRef(dag_id=NIGHTLY_DAG, task_id=task_id, map_index=map_index, run_id=run_id or None, night=n.ds,
                   run_id_from=source if run_id else "")


def _night_steps(n: _Night, first: bool) -> list[Step]:
    """A document's steps of one night: discover, layout, verify and route (and the retry), accept."""
    doc_id, rs = n.doc_id, n.rs
    manifest = _read(Manifest, rs.get_json(rs.manifest_rel))
    mdoc = manifest.by_id().get(doc_id) if manifest is not None else None
    rec = n.result
    err = n.error or (rec.error if rec is not None else None)
    bundle = rec.bundle if rec is not None else None
    steps = [_discover_step(n, first, mdoc, bundle, err)]
    layout = _layout_step(n, bundle, err)
    steps += [layout] if layout is not None else []
    result = rec.result if rec is not None else None
    steps += _verify_steps(n, rec, result, err)
    accepted = _read(_AcceptedRead, rs.get_json(rs.accepted_rel(doc_id)))
    if accepted is not None:
        steps.append(_accept_step(n, accepted, result))
    return steps


def _discover_step(n: _Night, first: bool, mdoc: ManifestDoc | None, bundle: BundleMeta | None,
                   err: ErrorRecord | None) -> Step:
    ds = n.ds
    sha = (mdoc and mdoc.sha256) or (bundle and bundle.sha256) or (err and err.sha256)
    uri = (mdoc and mdoc.pdf_uri) or (bundle and bundle.file_path) or (err and err.file)
    size = mdoc.bytes if mdoc is not None else None
    step = Step(kind="discover", night=ds, first_seen=first, task=_task(n, "discover"), sha256=sha or None,
                size_bytes=size, input_uri=uri or None,
                file_name=str(uri).rstrip("/").rsplit("/", 1)[-1] if uri else None,
                title=("First seen" if first else "Seen again") + f" on night {ds}: sha256 "
                      f"{(sha or 'unknown')[:12]}…" + (f", {size} bytes" if size else ""))
    if err is not None and err.stage == "discover":
        step.error, step.error_message = err.error, err.message
        step.title += f"; refused at discovery: {err.error}"
    return step


def _layout_step(n: _Night, bundle: BundleMeta | None, err: ErrorRecord | None) -> Step | None:
    ds, doc_id, rs = n.ds, n.doc_id, n.rs
    part, parsed = n.layout_part()
    parser = (bundle and bundle.parser) or (err and err.parser)
    layout_err = err if err is not None and err.stage == "layout" else None
    if bundle is None and layout_err is None:
        return None
    task = _task(n, "layout_parse", part) if part is not None else _task(n, "layout")
    what = (f"layout failed: {layout_err.error}" if layout_err else
            f"{bundle.total_pages if bundle else None} page(s) by {parser}"
            + ("" if parsed or part is not None or str(parser).startswith("document_ai")
               else " (the bundle of an earlier run, unchanged)"))
    return Step(kind="layout", night=ds, task=task, parser=parser, total_pages=bundle.total_pages if bundle else None,
                parsed_this_run=parsed if part is not None else False if bundle else None,
                error=layout_err.error if layout_err else None,
                error_message=layout_err.message if layout_err else None,
                sha256=bundle.sha256 if bundle else None, title=f"Layout: {what}",
                record=rs.error_rel(doc_id) if layout_err and n.error is not None else
                rs.bundle_rel(doc_id) if bundle else None)


def _accept_step(n: _Night, accepted: _AcceptedRead, result: VerificationResult | None) -> Step:
    ds, doc_id, rs = n.ds, n.doc_id, n.rs
    rule = result.final_rule if result else None
    return Step(kind="accept", night=ds, at=accepted.accepted_at,
                task=_task(n, "accept", run_id=accepted.run_id or None, source="accepted record"),
                decision="AUTO_ACCEPT", rule=rule, title=f"Accepted (rule {rule}): accepted/{ds}/{doc_id}.json",
                record=rs.accepted_rel(doc_id))


def _retry_step(n: _Night, attempts: list[AttemptTrace], result: VerificationResult | None) -> Step:
    shard = n.shard_of("auto_fix_retry")
    last = attempts[-1] if attempts else None
    fixes = [f for a in attempts for f in a.fixes_after]
    return Step(kind="auto_fix_retry", night=n.ds, task=_task(n, "auto_fix_retry", shard if shard is not None else -1),
                attempts=attempts[1:], stop_reason=result.stop_reason if result else None,
                decision=result.final_decision if result else None, rule=result.final_rule if result else None,
                title=f"Automatic fix and retry: {len(fixes)} fix(es) ({'; '.join(fixes) or 'none'}), "
                      f"{max(0, len(attempts) - 1)} more attempt(s)"
                      + (f"; attempt {last.attempt} → {last.decision} rule {last.rule} ({_codes(last)})"
                         if last else ""))


def _verify_steps(n: _Night, rec: DocResult | None, result: VerificationResult | None,
                  err: ErrorRecord | None) -> list[Step]:
    """verify and route (and the retry) of a verified document; the route of one refused before."""
    ds, doc_id, rs = n.ds, n.doc_id, n.rs
    steps: list[Step] = []
    if rec is not None:
        meta = rec.classification_meta
        attempts = _attempts(result.attempts, result.fixes_applied) if result else []
        if rec.attempt_0 is not None and not attempts:
            attempts = _attempts([rec.attempt_0], [])
        first_attempt = attempts[:1]
        shard = n.shard_of("verify")
        verify_title = ("Verified: " + (f"attempt 0 → {first_attempt[0].decision} rule {first_attempt[0].rule}; "
                                       f"{_codes(first_attempt[0])}" if first_attempt else
                                       f"not verified ({rec.error.error if rec.error else 'no result'})"))
        steps.append(Step(kind="verify", night=ds, task=_task(n, "verify", shard if shard is not None else -1),
                          classification_source=meta.source if meta else None,
                          classifier=meta.implementation if meta else None,
                          attempts=first_attempt, title=verify_title, record=rs.result_rel(doc_id)))
        decision, rule = rec.decision.get("decision"), rec.decision.get("rule")
        steps.append(Step(kind="route", night=ds, task=_task(n, "route"), route=rec.route, decision=decision,
                          rule=rule, title=f"V5 arbiter: {decision} by rule {rule} → route {rec.route}"))
        if rec.route == "auto_fix_retry":
            steps.append(_retry_step(n, attempts, result))
    elif err is not None and err.stage not in ("discover", "layout"):
        steps.append(Step(kind="route", night=ds, task=_task(n, "route"), route="write_sme_packets",
                          error=err.error, error_message=err.message,
                          title=f"Not verified ({err.error}): escalated without a V5 rule"))
    elif err is not None:  # refused at discover or layout: the route escalates it, no V5 rule
        steps.append(Step(kind="route", night=ds, task=_task(n, "route"), route="write_sme_packets",
                          decision="ESCALATE_TO_SME", error=err.error,
                          title=f"Escalated without verification ({err.error}): no V5 rule applies"))
    return steps


class _ErrorRead(StoredRead):
    error: str | None = None


class _PacketRead(StoredRead):
    """A stored SME packet as the trail reads it, validated once where it is read (ADR 0056): each
    key with the default an older packet reads as, of the type its :class:`Step` field has."""

    doc_id: str | None = None
    review_kind: str | None = "escalation"
    run_id: str | None = None
    review_status: str | None = "pending"
    created_at: str | None = None
    audit_inclusion_probability: float | int | None = None
    v5_rule: int | None = None
    escalation_reason: str | None = None
    ground_truth_version: int | None = None
    error: _ErrorRead | None = None


class _AnswerRead(StoredRead):
    """A stored ground-truth version as the trail reads it (validated once where it is read)."""

    channel: str | None = None
    review_kind: str | None = "escalation"
    reviewed_at: str | None = None
    reviewer: str | None = None
    ground_truth_source: str | None = None
    version: int | None = None
    unclassifiable_reason: str | None = None
    corrected_dominant_type: str | None = None
    correction_notes: str | None = None


def _packet_step(n: _Night | None, ds: str, key: str, p: _PacketRead, rel: str) -> Step:
    audit = p.review_kind == "audit"
    run = p.run_id or None
    task_id = "audit_sample" if audit else "write_sme_packets"
    task = _task(n, task_id, run_id=run, source="SME packet") if n is not None else \
        TaskRef(dag_id=NIGHTLY_DAG, task_id=task_id, run_id=run, night=ds, run_id_from="SME packet" if run else "")
    error = p.error.error if p.error else None
    why = (f"audit of an accepted document (drawn with probability {p.audit_inclusion_probability})"
           if audit else f"V5 rule {p.v5_rule} ({p.escalation_reason})"
           if p.v5_rule is not None else f"not processed ({error})")
    return Step(kind="audit_packet" if audit else "sme_packet", night=ds, at=p.created_at, task=task,
                review_id=key, review_kind=p.review_kind, review_status=p.review_status,
                rule=p.v5_rule, stop_reason=p.escalation_reason, inclusion_probability=p.audit_inclusion_probability,
                ground_truth_version=p.ground_truth_version, error=error,
                title=f"{'Audit packet' if audit else 'SME packet'} {key}: {why}; {p.review_status}"
                      + (f" (ground truth v{p.ground_truth_version})" if p.ground_truth_version else ""), record=rel)


def _answer_step(ds: str, key: str, gt: _AnswerRead, rel: str) -> Step:
    channel = gt.channel or ""
    m = _CHANNEL.fullmatch(channel)
    task = TaskRef(dag_id=m["dag"], task_id=m["task"], map_index=int(m["map"]), run_id=m["run"], night=ds,
                   run_id_from="ground truth (channel)") if m else None
    audit = gt.review_kind == "audit"
    return Step(kind="answer", night=ds, at=gt.reviewed_at, task=task, review_id=key,
                review_kind=gt.review_kind, reviewer=gt.reviewer,
                ground_truth_source=gt.ground_truth_source, ground_truth_version=gt.version,
                unclassifiable_reason=gt.unclassifiable_reason, channel=channel or None,
                decision=gt.corrected_dominant_type, notes=gt.correction_notes or None,
                title=f"{'Audit answered' if audit else 'Answered'} by {gt.reviewer}: "
                      f"{gt.ground_truth_source} → ground truth version {gt.version}"
                      + (f" ({gt.unclassifiable_reason})" if gt.unclassifiable_reason else "")
                      + ("" if m else f" (answered through {channel or 'an unnamed channel'}: no Airflow task)"),
                record=rel)


def _withdrawn_steps(n: _Night, keys: set[str]) -> list[Step]:
    out = []
    for name in n.rs.list(f"withdrawn/{n.ds}", ".json"):
        kind = "sme_packet" if name.startswith("sme_packet_") else "accepted" if name.startswith("accepted_") else None
        if kind is None:
            continue
        stem = re.sub(r"(\.\d+)?\.json$", "", name)[len(kind) + 1:]
        if stem != n.doc_id and stem not in keys and not stem.startswith(f"{n.ds}_{n.doc_id}_"):
            continue
        rel = f"withdrawn/{n.ds}/{name}"
        moved = _read(_WithdrawnRead, n.rs.get_json(rel))
        if moved is None:
            continue
        if moved.record is not None and moved.record.doc_id is not None and moved.record.doc_id != n.doc_id:
            continue
        reason = moved.reason or ""
        task_id = ("discover" if "no longer in the incoming folder" in reason else
                   "accept" if reason.startswith("accepted by") else "write_sme_packets")
        out.append(Step(kind="withdrawn", night=n.ds, at=moved.withdrawn_at, withdrawn_reason=reason,
                        task=_task(n, task_id, run_id=moved.run_id or None, source="withdrawn copy"),
                        review_id=str(moved.doc_id) if kind == "sme_packet" else None,
                        title=f"Withdrawn {'SME packet' if kind == 'sme_packet' else 'accepted record'}"
                              f" {moved.doc_id}: {reason}", record=rel))
    return out


def document_trace(store: ArtifactStore, doc_id: str) -> Trace:
    """Every step of ``doc_id``'s trail in the store (see the module docstring).

    Raises:
        InputError: the doc id cannot be part of a storage path (INPUT_UNSAFE_NAME).
        UnknownDocument: no night holds it.
    """
    safe_id(doc_id, "doc id")
    nights_all = [name for name, kind, _ in store.entries("runs") if kind == "other"]
    nights = [n for n in (_Night(store, ds, doc_id) for ds in nights_all) if n.present]
    packets = store.list(RunStore.PACKETS_DIR, ".json")
    truths = store.list("ground_truth", ".json")
    own = re.compile(rf"sme_packet_(?P<key>(?P<ds>.+?)_{re.escape(doc_id)}(?:_[0-9a-f]{{10}})?(?P<audit>_audit)?)\.json"
                     rf"|sme_packet_(?P<legacy>{re.escape(doc_id)})\.json")
    found: list[tuple[str, str, _PacketRead]] = []  # (night, key, packet as stored)
    for name in packets:
        m = own.fullmatch(name)
        if not m:
            continue
        rel = f"{RunStore.PACKETS_DIR}/{name}"
        try:
            packet = store.read_json(rel)
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(packet, dict) and packet.get("doc_id") == doc_id:
            found.append((m["ds"] or "", m["key"] or m["legacy"], _PacketRead.model_validate(packet)))
    if not nights and not found:
        raise UnknownDocument(doc_id, uri_of(store.root), len(nights_all))
    steps: list[Step] = []
    by_night = {n.ds: n for n in nights}
    order = sorted(set(by_night) | {ds for ds, _, _ in found if ds})
    keys = {k for _, k, _ in found}
    for i, ds in enumerate(order):
        n = by_night.get(ds)
        if n is not None:
            n.report = _read(_ReportRead, n.rs.get_json(n.rs.report_rel("json")))
            steps += _night_steps(n, first=i == 0)
            steps += _withdrawn_steps(n, keys)
        for pds, key, packet in sorted((f for f in found if f[0] == ds), key=lambda f: f[1]):
            steps.append(_packet_step(n, pds, key, packet, RunStore.packet_rel(key)))
            for name in truths:
                m = re.fullmatch(rf"gt_{re.escape(key)}(?:\.v(\d+))?\.json", name)
                if m:
                    gt = store.read_json_if_exists(f"{ArtifactStore.GROUND_TRUTH_DIR}/{name}")
                    if isinstance(gt, dict):
                        steps.append(_answer_step(pds, key, _AnswerRead.model_validate(gt),
                                                  f"{ArtifactStore.GROUND_TRUTH_DIR}/{name}"))
        if n is not None and n.report is not None:
            latest = n.report.run_id or ""
            earlier = sorted({s.task.run_id for s in steps if s.night == ds and s.task is not None
                              and s.task.dag_id == NIGHTLY_DAG and s.task.run_id and s.task.run_id != latest})
            steps.append(Step(kind="batch_report", night=ds, task=_task(n, "batch_report"),
                              title=f"Batch report of {ds} (run {latest or 'unknown'})"
                                    + (f"; this night ran again after {', '.join(earlier)}, whose records it left "
                                       f"unchanged" if earlier else ""), record=n.rs.report_rel("json")))
    for _, key, packet in (f for f in found if not f[0]):  # packets of the older layout (keyed by doc id)
        steps.append(_packet_step(None, "", key, packet, RunStore.packet_rel(key)))
    return Trace(doc_id=doc_id, nights=[n.ds for n in nights], first_seen=order[0] if order else None, steps=steps)


def render_text(trace: Trace) -> str:
    """The trail as lines for a terminal: one per step, the task instance under it."""
    lines = [f"Document {trace.doc_id}: {len(trace.nights)} night(s) ({', '.join(trace.nights) or 'none'}), "
             f"first seen {trace.first_seen or 'unknown'}", ""]
    night = None
    for s in trace.steps:
        if s.night != night:
            night = s.night
            lines.append(f"== night {night or '(older packet layout)'}")
        lines.append(f"- [{s.kind}] {s.title}" + (f"  ({s.at})" if s.at else ""))
        if s.input_uri:
            lines.append(f"    input: {s.input_uri}")
        if s.error_message:
            lines.append(f"    error: {s.error}: {s.error_message}")
        for a in s.attempts if s.kind == "auto_fix_retry" else []:
            lines.append(f"    attempt {a.attempt}: {a.decision} rule {a.rule}; {_codes(a)}")
        if s.notes:
            lines.append(f"    notes: {s.notes}")
        if s.task is not None:
            t = s.task
            lines.append(f"    task: {t.dag_id} / {t.run_id or f'(run of {t.night}: not recorded)'} / {t.task_id}"
                         + (f"[{t.map_index}]" if t.map_index >= 0 else "") + f"  → {t.ui_path()}")
        if s.record:
            lines.append(f"    record: {s.record}")
    return "\n".join(lines) + "\n"
