"""The non-public Airflow names of ``docverify_airflow.airflow_internals`` (ADR 0039): every one still
exists in the installed Airflow (an upgrade that removes or moves one fails here, naming it), and no
other module of ``plugins/`` or ``dags/`` imports a non-public Airflow name directly."""

from __future__ import annotations

import ast
import pathlib

import pytest

from docverify_airflow import airflow_internals

REPO = pathlib.Path(__file__).resolve().parents[2]

#: Airflow's public interface for this code (module prefixes); anything else goes through the adapter
PUBLIC = ("airflow.sdk", "airflow.providers.", "airflow.triggers.base", "airflow.exceptions", "airflow.plugins_manager")
NOT_PUBLIC = ("airflow.sdk.execution_time", "airflow.sdk.definitions")


def missing(internals: dict[str, tuple[str, str]]) -> list[str]:
    out = []
    for name, (module, used_by) in internals.items():
        try:
            airflow_internals.resolve(name, internals)
        except (ImportError, AttributeError) as exc:
            out.append(f"{module}.{name} (used by {used_by}): {type(exc).__name__}: {exc}")
    return out


@pytest.mark.slow
def test_every_internal_name_is_still_in_airflow():
    assert missing(airflow_internals.INTERNALS) == [], "Airflow no longer has these names where the adapter says"


def test_a_removed_name_fails_naming_it():
    planted = {**airflow_internals.INTERNALS, "HITLDetailV9": ("airflow.models.hitl", "review_hitl.open_reviews")}
    assert missing(planted) == [
        "airflow.models.hitl.HITLDetailV9 (used by review_hitl.open_reviews): ModuleNotFoundError: "
        "No module named 'airflow.models.hitl.HITLDetailV9'; 'airflow.models.hitl' is not a package"]
    with pytest.raises(AttributeError, match="name it in INTERNALS"):
        airflow_internals.NoSuchName  # noqa: B018 - the module's __getattr__ refuses an unlisted name


def test_the_adapter_resolves_what_the_workspace_uses():
    from airflow.models.hitl import HITLDetail

    assert airflow_internals.resolve("HITLDetail") is HITLDetail
    assert airflow_internals.resolve("task_runner").__name__ == "airflow.sdk.execution_time.task_runner"


def _non_public(module: str) -> bool:
    return module.split(".")[0] == "airflow" and (
        module.startswith(NOT_PUBLIC) or not module.startswith(PUBLIC))


def test_no_other_module_imports_a_non_public_airflow_name():
    offenders = []
    for root in ("plugins", "dags"):
        for f in sorted((REPO / root).rglob("*.py")):
            if f.name == "airflow_internals.py":
                continue
            for node in ast.walk(ast.parse(f.read_text())):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                offenders += [f"{f.relative_to(REPO)}:{node.lineno}: {m}" for m in modules if _non_public(m)]
    assert offenders == [], "name these in docverify_airflow/airflow_internals.py (INTERNALS) and import them from there"
