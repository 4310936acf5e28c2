"""The SME review DAG: one human-in-the-loop task per pending SME packet.

Wiring only: the task bodies live in ``plugins/docverify_airflow/tasks/sme_review.py`` and the review
operator in ``plugins/docverify_airflow/operators/sme_review.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag, get_current_context, task

from docverify_airflow.assets import SME_PACKETS
from docverify_airflow.config.params import ReviewParams
from docverify_airflow.operators.sme_review import SMEReviewOperator

DOC_MD = """
# sme_review

Runs when `clinical_doc_verification` writes SME packets (Asset `docverify_sme_packets`), or when
triggered by hand (or from the review workspace's **Open the waiting reviews**). It is **not
paused at creation**: the first escalating night opens its reviews with no extra step.
`list_pending_reviews` lists the packets still **pending** under `<storage_root>/sme_packets/`
(most severe first, at most `max_reviews`) and `review` opens one human-in-the-loop task per
packet. SMEs answer in the **review workspace** at `/docverify/reviews/` (Browse → SME reviews:
the packet beside the answer, next review, keyboard shortcuts, answers checked before they are
sent) or in Airflow's **Browse → Required Actions**. Answers:

* **Agree** → `ground_truth/gt_<review>.json`, source `SME_VALIDATED` (the primary classification as is)
* **Correct** + the type of each page (and/or the whole document) → source `SME_CORRECTED`
* **Cannot classify** + a reason (unreadable, wrong file, needs a re-scan, other) → source
  `SME_UNCLASSIFIABLE`, kept out of the accuracy figures

An answer the rules refuse (Correct that changes nothing, a page without a type) is never saved:
the review opens again at once and the reason is shown on its workspace page. A second answer for
the same document is a new version (`….v2.json`); nothing is overwritten. No answer within
`response_timeout_hours` → the task is skipped and the packet stays pending (there is no default
answer). Who may answer: the `assignees` param, else the Variable `docverify_sme_assignees` (comma
separated user names; empty = anyone). Logs carry doc ids, versions and URIs, never text.
"""


@dag(
    dag_id="sme_review",
    schedule=SME_PACKETS,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    # reviews must appear after the first escalating night without anyone finding this Dag first
    is_paused_upon_creation=False,
    # runs overlap: an unanswered review (72 h by default) never holds back the next night's; a
    # packet is open in one run at a time through its claim (docverify.sme.claims)
    max_active_runs=16,
    default_args={"owner": "docverify", "retries": 2, "retry_delay": timedelta(minutes=1),
                  "execution_timeout": timedelta(minutes=10)},
    doc_md=DOC_MD,
    tags=["docverify", "clinical", "sme", "hitl"],
    params=ReviewParams.dag_params(),  # the form's fields: docverify_airflow.config.params.ReviewParams
)
def sme_review():
    @task
    def list_pending_reviews() -> list[dict]:
        from docverify_airflow.tasks import sme_review as sme_tasks

        return [dict(k) for k in sme_tasks.review_kwargs(get_current_context())]  # typed kwargs as the Dag's dicts

    # An answer the rules refuse is never saved: the same try opens the review again with the reason
    # stored for the workspace (SMEReviewOperator._reopen); retries are for infrastructure faults.
    SMEReviewOperator.partial(task_id="review", retries=3, retry_delay=timedelta(seconds=5),
                              retry_exponential_backoff=False, map_index_template="{{ task.doc_id }}").expand_kwargs(
        list_pending_reviews())


sme_review()
