"""The SME's review of one packet as a human-in-the-loop task (standard provider's HITLOperator).

The form offers **Agree** / **Correct** / **Cannot classify** with the corrected dominant type,
the type of each page (or page ranges), the reason and notes. The body carries ids, counts,
severities, codes, pages and a link to the review workspace, never clinical text: Airflow shows
it to Viewers (ADR 0036, :func:`docverify.sme.form_body.review_form_markdown`); it is built when
the task runs from the stored packet and never rendered as a Jinja template. No ``defaults``: a response
timeout never chooses an answer — the task is skipped and the packet stays pending for the next
review run. An answer becomes ground truth through :func:`docverify.sme.ground_truth.save_review` (the same
writer as the notebook helper), with the responding user as the reviewer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import HITLOperator

from docverify_airflow.airflow_internals import ParamsDict
from docverify_airflow.web.sme_form import (
    AGREE,
    CANNOT_CLASSIFY,
    CORRECT,
    assigned_users,
    review_form_params,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from docverify_airflow.tasks.sme_review import SavedAnswer

if TYPE_CHECKING:
    from airflow.sdk import Context


class SMEReviewOperator(HITLOperator):
    """One SME review: opens the form for packet ``doc_id`` and saves the answer as ground truth.

    :param doc_id: the escalated document.
    :param subject: the form's headline (default: the doc id).
    :param assignees: who may answer, ``"alice,bob"`` (empty: anyone).
    :param response_timeout_hours: how long to wait for an answer; then the task is skipped and
        the packet stays pending (no default answer).
    """

    template_fields = ()  # the body is built from the packet at run time: never a template
    ui_color = "#f6e7c8"

    def __init__(self, *, doc_id: str, subject: str | None = None, assignees: str | list[str] | None = None,
                 response_timeout_hours: float | None = None, **kwargs: Any) -> None:
        for fixed in ("options", "defaults", "multiple", "body"):
            if fixed in kwargs:
                raise ValueError(f"SMEReviewOperator sets {fixed!r} itself: do not pass it")
        kwargs.pop("params", None)  # Dag params are not form fields; the form is review_form_params()
        if response_timeout_hours is not None:
            kwargs["response_timeout"] = timedelta(hours=float(response_timeout_hours))
        super().__init__(subject=subject or f"SME review: {doc_id}", options=[AGREE, CORRECT, CANNOT_CLASSIFY],
                         defaults=None,
                         multiple=False, params=review_form_params(), assigned_users=assigned_users(assignees),
                         **kwargs)
        self.doc_id = doc_id

    def execute(self, context: Context) -> Any:
        from docverify_airflow.tasks import sme_review as sme_tasks

        try:
            self.body = sme_tasks.review_body(self.doc_id)  # skips the task when the packet is no longer pending
        except Exception:
            sme_tasks.release_claim(context, self.doc_id, "no review opened")
            raise
        if not sme_tasks.has_primary(self.doc_id):
            # a document that could not be parsed/classified has nothing to agree with
            self.options = [CORRECT, CANNOT_CLASSIFY]
        self.params = ParamsDict(review_form_params(sme_tasks.page_types(self.doc_id)))
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> SavedAnswer:
        """The SME answered (or the wait timed out): save the answer as ground truth."""
        from docverify_airflow.tasks import sme_review as sme_tasks

        if event.get("error_type") == "timeout":
            sme_tasks.release_claim(context, self.doc_id, "response timeout")
            sme_tasks.timed_out(self.doc_id)  # raises AirflowSkipException: the packet stays pending
        # the form of this document (page fields) as execute() wrote it: the answer is checked against it
        preset = sme_tasks.page_types(self.doc_id)
        self.params = ParamsDict(review_form_params(preset))
        answer = super().execute_complete(context=context, event=event)
        from docverify.sme.answer import AnswerRefused
        from docverify_airflow.lineage import declared as lineage

        with lineage.traced(context, sme_tasks.lineage_uris) as traced:
            try:
                saved = sme_tasks.record_answer(context, self.doc_id, answer, preset_pages=preset)
            except AnswerRefused as exc:
                # never a silent retry loop: the reason is stored (the workspace and the packet list show
                # it), logged (no document text in it), and the same review opens again at once
                sme_tasks.record_refusal(context, self.doc_id, exc.reason, answer)
                self._reopen(context)
            sme_tasks.clear_refusal(context, self.doc_id)
            sme_tasks.release_claim(context, self.doc_id, "answered")
            traced.result = {"answered": 1, "chosen_option": saved["chosen_option"],
                             "ground_truth_source": saved["ground_truth_source"], "version": saved["version"]}
        return saved

    def _reopen(self, context: Context) -> None:
        """Clear the refused response and wait for a new one (the same task try, no retry spent)."""
        from airflow.providers.standard.version_compat import AIRFLOW_V_3_3_PLUS

        from docverify_airflow.airflow_internals import upsert_hitl_detail

        if not AIRFLOW_V_3_3_PLUS:  # pragma: no cover - the project pins Airflow 3.3
            raise RuntimeError("re-opening a refused review needs Airflow 3.3 (awaiting_input)")
        from airflow.sdk.exceptions import TaskAwaitingInput

        upsert_hitl_detail(ti_id=context["task_instance"].id, options=self.options, subject=self.subject,
                           body=None, defaults=None, multiple=False, params=self.serialized_params,
                           assigned_users=self.assigned_users)
        raise TaskAwaitingInput(method_name="execute_complete", timeout=self.response_timeout)
