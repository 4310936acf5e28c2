"""What the settings build (issue 41 item 2, ADR 0055): the judge, the verification policy, the CR_V2
jury, the V5 second opinion, an LLM judge on one connection and its quota. Each is handed the
:class:`~docverify_airflow.config.settings.Settings` of its task (``config.settings(context)``, read
once per task); none reads a Variable itself."""

from __future__ import annotations

import logging
import os
import pathlib
from typing import TYPE_CHECKING, TypedDict

from docverify.domain import policy as P
from docverify.judging.judges import Judge, OfflineJudge
from docverify_airflow.config.settings import Settings
from docverify_airflow.config.switches import policy_fields
from docverify_airflow.config.variables import ConfigUnavailable

if TYPE_CHECKING:
    from docverify.arbiters.jury import Jury
    from docverify.arbiters.second_opinion import SecondOpinion
    from docverify.llm.faults import ThrottlePolicy
    from docverify.llm.judge import LLMJudge
    from docverify.llm.ratelimit import RateLimiter

log = logging.getLogger("docverify_airflow.config")  # the name the task logs and tests have known it by
JUDGE_CONN = Settings.variable("judge_conn_id")


def judge(s: Settings) -> Judge:
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
    if s.judge == "offline":
        return OfflineJudge()
    classifier = llm_judge(s.llm_conn, s)
    if s.judge_conn == s.llm_conn:
        log.warning("the classification is verified by its own model: Variable %s is empty (or names %s, the "
                    "classifier's connection), so the judgments run on the classifier's model %s and share its "
                    "blind spots; name another model's connection in %s (ADR 0034)",
                    JUDGE_CONN, s.llm_conn, classifier.model_id, JUDGE_CONN)
        return classifier
    judge = llm_judge(s.judge_conn, s, classifier=classifier)
    if judge.self_verifying:
        log.warning("the classification is verified by its own model: the connections %s (classifier) and %s "
                    "(judge) give the same model %s; name another model in %s (ADR 0034)",
                    s.llm_conn, s.judge_conn, judge.model_id, JUDGE_CONN)
    else:
        log.info("the classifier's model is %s (connection %s); the judgments run on %s (connection %s)",
                 classifier.model_id, s.llm_conn, judge.model_id, s.judge_conn)
    return judge


def policy(s: Settings) -> P.VerifyPolicy:
    """The verification policy of the Variables ``docverify_blocker_repair`` (off),
    ``docverify_check_patient_identity`` (on), ``docverify_min_primary_confidence`` (0 = off) and
    ``docverify_label_text_guard`` (on), ``docverify_admin_trap_per_segment`` (on) and
    ``docverify_admin_trap_counts_mentions`` (off), ``docverify_admin_trap_spares_read_reports`` (off)
    (:data:`POLICY_FIELDS`):
    the tasks pass it to the verify and retry stages (in their :class:`~docverify.pipeline.document.VerifyDeps`) and to
    the batch-mode collect pass (``policy=…``), never through the judge."""
    return P.VerifyPolicy.from_overrides({p: getattr(s, f) for f, p in policy_fields(type(s)).items()})


def jury(s: Settings) -> Jury | None:
    """The CR_V2 jury of Variable ``docverify_jury`` (``off``, the default; ``cr_v2``; ``cr_v1``):
    jurors A, B, C on the connections of ``docverify_jury_conn_ids`` (three comma-separated
    connection ids; empty = all three on the judge's connection, :attr:`Settings.judge_conn`: the
    jury reviews the judgments, so it sits on the judging side, ADR 0034); C uses the evidence-facet
    prompt. At most ``docverify_jury_max_findings`` findings per judgment are reviewed."""
    if s.jury == "off":
        return None
    from docverify.arbiters.jury import Juror, Jury

    conns = s.jury_conns()
    llms: dict[str, LLMJudge] = {}
    for c in conns:
        if c not in llms:
            llms[c] = llm_judge(c, s)
    jurors = [Juror("A", llms[conns[0]], "JURY"), Juror("B", llms[conns[1]], "JURY"),
              Juror("C", llms[conns[2]], "JURY_EVIDENCE")]
    return Jury(jurors, version=s.jury.removeprefix("cr_"), max_findings=s.jury_max_findings)


def second_opinion(s: Settings) -> SecondOpinion | None:
    """The V5 second opinion of Variable ``docverify_v5_second_opinion`` (``off``, the default,
    or ``on``) on the connection ``docverify_v5_second_opinion_conn_id`` (empty = the judge's
    connection, :attr:`Settings.judge_conn`: a verifying opinion, never by default the classifier's
    model when a separate judge is configured, ADR 0034)."""
    if not s.second_opinion:
        return None
    from docverify.arbiters.second_opinion import SecondOpinion

    return SecondOpinion(llm_judge(s.second_opinion_conn_id or s.judge_conn, s))


def llm_judge(conn_id: str, s: Settings, *, classifier: LLMJudge | None = None) -> LLMJudge:
    """An :class:`~docverify.llm.judge.LLMJudge` on the model of Airflow connection ``conn_id``;
    ``classifier``: the LLMJudge that classifies when it is another connection's (ADR 0034)."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook

    from docverify.llm.cache import VerdictCache
    from docverify.llm.faults import BackoffRetry
    from docverify.llm.judge import LLMJudge
    from docverify.storage.store import ArtifactStore

    try:
        hook = PydanticAIHook.get_hook(conn_id)
    except AirflowNotFoundException as exc:  # missing: deterministic
        raise ValueError(f"the LLM connection {conn_id!r} could not give a model (it does not exist); create it "
                         f"in airflow_settings.yaml or name another one in the Variable that names it ({Settings.variable('llm_conn_id')} "
                         f"for the classifier, {Settings.variable('judge_conn_id')} for the judge)") from exc
    except Exception as exc:  # could not be read (metadata DB / API server): transient, the task is retried
        raise ConfigUnavailable(f"the LLM connection {conn_id!r} could not be read ({type(exc).__name__}); "
                                f"check the Airflow metadata database / API server, then clear the task") from None
    try:
        model = hook.get_conn()
    except Exception as exc:
        raise ValueError(
            f"the LLM connection {conn_id!r} could not give a model ({type(exc).__name__}: {exc}); create it "
            f"(conn type pydanticai_vertex, extra {{\"model\": \"google-cloud:gemini-2.5-flash\", \"project\": …}}) "
            f"in airflow_settings.yaml or name another one in the Variable {Settings.variable('llm_conn_id')}"
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


class LLMQuota(TypedDict):
    """An LLMJudge's quota arguments (:func:`llm_quota`)."""

    limiter: RateLimiter | None
    throttle: ThrottlePolicy


def llm_quota(key: str, s: Settings) -> LLMQuota:
    """The ``limiter`` and ``throttle`` of an LLMJudge: requests/tokens per minute of the model
    (Variables ``docverify_llm_rpm`` / ``docverify_llm_tpm``, 0 = unlimited), shared by every task
    process of this machine through a state file under ``$AIRFLOW_HOME/docverify-llm-limiter``,
    each of ``docverify_llm_limiter_hosts`` machines taking its share; a call waits for the quota or an
    outage (429, overload, 5xx: ADR 0018) at most ``docverify_llm_throttle_wait_s`` (default 1200)
    seconds, then the task fails (``ServiceOutage``, a JudgeThrottled)
    and is retried — a throttled document is never escalated."""
    from docverify.llm.faults import ThrottlePolicy
    from docverify.llm.ratelimit import RateLimiter

    home = pathlib.Path(os.environ.get("AIRFLOW_HOME") or pathlib.Path.home() / "airflow")
    limiter = (RateLimiter(key, rpm=s.llm_rpm, tpm=s.llm_tpm, share=1 / s.llm_limiter_hosts,
                           state_dir=home / "docverify-llm-limiter") if s.llm_rpm or s.llm_tpm else None)
    return {"limiter": limiter, "throttle": ThrottlePolicy(max_wait_s=s.llm_throttle_wait_s)}


