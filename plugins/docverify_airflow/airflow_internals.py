"""Every name this project takes from Airflow beyond its public interface, in one place (ADR 0039).

Airflow's public interface for this code is the task SDK (``airflow.sdk``, without its
``execution_time`` and ``definitions`` internals), the providers' hooks, operators and triggers,
``airflow.triggers.base``, ``airflow.exceptions`` and ``airflow.plugins_manager``. The review
workspace goes further — it reads the metadata database, answers a review through the api-server's
own endpoint function and re-opens a refused review through the task SDK's HITL call — and the
plugin's pages use the api-server's session, user and access checks. An Airflow upgrade may move or
remove any of these, so each is named here with the module it lives in (Airflow 3.3), reached
through this module (``from docverify_airflow.airflow_internals import HITLDetail``), and imported
lazily, on first use: importing this module imports nothing of Airflow, so a task process or the
DAG parser pays only for the names it uses.

``tests/docverify_airflow/test_airflow_internals.py`` imports every name: after an upgrade that
removes or moves one it fails naming it (and where it was); another test refuses a non-public
Airflow import anywhere else in ``plugins/`` or ``dags/``.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name → the Airflow module it lives in, and who uses it
INTERNALS: dict[str, tuple[str, str]] = {
    # the review workspace (review_hitl.py): the metadata database and the Required Actions endpoint
    "TaskInstance": ("airflow.models.taskinstance", "review_hitl.open_reviews"),
    "HITLDetail": ("airflow.models.hitl", "review_hitl.open_reviews"),
    "TaskInstanceState": ("airflow.utils.state", "review_hitl.open_reviews"),
    "UpdateHITLDetailPayload": ("airflow.api_fastapi.core_api.datamodels.hitl", "review_hitl.submit"),
    "update_hitl_detail": ("airflow.api_fastapi.core_api.routes.public.hitl", "review_hitl.submit"),
    "DagModel": ("airflow.models.dag", "review_hitl.review_dag_state"),
    "DagRun": ("airflow.models.dagrun", "review_hitl.review_dag_state"),
    "DagRunState": ("airflow.utils.state", "review_hitl.review_dag_state"),
    "trigger_dag": ("airflow.api.common.trigger_dag", "review_hitl.start_review_run"),
    "DagRunTriggeredByType": ("airflow.utils.types", "review_hitl.start_review_run"),
    # the review operator (operators/sme_review.py): its form, and re-opening a refused review
    "upsert_hitl_detail": ("airflow.sdk.execution_time.hitl", "operators.sme_review.SMEReviewOperator._reopen"),
    "ParamsDict": ("airflow.sdk.definitions.param", "operators.sme_review.SMEReviewOperator"),
    "HITLUser": ("airflow.sdk.execution_time.hitl", "sme_form.assigned_users (a type)"),
    # the plugin's pages (packet_app, review_app, trace_app): the api-server's session, user and access checks
    "SessionDep": ("airflow.api_fastapi.common.db.common", "review_app"),
    "GetUserDep": ("airflow.api_fastapi.core_api.security", "review_app, trace_app"),
    "requires_access_dag": ("airflow.api_fastapi.core_api.security", "packet_app, review_app, trace_app"),
    "DagAccessEntity": ("airflow.api_fastapi.auth.managers.models.resource_details",
                        "packet_app, review_app, trace_app"),
    "get_auth_manager": ("airflow.api_fastapi.app", "packet_app (the login redirect)"),
    "conf": ("airflow.configuration", "review_app._token (the api-server's secret key)"),
    # Variables read by a running task through the supervisor (config.read_variable)
    "task_runner": ("airflow.sdk.execution_time", "config.read_variable (a module)"),
    "GetVariable": ("airflow.sdk.execution_time.comms", "config.read_variable"),
    "VariableResult": ("airflow.sdk.execution_time.comms", "config.read_variable"),
    "ErrorResponse": ("airflow.sdk.execution_time.comms", "config.read_variable"),
}


def resolve(name: str, table: dict[str, tuple[str, str]] = INTERNALS) -> Any:
    """The Airflow object ``name`` of ``table`` (:data:`INTERNALS`): a module attribute, or a submodule."""
    module_name, _used_by = table[name]
    module = importlib.import_module(module_name)
    try:
        return getattr(module, name)
    except AttributeError:
        return importlib.import_module(f"{module_name}.{name}")


def __getattr__(name: str) -> Any:
    # resolved on every import, never cached here: a test that patches the name where Airflow defines
    # it (e.g. ``airflow.sdk.execution_time.hitl.upsert_hitl_detail``) patches it for its users too
    if name not in INTERNALS:
        raise AttributeError(f"{__name__} has no {name!r}: name it in INTERNALS with the Airflow module it lives in")
    return resolve(name)
