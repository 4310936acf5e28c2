"""Feedback figures: what the SMEs' answers say about the classifier and the verifiers.

:func:`evaluate_store` compares each reviewed document's **ground truth** (the latest version of
``ground_truth/gt_<doc_id>[.v<N>].json``) with its **primary classification** (the packet's
``primary_classification`` — the classification the SME saw, after any automatic fix; when the
document has no packet, or the packet has neither a classification nor an error, the newest
``runs/<ds>/<doc_id>/classification.json``). :func:`evaluate_labelled_corpus` computes the same
accuracy figures for the offline classifier on the labelled real corpus, whose one label per
text is the truth of every page.

What is the truth
    *Dominant type*: for ``SME_CORRECTED``, ``corrected_dominant_type`` when set, else the
    ``dominant_type_overall`` of ``ground_truth_classification``; for ``SME_VALIDATED``, the
    ``dominant_type_overall`` of ``ground_truth_classification`` (the primary as is; the primary
    itself when the record holds no classification). *Segments*: the ``segments`` (page_start,
    page_end, dominant_type) of ``ground_truth_classification``. A document has **no segment
    truth** — it counts for the dominant-type figures only — when those segments are missing or
    unreadable, or when none of them has the truth's dominant type (a correction of the dominant
    type alone, written over the primary's unchanged segments, would otherwise count the
    primary's pages as right).

Which documents
    ``n_reviewed`` = documents with a readable ground-truth record; ``n_validated`` /
    ``n_corrected`` split them by ``ground_truth_source``. A document whose primary
    classification is missing (parse or classification errors: the packet carries ``error``) is
    counted in ``n_primary_missing`` and left out of every other figure — it is neither right
    nor wrong. A primary that exists but cannot be read (schema-invalid) is evaluated: whatever
    it lacks counts as wrong. Reviewed documents are the *escalated* ones: these figures describe
    the hard cases the verifiers picked, not the pipeline's overall accuracy.

Audits (ADR 0023)
    A ground-truth record with ``review_kind: "audit"`` (or whose packet is an audit packet)
    answers the nightly audit of an *accepted* document: it counts in ``n_reviewed`` and
    ``n_audited`` but in no accuracy or escalation figure. ``false_accept`` is the share of
    audited accepts the SME corrected, each weighted 1/inclusion probability (the packet's
    ``audit_inclusion_probability``), with its 95 % Wilson interval on the effective n
    (:mod:`docverify.reporting.audit_sample`); also per accepted dominant type and per night (the review id's
    date); ``false_accept_errors`` counts the kinds of error (type, boundary, evidence).

Cannot classify
    A record ``SME_UNCLASSIFIABLE`` (the SME could not classify the document: unreadable, wrong
    file, needs a re-scan, other) holds no classification: it counts in ``n_reviewed`` and
    ``n_unclassifiable`` (listed with its reason under ``unclassifiable``) and in no accuracy,
    escalation, false-alarm or false-accept figure — an audit answered so is not a false accept.

The figures (a :class:`Ratio` keeps numerator and denominator; its value is None — shown as
"n/a" — when the denominator is 0)
    dominant_type_accuracy
        documents whose primary ``dominant_type_overall`` equals the truth's / documents with a
        primary and a known truth dominant type.
    page_accuracy (micro)
        over every page 1..total_pages (``total_pages`` of the packet, else the truth segments'
        last page) that a truth segment covers: pages where the type of the primary segment
        covering the page equals the truth segment's type / such pages. A page no primary
        segment covers counts as wrong (also counted in ``pages_not_covered``); a page no truth
        segment covers is left out. ``page_accuracy_document_mean`` is the mean of each
        document's own page accuracy over the documents with at least one such page.
    split_accuracy
        documents whose primary segment list — (page_start, page_end, dominant_type) in page
        order — equals the truth's exactly (a malformed primary segment makes it unequal) /
        documents with segment truth.
    boundary_precision / boundary_recall
        a boundary is the first page of every segment but the first; summed over documents with
        segment truth: boundaries both have / boundaries the primary has (precision), / the
        truth has (recall). Types play no part.
    escalation_precision
        among reviewed documents that were escalated (they have a packet — packets are written
        only for escalations) and have a primary: the share the SME **corrected**. High means
        the escalations were needed (the verifiers caught real errors); low means the SMEs are
        mostly confirming correct classifications (over-escalation, their time spent on
        nothing). ``escalation_by_rule`` splits it by the packet's ``v5_rule``.
    false_alarm_by_code / false_alarm_by_trap
        for each issue code in a reviewed packet's ``issues_summary`` (a document counts once
        per code): ``n`` documents carried it, ``validated`` of them the SME validated unchanged
        (``SME_VALIDATED``), ``corrected`` the SME corrected; ``false_alarm_rate`` = validated /
        n. ``false_alarm_by_trap`` is the subset of V3's ``TRAP_*`` codes. Read the rate with
        its ``n``: 1 of 1 is not a trend.

Unreadable files (a broken JSON, a record that does not validate, a name outside the layout)
are listed by URI with the reason under ``unreadable`` and skipped: when the latest version of a
record is unreadable, the newest readable version counts. Reasons never quote file content.
"""

from __future__ import annotations

import json
import pathlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TypeGuard

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictInt, StrictStr, ValidationError

from docverify.classify.offline import IMPLEMENTATION, classify_offline
from docverify.domain.classification_view import Lenient, Number, Objects
from docverify.domain.models import GroundTruthRecord
from docverify.domain.read_models import StoredView
from docverify.reporting.audit_sample import error_kinds as kinds_of
from docverify.reporting.audit_sample import false_accept_estimate
from docverify.reporting.labelled_sample import PAGE_CHARS, load_records, sample_path, to_bundle
from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore, StoragePath

NA = "n/a"
GROUND_TRUTH_DIR = ArtifactStore.GROUND_TRUTH_DIR
#: ``gt_<doc_id>.json`` is version 1, ``gt_<doc_id>.v<N>.json`` version N (the store's layout).
GT_NAME = re.compile(r"^gt_(?P<doc>.+?)(?:\.v(?P<version>\d+))?\.json$")
TRAP_PREFIX = "TRAP_"


# --------------------------------------------------------------------------- models


class _Figures(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ratio(_Figures):
    """numerator / denominator; ``value`` is None when the denominator is 0."""

    numerator: int = 0
    denominator: int = 0
    value: float | None = None

    @classmethod
    def of(cls, numerator: int, denominator: int) -> Ratio:
        return cls(numerator=numerator, denominator=denominator,
                   value=numerator / denominator if denominator else None)

    def show(self) -> str:
        """``97.9% (275/281)``, or ``n/a (0/0)``."""
        if self.value is None:
            return f"{NA} ({self.numerator}/{self.denominator})"
        return f"{100 * self.value:.1f}% ({self.numerator}/{self.denominator})"


class AccuracyFigures(_Figures):
    """Primary classification against the truth (definitions in the module docstring)."""

    documents: int = Field(0, description="documents compared (a primary and a truth)")
    dominant_type_accuracy: Ratio = Field(default_factory=Ratio)
    page_accuracy: Ratio = Field(default_factory=Ratio, description="micro-average over pages")
    page_accuracy_document_mean: float | None = None
    page_accuracy_documents: int = 0
    pages_not_covered: int = Field(0, description="pages no primary segment covers (counted wrong)")
    pages_without_truth: int = Field(0, description="pages no truth segment covers (left out)")
    documents_without_segment_truth: int = 0
    split_accuracy: Ratio = Field(default_factory=Ratio)
    boundary_precision: Ratio = Field(default_factory=Ratio)
    boundary_recall: Ratio = Field(default_factory=Ratio)


class CodeFigures(_Figures):
    """Reviewed documents that carried one issue code (or came from one V5 rule)."""

    n: int = 0
    validated: int = 0
    corrected: int = 0
    false_alarm_rate: float | None = Field(None, description="validated / n")
    correction_rate: float | None = Field(None, description="corrected / n")


class UnreadableFile(_Figures):
    uri: str
    reason: str


class DocumentFigures(_Figures):
    """One reviewed document (ids, types and counts only: no page text)."""

    doc_id: str
    ground_truth_source: str
    version: int
    escalated: bool
    v5_rule: int | None = None
    primary_missing: bool = False
    primary_dominant_type: str | None = None
    truth_dominant_type: str | None = None
    dominant_correct: bool | None = None
    pages_evaluated: int = 0
    pages_correct: int = 0
    split_exact: bool | None = None
    issue_codes: list[str] = Field(default_factory=list)
    review_kind: str = Field(default="escalation", exclude_if=lambda v: v == "escalation")
    error_kinds: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    unclassifiable_reason: str | None = Field(default=None, exclude_if=lambda v: v is None)


class UnclassifiableDocument(_Figures):
    """A document the SME could not classify (its latest record is SME_UNCLASSIFIABLE)."""

    doc_id: str
    reason: str
    review_kind: str = "escalation"


class FalseAcceptFigures(_Figures):
    """Audited accepts (ADR 0023): the weighted share the SME corrected (:mod:`docverify.reporting.audit_sample`:
    each answer weighted 1/inclusion probability) with its 95 % Wilson interval on the effective n."""

    rate: float | None = None
    ci95_low: float = 0.0
    ci95_high: float = 1.0
    n: int = 0
    corrected: int = 0
    n_effective: float = 0.0

    def show(self) -> str:
        if self.rate is None:
            return "n/a (n=0 audited)"
        return (f"{100 * self.rate:.1f}% (95% CI {100 * self.ci95_low:.1f}–{100 * self.ci95_high:.1f}%, "
                f"{self.corrected} corrected of n={self.n} audited)")


def _false_accept(items: list[tuple[bool, float]]) -> FalseAcceptFigures:
    e = false_accept_estimate(items)
    return FalseAcceptFigures(rate=e.rate, ci95_low=round(e.low, 6), ci95_high=round(e.high, 6), n=e.n,
                              corrected=e.k, n_effective=round(e.n_eff, 3))


class FeedbackFigures(_Figures):
    """The feedback figures of one artifact store (see the module docstring)."""

    source: str = Field(description="the artifact store's root URI")
    n_reviewed: int = 0
    n_validated: int = 0
    n_corrected: int = 0
    n_unclassifiable: int = Field(0, description="answers 'Cannot classify' (SME_UNCLASSIFIABLE): no truth, "
                                  "in no classification, escalation or false-accept figure")
    unclassifiable: list[UnclassifiableDocument] = Field(
        default_factory=list, exclude_if=lambda v: not v, description="those documents with the SME's reason")
    n_primary_missing: int = 0
    primary_missing_doc_ids: list[str] = Field(default_factory=list)
    n_escalated_reviewed: int = Field(0, description="reviewed documents with a packet and a primary")
    accuracy: AccuracyFigures = Field(default_factory=AccuracyFigures)
    escalation_precision: Ratio = Field(default_factory=Ratio)
    escalation_by_rule: dict[str, CodeFigures] = Field(default_factory=dict)
    false_alarm_by_code: dict[str, CodeFigures] = Field(default_factory=dict)
    false_alarm_by_trap: dict[str, CodeFigures] = Field(default_factory=dict)
    false_alarm_by_jury: dict[str, CodeFigures] = Field(
        default_factory=dict, exclude_if=lambda v: not v,
        description="Only when the CR_V2 jury ran: per '<finding code> → <jury decision>' (KEEP, DROP, FLIP, "
        "FLAG), the reviewed documents whose jury gave that decision on that code; 'validated' = the SME left the "
        "classification unchanged (so a kept finding was a false alarm, a dropped one rightly dropped).")
    n_audited: int = Field(0, description="answered audits of accepted documents (ADR 0023); not in the "
                           "accuracy or escalation figures")
    false_accept: FalseAcceptFigures = Field(default_factory=FalseAcceptFigures)
    false_accept_by_type: dict[str, FalseAcceptFigures] = Field(
        default_factory=dict, exclude_if=lambda v: not v, description="per accepted dominant type")
    false_accept_by_night: dict[str, FalseAcceptFigures] = Field(default_factory=dict, exclude_if=lambda v: not v)
    false_accept_errors: dict[str, int] = Field(
        default_factory=dict, exclude_if=lambda v: not v,
        description="kinds of error the audits found (type, boundary, evidence; a correction may count in several)")
    unreadable: list[UnreadableFile] = Field(default_factory=list)
    per_document: list[DocumentFigures] = Field(default_factory=list)


class MisclassifiedRecord(_Figures):
    id: str
    corpus: str
    expected: str
    predicted: str | None


class CorpusFigures(_Figures):
    """The offline classifier on the labelled real corpus: one label per text = every page's truth."""

    source: str
    implementation: str
    documents: int = 0
    pages: int = 0
    page_chars: int = 0
    accuracy: AccuracyFigures = Field(default_factory=AccuracyFigures)
    per_corpus: dict[str, AccuracyFigures] = Field(default_factory=dict)
    misclassified: list[MisclassifiedRecord] = Field(default_factory=list)


# --------------------------------------------------------------------------- comparison core


@dataclass(frozen=True)
class Span:
    """A segment reduced to what the figures compare."""

    page_start: int
    page_end: int
    doc_type: str


def _is_int(x: JsonValue) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def segment_spans(raw: JsonValue) -> tuple[list[Span], int]:
    """The readable segments of a classification's ``segments`` value, in page order, and how
    many entries were malformed (not a dict, pages not integers or reversed, no type)."""
    if not isinstance(raw, list):
        return [], 0
    spans, bad = [], 0
    for s in raw:
        a, b, t = (s.get("page_start"), s.get("page_end"), s.get("dominant_type")) if isinstance(s, dict) \
            else (None, None, None)
        if _is_int(a) and _is_int(b) and a <= b and isinstance(t, str) and t:
            spans.append(Span(a, b, t))
        else:
            bad += 1
    return sorted(spans, key=lambda s: (s.page_start, s.page_end)), bad


def _type_at(spans: list[Span], page: int) -> str | None:
    for s in spans:
        if s.page_start <= page <= s.page_end:
            return s.doc_type
    return None


def _boundaries(spans: list[Span]) -> set[int]:
    starts = {s.page_start for s in spans}
    return starts - {min(starts)} if starts else set()


@dataclass
class Comparison:
    """One document's primary against its truth (None: that figure does not apply)."""

    dominant_correct: bool | None = None
    pages_evaluated: int = 0
    pages_correct: int = 0
    pages_not_covered: int = 0
    pages_without_truth: int = 0
    split_exact: bool | None = None
    boundaries_predicted: int = 0
    boundaries_true: int = 0
    boundaries_hit: int = 0


def compare(primary: JsonValue, truth_dominant: str | None, truth_spans: list[Span] | None,
            total_pages: int = 0) -> Comparison:
    """Compare a primary classification (raw dict; unreadable parts count as wrong) with the
    truth: its dominant type (None: unknown) and its segments (None: no segment truth)."""
    raw = primary if isinstance(primary, dict) else {}
    predicted_dominant = raw.get("dominant_type_overall")
    c = Comparison()
    if truth_dominant is not None:
        c.dominant_correct = predicted_dominant == truth_dominant
    if truth_spans is None:
        return c
    spans, malformed = segment_spans(raw.get("segments"))
    last = total_pages if total_pages > 0 else max(s.page_end for s in truth_spans)
    for page in range(1, last + 1):
        want = _type_at(truth_spans, page)
        if want is None:
            c.pages_without_truth += 1
            continue
        c.pages_evaluated += 1
        got = _type_at(spans, page)
        if got is None:
            c.pages_not_covered += 1
        elif got == want:
            c.pages_correct += 1
    c.split_exact = not malformed and spans == truth_spans
    bp, bt = _boundaries(spans), _boundaries(truth_spans)
    c.boundaries_predicted, c.boundaries_true, c.boundaries_hit = len(bp), len(bt), len(bp & bt)
    return c


class _Accumulator:
    """Sums :class:`Comparison` s into :class:`AccuracyFigures`."""

    def __init__(self) -> None:
        self.n = 0
        self.dom = [0, 0]
        self.pages = [0, 0]
        self.doc_page_acc: list[float] = []
        self.not_covered = self.without_truth = self.no_segment_truth = 0
        self.split = [0, 0]
        self.bounds = [0, 0, 0]  # hit, predicted, true

    def add(self, c: Comparison) -> None:
        self.n += 1
        if c.dominant_correct is not None:
            self.dom[0] += c.dominant_correct
            self.dom[1] += 1
        if c.split_exact is None:
            self.no_segment_truth += 1
            return
        self.pages[0] += c.pages_correct
        self.pages[1] += c.pages_evaluated
        if c.pages_evaluated:
            self.doc_page_acc.append(c.pages_correct / c.pages_evaluated)
        self.not_covered += c.pages_not_covered
        self.without_truth += c.pages_without_truth
        self.split[0] += c.split_exact
        self.split[1] += 1
        self.bounds[0] += c.boundaries_hit
        self.bounds[1] += c.boundaries_predicted
        self.bounds[2] += c.boundaries_true

    def figures(self) -> AccuracyFigures:
        docs = len(self.doc_page_acc)
        return AccuracyFigures(
            documents=self.n, dominant_type_accuracy=Ratio.of(*self.dom), page_accuracy=Ratio.of(*self.pages),
            page_accuracy_document_mean=sum(self.doc_page_acc) / docs if docs else None,
            page_accuracy_documents=docs, pages_not_covered=self.not_covered,
            pages_without_truth=self.without_truth, documents_without_segment_truth=self.no_segment_truth,
            split_accuracy=Ratio.of(*self.split), boundary_precision=Ratio.of(self.bounds[0], self.bounds[1]),
            boundary_recall=Ratio.of(self.bounds[0], self.bounds[2]),
        )


def _code_figures(validated: int, corrected: int) -> CodeFigures:
    n = validated + corrected
    return CodeFigures(n=n, validated=validated, corrected=corrected,
                       false_alarm_rate=validated / n if n else None, correction_rate=corrected / n if n else None)


# --------------------------------------------------------------------------- reading the store


def _reason(exc: Exception, what: str) -> str:
    """Why a file could not be used — never quoting its content (it may hold PHI)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first = errs[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        more = f" and {len(errs) - 1} more" if len(errs) > 1 else ""
        return f"not a {what}: {where}: {first['msg']}{more}"
    return f"cannot be read ({type(exc).__name__})"


def _read_json(store: ArtifactStore, rel: str) -> JsonValue:
    raw: JsonValue = json.loads(store.read_bytes(rel).decode("utf-8"))
    return raw


class _IssueCode(BaseModel):
    code: Lenient[StrictStr] = None


class _PacketFacts(StoredView):
    """A stored SME packet as the figures read it, validated once where it is read: each key its JSON
    type or None (a key of another type counts as absent, as the figures always read it); the primary
    classification and the error as stored."""

    review_kind: Lenient[StrictStr] = None
    primary_classification: JsonValue = None
    error: JsonValue = None
    audit_inclusion_probability: Lenient[Number] = None
    v5_rule: Lenient[StrictInt] = None
    total_pages: Lenient[StrictInt] = None
    issues_summary: Objects[_IssueCode] = []


class _ResultFacts(StoredView):
    """A night's ``result.json`` as the figures read it: its verification and classification as stored."""

    result: JsonValue = None
    classification: JsonValue = None


class _Vote(BaseModel):
    code: Lenient[StrictStr] = None
    final_action: Lenient[StrictStr] = None


class _Run(BaseModel):
    phase: Lenient[StrictStr] = None
    votes: Objects[_Vote] = []


class _Attempt(BaseModel):
    runs: Objects[_Run] = []


class _Verification(BaseModel):
    """A stored verification as the jury figures read it: every vote of every jury run."""

    attempts: Objects[_Attempt] = []


def latest_ground_truth(store: ArtifactStore) -> tuple[dict[str, tuple[GroundTruthRecord, int]],
                                                       list[UnreadableFile]]:
    """The latest readable ground-truth record per document → ``{doc_id: (record, version)}``
    (the version from the file name, the store's layout), and the files skipped and why."""
    unreadable: list[UnreadableFile] = []
    versions: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for name in store.list(GROUND_TRUTH_DIR, ".json"):
        m = GT_NAME.match(name)
        if not m:
            unreadable.append(UnreadableFile(
                uri=store.uri(f"{GROUND_TRUTH_DIR}/{name}"),
                reason="not a ground-truth file name (gt_<doc_id>.json or gt_<doc_id>.v<N>.json): move it "
                       "out of ground_truth/"))
            continue
        versions[m["doc"]].append((int(m["version"] or 1), name))
    latest: dict[str, tuple[GroundTruthRecord, int]] = {}
    for doc_id, found in sorted(versions.items()):
        for version, name in sorted(found, reverse=True):
            rel = f"{GROUND_TRUTH_DIR}/{name}"
            try:
                record = GroundTruthRecord.model_validate(_read_json(store, rel))
            except (OSError, ValueError) as exc:  # JSON, UTF-8 and validation errors are ValueErrors
                unreadable.append(UnreadableFile(uri=store.uri(rel), reason=_reason(exc, "GroundTruthRecord")
                                                 + "; fix the file or save the review again (a new version)"))
                continue
            if (record.review_id or record.doc_id) != doc_id:
                unreadable.append(UnreadableFile(
                    uri=store.uri(rel),
                    reason=f"holds review {record.review_id or record.doc_id!r} but its name says {doc_id!r}: "
                           f"rename it (gt_<review_id>.json) or fix its review_id/doc_id"))
                continue
            latest[doc_id] = (record, version)
            break
    return latest, unreadable


class _PrimarySource:
    """Packets and run classifications of the store (the run partitions listed once)."""

    def __init__(self, store: ArtifactStore, unreadable: list[UnreadableFile]):
        self.store, self.unreadable = store, unreadable
        self._partitions: list[str] | None = None

    def packet(self, doc_id: str) -> _PacketFacts | None:
        rel = ArtifactStore.packet_rel(doc_id)
        if not self.store.exists(rel):
            return None
        try:
            raw = _read_json(self.store, rel)
        except (OSError, ValueError) as exc:
            self.unreadable.append(UnreadableFile(uri=self.store.uri(rel), reason=_reason(exc, "packet")))
            return None
        if not isinstance(raw, dict):
            self.unreadable.append(UnreadableFile(uri=self.store.uri(rel), reason="not a JSON object (an SME packet)"))
            return None
        return _PacketFacts.model_validate(raw)

    def partitions(self) -> list[str]:
        if self._partitions is None:
            runs = self.store.path("runs")
            self._partitions = sorted((p.name for p in runs.iterdir() if p.is_dir()), reverse=True) \
                if runs.exists() else []
        return self._partitions

    def _result(self, ds: str, doc_id: str) -> _ResultFacts | None:
        """The night's ``result.json`` of ``doc_id`` (:class:`docverify.storage.runstore.DocResult`), or None."""
        rel = RunStore(self.store, ds).result_rel(doc_id)
        try:
            raw = self.store.read_json_if_exists(rel)
        except (OSError, ValueError) as exc:
            self.unreadable.append(UnreadableFile(uri=self.store.uri(rel), reason=_reason(exc, "result")))
            return None
        return _ResultFacts.model_validate(raw) if isinstance(raw, dict) else None

    def jury_decisions(self, doc_id: str) -> list[tuple[str, str]]:
        """(finding code, jury decision) of the newest verification of ``doc_id`` (its
        ``result.json``; ``verification.json`` of the CLI or of nights before the typed run store,
        ADR 0010), each once; [] when the jury did not run."""
        for ds in self.partitions():
            rec = self._result(ds, doc_id)
            raw = rec.result if rec is not None else None
            if raw is None:
                rel = f"{ArtifactStore.run_dir(ds, doc_id)}/verification.json"
                try:
                    raw = self.store.read_json_if_exists(rel)
                except (OSError, ValueError):
                    return []
            if isinstance(raw, dict):
                verification = _Verification.model_validate(raw)
                pairs = {(v.code, v.final_action) for a in verification.attempts for r in a.runs if r.phase == "jury"
                         for v in r.votes}
                return sorted((a, b) for a, b in pairs if a is not None and b is not None)
        return []

    def run_classification(self, doc_id: str) -> JsonValue:
        """The newest classification of ``doc_id`` (by date partition): its night's ``result.json``,
        or ``classification.json`` (the CLI's, or of nights before the typed run store of ADR 0010)."""
        for ds in self.partitions():
            rec = self._result(ds, doc_id)
            if rec is not None and rec.classification is not None:
                return rec.classification
            rel = f"{ArtifactStore.run_dir(ds, doc_id)}/classification.json"
            try:
                raw: JsonValue = self.store.read_json_if_exists(rel)
            except (OSError, ValueError) as exc:
                self.unreadable.append(UnreadableFile(uri=self.store.uri(rel),
                                                      reason=_reason(exc, "classification")))
                continue
            if raw is not None:
                return raw
        return None


def truth_of(record: GroundTruthRecord, primary: JsonValue) -> tuple[str | None, list[Span] | None]:
    """The truth's dominant type and segments (None: no segment truth); rules in the module
    docstring."""
    gt = record.ground_truth_classification or {}
    if record.ground_truth_source == "SME_VALIDATED" and not gt and isinstance(primary, dict):
        gt = primary
    stated = gt.get("dominant_type_overall")
    dominant = stated if isinstance(stated, str) else None
    if record.ground_truth_source == "SME_CORRECTED" and record.corrected_dominant_type:
        dominant = str(record.corrected_dominant_type)
    spans, _ = segment_spans(gt.get("segments"))
    if not spans or (dominant is not None and dominant not in {s.doc_type for s in spans}):
        return dominant, None
    return dominant, spans


def _issue_codes(packet: _PacketFacts | None) -> list[str]:
    return sorted({i.code for i in packet.issues_summary if i.code is not None}) if packet else []


def evaluate_store(store: ArtifactStore | str | StoragePath) -> FeedbackFigures:
    """The feedback figures over every reviewed document of ``store`` (an :class:`ArtifactStore`,
    or a root path / URI). Never raises for a bad file: it is listed under ``unreadable``."""
    if not isinstance(store, ArtifactStore):
        store = ArtifactStore(store)
    latest, unreadable = latest_ground_truth(store)
    source = _PrimarySource(store, unreadable)
    tally = _Tally()
    for doc_id, (record, version) in latest.items():
        src = record.ground_truth_source
        tally.sources[src] += 1
        packet = source.packet(doc_id)
        audited = record.review_kind == "audit" or (packet is not None and packet.review_kind == "audit")
        if src == "SME_UNCLASSIFIABLE":  # no truth: counted apart, in no figure
            tally.unclassifiable_doc(doc_id, record, version, packet, "audit" if audited else "escalation")
        elif audited:
            tally.audited_doc(doc_id, record, version, packet)
        else:
            tally.reviewed_doc(doc_id, record, version, packet, source)
    return tally.figures(store.uri(""), len(latest), unreadable)


@dataclass
class _Tally:
    """What :func:`evaluate_store` counts over the reviewed documents, one kind of review at a time."""

    acc: _Accumulator = field(default_factory=lambda: _Accumulator())
    rows: list[DocumentFigures] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    escalated: list[int] = field(default_factory=lambda: [0, 0])  # corrected, n
    by_rule: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    by_code: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    by_jury: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    sources: Counter[str] = field(default_factory=Counter)
    #: night, accepted type, corrected, inclusion probability
    audits: list[tuple[str, str, bool, float]] = field(default_factory=list)
    error_kinds: Counter[str] = field(default_factory=Counter)
    unclassifiable: list[UnclassifiableDocument] = field(default_factory=list)

    def unclassifiable_doc(self, doc_id: str, record: GroundTruthRecord, version: int,
                           packet: _PacketFacts | None, kind: str) -> None:
        reason = record.unclassifiable_reason or "other"
        self.unclassifiable.append(UnclassifiableDocument(doc_id=doc_id, reason=reason, review_kind=kind))
        self.rows.append(DocumentFigures(doc_id=doc_id, ground_truth_source=record.ground_truth_source,
                                         version=version, escalated=packet is not None and kind == "escalation",
                                         review_kind=kind, unclassifiable_reason=reason))

    def audited_doc(self, doc_id: str, record: GroundTruthRecord, version: int,
                    packet: _PacketFacts | None) -> None:
        src = record.ground_truth_source
        accepted_cls = packet.primary_classification if packet else None
        accepted_type = accepted_cls.get("dominant_type_overall") if isinstance(accepted_cls, dict) else None
        corrected = src == "SME_CORRECTED"
        prob = packet.audit_inclusion_probability if packet else None
        row = DocumentFigures(doc_id=doc_id, ground_truth_source=src, version=version, escalated=False,
                              review_kind="audit", primary_dominant_type=accepted_type if isinstance(
                                  accepted_type, str) else None)
        if corrected:
            row.error_kinds = kinds_of(accepted_cls, record.ground_truth_classification)
            self.error_kinds.update(row.error_kinds)
        self.rows.append(row)
        night = (record.review_id or doc_id)[:10] if re.match(r"\d{4}-\d\d-\d\d_", record.review_id or "") \
            else "unknown"
        self.audits.append((night, row.primary_dominant_type or "unknown", corrected,
                            float(prob) if prob is not None and prob > 0 else 1.0))

    def reviewed_doc(self, doc_id: str, record: GroundTruthRecord, version: int,
                     packet: _PacketFacts | None, source: _PrimarySource) -> None:
        src = record.ground_truth_source
        if packet is not None and (packet.primary_classification is not None or packet.error):
            primary = packet.primary_classification
        else:
            primary = source.run_classification(record.doc_id)
        rule = packet.v5_rule if packet else None
        row = DocumentFigures(doc_id=doc_id, ground_truth_source=src, version=version,
                              escalated=packet is not None, v5_rule=rule)
        self.rows.append(row)
        if primary is None:
            row.primary_missing = True
            self.missing.append(doc_id)
            return
        total = (packet.total_pages if packet else None) or 0
        truth_dominant, truth_spans = truth_of(record, primary)
        c = compare(primary, truth_dominant, truth_spans, total)
        self.acc.add(c)
        predicted = primary.get("dominant_type_overall") if isinstance(primary, dict) else None
        row.primary_dominant_type = predicted if isinstance(predicted, str) else None
        row.truth_dominant_type, row.dominant_correct = truth_dominant, c.dominant_correct
        row.pages_evaluated, row.pages_correct, row.split_exact = c.pages_evaluated, c.pages_correct, c.split_exact
        row.issue_codes = _issue_codes(packet)
        if packet is not None:
            self.escalation(doc_id, row, rule, packet, source)

    def escalation(self, doc_id: str, row: DocumentFigures, rule: int | None, packet: _PacketFacts,
                   source: _PrimarySource) -> None:
        outcome = "corrected" if row.ground_truth_source == "SME_CORRECTED" else "validated"
        self.escalated[0] += outcome == "corrected"
        self.escalated[1] += 1
        self.by_rule[f"rule {rule}" if rule is not None else (
            "error" if packet.error else "rule unknown")][outcome] += 1
        for code in row.issue_codes:
            self.by_code[code][outcome] += 1
        for code, action in source.jury_decisions(doc_id):
            self.by_jury[f"{code} → {action}"][outcome] += 1

    def figures(self, uri: str, n_reviewed: int, unreadable: list[UnreadableFile]) -> FeedbackFigures:
        codes = {k: _code_figures(v["validated"], v["corrected"]) for k, v in sorted(self.by_code.items())}
        audits = self.audits
        return FeedbackFigures(
            source=uri, n_reviewed=n_reviewed, n_validated=self.sources["SME_VALIDATED"],
            n_corrected=self.sources["SME_CORRECTED"], n_unclassifiable=len(self.unclassifiable),
            unclassifiable=self.unclassifiable,
            n_primary_missing=len(self.missing), primary_missing_doc_ids=self.missing,
            n_escalated_reviewed=self.escalated[1], accuracy=self.acc.figures(),
            escalation_precision=Ratio.of(self.escalated[0], self.escalated[1]),
            escalation_by_rule={k: _code_figures(v["validated"], v["corrected"]) for k, v in sorted(self.by_rule.items())},
            false_alarm_by_code=codes,
            false_alarm_by_trap={k: v for k, v in codes.items() if k.startswith(TRAP_PREFIX)},
            false_alarm_by_jury={k: _code_figures(v["validated"], v["corrected"]) for k, v in sorted(self.by_jury.items())},
            n_audited=len(audits), false_accept=_false_accept([(y, p) for _, _, y, p in audits]),
            false_accept_by_type={t: _false_accept([(y, p) for _, tt, y, p in audits if tt == t])
                                  for t in sorted({a[1] for a in audits})},
            false_accept_by_night={d: _false_accept([(y, p) for dd, _, y, p in audits if dd == d])
                                   for d in sorted({a[0] for a in audits})},
            false_accept_errors=dict(sorted(self.error_kinds.items())),
            unreadable=unreadable, per_document=self.rows,
        )


# --------------------------------------------------------------------------- labelled corpus


def evaluate_labelled_corpus(corpus_dir: pathlib.Path | str, page_chars: int | None = None) -> CorpusFigures:
    """The accuracy figures of the offline classifier on the labelled real corpus — the code
    path of ``scripts/bench_classifier.py`` (:mod:`docverify.reporting.labelled_sample` cuts each text into
    pages, ``classify_offline`` classifies it). The truth of a record is one segment of its
    ``proposed_doc_type`` over all its pages, so split accuracy = one segment of the right type,
    and boundary recall has no denominator. ``corpus_dir``: the corpora folder, its
    ``text_labeled`` folder or the ``.jsonl`` itself. Raises
    :class:`~docverify.reporting.labelled_sample.CorpusNotFound` when the sample is not there."""
    page_chars = page_chars or PAGE_CHARS
    path = sample_path(corpus_dir)
    total = _Accumulator()
    per_corpus: defaultdict[str, _Accumulator] = defaultdict(_Accumulator)
    pages = 0
    misclassified: list[MisclassifiedRecord] = []
    for rec in load_records(path):
        bundle = to_bundle(rec, page_chars)
        primary = classify_offline(bundle).model_dump(mode="json")
        expected = rec["proposed_doc_type"]
        c = compare(primary, expected, [Span(1, bundle.total_pages, expected)], bundle.total_pages)
        total.add(c)
        per_corpus[rec.get("corpus", "")].add(c)
        pages += bundle.total_pages
        if not c.dominant_correct:
            misclassified.append(MisclassifiedRecord(id=str(rec["id"]), corpus=rec.get("corpus", ""),
                                                     expected=expected, predicted=primary.get("dominant_type_overall")))
    return CorpusFigures(source=str(path), implementation=IMPLEMENTATION, documents=total.n, pages=pages,
                         page_chars=page_chars, accuracy=total.figures(),
                         per_corpus={k: v.figures() for k, v in sorted(per_corpus.items())},
                         misclassified=misclassified)
