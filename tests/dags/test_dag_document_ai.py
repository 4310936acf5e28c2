"""The nightly DAG's Document AI part: a planning task reads the Variables and hands the request
to the operator through XCom (templated fields), the layout task reads the operator's results."""

from tests.dags.airflow_env import REPO


def test_the_dag_wires_the_plan_into_the_operator():
    # parsing needs no metadata database: the migrate (airflow_db) is for the tests that run a DAG
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / "clinical_doc_verification.py"))
    assert bag.import_errors == {}, bag.import_errors
    t = bag.dags["clinical_doc_verification"].task_dict
    assert t["plan_document_ai"].upstream_task_ids == {"discover"}
    assert t["document_ai"].upstream_task_ids == {"plan_document_ai"}
    assert t["layout_plan"].upstream_task_ids == {"document_ai"}
    # the local parser's parts (none with Document AI: the mapped task skips), then the night's index
    assert t["layout_parse"].upstream_task_ids == {"layout_plan"}
    assert t["layout"].upstream_task_ids == {"layout_parse"} and t["layout"].trigger_rule == "none_failed"
    op = t["document_ai"]
    assert type(op).__name__ == "NightlyDocumentAIOperator" and op.deferrable is True
    # every field the plan sets is templated (an XComArg resolved at run time, again after a deferral)
    assert {"skip_reason", "processor_id", "gcs_input_uris", "gcs_output_uri", "gcp_conn_id",
            "poll_interval"} <= set(op.template_fields)
