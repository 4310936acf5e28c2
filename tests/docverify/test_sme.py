"""SME packets, page-text context, renderings, ground truth and the notebook helper (no Airflow)."""

from __future__ import annotations

import io
import json
import re
import shutil
import threading

import pytest
from tests.docverify.review_night import DS, REPO, run_night
from tests.packets import packet_name
from tests.sample_ids import sid

from docverify.domain.models import DOC_TYPES, DocumentBundle, Page, SMEPacket
from docverify.layout.local_pdf import parse_pdf
from docverify.sme.context import PdfPages, find_in_paragraphs, get_issue_context
from docverify.sme.ground_truth import ground_truth_versions, save_review
from docverify.sme.helper import SMEReviewHelper
from docverify.sme.packets import (
    PacketNotFoundError,
    build_packet,
    compare_production,
    html_rel,
    list_pending_reviews,
    load_packet,
    resolve_key,
    write_packet,
)
from docverify.sme.render import packet_html, packet_markdown
from docverify.storage.store import ArtifactStore

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def night_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("night")
    run_night(root)
    return root


@pytest.fixture
def store(night_root, tmp_path):
    """A private copy of the night's store (tests write ground truth into it)."""
    shutil.copytree(night_root, tmp_path / "root")
    return ArtifactStore(tmp_path / "root")


def _packet(primary=None, issues=(), total_pages=1, **kw) -> SMEPacket:
    return SMEPacket.model_validate({
        "doc_id": kw.pop("doc_id", "d1"), "pdf_filename": "d1.pdf", "pdf_path": "file:///nowhere/d1.pdf",
        "total_pages": total_pages, "bundle_path": "", "v5_rule": 1, "v5_reason": "Rule 1", "total_issues": len(issues),
        "issues_summary": list(issues), "primary_classification": primary, "created_at": "2026-11-21T00:00:00Z", **kw})


def _issue(issue_id="V3-0001", **kw) -> dict:
    return {"issue_id": issue_id, "severity": "BLOCKER", "agent": "V3", "code": "TRAP_ROUTINE_LAB_GENOMIC",
            "message": "m", "location": "", **kw}


def _bundle(paragraphs_by_page: dict[int, list[str]]) -> DocumentBundle:
    return DocumentBundle(doc_id="d1", file_path="d1.pdf", total_pages=len(paragraphs_by_page), pages=[
        Page(page_num=n, text="\n\n".join(ps), paragraphs=ps) for n, ps in paragraphs_by_page.items()])


PARAS = [f"Paragraph number {i} says something distinct about topic {chr(65 + i)}{chr(65 + i)}." for i in range(10)]


def _primary(segments):
    return {"doc_id": "d1", "dominant_type_overall": segments[0][2], "number_of_segments": len(segments),
            "segments": [{"segment_index": i + 1, "page_start": a, "page_end": b, "segment_page_count": b - a + 1,
                          "dominant_type": t, "reasoning": "r", "classifications": [
                              {"doc_type": t, "presence_level": "PRIMARY", "confidence": 0.9, "segment_share": 1.0,
                               "top_evidence": [{"snippet": snip, "page": a, "anchors_found": []}]}]}
                         for i, (a, b, t, snip) in enumerate(segments)],
            "document_mixture": [{"doc_type": segments[0][2], "presence_level": "PRIMARY", "overall_share": 1.0}]}


# --------------------------------------------------------------------------- context windows


@pytest.mark.parametrize("hit,before,after", [(0, [], [1, 2, 3]), (1, [0], [2, 3, 4]), (5, [3, 4], [6, 7, 8]),
                                              (8, [6, 7], [9]), (9, [7, 8], [])])
def test_context_is_two_paragraphs_before_and_three_after_inside_the_page(hit, before, after):
    bundle = _bundle({1: ["cover page"], 2: PARAS})
    packet = _packet(issues=[_issue(details={"snippet": PARAS[hit][:40]})], total_pages=2)
    ctx = get_issue_context(bundle, packet, "V3-0001")
    assert ctx["found"] and ctx["how"] == "exact" and ctx["page"] == 2
    assert ctx["match"] == PARAS[hit]
    assert ctx["before"] == [PARAS[i] for i in before]
    assert ctx["after"] == [PARAS[i] for i in after]


def test_context_tolerates_ocr_noise_and_spans_a_paragraph_break():
    paras = ["Header", "The specimen shows invasive ductal carcinoma of the left breast.", "Margins are clear.", "End"]
    noisy = "The specirnen shows invasive ductaI carcinoma of the left breast"
    assert find_in_paragraphs(paras, noisy)[:3] == (1, 1, "fuzzy")
    first, last, how, _ = find_in_paragraphs(paras, "of the left breast. Margins are clear")
    assert (first, last, how) == (1, 2, "exact")
    assert find_in_paragraphs(paras, "a sentence that is on no page at all anywhere") is None


def test_v4_issue_is_placed_by_its_evidence_and_a_fabricated_one_is_not_found():
    bundle = _bundle({1: PARAS[:5], 2: PARAS[5:]})
    primary = _primary([(1, 2, "Genomic Report", PARAS[7][:30])])
    wrong_page = _issue("V4-0001", agent="V4", code="EVIDENCE_WRONG_PAGE", location="segments[1] → Genomic Report.top_evidence[0]",
                        details={"segment_pos": 0, "doc_type": "Genomic Report", "evidence_index": 0,
                                 "claimed_page": 1, "found_on_pages": [2], "fix_page": 2})
    ctx = get_issue_context(bundle, _packet(primary, [wrong_page], 2), "V4-0001")
    assert (ctx["page"], ctx["match"], ctx["why"]) == (2, PARAS[7], "cited evidence")
    primary["segments"][0]["classifications"][0]["top_evidence"][0]["snippet"] = "BRCA1 pathogenic variant detected"
    fabricated = dict(wrong_page, details={**wrong_page["details"], "found_on_pages": [], "claimed_page": 2})
    ctx = get_issue_context(bundle, _packet(primary, [fabricated], 2), "V4-0001")
    assert ctx["found"] is False and ctx["page"] == 2 and ctx["match"] == PARAS[5]  # the claimed page, from its top


def test_unknown_issue_id_names_the_known_ones():
    with pytest.raises(KeyError, match="V3-0001"):
        get_issue_context(_bundle({1: PARAS}), _packet(issues=[_issue()]), "V9-0009")


# --------------------------------------------------------------------------- page image and boxes


def _decode_png(png: bytes) -> tuple[int, int, bytes]:
    from PIL import Image

    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[24:29] == bytes([8, 0, 0, 0, 0])  # 8-bit grayscale, no interlace
    image = Image.open(io.BytesIO(png))
    assert image.mode == "L"
    return image.width, image.height, image.tobytes()


@pytest.mark.parametrize("sample,needle", [("quest_cbc_panel", "Quest Diagnostics"),
                                           ("quest_cbc_panel", "COMPLETE BLOOD COUNT (CBC) WITH DIFFERENTIAL"),
                                           ("genomic_brca_ngs", None)])
def test_highlight_boxes_lie_inside_the_page_image_on_ink(sample, needle):
    pdf = (REPO / "include" / "samples" / f"{sample}.pdf").read_bytes()
    bundle = parse_pdf(REPO / "include" / "samples" / f"{sample}.pdf")
    page = bundle.pages[-1]
    needle = needle or page.paragraphs[len(page.paragraphs) // 2][:60]
    packet = _packet(issues=[_issue(details={"snippet": needle})], total_pages=bundle.total_pages)
    ctx = get_issue_context(bundle, packet, "V3-0001", pdf_bytes=pdf)
    hl = ctx["highlight"]
    assert ctx["found"] and hl and hl["boxes"]
    with PdfPages(pdf, hl["scale"]) as pages:
        png, w, h = pages.render_png(ctx["page"])
    width, height, pixels = _decode_png(png)
    assert (width, height) == (w, h) == (hl["image_width"], hl["image_height"])
    for b in hl["boxes"]:
        assert b["x"] >= 0 and b["x"] + b["w"] <= width and b["y"] >= 0 and b["y"] + b["h"] <= height
        inside = [pixels[y * width + x] for y in range(b["y"], b["y"] + b["h"]) for x in range(b["x"], b["x"] + b["w"])]
        assert min(inside) < 100, "a box must cover printed text"
    if needle == "Quest Diagnostics":  # the letterhead: top of the page, left half
        assert hl["boxes"][0]["y"] < 0.15 * height and hl["boxes"][0]["x"] < width / 2
    # white margin outside every box: the page image is not just dark everywhere
    assert max(pixels[:width]) == 255


# --------------------------------------------------------------------------- renderings


EVIL = "<script>alert('x')</script> & \"quoted\" <img src=x onerror=y>"


def test_html_escapes_everything_from_the_document_and_the_packet():
    bundle = _bundle({1: ["Intro", f"Result line {EVIL} end", "Outro"]})
    primary = _primary([(1, 1, "Genomic Report", f"Result line {EVIL}")])
    issue = _issue(message=f"Vendor {EVIL}", location="document_mixture → Genomic Report",
                   formatted=f"[BLOCKER] V3-0001 {EVIL}", details={"vendors": [EVIL]})
    html = packet_html(_packet(primary, [issue], run_id=EVIL), bundle=bundle)
    assert "<script" not in html and "<img" not in html and "onerror=y>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in html
    assert "Result line" in html and "Intro" in html and "Outro" in html  # the context is there, escaped


def test_packet_renderings_of_a_real_night(store):
    html = store.read_bytes(html_rel(resolve_key(store, sid("quest_cbc_panel")))).decode()
    packet = load_packet(store, sid("quest_cbc_panel"))
    assert html.count("data:image/png;base64,") == 1  # one page, embedded once, shared by the issues
    assert html.count("class='box'") >= len(packet.issues_summary)
    order = [html.index(f"id='{s.issue_id}'") for s in packet.issues_summary]
    assert order == sorted(order) and [s.severity for s in packet.issues_summary][0] == "BLOCKER"
    for s in packet.issues_summary:
        assert s.details and s.context and s.context["found"] and s.context["page"] == 1
    vendor = next(s for s in packet.issues_summary if s.code == "TRAP_ROUTINE_LAB_GENOMIC")
    assert vendor.context["match"] == "Quest Diagnostics" and vendor.context["before"] == []
    # the error packet renders too, without images
    err_html = store.read_bytes(html_rel(resolve_key(store, sid("corrupt_truncated")))).decode()
    assert "CORRUPT" in err_html and "data:image" not in err_html


def test_markdown_has_no_html_and_stays_under_the_size_limit():
    long = ("word " * 3000).strip()
    issues = [_issue(f"V3-{k:04d}", formatted=f"[MAJOR] V3-{k:04d} <b>bold</b>",
                     context={"page": 1, "before": [long, long], "match": long + " ```` fence", "after": [long] * 3,
                              "found": True}) for k in range(40)]
    packet = _packet(_primary([(1, 1, "Other", "x")]), issues)
    md = packet_markdown(packet)
    assert len(md.encode()) <= 20_000 and "truncated" in md and "V3-0000" in md
    few = packet_markdown(_packet(_primary([(1, 1, "Other", "x")]), issues[:8]))
    assert "shortened to 160 characters" in few and "truncated" not in few and "V3-0007" in few
    assert len(few.encode()) <= 20_000
    assert md.count("\n```") % 2 == 0 or md.count("````") % 2 == 0  # no fence left open
    small = packet_markdown(_packet(_primary([(1, 1, "Other", "x")]), [_issue(message="<b>x</b>",
                                                                              formatted="[BLOCKER] V3-0001 <b>")]))
    outside_fences = re.sub(r"(?s)`{3,}.*?`{3,}", "", small)
    assert "<" not in outside_fences.replace("\\<", "") and "| 0 |" not in small and "| 1 | 1–1 | Other |" in small
    assert "truncated" not in small


# --------------------------------------------------------------------------- production comparison


def test_production_comparison():
    primary = _primary([(1, 2, "Genomic Report", "x")])
    same = compare_production(primary, json.loads(json.dumps(primary)))
    assert same["agrees"] and same["dominant_type"]["agree"]
    other = _primary([(1, 1, "Other", "x"), (2, 2, "Clinical Note", "y")])
    diff = compare_production(primary, other)
    assert not diff["agrees"] and not diff["segments"]["agree"]
    assert diff["presence_differences"]["Genomic Report"] == {"primary": "PRIMARY", "production": "NO_EVIDENCE"}


def test_production_classification_beside_the_pdf_reaches_the_packet(tmp_path):
    prod = {"dominant_type_overall": "Other", "segments": [], "document_mixture": [], "classifier": "prod-v7"}
    run_night(tmp_path, ["quest_cbc_panel"], {"quest_cbc_panel.production.json": json.dumps(prod).encode()})
    packet = load_packet(ArtifactStore(tmp_path), sid("quest_cbc_panel"))
    assert packet.production_differs is True and packet.production_classification == prod
    assert packet.production_comparison["dominant_type"] == {"primary": "Genomic Report", "production": "Other",
                                                             "agree": False}


# --------------------------------------------------------------------------- ground truth


def test_agree_then_correct_makes_versions_and_never_overwrites(store):
    primary = load_packet(store, sid("quest_cbc_panel")).primary_classification
    key = resolve_key(store, sid("quest_cbc_panel"))  # this night's review of the file: <night>_<doc>_<sha10>
    assert re.fullmatch(rf"{DS}_{sid('quest_cbc_panel')}_[0-9a-f]{{10}}", key)
    rec, uri = save_review(store, sid("quest_cbc_panel"), agrees=True, reviewer="dr.a", correction_notes="fine")
    assert uri.endswith(f"/ground_truth/gt_{key}.json") and rec.version == 1
    assert (rec.doc_id, rec.review_id) == (sid("quest_cbc_panel"), key)
    assert rec.ground_truth_source == "SME_VALIDATED" and rec.ground_truth_classification == primary
    v1 = store.read_bytes(f"ground_truth/gt_{key}.json")
    packet = load_packet(store, sid("quest_cbc_panel"))
    assert (packet.review_status, packet.reviewer, packet.ground_truth_path, packet.ground_truth_version) == (
        "reviewed", "dr.a", uri, 1)
    rec2, uri2 = save_review(store, sid("quest_cbc_panel"), agrees=False, corrected_dominant_type="Other",
                             correction_notes="routine CBC", reviewer="dr.b", reviewed_at="2026-11-22T10:00:00Z")
    assert uri2.endswith(f"/gt_{key}.v2.json") and rec2.version == 2
    assert store.read_bytes(f"ground_truth/gt_{key}.json") == v1
    gt = rec2.ground_truth_classification
    assert rec2.ground_truth_source == "SME_CORRECTED" and gt["dominant_type_overall"] == "Other"
    assert [s["dominant_type"] for s in gt["segments"]] == ["Other"]  # one segment: the whole document
    # the correction holds — Other becomes PRIMARY and the replaced Genomic Report's claims go:
    # NO_EVIDENCE, its evidence dropped (no leftover MENTION_ONLY); shares and the mixture follow
    seg = gt["segments"][0]
    levels = {tc["doc_type"]: (tc["presence_level"], tc["segment_share"]) for tc in seg["classifications"]}
    assert levels["Other"] == ("PRIMARY", 1.0) and levels["Genomic Report"] == ("NO_EVIDENCE", 0.0)
    assert not any(tc["top_evidence"] for tc in seg["classifications"] if tc["doc_type"] == "Genomic Report")
    assert "Genomic Report" not in {m["doc_type"] for m in gt["document_mixture"]
                                    if m["presence_level"] != "NO_EVIDENCE"}
    assert rec2.corrections_applied[:3] == ["segments[0].dominant_type: Genomic Report → Other",
                                            "segments[0] → Genomic Report: PRIMARY → NO_EVIDENCE",
                                            "segments[0] → Other: NO_EVIDENCE → PRIMARY"]
    assert "dominant_type_overall: Genomic Report → Other" in rec2.corrections_applied
    assert load_packet(store, sid("quest_cbc_panel")).ground_truth_version == 2
    assert [r.version for r in ground_truth_versions(store, sid("quest_cbc_panel"))] == [1, 2]
    assert "reviewed" in store.read_bytes(html_rel(key)).decode()  # rendering refreshed


def test_a_reviewed_packet_survives_a_rerun_of_the_night(store):
    from docverify.stages.common import Batch
    from docverify.stages.routes import write_sme_packets

    write_sme_packets(Batch(store=store, ds=DS, run_id="copy"))  # packets name this copy's URIs
    save_review(store, sid("lab_requisition_form"), agrees=True, reviewer="dr.a")
    folder = store.root / "sme_packets"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert "reviewed" in before[packet_name(before, sid("lab_requisition_form"), ".html")].decode()
    write_sme_packets(Batch(store=store, ds=DS, run_id="rerun"))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # JSON and HTML, byte for byte
    assert sid("lab_requisition_form") not in [r["doc_id"] for r in list_pending_reviews(store)]


def test_concurrent_answers_get_distinct_versions(store):
    n, barrier, results, errors = 8, threading.Barrier(8), [], []

    def answer(k):
        barrier.wait()
        try:
            results.append(save_review(store, sid("fabricated_evidence"), agrees=k % 2 == 0, reviewer=f"sme{k}",
                                       corrected_dominant_type=None if k % 2 == 0 else "Other"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=answer, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(r.version for r, _ in results) == list(range(1, n + 1))
    stored = ground_truth_versions(store, sid("fabricated_evidence"))
    assert [r.version for r in stored] == list(range(1, n + 1))
    assert {r.reviewer for r in stored} == {f"sme{k}" for k in range(n)}  # nobody overwrote anybody
    assert load_packet(store, sid("fabricated_evidence")).ground_truth_version == n


def test_corrected_segments_replace_the_segments(store):
    rec, _ = save_review(store, sid("fabricated_evidence"), agrees=False, reviewer="dr.a", corrected_segments=[
        {"page_start": 1, "page_end": 2, "dominant_type": "Genomic Report"},
        {"page_start": 3, "page_end": 3, "dominant_type": "Clinical Note"}])
    gt = rec.ground_truth_classification
    assert [(s["segment_index"], s["page_start"], s["page_end"], s["segment_page_count"], s["dominant_type"])
            for s in gt["segments"]] == [(0, 1, 2, 2, "Genomic Report"), (1, 3, 3, 1, "Clinical Note")]
    assert gt["number_of_segments"] == 2 and gt["dominant_type_overall"] == "Genomic Report"  # most pages
    assert rec.corrected_segments[1]["dominant_type"] == "Clinical Note" and rec.corrected_dominant_type is None


@pytest.mark.parametrize("kwargs,match", [
    ({"corrected_dominant_type": "Genomic"}, "corrected_dominant_type: 'Genomic' is not a document type; allowed "
                                             "values: Clinical Note, Pathology Report"),
    ({"corrected_segments": [{"page_start": 1, "page_end": 4, "dominant_type": "Other"}]},
     r"corrected_segments\[0\].page_end: 4 is beyond the document's last page; allowed: 1..3"),
    ({"corrected_segments": [{"page_start": 1, "page_end": 1, "dominant_type": "Other"},
                             {"page_start": 3, "page_end": 3, "dominant_type": "Other"}]},
     r"corrected_segments\[1\].page_start: 3 leaves a gap"),
    ({"corrected_segments": [{"page_start": 1, "page_end": 2, "dominant_type": "Other"}]}, "must end at page 3"),
    ({"corrected_segments": [{"start": 1, "page_end": 3, "dominant_type": "Other"}]}, "missing: page_start"),
    ({"corrected_segments": [{"page_start": 1, "page_end": 3, "dominant_type": "Lab"}]},
     r"corrected_segments\[0\].dominant_type: 'Lab' is not a document type"),
    ({}, "needs corrected_dominant_type, corrected_segments, corrected_presence and/or corrected_mixture"),
    ({"corrected_dominant_type": "Genomic Report"}, "changes nothing"),
])
def test_bad_corrections_are_refused_and_nothing_is_written(store, kwargs, match):
    with pytest.raises(ValueError, match=match):
        save_review(store, sid("fabricated_evidence"), agrees=False, reviewer="dr.a", **kwargs)
    assert not store.exists("ground_truth/gt_fabricated_evidence.json")
    assert load_packet(store, sid("fabricated_evidence")).review_status == "pending"


def test_refusals_name_the_problem(store):
    with pytest.raises(PacketNotFoundError, match=f"no SME packet for document '{sid('genomic_brca_ngs')}'"):
        save_review(store, sid("genomic_brca_ngs"), agrees=True, reviewer="dr.a")  # accepted, never escalated
    with pytest.raises(ValueError, match="agrees=True takes no corrected"):
        save_review(store, sid("quest_cbc_panel"), agrees=True, corrected_dominant_type="Other", reviewer="dr.a")
    with pytest.raises(ValueError, match="reviewer"):
        save_review(store, sid("quest_cbc_panel"), agrees=True, reviewer=" ")
    with pytest.raises(ValueError, match="no primary classification to validate"):
        save_review(store, sid("corrupt_truncated"), agrees=True, reviewer="dr.a")
    rel = f"sme_packets/sme_packet_{resolve_key(store, sid('quest_cbc_panel'))}.json"
    store.write_text(rel, store.read_bytes(rel).decode().replace('"review_status": "pending"',
                                                                 '"review_status": "archived"'))
    with pytest.raises(ValueError, match=rf"sme_packet_\S+_{sid('quest_cbc_panel')}_\w+\.json is not a valid SME packet"):
        save_review(store, sid("quest_cbc_panel"), agrees=True, reviewer="dr.a")


def test_a_parse_error_packet_can_be_corrected(store):
    rec, _ = save_review(store, sid("corrupt_truncated"), agrees=False, corrected_dominant_type="Clinical Note",
                         reviewer="dr.a")
    gt = rec.ground_truth_classification
    assert gt["dominant_type_overall"] == "Clinical Note" and gt["doc_id"] == sid("corrupt_truncated")
    assert rec.ground_truth_source == "SME_CORRECTED"


def test_write_packet_never_overwrites_a_reviewed_packet(store):
    save_review(store, sid("quest_cbc_panel"), agrees=True, reviewer="dr.a")
    fresh = build_packet(doc_id="quest_cbc_panel", pdf_path="x.pdf", total_pages=1, bundle_path="", result=None,
                         error={"error": "X"}, review_id=resolve_key(store, sid("quest_cbc_panel")))
    assert write_packet(store, fresh)[1] == "kept_reviewed"
    assert load_packet(store, sid("quest_cbc_panel")).review_status == "reviewed"


# --------------------------------------------------------------------------- notebook helper


def test_helper_walks_the_spec_workflow(store):
    helper = SMEReviewHelper(str(store.root), reviewer="dr.helper")
    pending = helper.list_pending_reviews()
    assert {r["doc_id"] for r in pending} == {sid("quest_cbc_panel"), sid("fabricated_evidence"), sid("lab_requisition_form"),
                                              sid("corrupt_truncated")}
    # documents with pages to look at first, the unreadable file (ERROR) after them (ADR 0051)
    assert pending[0]["has_pages"] and pending[0]["top_severity"] == "BLOCKER"
    assert pending[-1]["top_severity"] == "ERROR" and pending[-1]["doc_id"] == sid("corrupt_truncated")
    assert set(pending[1]) >= {"doc_id", "pdf_filename", "v5_rule", "total_issues", "top_severity", "created_at"}
    packet = helper.load_packet(sid("quest_cbc_panel"))
    ctx = helper.get_issue_context(sid("quest_cbc_panel"), packet.issues_summary[0].issue_id)
    assert ctx["found"] and ctx["highlight"]["boxes"]
    assert helper.html_uri(sid("quest_cbc_panel")).startswith("file://")
    rec, uri = helper.save_review(sid("quest_cbc_panel"), False, corrected_dominant_type="Other",
                                  correction_notes="routine CBC")
    assert rec.reviewer == "dr.helper" and rec.channel == "notebook"
    assert re.search(rf"/gt_\S+_{sid('quest_cbc_panel')}_[0-9a-f]{{10}}\.json$", uri)
    assert sid("quest_cbc_panel") not in [r["doc_id"] for r in helper.list_pending_reviews()]
    assert SMEReviewHelper(store.uri("")).load_packet(sid("quest_cbc_panel")).review_status == "reviewed"  # file:// URI


def test_example_notebook_runs_against_a_store(store, monkeypatch):
    nb = json.loads((REPO / "include" / "notebooks" / "sme_review.ipynb").read_text())
    assert nb["nbformat"] == 4 and {c["cell_type"] for c in nb["cells"]} == {"markdown", "code"}
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("outputs") == [] and c.get("execution_count") is None for c in code)  # nothing stored
    monkeypatch.setenv("DOCVERIFY_STORAGE_ROOT", str(store.root))
    monkeypatch.chdir(REPO / "include" / "notebooks")
    ns: dict = {}
    for cell in code:
        src = "".join(cell["source"])
        # a type none of the candidates has (two Genomic Report, the requisition Other, the corrupt file none):
        # whichever the notebook picks first, the correction changes it (correcting the requisition to "Other"
        # changed nothing and was refused when it came first in the queue)
        src = src.replace("AGREES = None", "AGREES = False").replace('CORRECTED_TYPE = None',
                                                                     'CORRECTED_TYPE = "Clinical Note"')
        exec(compile(src, "sme_review.ipynb", "exec"), ns)  # noqa: S102 - the notebook is the test subject
    assert ns["DOC_ID"] in {sid("quest_cbc_panel"), sid("fabricated_evidence"), sid("lab_requisition_form"), sid("corrupt_truncated")}
    [rec] = ground_truth_versions(store, ns["DOC_ID"])
    assert (rec.ground_truth_source == "SME_CORRECTED"
            and rec.ground_truth_classification["dominant_type_overall"] == "Clinical Note")
    assert set(DOC_TYPES) >= {rec.corrected_dominant_type}


def _answer_in_a_process(root: str, key: str, k: int, start) -> None:
    start.wait()
    save_review(ArtifactStore(root), key, agrees=True, reviewer=f"proc{k}")


@pytest.mark.slow
def test_concurrent_answers_from_processes_leave_the_newest_version_named(store):
    """Eight processes answer at the same moment, three rounds: every version is kept and the
    packet names the newest one (each writer looks again after writing the pointer)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    key = resolve_key(store, sid("lab_requisition_form"))
    for round_ in range(3):
        start = ctx.Event()
        procs = [ctx.Process(target=_answer_in_a_process, args=(str(store.root), key, k, start)) for k in range(8)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        versions = [r.version for r in ground_truth_versions(store, key)]
        assert versions == list(range(1, 8 * (round_ + 1) + 1))
        assert load_packet(store, key).ground_truth_version == versions[-1], round_


# --------------------------------------------------------------------------- inert Markdown, file facts

HOSTILE = ["![x](https://evil.example/t.png?c=1)", "[click](javascript:alert(1))", "<img src=x onerror=y>",
           "<https://evil.example/a>", "https://evil.example/b", "www.evil.example", "mail me@evil.example",
           "**bold** _it_ `code` | cell", "&lt;script&gt;", "![ref][r]\n\n[r]: https://evil.example/r.png"]


def _outside_code(md: str) -> str:
    return re.sub(r"(?s)`{3,}.*?`{3,}", "", md)


@pytest.mark.parametrize("evil", HOSTILE)
def test_markdown_makes_every_input_derived_text_inert(evil):
    from docverify.sme.render import md_escape

    primary = _primary([(1, 1, "Genomic Report", evil)])
    primary["vendor_signals"] = [evil]
    primary["segments"][0]["dominant_type"] = evil
    packet = _packet(primary, [_issue(message=evil, formatted=evil)], run_id=evil, doc_id="d1",
                     v5_explanation=evil, v5_reason=evil, pdf_filename=f"{evil}.pdf")
    md = _outside_code(packet_markdown(packet))
    # no unescaped image, link, raw HTML, autolink or code span can come out of the text
    assert not re.search(r"(?<!\\)!(?<!\\)\[", md) and not re.search(r"(?<!\\)\]\(", md)
    assert not re.search(r"(?<!\\)<", md.replace("\\<", "")) and "](" not in md.replace("\\](", "")
    assert "https://" not in md and "www.evil" not in md and "me@evil" not in md
    assert "<img" not in md.replace("\\<", "") and "`code`" not in md
    line = md_escape(evil)
    assert "\n" not in line and all(f"\\{c}" in line for c in "![]()<>|`*_&:@" if c in evil)
    html = packet_html(packet)
    assert "<img" not in html and "<https" not in html and "href=" not in html and "onerror=y>" not in html


def test_md_escape_is_readable_after_rendering():
    from docverify.sme.render import md_escape

    assert md_escape("Quest Diagnostics — CBC 0.9") == "Quest Diagnostics — CBC 0.9"
    assert md_escape(None) == "" and md_escape("a\n\nb") == "a b"
    assert md_escape("![a](b)") == "\\!\\[a\\]\\(b\\)"


def test_an_unreadable_file_shows_what_we_know_of_it():
    packet = build_packet(doc_id="scan", pdf_path="gs://in/2026-11-21/scan <b>.pdf", total_pages=0, bundle_path="",
                          result=None, error={"doc_id": "scan", "stage": "layout", "error": "NO_TEXT_LAYER",
                                              "message": "no text on any page", "file": "gs://in/scan.pdf"},
                          size_bytes=123456)
    assert packet.error["file_name"] == "scan <b>.pdf" and packet.error["size_bytes"] == 123456
    assert (packet.error["error"], packet.error["message"]) == ("NO_TEXT_LAYER", "no text on any page")
    md = packet_markdown(packet)
    block = md[md.index("### What we know about this file"):md.index("### Issues")]
    assert "123,456 bytes" in block and "NO\\_TEXT\\_LAYER" in block and "scan \\<b\\>.pdf" in block
    html = packet_html(packet)
    facts = html[html.index("What we know about this file"):html.index("<h2>Decision</h2>")]
    assert "123,456 bytes" in facts and "NO_TEXT_LAYER" in facts and "scan &lt;b&gt;.pdf" in facts
    # a size given by the error record itself; none known → "unknown"
    assert build_packet(doc_id="x", pdf_path="x.pdf", total_pages=0, bundle_path="", result=None,
                        error={"error": "CORRUPT", "message": "m", "bytes": 7}).error["size_bytes"] == 7
    unknown = build_packet(doc_id="x", pdf_path="x.pdf", total_pages=0, bundle_path="", result=None,
                           error={"error": "CORRUPT", "message": "m"})
    assert "size_bytes" not in unknown.error and "- Size: unknown" in packet_markdown(unknown)
    # a classified document has no such block
    assert "What we know" not in packet_markdown(_packet(_primary([(1, 1, "Other", "x")])))


def test_the_notebook_helper_records_a_document_it_cannot_classify(store):
    helper = SMEReviewHelper(store.root, reviewer="dr.nb")
    rec, _ = helper.cannot_classify(sid("corrupt_truncated"), "unreadable")
    assert (rec.ground_truth_source, rec.unclassifiable_reason, rec.channel) == (
        "SME_UNCLASSIFIABLE", "unreadable", "notebook")
    with pytest.raises(ValueError, match="with the reason 'other', say in the notes why"):
        helper.cannot_classify(sid("corrupt_truncated"), "other")
    with pytest.raises(ValueError, match="'bored' is not a reason"):
        helper.cannot_classify(sid("corrupt_truncated"), "bored")
    assert load_packet(store, sid("corrupt_truncated")).review_status == "reviewed"
