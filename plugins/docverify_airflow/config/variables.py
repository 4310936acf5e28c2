"""Reading Airflow Variables (issue 41 item 2, ADR 0055): one Variable's value, its documented default
only when it is **missing**, and :class:`ConfigUnavailable` when it could not be read.

**Failing loudly.** A Variable that is *missing* takes its documented default (the values of
``airflow_settings.yaml``). Any other outcome of reading it fails the task with
:class:`ConfigUnavailable`, naming the Variable and the fix — never a silent switch of the storage
root to the repository's ``data/`` or of the judge to offline. The value is read with the public
``airflow.sdk.Variable.get``. Airflow 3.3's Task SDK makes the distinction hard: ``Variable.get(key,
default=…)`` returns the default whenever no secrets backend returned a value, and the Execution-API
backend returns "no value" for *any* failed request (the supervisor's ``API_SERVER_ERROR`` for an
unreachable API server included). So inside a task a Variable that came back "not found" is asked once
more from the Execution API directly, the one use of SDK internals here
(:mod:`docverify_airflow.airflow_internals`: no public API tells "missing" from "could not be read"),
and only an explicit ``VARIABLE_NOT_FOUND`` counts as missing (:func:`read_variable`;
tests/hostile/test_config_faults.py plants the faults)."""

from __future__ import annotations


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
