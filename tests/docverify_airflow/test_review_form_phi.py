"""What Airflow shows of a review carries no clinical text (ADR 0036): the HITL task's subject,
body and form fields hold ids, counts, severities, codes and page numbers, and a link to the
workspace. Scanned against the sample night's page text, evidence snippets and issue messages
(escalations and audits)."""

from __future__ import annotations

import json
import re

import pytest
from tests.docverify.review_night import run_night

from docverify.models import DOC_TYPES
from docverify.sme.context import load_bundle
from docverify.sme.packets import list_pending_reviews, load_packet
from docverify.sme.render import packet_markdown
from docverify.stages.audit import audit_sample
from docverify.store import ArtifactStore

MIN = 14  # a fragment this long of a page's text, evidence or a message is clinical text


def _norm(text: str) -> str:
    """Backslash escapes removed and whitespace collapsed (how a reader sees the Markdown)."""
    return " ".join(text.replace("\\", "").split()).lower()


def _fragments(text: str) -> set[str]:
    """The words of ``text`` in windows of three words or more and at least MIN characters (each line's)."""
    out = set()
    for line in re.split(r"[\n.;]", text):
        words = line.split()
        for i in range(len(words)):
            frag = ""
            for n, w in enumerate(words[i:], start=1):
                frag = f"{frag} {w}".strip()
                if len(frag) >= MIN and n >= 3:
                    out.add(_norm(frag))
                    break
    return out


def _phi(store: ArtifactStore, key: str) -> set[str]:
    """Every fragment of clinical text the packet of ``key`` refers to: its document's pages, the
    classifier's evidence snippets and reasoning, the issues' messages and page-text windows."""
    packet = load_packet(store, key)
    out: set[str] = set()
    bundle = load_bundle(store, packet)
    if bundle is not None:
        for page in bundle.pages:
            out |= _fragments(page.text)
    cls = packet.primary_classification if isinstance(packet.primary_classification, dict) else {}
    for seg in cls.get("segments") or []:
        out |= _fragments(str(seg.get("reasoning") or ""))
        for c in seg.get("classifications") or []:
            for ev in c.get("top_evidence") or []:
                out |= _fragments(str(ev.get("snippet") or ""))
    for s in packet.issues_summary:
        out |= _fragments(s.message)
        ctx = s.context or {}
        for para in [*(ctx.get("before") or []), ctx.get("match") or "", *(ctx.get("after") or [])]:
            out |= _fragments(para)
    # the five type names are the form's vocabulary, not the document's text
    return {f for f in out if not any(f in t.lower() for t in DOC_TYPES)}


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("phi") / "root"
    b = run_night(root)
    out = audit_sample(b.fresh(), 1.0)
    assert out["sample"], out  # the accepted document is audited too
    return root


def test_the_form_body_and_subject_carry_no_clinical_text(night, monkeypatch):
    from docverify_airflow import sme_tasks
    from docverify_airflow.sme_form import review_form_params

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(night))
    store = ArtifactStore(night)
    rows = list_pending_reviews(store)
    kinds = {r.get("review_kind") or "escalation" for r in rows}
    assert kinds == {"escalation", "audit"} and len(rows) >= 5
    scanned = 0
    for row in rows:
        key = row["review_id"]
        phi = _phi(store, key)
        body = sme_tasks.review_body(key)
        params = json.dumps({k: p.dump() for k, p in review_form_params(sme_tasks.page_types(key)).items()})
        shown = _norm(body + "\n" + sme_tasks.review_subject(row) + "\n" + params)
        leaked = sorted(f for f in phi if f in shown)
        assert not leaked, f"{key}: clinical text in what Airflow shows: {leaked[:3]}"
        # what it does carry: the workspace link, each issue's id and code, the severities
        assert f"/docverify/reviews/{key}" in body
        packet = load_packet(store, key)
        for s in packet.issues_summary:
            assert _norm(s.issue_id) in shown and _norm(s.code) in shown
        if packet.review_kind == "audit":
            assert "accepted automatically; confirm or correct" in body and "escalat" not in body.lower()
        # the scan can fail: the full packet Markdown (the notebook's) does quote the page
        if phi and packet.bundle_path and packet.issues_summary:
            assert any(f in _norm(packet_markdown(packet)) for f in phi), key
            scanned += 1
    assert scanned >= 3
