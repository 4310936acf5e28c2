"""The nightly DAG (`airflow dags test` in a subprocess) with the CR_V2 jury and the V5 second
opinion switched on by Variables, on the fake Gemini endpoint (jurors vote KEEP; the second
opinion agrees): the sample night runs end to end with the embedded default's routes, the batch
report shows the votes and the second-opinion counts, the logs carry no page text, and a second
run makes no LLM call."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.dags.airflow_env import REPO, airflow_cmd
from tests.dags.test_dag_run import _sentences, expected_routes
from tests.docverify.test_batch_jury import _radiology_companion
from tests.fake_gemini import FakeGemini
from tests.sample_ids import sid

DS = "2026-11-18"
pytestmark = pytest.mark.slow


#: a corpus PDF supplied with a companion that calls it a Radiology Report, so that the offline V2
#: judgment raises a finding for the jury (tests/docverify/test_batch_jury.py)
EXTRA = "normal_minimal_latex.pdf"


def test_sample_night_with_jury_and_second_opinion(airflow_db, tmp_path, corpora_dir):
    fake = FakeGemini().start()
    try:
        incoming = tmp_path / "incoming" / DS
        incoming.mkdir(parents=True)
        for f in (REPO / "include" / "samples").iterdir():
            if f.suffix in (".pdf", ".json") and f.name != "expected_routes.json":
                shutil.copy(f, incoming / f.name)
        shutil.copy(corpora_dir / "pdfs" / EXTRA, incoming / EXTRA)
        (incoming / f"{EXTRA[:-4]}.classification.json").write_text(
            json.dumps(_radiology_companion(corpora_dir / "pdfs" / EXTRA)))
        env = {"AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT": str(tmp_path), "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline",
               "AIRFLOW_VAR_DOCVERIFY_JURY": "cr_v2", "AIRFLOW_VAR_DOCVERIFY_V5_SECOND_OPINION": "on",
               "AIRFLOW_VAR_DOCVERIFY_LLM_MAX_ATTEMPTS": "2",
               "AIRFLOW_CONN_DOCVERIFY_LLM": json.dumps({"conn_type": "pydanticai_vertex", "extra": {
                   "model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}})}
        proc = airflow_cmd("dags", "test", "clinical_doc_verification", DS, env=env)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-5000:]
        rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
        got = {d["doc_id"]: ("AUTO_RETRY→" + d["final_decision"]) if d.get("route") == "auto_fix_retry"
               else d["final_decision"] for d in rep["per_document"]}
        assert got == {**expected_routes(), sid(EXTRA[:-4]): "ESCALATE_TO_SME"}  # the kept finding escalates it
        assert rep["jury"]["findings_reviewed"] > 0 and rep["jury"]["final_actions"] == {
            "KEEP": rep["jury"]["findings_reviewed"]}
        assert rep["second_opinion"]["asked"] > 0 and rep["second_opinion"]["changed"] == 0
        assert rep["llm"]["calls"] == len(fake.requests) > 0
        assert set(fake.kinds()) == {"JURY", "JURY_EVIDENCE", "V5_SECOND"}
        md = (tmp_path / "reports" / DS / "batch_report.md").read_text()
        assert "## CR_V2 jury" in md and "| KEEP (SUPPORTED_BY_TEXT) |" in md
        leaks = [s[:40] for b in (tmp_path / "runs" / DS).glob("*/bundle.json")
                 for p in json.loads(b.read_text())["pages"] for s in _sentences(p["text"]) if s in log]
        assert not leaks, leaks
        n = len(fake.requests)
        again = airflow_cmd("dags", "test", "clinical_doc_verification", DS, env=env)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        assert len(fake.requests) == n  # the verdict cache: a re-run costs no call
    finally:
        fake.stop()
