"""airflow_settings.yaml is the whole configuration: every Variable the code reads is declared
there with the embedded default's value, the connections use provider conn types, and the
loader turns the Astro format into what `airflow … import` accepts."""

from __future__ import annotations

import importlib.util
import re

import yaml


def _loader(repo_dir):
    spec = importlib.util.spec_from_file_location("load_settings", repo_dir / "scripts" / "load_settings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_variable_the_code_reads_is_declared(repo_dir):
    settings = yaml.safe_load((repo_dir / "airflow_settings.yaml").read_text())
    declared = {v["variable_name"]: v["variable_value"] for v in settings["airflow"]["variables"]}
    code = "\n".join(p.read_text() for p in (repo_dir / "plugins" / "docverify_airflow").rglob("*.py"))
    read = set(re.findall(r'"(docverify_[a-z_]+)"', code)) & {n for n in re.findall(r'VAR_[A-Z_]+ = "([a-z_]+)"', code)}
    assert read and read <= set(declared), f"undeclared Variables: {sorted(read - set(declared))}"
    # the embedded default: local storage, local parsing, offline judgments
    assert (declared["docverify_storage_root"], declared["docverify_layout"], declared["docverify_judge"]) == (
        "data", "local", "offline")


def test_loader_keeps_conn_type_and_serialises_extras(repo_dir):
    parts = _loader(repo_dir).convert(yaml.safe_load((repo_dir / "airflow_settings.yaml").read_text()))
    conns = parts["connections"]
    assert conns["google_cloud_default"]["conn_type"] == "google_cloud_platform"
    assert conns["docverify_llm"]["conn_type"] == "pydanticai_vertex"
    assert '"model": "google-cloud:gemini-2.5-flash"' in conns["docverify_llm"]["extra"]
    assert "type" not in conns["docverify_llm"]
    assert parts["pools"]["llm"]["slots"] == 4
