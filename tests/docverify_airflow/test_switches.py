"""Configuration as one place (issue 41 item 2, ADR 0055): a switch declared once gives its Variable,
its Settings field, its row in docs/configuration.md and its policy mapping; the DAGs' params are
models whose defaults the trigger forms' Params are built from, and tasks read params through them."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)

REPO = pathlib.Path(__file__).resolve().parents[2]


def _gen_config_docs():
    spec = importlib.util.spec_from_file_location("gen_config_docs", REPO / "scripts" / "gen_config_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_one_declaration_gives_the_variable_the_field_the_doc_row_and_the_policy_mapping(monkeypatch):
    from docverify_airflow import config
    from docverify_airflow.config.switches import Fraction, OnOff, policy_fields, switch

    class WithTwoMore(config.Settings):  # a temporary declaration: two switches, one of the policy
        strict_dates: OnOff = switch("docverify_strict_dates", "off", "Refuse a report whose dates disagree.",
                                     policy="strict_dates")
        sample_rate: Fraction = switch("docverify_sample_rate", "0.1", "Share of documents sampled.")

    # the Variables read, with their defaults
    assert WithTwoMore.variables() == {**config.Settings.variables(), "docverify_strict_dates": "off",
                                       "docverify_sample_rate": "0.1"}
    assert WithTwoMore.variable("strict_dates") == "docverify_strict_dates"
    # the typed field, read from its Variable (missing: the default) and refused naming it
    assert (WithTwoMore.parse({}).strict_dates, WithTwoMore.parse({}).sample_rate) == (False, 0.1)
    assert WithTwoMore.parse({"docverify_strict_dates": " Yes "}).strict_dates is True
    with pytest.raises(ValueError, match=r"^Variable docverify_sample_rate='2' is not a number from 0 to 1 "
                                         r"\(default '0.1' when missing or empty\)$"):
        WithTwoMore.parse({"docverify_sample_rate": "2"})
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STRICT_DATES", "on")
    assert WithTwoMore.load().strict_dates is True  # Settings.load reads every declared Variable
    # its row in the configuration reference, the project's rows unchanged
    gen = _gen_config_docs()
    text, project = gen.render(WithTwoMore), gen.render()
    rows = set(text.splitlines()) - set(project.splitlines())
    assert rows == {"| `docverify_strict_dates` | switch | `off` | Refuse a report whose dates disagree. |",
                    "| `docverify_sample_rate` | number | `0.1` | Share of documents sampled. |"}
    assert set(project.splitlines()) <= set(text.splitlines())
    # the policy mapping: the project's and the new one; the project's settings are untouched
    assert policy_fields(WithTwoMore) == {**config.POLICY_FIELDS, "strict_dates": "strict_dates"}
    assert "docverify_strict_dates" not in config.Settings.variables()


def test_the_policy_switches_take_verify_policys_defaults_and_doc_lines():
    from docverify.domain.policy import VerifyPolicy
    from docverify_airflow import config

    for field, policy_field in config.POLICY_FIELDS.items():
        f, p = config.Settings.model_fields[field], VerifyPolicy.model_fields[policy_field]
        assert f.description == p.description and f.description
        assert getattr(config.Settings.parse({}), field) == p.default, field
    assert set(config.POLICY_FIELDS.values()) == set(VerifyPolicy.model_fields)


def test_the_factories_take_the_settings_they_are_handed():
    """No hidden ``s or Settings.load()``: a factory called without settings is a TypeError, and with
    settings it reads no Variable."""
    import inspect

    from docverify_airflow.config import factories

    for name in ("judge", "policy", "jury", "second_opinion"):
        fn = getattr(factories, name)
        assert inspect.signature(fn).parameters["s"].default is inspect.Parameter.empty, name
        assert inspect.signature(fn).return_annotation not in (inspect.Signature.empty, "Any"), name
        with pytest.raises(TypeError):
            fn()


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag


@pytest.mark.parametrize(("dag_id", "model"), [("clinical_doc_verification", "NightParams"),
                                               ("sme_review", "ReviewParams")])
def test_each_dags_params_are_its_model(bag, dag_id, model):
    from docverify_airflow.config import params as P

    m = getattr(P, model)
    params = bag.dags[dag_id].params
    assert list(params) == list(m.model_fields)
    for name, f in m.model_fields.items():
        param = params.get_param(name)
        assert param.description == f.description
        assert param.value == (None if f.default == () else f.default)
    # the form's untouched values are the model's defaults, validated
    assert m.model_validate({k: params.get_param(k).value for k in params}) == m.of({})


def test_the_params_are_validated_once_typed_and_their_lists_split():
    from docverify_airflow.config.params import NightParams, ReviewParams

    p = NightParams.of({"params": {"shard_size": 3, "parse_timeout_s": 90, "batch_prefix": " uploads/{ds} "}})
    assert (p.shard_size, p.max_shards, p.parse_timeout_s, p.reuse_cached) == (3, 64, 90.0, True)
    assert type(NightParams.of({}).parse_timeout_s) is float and p.prefix("2026-11-20") == "uploads/2026-11-20"
    with pytest.raises(ValueError, match="concurrency"):
        NightParams.of({"params": {"concurrency": 0}})
    assert ReviewParams.of({"params": {"assignees": " alice, bob ,, "}}).assignees == ("alice", "bob")
    assert ReviewParams.of({"params": {"assignees": None}}).assignees == ()
    assert ReviewParams.of({"params": {"assignees": "  "}}).assignees == ()


def test_no_task_reads_a_dag_param_by_hand():
    """The tasks read ``context["params"]`` through the params models only (the pages' ``query_params``
    are the request's, not a DAG's)."""
    import re

    by_hand = re.compile(r"""(?<!query_)params\.get\(|(?<!query_)params\[["']|context\[["']params["']\]""")
    offenders = [f"{path.relative_to(REPO)}:{n}" for path in (REPO / "plugins" / "docverify_airflow").rglob("*.py")
                 if path.name != "params.py"
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if by_hand.search(line)]
    assert not offenders, offenders
