"""The review queue's counts agree (issue 42: "Reviews waiting (22)" over "Resume reviewing (21
open)", with nothing saying what the 22nd was): the heading's count is the reviews you can open
plus, on one line, each other kind — held by someone else, skipped in this session, no review task
open yet — and the Start button counts the first part."""

from __future__ import annotations

import re

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


class _User:
    def __init__(self, name: str):
        self.name = name

    def get_name(self) -> str:
        return self.name

    def get_id(self) -> str:
        return self.name


def _request(skipped: list[str]):
    from starlette.requests import Request

    cookie = f"docverify_skipped={','.join(skipped)}".encode()
    return Request({"type": "http", "method": "GET", "path": "/docverify/reviews/", "query_string": b"",
                    "headers": [(b"cookie", cookie)] if skipped else []})


@pytest.fixture
def queue_page(review_night_root, monkeypatch):
    from docverify.sme.packets import list_pending_reviews
    from docverify.storage.store import ArtifactStore
    from docverify_airflow.web import hitl as review_hitl
    from docverify_airflow.web import review as review_app

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(review_night_root))
    store = ArtifactStore(review_night_root)
    keys = [r["review_id"] for r in list_pending_reviews(store)]
    assert len(keys) >= 4
    tasks: dict[str, object] = {}
    monkeypatch.setattr(review_hitl, "open_reviews", lambda session: tasks)
    monkeypatch.setattr(review_hitl, "review_dag_state",
                        lambda session: {"known": True, "paused": False, "run_active": True})

    def render(*, open_tasks: list[str], skipped: list[str] = (), held: dict[str, str] | None = None) -> str:
        tasks.clear()
        tasks.update({k: object() for k in open_tasks})
        for key, who in (held or {}).items():
            assert review_app._take_lease(store, key, who)
        return review_app.queue(_request(list(skipped)), None, _User("sme.anna")).body.decode()
    return keys, render


def _figures(page: str) -> tuple[int, int, str]:
    total = int(re.search(r"<h1>Reviews waiting \((\d+)\)</h1>", page).group(1))
    start = re.search(r"id='start'[^>]*>(?:Start|Resume) reviewing \((\d+) open\)", page)
    line = re.search(r"<p class='muted' id='counts'>(.*?)</p>", page)
    return total, int(start.group(1)) if start else 0, line.group(1) if line else ""


def test_every_review_open_one_count(queue_page):
    keys, render = queue_page
    total, n_open, line = _figures(render(open_tasks=keys))
    assert total == n_open == len(keys) and line == ""


def test_the_heading_is_the_open_reviews_and_each_other_kind(queue_page):
    keys, render = queue_page
    mine, held, skipped, not_open = keys[:4]
    page = render(open_tasks=[mine, held, skipped] + keys[4:], skipped=[skipped],
                  held={mine: "sme.anna", held: "sme.ben"})
    total, n_open, line = _figures(page)
    assert total == len(keys) and n_open == len(keys) - 3, (total, n_open)
    assert "Resume reviewing" in page  # your own open review first
    assert line.startswith(f"{total} waiting: {n_open} open to you, "), line
    assert "1 being reviewed by someone else" in line and "1 skipped in this session" in line
    assert "1 with no review task open yet" in line
    assert sum(int(n) for n in re.findall(r"(\d+) (?:open to you|being|skipped|with no)", line)) == total
