"""Findings in a clinician's words, on their page (issue 42 item 3, ADR 0051), on a 9-page document
whose trap-2 finding is on page 6: the lead names the finding's page and one link reaches it; the
finding's headline is its code's words (not the V5 rule's reason); the BLOCKER paragraph once; its
codes folded under Technical details; what it is about in words; every keyword it names boxed on
its page; a jump-to-page list; pages as tall as the window at most, with a zoom toggle. The packet's
HTML file shows the same pages. Every code a verifier can emit has its words."""

from __future__ import annotations

import html as html_lib
import io
import json
import re
from html.parser import HTMLParser

import pypdfium2 as pdfium
import pytest
from tests.docverify.review_night import DS, REPO, run_night

from docverify.domain.resources import load_rule
from docverify.sme.context import load_bundle, load_pdf
from docverify.sme.document_view import code_headline, document_html
from docverify.sme.packets import html_rel, list_pending_reviews, load_packet, packet_key
from docverify.storage.store import ArtifactStore
from docverify.verify.registry import REGISTRY

SAMPLES = REPO / "include" / "samples"
#: 2 + 3 pages of reports, the requisition form as page 6, 3 pages after it
PARTS = ("genomic_brca_ngs", "mixed_genomic_then_note", "lab_requisition_form", "retry_shares")
FORM_PAGE = 6


def nine_pages() -> bytes:
    out = pdfium.PdfDocument.new()
    for name in PARTS:
        out.import_pages(pdfium.PdfDocument(str(SAMPLES / f"{name}.pdf")))
    buf = io.BytesIO()
    out.save(buf)
    return buf.getvalue()


def _form_given_a_report_type(classification: dict) -> dict:
    """The classifier's own answer with the form's page given Pathology Report as embedded content
    (the requisition sample's companion, ADR 0046's trap 2)."""
    seg = next(s for s in classification["segments"] if s["page_start"] == FORM_PAGE)
    for entry in seg["classifications"]:
        if entry["doc_type"] == "Pathology Report":
            entry.update(presence_level="EMBEDDED_RAW", confidence=0.55, segment_share=0.15, top_evidence=[
                {"snippet": "Surgical pathology (tissue) Cytology Frozen section", "page": FORM_PAGE,
                 "anchors_found": ["Surgical pathology"]}])
        else:
            entry["segment_share"] = 0.85 if entry["doc_type"] == "Other" else 0.0
    for m in classification["document_mixture"]:
        if m["doc_type"] == "Pathology Report":
            m["presence_level"] = "EMBEDDED_RAW"
    return classification


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    """A night of the 9-page document verified with its form page given a report type (the
    classifier's answer of a first night, changed there), and the corrupt sample."""
    data = nine_pages()
    first = tmp_path_factory.mktemp("nine_first") / "root"
    run_night(first, names=(), extra_files={"nine_pages.pdf": data})
    result = next((first / "runs" / DS).glob("*/result.json"))
    companion = _form_given_a_report_type(json.loads(result.read_text())["classification"])
    root = tmp_path_factory.mktemp("nine") / "root"
    run_night(root, names=("corrupt_truncated",), extra_files={
        "nine_pages.pdf": data, "nine_pages.classification.json": json.dumps(companion).encode()})
    store = ArtifactStore(root)
    key = next(r["review_id"] for r in list_pending_reviews(store) if r["pdf_filename"] == "nine_pages.pdf")
    packet = load_packet(store, key)
    return store, packet, document_html(packet, bundle=load_bundle(store, packet), pdf_bytes=load_pdf(store, packet))


class Page(HTMLParser):
    """Elements of the rendered pane: links (href), ids, the page sections' boxes."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: list[str] = []
        self.section: int | None = None
        self.boxes: dict[int, int] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("href"):
            self.hrefs.append(a["href"])
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "section" and a.get("data-page"):
            self.section = int(a["data-page"])
        if tag == "div" and a.get("class") == "box" and self.section:
            self.boxes[self.section] = self.boxes.get(self.section, 0) + 1


def _parsed(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


def test_the_lead_names_the_findings_page_and_one_link_reaches_it(night):
    _, packet, html = night
    (finding,) = packet.issues_summary
    assert (finding.code, packet.total_pages, (finding.context or {}).get("page")) == (
        "TRAP_ADMIN_DOCUMENT", 9, FORM_PAGE)
    lead = re.search(r"<p class='lead'>(.*?)</p>", html, re.S).group(1)
    assert f"page {FORM_PAGE}" in lead and "Rule 1" not in lead and "structural/fabrication" not in lead
    assert html_lib.escape(code_headline(finding.code)) in lead
    assert f"<a id='goto-finding' href='#page-{FORM_PAGE}'>Go to page {FORM_PAGE}</a>" in lead
    page = _parsed(html)
    assert f"page-{FORM_PAGE}" in page.ids  # the link's target is the page itself
    # a jump-to-page list: every page once, the finding's page marked
    jump = re.search(r"<nav class='jump'.*?</nav>", html, re.S).group(0)
    assert re.findall(r"href='#page-(\d+)'", jump) == [str(p) for p in range(1, 10)]
    assert re.search(rf"<a href='#page-{FORM_PAGE}' class='has'", jump)


def test_the_finding_is_in_words_on_its_page_with_every_keyword_boxed(night):
    _, packet, html = night
    (finding,) = packet.issues_summary
    section = re.search(rf"<section class='page' id='page-{FORM_PAGE}'.*?</section>", html, re.S).group(0)
    block = re.search(r"<div class='finding'.*?</details></div>", section, re.S).group(0)
    assert f"href='#page-{FORM_PAGE}'>page {FORM_PAGE}</a>" in block
    about = html_lib.unescape(re.search(r"<div class='about'>(.*?)</div>", block).group(1))
    assert "Pathology Report" in about and "EMBEDDED_RAW" in about and "embedded in the page" in about
    keywords = finding.details["keywords"]
    assert len(keywords) == 6 and all(repr(k) in about for k in keywords)
    # the codes and the engineer's message are folded under Technical details, not in the headline
    tech = re.search(r"<details class='tech'><summary>Technical details</summary>(.*?)</details>", block).group(1)
    assert finding.issue_id in tech and finding.code in tech
    assert finding.code not in block.replace(tech, "")
    # every keyword named is boxed on its page (each found once on the form), nothing on other pages
    boxes = _parsed(html).boxes
    assert boxes.get(FORM_PAGE, 0) >= len(keywords) and set(boxes) == {FORM_PAGE}
    # the BLOCKER paragraph once for the document, not per finding
    assert html.count("<p class='why'>") == 1


def test_pages_fit_the_window_with_a_zoom_and_the_packet_file_shows_them(night):
    store, packet, html = night
    assert html.count("<img alt='Page ") == 9
    fits = re.findall(r"max-width:calc\(\(100vh - (?:6em|12em)\) \* (\d+) / (\d+)\)", html)
    assert len(fits) == 9 and all(int(w) < int(h) for w, h in fits)  # portrait pages: bounded by the height
    assert html.count("class='zoom'") == 9 and "<label class='zoomctl' for='zoom-6'>" in html
    written = store.read_bytes(html_rel(packet_key(packet))).decode()
    assert written.count("<img alt='Page ") == 9 and "<a id='goto-finding' href='#page-6'>" in written


def test_every_code_a_verifier_can_emit_has_a_headline_and_a_sentence():
    words = load_rule("plain_words")
    catalogue = set(REGISTRY.catalogue)
    missing = sorted(catalogue - set(words["headlines"])), sorted(catalogue - set(words["codes"]))
    assert missing == ([], []), f"add words to include/rules/plain_words.json for {missing}"
    assert not set(words["headlines"]) - catalogue, "headlines for codes no verifier emits"
    for code, text in words["headlines"].items():
        assert 10 < len(text) <= 70 and "_" not in text and not text.endswith("."), code
    assert len(set(words["headlines"].values())) == len(words["headlines"]), "two codes with one headline"
