"""The verification policy: the switches of what the pipeline does beyond the specification
(ADR 0022), in one small frozen object passed explicitly (``policy=…``) through
:func:`docverify.pipeline.document.verify_document` → :func:`docverify.pipeline.retry.run_loop` /
:func:`docverify.pipeline.document.verify_attempt`, from the stages (which get it from the Airflow task,
built from ``docverify_airflow.config.Settings``), the batch-mode collect pass and the CLI.

The defaults below are the single source: ``config.Settings`` takes its Variables' defaults from
them, and :data:`DEFAULT_POLICY` is what a caller that passes no policy gets.

* ``blocker_repair`` (Variable ``docverify_blocker_repair``, off): repair an attempt whose
  BLOCKERs are *all* auto-fixable once before V5's rule 1 (README "Auto-fixable BLOCKERs"). Off =
  the specification's routing: any BLOCKER escalates at rule 1.
* ``patient_identity`` (``docverify_check_patient_identity``, on): V2's rule phase reports
  ``PATIENT_IDENTITY_CONFLICT`` when one segment's pages carry two different MRNs / patient ids or
  two different (name, date of birth) pairs (:mod:`docverify.verify.identity`).
* ``min_primary_confidence`` (``docverify_min_primary_confidence``, 0.2; 0 = off): V2's rule phase
  reports ``LOW_CONFIDENCE_PRIMARY`` for a PRIMARY type whose confidence is below it. 0.2: the
  offline classifier's PRIMARY labels on the verifier benchmark's documents are all ≥ 0.43 (0 false
  alarms on 333 of the test part); a PRIMARY at 0.05–0.15 is caught.
* ``admin_trap_per_segment`` (``docverify_admin_trap_per_segment``, on): V3's trap 2 reads each
  segment's own text against that segment's levels, so a PDF holding a prior-authorization form
  (its own "Other" segment) and the report it asks for is not a trap. This is the project's reading
  of the specification for segmented documents (ADR 0037: "the document" of trap 2 is the segment).
  Off = the strict whole-document reading, opt-in: keywords anywhere in the document and a report
  type anywhere not NO_EVIDENCE.
* ``admin_trap_counts_mentions`` (``docverify_admin_trap_counts_mentions``, off): V3's trap 2 counts a
  report type at PRIMARY or EMBEDDED_RAW only, so an administrative form rightly classified Other whose
  classification records that it *mentions* a report type (a release form listing "pathology,
  radiology" among the records to release) at MENTION_ONLY — the level the specification itself
  recommends for a type a document only mentions — is not a trap (ADR 0046). On = the letter of the
  specification, opt-in: any level but NO_EVIDENCE triggers it.
* ``admin_trap_spares_read_reports`` (``docverify_admin_trap_spares_read_reports``, off; opt-in, ADR 0062):
  V3's trap 2 spares a segment labelled a report type PRIMARY that V2's independent reading (the statistical
  reader that never sees the classification) reads as that very type with at least
  :data:`SPARED_READING` probability: a pathology report whose header says "requisition" is read as a
  pathology report, an administrative form is not. Off = the specification's letter (any administrative
  keyword and a report type at PRIMARY escalates). Measured out of fold on the tuning part: right
  classifications escalated 83 -> 61 of 2,272, the classifier's errors stopped unchanged (86 of 108).
* ``label_text_guard`` (``docverify_label_text_guard``, on): with a judge whose V2 judgment is
  not the offline lexical one (the LLM judge), V2's outcome also carries the offline
  label-versus-text check (``LABEL_TEXT_MISMATCH``, run ``phase="guard"``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

#: The defaults (the benchmark owner sets them from measured false alarms; README "Configuration").
BLOCKER_REPAIR = False
PATIENT_IDENTITY = True
MIN_PRIMARY_CONFIDENCE = 0.2
LABEL_TEXT_GUARD = True
ADMIN_TRAP_PER_SEGMENT = True
ADMIN_TRAP_COUNTS_MENTIONS = False
ADMIN_TRAP_SPARES_READ_REPORTS = False
#: the reading's probability of the segment's own report type at which trap 2 spares it (when the switch is on)
SPARED_READING = 0.9


class VerifyPolicy(BaseModel):
    """What the verification does beyond the specification; frozen, compared by value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    blocker_repair: bool = Field(
        BLOCKER_REPAIR, description="Repair an attempt whose BLOCKERs are all auto-fixable once before V5's rule 1 "
        "(off: any BLOCKER escalates at rule 1, as the specification says).")
    patient_identity: bool = Field(
        PATIENT_IDENTITY, description="V2 rule phase: PATIENT_IDENTITY_CONFLICT (two patient identifiers in one "
        "segment).")
    min_primary_confidence: float = Field(
        MIN_PRIMARY_CONFIDENCE, ge=0.0, le=1.0, description="V2 rule phase: LOW_CONFIDENCE_PRIMARY for a PRIMARY "
        "type whose confidence is below this (0 = off).")
    admin_trap_per_segment: bool = Field(
        ADMIN_TRAP_PER_SEGMENT, description="V3 trap 2 reads each segment's own text against that segment's levels "
        "(the project's reading of the specification for segmented documents, ADR 0037; off: the strict "
        "whole-document reading, keywords anywhere against every segment).")
    admin_trap_counts_mentions: bool = Field(
        ADMIN_TRAP_COUNTS_MENTIONS, description="V3 trap 2 also counts a report type at MENTION_ONLY (the letter of "
        "the specification, any level but NO_EVIDENCE; off, the default: PRIMARY or EMBEDDED_RAW only, so a form "
        "classified Other that mentions a report type is no trap, ADR 0046).")
    admin_trap_spares_read_reports: bool = Field(
        ADMIN_TRAP_SPARES_READ_REPORTS, description="V3 trap 2 spares a segment labelled a report type PRIMARY "
        "that V2's independent reading reads as that type with probability >= 0.9 (opt-in, ADR 0062; off, the "
        "default: the specification's letter).")
    label_text_guard: bool = Field(
        LABEL_TEXT_GUARD, description="Beside a non-offline V2 judgment, the offline label-versus-text check "
        "(LABEL_TEXT_MISMATCH) as a 'guard' phase.")

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, bool | float | None] | None = None) -> VerifyPolicy:
        """The one constructor from settings, CLI flags or a benchmark's options: the defaults with
        ``overrides`` (field name → value) applied; a ``None`` value keeps the field's default. An
        unknown field or a bad value fails naming it (pydantic ``ValidationError``)."""
        return cls.model_validate({k: v for k, v in (overrides or {}).items() if v is not None})


DEFAULT_POLICY = VerifyPolicy()
