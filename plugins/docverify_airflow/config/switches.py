"""Every Airflow Variable the code reads, declared once (issue 41 item 2, ADR 0055).

A switch is one field of :class:`Switches`: its annotation is its type, and :func:`switch` (or
:func:`policy_switch`) names its Variable, its documented default, its doc line and, for the
verification policy, the :class:`~docverify.domain.policy.VerifyPolicy` field it sets. Everything else
derives from that declaration: :class:`~docverify_airflow.config.settings.Settings` (which adds the
reading and the derived values), the Variables read and their defaults (:meth:`Switches.variables`),
the policy mapping (:func:`policy_fields`), the refusal of a bad value (:func:`refusal`) and
``docs/configuration.md`` (``scripts/gen_config_docs.py``). Adding a switch is one field here.

**Typed.** Each field's type validates the raw Variable string (pydantic: ``Literal`` choices,
bounded numbers, one :data:`OnOff` vocabulary, the :data:`StorageRoot`); an empty value counts as
missing."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, model_validator
from pydantic.fields import FieldInfo

from docverify.domain import policy as P

DEFAULT_STORAGE_ROOT = "data"  # a relative path is taken relative to the repository
DEFAULT_LLM_CONN = "docverify_llm"
DEFAULT_SMTP_CONN = "docverify_smtp"

SWITCH_ON = ("on", "true", "1", "yes")
SWITCH_OFF = ("off", "false", "0", "no")
#: name fragments of a secret Variable (after Airflow's default sensitive names): its value is never shown
SECRET_NAME_PARTS = ("password", "passwd", "passphrase", "secret", "token", "api_key", "apikey",
                     "private_key", "authorization", "keyfile", "service_account")


# --- the Variables' types: pydantic validates each raw Variable string; Settings.parse turns a refusal
# into one ValueError naming the Variable, its value and what it accepts (the task fails at once) ---

@dataclasses.dataclass(frozen=True)
class Accepts:
    """A type's words in a refusal: ``Variable x='y' is not {what}: use {values}{hint}`` (a choice's
    values are its Literal's; a number's come from its bounds)."""

    what: str
    values: str = ""
    hint: str = ""


def _word(raw: str | bool) -> str | bool:
    return raw.strip().lower() if isinstance(raw, str) else raw


def _switch_word(raw: str | bool) -> bool:
    """The one vocabulary of every on/off Variable: on/true/1/yes, off/false/0/no (any case)."""
    if isinstance(raw, bool):
        return raw
    word = _word(raw)
    if word in SWITCH_ON or word in SWITCH_OFF:
        return word in SWITCH_ON
    raise ValueError("not a switch")


def _storage_root(raw: str) -> str:
    scheme, sep, rest = raw.partition("://")
    if sep and not (scheme == "file" or (scheme == "gs" and rest.split("/")[0])):
        raise ValueError("not a storage root")
    return raw


OnOff = Annotated[bool, BeforeValidator(_switch_word),
                  Accepts("a switch", f"on or off (also {'/'.join(SWITCH_ON[1:])} or {'/'.join(SWITCH_OFF[1:])})")]
StorageRoot = Annotated[str, AfterValidator(_storage_root),
                        Accepts("a storage root", "gs://bucket/prefix, file:///absolute/path or a path (a relative "
                                              "one is relative to the repository)")]
Layout = Annotated[Literal["local", "document_ai"], BeforeValidator(_word), Accepts("a layout")]
JudgeName = Annotated[Literal["offline", "llm"], BeforeValidator(_word), Accepts(
    "a judge", hint="; set it in airflow_settings.yaml and re-import the settings")]
BlindReading = Annotated[Literal["instead", "before", "off"], BeforeValidator(_word), Accepts("a blind-reading mode")]
LLMMode = Annotated[Literal["online", "batch"], BeforeValidator(_word), Accepts("an LLM mode")]
JuryMode = Annotated[Literal["off", "cr_v2", "cr_v1"], BeforeValidator(_word), Accepts("a jury mode")]
Seconds = Annotated[float, Field(ge=0)]
AtLeastASecond = Annotated[float, Field(ge=1)]
PerMinute = Annotated[float, Field(ge=0)]  # 0 = unlimited
Count = Annotated[int, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(ge=0, le=1)]


def _choices(t: Any) -> tuple[str, ...]:
    """A choice type's accepted values (its Literal's)."""
    return typing.get_args(typing.get_args(t)[0])


LAYOUTS, JUDGES, LLM_MODES, JURY_MODES = (_choices(t) for t in (Layout, JudgeName, LLMMode, JuryMode))


# --- the declaration of one switch ---

def switch(variable: str, default: str, doc: str, *, policy: str | None = None) -> Any:
    """A field of :class:`Switches`: the Variable ``variable`` (the field's alias), its documented
    ``default`` (the raw text used when the Variable is missing or empty, validated like a value), its
    doc line (docs/configuration.md) and, for a policy switch, the VerifyPolicy field it sets."""
    extra: dict[str, JsonValue] = {"variable": variable, "variable_default": default}
    if policy:
        extra["policy"] = policy
    return Field(default, validate_default=True, validation_alias=variable, description=doc,
                 json_schema_extra=extra)


def policy_switch(variable: str, policy: str) -> Any:
    """A switch of the verification policy: its default and doc line are those of the
    :class:`~docverify.domain.policy.VerifyPolicy` field ``policy`` (docverify.domain.policy's
    defaults are the single source)."""
    f = P.VerifyPolicy.model_fields[policy]
    default = ("on" if f.default else "off") if isinstance(f.default, bool) else str(f.default)
    return switch(variable, default, f.description or "", policy=policy)


def _extra(f: FieldInfo) -> dict[str, str]:
    """A switch's Variable, its default (and its policy field), as :func:`switch` recorded them."""
    return cast("dict[str, str]", f.json_schema_extra)


class Switches(BaseModel):
    """The declared switches: one field per Airflow Variable (its type the annotation; its Variable,
    default, doc line and policy field given by :func:`switch` / :func:`policy_switch`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=True,
                              ignored_types=(functools.cached_property,))

    storage_root: StorageRoot = switch("docverify_storage_root", DEFAULT_STORAGE_ROOT, doc=(
        "Where every artifact of the night is kept: gs://bucket/prefix (on the connection of "
        "docverify_storage_conn_id), file:///abs/path or a path (a relative one is relative to the repository)."))
    storage_conn_id: str = switch("docverify_storage_conn_id", "google_cloud_default", doc=(
        "The Airflow connection a gs:// storage root is read and written with."))
    layout: Layout = switch("docverify_layout", "local", doc=(
        "How PDFs become page text: local (pypdf, OCR per docverify_ocr) or document_ai (the Layout Parser "
        "processor of docverify_docai_processor)."))
    ocr: OnOff = switch("docverify_ocr", "on", doc="The local layout OCRs pages without a text layer (on/off).")
    parse_page_timeout_s: AtLeastASecond = switch("docverify_parse_page_timeout_s", "60", doc=(
        "Local layout: seconds one page of a PDF may take in the parser (a scanned page's OCR included), counted "
        "from the previous page; a slower page stops the file (TIMEOUT naming the page). Each finished page "
        "restarts it, so a long scan is read (ADR 0047; the DAG param parse_timeout_s is the time to open a PDF)."))
    parse_file_ceiling_s: AtLeastASecond = switch("docverify_parse_file_ceiling_s", "1800", doc=(
        "Local layout: seconds one PDF may take in the parser at most, however its pages advance (never less "
        "than the DAG param parse_timeout_s; ADR 0047)."))
    parse_split_scan_pages: Count = switch("docverify_parse_split_scan_pages", "8", doc=(
        "Local layout with OCR: a PDF with at least this many image-only pages among its first twice as many is "
        "read in page ranges, one per parse worker, and its pages merged in order (each range with the per-page "
        "budget); 0 = every PDF in one worker (ADR 0052)."))
    docai_processor: str = switch("docverify_docai_processor", "", doc=(
        "The Document AI Layout Parser processor: projects/<project>/locations/<us|eu>/processors/<id>[/"
        "processorVersions/<v>] (layout document_ai only)."))
    docai_conn_id: str = switch("docverify_docai_conn_id", "google_cloud_default", doc=(
        "The Google Cloud connection Document AI is called with."))
    docai_poll_s: Seconds = switch("docverify_docai_poll_s", "30", doc=(
        "Seconds between polls of a Document AI batch operation."))
    judge: JudgeName = switch("docverify_judge", "offline", doc=(
        "The classifier and the judgment phases: offline (deterministic, no LLM) or llm (the model of "
        "docverify_llm_conn_id)."))
    llm_conn_id: str = switch("docverify_llm_conn_id", DEFAULT_LLM_CONN, doc=(
        "The Airflow connection (common-ai provider, pydanticai / pydanticai_vertex) of the LLM judge's model."))
    judge_conn_id: str = switch("docverify_judge_conn_id", "", doc=(
        "The Airflow connection of the model that judges (V2/V3/V4, and by default the jury and the V5 second "
        "opinion) when it is not the classifier's: empty = docverify_llm_conn_id, and then the classification "
        "is verified by its own model (a warning in the task log and the batch report)."))
    v2_blind_reading: BlindReading = switch("docverify_v2_blind_reading", "instead", doc=(
        "With the LLM judge, how V2 is asked (ADR 0034): instead (each segment's text without the classifier's "
        "labels, in place of the labelled prompt: the specification's call budget), before (the blind reading, "
        "then the labelled prompt: one more call per judged attempt) or off (the labelled prompt only)."))
    llm_timeout_s: Seconds = switch("docverify_llm_timeout_s", "120", doc=(
        "Limit in seconds of one LLM call, its output re-asks included."))
    llm_max_attempts: AtLeastOne = switch("docverify_llm_max_attempts", "4", doc=(
        "Attempts of an LLM call on a transient fault (exponential backoff with jitter)."))
    llm_output_retries: Count = switch("docverify_llm_output_retries", "2", doc=(
        "How many times a schema-invalid model answer is asked again."))
    llm_rpm: PerMinute = switch("docverify_llm_rpm", "0", doc=(
        "Requests per minute of the model shared by every task of the night (0 = unlimited)."))
    llm_tpm: PerMinute = switch("docverify_llm_tpm", "0", doc=(
        "Input tokens per minute of the model shared by every task of the night (0 = unlimited)."))
    llm_limiter_hosts: AtLeastOne = switch("docverify_llm_limiter_hosts", "1", doc=(
        "Machines that share the quota: each takes 1/n of docverify_llm_rpm / docverify_llm_tpm."))
    llm_throttle_wait_s: Seconds = switch("docverify_llm_throttle_wait_s", "1200", doc=(
        "Seconds a call may wait for the quota or a service outage (429, 503, 5xx) before the task fails "
        "and is retried (a throttled document is never escalated)."))
    llm_shards: AtLeastOne = switch("docverify_llm_shards", "4", doc=(
        "With the LLM judge, the night's verify shards are at most this many (the llm pool's slots)."))
    llm_mode: LLMMode = switch("docverify_llm_mode", "online", doc=(
        "online (one request per call) or batch (the night's requests through Gemini batch jobs first)."))
    llm_batch_poll_s: Count = switch("docverify_llm_batch_poll_s", "60", doc=(
        "Seconds between polls of a Gemini batch job (llm_mode batch)."))
    jury: JuryMode = switch("docverify_jury", "off", doc=(
        "The CR_V2 jury over the judgment phases' findings: off, cr_v2 or cr_v1."))
    jury_conn_ids: str = switch("docverify_jury_conn_ids", "", doc=(
        "Three comma-separated LLM connections of jurors A, B, C (empty: all three on the judge's connection, "
        "docverify_judge_conn_id, else docverify_llm_conn_id)."))
    jury_max_findings: Count = switch("docverify_jury_max_findings", "8", doc=(
        "At most this many findings of one judgment are put to the jury."))
    second_opinion: OnOff = switch("docverify_v5_second_opinion", "off", doc=(
        "The V5 second opinion (an LLM route beside the decision table; the stricter of the two wins): off/on."))
    second_opinion_conn_id: str = switch("docverify_v5_second_opinion_conn_id", "", doc=(
        "The LLM connection of the V5 second opinion (empty: the judge's connection, docverify_judge_conn_id, "
        "else docverify_llm_conn_id)."))
    # the verification policy (ADR 0022): docverify.domain.policy.VerifyPolicy's defaults and doc lines
    blocker_repair: OnOff = policy_switch("docverify_blocker_repair", "blocker_repair")
    check_patient_identity: OnOff = policy_switch("docverify_check_patient_identity", "patient_identity")
    min_primary_confidence: Fraction = policy_switch("docverify_min_primary_confidence", "min_primary_confidence")
    label_text_guard: OnOff = policy_switch("docverify_label_text_guard", "label_text_guard")
    admin_trap_per_segment: OnOff = policy_switch("docverify_admin_trap_per_segment", "admin_trap_per_segment")
    admin_trap_counts_mentions: OnOff = policy_switch("docverify_admin_trap_counts_mentions", "admin_trap_counts_mentions")
    admin_trap_spares_read_reports: OnOff = policy_switch("docverify_admin_trap_spares_read_reports",
                                                          "admin_trap_spares_read_reports")
    sme_assignees: str = switch("docverify_sme_assignees", "", doc=(
        "Comma-separated SME reviewers of the review packets when the sme_review DAG's assignees param is "
        "empty."))
    audit_rate: Fraction = switch("docverify_audit_rate", "0.02", doc=(
        "Share (0-1) of the night's accepted documents sampled for an SME audit (0 = off)."))
    audit_alert_rate: Fraction = switch("docverify_audit_alert_rate", "0.05", doc=(
        "Notify when the lower bound of the night's false-accept rate (95% interval, from the audits) exceeds "
        "this (0-1)."))
    notify_email: str = switch("docverify_notify_email", "", doc=(
        "Where the night's notifications are e-mailed (empty: no e-mail)."))
    notify_smtp_conn_id: str = switch("docverify_notify_smtp_conn_id", DEFAULT_SMTP_CONN, doc=(
        "The SMTP connection notifications are sent with."))
    notify_slack_conn_id: str = switch("docverify_notify_slack_conn_id", "", doc=(
        "The Slack connection notifications are posted with (empty: no Slack)."))

    @classmethod
    def variable(cls, field: str) -> str:
        """The Variable behind ``field``."""
        return _extra(cls.model_fields[field])["variable"]

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Variable name → documented default, for every switch."""
        return {_extra(f)["variable"]: _extra(f)["variable_default"] for f in cls.model_fields.values()}

    @model_validator(mode="before")
    @classmethod
    def _blank_is_missing(cls, data: JsonValue) -> JsonValue:
        """A Variable's value without its surrounding blanks; an empty one is missing (its default)."""
        if not isinstance(data, Mapping):
            return data
        return {k: v.strip() if isinstance(v, str) else v for k, v in data.items()
                if not (isinstance(v, str) and not v.strip())}


def policy_fields(model: type[Switches] = Switches) -> dict[str, str]:
    """Switch field → :class:`~docverify.domain.policy.VerifyPolicy` field, for every policy switch."""
    return {name: _extra(f)["policy"] for name, f in model.model_fields.items() if "policy" in _extra(f)}


#: Settings field → VerifyPolicy field (derived from the declarations: :func:`policy_fields`)
POLICY_FIELDS: dict[str, str] = policy_fields()

# The names other modules use for a few Variables (derived, never a second declaration: a new switch
# needs none; Switches.variable(field) names any)
VAR_JUDGE = Switches.variable("judge")
VAR_LAYOUT = Switches.variable("layout")
VAR_LLM_MODE = Switches.variable("llm_mode")
VAR_LLM_SHARDS = Switches.variable("llm_shards")
VAR_SME_ASSIGNEES = Switches.variable("sme_assignees")


def _accepts(f: FieldInfo) -> Accepts:
    """What the field's type accepts, from its metadata (see :class:`Accepts`)."""
    said = next((m for m in f.metadata if isinstance(m, Accepts)), None)
    if typing.get_origin(f.annotation) is Literal:
        return dataclasses.replace(said or Accepts("a choice"),
                                   values="one of " + ", ".join(typing.get_args(f.annotation)))
    if said:
        return said
    ge = next((m.ge for m in f.metadata if hasattr(m, "ge")), None)
    le = next((m.le for m in f.metadata if hasattr(m, "le")), None)
    noun = "a whole number" if f.annotation is int else "a number"
    return Accepts(noun + (f" from {ge:g} to {le:g}" if ge is not None and le is not None
                           else f" of at least {ge:g}" if ge is not None else ""))


def refusal(variable: str, raw: str, f: FieldInfo) -> str:
    """The message of a Variable whose value its type refuses: the Variable, the value (unless the
    Variable's name says it is a secret), what it accepts and its default."""
    a = _accepts(f)
    shown = (" (its value is not shown: a secret)" if any(p in variable.lower() for p in SECRET_NAME_PARTS)
             else f"={raw!r}")
    return (f"Variable {variable}{shown} is not {a.what}" + (f": use {a.values}" if a.values else "")
            + f" (default {_extra(f)['variable_default']!r} when missing or empty){a.hint}")
