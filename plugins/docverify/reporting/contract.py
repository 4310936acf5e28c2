"""The batch report's JSON contract: the TypedDicts of ``reports/<ds>/batch_report.json`` and of
what :mod:`docverify.reporting.report` and :mod:`docverify.reporting.trend` hand on (the trend's
rows, the night's facts, what ``report.write`` returns). Apart from both modules, which import
each other's figures: types only, no code.

``batch_report.json`` is a plain JSON object (the trend, the tests and the benchmarks read it as
one); these TypedDicts are its contract. ``NotRequired``: keys present in some cases only (ADR 0056)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from docverify.storage.runstore import JuryVote

# ``batch_report.json`` is a plain JSON object (the trend, the tests and the benchmarks read it as
# one); these TypedDicts are its contract. ``NotRequired``: keys present in some cases only (ADR 0056).


class ReportError(TypedDict):
    """One document's error (no file, no hash: the report is safe to mail around)."""

    doc_id: str
    stage: str
    error: str
    message: str


class DocLLM(TypedDict):
    """A document's LLM usage over the night's stages (``docverify.stages.common.USAGE_KEYS``) and its
    estimated cost; ``batch_requests`` when batch jobs served some of its requests."""

    calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None
    batch_requests: NotRequired[int]


class PacketOutputs(TypedDict):
    """What the night wrote for a document besides its run folder (URIs; each when written)."""

    accepted: NotRequired[str]
    sme_packet: NotRequired[str]
    audit_packet: NotRequired[str]


class DocOutputs(PacketOutputs):
    """What the night wrote for a document (URIs): its run folder always."""

    run_dir: str


class DocDecision(TypedDict):
    """What ``per_document`` says of a document's decision: an error (escalated, ``reason`` "error",
    ``attempts`` 0), a verified result (rule, codes, ``v5_audit``, the jury's votes), or no result
    (``UNKNOWN`` with the error ``NOT_VERIFIED``)."""

    doc_id: str
    sha256: str
    final_decision: str
    review_id: NotRequired[str]
    rule: NotRequired[int | None]
    reason: NotRequired[str]
    error: NotRequired[str]
    attempts: NotRequired[int]
    route: NotRequired[str]
    stop_reason: NotRequired[str]
    issue_codes: NotRequired[list[str]]
    quality_score: NotRequired[float]
    fixes: NotRequired[list[str]]
    v5_audit: NotRequired[str]
    jury: NotRequired[list[JuryVote]]


class ReportDoc(DocDecision):
    """One row of ``per_document``: the decision, the outputs and the LLM usage."""

    outputs: DocOutputs
    llm: DocLLM


class StageTiming(TypedDict):
    seconds: float
    tasks: int
    docs: int


class BatchJob(TypedDict):
    """One batch job of batch mode's rounds (as its round's record names it)."""

    round: str | None
    job: str | None
    state: str | None
    requests: int


BatchKey = Literal["requests", "succeeded", "failed", "missing", "degenerate", "online_fallback", "input_tokens",
                   "output_tokens", "cached_tokens"]


class BatchSection(TypedDict):
    """Batch mode's rounds: the totals of ``BATCH_KEYS``, the jobs and the batch-price cost (no
    section in online mode). A round's record as read back is
    :class:`docverify.storage.stage_records.BatchRoundRecord`."""

    requests: int
    succeeded: int
    failed: int
    missing: int
    degenerate: int
    online_fallback: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    jobs: list[BatchJob]
    cost_usd: float | None
    cost_note: str


class ReportLLM(TypedDict):
    calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    calls_per_document: float
    max_calls_per_document: int
    cost_usd: float | None
    price_model: str | None
    price_source: str
    cost_note: str
    mode: str
    #: batch mode only
    online_cost_usd: NotRequired[float | None]
    batch: NotRequired[BatchSection]


class JurySection(TypedDict):
    documents: int
    findings_reviewed: int
    final_actions: dict[str, int]
    rules: dict[str, int]
    flag_reasons: dict[str, int]


#: The "Feedback from SME reviews" figures: ``docverify.reporting.evaluate.FeedbackFigures`` as JSON (without
#: its per-document rows), or ``{"error", "message"}`` when they could not be computed — the
#: model's own JSON, kept as that model writes it.
FeedbackJSON = dict[str, Any]


class FalseAcceptJSON(TypedDict):
    """``docverify.reporting.evaluate.FalseAcceptFigures`` as JSON."""

    rate: float | None
    ci95_low: float
    ci95_high: float
    n: int
    corrected: int
    n_effective: float


class AuditSection(TypedDict):
    rate: float | None
    accepted: int
    sample: dict[str, float]
    written: list[str]
    kept: list[str]
    #: accepted documents weighted up in the draw: the independent reading abstained on them
    weighted_up: list[str]
    #: ``FalseAcceptFigures`` as JSON, once an audit was answered
    false_accept_night: NotRequired[FalseAcceptJSON | None]
    false_accept_overall: NotRequired[FalseAcceptJSON | None]


class ModelsSection(TypedDict):
    """What classified and what judged (ADR 0034), from the verify shards' records."""

    classifier: list[str]
    judge: list[str]
    self_verifying: bool | None
    warning: str


class OCRTotals(TypedDict):
    """The local layout's OCR work in a night (ADR 0052; each document's in the layout stage record)."""

    documents: int
    pages: int
    seconds: float


class ReportSections(TypedDict):
    """The report's sections present in some nights only (the first five first in the report, as
    written; ``models`` after ``implementations``; ``trend`` last, added by ``report.write``)."""

    jury: NotRequired[JurySection]
    audit: NotRequired[AuditSection]
    second_opinion: NotRequired[dict[str, int]]
    #: the local layout's OCR totals, when it OCR'd a page (ADR 0052)
    ocr: NotRequired[OCRTotals]
    inputs: NotRequired[dict[str, list[str]]]
    #: what classified and what judged, and the warning when one model did both (ADR 0034)
    models: NotRequired[ModelsSection]
    #: ``docverify.reporting.trend.night_rows``' rows (added by ``report.write``)
    trend: NotRequired[list[TrendRow]]


class Report(ReportSections):
    """``reports/<ds>/batch_report.json``: :class:`ReportSections` and the keys every report has."""

    ds: str
    run_id: str
    documents: int
    routes_attempt_0: dict[str, int]
    final_routes: dict[str, int]
    rules: dict[str, int]
    issues_by_code_attempt_0: dict[str, int]
    issues_by_code_final: dict[str, int]
    errors: list[ReportError]
    llm: ReportLLM
    implementations: list[str]
    stage_timings: dict[str, StageTiming]
    per_document: list[ReportDoc]
    feedback: FeedbackJSON


class TrendRow(TypedDict):
    """One night of the trend (``docverify.reporting.trend.COLUMNS``, in that order)."""

    night: str | None
    documents: int
    accepted: int
    retried_accepted: int
    escalated: int
    unknown: int
    escalation_rate: float | None
    audited: int
    false_accept_rate: float | None
    false_accept_ci95_low: float | None
    false_accept_ci95_high: float | None
    false_accept_n: int
    cost_usd: float | None
    task_seconds: float


class NightModels(TypedDict):
    """:class:`ModelsSection`'s ids in the night facet (None without the section)."""

    classifier: list[str] | None
    judge: list[str] | None
    self_verifying: bool | None


class NightLLM(TypedDict):
    """:class:`ReportLLM`'s figures in the night facet (None when the report has none)."""

    mode: str | None
    calls: int | None
    cache_hits: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    price_model: str | None


class NightFacts(TypedDict):
    """``report.night_facts``: the night in counts, codes and implementation ids."""

    night: str
    documents: int
    final_routes: dict[str, int]
    rules: dict[str, int]
    issue_codes: dict[str, int]
    error_codes: dict[str, int]
    implementations: list[str]
    models: NightModels
    llm: NightLLM


class ReportOutputs(TypedDict):
    """A written report's summary line, URIs, routes and error count, and the trend's URIs: what both
    ``report.write``'s result and the ``batch_report`` task's XCom carry."""

    summary: str
    json: str
    markdown: str
    html: str
    final_routes: dict[str, int]
    errors: int
    trend: dict[str, str]


class ReportWritten(ReportOutputs):
    """What ``report.write`` returns: :class:`ReportOutputs`, the night's false-accept figures and
    ``report.night_facts``."""

    false_accept_night: FalseAcceptJSON | None
    night: NightFacts
