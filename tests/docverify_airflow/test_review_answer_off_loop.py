"""Sending an SME's answer waits on the metadata database; it must not wait on the API server's event loop.
On SQLite the request whose commit holds the write lock needs that loop to finish: an answer sent from the
loop waited for it until the lock timed out, and every other request of the API server (the execution API's
heartbeats included) stalled meanwhile. The answer is sent from a worker thread, as FastAPI runs a sync
endpoint; here the send only goes through once the loop has run another coroutine."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from urllib.parse import urlencode

from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)

from docverify.sme.packets import list_pending_reviews


class User:
    def get_name(self) -> str:
        return "dr.a"

    def get_id(self) -> str:
        return "dr.a"


def _post(path: str, form: dict[str, str]):
    from starlette.requests import Request

    body = urlencode(form).encode()

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    return Request({"type": "http", "method": "POST", "path": path, "query_string": b"",
                    "headers": [(b"content-type", b"application/x-www-form-urlencoded")]}, receive)


def test_the_answer_is_sent_while_the_event_loop_serves_other_requests(review_night_root, monkeypatch):
    from docverify.storage.store import ArtifactStore
    from docverify_airflow.web import hitl as review_hitl
    from docverify_airflow.web import review as review_app

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(review_night_root))
    rows = [r for r in list_pending_reviews(ArtifactStore(review_night_root)) if not r["review_id"].endswith("_audit")]
    review_id = rows[0]["review_id"]
    tasks = {review_id: SimpleNamespace(options=["Agree", "Correct", "Cannot classify"], params={}, assignees=[])}
    monkeypatch.setattr(review_hitl, "open_reviews", lambda session: dict(tasks))
    other_request_served = threading.Event()
    sent: list[bool] = []

    def submit(session, user, task, choice, fields):
        # the database is busy until another request of the loop has run (its commit frees the lock)
        sent.append(other_request_served.wait(10))
        tasks.clear()

    monkeypatch.setattr(review_hitl, "submit", submit)
    session = SimpleNamespace(commit=lambda: None, rollback=lambda: None)
    token = review_app._token(review_id, "dr.a")
    request = _post(f"/docverify/reviews/{review_id}", {"token": token, "choice": "Agree"})

    async def another_request():
        await asyncio.sleep(0.05)
        other_request_served.set()

    async def both():
        response, _ = await asyncio.gather(review_app.answer(review_id, request, session, User()), another_request())
        return response

    response = asyncio.run(both())
    assert sent == [True]  # the loop ran the other coroutine while the answer was being sent
    assert response.status_code == 303 and "saved=" in response.headers["location"]
