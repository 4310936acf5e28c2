"""The SME packet pages served by the api-server plugin: behind Airflow's authentication, doc ids
checked before they touch a path, PHI pages never cached or framed elsewhere."""

from __future__ import annotations

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.docverify.sme_night import run_night


@pytest.fixture
def client(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from docverify_airflow import packet_app

    root = tmp_path / "root"
    run_night(root)
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
    listing = logged_in.get("/packets/")
    assert listing.status_code == 200 and 'href="quest_cbc_panel"' in listing.text
    page = logged_in.get("/packets/quest_cbc_panel")
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert page.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize("bad", ["..", "..%2F..%2Fetc%2Fpasswd", ".hidden", "a..b"])
def test_ids_that_could_leave_the_packet_folder_are_refused(logged_in, bad):
    assert logged_in.get(f"/packets/{bad}").status_code in (400, 404)


def test_unknown_packet_is_404(logged_in):
    assert logged_in.get("/packets/no_such_doc").status_code == 404


def test_the_review_form_links_the_served_page(tmp_path, monkeypatch):
    from docverify_airflow import sme_tasks

    root = tmp_path / "root"
    run_night(root)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    body = sme_tasks.review_body("quest_cbc_panel")
    assert "(/docverify/packets/quest_cbc_panel)" in body and "file://" not in body


def test_the_plugin_registers_the_app():
    import importlib

    plugin = importlib.import_module("docverify_plugin").DocverifyPlugin()
    apps = plugin.fastapi_apps
    assert apps[0]["url_prefix"] == "/docverify" and apps[0]["app"].title == "docverify SME packets"
