"""Configuration from Airflow, in one place (issue 41 item 2, ADR 0055). The only package that turns
Airflow configuration into domain objects:

* :mod:`~docverify_airflow.config.switches` — every Variable declared once: its type, Variable name,
  default, doc line and policy field (docs/configuration.md is generated from it);
* :mod:`~docverify_airflow.config.variables` — reading one Variable (missing → its default; unreadable →
  :class:`ConfigUnavailable`);
* :mod:`~docverify_airflow.config.settings` — the typed :class:`Settings`, read once per task
  (:func:`settings`), and the storage root;
* :mod:`~docverify_airflow.config.factories` — the judge, policy, jury, second opinion and LLM quota
  built from the settings a caller hands them;
* :mod:`~docverify_airflow.config.params` — the DAGs' params as models (their ``Param`` s built from them).

This module re-exports the names the rest of the project imports from ``docverify_airflow.config``."""

from docverify_airflow.config.factories import judge, jury, llm_judge, llm_quota, policy, second_opinion
from docverify_airflow.config.settings import (
    CONTEXT_KEY,
    RECENT_S,
    REPO,
    ROOT_BASE,
    Settings,
    _recent,
    artifact_store,
    forget_settings,
    is_remote,
    resolve_root,
    settings,
    storage_root,
)
from docverify_airflow.config.switches import (
    DEFAULT_LLM_CONN,
    DEFAULT_SMTP_CONN,
    DEFAULT_STORAGE_ROOT,
    JUDGES,
    JURY_MODES,
    LAYOUTS,
    LLM_MODES,
    POLICY_FIELDS,
    VAR_JUDGE,
    VAR_LAYOUT,
    VAR_LLM_MODE,
    VAR_LLM_SHARDS,
    VAR_SME_ASSIGNEES,
    Switches,
    _extra,
    policy_fields,
    refusal,
    switch,
)
from docverify_airflow.config.variables import ConfigUnavailable, read_variable

__all__ = [
    "CONTEXT_KEY", "DEFAULT_LLM_CONN", "DEFAULT_SMTP_CONN", "DEFAULT_STORAGE_ROOT", "JUDGES", "JURY_MODES",
    "LAYOUTS", "LLM_MODES", "POLICY_FIELDS", "RECENT_S", "REPO", "ROOT_BASE", "VAR_JUDGE", "VAR_LAYOUT",
    "VAR_LLM_MODE", "VAR_LLM_SHARDS", "VAR_SME_ASSIGNEES", "ConfigUnavailable", "Settings", "Switches",
    "_extra", "_recent", "artifact_store", "forget_settings", "is_remote", "judge", "jury", "llm_judge",
    "llm_quota", "policy", "policy_fields", "read_variable", "refusal", "resolve_root", "second_opinion",
    "settings", "storage_root", "switch",
]
