"""The clinicians' queue leads with documents that have pages (issue 42 item 2, ADR 0051): a file
nobody can look at (here the corrupt sample) is listed after them, in its own table marked as an
operator's work, and neither "Start reviewing" nor "next" opens it while a reviewable one waits.
The review page of such a file says what is wrong once, with the right facts, and the operator's
advice labelled as the operator's. The routes run on the sample night with Airflow's task lookups
replaced by a task per packet."""

from __future__ import annotations

import html as html_lib
import re
from types import SimpleNamespace

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)

from docverify.sme.packets import list_pending_reviews
from docverify.storage.store import ArtifactStore


class User:
    def get_name(self) -> str:
        return "dr.a"

    def get_id(self) -> str:
        return "dr.a"


def _request(path: str, query: str = ""):
    from starlette.requests import Request

    return Request({"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "headers": []})


@pytest.fixture
def app(review_night_root, monkeypatch):
    from docverify_airflow.web import hitl as review_hitl
    from docverify_airflow.web import review as review_app

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(review_night_root))
    store = ArtifactStore(review_night_root)
    rows = list_pending_reviews(store)
    tasks = {r["review_id"]: SimpleNamespace(options=["Agree", "Correct", "Cannot classify"], params={},
                                             assignees=[]) for r in rows}
    monkeypatch.setattr(review_hitl, "open_reviews", lambda session: tasks)
    monkeypatch.setattr(review_hitl, "review_dag_state",
                        lambda session: {"known": True, "paused": False, "run_active": False})
    return review_app, store, rows


def test_the_queue_starts_with_a_document_that_has_pages(app):
    review_app, _, rows = app
    unreadable = [r for r in rows if not r["has_pages"]]
    readable = [r for r in rows if r["has_pages"]]
    assert [r["pdf_filename"] for r in unreadable] == ["corrupt_truncated.pdf"] and readable
    assert rows == readable + unreadable  # the order of list_pending_reviews itself
    page = review_app.queue(_request("/reviews/"), None, User()).body.decode()
    start = re.search(r"<a class='button' id='start' href='([^']+)'>Start reviewing", page).group(1)
    assert start == readable[0]["review_id"]
    # the unreadable file in its own table, after the escalations, marked as an operator's work
    assert page.index("<h2>Escalations") < page.index("<h2 id='unreadable'>Files with no page to look at (1)</h2>")
    table = page[page.index("id='unreadable'"):]
    assert unreadable[0]["review_id"] in table and "an operator&#x27;s work" in html_lib.escape(table)
    escalations = page[page.index("<h2>Escalations"):page.index("id='unreadable'")]
    assert unreadable[0]["review_id"] not in escalations
    # why each escalation is here: its most severe finding's headline, not "V5 rule 1"
    from docverify.sme.document_view import code_headline

    for r in readable:
        if r.get("review_kind") != "audit" and r["first_code"]:
            assert html_lib.escape(code_headline(r["first_code"])) in escalations, r["first_code"]
    assert "<td>V5 rule 1</td>" not in page


def test_next_never_opens_a_file_without_pages_while_one_with_pages_waits(app):
    review_app, _, rows = app
    readable = [r["review_id"] for r in rows if r["has_pages"]]
    (unreadable,) = [r["review_id"] for r in rows if not r["has_pages"]]

    def next_after(after: str) -> str:
        response = review_app.next_review(_request("/reviews/next", f"after={after}"), None, User(), after=after)
        return response.headers["location"].split("?")[0]
    # from every readable review (the last one included: the queue wraps), the next one has pages
    for after in readable[:-1] or readable:
        assert next_after(after) in readable and next_after(after) != after
    if len(readable) > 1:
        assert next_after(readable[-1]) == readable[0]
    # once every document with pages is answered (skipped here), the unreadable file is offered
    cookie = ",".join(readable)
    request = _request("/reviews/next", f"after={readable[-1]}")
    request.scope["headers"] = [(b"cookie", f"{review_app.SKIPPED_COOKIE}={cookie}".encode())]
    response = review_app.next_review(request, None, User(), after=readable[-1])
    assert response.headers["location"].split("?")[0] == unreadable


def test_an_unreadable_files_page_says_it_once_with_the_facts(app):
    review_app, store, rows = app
    (row,) = [r for r in rows if not r["has_pages"]]
    page = review_app.review(row["review_id"], _request(f"/reviews/{row['review_id']}"), None, User()).body.decode()
    from docverify.sme.packets import load_packet

    packet = load_packet(store, row["review_id"])
    message = html_lib.escape(packet.error["message"], quote=True)
    assert page.count(message) == 1 and f"<b>For the operator</b> (nothing for you to do here): {message}" in page
    assert page.count("Nothing to look at") == 1 and "could not be read or classified" not in page
    assert f"<dt>Size</dt><dd>{packet.error['size_bytes']:,} bytes</dd>" in page and "unknown" not in page
