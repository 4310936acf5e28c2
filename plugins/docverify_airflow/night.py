"""Which night a DAG run verifies (shared by the tasks and the notifications)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the running task's context as the task bodies read it: Airflow's ``Context`` (a TypedDict), or
#: the dict a test builds; read, never written
TaskContext = Mapping[str, Any]


def night_of(context: TaskContext) -> str:
    """The night (YYYY-MM-DD) a run verifies: its logical date; a run triggered without one (the
    REST API's default in Airflow 3: ``logical_date: null``) has no ``ds``, and verifies the date
    it was triggered for (``run_after``, UTC)."""
    ds = context.get("ds")
    if ds:
        return str(ds)
    run_after = getattr(context.get("dag_run"), "run_after", None)
    if run_after is None:
        raise ValueError("this run has neither a logical date nor run_after: trigger it with a logical date")
    import datetime as dt

    if isinstance(run_after, str):
        run_after = dt.datetime.fromisoformat(run_after.replace("Z", "+00:00"))
    return run_after.astimezone(dt.UTC).strftime("%Y-%m-%d")
