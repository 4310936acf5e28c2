"""The trigger and backfill forms of the UI submit with the params' defaults.

The UI renders each Param from its JSON Schema and treats a field whose type does not admit
``null`` as required: an empty string or ``None`` default there keeps the Trigger and "Run
Backfill" buttons disabled. Each default must also validate against its own schema, the way the
API validates a submitted ``conf``."""

import copy

import jsonschema
import pytest
from tests.dags.airflow_env import REPO

DAG_IDS = ("clinical_doc_verification", "sme_review")


@pytest.fixture(scope="module")
def bag():
    # parsing needs no metadata database: the migrate (airflow_db) is for the tests that run a DAG
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def _types(schema: dict) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_every_default_submits_as_the_form_would(bag, dag_id):
    params = bag.dags[dag_id].params
    assert params.keys(), dag_id
    for name in params:
        param = params.get_param(name)
        schema = param.schema
        # the value the form holds when the operator changes nothing; an empty text box is null
        value = None if param.value == "" else param.value
        if value is None:
            assert "null" in _types(schema), (
                f"{dag_id}.{name}: an empty default on a non-nullable type keeps the Trigger button "
                f"disabled — use type=['null', ...]")
        jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
        param.resolve(value)  # Airflow's own check of a submitted conf


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_a_form_without_changes_is_accepted_as_a_whole(bag, dag_id):
    """The conf a form sends when nothing is touched resolves through the DAG's ParamsDict."""
    params = bag.dags[dag_id].params
    conf = {k: (None if params.get_param(k).value == "" else params.get_param(k).value) for k in params}
    merged = copy.deepcopy(params)
    merged.update(conf)
    assert merged.validate() == {k: conf[k] for k in params}


def test_batch_prefix_ds_placeholder_gives_each_backfilled_date_its_folder():
    from docverify_airflow.tasks.nightly import batch_prefix

    assert batch_prefix({"batch_prefix": None}, "2026-11-20") == ""
    assert batch_prefix({}, "2026-11-20") == ""
    assert batch_prefix({"batch_prefix": "  "}, "2026-11-20") == ""
    assert batch_prefix({"batch_prefix": "uploads/{ds}"}, "2026-11-19") == "uploads/2026-11-19"
    assert batch_prefix({"batch_prefix": "uploads/{ds}"}, "2026-11-20") == "uploads/2026-11-20"
    assert batch_prefix({"batch_prefix": "adhoc/run1"}, "2026-11-20") == "adhoc/run1"


def test_a_run_without_logical_date_verifies_the_day_it_was_triggered_for():
    """Airflow 3's REST API triggers with logical_date null: no ``ds`` in the context."""
    import datetime as dt
    from types import SimpleNamespace

    from docverify_airflow.night import night_of

    run = SimpleNamespace(run_after=dt.datetime(2026, 11, 20, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5))))
    assert night_of({"dag_run": run}) == "2026-11-21"  # UTC
    assert night_of({"ds": "2026-11-19", "dag_run": run}) == "2026-11-19"
    assert night_of({"dag_run": SimpleNamespace(run_after="2026-11-22T02:00:00Z")}) == "2026-11-22"
