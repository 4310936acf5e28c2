"""``LLMJudge``: the classifier and the judgment phases (V2/V3/V4: the verifier registry's) on a
pydantic-ai model.

Every call is one pydantic-ai :class:`~pydantic_ai.Agent` run with a structured ``output_type``
(the pydantic models below). Output that does not match the schema — an unknown issue code, a
severity below the catalogue's, a missing field — is asked again at most ``output_retries`` times
by pydantic-ai; after that, and on any other fault of the model call (HTTP error, timeout), a
judgment becomes one MAJOR, non-fixable ``VERIFICATION_INCOMPLETE`` issue, so the document
escalates; a failed classification raises :class:`ClassificationError`. Nothing is silently
accepted.

Throttling is not a fault of the model (ADR 0014): a 429 / ``RESOURCE_EXHAUSTED`` is waited out
(the provider's ``Retry-After``, or the shared :class:`~docverify.llm.ratelimit.RateLimiter` every task
of the night reserves its requests from) without spending the per-call failure budget of
:class:`BackoffRetry`, up to :class:`ThrottlePolicy`'s waiting budget; beyond it — or when the
provider says the quota is exhausted for the day — the call raises
:class:`~docverify.judging.judges.JudgeThrottled`, the only exception that leaves a judgment method: the
stage fails the task and Airflow retries it later, the document is never escalated for it.

Issue 22: overload (503 UNAVAILABLE), 500 INTERNAL, any 5xx and an unreachable service are the same
family as throttling (:func:`~docverify.llm.faults.fault_family` ``OUTAGE``): waited out under the same
budget, then :class:`~docverify.llm.faults.ServiceOutage` (a ``JudgeThrottled``). A misconfigured
connection (invalid key, unknown model, permission denied, credentials that cannot refresh) raises
:class:`~docverify.llm.faults.ConfigurationFault` on the first answer, a daily quota
:class:`~docverify.llm.faults.DailyQuotaExhausted` naming when it resets; both are ``JudgeThrottled``
too (the stages let them through) and fail the Airflow task without retries. Only a fault of the
document's own request (content blocked, an unusable answer after re-asks, a 400, a timeout) is its
``VERIFICATION_INCOMPLETE``.

The user message of every call puts the data first and the task last::

    <document total_pages="N"><page number="1">…</page>…</document>   (fenced page text)
    <classification>{…}</classification>                             (judgments only)
    the prompt file's instructions

so the calls about one document share a prefix (context caching), and everything the model must
treat as data sits inside a fence whose look-alike tags in the text are escaped
(:func:`pydantic_ai.framing.wrap`).

Verdict cache: a call's key is the sha256 of the model id, the prompt (name + hash of the file
+ hash of the shared framing: system instructions, rendering version, output schema), the model
settings, and a canonical JSON of exactly the inputs the call reads (:func:`cache_key`). The
judgment inputs leave out the shares and the derived fields (``segment_share``,
``overall_share``, ``segment_page_count``, ``number_of_segments``), so the retry loop's share
normalisation does not change a key and a retry costs no LLM call.

The pieces live in modules of one job each, imported from where they are defined (ADR 0032):
:mod:`docverify.llm.prompts` (prompt files, framing, the inputs of each call),
:mod:`docverify.llm.schemas` (the output models), :mod:`docverify.llm.cache` (cache keys, the
verdict cache), :mod:`docverify.llm.faults` (transient faults, throttling, the retry policies);
this module is the judge itself.

Logs carry only doc ids, prompt names/hashes, the model id, cache hit/miss and token counts —
never page text, snippets or model messages (PHI).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from pydantic import BaseModel, ValidationError
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model, ModelRequestContext, infer_model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

from docverify.domain.codes import make_issue
from docverify.domain.models import (
    ClassificationOutput,
    DocumentBundle,
    Issue,
)
from docverify.judging.judges import (
    BLIND_READINGS,
    ClassifyResult,
    Judge,
    JudgeThrottled,
    JudgmentResult,
    Usage,
)
from docverify.llm.cache import FRAMING_HASHES, VerdictCache, cache_key, framing_hash
from docverify.llm.cost import answered_price_model, price_model_of
from docverify.llm.faults import (
    CONFIGURATION,
    DAILY_QUOTA,
    OUTAGE,
    BackoffRetry,
    ClassificationError,
    ConfigurationFault,
    DailyQuotaExhausted,
    RetryPolicy,
    ServiceOutage,
    ThrottlePolicy,
    exception_chain,
    fault_family,
    is_throttled,
    next_pacific_midnight,
)
from docverify.llm.prompts import (
    PROMPTS,
    SYSTEM_INSTRUCTIONS,
    classify_inputs,
    load_prompt,
    prompt_hash,
    prompts_of,
    register_text_prompts,
    render_user_prompt,
)
from docverify.llm.ratelimit import LimiterWaitExceeded, RateLimiter
from docverify.llm.schemas import OUTPUT_TYPES
from docverify.verify.llm_io import Finding, JudgmentFindings
from docverify.verify.registry import REGISTRY, Registry

logger = logging.getLogger(__name__)


def _fault_label(exc: BaseException) -> str:
    """A log-safe name of a service fault: its HTTP status or class, never the provider's body."""
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}" if status else type(exc).__name__

__all__ = ["LLMJudge"]


@dataclass
class _AttemptCounter(AbstractCapability[None]):
    """Counts model request attempts of one run, including those that end in an error (which
    pydantic-ai's ``RunUsage.requests`` does not count), and passes each through the shared
    limiter's departure gate (:meth:`RateLimiter.depart`) right before it is sent — after the
    agent's own set-up, which can stall an event loop long enough to bunch requests up."""

    attempts: int = 0
    limiter: RateLimiter | None = None
    waited: float = 0.0  # seconds spent at the departure gate

    async def prepare_model_request(
        self, ctx: RunContext[None], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.attempts += 1
        if self.limiter is not None:
            self.waited += await self.limiter.depart()
        return request_context


class _ModelCall:
    """The model requests of one call: the circuit breaker's gate, the shared limiter's reservations,
    the retry policy, and throttling and outages waited out under the judge's :class:`ThrottlePolicy`
    budget (then :class:`ServiceOutage`); a configuration fault or a daily quota raises at once."""

    def __init__(self, judge: LLMJudge, kind: str, doc_id: str, user_prompt: str) -> None:
        self.judge, self.kind, self.doc_id, self.user_prompt = judge, kind, doc_id, user_prompt
        self.agent = judge._agents[kind]
        self.limiter = judge.limiter
        self.counter = _AttemptCounter(limiter=self.limiter)
        self.run_usage = RunUsage()
        # what one request is assumed to cost the tokens-per-minute budget before it is sent (~4
        # characters a token); corrected from the real usage afterwards. Input tokens only (ADR 0018):
        # Gemini's TPM quota (GenerateContentInputTokensPerModelPerMinute) does not count output or thoughts
        self.estimate = (len(user_prompt) + len(SYSTEM_INSTRUCTIONS)) // 4
        self.waited = 0.0  # seconds this call spent waiting for the quota (ThrottlePolicy.max_wait_s)
        self.reserved = [0, 0]  # requests and tokens reserved from the limiter
        self.throttles = 0

    def spent(self) -> float:
        """Seconds waited: at the limiter's slots, its departure gate and 429 pauses."""
        return self.waited + self.counter.waited

    async def breaker_gate(self) -> None:
        """While the circuit is open (``breaker_threshold`` consecutive overload/5xx answers to this
        judge), one call — the probe — sends; the others wait here (counted in their budget)."""
        judge = self.judge
        step = max(0.01, min(1.0, judge.throttle.initial_wait_s))
        while judge._circuit_open() and judge._prober not in (None, self):
            left = judge.throttle.max_wait_s - self.spent()
            if left <= 0:
                raise self.throttled(f"circuit open after {judge._outage_streak} consecutive outage answers")
            await asyncio.sleep(min(step, left))
            self.waited += min(step, left)
        if judge._circuit_open():
            judge._prober = self  # this call is the circuit breaker's probe

    async def attempt(self) -> BaseModel:
        await self.breaker_gate()
        if self.limiter is not None:  # not counted as a failure by the retry policy: re-raised as is
            self.waited += await self.limiter.acquire(
                self.estimate, max_wait_s=max(0.0, self.judge.throttle.max_wait_s - self.spent()),
                depart=False)  # the gate: _AttemptCounter, at the request
            self.reserved[0] += 1
            self.reserved[1] += self.estimate
        result = await self.agent.run(
            self.user_prompt, usage=self.run_usage, capabilities=[self.counter], timeout=self.judge.timeout_s
        )
        # priced by the model that answered (with fallback connections, not the first in the list)
        self.judge.price_model = answered_price_model(self.judge.price_model, result.new_messages())
        return result.output

    def throttled(self, why: str) -> JudgeThrottled:
        judge, budget = self.judge, self.judge.throttle.max_wait_s
        logger.warning(
            "llm %s doc_id=%s prompt=%s model=%s throttled: %s (waited %.0fs of %.0fs, %d requests)",
            self.kind, self.doc_id, judge._prompts[self.kind], judge.model_id, why, self.spent(), budget,
            self.counter.attempts,
        )
        return ServiceOutage(
            f"{judge.name}: the {self.kind} call for document {self.doc_id} was held back by the model's quota or "
            f"an outage of the service ({why}; waited {self.spent():.0f}s of a {budget:.0f}s budget, "
            f"Variable docverify_llm_throttle_wait_s); the task fails and is retried later"
        )

    async def run(self) -> tuple[BaseModel | None, BaseException | None]:
        """(the answer, None), or (None, the fault of the document's own request)."""
        try:
            while True:
                try:
                    if self.judge.retry_policy is None:
                        output = await self.attempt()
                    else:
                        output = await self.judge.retry_policy.run(self.attempt)
                    self.judge._outage_streak = 0  # an answer: the circuit closes
                    return output, None
                except LimiterWaitExceeded as exc:
                    raise self.throttled(f"next free slot in {exc.wait_s:.0f}s") from None
                except JudgeThrottled:  # the breaker's gate, past the budget: never the document's fault
                    raise
                except Exception as exc:  # noqa: BLE001 - every fault of the call becomes a result
                    if not await self.wait_out(exc):
                        return None, exc
        finally:
            self.release()

    async def wait_out(self, exc: Exception) -> bool:
        """True when ``exc`` is an outage waited out (the next attempt follows); False when it is the
        document's own fault. Raises on a configuration fault, a daily quota, or past the budget."""
        judge, family = self.judge, fault_family(exc)
        if family == CONFIGURATION:
            raise judge._configuration_fault(self.kind, self.doc_id, exc) from None
        if family == DAILY_QUOTA:
            raise judge._daily_quota(self.kind, self.doc_id, exc) from None
        if family != OUTAGE:  # this document's own request: its verdict
            return False
        self.throttles += 1
        if not is_throttled(exc):  # overload / 5xx / unreachable: the breaker counts it (not a 429:
            judge._outage_streak += 1  # the limiter paces those)
            if judge._outage_streak == judge.breaker_threshold:
                logger.warning("llm model=%s circuit open after %d consecutive outage answers: one "
                               "probe at a time", judge.model_id, judge._outage_streak)
        pause = judge.throttle.wait(exc, self.throttles)
        if self.spent() + pause > judge.throttle.max_wait_s:
            raise self.throttled(f"{self.throttles} x {_fault_label(exc)}, next wait {pause:.0f}s") from None
        logger.info("llm %s doc_id=%s model=%s %s number %d: waiting %.1fs (not a failure)",
                    self.kind, self.doc_id, judge.model_id, _fault_label(exc), self.throttles, pause)
        if self.limiter is not None and not self.limiter.unlimited:
            self.limiter.pause(pause)  # every process waits; the next attempt's reservation counts it
        else:
            await asyncio.sleep(pause)
            self.waited += pause
        return True

    def release(self) -> None:
        """The probe's turn given back; the limiter charged the requests and tokens really spent."""
        if self.judge._prober is self:
            self.judge._prober = None
        if self.limiter is not None and self.reserved[0]:
            self.limiter.charge(requests=max(0, self.counter.attempts - self.reserved[0]),
                                tokens=self.run_usage.input_tokens - self.reserved[1] if self.run_usage.input_tokens else 0)

    def usage(self) -> Usage:
        u = Usage()
        u.llm_calls = self.counter.attempts
        u.input_tokens = self.run_usage.input_tokens
        u.output_tokens = self.run_usage.output_tokens
        u.cached_tokens = self.run_usage.cache_read_tokens
        return u


@dataclass
class JudgeOutcome:
    output: BaseModel | None
    usage: Usage
    key: str
    error: BaseException | None = None
    cache_hit: bool = False


class LLMJudge(Judge):
    """Classifier and V2/V3/V4 judgments on a pydantic-ai model (Gemini in production,
    ``FunctionModel``/``TestModel`` in tests).

    Args:
        model: a ``pydantic_ai.models.Model`` or a model name (``"google:gemini-2.5-flash"``,
            ``"google-cloud:…"`` for Vertex AI, ``"test"``). A name is resolved here, so missing
            credentials fail at construction, not per document.
        model_id: stable id for reports and the cache key (``name`` = ``llm:<model_id>``).
        cache: verdict cache, or None for none.
        output_retries: how many times schema-invalid output is asked again (calls per
            judgment ≤ output_retries + 1).
        timeout_s: limit for one whole call (including its output retries), or None.
        model_settings: pydantic-ai model settings (default: temperature 0); part of the key.
        retry_policy: transient-fault retries around each call (default :class:`BackoffRetry`:
            4 attempts, exponential backoff with jitter); None calls once.
        limiter: the night's shared :class:`~docverify.llm.ratelimit.RateLimiter` of this model; every
            model request reserves a slot from it first (None: no limit).
        throttle: how long a call may wait for the quota or a service outage (429, overload,
            5xx) before :class:`ServiceOutage` (a :class:`JudgeThrottled`; default
            :class:`ThrottlePolicy`: 20 min).
        connection: the Airflow connection the model came from, named in a
            :class:`ConfigurationFault`'s message.
        breaker_threshold: consecutive overload/5xx answers that open the circuit breaker (one
            probe request at a time until an answer; 0 = off).
        registry: the verifiers it judges (default: :data:`docverify.verify.registry.REGISTRY`):
            each one's prompt, inputs and findings model come from its spec.
        classifier: the judge whose model classifies, when it is not this one's (ADR 0034: Variable
            ``docverify_judge_conn_id`` names the judgments' connection apart from the classifier's):
            :meth:`classify`, :attr:`classifier_id` and the ``classify`` cache key are its; the
            judgments (and their cache keys) are this judge's. None: this model does both.
    """

    @property
    def classifier_id(self) -> str:
        """The model and the classifier prompt's hash: a new prompt classifies again on a re-run."""
        if self.classifier is not None:
            return self.classifier.classifier_id
        return f"{self.name}+{PROMPTS['classify']}:{prompt_hash(PROMPTS['classify'])}"

    @property
    def classifying(self) -> LLMJudge:
        """The judge that classifies (its model answers ``classify``; its price prices that usage)."""
        return self.classifier if self.classifier is not None else self

    @property
    def classifier_model_id(self) -> str:
        """The id of the model that classifies (:attr:`model_id` judges)."""
        return self.classifying.model_id

    @property
    def self_verifying(self) -> bool:
        """Whether the classification is judged by the model that made it (ADR 0034: a warning in the
        task log and the batch report)."""
        return self.classifier_model_id == self.model_id

    def __init__(
        self,
        model: Model | str,
        model_id: str,
        *,
        cache: VerdictCache | None = None,
        output_retries: int = 2,
        timeout_s: float | None = 120.0,
        model_settings: ModelSettings | None = None,
        retry_policy: RetryPolicy | None | Literal["default"] = "default",
        limiter: RateLimiter | None = None,
        throttle: ThrottlePolicy | None = None,
        connection: str = "",
        breaker_threshold: int = 5,
        registry: Registry = REGISTRY,
        classifier: LLMJudge | None = None,
        blind_reading: str = "instead",
    ):
        if output_retries < 0:
            raise ValueError("output_retries must be >= 0")
        if blind_reading not in BLIND_READINGS:
            raise ValueError(f"blind_reading must be one of {', '.join(BLIND_READINGS)}, not {blind_reading!r}")
        #: how a verifier with a blind reading (V2) is asked (ADR 0034): ``instead`` of its labelled prompt
        #: (the specification's call budget, the default), ``before`` it (one more call), or ``off``
        self.blind_reading = blind_reading
        self.model = infer_model(model)
        self.model_id = model_id
        self.name = f"llm:{model_id}"
        self.price_model = price_model_of(self.model)  # a FallbackModel: known once a model answered
        self.cache = cache
        self.output_retries = output_retries
        self.timeout_s = timeout_s
        self.model_settings: ModelSettings = (
            model_settings if model_settings is not None else ModelSettings(temperature=0.0)
        )
        self.retry_policy: RetryPolicy | None = BackoffRetry() if retry_policy == "default" else retry_policy
        self.limiter = limiter
        self.throttle = throttle if throttle is not None else ThrottlePolicy()
        self.connection = connection
        #: circuit breaker (ADR 0018): after this many consecutive overload/5xx answers to this judge,
        #: calls wait and one probe goes first until an answer closes it (0 = off); per process — the
        #: shared limiter's pause spreads the wait to the night's other processes
        self.breaker_threshold = breaker_threshold
        self._outage_streak = 0
        self._prober: _ModelCall | None = None
        self.registry = registry
        self.classifier = classifier
        self._set_up_calls(registry, output_retries)

    def _set_up_calls(self, registry: Registry, output_retries: int) -> None:
        """The tables of the call kinds of ``registry``: prompt names, output types, the blind readings'
        verifiers, framing hashes (:func:`~docverify.llm.cache.framing_hash`) and one agent each."""
        register_text_prompts(registry)
        self._prompts: dict[str, str] = prompts_of(registry)
        default_judged = {*REGISTRY.judged_ids, *(s.blind_kind for s in REGISTRY.judged if s.blind)}
        self._output_types: dict[str, type[BaseModel]] = {
            **{k: v for k, v in OUTPUT_TYPES.items() if k not in default_judged},
            **{spec.agent: cast("type[BaseModel]", spec.findings_model) for spec in registry.judged},  # check() ensures it
            # the blind readings asked before a judgment (ADR 0034)
            **{spec.blind_kind: cast("type[BaseModel]", spec.blind_model) for spec in registry.judged if spec.blind},
        }
        self._blind_kinds: dict[str, str] = {spec.blind_kind: spec.agent for spec in registry.judged if spec.blind}
        self._framing: dict[str, str] = {
            kind: FRAMING_HASHES[kind] if OUTPUT_TYPES.get(kind) is output_type else framing_hash(output_type)
            for kind, output_type in self._output_types.items()
        }
        self._agents: dict[str, Agent[None, BaseModel]] = {
            kind: Agent(
                self.model,
                output_type=output_type,
                instructions=SYSTEM_INSTRUCTIONS,
                name=f"docverify-{kind}",
                model_settings=self.model_settings,
                retries={"output": output_retries},
            )
            for kind, output_type in self._output_types.items()
        }

    # ------------------------------------------------------------------ keys
    def _inputs(
        self, kind: str, bundle: DocumentBundle, classification: ClassificationOutput | None
    ) -> dict[str, object]:
        """What a call of ``kind`` reads (a :class:`~docverify.verify.llm_io.DocumentInputs` or an
        extension of it), as the plain dict :meth:`_call` takes."""
        if kind == "classify":
            return dict(classify_inputs(bundle))
        assert classification is not None
        if kind in self._blind_kinds:  # a blind reading: the text without the classifier's labels (ADR 0034)
            blind_inputs = self.registry[self._blind_kinds[kind]].blind_inputs
            assert blind_inputs is not None, kind
            return dict(blind_inputs(bundle, classification))
        inputs = self.registry[kind].llm_inputs
        assert inputs is not None, kind
        return dict(inputs(bundle, classification))

    def _key(self, kind: str, inputs: Mapping[str, object]) -> str:
        return cache_key(
            self.model_id,
            self._prompts[kind],
            inputs,
            framing=self._framing[kind],
            settings=self.model_settings,
        )

    def cache_key_for(
        self, kind: str, bundle: DocumentBundle, classification: ClassificationOutput | None = None
    ) -> str:
        """The verdict-cache key of a call (``kind``: ``classify``, a judged verifier's id or its blind
        reading's kind, ``V2_BLIND``); with a separate classifier, ``classify`` is the classifier's key."""
        if kind == "classify" and self.classifier is not None:
            return self.classifier.cache_key_for(kind, bundle)
        return self._key(kind, self._inputs(kind, bundle, classification))

    # ------------------------------------------------------------------ one call
    async def _cached(self, kind: str, doc_id: str, key: str) -> JudgeOutcome | None:
        """The verdict cache's answer to a call, validated against its output type; None on a miss
        (an unreadable or invalid entry is one: a cache never fails a call)."""
        if self.cache is None:
            return None
        try:
            cached = await asyncio.to_thread(self.cache.get, key)
        except Exception as exc:  # noqa: BLE001 - a cache never fails a call
            logger.warning("llm %s doc_id=%s cache read failed error=%s", kind, doc_id, type(exc).__name__)
            return None
        if cached is None:
            return None
        try:
            output = self._output_types[kind].model_validate(cached)
        except ValidationError:
            logger.warning("llm %s doc_id=%s cache entry invalid key=%s: treated as a miss", kind, doc_id, key)
            return None
        return JudgeOutcome(output, Usage(cache_hits=1), key, cache_hit=True)

    async def _call(self, kind: str, doc_id: str, inputs: dict[str, object]) -> JudgeOutcome:
        """One call of ``kind``: the verdict cache's answer, else the model's (:class:`_ModelCall`),
        written to the cache; a fault of the document's own request is the outcome's ``error``."""
        prompt_name = self._prompts[kind]
        try:
            key = self._key(kind, inputs)
            p_hash = prompt_hash(prompt_name)
            _, instructions = load_prompt(prompt_name)
        except Exception as exc:  # noqa: BLE001 - a missing prompt file is a fault like any other
            logger.warning(
                "llm %s doc_id=%s prompt=%s model=%s failed error=%s",
                kind, doc_id, prompt_name, self.model_id, type(exc).__name__,
            )
            return JudgeOutcome(None, Usage(), "", error=exc)

        hit = await self._cached(kind, doc_id, key)
        if hit is not None:
            logger.info(
                "llm %s doc_id=%s prompt=%s prompt_hash=%s model=%s cache=hit key=%s",
                kind, doc_id, prompt_name, p_hash[:12], self.model_id, key,
            )
            return hit

        call = _ModelCall(self, kind, doc_id, render_user_prompt(inputs, instructions))
        output, error = await call.run()
        usage = call.usage()
        if error is not None:
            logger.warning(
                "llm %s doc_id=%s prompt=%s prompt_hash=%s model=%s cache=miss calls=%d "
                "input_tokens=%d output_tokens=%d failed error=%s",
                kind, doc_id, prompt_name, p_hash[:12], self.model_id, usage.llm_calls,
                usage.input_tokens, usage.output_tokens, type(error).__name__,
            )
            return JudgeOutcome(None, usage, key, error=error)

        logger.info(
            "llm %s doc_id=%s prompt=%s prompt_hash=%s model=%s cache=miss key=%s calls=%d "
            "input_tokens=%d output_tokens=%d cached_tokens=%d",
            kind, doc_id, prompt_name, p_hash[:12], self.model_id, key, usage.llm_calls,
            usage.input_tokens, usage.output_tokens, usage.cached_tokens,
        )
        assert output is not None
        await self._remember(kind, doc_id, key, output, prompt_name, p_hash)
        return JudgeOutcome(output, usage, key)

    async def _remember(self, kind: str, doc_id: str, key: str, output: BaseModel, prompt_name: str,
                        p_hash: str) -> None:
        """The verdict into the cache (a failed write is logged: a cache never fails a call)."""
        if self.cache is None:
            return
        try:
            await asyncio.to_thread(
                self.cache.put, key, output.model_dump(mode="json"),
                model_id=self.model_id, prompt=prompt_name, prompt_hash=p_hash, call=kind,
            )
        except Exception as exc:  # noqa: BLE001
            logger.warning("llm %s doc_id=%s cache write failed error=%s", kind, doc_id, type(exc).__name__)

    def _circuit_open(self) -> bool:
        return bool(self.breaker_threshold) and self._outage_streak >= self.breaker_threshold

    def _conn_text(self) -> str:
        conn = self.connection or "docverify_llm"
        return (f"the LLM connection {conn!r} (Variable docverify_llm_conn_id, default docverify_llm, or "
                f"docverify_judge_conn_id for the judgments; model {self.model_id})")

    def _configuration_fault(self, kind: str, doc_id: str, exc: BaseException) -> ConfigurationFault:
        """The message names the connection and the fix, never the provider's body."""
        status = getattr(exc, "status_code", None)
        what = f"{type(exc).__name__}" + (f", HTTP {status}" if status else "")
        if type(exc).__name__ in ("RefreshError", "DefaultCredentialsError", "ReauthFailError") or any(
                type(e).__name__ == "RefreshError" for e in exception_chain(exc)):
            fix = "its credentials cannot be refreshed: renew the service-account key / credentials of the connection"
        elif status == 404 or type(exc).__name__.endswith("NotFoundError"):
            fix = "the model is unknown or retired: name an available model in the connection's extra (\"model\")"
        elif status == 403 or "PERMISSION" in str(getattr(exc, "provider_error_code", "") or "").upper():
            fix = "permission denied: grant the key / service account access to the model (or its project)"
        else:
            fix = "the API key or credentials were refused: set a valid key (the connection's password) or credentials"
        logger.error("llm %s doc_id=%s model=%s configuration fault (%s): %s", kind, doc_id, self.model_id, what, fix)
        return ConfigurationFault(f"{self.name}: {self._conn_text()} is misconfigured ({what}): {fix}; then clear "
                                  f"the task. No document was marked for it.")

    def _daily_quota(self, kind: str, doc_id: str, exc: BaseException) -> DailyQuotaExhausted:
        resets = next_pacific_midnight()
        logger.error("llm %s doc_id=%s model=%s daily quota exhausted (%s): resets at %s",
                     kind, doc_id, self.model_id, type(exc).__name__, resets)
        return DailyQuotaExhausted(
            f"{self.name}: the daily quota (or billing) of {self._conn_text()} is exhausted ({type(exc).__name__}; "
            f"quota exhausted); Gemini API daily quotas reset at midnight Pacific time, next at {resets}: clear the "
            f"task after that, or raise the quota / use another connection. No document was marked for it.",
            resets_at=resets)

    async def ask(self, kind: str, doc_id: str, inputs: dict[str, object]) -> tuple[BaseModel | None, Usage, str]:
        """One cached, retried, bounded call of ``kind`` (the jury's and the V5 second opinion's
        calls): (validated output or None, usage, error class name or "")."""
        outcome = await self._call(kind, doc_id, inputs)
        err = "" if outcome.error is None and outcome.output is not None else (
            type(outcome.error).__name__ if outcome.error is not None else "NoOutput")
        return outcome.output, outcome.usage, err

    # ------------------------------------------------------------------ classify
    async def classify(self, bundle: DocumentBundle) -> ClassifyResult:
        if self.classifier is not None:  # another model classifies (ADR 0034)
            return await self.classifier.classify(bundle)
        outcome = await self._call("classify", bundle.doc_id, dict(classify_inputs(bundle)))
        if outcome.error is not None or outcome.output is None:
            err = type(outcome.error).__name__ if outcome.error is not None else "NoOutput"
            raise ClassificationError(
                f"{self.name} could not classify document {bundle.doc_id}: {err} "
                f"(after at most {self.output_retries} re-asks for schema-invalid output)",
                error_class=err,
                usage=outcome.usage,
                cause=outcome.error,
            ) from None
        answer = outcome.output
        try:
            classification = ClassificationOutput.model_validate(
                {**answer.model_dump(mode="json"), "doc_id": bundle.doc_id, "classifier": self.name}
            )
        except ValidationError as exc:
            raise ClassificationError(
                f"{self.name} returned a classification of document {bundle.doc_id} that does not "
                f"match ClassificationOutput (ValidationError)",
                error_class="ValidationError",
                usage=outcome.usage,
                cause=exc,
            ) from None
        return ClassifyResult(classification, self.name, outcome.usage)

    # ------------------------------------------------------------------ judgments
    async def judge(
        self, agent: str, bundle: DocumentBundle, classification: ClassificationOutput
    ) -> JudgmentResult:
        """The LLM judgment of verifier ``agent``: its spec's inputs, prompt and findings model; a
        verifier with a blind reading (V2, ADR 0034) is asked blind — the segments' text without the
        classifier's labels — instead of its labelled prompt (``blind_reading="instead"``, the default:
        the specification's call budget) or before it (``"before"``: both calls are made whatever the other
        answers, and batch mode's collect pass records both); the blind comparison's issues come first."""
        spec = self.registry[agent]
        usage = Usage()
        issues: list[Issue] = []
        mode = self.blind_reading if spec.blind else "off"
        if mode != "off":
            blind_issues, blind_usage = await self._blind(agent, bundle, classification)
            issues += blind_issues
            usage.add(blind_usage)
            if mode == "instead":
                return JudgmentResult(issues, self.name, usage)
        try:
            inputs = self._inputs(agent, bundle, classification)
        except Exception as exc:  # noqa: BLE001
            return JudgmentResult([*issues, self._incomplete(agent, exc)], self.name, usage)
        outcome = await self._call(agent, bundle.doc_id, inputs)
        usage.add(outcome.usage)
        if outcome.error is not None or outcome.output is None:
            return JudgmentResult([*issues, self._incomplete(agent, outcome.error)], self.name, usage)
        answer = outcome.output
        try:
            if not isinstance(answer, JudgmentFindings):  # a spec's findings model is one
                raise TypeError(f"the {agent} answer is a {type(answer).__name__}, not a JudgmentFindings")
            found = [self._to_issue(agent, f) for f in answer.findings]
        except Exception as exc:  # noqa: BLE001 - e.g. a cached answer from an older catalogue
            return JudgmentResult([*issues, self._incomplete(agent, exc)], self.name, usage)
        return JudgmentResult([*issues, *found], self.name, usage)

    async def _blind(
        self, agent: str, bundle: DocumentBundle, classification: ClassificationOutput
    ) -> tuple[list[Issue], Usage]:
        """The blind reading of ``agent``'s spec, compared with the classification: its issues (an
        unusable or failed reading is one ``VERIFICATION_INCOMPLETE``) and the call's usage."""
        spec = self.registry[agent]
        assert spec.blind_compare is not None
        try:
            inputs = self._inputs(spec.blind_kind, bundle, classification)
        except Exception as exc:  # noqa: BLE001
            return [self._incomplete(agent, exc, blind=True)], Usage()
        outcome = await self._call(spec.blind_kind, bundle.doc_id, inputs)
        if outcome.error is not None or outcome.output is None:
            return [self._incomplete(agent, outcome.error, blind=True)], outcome.usage
        try:
            found = spec.blind_compare(classification, outcome.output, self.name)
        except Exception as exc:  # noqa: BLE001 - a segment left unread: incomplete, never "no issue"
            return [self._incomplete(agent, exc, blind=True)], outcome.usage
        if found:
            logger.info("llm %s doc_id=%s model=%s blind reading disagrees on %d segment(s)",
                        spec.blind_kind, bundle.doc_id, self.model_id, len(found))
        return found, outcome.usage

    def _to_issue(self, agent: str, finding: Finding) -> Issue:
        if finding.code not in self.registry[agent].judgment_codes:
            raise ValueError(f"{finding.code} is not a {agent} code")
        details: dict[str, object] = {"implementation": self.name, **finding.issue_details()}
        return make_issue(
            self.registry.catalogue[finding.code],
            finding.message,
            agent=agent,
            location=finding.location,
            suggested_fix=finding.suggested_fix,
            severity=finding.severity,  # make_issue refuses one below the catalogue's
            auto_fixable=False,  # a model can never make an issue auto-fixable
            details=details,
        )

    def _incomplete(self, agent: str, error: BaseException | None, *, blind: bool = False) -> Issue:
        err = type(error).__name__ if error is not None else "NoOutput"
        title = self.registry[agent].title
        what = f"{agent} {title} blind reading (the text without the classifier's labels)" if blind else (
            f"{agent} {title} judgment")
        return make_issue(
            "VERIFICATION_INCOMPLETE",
            f"{what} by {self.name} could not be completed ({err}); "
            f"a human must check this classification against the document.",
            agent=agent,
            suggested_fix=f"Review the {title} check manually, or re-run when the model is available",
            auto_fixable=False,
            details={"implementation": self.name, "error": err},
        )
