"""Notifications through the smtp and slack providers' notifiers, against a real SMTP server on
loopback (aiosmtpd): off by default, on by Variables and a connection, ids and counts only, and
a channel that fails never fails the night."""

from __future__ import annotations

import asyncio
import email
import json
import socket

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


class _Inbox:
    def __init__(self):
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def smtp(monkeypatch):
    from aiosmtpd.controller import Controller

    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_SMTP", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"from_email": "docverify@localhost", "disable_ssl": True, "disable_tls": True, "timeout": 10}}))
    yield inbox
    controller.stop()


CONTEXT = {"ds": "2026-11-20", "run_id": "scheduled__2026-11-20T02:00:00+00:00"}


def _body(msg) -> str:
    parts = [p for p in msg.walk() if p.get_content_type() == "text/html"]
    return parts[0].get_payload(decode=True).decode()


def test_off_by_default(smtp, monkeypatch):
    from docverify_airflow import notify

    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", raising=False)
    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_SLACK_CONN_ID", raising=False)
    assert notify.send("run_failed", CONTEXT) == []
    assert smtp.messages == []


def test_failed_night_mails_the_operators_through_the_smtp_notifier(smtp, monkeypatch):
    from docverify_airflow.notify import DocverifyNotifier

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", "ops@hospital.test, oncall@hospital.test")
    DocverifyNotifier("run_failed")(CONTEXT)
    assert len(smtp.messages) == 1
    msg = smtp.messages[0]
    assert msg["Subject"] == "[docverify] FAILED: clinical_doc_verification 2026-11-20"
    assert "ops@hospital.test" in msg["To"] and "oncall@hospital.test" in msg["To"]
    body = _body(msg)
    assert "scheduled__2026-11-20T02:00:00+00:00" in body and "reports/2026-11-20/batch_report.html" in body


@pytest.mark.parametrize(("event", "facts", "subject"), [
    ("empty_night", {"incoming": "data/incoming/2026-11-20"}, "[docverify] EMPTY: clinical_doc_verification "
                                                              "2026-11-20 found no PDF"),
    ("reviews_waiting", {"packets": 3, "uri": "data/sme_packets"}, "[docverify] 3 SME review(s) waiting: "
                                                                   "clinical_doc_verification 2026-11-20"),
    ("deadline_missed", {"deadline": "within 4:00:00 of being queued"},
     "[docverify] LATE: clinical_doc_verification 2026-11-20 not done by its deadline"),
])
def test_each_event_has_its_own_subject(smtp, monkeypatch, event, facts, subject):
    from docverify_airflow import notify

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", "ops@hospital.test")
    assert notify.send(event, CONTEXT, **facts) == ["email"]
    assert [m["Subject"] for m in smtp.messages] == [subject]


def test_the_deadline_callback_runs_as_the_triggerer_calls_it(smtp, monkeypatch):
    from docverify_airflow import notify

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", "ops@hospital.test")
    ctx = {"dag_run": {"run_id": "scheduled__2026-11-20T02:00:00+00:00", "logical_date": "2026-11-20T02:00:00+00:00",
                       "dag_id": "clinical_doc_verification"}}
    asyncio.run(notify.deadline_missed(ctx, deadline="within 4:00:00 of being queued"))
    assert smtp.messages and smtp.messages[0]["Subject"].startswith("[docverify] LATE: clinical_doc_verification "
                                                                    "2026-11-20")


def test_an_unreachable_mail_server_is_logged_never_raised(monkeypatch, caplog):
    from docverify_airflow import notify

    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_SMTP", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": _free_port(),
        "extra": {"from_email": "docverify@localhost", "disable_ssl": True, "disable_tls": True, "timeout": 2,
                  "retry_limit": 0}}))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", "ops@hospital.test")
    assert notify.send("run_failed", CONTEXT) == []
    assert "e-mail run_failed through connection docverify_smtp failed" in caplog.text


def test_an_empty_night_is_alerted_by_discover(smtp, monkeypatch, tmp_path):
    from docverify_airflow.tasks import nightly as tasks

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", "ops@hospital.test")
    out = tasks.discover({**CONTEXT, "params": {"batch_prefix": None, "max_documents": 0}})
    assert out["documents"] == 0
    assert [m["Subject"] for m in smtp.messages] == [
        "[docverify] EMPTY: clinical_doc_verification 2026-11-20 found no PDF"]


def test_messages_carry_no_file_names_or_text():
    from docverify_airflow import notify

    for event in notify.EVENTS:
        subject, text = notify.message(event, CONTEXT, packets=2, uri="gs://b/docverify/sme_packets",
                                       incoming="gs://b/docverify/incoming/2026-11-20")
        assert ".pdf" not in subject + text
    with pytest.raises(ValueError, match="unknown notification event"):
        notify.message("party", CONTEXT)



def test_slack_through_the_providers_webhook_notifier(monkeypatch):
    """The Slack channel posts to the webhook of its connection (a local HTTP server here)."""
    import http.server
    import threading

    got: list[dict] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            got.append({"path": self.path, "body": json.loads(self.rfile.read(int(self.headers["Content-Length"])))})
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):  # keep the test output quiet
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from docverify_airflow import notify

        url = f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/XXX"
        monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_SLACK", json.dumps({"conn_type": "slackwebhook", "password": url}))
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_SLACK_CONN_ID", "docverify_slack")
        monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL", raising=False)
        assert notify.send("reviews_waiting", CONTEXT, packets=2, uri="data/sme_packets") == ["slack"]
    finally:
        server.shutdown()
    assert len(got) == 1 and got[0]["path"] == "/services/T000/B000/XXX"
    assert got[0]["body"]["text"].startswith("*[docverify] 2 SME review(s) waiting: clinical_doc_verification 2026-11-20*")


def test_false_accept_and_audit_messages():
    from docverify_airflow import notify

    ctx = CONTEXT
    subject, text = notify.message("false_accept_high", ctx, rate="9.0%", low="6.0%", high="12.0%", n=40,
                                   threshold=0.05)
    assert "FALSE ACCEPTS" in subject and "6.0%" in text and "n=40" in text
    subject, text = notify.message("reviews_waiting", ctx, packets=1, uri="sme_packets/", kind="audit")
    assert "audit" in subject and "escalated" not in text
