"""/docverify/trace/<doc_id>: the nightly Dag's readers see a document's trail with a link per
step to its task instance; what may name the patient only for those who may read packets."""

from __future__ import annotations

import html
import re

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.docverify.review_night import DS, run_night
from tests.phi_scan import leaks, night_phi
from tests.sample_ids import sid


@pytest.fixture(scope="module")
def night_root(tmp_path_factory):
    from docverify.reporting import report
    from docverify.sme.ground_truth import save_review
    from docverify.sme.packets import resolve_key
    from docverify.storage.store import ArtifactStore

    root = tmp_path_factory.mktemp("trace_page") / "root"
    b = run_night(root)
    report.write(b.fresh())
    store = ArtifactStore(root)
    save_review(store, resolve_key(store, sid("quest_cbc_panel")), agrees=True, reviewer="dr_sme",
                correction_notes="see the patient's referral", channel="airflow-hitl:sme_review/r1/review[0]")
    return root


@pytest.fixture
def client(night_root, monkeypatch):
    from fastapi.testclient import TestClient

    from docverify_airflow.web import packets as packet_app
    from docverify_airflow.web import trail as trace_app

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(night_root))
    yield TestClient(packet_app.app), packet_app.app, trace_app
    packet_app.app.dependency_overrides.clear()


def _as(client, *, reader: bool):
    c, app, trace_app = client
    for dep in trace_app.READ:
        app.dependency_overrides[dep.dependency] = lambda: None
    app.dependency_overrides[trace_app.may_read_packets] = lambda: reader
    return c


def test_an_anonymous_request_is_refused(client):
    c, _, _ = client
    assert c.get(f"/trace/{sid('quest_cbc_panel')}").status_code == 401


def test_a_reviewer_sees_every_step_with_its_task_log(client, night_root):
    page = _as(client, reader=True).get(f"/trace/{sid('quest_cbc_panel')}")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    kinds = re.findall(r"data-kind='(\w+)'", page.text)
    assert kinds == ["discover", "layout", "verify", "route", "sme_packet", "answer", "batch_report"]
    logs = re.findall(r"class='log' href='([^']+)'", page.text)
    assert "/dags/clinical_doc_verification/runs/night-test/tasks/verify/mapped/0" in logs
    assert "/dags/clinical_doc_verification/runs/night-test/tasks/write_sme_packets" in logs
    assert "/dags/sme_review/runs/r1/tasks/review/mapped/0" in logs
    assert re.search(rf"href='/docverify/packets/{DS}_{sid('quest_cbc_panel')}_[0-9a-f]{{10}}'", page.text)
    assert f"href='/docverify/reports/{DS}'" in page.text
    assert "quest_cbc_panel.pdf" in page.text and "see the patient" in html.unescape(page.text)  # a reader sees them
    assert "dr_sme" in page.text and "Hidden from you" not in page.text
    assert not leaks(page.text, night_phi(night_root))


def test_a_viewer_sees_the_steps_without_what_may_name_the_patient(client, night_root):
    page = _as(client, reader=False).get(f"/trace/{sid('quest_cbc_panel')}")
    assert page.status_code == 200
    assert re.findall(r"data-kind='(\w+)'", page.text)[-1] == "batch_report"
    assert "Hidden from you" in page.text and "the SME's notes" in html.unescape(page.text)
    assert "quest_cbc_panel" not in page.text and "file://" not in page.text and "see the patient" not in page.text
    assert "/docverify/packets/" not in page.text and "packet: for reviewers" in page.text
    assert not leaks(page.text, night_phi(night_root))
    broken = _as(client, reader=False).get(f"/trace/{sid('corrupt_truncated')}")
    assert broken.status_code == 200 and "CORRUPT" in broken.text and "corrupt_truncated" not in broken.text


def test_unknown_and_unsafe_ids(client):
    c = _as(client, reader=True)
    missing = c.get("/trace/no_such_doc", headers={"accept": "text/html"})
    assert missing.status_code == 404 and "No such document" in missing.text
    for bad in ("..", ".hidden", "a..b"):
        assert c.get(f"/trace/{bad}").status_code in (400, 404)


def test_the_batch_report_links_each_document_to_its_trail(night_root):
    html = (night_root / "reports" / DS / "batch_report.html").read_text()
    for doc in (sid("quest_cbc_panel"), sid("genomic_brca_ngs"), sid("corrupt_truncated")):
        assert f"href='/docverify/trace/{doc}'>trail</a>" in html


def _rules(css: str) -> list[tuple[str, str]]:
    """(selector, declarations) of a flat stylesheet (no @-rules: the pages' own)."""
    return [(sel.strip(), decl) for group, decl in re.findall(r"([^{}]+)\{([^{}]*)\}", css)
            for sel in group.split(",")]


def _may_match(selector: str, tag: str, classes: set[str]) -> bool:
    """Whether a compound selector of the pages' kind (``tag.cls``, ``.cls:where(tag)``, the last
    compound of a descendant selector) can select an element ``tag`` with ``classes``."""
    last = selector.split()[-1]
    tags = {t for pair in re.findall(r"^([a-z][a-z0-9]*)|:where\(([a-z][a-z0-9]*)\)", last) for t in pair if t}
    wanted = set(re.findall(r"\.([\w-]+)", re.sub(r":where\([^)]*\)", "", last)))
    return (not tags or tags == {tag}) and wanted <= classes and bool(wanted or tags)


def test_the_trail_has_no_window_tall_links_and_opens_task_logs_in_a_new_tab(review_night_root, monkeypatch):
    """Issue 42: the workspace's two-pane rule (flex, a window's height) hit the trail's "review"
    link, an 800 px gap after every packet step; a task log opened inside the page (the Airflow UI
    with its sidebars inside the Browse view's frame)."""
    import json

    from fastapi.testclient import TestClient
    from tests.docverify.review_night import night_batch

    from docverify.reporting import report
    from docverify_airflow.web import packets as packet_app
    from docverify_airflow.web import trail as trace_app

    report.write(night_batch(review_night_root))
    rep = json.loads((review_night_root / "reports" / DS / "batch_report.json").read_text())
    doc = next(d["doc_id"] for d in rep["per_document"] if d.get("outputs", {}).get("sme_packet"))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(review_night_root))
    try:
        page = _as((TestClient(packet_app.app), packet_app.app, trace_app), reader=True).get(f"/trace/{doc}")
    finally:
        packet_app.app.dependency_overrides.clear()
    assert page.status_code == 200 and "class='review'" in page.text  # a pending packet's review link
    css = "".join(re.findall(r"<style>(.*?)</style>", page.text, re.S))
    tall = [sel for sel, decl in _rules(css) if "100vh" in decl or "display:flex" in decl]
    assert tall  # the workspace's rule is in the shared style: the check below has something to check
    for attrs in re.findall(r"<a ([^>]*)>", page.text):
        found = re.search(r"class='([^']*)'", attrs)
        hit = [sel for sel in tall if _may_match(sel, "a", set(found.group(1).split()) if found else set())]
        assert not hit, (attrs, hit)
    assert _may_match(".review", "a", {"review"})  # the rule as it was would have been caught
    logs = re.findall(r"<a class='log'[^>]*>", page.text)
    assert len(logs) >= 5
    assert all("target='_blank'" in a and "rel='noopener'" in a for a in logs), logs
