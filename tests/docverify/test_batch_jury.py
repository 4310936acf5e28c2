"""A sample night with the CR_V2 jury and the V5 second opinion on the fake Gemini endpoint (real
google-genai client; the fake's jurors vote KEEP and its second opinion proposes AUTO_ACCEPT at
0.9): it runs end to end, the routes are the embedded default's, the report shows every vote and
the second-opinion counts, and a re-run costs no call. Without them the report has neither."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from tests.docverify.test_batch_llm import DS, run_all, sample_batch
from tests.fake_gemini import FakeGemini
from tests.sample_ids import expected_routes as sample_routes
from tests.sample_ids import sid

from docverify.arbiters.jury import Juror, Jury
from docverify.arbiters.second_opinion import SecondOpinion
from docverify.judging.judges import OfflineJudge
from docverify.llm.cache import VerdictCache
from docverify.llm.faults import BackoffRetry
from docverify.llm.judge import LLMJudge
from docverify.pipeline.document import VerifyDeps
from docverify.stages.common import Batch


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def gemini_llm(fake: FakeGemini, store) -> LLMJudge:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    return LLMJudge(model, "google:gemini-2.5-flash", cache=VerdictCache(store),
                    retry_policy=BackoffRetry(max_attempts=2, initial_wait_s=0.01, max_wait_s=0.02))


def judged(fake, store, *, jury=True, second=True) -> VerifyDeps:
    llm = gemini_llm(fake, store)
    return VerifyDeps(OfflineJudge(),
                      jury=Jury([Juror("A", llm), Juror("B", llm), Juror("C", llm, "JURY_EVIDENCE")]) if jury else None,
                      second_opinion=SecondOpinion(llm) if second else None)


#: A corpus PDF (a LaTeX article: "Other") supplied with a classification that calls it a
#: Radiology Report, so that the offline V2 judgment raises a finding (LABEL_TEXT_MISMATCH) for
#: the jury to review (the samples' judgments find nothing); with the finding kept it escalates.
EXTRA = "normal_minimal_latex.pdf"


def _radiology_companion(pdf) -> dict:
    """The offline classifier's own classification of ``pdf`` with its type swapped to Radiology
    Report (evidence, shares and mixture kept consistent): only the label is wrong."""
    from docverify.classify.offline import classify_offline
    from docverify.layout.local_pdf import parse_pdf

    cls = classify_offline(parse_pdf(pdf, doc_id=pdf.stem, file_uri=str(pdf))).model_dump(mode="json")
    swap = {"Other": "Radiology Report", "Radiology Report": "Other"}
    for seg in cls["segments"]:
        seg["dominant_type"] = swap.get(seg["dominant_type"], seg["dominant_type"])
        for tc in seg["classifications"]:
            tc["doc_type"] = swap.get(tc["doc_type"], tc["doc_type"])
    for m in cls["document_mixture"]:
        m["doc_type"] = swap.get(m["doc_type"], m["doc_type"])
    cls["dominant_type_overall"] = swap.get(cls["dominant_type_overall"], cls["dominant_type_overall"])
    return cls


@pytest.mark.slow
def test_sample_night_with_the_jury_and_the_second_opinion(tmp_path, repo_dir, corpora_dir, fake, caplog):
    b = sample_batch(tmp_path, repo_dir)
    shutil.copy(corpora_dir / "pdfs" / EXTRA, tmp_path / "incoming" / DS / EXTRA)
    (tmp_path / "incoming" / DS / f"{EXTRA[:-4]}.classification.json").write_text(
        json.dumps(_radiology_companion(corpora_dir / "pdfs" / EXTRA)))
    plain = run_all(sample_batch(tmp_path / "plain", repo_dir), OfflineJudge())
    assert "jury" not in plain and "second_opinion" not in plain
    with caplog.at_level(logging.INFO, logger="docverify.lineage"):
        rep = run_all(b, judged(fake, b.store))
    expected = sample_routes()  # by doc id (ADR 0050)
    assert {d["doc_id"]: d["final_decision"] for d in rep["per_document"]} == {
        **{k: ("AUTO_ACCEPT" if v.endswith("AUTO_ACCEPT") else "ESCALATE_TO_SME") for k, v in expected.items()},
        sid(EXTRA[:-4]): "ESCALATE_TO_SME"}
    # the jury reviewed the offline judgments' findings; every vote is in the report
    jury = rep["jury"]
    assert jury["findings_reviewed"] > 0 and jury["final_actions"] == {"KEEP": jury["findings_reviewed"]}
    votes = [v for d in rep["per_document"] for v in d.get("jury", [])]
    assert len(votes) == jury["findings_reviewed"]
    assert all(v["votes"] == {"A": "KEEP", "B": "KEEP", "C": "KEEP"} and v["rule"] == 1 for v in votes)
    assert all(v["agent"] in ("V2", "V3", "V4") for v in votes)
    kinds = FakeGemini.kinds(fake)
    assert kinds.count("JURY_EVIDENCE") >= 1 and set(kinds) <= {"JURY", "JURY_EVIDENCE", "V5_SECOND"}
    # A and B share one model and prompt: one call for both; C its own
    assert kinds.count("JURY") == kinds.count("JURY_EVIDENCE")
    md = (tmp_path / "reports" / DS / "batch_report.md").read_text()
    assert "## CR_V2 jury" in md and "## V5 second opinion" in md
    assert "<h2>CR_V2 jury</h2>" in (tmp_path / "reports" / DS / "batch_report.html").read_text()
    # the second opinion was asked for every accept/retry of attempt 0 and changed nothing
    so = rep["second_opinion"]
    assert so["asked"] == rep["routes_attempt_0"]["accept"] + rep["routes_attempt_0"]["auto_fix_retry"]
    assert so["changed"] == 0 and so["STRICTER_OF_TWO"] == so["asked"]
    # the packet of an escalated document carries the SME explanation; lineage carries the audit line
    packet = json.loads(next((tmp_path / "sme_packets").glob(f"sme_packet_{DS}_{sid('quest_cbc_panel')}_*.json")).read_text())
    assert "needs your review" in json.dumps(packet)
    assert all(v["final_action"] == "KEEP" for v in packet.get("jury_votes", []))
    page = next((tmp_path / "sme_packets").glob(f"sme_packet_{DS}_{sid('quest_cbc_panel')}_*.html")).read_text()
    assert "<dt>Why</dt>" in page and "needs your review" in page
    jury_lines = [r.getMessage() for r in caplog.records if '"jury": [' in r.getMessage()]
    assert jury_lines and all('"votes": {"A": "KEEP"' in m for m in jury_lines)
    audits = [r.getMessage() for r in caplog.records  # V5's line: its step (task outside Airflow)
              if '"step": "v5_arbiter"' in r.getMessage() or '"task": "v5_arbiter"' in r.getMessage()]
    assert audits and all('"audit": "V5 ' in m for m in audits if '"error"' not in m)
    # a re-run of the same night costs no call
    n = len(fake.requests)
    rerun = run_all(Batch(store=b.store, ds=DS, run_id="jury-2"), judged(fake, b.store))
    assert len(fake.requests) == n and rerun["llm"]["calls"] == 0
    assert rerun["jury"] == jury
