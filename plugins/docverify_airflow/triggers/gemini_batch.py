"""The trigger that waits for an existing Gemini batch job (ADR 0019).

The provider's :class:`GenAIGeminiCreateBatchJobTrigger` creates the job inside the trigger and
turns any exception while polling into an error event: one transient error lost the whole batch
(the job kept running and was billed, every request went online). This trigger only *polls* a job
the operator created and recorded in the store (by name, through the provider's
:class:`GenAIGeminiAPIAsyncHook`):

* a transient poll error (408/429/5xx from the API, a timeout, a dropped connection) is retried at
  the next interval, up to ``max_poll_failures`` in a row; past that the event is
  ``{"status": "error", "transient": True, "job_name"}`` and the operator re-attaches;
* a job reported SUCCEEDED whose results (file or inline responses) are not set yet is polled
  again, up to ``results_polls`` times, before the event says ``"results": False``;
* FAILED / EXPIRED / CANCELLED end with ``{"status": "error", "transient": False, "state"}``.

google-genai is imported inside :meth:`run` only (this module is imported at DAG-parse time)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from airflow.triggers.base import BaseTrigger, TriggerEvent

if TYPE_CHECKING:
    from google.genai.types import BatchJob

CLASSPATH = "docverify_airflow.triggers.gemini_batch.GeminiBatchJobTrigger"
SUCCEEDED = "JOB_STATE_SUCCEEDED"
ENDED_BADLY = ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED", "JOB_STATE_CANCELLED")
TRANSIENT_HTTP_CODES = frozenset({408, 429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """A poll error worth another poll: an API error 408/429/5xx, a timeout or a network error."""
    code = getattr(exc, "code", None) or getattr(exc, "status_code", None)
    if isinstance(code, int) and code in TRANSIENT_HTTP_CODES:
        return True
    import httpx

    return isinstance(exc, TimeoutError | ConnectionError | httpx.TransportError)


class GeminiBatchEvent(TypedDict):
    """The trigger's event (see the module docstring), as the operator's ``execute_complete`` reads it."""

    status: Literal["success", "error"]
    message: str
    job_name: str
    transient: NotRequired[bool]  # an error event: whether re-attaching may help
    state: NotRequired[str]  # a job that ended badly: its state
    results: NotRequired[bool]  # a SUCCEEDED job: whether it said where its answers are


def has_results(job: BatchJob) -> bool:
    """Whether a finished job (a google-genai ``BatchJob``) says where its answers are."""
    dest = getattr(job, "dest", None)
    return bool(dest is not None and (dest.file_name or dest.inlined_responses))


class GeminiBatchJobTrigger(BaseTrigger):
    """Polls the Gemini batch job ``job_name`` every ``polling_interval`` seconds (see the module
    docstring for the events)."""

    def __init__(self, job_name: str, gemini_api_key: str, polling_interval: float = 60.0,
                 max_poll_failures: int = 10, results_polls: int = 3) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ has no annotations
        self.job_name = job_name
        self.gemini_api_key = gemini_api_key
        self.polling_interval = polling_interval
        self.max_poll_failures = max_poll_failures
        self.results_polls = results_polls

    def serialize(self) -> tuple[str, dict[str, str | float]]:
        return CLASSPATH, {"job_name": self.job_name, "gemini_api_key": self.gemini_api_key,
                           "polling_interval": self.polling_interval, "max_poll_failures": self.max_poll_failures,
                           "results_polls": self.results_polls}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow.providers.google.cloud.hooks.gen_ai import GenAIGeminiAPIAsyncHook

        hook = GenAIGeminiAPIAsyncHook(gemini_api_key=self.gemini_api_key)
        failures = empty = 0
        while True:
            try:
                job = await hook.get_batch_job(job_name=self.job_name)
            except Exception as exc:  # noqa: BLE001 - classified below: a poll error is not the job's end
                failures += 1
                transient = is_transient(exc)
                if not transient or failures >= self.max_poll_failures:
                    failed: GeminiBatchEvent = {
                        "status": "error", "transient": transient, "job_name": self.job_name,
                        "message": f"polling {self.job_name} failed ({failures} in a row), the last with "
                                   f"{type(exc).__name__}: {exc}"}
                    yield TriggerEvent(failed)
                    return
                self.log.warning("transient error polling %s (%d/%d): %s: %s", self.job_name, failures,
                                 self.max_poll_failures, type(exc).__name__, exc)
                await asyncio.sleep(self.polling_interval)
                continue
            failures = 0
            state = job.state.name if job.state is not None else "JOB_STATE_UNSPECIFIED"
            if state == SUCCEEDED:
                if has_results(job) or empty >= self.results_polls:
                    done: GeminiBatchEvent = {"status": "success", "message": "Job completed",
                                              "job_name": self.job_name, "results": has_results(job)}
                    yield TriggerEvent(done)
                    return
                empty += 1
                self.log.warning("%s is SUCCEEDED but its results are not set yet: polling again (%d/%d)",
                                 self.job_name, empty, self.results_polls)
            elif state in ENDED_BADLY:
                ended: GeminiBatchEvent = {"status": "error", "transient": False, "job_name": self.job_name,
                                           "state": state, "message": f"Job {self.job_name} ended {state}"}
                yield TriggerEvent(ended)
                return
            else:
                self.log.info("waiting for %s (state %s), next poll in %s s", self.job_name, state,
                              self.polling_interval)
            await asyncio.sleep(self.polling_interval)
