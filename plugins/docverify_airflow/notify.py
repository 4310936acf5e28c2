"""Notifications the Airflow way: the smtp and slack providers' notifiers, switched on by
Variables and connections (``airflow_settings.yaml``), off by default.

Four events reach the operators:

* ``run_failed`` — a nightly run failed (the DAG's ``on_failure_callback``);
* ``deadline_missed`` — a nightly run was not done by its deadline (the DAG's ``DeadlineAlert``,
  run by the triggerer);
* ``empty_night`` — a scheduled night found no PDF (``discover``);
* ``reviews_waiting`` — a night wrote SME packets that await review (``write_sme_packets``, and
  ``audit_sample`` for audits of accepted documents);
* ``false_accept_high`` — a night's false-accept rate is above ``docverify_audit_alert_rate``
  with 95 % confidence: its Wilson interval's lower bound exceeds the threshold (``batch_report``).

Channels: e-mail to ``docverify_notify_email`` (comma separated; empty = no e-mail) through the
SMTP connection named by ``docverify_notify_smtp_conn_id`` (default ``docverify_smtp``); Slack
through the Slack incoming-webhook connection named by ``docverify_notify_slack_conn_id`` (empty
= no Slack). Messages carry the DAG, run, date, counts, task ids and store URIs — never page text
nor file names (a file name may name a patient). A notification that cannot be sent is logged as
an error naming the channel; it never fails the night."""

from __future__ import annotations

import html
import logging
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseNotifier

from docverify_airflow.night import TaskContext

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)

VAR_EMAIL = "docverify_notify_email"
VAR_SMTP_CONN = "docverify_notify_smtp_conn_id"
VAR_SLACK_CONN = "docverify_notify_slack_conn_id"
DEFAULT_SMTP_CONN = "docverify_smtp"
EVENTS = ("run_failed", "deadline_missed", "empty_night", "reviews_waiting", "false_accept_high")


def _setting(key: str, default: str = "") -> str:
    """One channel's Variable, read on its own (config.read_variable: missing → default, unreadable
    → an error): a faulty unrelated setting must not silence the alerts."""
    from docverify_airflow import config

    try:
        return config.read_variable(key, default).strip()
    except Exception as exc:  # a notification must never fail the night; say which setting
        log.error("notifications: could not read Variable %s (%s); this channel is skipped", key,
                  type(exc).__name__)
        return ""


def _night(context: TaskContext) -> str:
    try:
        from docverify_airflow.night import night_of

        return night_of(context)
    except Exception:  # a callback context without a run: the run id identifies the night
        return ""


def _run_facts(context: TaskContext) -> dict[str, str]:
    dag = context.get("dag")
    run = context.get("dag_run")
    ti = context.get("ti") or context.get("task_instance")
    return {"dag_id": str(getattr(dag, "dag_id", "") or getattr(run, "dag_id", "") or "clinical_doc_verification"),
            "run_id": str(context.get("run_id") or getattr(run, "run_id", "") or ""),
            "ds": _night(context),
            "task_id": str(getattr(ti, "task_id", "") or "")}


def message(event: str, context: TaskContext, **facts: str | int | float) -> tuple[str, str]:
    """(subject, text) of one event: ids, counts and URIs only."""
    if event not in EVENTS:
        raise ValueError(f"unknown notification event {event!r}; one of {', '.join(EVENTS)}")
    f = {**_run_facts(context), **{k: str(v) for k, v in facts.items()}}
    night = f"{f['dag_id']} {f['ds'] or f['run_id']}"
    if event == "run_failed":
        subject = f"[docverify] FAILED: {night}"
        text = (f"The run {f['run_id']} of {f['dag_id']} failed"
                + (f" (task {f['task_id']})" if f["task_id"] else "")
                + ". The batch report still lists every document that was not verified"
                + (f": {f['report']}" if f.get("report") else "") + ". Fix the cause named in the failed task's "
                "log, then clear the failed tasks (a re-run reuses everything already done).")
    elif event == "deadline_missed":
        subject = f"[docverify] LATE: {night} not done by its deadline"
        text = (f"The run {f['run_id']} of {f['dag_id']} was not finished {f.get('deadline', 'by its deadline')}. "
                "Look at the running tasks in the Grid view (a stuck parse, a throttled LLM, a full pool).")
    elif event == "empty_night":
        subject = f"[docverify] EMPTY: {night} found no PDF"
        text = (f"The run {f['run_id']} of {f['dag_id']} found 0 PDF under {f.get('incoming', 'its incoming folder')}: "
                "nothing was verified. Check the upstream delivery for this date, then re-run the date.")
    elif event == "false_accept_high":
        subject = f"[docverify] FALSE ACCEPTS: {night} above {f.get('threshold', '?')}"
        text = (f"The audits of {f['ds'] or f['run_id']} put the false-accept rate at {f.get('rate', '?')} (95% CI "
                f"{f.get('low', '?')}–{f.get('high', '?')}, n={f.get('n', '?')} audited): the lower bound exceeds "
                f"docverify_audit_alert_rate={f.get('threshold', '?')}. Look at the corrected audits (ground_truth/ "
                f"*_audit*) and at what changed (model, prompt, classifier). Report: {f.get('report', 'reports/')}.")
    elif facts.get("kind") == "audit":
        subject = f"[docverify] {f.get('packets', '?')} audit review(s) waiting: {night}"
        text = (f"The run {f['run_id']} drew {f.get('packets', '?')} accepted document(s) for an SME audit. Answer "
                f"them in Airflow: Browse → Required Actions (DAG sme_review, subject 'AUDIT'). Packets: "
                f"{f.get('uri', 'sme_packets/')}.")
    else:
        subject = f"[docverify] {f.get('packets', '?')} SME review(s) waiting: {night}"
        text = (f"The run {f['run_id']} escalated {f.get('packets', '?')} document(s) to SME review. Answer them in "
                f"Airflow: Browse → Required Actions (DAG sme_review). Packets: {f.get('uri', 'sme_packets/')}.")
    return subject, text


def send(event: str, context: TaskContext, **facts: str | int | float) -> list[str]:
    """Send one event through every configured channel; the names of the channels that took it."""
    subject, text = message(event, context, **facts)
    sent = []
    to = [a.strip() for a in _setting(VAR_EMAIL).split(",") if a.strip()]
    if to:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        conn_id = _setting(VAR_SMTP_CONN, DEFAULT_SMTP_CONN) or DEFAULT_SMTP_CONN
        try:
            SmtpNotifier(to=to, subject=subject, html_content=f"<p>{html.escape(text)}</p>",
                         smtp_conn_id=conn_id).notify(cast("Context", context))
            sent.append("email")
        except Exception as exc:
            log.error("notifications: e-mail %s through connection %s failed (%s: %s)", event, conn_id,
                      type(exc).__name__, str(exc)[:200])
    slack = _setting(VAR_SLACK_CONN)
    if slack:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        try:
            SlackWebhookNotifier(slack_webhook_conn_id=slack, text=f"*{subject}*\n{text}").notify(context)
            sent.append("slack")
        except Exception as exc:
            log.error("notifications: Slack %s through connection %s failed (%s: %s)", event, slack,
                      type(exc).__name__, str(exc)[:200])
    log.info("notification %s: %s", event, ", ".join(sent) if sent else "no channel configured (off)")
    return sent


class DocverifyNotifier(BaseNotifier):
    """A notifier for DAG/task callbacks (``on_failure_callback=DocverifyNotifier("run_failed")``):
    the channels are read from Variables when it fires, not when the DAG file is parsed."""

    template_fields = ()

    def __init__(self, event: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if event not in EVENTS:
            raise ValueError(f"unknown notification event {event!r}; one of {', '.join(EVENTS)}")
        self.event = event

    def notify(self, context: Context) -> None:
        report = ""
        if _night(context):
            report = f"reports/{_night(context)}/batch_report.html"
        send(self.event, context, report=report)


async def deadline_missed(context: TaskContext | None = None, **kwargs: Any) -> None:
    """The DeadlineAlert callback (runs in the triggerer)."""
    import asyncio

    ctx = dict(context or {})
    dag_run = ctx.get("dag_run") or {}
    if isinstance(dag_run, dict):  # the triggerer passes the run as a mapping
        ctx.setdefault("run_id", dag_run.get("run_id", ""))
        ctx.setdefault("ds", str(dag_run.get("logical_date", ""))[:10])
    await asyncio.to_thread(send, "deadline_missed", ctx, deadline=kwargs.get("deadline", "by its deadline"))
