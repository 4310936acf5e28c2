"""Configuration from Airflow: Variables (and, for the Google path, connections) → one
:class:`Settings` object per task → the storage root and the judge. The only module that turns
Airflow configuration into domain objects.

**Read once per task.** :func:`settings` builds a frozen :class:`Settings` from every Variable the
code reads (one read each) and keeps it in the context of the task instance that asked; the
task's other calls reuse it. Outside a task (the api-server's review and packet
pages) a call reuses the settings read in the last :data:`RECENT_S` (5) seconds, else reads afresh: a
page view reads each Variable at most once, and a changed Variable takes effect within seconds.

**Typed.** Each field's type validates the raw Variable string (pydantic: ``Literal`` choices,
bounded numbers, one :data:`Switch` vocabulary, the :data:`StorageRoot`); an empty value counts as
missing. A refused value fails the task with a ``ValueError`` naming the Variable, the value (never
a secret's) and what it accepts (:func:`refusal`).

**Failing loudly.** A Variable that is *missing* takes its documented default (the values of
``airflow_settings.yaml``). Any other outcome of reading it fails the task with
:class:`ConfigUnavailable`, naming the Variable and the fix — never a silent switch of the storage
root to the repository's ``data/`` or of the judge to offline. Airflow 3.3's Task SDK makes that
distinction hard: ``Variable.get(key, default=…)`` returns the default whenever no secrets backend
returned a value, and the Execution-API backend returns "no value" for *any* failed request (the
supervisor's ``API_SERVER_ERROR`` for an unreachable API server included). So inside a task a
Variable that came back "not found" is asked once more from the Execution API directly and only an
explicit ``VARIABLE_NOT_FOUND`` counts as missing (:func:`read_variable`).

**The storage root** is resolved here and only here (:meth:`Settings.root`): ``gs://…`` → an
``ObjectStoragePath`` on the connection ``docverify_storage_conn_id``; ``file://…`` or a plain path
→ an absolute :class:`pathlib.Path`, a relative one taken relative to the repository
(:data:`ROOT_BASE`, whatever the working directory of the process). The core receives that object,
never a string to resolve again."""

from __future__ import annotations

import dataclasses
import functools
import logging
import pathlib
import threading
import time
import typing
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo

from docverify.domain import policy as P
from docverify.judging.judges import Judge, OfflineJudge

if TYPE_CHECKING:
    from docverify.llm.judge import LLMJudge
    from docverify.storage.store import ArtifactStore

log = logging.getLogger(__name__)

REPO = pathlib.Path(__file__).resolve().parents[3]
ROOT_BASE = REPO  # the one base of a relative storage root (airflow_settings.yaml says so)
DEFAULT_STORAGE_ROOT = "data"  # a relative path is taken relative to the repository

VAR_STORAGE_ROOT = "docverify_storage_root"
VAR_STORAGE_CONN = "docverify_storage_conn_id"
VAR_JUDGE = "docverify_judge"
VAR_LLM_CONN = "docverify_llm_conn_id"
# ADR 0034: the judgments' connection apart from the classifier's (empty: the classifier's, with a warning)
VAR_JUDGE_CONN = "docverify_judge_conn_id"
VAR_V2_BLIND = "docverify_v2_blind_reading"
VAR_LLM_TIMEOUT = "docverify_llm_timeout_s"
VAR_LLM_ATTEMPTS = "docverify_llm_max_attempts"
VAR_LLM_OUTPUT_RETRIES = "docverify_llm_output_retries"
# ADR 0014: one LLM rate limiter shared by every task of the night (docverify.llm.ratelimit)
VAR_LLM_RPM = "docverify_llm_rpm"
VAR_LLM_TPM = "docverify_llm_tpm"
VAR_LLM_LIMITER_HOSTS = "docverify_llm_limiter_hosts"
VAR_LLM_THROTTLE_WAIT = "docverify_llm_throttle_wait_s"
VAR_LLM_SHARDS = "docverify_llm_shards"
# ADR 0016: the night's LLM requests online (default) or through Gemini batch jobs
# (docverify_airflow.llm_batch)
VAR_LLM_MODE = "docverify_llm_mode"
VAR_LLM_BATCH_POLL = "docverify_llm_batch_poll_s"
DEFAULT_LLM_CONN = "docverify_llm"
VAR_LAYOUT = "docverify_layout"
VAR_DOCAI_PROCESSOR = "docverify_docai_processor"
VAR_DOCAI_CONN = "docverify_docai_conn_id"
VAR_DOCAI_POLL = "docverify_docai_poll_s"
VAR_OCR = "docverify_ocr"
# ADR 0047: the local parser's time budget grows with the pages (docverify.layout.pool)
VAR_PARSE_PAGE_TIMEOUT = "docverify_parse_page_timeout_s"
VAR_PARSE_FILE_CEILING = "docverify_parse_file_ceiling_s"
# ADR 0052: a long scan's pages OCR'd across the parse workers
VAR_PARSE_SPLIT_SCAN_PAGES = "docverify_parse_split_scan_pages"
# the CR_V2 jury over the judgment phases' findings (ADR 0012), and the V5 second opinion (ADR 0013);
# both off by default
VAR_JURY = "docverify_jury"
VAR_JURY_CONNS = "docverify_jury_conn_ids"
VAR_JURY_MAX_FINDINGS = "docverify_jury_max_findings"
VAR_SECOND_OPINION = "docverify_v5_second_opinion"
VAR_SECOND_OPINION_CONN = "docverify_v5_second_opinion_conn_id"
# ADR 0022: the verification policy (docverify.domain.policy.VerifyPolicy; its defaults are the Variables'
# defaults)
VAR_BLOCKER_REPAIR = "docverify_blocker_repair"
VAR_CHECK_PATIENT_IDENTITY = "docverify_check_patient_identity"
VAR_MIN_PRIMARY_CONFIDENCE = "docverify_min_primary_confidence"
VAR_LABEL_TEXT_GUARD = "docverify_label_text_guard"
VAR_ADMIN_TRAP_PER_SEGMENT = "docverify_admin_trap_per_segment"
VAR_ADMIN_TRAP_COUNTS_MENTIONS = "docverify_admin_trap_counts_mentions"
VAR_SME_ASSIGNEES = "docverify_sme_assignees"
VAR_AUDIT_RATE = "docverify_audit_rate"
VAR_AUDIT_ALERT_RATE = "docverify_audit_alert_rate"
VAR_NOTIFY_EMAIL = "docverify_notify_email"
VAR_NOTIFY_SMTP_CONN = "docverify_notify_smtp_conn_id"
VAR_NOTIFY_SLACK_CONN = "docverify_notify_slack_conn_id"
DEFAULT_SMTP_CONN = "docverify_smtp"


class ConfigUnavailable(RuntimeError):
    """A Variable or connection that exists (or may) but could not be read: a transient fault of
    the metadata database / API server. The task fails naming it (and Airflow retries it); it
    never runs on a default instead."""


def _unavailable(key: str, default: str, why: str) -> ConfigUnavailable:
    return ConfigUnavailable(
        f"Variable {key} could not be read ({why}); the task fails instead of running on the default "
        f"{default!r}: check the Airflow metadata database / API server, then clear the task")


def _confirm_missing(key: str, default: str) -> str:
    """``key`` came back "not found" from the secrets backends. Inside a task, ask the Execution
    API once more: only its explicit ``VARIABLE_NOT_FOUND`` means missing (→ ``default``); a value
    means the first answer was a fault (→ the value); anything else raises. Outside a task (no
    supervisor channel: tests, the api-server) the backends' answer stands."""
    try:
        from docverify_airflow.airflow_internals import task_runner
    except ImportError:  # pragma: no cover - the Task SDK is always installed with Airflow 3
        return default
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if comms is None:
        return default
    from airflow.sdk.exceptions import ErrorType

    from docverify_airflow.airflow_internals import ErrorResponse, GetVariable, VariableResult

    try:
        msg = comms.send(GetVariable(key=key))
    except Exception as exc:
        raise _unavailable(key, default, type(exc).__name__) from None
    if isinstance(msg, VariableResult):
        return default if msg.value is None else str(msg.value)
    if isinstance(msg, ErrorResponse) and msg.error == ErrorType.VARIABLE_NOT_FOUND:
        return default
    err = getattr(getattr(msg, "error", None), "value", None) or type(msg).__name__
    raise _unavailable(key, default, f"the API server answered {err}")


def read_variable(key: str, default: str) -> str:
    """The Variable ``key``; its documented ``default`` only when it is **missing**. A Variable
    that cannot be read raises :class:`ConfigUnavailable` naming it (the task fails and Airflow
    retries it)."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType

    try:
        value = Variable.get(key)
    except AirflowRuntimeError as exc:
        if getattr(getattr(exc, "error", None), "error", None) != ErrorType.VARIABLE_NOT_FOUND:
            raise _unavailable(key, default, type(exc).__name__) from None
        return _confirm_missing(key, default)
    except Exception as exc:
        raise _unavailable(key, default, type(exc).__name__) from None
    return "" if value is None else str(value)


# --- the Variables' types: pydantic validates each raw Variable string; Settings.parse turns a refusal
# into one ValueError naming the Variable, its value and what it accepts (the task fails at once) ---

SWITCH_ON = ("on", "true", "1", "yes")
SWITCH_OFF = ("off", "false", "0", "no")
#: name fragments of a secret Variable (after Airflow's default sensitive names): its value is never shown
SECRET_NAME_PARTS = ("password", "passwd", "passphrase", "secret", "token", "api_key", "apikey",
                     "private_key", "authorization", "keyfile", "service_account")


@dataclasses.dataclass(frozen=True)
class Accepts:
    """A type's words in a refusal: ``Variable x='y' is not {what}: use {values}{hint}`` (a choice's
    values are its Literal's; a number's come from its bounds)."""

    what: str
    values: str = ""
    hint: str = ""


def _word(raw: object) -> object:
    return raw.strip().lower() if isinstance(raw, str) else raw


def _switch_word(raw: object) -> object:
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


Switch = Annotated[bool, BeforeValidator(_switch_word),
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


def refusal(variable: str, raw: object, f: FieldInfo) -> str:
    """The message of a Variable whose value its type refuses: the Variable, the value (unless the
    Variable's name says it is a secret), what it accepts and its default."""
    a = _accepts(f)
    shown = (" (its value is not shown: a secret)" if any(p in variable.lower() for p in SECRET_NAME_PARTS)
             else f"={raw!r}")
    return (f"Variable {variable}{shown} is not {a.what}" + (f": use {a.values}" if a.values else "")
            + f" (default {_extra(f)['variable_default']!r} when missing or empty){a.hint}")


def _on_off_default(value: bool) -> str:
    return "on" if value else "off"


def _var(name: str, default: str, doc: str = "") -> Any:
    """A field of :class:`Settings`: the Variable ``name`` (the field's alias), its documented
    ``default`` (the raw text used when the Variable is missing or empty, validated like a value)
    and its description (docs/configuration.md)."""
    return Field(default, validate_default=True, validation_alias=name, description=doc,
                 json_schema_extra={"variable": name, "variable_default": default})


def _extra(f: FieldInfo) -> dict[str, str]:
    """A settings field's Variable and its default, as :func:`_var` recorded them."""
    return cast("dict[str, str]", f.json_schema_extra)


#: Settings field → :class:`docverify.domain.policy.VerifyPolicy` field (config.policy; docverify.domain.policy's defaults)
POLICY_FIELDS: dict[str, str] = {
    "blocker_repair": "blocker_repair",
    "check_patient_identity": "patient_identity",
    "min_primary_confidence": "min_primary_confidence",
    "label_text_guard": "label_text_guard",
    "admin_trap_per_segment": "admin_trap_per_segment",
    "admin_trap_counts_mentions": "admin_trap_counts_mentions",
}


class Settings(BaseModel):
    """Every Variable the code reads, parsed (one field each; ``variable(field)`` is its name and
    ``variables()`` the documented defaults used when it is missing). Read from Airflow in one place,
    :meth:`load`; a bad value fails naming the Variable. ``scripts/gen_config_docs.py`` renders
    docs/configuration.md from this class."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=True,
                              ignored_types=(functools.cached_property,))

    storage_root: StorageRoot = _var(VAR_STORAGE_ROOT, DEFAULT_STORAGE_ROOT, doc=(
        "Where every artifact of the night is kept: gs://bucket/prefix (on the connection of "
        "docverify_storage_conn_id), file:///abs/path or a path (a relative one is relative to the repository)."))
    storage_conn_id: str = _var(VAR_STORAGE_CONN, "google_cloud_default", doc=(
        "The Airflow connection a gs:// storage root is read and written with."))
    layout: Layout = _var(VAR_LAYOUT, "local", doc=(
        "How PDFs become page text: local (pypdf, OCR per docverify_ocr) or document_ai (the Layout Parser "
        "processor of docverify_docai_processor)."))
    ocr: Switch = _var(VAR_OCR, "on", doc="The local layout OCRs pages without a text layer (on/off).")
    parse_page_timeout_s: AtLeastASecond = _var(VAR_PARSE_PAGE_TIMEOUT, "60", doc=(
        "Local layout: seconds one page of a PDF may take in the parser (a scanned page's OCR included), counted "
        "from the previous page; a slower page stops the file (TIMEOUT naming the page). Each finished page "
        "restarts it, so a long scan is read (ADR 0047; the DAG param parse_timeout_s is the time to open a PDF)."))
    parse_file_ceiling_s: AtLeastASecond = _var(VAR_PARSE_FILE_CEILING, "1800", doc=(
        "Local layout: seconds one PDF may take in the parser at most, however its pages advance (never less "
        "than the DAG param parse_timeout_s; ADR 0047)."))
    parse_split_scan_pages: Count = _var(VAR_PARSE_SPLIT_SCAN_PAGES, "8", doc=(
        "Local layout with OCR: a PDF with at least this many image-only pages among its first twice as many is "
        "read in page ranges, one per parse worker, and its pages merged in order (each range with the per-page "
        "budget); 0 = every PDF in one worker (ADR 0052)."))
    docai_processor: str = _var(VAR_DOCAI_PROCESSOR, "", doc=(
        "The Document AI Layout Parser processor: projects/<project>/locations/<us|eu>/processors/<id>[/"
        "processorVersions/<v>] (layout document_ai only)."))
    docai_conn_id: str = _var(VAR_DOCAI_CONN, "google_cloud_default", doc=(
        "The Google Cloud connection Document AI is called with."))
    docai_poll_s: Seconds = _var(VAR_DOCAI_POLL, "30", doc=(
        "Seconds between polls of a Document AI batch operation."))
    judge: JudgeName = _var(VAR_JUDGE, "offline", doc=(
        "The classifier and the judgment phases: offline (deterministic, no LLM) or llm (the model of "
        "docverify_llm_conn_id)."))
    llm_conn_id: str = _var(VAR_LLM_CONN, DEFAULT_LLM_CONN, doc=(
        "The Airflow connection (common-ai provider, pydanticai / pydanticai_vertex) of the LLM judge's model."))
    judge_conn_id: str = _var(VAR_JUDGE_CONN, "", doc=(
        "The Airflow connection of the model that judges (V2/V3/V4, and by default the jury and the V5 second "
        "opinion) when it is not the classifier's: empty = docverify_llm_conn_id, and then the classification "
        "is verified by its own model (a warning in the task log and the batch report)."))
    v2_blind_reading: BlindReading = _var(VAR_V2_BLIND, "instead", doc=(
        "With the LLM judge, how V2 is asked (ADR 0034): instead (each segment's text without the classifier's "
        "labels, in place of the labelled prompt: the specification's call budget), before (the blind reading, "
        "then the labelled prompt: one more call per judged attempt) or off (the labelled prompt only)."))
    llm_timeout_s: Seconds = _var(VAR_LLM_TIMEOUT, "120", doc=(
        "Limit in seconds of one LLM call, its output re-asks included."))
    llm_max_attempts: AtLeastOne = _var(VAR_LLM_ATTEMPTS, "4", doc=(
        "Attempts of an LLM call on a transient fault (exponential backoff with jitter)."))
    llm_output_retries: Count = _var(VAR_LLM_OUTPUT_RETRIES, "2", doc=(
        "How many times a schema-invalid model answer is asked again."))
    llm_rpm: PerMinute = _var(VAR_LLM_RPM, "0", doc=(
        "Requests per minute of the model shared by every task of the night (0 = unlimited)."))
    llm_tpm: PerMinute = _var(VAR_LLM_TPM, "0", doc=(
        "Input tokens per minute of the model shared by every task of the night (0 = unlimited)."))
    llm_limiter_hosts: AtLeastOne = _var(VAR_LLM_LIMITER_HOSTS, "1", doc=(
        "Machines that share the quota: each takes 1/n of docverify_llm_rpm / docverify_llm_tpm."))
    llm_throttle_wait_s: Seconds = _var(VAR_LLM_THROTTLE_WAIT, "1200", doc=(
        "Seconds a call may wait for the quota or a service outage (429, 503, 5xx) before the task fails "
        "and is retried (a throttled document is never escalated)."))
    llm_shards: AtLeastOne = _var(VAR_LLM_SHARDS, "4", doc=(
        "With the LLM judge, the night's verify shards are at most this many (the llm pool's slots)."))
    llm_mode: LLMMode = _var(VAR_LLM_MODE, "online", doc=(
        "online (one request per call) or batch (the night's requests through Gemini batch jobs first)."))
    llm_batch_poll_s: Count = _var(VAR_LLM_BATCH_POLL, "60", doc=(
        "Seconds between polls of a Gemini batch job (llm_mode batch)."))
    jury: JuryMode = _var(VAR_JURY, "off", doc=(
        "The CR_V2 jury over the judgment phases' findings: off, cr_v2 or cr_v1."))
    jury_conn_ids: str = _var(VAR_JURY_CONNS, "", doc=(
        "Three comma-separated LLM connections of jurors A, B, C (empty: all three on the judge's connection, "
        "docverify_judge_conn_id, else docverify_llm_conn_id)."))
    jury_max_findings: Count = _var(VAR_JURY_MAX_FINDINGS, "8", doc=(
        "At most this many findings of one judgment are put to the jury."))
    second_opinion: Switch = _var(VAR_SECOND_OPINION, "off", doc=(
        "The V5 second opinion (an LLM route beside the decision table; the stricter of the two wins): off/on."))
    second_opinion_conn_id: str = _var(VAR_SECOND_OPINION_CONN, "", doc=(
        "The LLM connection of the V5 second opinion (empty: the judge's connection, docverify_judge_conn_id, "
        "else docverify_llm_conn_id)."))
    blocker_repair: Switch = _var(VAR_BLOCKER_REPAIR, _on_off_default(P.BLOCKER_REPAIR),
                                doc=P.VerifyPolicy.model_fields["blocker_repair"].description or "")
    check_patient_identity: Switch = _var(VAR_CHECK_PATIENT_IDENTITY, _on_off_default(P.PATIENT_IDENTITY),
                                        doc=P.VerifyPolicy.model_fields["patient_identity"].description or "")
    min_primary_confidence: Fraction = _var(VAR_MIN_PRIMARY_CONFIDENCE, str(P.MIN_PRIMARY_CONFIDENCE),
                                         doc=P.VerifyPolicy.model_fields["min_primary_confidence"].description or "")
    label_text_guard: Switch = _var(VAR_LABEL_TEXT_GUARD, _on_off_default(P.LABEL_TEXT_GUARD),
                                  doc=P.VerifyPolicy.model_fields["label_text_guard"].description or "")
    admin_trap_per_segment: Switch = _var(VAR_ADMIN_TRAP_PER_SEGMENT, _on_off_default(P.ADMIN_TRAP_PER_SEGMENT),
                                        doc=P.VerifyPolicy.model_fields["admin_trap_per_segment"].description or "")
    admin_trap_counts_mentions: Switch = _var(
        VAR_ADMIN_TRAP_COUNTS_MENTIONS, _on_off_default(P.ADMIN_TRAP_COUNTS_MENTIONS),
        doc=P.VerifyPolicy.model_fields["admin_trap_counts_mentions"].description or "")
    sme_assignees: str = _var(VAR_SME_ASSIGNEES, "", doc=(
        "Comma-separated SME reviewers of the review packets when the sme_review DAG's assignees param is "
        "empty."))
    audit_rate: Fraction = _var(VAR_AUDIT_RATE, "0.02", doc=(
        "Share (0-1) of the night's accepted documents sampled for an SME audit (0 = off)."))
    audit_alert_rate: Fraction = _var(VAR_AUDIT_ALERT_RATE, "0.05", doc=(
        "Notify when the lower bound of the night's false-accept rate (95% interval, from the audits) exceeds "
        "this (0-1)."))
    notify_email: str = _var(VAR_NOTIFY_EMAIL, "", doc=(
        "Where the night's notifications are e-mailed (empty: no e-mail)."))
    notify_smtp_conn_id: str = _var(VAR_NOTIFY_SMTP_CONN, DEFAULT_SMTP_CONN, doc=(
        "The SMTP connection notifications are sent with."))
    notify_slack_conn_id: str = _var(VAR_NOTIFY_SLACK_CONN, "", doc=(
        "The Slack connection notifications are posted with (empty: no Slack)."))

    @classmethod
    def variable(cls, field: str) -> str:
        """The Variable behind ``field``."""
        return _extra(cls.model_fields[field])["variable"]

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Variable name → documented default, for every field."""
        return {_extra(f)["variable"]: _extra(f)["variable_default"]
                for f in cls.model_fields.values()}

    @model_validator(mode="before")
    @classmethod
    def _blank_is_missing(cls, data: Any) -> Any:
        """A Variable's value without its surrounding blanks; an empty one is missing (its default)."""
        if not isinstance(data, Mapping):
            return data
        return {k: v.strip() if isinstance(v, str) else v for k, v in data.items()
                if not (isinstance(v, str) and not v.strip())}

    @classmethod
    def parse(cls, values: Mapping[str, str]) -> Settings:
        """Settings from raw Variable values (a missing or empty one takes its default); a value its
        type refuses raises ``ValueError`` naming the Variable, the value and what it accepts (every
        refused Variable, one per line)."""
        fields = {_extra(f)["variable"]: f for f in cls.model_fields.values()}
        raw = {var: values[var] for var in fields if var in values}
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            refused = dict.fromkeys(str(e["loc"][0]) for e in exc.errors() if e["loc"])
            raise ValueError("\n".join(
                refusal(var, raw.get(var, _extra(fields[var])["variable_default"]), fields[var])
                for var in refused if var in fields) or str(exc)) from None

    @classmethod
    def load(cls) -> Settings:
        """Read every Variable once (:func:`read_variable`) and parse them."""
        return cls.parse({name: read_variable(name, default) for name, default in cls.variables().items()})

    # --- derived values ---

    @functools.cached_property
    def root(self) -> Any:
        """The artifact store root, resolved once: ``gs://`` → ObjectStoragePath on
        ``storage_conn_id``; ``file://`` or a plain path → an absolute pathlib.Path (relative to
        :data:`ROOT_BASE`)."""
        return resolve_root(self.storage_root, self.storage_conn_id)

    @property
    def llm_conn(self) -> str:
        return self.llm_conn_id or DEFAULT_LLM_CONN

    @property
    def judge_conn(self) -> str:
        """The judgments' connection (ADR 0034): ``docverify_judge_conn_id``, else the classifier's."""
        return self.judge_conn_id or self.llm_conn

    def processor(self) -> dict[str, str | None]:
        """The Layout Parser processor of Variable ``docverify_docai_processor`` as its parts
        (``project``, ``location``, ``processor_id``, ``processor_version``), parsed by the
        client library's path helpers (through the Document AI package's hook); a malformed name
        fails naming the Variable."""
        from docverify_documentai.hooks.document_ai import parse_processor_name

        try:
            return parse_processor_name(self.docai_processor)
        except ValueError:
            raise ValueError(
                f"Variable {VAR_DOCAI_PROCESSOR}={self.docai_processor!r} is not a processor resource name: set it "
                f"to projects/<project>/locations/<us|eu>/processors/<processor id> (the Layout Parser processor's "
                f"'Prediction endpoint' in the console, without the ':process' suffix)") from None

    def processor_name(self) -> str:
        """``docverify_docai_processor``, checked (see :meth:`processor`)."""
        self.processor()
        return self.docai_processor

    def jury_conns(self) -> list[str]:
        conns = [c.strip() for c in self.jury_conn_ids.split(",")] if self.jury_conn_ids else [self.judge_conn] * 3
        if len(conns) != 3 or not all(conns):
            raise ValueError(f"Variable {VAR_JURY_CONNS}={self.jury_conn_ids!r}: give three connection ids (jurors "
                             f"A, B, C) separated by commas, or leave it empty for {VAR_JUDGE_CONN} (else "
                             f"{VAR_LLM_CONN})")
        return conns


def resolve_root(raw: str, conn_id: str = "google_cloud_default") -> Any:
    """The one place a storage root string becomes a path object (see the module docstring)."""
    raw = raw.strip() or DEFAULT_STORAGE_ROOT
    if raw.startswith("file://"):
        raw = raw[len("file://"):]
    if "://" not in raw:
        path = pathlib.Path(raw)
        return path if path.is_absolute() else ROOT_BASE / path
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(raw, conn_id=conn_id)


#: the key under which a task's context carries the settings read for it
CONTEXT_KEY = "docverify_settings"


#: outside a task (the api-server's pages), :func:`settings` keeps what it read this many seconds: a
#: page view reads each Variable at most once, and a changed Variable takes effect within seconds
RECENT_S = 5.0


class _Recent:
    """The settings last read outside a task and when (``clock``, monotonic), for :data:`RECENT_S`
    seconds; one reader at a time (the api-server serves pages from threads), a failed read keeps
    nothing."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clock = time.monotonic
        self.kept: tuple[float, Settings] | None = None

    def get(self) -> Settings:
        with self.lock:
            now = self.clock()
            if self.kept is None or not 0 <= now - self.kept[0] < RECENT_S:
                self.kept = (now, Settings.load())
            return self.kept[1]

    def forget(self) -> None:
        with self.lock:
            self.kept = None


_recent = _Recent()


def settings(context: Any = None) -> Settings:
    """The settings of the running task: read once per task (kept in its context under
    :data:`CONTEXT_KEY`, so every step of the task that is handed the same context sees the same
    values, and nothing outlives the task). Without a context (the api-server's pages), the
    settings read in the last :data:`RECENT_S` seconds, else read afresh."""
    if isinstance(context, MutableMapping):
        kept = context.get(CONTEXT_KEY)
        if isinstance(kept, Settings):
            return kept
        s = Settings.load()
        context[CONTEXT_KEY] = s
        return s
    return _recent.get()


def forget_settings() -> None:
    """Drop the settings kept outside a task (the next call reads every Variable again)."""
    _recent.forget()


def artifact_store(context: Any = None) -> ArtifactStore:
    """The artifact store on the settings' root: the one the tasks and the plugin's pages read."""
    from docverify.storage.store import ArtifactStore

    return ArtifactStore(settings(context).root)


def storage_root(s: Settings | None = None):
    """The artifact store root of the settings (see :meth:`Settings.root`)."""
    return (s or Settings.load()).root


def judge(s: Settings | None = None) -> Judge:
    """The judge named by the Variable ``docverify_judge``:

    * ``offline`` (the embedded default): deterministic algorithms, no LLM, no credentials;
    * ``llm``: :class:`docverify.llm.judge.LLMJudge` on the model of the Airflow connection named by
      ``docverify_llm_conn_id`` (default ``docverify_llm``), resolved by the common-ai provider's
      Pydantic AI hooks — conn type ``pydanticai_vertex`` with extra ``{"model":
      "google-cloud:gemini-2.5-flash", "project": …, "location": …}`` for Vertex AI, or ``{"model":
      "google:gemini-2.5-flash", "api_key": …}`` for the Gemini API (``base_url`` in the extra
      points it elsewhere, e.g. a test endpoint). Verdicts are cached in the artifact store
      (``cache/llm/``); faults are retried with backoff (``docverify_llm_max_attempts``, default
      4) and each call is limited to ``docverify_llm_timeout_s`` (default 120) seconds.

    Any other value fails loudly (when the settings are read) instead of silently running offline.
    The jury and the second opinion are not the judge's: :func:`docverify_airflow.wiring.verify_deps`
    passes them beside it (:class:`docverify.pipeline.document.VerifyDeps`)."""
    s = s or Settings.load()
    if s.judge == "offline":
        return OfflineJudge()
    classifier = llm_judge(s.llm_conn, s)
    if s.judge_conn == s.llm_conn:
        log.warning("the classification is verified by its own model: Variable %s is empty (or names %s, the "
                    "classifier's connection), so the judgments run on the classifier's model %s and share its "
                    "blind spots; name another model's connection in %s (ADR 0034)",
                    VAR_JUDGE_CONN, s.llm_conn, classifier.model_id, VAR_JUDGE_CONN)
        return classifier
    judge = llm_judge(s.judge_conn, s, classifier=classifier)
    if judge.self_verifying:
        log.warning("the classification is verified by its own model: the connections %s (classifier) and %s "
                    "(judge) give the same model %s; name another model in %s (ADR 0034)",
                    s.llm_conn, s.judge_conn, judge.model_id, VAR_JUDGE_CONN)
    else:
        log.info("the classifier's model is %s (connection %s); the judgments run on %s (connection %s)",
                 classifier.model_id, s.llm_conn, judge.model_id, s.judge_conn)
    return judge


def policy(s: Settings | None = None) -> P.VerifyPolicy:
    """The verification policy of the Variables ``docverify_blocker_repair`` (off),
    ``docverify_check_patient_identity`` (on), ``docverify_min_primary_confidence`` (0 = off) and
    ``docverify_label_text_guard`` (on), ``docverify_admin_trap_per_segment`` (on) and
    ``docverify_admin_trap_counts_mentions`` (off) (:data:`POLICY_FIELDS`):
    the tasks pass it to the verify and retry stages (in their :class:`~docverify.pipeline.document.VerifyDeps`) and to
    the batch-mode collect pass (``policy=…``), never through the judge."""
    s = s or Settings.load()
    return P.VerifyPolicy.from_overrides({p: getattr(s, f) for f, p in POLICY_FIELDS.items()})


def jury(s: Settings | None = None):
    """The CR_V2 jury of Variable ``docverify_jury`` (``off``, the default; ``cr_v2``; ``cr_v1``):
    jurors A, B, C on the connections of ``docverify_jury_conn_ids`` (three comma-separated
    connection ids; empty = all three on the judge's connection, :attr:`Settings.judge_conn`: the
    jury reviews the judgments, so it sits on the judging side, ADR 0034); C uses the evidence-facet
    prompt. At most ``docverify_jury_max_findings`` findings per judgment are reviewed."""
    s = s or Settings.load()
    if s.jury == "off":
        return None
    from docverify.arbiters.jury import Juror, Jury

    conns = s.jury_conns()
    llms: dict[str, Any] = {}
    for c in conns:
        if c not in llms:
            llms[c] = llm_judge(c, s)
    jurors = [Juror("A", llms[conns[0]], "JURY"), Juror("B", llms[conns[1]], "JURY"),
              Juror("C", llms[conns[2]], "JURY_EVIDENCE")]
    return Jury(jurors, version=s.jury.removeprefix("cr_"), max_findings=s.jury_max_findings)


def second_opinion(s: Settings | None = None):
    """The V5 second opinion of Variable ``docverify_v5_second_opinion`` (``off``, the default,
    or ``on``) on the connection ``docverify_v5_second_opinion_conn_id`` (empty = the judge's
    connection, :attr:`Settings.judge_conn`: a verifying opinion, never by default the classifier's
    model when a separate judge is configured, ADR 0034)."""
    s = s or Settings.load()
    if not s.second_opinion:
        return None
    from docverify.arbiters.second_opinion import SecondOpinion

    return SecondOpinion(llm_judge(s.second_opinion_conn_id or s.judge_conn, s))


def llm_judge(conn_id: str, s: Settings | None = None, *, classifier: Any = None) -> LLMJudge:
    """An :class:`~docverify.llm.judge.LLMJudge` on the model of Airflow connection ``conn_id``;
    ``classifier``: the LLMJudge that classifies when it is another connection's (ADR 0034)."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook

    from docverify.llm.cache import VerdictCache
    from docverify.llm.faults import BackoffRetry
    from docverify.llm.judge import LLMJudge
    from docverify.storage.store import ArtifactStore

    s = s or Settings.load()
    try:
        hook = PydanticAIHook.get_hook(conn_id)
    except AirflowNotFoundException as exc:  # missing: deterministic
        raise ValueError(f"the LLM connection {conn_id!r} could not give a model (it does not exist); create it "
                         f"in airflow_settings.yaml or name another one in the Variable that names it ({VAR_LLM_CONN} "
                         f"for the classifier, {VAR_JUDGE_CONN} for the judge)") from exc
    except Exception as exc:  # could not be read (metadata DB / API server): transient, the task is retried
        raise ConfigUnavailable(f"the LLM connection {conn_id!r} could not be read ({type(exc).__name__}); "
                                f"check the Airflow metadata database / API server, then clear the task") from None
    try:
        model = hook.get_conn()
    except Exception as exc:
        raise ValueError(
            f"the LLM connection {conn_id!r} could not give a model ({type(exc).__name__}: {exc}); create it "
            f"(conn type pydanticai_vertex, extra {{\"model\": \"google-cloud:gemini-2.5-flash\", \"project\": …}}) "
            f"in airflow_settings.yaml or name another one in the Variable {VAR_LLM_CONN}"
        ) from exc
    model_id = f"{model.system}:{model.model_name}"
    return LLMJudge(
        model,
        model_id,
        cache=VerdictCache(ArtifactStore(s.root)),
        timeout_s=s.llm_timeout_s,
        output_retries=s.llm_output_retries,
        retry_policy=BackoffRetry(max_attempts=s.llm_max_attempts),
        connection=conn_id,
        classifier=classifier,
        blind_reading=s.v2_blind_reading,
        **llm_quota(f"{conn_id}:{model_id}", s),
    )


def llm_quota(key: str, s: Settings | None = None) -> dict[str, Any]:
    """The ``limiter`` and ``throttle`` of an LLMJudge: requests/tokens per minute of the model
    (Variables ``docverify_llm_rpm`` / ``docverify_llm_tpm``, 0 = unlimited), shared by every task
    process of this machine through a state file under ``$AIRFLOW_HOME/docverify-llm-limiter``,
    each of ``docverify_llm_limiter_hosts`` machines taking its share; a call waits for the quota or an
    outage (429, overload, 5xx: ADR 0018) at most ``docverify_llm_throttle_wait_s`` (default 1200)
    seconds, then the task fails (``ServiceOutage``, a JudgeThrottled)
    and is retried — a throttled document is never escalated."""
    import os
    import pathlib

    from docverify.llm.faults import ThrottlePolicy
    from docverify.llm.ratelimit import RateLimiter

    s = s or Settings.load()
    home = pathlib.Path(os.environ.get("AIRFLOW_HOME") or pathlib.Path.home() / "airflow")
    limiter = (RateLimiter(key, rpm=s.llm_rpm, tpm=s.llm_tpm, share=1 / s.llm_limiter_hosts,
                           state_dir=home / "docverify-llm-limiter") if s.llm_rpm or s.llm_tpm else None)
    return {"limiter": limiter, "throttle": ThrottlePolicy(max_wait_s=s.llm_throttle_wait_s)}


def is_remote(root) -> bool:
    return str(root).startswith("gs://")
