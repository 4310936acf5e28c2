"""The packet's HTML file (the artefact beside its JSON) shows the document as the clinician's screen
does (ADR 0051): every page once, with the findings on their pages. A scan nothing could be read
from is shown as images (the SME answers from what the page shows); a PDF that cannot be opened at
all has none and says so once, with the operator's advice labelled as the operator's."""

from __future__ import annotations

import html as html_lib
import re
import shutil

from tests.docverify.review_night import REPO

from docverify.judging.judges import OfflineJudge
from docverify.sme.packets import html_rel, list_pending_reviews, load_packet, packet_key
from docverify.sme.render import packet_markdown
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.routes import write_sme_packets
from docverify.stages.verify import arbiter, plan_shards, verify_shard
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


def _night_without_ocr(root, names):
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copy(REPO / "include" / "samples" / f"{n}.pdf", incoming / f"{n}.pdf")
    b = Batch(store=ArtifactStore(root), ds=DS, run_id="pages")
    discover(b)
    layout_local(b, workers=1, timeout_s=60, ocr=False)  # the scan stays NO_TEXT_LAYER
    shards = plan_shards(b)
    for i, shard in enumerate(shards):
        verify_shard(b, shard, OfflineJudge(), str(i))
    arbiter(b, shards=len(shards))
    write_sme_packets(b)
    return b.store


def written_html(store, stem):
    """The packet of the sample ``<stem>.pdf`` (by its file name: doc ids are opaque) and the HTML
    the night wrote beside its JSON."""
    key = next(r["review_id"] for r in list_pending_reviews(store) if r["pdf_filename"] == f"{stem}.pdf")
    packet = load_packet(store, key)
    return packet, store.read_bytes(html_rel(packet_key(packet))).decode()


def test_an_unread_scan_shows_its_page_images_and_an_unopenable_pdf_says_so_once(tmp_path):
    store = _night_without_ocr(tmp_path, ["scanned_no_text", "corrupt_truncated"])
    scan_packet, scan = written_html(store, "scanned_no_text")
    assert "NO_TEXT_LAYER" in scan
    assert re.search(r"<section class='page' id='page-1' data-page='1'>.*?<img alt='Page 1' "
                     r"src='data:image/png;base64,", scan)
    assert "1 (from the PDF; no text was read)" in scan
    corrupt_packet, corrupt = written_html(store, "corrupt_truncated")
    assert "<img" not in corrupt and "none (the file could not be opened as a PDF)" in corrupt
    # one message: what it means for the clinician once, the operator's advice once and labelled
    message = html_lib.escape(corrupt_packet.error["message"], quote=True)
    assert corrupt.count("Nothing to look at: the file is damaged") == 1
    assert corrupt.count(message) == 1 and "<b>For the operator</b> (nothing for you to do here): " + message in corrupt
    assert "No page of this document could be shown" not in corrupt
    md = packet_markdown(scan_packet)
    assert "0 page(s)" not in md and "no page text read" in md
    assert "- For the operator: " in packet_markdown(corrupt_packet)


def test_an_empty_file_is_0_bytes_and_nothing_to_look_at():
    from docverify.sme.document_view import document_html
    from docverify.sme.facts import file_facts, packet_has_pages
    from docverify.sme.packets import build_packet

    packet = build_packet(doc_id="d", pdf_path="/in/empty.pdf", total_pages=0, bundle_path="", result=None,
                          error={"error": "EMPTY_FILE", "message": "empty.pdf is empty (0 bytes): re-send it"})
    assert dict(file_facts(packet))["Size"] == "0 bytes" and not packet_has_pages(packet)
    html = document_html(packet, bundle=None, pdf_bytes=None)
    assert "Nothing to look at: the file is empty (0 bytes)" in html and "unknown" not in html
    assert html.count("re-send it") == 1


def test_an_audit_packets_file_shows_its_pages(tmp_path):
    """An audit has no finding to crop a page around: its file draws the document all the same."""
    from tests.docverify.review_night import run_night

    from docverify.stages.audit import audit_sample

    b = run_night(tmp_path / "root", names=("genomic_brca_ngs",))
    audit_sample(b.fresh(), 1.0)
    store = b.store
    (row,) = [r for r in list_pending_reviews(store) if r["review_kind"] == "audit"]
    packet = load_packet(store, row["review_id"])
    html = store.read_bytes(html_rel(packet_key(packet))).decode()
    assert packet.total_pages == 2 and html.count("<img alt='Page ") == 2
    assert [int(p) for p in re.findall(r"data-page='(\d+)'", html)] == [1, 2]
    assert "Accepted automatically; confirm or correct" in html
