"""The SME packet pages served by the api-server plugin: behind Airflow's authentication, doc ids
checked before they touch a path, PHI pages never cached or framed elsewhere."""

from __future__ import annotations

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.docverify.review_night import night_batch
from tests.sample_ids import sid


@pytest.fixture
def client(review_night_root, monkeypatch):
    from fastapi.testclient import TestClient

    from docverify_airflow.web import packets as packet_app

    root = review_night_root  # review_night.run_night's root, restored for each test
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    return TestClient(packet_app.app), packet_app


def test_an_anonymous_request_is_refused(client):
    c, _ = client
    assert c.get("/packets/").status_code == 401
    assert c.get("/packets/quest_cbc_panel").status_code == 401


@pytest.fixture
def logged_in(client):
    c, packet_app = client
    for dep in packet_app.AUTH:
        packet_app.app.dependency_overrides[dep.dependency] = lambda: None
    yield c
    packet_app.app.dependency_overrides.clear()


def test_pending_list_and_one_packet(logged_in):
    import re

    listing = logged_in.get("/packets/")
    key = re.search(rf'href="(\S+_{sid("quest_cbc_panel")}_[0-9a-f]{{10}})"', listing.text).group(1)  # one night's review
    assert listing.status_code == 200 and f">{sid('quest_cbc_panel')}</a>" in listing.text
    page = logged_in.get(f"/packets/{key}")
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert page.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize("bad", ["..", "..%2F..%2Fetc%2Fpasswd", ".hidden", "a..b"])
def test_ids_that_could_leave_the_packet_folder_are_refused(logged_in, bad):
    assert logged_in.get(f"/packets/{bad}").status_code in (400, 404)


def test_unknown_packet_is_404(logged_in):
    assert logged_in.get("/packets/no_such_doc").status_code == 404


def test_the_review_form_links_the_served_page(review_night_root, monkeypatch):
    from docverify_airflow.tasks import sme_review as sme_tasks

    root = review_night_root  # review_night.run_night's root, restored for each test
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    from docverify.sme.packets import resolve_key
    from docverify.storage.store import ArtifactStore

    key = resolve_key(ArtifactStore(root), sid("quest_cbc_panel"))
    body = sme_tasks.review_body(key)
    assert f"(/docverify/packets/{key})" in body and "file://" not in body


def test_the_plugin_registers_the_app():
    import importlib

    plugin = importlib.import_module("docverify_plugin").DocverifyPlugin()
    apps = plugin.fastapi_apps
    assert apps[0]["url_prefix"] == "/docverify" and apps[0]["app"].title == "docverify SME packets"


def test_the_form_body_is_short_when_the_page_is_served(review_night_root, monkeypatch):
    """Each page once with its issues marked is the served page's job: the form keeps ids, codes
    and pages, none of the page text (Airflow shows the form to Viewers, ADR 0036)."""
    from docverify.sme.packets import load_packet, resolve_key
    from docverify.sme.render import packet_markdown
    from docverify.storage.store import ArtifactStore
    from docverify_airflow.tasks import sme_review as sme_tasks

    root = review_night_root  # review_night.run_night's root, restored for each test
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    store = ArtifactStore(root)
    key = resolve_key(store, sid("lab_requisition_form"))
    form = sme_tasks.review_body(key)
    full = packet_markdown(load_packet(store, key))
    assert len(form) < len(full) and ">> " not in form and ">> " in full
    for issue in load_packet(store, key).issues_summary:
        ctx = issue.context or {}
        for para in [*(ctx.get("before") or []), ctx.get("match") or ""]:
            if len(para) > 20:
                assert para[:20] not in form and para[:20] in full


def test_the_trend_page_and_its_exports(client):
    """Behind the login (readers of the nightly Dag); one row per night with the routes and the
    false-accept columns; the CSV and JSON carry the same rows."""
    import csv
    import io
    import os
    import pathlib

    from tests.docverify.review_night import DS

    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.storage.store import ArtifactStore

    c, packet_app = client
    report.write(Batch(store=ArtifactStore(pathlib.Path(os.environ["AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT"])), ds=DS,
                         run_id="night-test"))
    assert c.get("/trend/").status_code == 401 and c.get("/trend/trend.csv").status_code == 401
    for dep in packet_app.TREND_AUTH:
        packet_app.app.dependency_overrides[dep.dependency] = lambda: None
    try:
        page = c.get("/trend/")
        assert page.status_code == 200 and "false accept rate" in page.text and "trend.csv" in page.text
        assert page.headers["cache-control"] == "no-store"
        data = c.get("/trend/trend.json").json()
        rows = list(csv.DictReader(io.StringIO(c.get("/trend/trend.csv").text)))
        assert data["nights"] and len(rows) == len(data["nights"])
        assert rows[0]["night"] == data["nights"][0]["night"] and int(rows[0]["documents"]) > 0
        assert set(data["columns"]) >= {"escalation_rate", "false_accept_rate", "false_accept_ci95_high", "audited"}
    finally:
        packet_app.app.dependency_overrides.clear()


def test_people_get_pages_and_api_clients_json(client, logged_in):
    """A browser without a session is sent to Airflow's login and back; an unknown packet is a page
    saying what happened; a client asking for JSON keeps the JSON error."""
    c, _ = client
    html_accept = {"accept": "text/html,application/xhtml+xml"}
    anonymous = c.get("/reviews/", headers=html_accept, follow_redirects=False)
    assert anonymous.status_code == 303 and "login" in anonymous.headers["location"]
    assert "next=%2Freviews%2F" in anonymous.headers["location"]  # back to the page after the login
    missing = logged_in.get("/packets/no_such_doc", headers=html_accept)
    assert missing.status_code == 404 and "<h1>" in missing.text and "review queue" in missing.text
    assert missing.headers["cache-control"] == "no-store"
    api = logged_in.get("/packets/no_such_doc", headers={"accept": "application/json"})
    assert api.status_code == 404 and api.json()["detail"] == "no packet for no_such_doc"


def test_the_workspace_routes_are_behind_the_login(client):
    c, _ = client
    for path in ("/reviews/", "/reviews/next", "/reviews/some_review"):
        assert c.get(path).status_code == 401, path
    assert c.post("/reviews/some_review", data={"choice": "Agree"}).status_code == 401
    assert c.post("/reviews/open").status_code == 401


def test_the_batch_report_is_served_with_a_link_to_each_review(review_night_root, monkeypatch):
    import json
    import re

    from fastapi.testclient import TestClient

    from docverify.reporting import report
    from docverify_airflow.web import packets as packet_app

    root = review_night_root  # review_night.run_night's root, restored for each test
    batch = night_batch(root)
    report.write(batch)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    for dep in packet_app.TREND_AUTH:
        packet_app.app.dependency_overrides[dep.dependency] = lambda: None
    try:
        c = TestClient(packet_app.app)
        page = c.get(f"/reports/{batch.ds}")
        assert page.status_code == 200
        links = re.findall(r"href='/docverify/reviews/([^']+)'", page.text)
        packets = {p.name.removeprefix("sme_packet_").removesuffix(".json")
                   for p in (root / "sme_packets").glob("sme_packet_*.json") if not p.name.endswith("_audit.json")}
        assert links and set(links) == packets  # every escalation, and only those, links its review
        # the route column names routes, not the tasks that carried them
        assert "<td>ESCALATE_TO_SME</td><td>ESCALATE_TO_SME</td>" in page.text
        assert "<td>write_sme_packets</td><td>ESCALATE_TO_SME</td>" not in page.text
        assert c.get("/reports/..%2Fetc").status_code in (400, 404)
        assert c.get("/reports/1999-01-01").status_code == 404
        # a person asking for a night with no report is told what is missing, and where the nights are
        missing = c.get("/reports/1999-01-01", headers={"Accept": "text/html"})
        assert missing.status_code == 404 and "No batch report for this night" in missing.text
        assert "href='/docverify/reports/'" in missing.text and "review" not in missing.text.split("<h1>")[1][:80]
        # the index: one row per night with its counts, linked to its report and its reviews
        index = c.get("/reports/")
        assert index.status_code == 200 and f"<a href='{batch.ds}'>{batch.ds}</a>" in index.text
        assert f"href='../reviews/?night={batch.ds}'" in index.text
        rep = json.loads((root / "reports" / batch.ds / "batch_report.json").read_text())
        assert f"<td>{rep['documents']}</td><td>{rep['final_routes'].get('AUTO_ACCEPT', 0)}</td>" in index.text
    finally:
        packet_app.app.dependency_overrides.clear()


def test_the_reports_index_counts_are_the_reports_and_an_empty_night_is_flagged(review_night_root, monkeypatch):
    """Issue 42: the index said 8 accepted where the night's trend row said 9 (it left out the
    document accepted after the automatic fix); an empty night was not flagged there."""
    import json
    import re

    from fastapi.testclient import TestClient
    from tests.batch_stages import run_stages

    from docverify.judging.judges import OfflineJudge
    from docverify.reporting import report, trend
    from docverify.stages.common import Batch
    from docverify.storage.store import ArtifactStore
    from docverify_airflow.web import packets as packet_app

    root = review_night_root
    report.write(night_batch(root))
    retried = root / "reports" / "2026-11-19" / "batch_report.json"  # a night whose report has a retried accept
    retried.parent.mkdir(parents=True)
    retried.write_text(json.dumps({"ds": "2026-11-19", "run_id": "scheduled__2026-11-19", "documents": 12,
                                   "final_routes": {"AUTO_ACCEPT": 8, "AUTO_RETRY→AUTO_ACCEPT": 1,
                                                    "ESCALATE_TO_SME": 2, "AUTO_RETRY→ESCALATE_TO_SME": 1},
                                   "errors": [{"doc_id": "doc-0", "stage": "layout", "error": "CORRUPT",
                                               "message": "-"}]}))
    broken = root / "reports" / "2026-11-17" / "batch_report.json"  # not a report: skipped, as the trend skips it
    broken.parent.mkdir(parents=True)
    broken.write_text(json.dumps({"ds": "2026-11-17", "documents": "many", "final_routes": ["AUTO_ACCEPT"]}))
    empty = Batch(store=ArtifactStore(root), ds="2026-11-18", run_id="scheduled__2026-11-18")
    run_stages(empty, OfflineJudge())
    report.write(empty.fresh())
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    for dep in packet_app.TREND_AUTH:
        packet_app.app.dependency_overrides[dep.dependency] = lambda: None
    try:
        index = TestClient(packet_app.app).get("/reports/").text
    finally:
        packet_app.app.dependency_overrides.clear()
    rows = {m[0]: m[1] for m in re.findall(r"<tr[^>]*><td><a href='([\d-]+)'>.*?</a>(.*?)</tr>", index)}
    assert set(rows) == {"2026-11-18", "2026-11-19", "2026-11-21"}
    for row in trend.night_rows(ArtifactStore(root)):  # every night's counts: the trend's and the report's
        rep = json.loads((root / "reports" / str(row["night"]) / "batch_report.json").read_text())
        counts = [row["documents"], row["accepted"], row["escalated"], len(rep.get("errors") or [])]
        assert re.findall(r"<td>(\d+)</td>", rows[str(row["night"])])[:4] == [str(n) for n in counts], row
    assert re.findall(r"<td>(\d+)</td>", rows["2026-11-19"])[:4] == ["12", "9", "3", "1"]
    assert "EMPTY NIGHT" in rows["2026-11-18"] and "EMPTY NIGHT" not in rows["2026-11-19"] + rows["2026-11-21"]


def test_the_packet_page_shows_every_page_once_with_the_classification_on_it(logged_in):
    """Document first (ADR 0036): the three pages of fabricated_evidence once each, in order, a
    band where each segment begins, each finding once and in plain words, the technical facts
    folded after the pages."""
    import re

    from docverify.domain.codes import plain_words

    listing = logged_in.get("/packets/")
    key = re.search(rf'href="(\S+_{sid("fabricated_evidence")}_[0-9a-f]{{10}})"', listing.text).group(1)
    page = logged_in.get(f"/packets/{key}").text
    assert [int(p) for p in re.findall(r"data-page='(\d+)'", page)] == [1, 2, 3]
    assert page.count("<img alt='Page ") == 3 and "class='band'" in page
    assert page.index("class='band'") < page.index("data-page='1'") < page.index("<details><summary>Technical")
    assert f"/docverify/reviews/{key}" in page
    codes = set(re.findall(r"id='finding-[^']+'.*?· ([A-Z_]+) ·", page))
    assert codes and all(plain_words(c).split("'")[0][:40] in page for c in codes)
