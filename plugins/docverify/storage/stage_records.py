"""The stage records of a night read back, each stage's its own type (ADR 0056).

A stage writes its record as a plain JSON object (:meth:`docverify.stages.common.StageStats.record`
and the stage's own keys; :class:`~docverify.storage.runstore.StageRecord` is that writing contract).
Read back, a record is validated once, here, into the model of its stage: every key a reader uses is
an attribute with its default (a key an older night's record does not carry reads as its empty value),
so no reader chains ``.get(...) or {}``. The keys a reader does not use are kept (``extra="allow"``).
:func:`docverify.storage.night.load_stage_records` reads a night's records into :class:`NightStages`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from docverify.storage.runstore import DocSummary, ErrorRecord, StageRecord, Stored

#: LLM usage counts by ``USAGE_KEYS`` (and batch mode's ``requests``)
Usage = dict[str, int]


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ModelsUsed(_Record):
    """verify's ``models``: what classified and what judged (ADR 0034)."""

    classifier: str | None = None
    judge: str | None = None
    self_verifying: bool | None = None


class BatchRoundRecord(_Record):
    """A batch round's ``llm_batch`` (``docverify.stages.batch_mode``): the job, the model and the counts."""

    round: str | None = None
    job: str | None = None
    state: str | None = None
    model: str | None = None
    requests: int = 0
    succeeded: int = 0
    failed: int = 0
    missing: int = 0
    degenerate: int = 0
    online_fallback: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class StageRead(_Record):
    """The keys every stage's record carries (``StageStats.record``), and the usage keys some
    stages add: per model (ADR 0034), batch mode's rounds, the V5 second opinion, the parser."""

    stage: str
    docs: int = 0
    errors: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    llm: Usage = {}
    llm_per_document: dict[str, Usage] = {}
    price_model: str | None = None
    llm_by_model: dict[str, Usage] = {}
    llm_batch: BatchRoundRecord | None = None
    llm_batch_per_document: dict[str, Usage] = {}
    second_opinion: Usage | None = None
    models: ModelsUsed | None = None
    parser: str | None = None


class AcceptRead(StageRead):
    """accept's record: the accepted documents' ids."""

    documents: list[str] = []


class PacketsRead(StageRead):
    """write_sme_packets' record: the packets written, and those kept because already reviewed."""

    written: list[str] = []
    kept_reviewed: list[str] = []


class AuditRead(StageRead):
    """audit_sample's record (ADR 0023): the rate, the accepts, the sample with each document's
    inclusion probability, the packets written and kept, the documents weighted up."""

    rate: float | int | None = None
    accepted: int = 0
    sample: dict[str, float] = {}
    written: list[str] = []
    kept: list[str] = []
    weighted_up: list[str] = []


class VerifyRead(StageRead):
    """A verify or auto_fix_retry shard's record: its documents' summaries (kept as written), and a
    verify shard's documents (``shard``: every document it was given, verified or not)."""

    documents: Stored[dict[str, DocSummary]] = {}
    shard: list[str] = []


class LayoutRead(StageRead):
    """layout's record and a ``layout_parse`` part's (``_stages/layout/part_<n>.json``): each OCR'd
    document's OCR work and the totals (ADR 0052); the documents parsed (their sha256 and parser) and
    those that failed (their error records, kept as written)."""

    ocr: dict[str, dict[str, float]] = {}
    parsed: dict[str, list[str]] = {}
    failed: Stored[dict[str, ErrorRecord]] = {}
    ocr_pages: int = 0
    ocr_seconds: float = 0.0


_MODELS: dict[str, type[StageRead]] = {"accept": AcceptRead, "write_sme_packets": PacketsRead,
                                       "audit_sample": AuditRead, "layout": LayoutRead, "verify": VerifyRead,
                                       "auto_fix_retry": VerifyRead}


def stage_read(raw: StageRecord) -> StageRead:
    """One stored record validated into its stage's model (:class:`StageRead` for the others)."""
    return _MODELS.get(str(raw.get("stage")), StageRead).model_validate(raw)


@dataclass(frozen=True)
class NightStages:
    """A night's stage records in the order read (discover's first), and the ones the report
    reads by stage (the last record of that stage)."""

    records: list[StageRead]
    accept: AcceptRead | None
    packets: PacketsRead | None
    audit: AuditRead | None
    layout: LayoutRead | None

    @classmethod
    def of(cls, raw: Iterable[StageRecord]) -> NightStages:
        records = [stage_read(r) for r in raw]
        by_stage = {r.stage: r for r in records}

        return cls(records, _last(by_stage, "accept", AcceptRead), _last(by_stage, "write_sme_packets", PacketsRead),
                   _last(by_stage, "audit_sample", AuditRead), _last(by_stage, "layout", LayoutRead))


_R = TypeVar("_R", bound=StageRead)


def _last(by_stage: Mapping[str, StageRead], name: str, kind: type[_R]) -> _R | None:
    got = by_stage.get(name)
    return got if isinstance(got, kind) else None
