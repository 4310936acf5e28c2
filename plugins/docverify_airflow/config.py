"""Configuration from Airflow: Variables (and, for the Google path, connections) → the storage
root and the judge. The only module that turns Airflow configuration into domain objects."""

from __future__ import annotations

import logging
import pathlib
import re
from typing import Any

from docverify.judges import Judge, OfflineJudge

log = logging.getLogger(__name__)

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_STORAGE_ROOT = "data"  # a relative path is taken relative to the repository

VAR_STORAGE_ROOT = "docverify_storage_root"
VAR_STORAGE_CONN = "docverify_storage_conn_id"
VAR_JUDGE = "docverify_judge"
VAR_LLM_CONN = "docverify_llm_conn_id"
VAR_LLM_TIMEOUT = "docverify_llm_timeout_s"
VAR_LLM_ATTEMPTS = "docverify_llm_max_attempts"
VAR_LLM_OUTPUT_RETRIES = "docverify_llm_output_retries"
DEFAULT_LLM_CONN = "docverify_llm"
JUDGES = ("offline", "llm")
VAR_LAYOUT = "docverify_layout"
VAR_DOCAI_PROCESSOR = "docverify_docai_processor"
VAR_DOCAI_CONN = "docverify_docai_conn_id"
VAR_DOCAI_POLL = "docverify_docai_poll_s"
LAYOUTS = ("local", "document_ai")
VAR_OCR = "docverify_ocr"
_ON = ("on", "true", "1", "yes")
_OFF = ("off", "false", "0", "no")
# issue 14: the CR_V2 jury over the judgment phases' findings, and the V5 second opinion (both off by default)
VAR_JURY = "docverify_jury"
VAR_JURY_CONNS = "docverify_jury_conn_ids"
VAR_JURY_MAX_FINDINGS = "docverify_jury_max_findings"
VAR_SECOND_OPINION = "docverify_v5_second_opinion"
VAR_SECOND_OPINION_CONN = "docverify_v5_second_opinion_conn_id"
JURY_MODES = ("off", "cr_v2", "cr_v1")
_PROCESSOR_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/processors/(?P<processor_id>[^/]+)"
    r"(?:/processorVersions/(?P<processor_version>[^/]+))?$"
)


class ConfigUnavailable(RuntimeError):
    """A Variable or connection that exists (or may) but could not be read: a transient fault of
    the metadata database / API server. The task fails naming it (and Airflow retries it); it
    never runs on a default instead."""


def _variable(key: str, default: str) -> str:
    """The Variable ``key``; its documented ``default`` only when it is **missing**. A Variable
    that cannot be read fails the task naming it (:class:`ConfigUnavailable`, retried by
    Airflow) — never a silent switch to the default storage root or judge."""
    from airflow.sdk import Variable

    try:
        return Variable.get(key, default=default)
    except Exception as exc:
        raise ConfigUnavailable(
            f"Variable {key} could not be read ({type(exc).__name__}); the task fails instead of running on "
            f"the default {default!r}: check the Airflow metadata database / API server, then clear the task"
        ) from None


def storage_root():
    """The artifact store root: ``file://`` → pathlib.Path; ``gs://`` → ObjectStoragePath on the
    connection named by ``docverify_storage_conn_id`` (default ``google_cloud_default``)."""
    root = _variable(VAR_STORAGE_ROOT, DEFAULT_STORAGE_ROOT).strip() or DEFAULT_STORAGE_ROOT
    if "://" not in root:
        path = pathlib.Path(root)
        return path if path.is_absolute() else REPO / path
    if root.startswith("file://"):
        from docverify.store import as_root

        return as_root(root)
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(root, conn_id=_variable(VAR_STORAGE_CONN, "google_cloud_default"))


def judge() -> Judge:
    """The judge named by the Variable ``docverify_judge``:

    * ``offline`` (the embedded default): deterministic algorithms, no LLM, no credentials;
    * ``llm``: :class:`docverify.llm.LLMJudge` on the model of the Airflow connection named by
      ``docverify_llm_conn_id`` (default ``docverify_llm``), resolved by the common-ai provider's
      Pydantic AI hooks — conn type ``pydanticai_vertex`` with extra ``{"model":
      "google-cloud:gemini-2.5-flash", "project": …, "location": …}`` for Vertex AI, or ``{"model":
      "google:gemini-2.5-flash", "api_key": …}`` for the Gemini API (``base_url`` in the extra
      points it elsewhere, e.g. a test endpoint). Verdicts are cached in the artifact store
      (``cache/llm/``); faults are retried with backoff (``docverify_llm_max_attempts``, default
      4) and each call is limited to ``docverify_llm_timeout_s`` (default 120) seconds.

    Any other value fails loudly instead of silently running offline."""
    kind = _variable(VAR_JUDGE, "offline").strip().lower()
    if kind == "offline":
        j: Judge = OfflineJudge()
    elif kind == "llm":
        j = llm_judge(_llm_conn())
    else:
        raise ValueError(
            f"Variable {VAR_JUDGE}={kind!r} is not a judge: use one of {', '.join(JUDGES)} "
            f"(set it in airflow_settings.yaml and re-import the settings)"
        )
    j.jury = jury()  # type: ignore[attr-defined]
    j.second_opinion = second_opinion()  # type: ignore[attr-defined]
    return j


def _llm_conn() -> str:
    return _variable(VAR_LLM_CONN, DEFAULT_LLM_CONN).strip() or DEFAULT_LLM_CONN


def jury():
    """The CR_V2 jury of Variable ``docverify_jury`` (``off``, the default; ``cr_v2``; ``cr_v1``):
    jurors A, B, C on the connections of ``docverify_jury_conn_ids`` (three comma-separated
    connection ids; empty = all three on ``docverify_llm_conn_id``); C uses the evidence-facet
    prompt. At most ``docverify_jury_max_findings`` findings per judgment are reviewed."""
    mode = _variable(VAR_JURY, "off").strip().lower() or "off"
    if mode not in JURY_MODES:
        raise ValueError(f"Variable {VAR_JURY}={mode!r} is not a jury mode: use one of {', '.join(JURY_MODES)}")
    if mode == "off":
        return None
    from docverify.jury import Juror, Jury

    raw = _variable(VAR_JURY_CONNS, "").strip()
    conns = [c.strip() for c in raw.split(",")] if raw else [_llm_conn()] * 3
    if len(conns) != 3 or not all(conns):
        raise ValueError(f"Variable {VAR_JURY_CONNS}={raw!r}: give three connection ids (jurors A, B, C) separated "
                         f"by commas, or leave it empty for {VAR_LLM_CONN}")
    llms: dict[str, Any] = {}
    for c in conns:
        if c not in llms:
            llms[c] = llm_judge(c)
    jurors = [Juror("A", llms[conns[0]], "JURY"), Juror("B", llms[conns[1]], "JURY"),
              Juror("C", llms[conns[2]], "JURY_EVIDENCE")]
    return Jury(jurors, version=mode.removeprefix("cr_"),
                max_findings=int(_variable(VAR_JURY_MAX_FINDINGS, "8")))


def second_opinion():
    """The V5 second opinion of Variable ``docverify_v5_second_opinion`` (``off``, the default,
    or ``on``) on the connection ``docverify_v5_second_opinion_conn_id`` (empty =
    ``docverify_llm_conn_id``)."""
    mode = _variable(VAR_SECOND_OPINION, "off").strip().lower() or "off"
    if mode not in ("off", "on"):
        raise ValueError(f"Variable {VAR_SECOND_OPINION}={mode!r}: use off or on")
    if mode == "off":
        return None
    from docverify.arbiters.second_opinion import SecondOpinion

    return SecondOpinion(llm_judge(_variable(VAR_SECOND_OPINION_CONN, "").strip() or _llm_conn()))


def llm_judge(conn_id: str) -> Judge:
    """An :class:`~docverify.llm.LLMJudge` on the model of Airflow connection ``conn_id``."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook

    from docverify.llm import BackoffRetry, LLMJudge, VerdictCache
    from docverify.store import ArtifactStore

    try:
        hook = PydanticAIHook.get_hook(conn_id)
    except AirflowNotFoundException as exc:  # missing: deterministic
        raise ValueError(f"the LLM connection {conn_id!r} could not give a model (it does not exist); create it "
                         f"in airflow_settings.yaml or name another one in the Variable {VAR_LLM_CONN}") from exc
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
        cache=VerdictCache(ArtifactStore(storage_root())),
        timeout_s=float(_variable(VAR_LLM_TIMEOUT, "120")),
        output_retries=int(_variable(VAR_LLM_OUTPUT_RETRIES, "2")),
        retry_policy=BackoffRetry(max_attempts=int(_variable(VAR_LLM_ATTEMPTS, "4"))),
        **llm_quota(f"{conn_id}:{model_id}"),
    )


def layout_mode() -> str:
    """``local`` (pypdfium2, the embedded default) or ``document_ai`` (Variable ``docverify_layout``)."""
    mode = _variable(VAR_LAYOUT, "local").strip().lower() or "local"
    if mode not in LAYOUTS:
        raise ValueError(f"Variable {VAR_LAYOUT}={mode!r} is not a layout: use one of {', '.join(LAYOUTS)}")
    return mode


def ocr_enabled() -> bool:
    """Local OCR of scanned pages on the local layout (Variable ``docverify_ocr``: on | off)."""
    value = _variable(VAR_OCR, "on").strip().lower() or "on"
    if value not in _ON + _OFF:
        raise ValueError(f"Variable {VAR_OCR}={value!r} is not a switch: use 'on' or 'off'")
    return value in _ON


def docai_conn_id() -> str:
    return _variable(VAR_DOCAI_CONN, "google_cloud_default").strip() or "google_cloud_default"


def docai_poll_s() -> float:
    return float(_variable(VAR_DOCAI_POLL, "30"))


def docai_processor() -> dict[str, str | None]:
    """The Layout Parser processor of Variable ``docverify_docai_processor``
    (``projects/<p>/locations/<l>/processors/<id>[/processorVersions/<v>]``) as its parts."""
    name = _variable(VAR_DOCAI_PROCESSOR, "").strip()
    m = _PROCESSOR_RE.match(name)
    if not m:
        raise ValueError(
            f"Variable {VAR_DOCAI_PROCESSOR}={name!r} is not a processor resource name: set it to "
            f"projects/<project>/locations/<us|eu>/processors/<processor id> (the Layout Parser processor's "
            f"'Prediction endpoint' in the console, without the ':process' suffix)"
        )
    return m.groupdict()


def processor_name() -> str:
    p = docai_processor()
    name = f"projects/{p['project']}/locations/{p['location']}/processors/{p['processor_id']}"
    return name + (f"/processorVersions/{p['processor_version']}" if p["processor_version"] else "")


def is_remote(root) -> bool:
    return str(root).startswith("gs://")


# issue 15: one LLM rate limiter shared by every task of the night (docverify.ratelimit)
VAR_LLM_RPM = "docverify_llm_rpm"
VAR_LLM_TPM = "docverify_llm_tpm"
VAR_LLM_LIMITER_HOSTS = "docverify_llm_limiter_hosts"
VAR_LLM_THROTTLE_WAIT = "docverify_llm_throttle_wait_s"


def llm_quota(key: str) -> dict[str, Any]:
    """The ``limiter`` and ``throttle`` of an LLMJudge: requests/tokens per minute of the model
    (Variables ``docverify_llm_rpm`` / ``docverify_llm_tpm``, 0 = unlimited), shared by every task
    process of this machine through a state file under ``$AIRFLOW_HOME/docverify-llm-limiter``,
    each of ``docverify_llm_limiter_hosts`` machines taking its share; a call waits for the quota at
    most ``docverify_llm_throttle_wait_s`` (default 1200) seconds, then the task fails (JudgeThrottled)
    and is retried — a throttled document is never escalated."""
    import os

    from docverify.llm import ThrottlePolicy
    from docverify.ratelimit import RateLimiter

    rpm, tpm = float(_variable(VAR_LLM_RPM, "0") or 0), float(_variable(VAR_LLM_TPM, "0") or 0)
    hosts = max(1, int(_variable(VAR_LLM_LIMITER_HOSTS, "1") or 1))
    home = pathlib.Path(os.environ.get("AIRFLOW_HOME") or pathlib.Path.home() / "airflow")
    limiter = (RateLimiter(key, rpm=rpm, tpm=tpm, share=1 / hosts, state_dir=home / "docverify-llm-limiter")
               if rpm or tpm else None)
    return {"limiter": limiter, "throttle": ThrottlePolicy(max_wait_s=float(_variable(VAR_LLM_THROTTLE_WAIT, "1200")))}
