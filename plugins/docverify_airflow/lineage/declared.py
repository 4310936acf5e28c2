"""OpenLineage for the project's tasks (ADR 0040): what each task read and wrote, and the night's facts.

Airflow's OpenLineage provider emits a START and a COMPLETE (or FAIL) event for every task instance
and every Dag run; this module gives docverify's tasks their datasets and facets:

* **datasets** at the granularity a data engineer queries, never one per PDF: the night's input
  prefix (``incoming/<ds>`` or the ``batch_prefix``), the night's run store (``runs/<ds>``), the
  outputs per route (``accepted/<ds>``, ``sme_packets``, ``reports/<ds>``) and ``ground_truth``;
  namespaces as Airflow's own asset translations make them (``file`` + absolute path locally,
  ``gs://<bucket>`` + key in production). A file name never appears: file names are PHI-prone.
* **facets**: ``docverify_task`` on every task's COMPLETE event (the task's counts: numbers and
  codes from its return value, never lists or text) and ``docverify_night`` on ``batch_report``'s
  (documents, routes, V5 rules, issue codes, implementations and models, LLM calls and cost, the
  verification policy).

How: the task body (:func:`task`, the decorator of ``docverify_airflow.tasks.nightly``) records what it
declared in this process; :class:`docverify_airflow.lineage.extractor.DocverifyExtractor` — registered for the task types of the two
Dags in ``[openlineage] extractors`` (``scripts/write_airflow_cfg.py``) — hands it to the listener,
which runs after the body in the same process (or a fork of it). Returning our datasets also keeps
the provider's hook-level lineage (per-object URIs that a storage hook may report) out of our
tasks' events. The per-document ``lineage`` log lines carry the task's OpenLineage run id
(``ol_run_id``), so a line joins to its task's events.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, TypeGuard, TypeVar

from pydantic import JsonValue

from docverify.reporting.contract import NightFacts
from docverify.stages.common import OL_RUN_ID_ENV
from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore
from docverify_airflow.night import TaskContext

log = logging.getLogger(__name__)

#: The environment variable the core's ``lineage`` lines read their task's run id from (a task
#: runs in its own process; Airflow exports its own ``AIRFLOW_CTX_*`` the same way).
RUN_ID_ENV = OL_RUN_ID_ENV
DAGS = ("clinical_doc_verification", "sme_review")

# What each task reads and writes, by role (resolved against the night's storage root).
INCOMING, RUNS, ACCEPTED, PACKETS, REPORTS, GROUND_TRUTH = (
    "incoming", "runs", "accepted", "sme_packets", "reports", "ground_truth")
DATASETS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "discover": ((INCOMING,), (RUNS,)),
    "plan_document_ai": ((RUNS,), ()),
    "layout_plan": ((RUNS,), (RUNS,)),
    "layout_parse": ((INCOMING,), (RUNS,)),
    "layout": ((INCOMING, RUNS), (RUNS,)),
    "plan_shards": ((RUNS,), ()),
    "verify": ((RUNS,), (RUNS,)),
    "route": ((RUNS,), (RUNS,)),
    "plan_retry_shards": ((RUNS,), ()),
    "auto_fix_retry": ((RUNS,), (RUNS,)),
    "accept": ((RUNS,), (ACCEPTED,)),
    "write_sme_packets": ((RUNS,), (PACKETS,)),
    "audit_sample": ((ACCEPTED, RUNS), (PACKETS,)),
    "batch_report": ((RUNS, ACCEPTED, PACKETS, GROUND_TRUTH), (REPORTS,)),
    "list_pending_reviews": ((PACKETS,), ()),
    "review": ((PACKETS,), (GROUND_TRUTH,)),
}


#: a value of the ``docverify_task`` facet: a number, a flag, a short code, or a ``{name: number}`` map
FacetValue = bool | int | float | str | dict[str, int | float]
Counts = dict[str, FacetValue]


class NightFacet(NightFacts):
    """The ``docverify_night`` facet's data: ``batch_report``'s ``night`` (``report.night_facts`` and
    the verification policy, ``VerifyPolicy.model_dump(mode="json")``)."""

    policy: dict[str, JsonValue]


@dataclass
class Declared:
    """What one task instance declared: dataset URIs, its counts (the ``docverify_task`` facet) and,
    for ``batch_report``, the night (the ``docverify_night`` facet); plain data — the facet objects
    are built by :mod:`docverify_airflow.lineage.extractor`."""

    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    counts: Counts | None = None
    night: NightFacet | None = None


#: The fields of the night facet (``ol_extractor.DocverifyNightRunFacet``; a test keeps them equal).
NIGHT_FIELDS = ("night", "documents", "final_routes", "rules", "issue_codes", "error_codes", "implementations",
                "models", "llm", "policy")


#: Per process, per task instance: a task runs in its own process (the listener reads this after
#: the body, in the same process or a fork of it); ``airflow dags test`` runs a night's tasks one
#: after the other in one process, hence the key.
_DECLARED: dict[tuple[str, str, int], Declared] = {}


def _key(dag_id: str, task_id: str, map_index: int | None) -> tuple[str, str, int]:
    return dag_id, task_id, -1 if map_index is None else int(map_index)


def declared(dag_id: str, task_id: str, map_index: int | None) -> Declared | None:
    return _DECLARED.get(_key(dag_id, task_id, map_index))


def counts_of(result: object) -> Counts:
    """The facet-safe part of a task's result: numbers, booleans and short code-like strings of
    its top level (and one level of ``{name: number}`` maps, e.g. routes); lists (document ids),
    URIs and free text are left out."""
    if not isinstance(result, Mapping):
        return {"items": len(result)} if isinstance(result, list | tuple) else {}
    out: Counts = {}
    for k, v in result.items():
        if isinstance(v, bool | int | float) or isinstance(v, str) and _code_like(v):
            out[str(k)] = v
        elif isinstance(v, Mapping) and v and all(isinstance(x, int | float) for x in v.values()):
            out[str(k)] = {str(a): b for a, b in v.items()}
        elif isinstance(v, list | tuple):
            out[f"{k}_count"] = len(v)
    return out


def _code_like(v: str) -> bool:
    return 0 < len(v) <= 40 and all(c.isalnum() or c in "_-.:+ " for c in v)


def uris_for(roles: Sequence[str], store: ArtifactStore, night: RunStore | None = None,
             incoming_rel: str = "") -> list[str]:
    """The URIs of these roles' folders, named by the store's own layout (the run store's paths for
    a night's folders: ``night`` and the night's input folder are needed for those roles only)."""
    def rel(role: str) -> str:
        if role == PACKETS:
            return ArtifactStore.PACKETS_DIR
        if role == GROUND_TRUTH:
            return ArtifactStore.GROUND_TRUTH_DIR
        if night is None:
            raise ValueError(f"the {role} folder belongs to a night: no night given")
        return {INCOMING: incoming_rel, RUNS: night.night, ACCEPTED: night.accepted_dir,
                REPORTS: night.reports_dir}[role]

    return [store.uri(rel(r)) for r in roles]


def ol_run_id(context: TaskContext) -> str | None:
    """The OpenLineage run id the provider gives this task instance (its ``lineage_run_id``
    macro); None when the provider is not installed or the context has no task instance."""
    ti = context.get("ti")
    if ti is None:
        return None
    try:
        from airflow.providers.openlineage.plugins.macros import lineage_run_id
    except ImportError:
        return None
    try:
        return str(lineage_run_id(ti))
    except Exception as exc:  # a lineage id must never fail a task
        log.warning("no OpenLineage run id for this task: %s", type(exc).__name__)
        return None


def declare(context: TaskContext, *, inputs: Sequence[str] = (), outputs: Sequence[str] = (),
            counts: Counts | None = None, night: NightFacet | None = None) -> None:
    """Record what this task instance read and wrote (URIs) and its facets' data. A night without
    every field of the night facet is refused (KeyError), never declared half."""
    if night is not None:
        missing = [f for f in NIGHT_FIELDS if f not in night]
        if missing:
            raise KeyError(f"the night facet lacks {', '.join(missing)}")
    ti = context["ti"]
    entry = _DECLARED.setdefault(_key(ti.dag_id, ti.task_id, getattr(ti, "map_index", -1)), Declared())
    entry.inputs[:] = list(dict.fromkeys([*entry.inputs, *inputs]))
    entry.outputs[:] = list(dict.fromkeys([*entry.outputs, *outputs]))
    if counts is not None:
        entry.counts = dict(counts)
    if night is not None:
        entry.night = night.copy()


Uris = Callable[[TaskContext, Sequence[str]], list[str]]
P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Traced:
    """What :func:`traced` declares when its block ends: set :attr:`result` to the task's result."""

    result: object = None  # the task's result, whatever it returns


@contextmanager
def traced(context: TaskContext, uris: Uris) -> Iterator[Traced]:
    """A task body's block: the task's OpenLineage run id exported for the core's ``lineage``
    lines while it runs; when it ends (also by an exception or a skip) the task's datasets
    (:data:`DATASETS`, resolved by ``uris(context, roles)``) and the counts of ``result`` declared
    for :class:`docverify_airflow.lineage.extractor.DocverifyExtractor`. Lineage never fails a task:
    a fault here is logged."""
    run_id, before = ol_run_id(context), os.environ.get(RUN_ID_ENV)
    if run_id:
        os.environ[RUN_ID_ENV] = run_id
    out = Traced()
    try:
        yield out
    finally:
        if before is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = before
        declare_task(context, uris, out.result)


def task(uris: Uris) -> Callable[[Callable[Concatenate[TaskContext, P], R]], Callable[Concatenate[TaskContext, P], R]]:
    """:func:`traced` as the decorator of a task body ``fn(context, …)``: the same signature."""

    def wrap(fn: Callable[Concatenate[TaskContext, P], R]) -> Callable[Concatenate[TaskContext, P], R]:
        @functools.wraps(fn)
        def wrapper(context: TaskContext, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with traced(context, uris) as t:
                result = fn(context, *args, **kwargs)
                t.result = result
                return result

        return wrapper

    return wrap


def _is_night(value: object) -> TypeGuard[NightFacet]:
    """Whether a task's ``night`` is the night facet's data (``batch_report``'s, a mapping): one without
    every field of the facet raises KeyError naming those it lacks (never declared half)."""
    if not isinstance(value, Mapping):
        return False
    missing = [f for f in NIGHT_FIELDS if f not in value]
    if missing:
        raise KeyError(f"the night facet lacks {', '.join(missing)}")
    return True


def declare_task(context: TaskContext, uris: Uris, result: object) -> None:
    """Declare the task's datasets (by its id in :data:`DATASETS`) and its facets' data."""
    try:
        ins, outs = DATASETS.get(context["ti"].task_id, ((), ()))
        night = None
        if isinstance(result, Mapping):
            night = result.get("night")
            result = {k: v for k, v in result.items() if k != "night"}
        declare(context, inputs=uris(context, ins), outputs=uris(context, outs), counts=counts_of(result),
                night=night if _is_night(night) else None)
    except Exception as exc:
        log.warning("OpenLineage datasets not declared for this task: %s", type(exc).__name__)
