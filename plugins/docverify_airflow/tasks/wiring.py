"""The one place a task turns its :class:`~docverify_airflow.config.Settings` into what the core
runs with (ADR 0003): :func:`verify_deps` builds the :class:`docverify.pipeline.document.VerifyDeps` — the
judge, the verification policy, the CR_V2 jury and the V5 second opinion — once per task, and the
tasks pass it explicitly to the stages. Nothing is patched onto the judge and nothing is read back
with ``getattr``; the core never reads a Variable."""

from __future__ import annotations

from docverify.pipeline.document import VerifyDeps
from docverify_airflow import config
from docverify_airflow.night import TaskContext


def verify_deps(s: config.Settings) -> VerifyDeps:
    """The verification's dependencies from the settings of one task: ``config.judge`` (offline or the
    LLM of ``docverify_llm_conn_id``), ``config.policy``, ``config.jury`` (``docverify_jury``, off by
    default) and ``config.second_opinion`` (``docverify_v5_second_opinion``, off by default)."""
    return VerifyDeps(judge=config.judge(s), policy=config.policy(s), jury=config.jury(s),
                      second_opinion=config.second_opinion(s))


def task_deps(context: TaskContext) -> tuple[config.Settings, VerifyDeps]:
    """The settings of the running task (read once) and its :func:`verify_deps`."""
    s = config.settings(context)
    return s, verify_deps(s)
