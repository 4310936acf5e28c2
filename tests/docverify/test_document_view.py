"""The clinician's screen's document pane (ADR 0036) on a real night of the samples: every page
once and in order, the classification drawn as a band where each segment begins, each finding on
its page in plain words, audits worded as audits, the technical facts folded at the bottom."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from tests.docverify.review_night import run_night

from docverify.domain.codes import CATALOGUE, blocker_why, plain_words
from docverify.domain.resources import load_rule
from docverify.sme.context import load_bundle, load_pdf
from docverify.sme.document_view import document_html, document_view, headline
from docverify.sme.packets import list_pending_reviews, load_packet
from docverify.storage.store import ArtifactStore


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("docview") / "root"
    run_night(root)
    return ArtifactStore(root)


def _packet(store, stem):
    """The pending packet of the sample ``<stem>.pdf`` (found by its file name: doc ids are opaque)."""
    key = next(r["review_id"] for r in list_pending_reviews(store) if r["pdf_filename"] == f"{stem}.pdf")
    return load_packet(store, key)


def _html(store, packet):
    bundle = load_bundle(store, packet)
    return document_html(packet, bundle=bundle, pdf_bytes=load_pdf(store, packet))


def test_every_page_once_in_order_with_the_classification_drawn_on_it(night):
    packet = _packet(night, "fabricated_evidence")  # three pages
    html = _html(night, packet)
    pages = [int(p) for p in re.findall(r"data-page='(\d+)'", html)]
    assert packet.total_pages == 3 and pages == [1, 2, 3]
    assert html.count("<img alt='Page ") == 3  # each page as its image, once
    segs = packet.primary_classification["segments"]
    for seg in segs:  # a band where each segment begins, naming its pages and type
        a, b, t = seg["page_start"], seg["page_end"], seg["dominant_type"]
        label = (f"Page {a}" if a == b else f"Pages {a}–{b}") + f": {t}"
        assert f"data-segment-start='{a}'>{label}" in html
    # the first band comes before page 1: the first screen shows page 1 and its classification
    assert html.index("class='band'") < html.index("data-page='1'") < html.index("<details>")
    # the technical facts are folded at the bottom, after every page
    assert html.index("data-page='3'") < html.index("<details><summary>Technical details")
    assert packet.pdf_path in html[html.index("<details>"):]


def test_findings_sit_on_their_page_in_plain_words(night):
    packet = _packet(night, "fabricated_evidence")
    view = document_view(packet, bundle=load_bundle(night, packet), pdf_bytes=load_pdf(night, packet))
    placed = {f["issue_id"]: p["num"] for p in view["pages"] for f in p["findings"]}
    for s in packet.issues_summary:
        page = (s.context or {}).get("page")
        if page:
            assert placed[s.issue_id] == page, s.issue_id
    html = document_html(packet, bundle=load_bundle(night, packet), pdf_bytes=load_pdf(night, packet))
    for s in packet.issues_summary:
        assert html.count(f"id='finding-{s.issue_id}'") == 1  # each finding once
        assert html_lib.escape(plain_words(s.code)) in html
    if any(s.severity == "BLOCKER" for s in packet.issues_summary):
        assert html_lib.escape(blocker_why()) in html


def test_a_text_page_without_an_image_is_shown_as_text(night):
    packet = _packet(night, "quest_cbc_panel")
    bundle = load_bundle(night, packet)
    html = document_html(packet, bundle=bundle, pdf_bytes=None)
    assert "<img" not in html and html.count("data-page=") == packet.total_pages
    first_line = next(line for line in bundle.page_text(1).splitlines() if len(line.strip()) > 10).strip()
    assert html_lib.escape(first_line[:30]) in html


def test_an_audit_reads_as_an_audit(night):
    packet = _packet(night, "quest_cbc_panel").model_copy(update={"review_kind": "audit", "v5_decision": "AUTO_ACCEPT"})
    assert headline(packet).startswith("Accepted automatically; confirm or correct")
    html = _html(night, packet)
    assert "Accepted automatically; confirm or correct" in html and "Escalated" not in html
    assert "escalated because it could not be processed" not in html


def test_every_catalogue_code_has_a_plain_sentence():
    sentences = load_rule("plain_words")["codes"]
    missing = sorted(set(CATALOGUE) - set(sentences))
    assert not missing, f"add a clinician's sentence to include/rules/plain_words.json for {missing}"
    assert not set(sentences) - set(CATALOGUE), "sentences for codes the catalogue does not have"
    for code, text in sentences.items():
        assert text.endswith(".") and len(text) > 30 and "_" not in text, code
    assert plain_words("INDEPENDENT_READING_DISAGREES").startswith("A second, independent reading of these pages")


def test_the_type_of_each_page_is_chosen_beside_the_page(night):
    """In the workspace each page carries its type choice, bound to the answer form and preset to
    what the classifier said; the packet page (no controls) shows the type as text."""
    packet = _packet(night, "fabricated_evidence")
    bundle, pdf = load_bundle(night, packet), load_pdf(night, packet)
    preset = {1: "Genomic Report", 2: "Genomic Report", 3: None}
    controls = {p: {"name": f"page_{p}", "current": t, "blank": None if t else "— choose a type —"}
                for p, t in preset.items()}
    html = document_html(packet, bundle=bundle, pdf_bytes=pdf, page_controls=controls)
    for p in (1, 2, 3):
        section = html[html.index(f"data-page='{p}'"):]
        section = section[:section.index("</section>")]
        assert f"<select name='page_{p}' id='page_{p}' form='answer'>" in section  # beside its own page
    assert html.count("form='answer'") == 3
    assert "<option selected>Genomic Report</option>" in html and "— choose a type —" in html
    assert "form='answer'" not in document_html(packet, bundle=bundle, pdf_bytes=pdf)
