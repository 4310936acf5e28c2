"""The packet page shows the pages: a scan nothing could be read from is shown as images (the SME
answers from what the page shows), and a page without a text layer is still an image in an
issue's context; a PDF that cannot be opened at all has none and says so."""

from __future__ import annotations

import re
import shutil

from tests.docverify.review_night import REPO

from docverify.judging.judges import OfflineJudge
from docverify.sme.packets import load_packet, resolve_key
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


def test_an_unread_scan_shows_its_page_images_and_an_unopenable_pdf_says_so(tmp_path):
    store = _night_without_ocr(tmp_path, ["scanned_no_text", "corrupt_truncated"])
    scan = store.read_bytes(f"sme_packets/sme_packet_{resolve_key(store, 'scanned_no_text')}.html").decode()
    assert "NO_TEXT_LAYER" in scan
    assert re.search(r"<h2>Pages \(1 of 1\)</h2><figure><img alt='page 1' src='data:image/png;base64,", scan)
    assert "1 (from the PDF; no text was read)" in scan
    corrupt = store.read_bytes(f"sme_packets/sme_packet_{resolve_key(store, 'corrupt_truncated')}.html").decode()
    assert "<img" not in corrupt and "unknown (the PDF could not be opened)" in corrupt
    md = packet_markdown(load_packet(store, "scanned_no_text"))
    assert "0 page(s)" not in md and "no page text read" in md
