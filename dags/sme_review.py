"""The SME review DAG: one human-in-the-loop task per pending SME packet.

Wiring only: the task bodies live in ``plugins/docverify_airflow/sme_tasks.py`` and the review
operator in ``plugins/docverify_airflow/operators/sme_review.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from docverify_airflow.assets import SME_PACKETS
from docverify_airflow.operators.sme_review import SMEReviewOperator

DOC_MD = """
# sme_review

Runs when `clinical_doc_verification` writes SME packets (Asset `docverify_sme_packets`), or when
triggered by hand. `list_pending_reviews` lists the packets still **pending** under
`<storage_root>/sme_packets/` (most severe first, at most `max_reviews`) and `review` opens one
human-in-the-loop task per packet: **Browse → Required Actions** (or the task's *Required
Actions* tab). The form shows the packet (decision, issues with the page text around them, the
primary classification) and offers:

* **Agree** → `ground_truth/gt_<doc>.json`, source `SME_VALIDATED` (the primary classification as is)
* **Correct** + a corrected dominant type and/or corrected segments (JSON) → source `SME_CORRECTED`

A second answer for the same document is a new version (`gt_<doc>.v2.json`, …); nothing is
overwritten. No answer within `response_timeout_hours` → the task is skipped and the packet
stays pending (there is no default answer). Who may answer: the `assignees` param, else the
Variable `docverify_sme_assignees` (comma separated user names; empty = anyone). The full packet
with page images: `sme_packets/sme_packet_<doc>.html`. Logs carry doc ids, versions and URIs, never text.
"""


@dag(
    dag_id="sme_review",
    schedule=SME_PACKETS,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    # runs overlap: an unanswered review (72 h by default) never holds back the next night's; a
    # packet is open in one run at a time through its claim (docverify.sme_claims)
    max_active_runs=16,
    default_args={"owner": "docverify", "retries": 2, "retry_delay": timedelta(minutes=1),
                  "execution_timeout": timedelta(minutes=10)},
    doc_md=DOC_MD,
    tags=["docverify", "clinical", "sme", "hitl"],
    params={
        "max_reviews": Param(50, type="integer", minimum=1, maximum=1000,
                             description="Open at most this many reviews per run (most severe first)"),
        "assignees": Param(None, type=["null", "string"],
                           description="User names who may answer, comma separated (empty: the Variable "
                                       "docverify_sme_assignees, else anyone)"),
        "response_timeout_hours": Param(72, type="number", minimum=0.01,
                                        description="Hours to wait for an answer; then the packet stays pending"),
    },
)
def sme_review():
    @task
    def list_pending_reviews() -> list[dict]:
        from docverify_airflow import sme_tasks

        return sme_tasks.review_kwargs(get_current_context())

    # An answer that cannot be saved (malformed segments JSON, Agree with a correction filled in)
    # fails that try and writes nothing; the retry opens the form again for the SME.
    SMEReviewOperator.partial(task_id="review", retries=3, retry_delay=timedelta(seconds=5),
                              retry_exponential_backoff=False, map_index_template="{{ task.doc_id }}").expand_kwargs(
        list_pending_reviews())


sme_review()
