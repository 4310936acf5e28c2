"""A night of files named after patients (ADR 0050), through the nightly Dag (`airflow dags test`,
a subprocess) and scanned on every surface Airflow shows a Viewer of the Dags: the whole task log
(every task's lines, the lineage lines, the OpenLineage events of the console transport), the
XComs and rendered template fields in Airflow's database, the Required Actions the review Dag
opens (subject and body, from the task code itself), the trail page as a Viewer gets it, the
batch report (JSON, Markdown, HTML) and the e-mail the night sends (a real SMTP server on loopback).
No file name, name fragment or input path may be on any of them; the manifest and the packet —
what reviewers read — keep the names (the positive control that the scan would see them)."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import unicodedata
from urllib.parse import unquote

import pytest
from tests.dags.airflow_env import REPO, airflow_cmd
from tests.lineage_events import events_from_log

pytestmark = pytest.mark.slow  # one `airflow dags test` (~80 s)

DS = "2026-11-23"
SAMPLES = REPO / "include" / "samples"
#: the night: file name → the sample it is a copy of (None: written below)
NIGHT = {
    "Befund Müller – Röntgen Thorax 2026 (Kopie).pdf": "radiology_iu_101.pdf",
    "Schmidt, Anna - Pathologie.pdf": "quest_cbc_panel.pdf",
    "Schmidt, Anna - Pathologie.classification.json": "quest_cbc_panel.classification.json",
    "Mueller Hans Befund kaputt.pdf": "corrupt_truncated.pdf",
    "Müller notes.txt": None,
    "Muller Anna Labor.classification.json": "fabricated_evidence.classification.json",  # its PDF is missing
}
#: what may name the patient, compared after folding (see _fold); "Anna" keeps its case
FRAGMENTS = ("muller", "mueller", "schmidt", "rontgen", "pathologie", "kopie", "befund")


def _fold(text: str) -> str:
    """How a reader would still recognise a name: JSON \\u escapes and percent-encoding undone,
    accents dropped (Müller → Muller)."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    text = unquote(text)
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def found(text: str, incoming: pathlib.Path) -> list[str]:
    """Every name fragment, file name or input file path in ``text``."""
    folded = _fold(text)
    low = folded.lower()
    hits = [f for f in FRAGMENTS if f in low]
    hits += ["Anna"] if re.search(r"\bAnna\b", folded) else []
    hits += [m for m in re.findall(re.escape(str(incoming)) + r"/[^\s\"',)\]]+", folded)]
    return hits


@pytest.fixture(scope="module")
def night(airflow_db, tmp_path_factory):
    from aiosmtpd.controller import Controller
    from tests.docverify_airflow.test_notify import _free_port, _Inbox

    root = tmp_path_factory.mktemp("store")
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True)
    for name, sample in NIGHT.items():
        if sample:
            shutil.copy(SAMPLES / sample, incoming / name)
    (incoming / "Müller notes.txt").write_text("Anruf Frau Müller, Befund besprochen\n")
    inbox, port = _Inbox(), _free_port()
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        proc = airflow_cmd("dags", "test", "clinical_doc_verification", DS, env={
            "AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT": str(root), "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline",
            "AIRFLOW_VAR_DOCVERIFY_NOTIFY_EMAIL": "ops@localhost",
            "AIRFLOW_CONN_DOCVERIFY_SMTP": json.dumps({
                "conn_type": "smtp", "host": "127.0.0.1", "port": port, "extra": {
                    "from_email": "docverify@localhost", "disable_ssl": True, "disable_tls": True, "timeout": 10}})})
    finally:
        smtp.stop()
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    return root, incoming, log, inbox.messages


def _airflow_rows() -> tuple[list, list]:
    """The night's XCom values and rendered template fields, from Airflow's database."""
    from airflow.models import DagRun
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as s:
        run = (s.query(DagRun).filter(DagRun.dag_id == "clinical_doc_verification")
               .order_by(DagRun.id.desc()).first())
        xcoms = [r.value for r in s.query(XComModel).filter(XComModel.dag_id == run.dag_id,
                                                            XComModel.run_id == run.run_id)]
        rendered = [r.rendered_fields for r in s.query(RenderedTaskInstanceFields).filter(
            RenderedTaskInstanceFields.dag_id == run.dag_id, RenderedTaskInstanceFields.run_id == run.run_id)]
    return xcoms, rendered


def _required_actions(root: pathlib.Path, monkeypatch) -> list[str]:
    """Subject and body of every review the sme_review Dag would open for the night, from its own code."""
    from airflow.dag_processing.dagbag import DagBag

    from docverify_airflow.tasks import sme_review as sme_tasks

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(root))
    dag = DagBag(dag_folder=str(REPO / "dags")).dags["sme_review"]
    kwargs = sme_tasks.review_kwargs({"params": {k: dag.params[k] for k in dag.params}})
    assert kwargs, "no review opened"
    return [json.dumps(k, ensure_ascii=False) + "\n" + sme_tasks.review_body(k["doc_id"]) for k in kwargs]


def _viewer_trails(root: pathlib.Path, doc_ids: list[str], monkeypatch) -> list[str]:
    from docverify.reporting.trace import document_trace
    from docverify.storage.store import ArtifactStore
    from docverify_airflow.web.trail import trace_html

    store = ArtifactStore(root)
    return [trace_html(document_trace(store, d).redacted(), reader=False) for d in doc_ids]


def test_no_viewer_surface_names_a_patient(night, monkeypatch):
    root, incoming, log, mails = night
    manifest = json.loads((root / "runs" / DS / "_manifest.json").read_text())
    doc_ids = [d["doc_id"] for d in manifest["documents"]]
    assert len(doc_ids) == 3 and all(re.fullmatch(r"doc-[0-9a-f]{12}", d) for d in doc_ids), doc_ids
    # the positive control: the names are where reviewers read them, and the scan sees them there
    assert found(json.dumps(manifest), incoming) and found(json.dumps(manifest, ensure_ascii=True), incoming)
    packets = [p.read_text() for p in (root / "sme_packets").glob("sme_packet_*.json")]
    assert len(packets) >= 2 and all(found(p, incoming) for p in packets)  # the escalation, the corrupt file (an audit)
    assert "Schmidt, Anna - Pathologie.pdf" in _fold("".join(packets))  # the packet names its file

    xcoms, rendered = _airflow_rows()
    assert xcoms and rendered
    report = {ext: (root / "reports" / DS / f"batch_report.{ext}").read_text() for ext in ("json", "md", "html")}
    rep = json.loads(report["json"])
    assert rep["documents"] == 3 and len(rep["inputs"]["ignored_files"]) == 1
    assert len(rep["inputs"]["orphan_companions"]) == 1 and rep["errors"][0]["error"] == "CORRUPT"
    events = events_from_log(log)
    assert events, "no OpenLineage event in the log"
    assert mails, "the night sent no notification"
    surfaces = {
        "task log": log,
        "lineage lines": "\n".join(re.findall(r"lineage \{.*?\}", log)),
        "OpenLineage events": json.dumps(events),
        "XComs": json.dumps(xcoms, default=str),
        "rendered template fields": json.dumps(rendered, default=str),
        "Required Actions": "\n".join(_required_actions(root, monkeypatch)),
        "trail pages (Viewer)": "\n".join(_viewer_trails(root, doc_ids, monkeypatch)),
        **{f"batch report ({ext})": text for ext, text in report.items()},
        "notifications": "\n".join(f"{m['Subject']}\n{m.as_string()}" for m in mails),
    }
    assert "lineage {" in log and surfaces["lineage lines"]
    leaks = {where: found(text, incoming) for where, text in surfaces.items()}
    assert not any(leaks.values()), {k: v[:5] for k, v in leaks.items() if v}


def test_the_scan_sees_every_form_of_a_name(tmp_path):
    """The scan above would see a name however a surface writes it (the ids of before ADR 0050, a
    JSON-escaped log line, a percent-encoded URI, a path)."""
    incoming = tmp_path / "incoming" / DS
    assert found("Befund_Muller_Rontgen_Thorax_2026_Kopie_d6e19365a1", incoming)
    assert found('lineage {"doc_id": "x", "input_uri": "file:///s/Befund%20M%C3%BCller.pdf"}', incoming)
    assert found('{"name": "Schmidt, Anna"}'.replace("Schmidt, ", ""), incoming) == ["Anna"]
    assert found(json.dumps({"m": "M\u00fcller"}), incoming) == ["muller"]
    assert found(f"refused {incoming}/x7.pdf", incoming) == [f"{incoming}/x7.pdf"]
    assert found("doc-d6e19365a1b2: AUTO_ACCEPT (rule 7), 3 document(s) in the annals", incoming) == []
