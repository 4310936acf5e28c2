"""Pydantic models of the pipeline. Field names follow the specification and its design document (shared/spec and
shared/DESIGN.md, outside this repository).

The classification models are deliberately lenient about *values* (a confidence of 1.7 or a
page number of 0 still parses): reporting such values is V1's job, and V1 can only report what
it can read. Only the *shape* (types, enum members) is enforced by pydantic; a classification
whose shape is wrong becomes a V1 ``SCHEMA_INVALID`` BLOCKER, never an exception in the batch.
The shape is checked strictly (ADR 0020): numbers are JSON numbers (``true`` or ``"0.9"`` is
no confidence), page numbers and counts whole numbers (``3`` or ``3.0``, which JSON Schema also
calls an integer; not ``2.5``, ``"3"`` or ``true``), strings strings, and enum strings exact
members ("pathology report" is not "Pathology Report").
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    Strict,
    StringConstraints,
    with_config,
)
from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12


class DocType(StrEnum):
    CLINICAL_NOTE = "Clinical Note"
    PATHOLOGY_REPORT = "Pathology Report"
    GENOMIC_REPORT = "Genomic Report"
    RADIOLOGY_REPORT = "Radiology Report"
    OTHER = "Other"


DOC_TYPES: tuple[str, ...] = tuple(t.value for t in DocType)
REPORT_TYPES: tuple[str, ...] = (
    DocType.PATHOLOGY_REPORT.value,
    DocType.GENOMIC_REPORT.value,
    DocType.RADIOLOGY_REPORT.value,
)


class PresenceLevel(StrEnum):
    PRIMARY = "PRIMARY"
    EMBEDDED_RAW = "EMBEDDED_RAW"
    MENTION_ONLY = "MENTION_ONLY"
    NO_EVIDENCE = "NO_EVIDENCE"


#: Strength of a presence level (the strongest wins when levels are combined).
PRESENCE_RANK = {"PRIMARY": 3, "EMBEDDED_RAW": 2, "MENTION_ONLY": 1, "NO_EVIDENCE": 0}


def strongest_levels(levels: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each type's strongest presence level among ``(doc_type, presence_level)`` pairs (levels of
    :data:`PRESENCE_RANK`)."""
    out: dict[str, str] = {}
    for doc_type, level in levels:
        if PRESENCE_RANK[level] >= PRESENCE_RANK[out.get(doc_type, "NO_EVIDENCE")]:
            out[doc_type] = level
    return out


class Severity(StrEnum):
    BLOCKER = "BLOCKER"
    MAJOR = "MAJOR"
    MINOR = "MINOR"


SEVERITY_ORDER = {Severity.BLOCKER: 0, Severity.MAJOR: 1, Severity.MINOR: 2}


class Decision(StrEnum):
    AUTO_ACCEPT = "AUTO_ACCEPT"
    AUTO_RETRY = "AUTO_RETRY"
    ESCALATE_TO_SME = "ESCALATE_TO_SME"


class _Model(BaseModel):
    # a validation error names the field, never its value: values may be page text (PHI)
    model_config = ConfigDict(use_enum_values=True, extra="forbid", hide_input_in_errors=True)


# --------------------------------------------------------------------------- DocumentBundle


class LayoutMetadata(_Model):
    block_types: list[str] = Field(default_factory=list)
    has_tables: bool = False


class Page(_Model):
    page_num: int = Field(ge=1)
    text: str
    paragraphs: list[str] = Field(default_factory=list)
    layout_metadata: LayoutMetadata = Field(default_factory=LayoutMetadata)
    #: set only on a page whose text came from OCR of its image (no text layer): the OCR
    #: engine's confidence in [0, 1] (0 = OCR read nothing); None = text from the PDF itself
    ocr_confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class DocumentBundle(_Model):
    """One per PDF: the single source of truth for page text."""

    doc_id: str
    file_path: str
    sha256: str = ""
    total_pages: int = Field(ge=0)
    processing_timestamp: str = ""
    parser: str = ""
    pages: list[Page] = Field(default_factory=list)

    def page_text(self, page_num: int) -> str | None:
        for p in self.pages:
            if p.page_num == page_num:
                return p.text
        return None

    def full_text(self) -> str:
        return "\n\n".join(p.text for p in self.pages)


# --------------------------------------------------------------------------- Classification


def _whole_float_to_int(value: JsonValue) -> JsonValue:
    # JSON Schema's "integer" is any number without a fraction: 3.0 is the page 3 (bool is no float)
    return int(value) if type(value) is float and value.is_integer() else value


#: The classification's scalar types (ADR 0020): strict per field, so that enum *strings* still
#: parse from a dict (a model-wide strict mode would demand enum instances in Python mode).
#: A number: int or float, never bool or a numeric string (NaN/inf parse: V1 reports them).
StrictNumber = Annotated[float, Strict()]
#: A page number or count: an int, or a float without fraction (3.0 → 3); never 2.5, "3" or true.
WholeNumber = Annotated[int, BeforeValidator(_whole_float_to_int), Strict()]
#: A string: never a number or bytes.
StrictText = Annotated[str, Strict()]


class Evidence(_Model):
    snippet: StrictText
    page: WholeNumber
    anchors_found: list[StrictText] = Field(default_factory=list)


class TypeClassification(_Model):
    doc_type: DocType
    presence_level: PresenceLevel
    confidence: StrictNumber
    segment_share: StrictNumber
    top_evidence: list[Evidence] = Field(default_factory=list)


class Segment(_Model):
    segment_index: WholeNumber
    page_start: WholeNumber
    page_end: WholeNumber
    segment_page_count: WholeNumber
    dominant_type: DocType
    reasoning: StrictText = ""
    classifications: list[TypeClassification]


class MixtureEntry(_Model):
    doc_type: DocType
    presence_level: PresenceLevel
    overall_share: StrictNumber


class SelfEvaluation(_Model):
    confidence: StrictNumber = 0.0
    notes: StrictText = ""


class PageDecision(_Model):
    """One page as the offline classifier read it (ADR 0035): its score per type, how much it reads as the
    continuation of the page before it, the type it was given and whether a segment starts there — why a
    boundary was placed, for an SME and the benchmarks. Numbers and lexicon labels only, never page text."""

    page: WholeNumber = Field(ge=1)
    type_scores: dict[DocType, StrictNumber] = Field(
        description="The page's lexicon score per document type (length-normalised cue weights)."
    )
    continuity: StrictNumber | None = Field(
        default=None,
        description="Share of distinct words the page has in common with the page before it (Jaccard, 0-1); "
        "None on the first page or when either page has no words.",
    )
    opens_with_header: bool = Field(default=False, description="A section header within the page's first lines.")
    label: DocType = Field(description="The dominant type of the segment the page was put in.")
    starts_segment: bool = Field(description="A segment starts on this page.")
    reason: StrictText = Field(default="", description="Why the page starts or continues its segment.")


class ClassificationOutput(_Model):
    """The classifier's claims about one document."""

    doc_id: StrictText
    dominant_type_overall: DocType
    number_of_segments: WholeNumber
    segments: list[Segment]
    document_mixture: list[MixtureEntry]
    vendor_signals: list[StrictText] = Field(default_factory=list)
    self_evaluation: SelfEvaluation = Field(default_factory=SelfEvaluation)
    classifier: StrictText = Field(
        default="external",
        description="Which implementation produced this classification "
        "(e.g. 'offline-lexicon-v1', 'gemini:<model>', 'external').",
    )
    page_decisions: list[PageDecision] | None = Field(
        default=None,
        description="Optional: the classifier's per-page decision (scores, continuity, why a boundary was placed); "
        "the offline classifier fills it, an LLM classifier leaves it out. No verifier reads it.",
    )


# --------------------------------------------------------------------------- Verification


#: A verifier's id (``V1``, ``V2``…): a constrained string. Which ids exist is the verifier registry's
#: business (:mod:`docverify.verify.registry`, a layer above): the pipeline refuses an issue of an agent
#: outside its registry when it assembles an attempt (ADR 0039), the models only check the form.
AgentId = Annotated[str, StringConstraints(pattern=r"^V[1-9][0-9]*$")]


class Issue(_Model):
    issue_id: str
    agent: AgentId
    severity: Severity
    message: str
    location: str = ""
    auto_fixable: bool = False
    code: str
    ig_code: str = ""
    suggested_fix: str = ""
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="Machine-readable facts behind the message (e.g. the page a snippet "
        "was really found on). Never used by the arbiter.",
    )


class VerifierRun(_Model):
    """What one verifier phase did: which implementation ran, or why it was skipped."""

    agent: AgentId
    #: "guard": a deterministic check beside a judgment (V2's label-versus-text guard, docverify.domain.policy)
    phase: Literal["rules", "judgment", "jury", "guard"]
    implementation: str
    skipped: bool = False
    skip_reason: str = ""
    issue_count: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    votes: list[dict[str, Any]] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="phase 'jury' only: per finding its code, the three votes (action, reason code) and the "
        "CR_V2 result (final action, flag reason, rule). Codes only, no text.",
    )


class VerificationReport(_Model):
    """Issues of V1–V4 for one attempt on one document."""

    doc_id: str
    attempt: int
    fingerprint: str
    issues: list[Issue]
    runs: list[VerifierRun] = Field(default_factory=list)
    quality_score: float = Field(
        description="V4 score: 1.0 - 0.30/BLOCKER - 0.15/MAJOR - 0.05/MINOR over V4's issues, "
        "floored at 0."
    )


class ArbiterDecision(_Model):
    decision: Decision
    rule: int = Field(ge=1, le=8)
    reason: str
    issues_analyzed: int
    blocker_count: int
    major_count: int
    minor_count: int
    fixable_count: int
    major_fixable: int = 0
    major_non_fixable: int = 0
    citations: dict[str, object] = Field(
        default_factory=dict,
        description="What the decision rests on: the rule, the issue ids and codes, the evidence pages.",
    )
    explanation_sme: str = Field(default="", description="For the SME (in the packet); codes and titles, no page text.")
    explanation_audit: str = Field(default="", description="One audit line (report, lineage log); no page text.")
    second_opinion: dict[str, Any] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Set when the V5 second opinion ran: the table's decision, the LLM's proposal, the override "
        "that decided.",
    )


class FixApplied(_Model):
    attempt: int = Field(description="The attempt whose issues this fix answered.")
    fixer: str
    issue_ids: list[str]
    codes: list[str]
    description: str


class AttemptRecord(_Model):
    attempt: int
    issues: list[Issue]
    decision: ArbiterDecision
    fingerprint: str
    quality_score: float
    runs: list[VerifierRun] = Field(default_factory=list)
    blocker_repair: bool = Field(
        default=False,
        description="Every BLOCKER of this attempt was auto-fixable (with a fixer) and no earlier attempt "
        "was such a repair: the fixes ran once before V5's rule 1 applied, and the next attempt was decided "
        "instead (README: 'Auto-fixable BLOCKERs').")


class VerificationResult(_Model):
    """The outcome of the retry loop for one document (what ``verify`` prints)."""

    doc_id: str
    final_decision: Literal["AUTO_ACCEPT", "ESCALATE_TO_SME"]
    final_rule: int = Field(description="The V5 rule of the last attempt's decision.")
    stop_reason: Literal["arbiter", "max_retries", "cycle", "schema"] = Field(
        description="arbiter: V5 decided; max_retries: still AUTO_RETRY after the last allowed "
        "attempt; cycle: a fix left the fingerprint unchanged or repeated an earlier one; "
        "schema: the classification could not be read, so nothing could be fixed."
    )
    escalation_reason: str = ""
    attempts: list[AttemptRecord]
    fixes_applied: list[FixApplied] = Field(default_factory=list)
    final_classification: dict[str, Any] = Field(
        description="The classification after the fixes (raw JSON when it did not parse)."
    )
    original_classification: dict[str, Any] | None = Field(
        default=None, description="The classifier's output as verified on attempt 0, before any fix."
    )


# --------------------------------------------------------------------------- SME and ground truth


@with_config(ConfigDict(extra="allow"))
class StoredContext(TypedDict):
    """The page text around an issue as a packet keeps it (:func:`docverify.sme.context.stored_context`):
    the page (None: ``why`` there is none), the paragraphs before, the match, the paragraphs after, whether
    and how the issue's text was found."""

    page: int | None
    before: list[str]
    match: str
    after: list[str]
    found: bool
    #: "exact" | "fuzzy" | "not_found" | "no_text" | "no_bundle"
    how: NotRequired[str]
    score: NotRequired[float]
    why: NotRequired[str]
    paragraph_index: NotRequired[int | None]


class SMEIssueSummary(_Model):
    issue_id: str
    severity: Severity
    agent: str
    code: str
    message: str
    location: str = ""
    suggested_fix: str = ""
    formatted: str = ""
    details: dict[str, Any] = Field(
        default_factory=dict, description="The issue's machine-readable facts (as in Issue.details)."
    )
    context: StoredContext | None = Field(
        default=None,
        description="The page text around the issue's location (docverify.sme.context.get_issue_context "
        "without the page image): page, before (2 paragraphs), match, after (3 paragraphs), found, how.",
    )


class DominantAgreement(TypedDict):
    primary: str | None
    production: str | None
    agree: bool


#: a segment as the comparison sees it: (page_start, page_end, dominant_type) as stored, None when unreadable
SegmentShape = tuple[int | float | None, int | float | None, str | None]


class SegmentsAgreement(TypedDict):
    primary: list[SegmentShape]
    production: list[SegmentShape]
    agree: bool


class ProductionComparison(TypedDict):
    """``SMEPacket.production_comparison`` (:func:`docverify.sme.packets.compare_production`)."""

    dominant_type: DominantAgreement
    segments: SegmentsAgreement
    presence_differences: dict[str, dict[str, str]]
    production_classifier: str | None
    agrees: bool


@with_config(ConfigDict(extra="allow"))
class PacketError(TypedDict):
    """``SMEPacket.error``: the error record of a document that could not be parsed or classified
    (:class:`docverify.storage.runstore.ErrorRecord`'s JSON) with what is known of its file
    (:func:`docverify.sme.packets.with_file_facts`)."""

    doc_id: NotRequired[str]
    stage: NotRequired[str]
    error: str
    message: NotRequired[str]
    file: NotRequired[str]
    sha256: NotRequired[str]
    parser: NotRequired[str]
    retryable: NotRequired[bool]
    file_name: NotRequired[str]
    size_bytes: NotRequired[int]


@with_config(ConfigDict(extra="allow"))
class HistoryIssue(TypedDict):
    issue_id: str
    severity: str
    agent: str
    code: str
    message: str
    location: str
    auto_fixable: bool


@with_config(ConfigDict(extra="allow"))
class HistoryFix(TypedDict):
    fixer: str
    codes: list[str]
    issue_ids: list[str]
    description: str


@with_config(ConfigDict(extra="allow"))
class HistoryAttempt(TypedDict):
    """One entry of ``SMEPacket.attempt_history`` (:func:`docverify.sme.packets.attempt_history`)."""

    attempt: int
    decision: str
    rule: int
    reason: str
    blocker_repair: bool
    issues: list[HistoryIssue]
    skipped_judgments: list[str]
    fixes_after: list[HistoryFix]


class SMEPacket(_Model):
    doc_id: str
    review_id: str = Field(
        default="", description="The review this packet is: '<night>_<doc_id>_<first 10 hex of the PDF's sha256>' "
        "(its file is sme_packets/sme_packet_<review_id>.json); one document of one night with its content. "
        "Empty in packets written before per-night keys: their key is the doc_id.")
    pdf_filename: str
    pdf_path: str
    total_pages: int
    bundle_path: str
    v5_decision: Literal["ESCALATE_TO_SME", "AUTO_ACCEPT"] = "ESCALATE_TO_SME"
    review_kind: Literal["escalation", "audit"] = Field(
        default="escalation", exclude_if=lambda v: v == "escalation",
        description="'audit': an AUTO_ACCEPT document drawn for the nightly audit (key '<review_id>_audit', "
        "v5_decision AUTO_ACCEPT; the accepted record stays accepted); absent: an escalation.")
    audit_inclusion_probability: float | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Audit packets only: the probability this document had of being drawn (the weight of its "
        "answer in the false-accept estimate is its inverse).")
    v5_rule: int | None = Field(description="The V5 rule of the last attempt; None when the document could not "
                                "be processed (then escalation_reason is 'error').")
    v5_reason: str
    v5_explanation: str = Field(default="", exclude_if=lambda v: not v,
                                description="The V5 decision's explanation for the SME (issue ids, codes, pages).")
    v5_citations: dict[str, object] = Field(default_factory=dict, exclude_if=lambda v: not v,
                                         description="The V5 decision's citations: rule, issue ids and codes, pages.")
    jury_votes: list[dict[str, object]] = Field(
        default_factory=list, exclude_if=lambda v: not v,
        description="Only when the CR_V2 jury ran: every vote of every attempt (finding code, A/B/C votes and "
        "reason codes, decision, flag reason, rule) — also the findings it dropped.")
    escalation_reason: Literal["arbiter", "max_retries", "cycle", "schema", "error", "audit"] = Field(
        default="arbiter", description="Why the document is here: V5 escalated (arbiter), the retry ran out "
        "(max_retries) or repeated itself (cycle), the classification could not be read (schema), or the PDF "
        "could not be parsed/classified (error: no verification ran, no V5 rule applies).")
    original_classification: dict[str, JsonValue] | None = Field(
        default=None, description="What the classifier said, before any automatic fix (attempt 0).")
    attempt_history: list[HistoryAttempt] = Field(
        default_factory=list, description="Every attempt: its decision (rule, reason, blocker_repair), its issues "
        "(id, severity, agent, code, message, location) and the fixes applied after it (fixer, codes, description).")
    total_issues: int
    issues_summary: list[SMEIssueSummary]
    primary_classification: dict[str, JsonValue] | None
    production_classification: dict[str, JsonValue] | None = None
    production_differs: bool | None = None
    error: PacketError | None = Field(
        default=None, description="Set when the document could not be parsed or classified."
    )
    production_comparison: ProductionComparison | None = Field(
        default=None,
        description="Set when a production classification was supplied: whether the dominant type, "
        "the segments (page ranges and types) and each type's strongest presence level agree.",
    )
    review_status: Literal["pending", "reviewed"] = "pending"
    created_at: str
    run_id: str = ""
    reviewed_at: str | None = None
    reviewer: str | None = None
    ground_truth_path: str | None = Field(
        default=None, description="URI of the newest ground-truth record written for this packet."
    )
    ground_truth_version: int | None = None


#: Why an SME could not classify a document ("Cannot classify"): the form's choices.
UnclassifiableReason = Literal["unreadable", "wrong file", "needs a re-scan", "other"]


class GroundTruthRecord(_Model):
    doc_id: str
    review_id: str = Field(
        default="", description="The reviewed packet's key (see SMEPacket.review_id); the file is "
        "ground_truth/gt_<review_id>[.v<N>].json. Empty for records keyed by doc_id alone (older layout).")
    ground_truth_source: Literal["SME_VALIDATED", "SME_CORRECTED", "SME_UNCLASSIFIABLE"] = Field(
        description="SME_VALIDATED: the primary classification as is; SME_CORRECTED: the SME's correction; "
        "SME_UNCLASSIFIABLE: the SME could not classify the document (unclassifiable_reason; no classification, "
        "counted apart from every classification figure).")
    review_kind: Literal["escalation", "audit"] = Field(
        default="escalation", exclude_if=lambda v: v == "escalation",
        description="'audit': the answer to an audit of an accepted document (an SME_CORRECTED audit record "
        "supersedes accepted/<night>/<doc_id>.json); absent: an escalation.")
    ground_truth_classification: dict[str, JsonValue] | None = Field(
        description="The SME's classification (the primary as is, or corrected); None for SME_UNCLASSIFIABLE.")
    unclassifiable_reason: UnclassifiableReason | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="SME_UNCLASSIFIABLE only: why the SME could not classify the document (the notes say more; "
        "required with 'other').")
    corrected_dominant_type: DocType | None = None
    correction_notes: str = ""
    reviewer: str
    reviewed_at: str
    version: int = 1
    packet_path: str = ""
    corrected_segments: list[dict[str, Any]] | None = Field(
        default=None, description="The SME's segments as given: [{page_start, page_end, dominant_type}]."
    )
    corrected_presence: dict[str, str] | None = Field(
        default=None, description="The SME's presence levels for the whole document as given: {doc type: level}.")
    corrected_mixture: dict[str, str] | None = Field(
        default=None, description="The SME's mixture presence levels as given: {doc type: level}.")
    corrections_applied: list[str] = Field(
        default_factory=list,
        description="What the correction changed in the copy of the primary classification, one line each "
        "(empty for SME_VALIDATED).",
    )
    channel: str = Field(
        default="", description="Where the answer came from: 'airflow-hitl:<dag>/<run>/<task>[<map>]', 'notebook', …"
    )


EXPORTED_MODELS: tuple[type[BaseModel], ...] = (
    DocumentBundle,
    ClassificationOutput,
    Evidence,
    Issue,
    VerificationReport,
    ArbiterDecision,
    VerificationResult,
    SMEPacket,
    GroundTruthRecord,
)
