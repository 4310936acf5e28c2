"""Faults of a model call: which are transient (retried with backoff), which are throttling (waited
out, then :class:`~docverify.judging.judges.JudgeThrottled`), and the classifier's typed error.

Issue 22: :func:`fault_family` sorts every fault into one of four families — an *outage* (429,
overload, 5xx, an unreachable service: waited out, then :class:`ServiceOutage`), a *configuration*
fault (:class:`ConfigurationFault` at once), a *daily quota* (:class:`DailyQuotaExhausted` at once,
naming the reset) or the *document*'s own fault (its ``VERIFICATION_INCOMPLETE``). The three
exceptions are ``JudgeThrottled`` subclasses, so every stage that lets throttling through lets them
through too; ``docverify_airflow.tasks.nightly.retry_rule`` fails the task without retries for the last two."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import JsonValue

from docverify.judging.judges import JudgeThrottled, Usage

if TYPE_CHECKING:
    import datetime

    import tenacity

logger = logging.getLogger("docverify.llm")


# --------------------------------------------------------------------------- judge

T = TypeVar("T")


class RetryPolicy(Protocol):
    """Transient-fault retries (429/5xx/timeouts) around one whole model call.

    A policy gets a zero-argument coroutine function and returns its result, calling it again
    (with backoff) as it sees fit; whatever it finally raises becomes ``VERIFICATION_INCOMPLETE``
    / ``ClassificationError`` — except throttling (a 429, or the limiter's wait running out), which
    the judge waits out under its :class:`ThrottlePolicy` and then raises as ``JudgeThrottled``.
    :class:`BackoffRetry` is the one the pipeline uses; ``LLMJudge(retry_policy=None)`` calls once
    (a 429 is still waited out)."""

    async def run(self, call: Callable[[], Awaitable[T]]) -> T: ...


def is_transient(exc: BaseException) -> bool:
    """True for faults worth another try: rate limits (429), unavailable/server errors (5xx),
    connection errors, timeouts, and a response body that could not be read at all (a bare
    ``ModelAPIError``: e.g. truncated JSON from a proxy). False for everything else — a 400/401/403/404, a quota
    exhausted for the day, schema-invalid output after pydantic-ai's re-asks — which another try
    would only repeat."""
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelConnectionError,
        ModelHTTPError,
        ModelQuotaExceededError,
        ModelRateLimitError,
        ModelServerError,
        ModelUnavailableError,
    )

    if isinstance(exc, ModelQuotaExceededError):
        return False
    if isinstance(exc, ModelRateLimitError | ModelServerError | ModelUnavailableError | ModelConnectionError):
        return True
    if isinstance(exc, ModelHTTPError):
        return exc.status_code == 429 or exc.status_code >= 500 or exc.status_code == 408
    if type(exc) is ModelAPIError:
        return True
    return isinstance(exc, TimeoutError | asyncio.TimeoutError | ConnectionError)


def is_throttled(exc: BaseException) -> bool:
    """A rate limit (429 / ``RESOURCE_EXHAUSTED`` per minute): the provider is busy with our other
    requests, the model has not failed. Waited out by :class:`ThrottlePolicy`, never escalated. A
    ``FallbackExceptionGroup`` is one when every member is one (the limiter paces it, the circuit
    breaker does not count it)."""
    from pydantic_ai.exceptions import ModelHTTPError, ModelQuotaExceededError, ModelRateLimitError

    if isinstance(exc, BaseExceptionGroup):
        return bool(exc.exceptions) and all(is_throttled(e) for e in exc.exceptions)
    if isinstance(exc, ModelQuotaExceededError):
        return False
    return isinstance(exc, ModelRateLimitError) or (isinstance(exc, ModelHTTPError) and exc.status_code == 429)


# --------------------------------------------------------------------------- fault families (ADR 0018)

#: A fault of the service (429 throttling, overload, 5xx, a dropped connection): waited out under
#: :class:`ThrottlePolicy`, then :class:`ServiceOutage` — never a document's verdict.
OUTAGE = "outage"
#: The connection is wrong (invalid key, unknown model, permission denied, credentials that cannot
#: refresh): :class:`ConfigurationFault` on the first such answer.
CONFIGURATION = "configuration"
#: The quota of the day is spent: :class:`DailyQuotaExhausted` at once (waiting within a task will not help).
DAILY_QUOTA = "daily_quota"
#: A fault of this document's own request (content blocked, unusable answer, context too long, a
#: 400): the document's ``VERIFICATION_INCOMPLETE`` / ``CLASSIFICATION_FAILED``; the night goes on.
DOCUMENT = "document"

_DAILY_WORDS = ("per day", "perday", "daily")


class ServiceOutage(JudgeThrottled):
    """The model service was throttling, overloaded or failing (429 / 503 UNAVAILABLE / 500 INTERNAL /
    a dropped connection) for longer than the waiting budget (``ThrottlePolicy.max_wait_s``, the
    Variable ``docverify_llm_throttle_wait_s``). Like every :class:`JudgeThrottled`, no stage turns it
    into a document's verdict: the task fails and Airflow retries it later."""


class ConfigurationFault(JudgeThrottled):
    """The LLM connection is misconfigured (invalid API key, unknown or retired model, permission
    denied, credentials that cannot refresh): every call would fail the same way. Raised on the first
    such answer, never a document's issue; it propagates out of the stages like
    :class:`JudgeThrottled` and the Airflow task fails without retrying (``tasks.retry_rule``)."""


class DailyQuotaExhausted(JudgeThrottled):
    """The model's daily quota (or billing) is exhausted: the task fails at once (no retries) and the
    message says when the quota resets (Gemini API daily quotas: midnight Pacific time)."""

    def __init__(self, message: str, *, resets_at: str = ""):
        super().__init__(message)
        self.resets_at = resets_at


def next_pacific_midnight(now: datetime.datetime | None = None) -> str:
    """When a Gemini API daily quota resets: the next midnight in America/Los_Angeles, as UTC ISO 8601."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    pacific = ZoneInfo("America/Los_Angeles")
    local = (now or datetime.now(UTC)).astimezone(pacific)
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    midnight = midnight.replace(tzinfo=pacific)  # re-resolve the offset of that day (DST)
    return midnight.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _has_quota_failure(body: JsonValue) -> bool:
    """Whether an error's JSON body (the API's, as it came) names a ``QuotaFailure`` among its details."""
    err = body.get("error") if isinstance(body, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    return isinstance(details, list) and any(
        isinstance(d, dict) and str(d.get("@type", "")).endswith("QuotaFailure") for d in details)


def fault_family(exc: BaseException) -> str:
    """Which family a model-call fault belongs to: :data:`OUTAGE`, :data:`CONFIGURATION`,
    :data:`DAILY_QUOTA` or :data:`DOCUMENT` (see each). A ``FallbackExceptionGroup`` (a connection with
    ``fallback_conn_ids``) by its members: any configuration fault → configuration; all daily quota →
    daily quota; all outage (or daily quota) → outage; else the document's."""
    from pydantic_ai.exceptions import (
        ModelAuthenticationError,
        ModelConnectionError,
        ModelHTTPError,
        ModelNotFoundError,
        ModelQuotaExceededError,
        ModelRateLimitError,
        ModelServerError,
        ModelTimeoutError,
        ModelUnavailableError,
    )

    if isinstance(exc, BaseExceptionGroup):
        kinds = {fault_family(e) for e in exc.exceptions}
        if CONFIGURATION in kinds:
            return CONFIGURATION
        if kinds == {DAILY_QUOTA}:
            return DAILY_QUOTA
        if kinds and kinds <= {OUTAGE, DAILY_QUOTA}:
            return OUTAGE
        return DOCUMENT
    for e in exception_chain(exc):  # google.auth's RefreshError / DefaultCredentialsError, raised by the client as is
        if type(e).__module__.startswith("google.auth") and type(e).__name__ in (
                "RefreshError", "DefaultCredentialsError", "ReauthFailError"):
            return CONFIGURATION
    status = getattr(exc, "status_code", None) if isinstance(exc, ModelHTTPError) else None
    if isinstance(exc, ModelAuthenticationError | ModelNotFoundError) or status in (401, 403, 404):
        return CONFIGURATION
    if isinstance(exc, ModelQuotaExceededError):
        return DAILY_QUOTA
    if isinstance(exc, ModelRateLimitError) or status == 429:
        # a daily quota said only in words (no QuotaFailure detail to tell it from a per-minute limit)
        message = str(getattr(exc, "message", "") or exc).lower()
        if not _has_quota_failure(getattr(exc, "body", None)) and any(w in message for w in _DAILY_WORDS):
            return DAILY_QUOTA
        return OUTAGE
    if isinstance(exc, ModelUnavailableError | ModelServerError) or (status is not None and status >= 500):
        return OUTAGE
    if isinstance(exc, ModelConnectionError) and not isinstance(exc, ModelTimeoutError):
        return OUTAGE  # the service cannot be reached at all; a read timeout may be this request's size
    return DOCUMENT


def _retry_after(exc: BaseException | None) -> float | None:
    """The provider's ``Retry-After`` of a fault; of a ``FallbackExceptionGroup`` (every model of a
    fallback connection failed), the shortest of its members' — the first model free again."""
    if isinstance(exc, BaseExceptionGroup):
        afters = [a for a in (_retry_after(e) for e in exc.exceptions) if a is not None]
        return min(afters) if afters else None
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) and value > 0 else None


@dataclass
class ThrottlePolicy:
    """How long one call may wait for the quota (429s and the shared limiter) before it raises
    :class:`JudgeThrottled`. ``max_wait_s`` (default 20 min, well inside the LLM tasks' 60-minute
    ``execution_timeout``) counts every second the call spent waiting for a slot or after a 429;
    the call's own time and its failure retries (:class:`BackoffRetry`) do not count. After a 429
    the wait is the provider's ``Retry-After`` (+ up to ``jitter`` of it), else an exponential
    backoff ``initial_wait_s × 2**n`` capped at ``max_backoff_s``, half of it random."""

    max_wait_s: float = 1200.0
    initial_wait_s: float = 1.0
    max_backoff_s: float = 60.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.max_wait_s < 0:
            raise ValueError("max_wait_s must be >= 0")

    def wait(self, exc: BaseException, n: int) -> float:
        """Seconds to wait after the ``n``-th (1-based) 429 of a call."""
        import random

        after = _retry_after(exc)
        if after is not None:
            return after + random.uniform(0.0, after * self.jitter)  # noqa: S311 - jitter, not crypto
        base = min(self.max_backoff_s, self.initial_wait_s * 2.0 ** (n - 1))
        return base / 2 + random.uniform(0.0, base / 2)  # noqa: S311


@dataclass
class BackoffRetry:
    """Bounded retries of a request's own transient faults (:func:`is_transient` minus the service's
    faults of :func:`fault_family` — 429, overload, 5xx, an unreachable service are waited out by the
    judge under :class:`ThrottlePolicy` (ADR 0018) — i.e. timeouts, unreadable bodies; a
    deterministic fault fails at once) with
    exponential backoff and full jitter (tenacity's ``wait_random_exponential``): the n-th wait is
    uniform in ``[0, min(max_wait_s, initial_wait_s * 2**n)]``. A server's ``Retry-After`` (a 503
    may send one) is honoured in full up to ``max_retry_after_s`` (default 15 min), plus a jitter
    of up to ``retry_after_jitter`` of it; beyond that the call fails. At most ``max_attempts``
    calls; the last fault is re-raised. A 429 is not retried here: it is re-raised at once to
    :class:`LLMJudge`, which waits it out under :class:`ThrottlePolicy` without spending these
    attempts (ADR 0014: 41 % of the requests of a 60-RPM night were 429s, and spending the
    failure budget on them escalated 18 % of the documents)."""

    max_attempts: int = 4
    initial_wait_s: float = 1.0
    max_wait_s: float = 30.0
    max_retry_after_s: float = 900.0
    retry_after_jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")

    _retry_after = staticmethod(_retry_after)

    def should_retry(self, exc: BaseException) -> bool:
        """Transient, not a service fault (the judge's :class:`ThrottlePolicy` waits those out), and not
        asked to wait longer than ``max_retry_after_s``."""
        after = self._retry_after(exc)
        return (is_transient(exc) and not is_throttled(exc) and fault_family(exc) == DOCUMENT
                and (after is None or after <= self.max_retry_after_s))

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        import random

        import tenacity

        base = tenacity.wait_random_exponential(multiplier=self.initial_wait_s, max=self.max_wait_s)(retry_state)
        after = self._retry_after(retry_state.outcome.exception() if retry_state.outcome else None)
        if after is not None and after > base:
            return after + random.uniform(0.0, after * self.retry_after_jitter)  # noqa: S311 - jitter, not crypto
        return base

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        import tenacity

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self.should_retry),
            reraise=True,
            before_sleep=lambda rs: logger.warning(
                "llm transient fault %s: attempt %d of %d, retrying in %.1fs",
                # tenacity types outcome Optional for every callback; before_sleep follows a failed attempt
                type(rs.outcome.exception()).__name__,  # type: ignore[union-attr]
                rs.attempt_number, self.max_attempts,
                rs.next_action.sleep if rs.next_action else 0.0,
            ),
        )
        async for attempt in retrying:
            with attempt:
                return await call()
        raise AssertionError("unreachable")  # pragma: no cover - reraise=True


class ClassificationError(Exception):
    """The LLM classifier produced no usable classification (the pipeline records
    ``CLASSIFICATION_FAILED``). The message names the document, the judge and the exception
    class, never document text; ``usage`` holds what the failed attempt cost."""

    def __init__(
        self,
        message: str,
        *,
        error_class: str = "",
        usage: Usage | None = None,
        cause: BaseException | None = None,
    ):
        super().__init__(message)
        self.error_class = error_class
        self.usage = usage or Usage()
        #: The underlying exception. Deliberately not chained (``raise … from None``): its text
        #: can quote the model's output or the provider's body, and a logged traceback must not.
        self.cause = cause
