"""Faults of a model call: which are transient (retried with backoff), which are throttling (waited
out, then :class:`~docverify.judges.JudgeThrottled`), and the classifier's typed error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from docverify.judges import Usage

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
    requests, the model has not failed. Waited out by :class:`ThrottlePolicy`, never escalated."""
    from pydantic_ai.exceptions import ModelHTTPError, ModelQuotaExceededError, ModelRateLimitError

    if isinstance(exc, ModelQuotaExceededError):
        return False
    return isinstance(exc, ModelRateLimitError) or (isinstance(exc, ModelHTTPError) and exc.status_code == 429)


def is_quota_exhausted(exc: BaseException) -> bool:
    """The provider says the quota is exhausted (for the day, or billing): waiting within a task
    will not help, but the document is not at fault either — :class:`JudgeThrottled` at once."""
    from pydantic_ai.exceptions import ModelQuotaExceededError

    return isinstance(exc, ModelQuotaExceededError)


def _retry_after(exc: BaseException | None) -> float | None:
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
        base = min(self.max_backoff_s, self.initial_wait_s * 2 ** (n - 1))
        return base / 2 + random.uniform(0.0, base / 2)  # noqa: S311


@dataclass
class BackoffRetry:
    """Bounded retries of real transient faults (:func:`is_transient` minus throttling: 5xx,
    timeouts, connection errors, unreadable bodies; a deterministic fault fails at once) with
    exponential backoff and full jitter (tenacity's ``wait_random_exponential``): the n-th wait is
    uniform in ``[0, min(max_wait_s, initial_wait_s * 2**n)]``. A server's ``Retry-After`` (a 503
    may send one) is honoured in full up to ``max_retry_after_s`` (default 15 min), plus a jitter
    of up to ``retry_after_jitter`` of it; beyond that the call fails. At most ``max_attempts``
    calls; the last fault is re-raised. A 429 is not retried here: it is re-raised at once to
    :class:`LLMJudge`, which waits it out under :class:`ThrottlePolicy` without spending these
    attempts (issue 15: 41 % of the requests of a 60-RPM night were 429s, and spending the
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
        """Transient, not throttling (the judge's :class:`ThrottlePolicy` handles that), and not
        asked to wait longer than ``max_retry_after_s``."""
        after = self._retry_after(exc)
        return (is_transient(exc) and not is_throttled(exc)
                and (after is None or after <= self.max_retry_after_s))

    def _wait(self, retry_state) -> float:
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
                type(rs.outcome.exception()).__name__, rs.attempt_number, self.max_attempts,
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
