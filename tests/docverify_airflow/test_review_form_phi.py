"""What Airflow shows of a review carries no clinical text (ADR 0036): the HITL task's subject,
body and form fields hold ids, counts, severities, codes and page numbers, and a link to the
workspace. Scanned against the sample night's page text, evidence snippets and issue messages
(escalations and audits)."""

from __future__ import annotations

import json

import pytest
from tests.docverify.review_night import run_night
from tests.phi_scan import fragments, leaks, norm, packet_phi
from tests.sample_ids import sid

from docverify.sme.context import load_bundle
from docverify.sme.packets import list_pending_reviews, load_packet
from docverify.sme.render import packet_markdown
from docverify.stages.audit import audit_sample
from docverify.storage.store import ArtifactStore


def _phi(store: ArtifactStore, key: str) -> set[str]:
    """Every fragment of clinical text the packet of ``key`` refers to: its document's pages, the
    classifier's evidence snippets and reasoning, the issues' messages and page-text windows."""
    packet = load_packet(store, key)
    out = packet_phi(packet.model_dump(mode="json"))
    bundle = load_bundle(store, packet)
    for page in bundle.pages if bundle is not None else []:
        out |= fragments(page.text)
    return out


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("phi") / "root"
    b = run_night(root)
    audit_sample(b.fresh(), 1.0)  # every accepted document is audited too (when the night accepts one)
    return root


def test_the_form_body_and_subject_carry_no_clinical_text(night, monkeypatch):
    from docverify_airflow.tasks import sme_review as sme_tasks
    from docverify_airflow.web.sme_form import review_form_params

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(night))
    store = ArtifactStore(night)
    rows = list_pending_reviews(store)
    kinds = {r.get("review_kind") or "escalation" for r in rows}
    assert "escalation" in kinds and len(rows) >= 4
    scanned = 0
    for row in rows:
        key = row["review_id"]
        phi = _phi(store, key)
        body = sme_tasks.review_body(key)
        params = json.dumps({k: p.dump() for k, p in review_form_params(sme_tasks.page_types(key)).items()})
        shown = norm(body + "\n" + sme_tasks.review_subject(row) + "\n" + params)
        leaked = leaks(shown, phi)
        assert not leaked, f"{key}: clinical text in what Airflow shows: {leaked[:3]}"
        # what it does carry: the workspace link, each issue's id and code, the severities
        assert f"/docverify/reviews/{key}" in body
        packet = load_packet(store, key)
        for s in packet.issues_summary:
            assert norm(s.issue_id) in shown and norm(s.code) in shown
        if packet.review_kind == "audit":
            assert "accepted automatically; confirm or correct" in body and "escalat" not in body.lower()
        # the scan can fail: the full packet Markdown (the notebook's) does quote the page
        if phi and packet.bundle_path and packet.issues_summary:
            assert any(f in norm(packet_markdown(packet)) for f in phi), key
            scanned += 1
    assert scanned >= 3


def test_an_audit_form_says_accepted_never_escalated(night):
    """An audit's form is worded for an audit (the packet of an escalation, made an audit)."""
    from docverify.sme.form_body import review_form_markdown

    store = ArtifactStore(night)
    key = next(r["review_id"] for r in list_pending_reviews(store) if r["doc_id"] == sid("quest_cbc_panel"))
    packet = load_packet(store, key).model_copy(update={"review_kind": "audit", "v5_decision": "AUTO_ACCEPT"})
    body = review_form_markdown(packet, workspace_url=f"/docverify/reviews/{key}_audit")
    assert "accepted automatically; confirm or correct" in body and "escalat" not in body.lower()
    assert "AUTO\\_ACCEPT" in body and not leaks(body, _phi(store, key))
