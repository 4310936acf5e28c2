"""The nightly DAG on the sample batch, end to end (`airflow dags test` in a subprocess):
each sample's route and outputs, a second run's idempotence, skipped routes, and a scan of the
whole log for sample text (PHI must never reach a log)."""

from __future__ import annotations

import json
import pathlib
import re
import shutil

import pytest
from tests.dags.airflow_env import REPO, airflow_cmd
from tests.lineage_events import check_facet, datasets, events_from_log, leaks, parse, task_events
from tests.packets import has_packet, packet_file
from tests.phi_scan import night_phi
from tests.sample_ids import expected_routes as sample_routes
from tests.sample_ids import sid

# airflow dags test runs of the sample night (~80 s): the full suite, not the inner loop
pytestmark = pytest.mark.slow

DS = "2026-11-20"
SAMPLES = REPO / "include" / "samples"


def run_dag(root: pathlib.Path, ds: str = DS, conf: dict | None = None) -> str:
    proc = airflow_cmd("dags", "test", "clinical_doc_verification", ds, *(("--conf", json.dumps(conf)) if conf else ()),
                       env={"AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT": str(root), "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline"})
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    return log


def snapshot(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "reports" not in p.parts and "_stages" not in p.parts}


@pytest.fixture(scope="module")
def sample_run(airflow_db, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True)
    for f in SAMPLES.iterdir():
        if f.suffix in (".pdf", ".json") and f.name != "expected_routes.json":
            shutil.copy(f, incoming / f.name)
    first_log = run_dag(root, conf={"layout_shard_size": 4})  # the local layout in several mapped parts
    first = snapshot(root)
    second_log = run_dag(root)
    return root, first_log, first, second_log


def expected_routes() -> dict[str, str]:
    return sample_routes()  # by doc id (ADR 0050)


def test_every_sample_takes_its_expected_route(sample_run):
    root, *_ = sample_run
    report = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    got = {}
    for d in report["per_document"]:
        got[d["doc_id"]] = ("AUTO_RETRY→" + d["final_decision"]) if d.get("route") == "auto_fix_retry" else d["final_decision"]
    assert got == expected_routes()
    assert report["llm"]["calls"] == 0
    # all three routes were taken by real computation
    assert set(got.values()) >= {"AUTO_ACCEPT", "ESCALATE_TO_SME", "AUTO_RETRY→AUTO_ACCEPT"}


def test_the_layout_ran_in_mapped_parts(sample_run):
    root, first_log, _, second_log = sample_run
    pdfs = len(list((root / "incoming" / DS).glob("*.pdf")))
    plan = re.search(r"layout plan: (\d+) document\(s\), 0 reused, (\d+) refused at discovery, (\d+) to parse "
                     r"in (\d+) part\(s\)", first_log)
    assert plan, "no layout plan line in the first night's log"
    docs, refused, todo, n = map(int, plan.groups())
    assert docs == pdfs and todo == docs - refused and n == -(-todo // 4) >= 3  # 4 PDFs a part
    assert set(re.findall(r"layout part (\d+): \d+ PDF", first_log)) == {str(i) for i in range(n)}
    # the second night (default size) parses none of the PDFs that gave a bundle the first time
    assert re.search(r"layout plan: \d+ document\(s\), \d+ reused", second_log)
    assert len(set(re.findall(r"layout part (\d+): ", second_log))) <= 1


def test_outputs_per_route(sample_run):
    root, *_ = sample_run
    for doc_id, route in expected_routes().items():
        accepted = root / "accepted" / DS / f"{doc_id}.json"
        if route.endswith("AUTO_ACCEPT"):
            assert accepted.is_file() and not has_packet(root, doc_id), doc_id
            rec = json.loads(accepted.read_text())
            assert rec["provenance"]["sha256"] and rec["classification"]["doc_id"]
        else:
            packet = packet_file(root, doc_id, night=DS)  # one review of this night's file and content
            assert packet.is_file() and not accepted.exists(), doc_id
            assert json.loads(packet.read_text())["review_status"] == "pending"
        assert (root / "runs" / DS / doc_id).is_dir()
    for ext in ("json", "md", "html"):
        assert (root / "reports" / DS / f"batch_report.{ext}").is_file()
    html = (root / "reports" / DS / "batch_report.html").read_text()
    assert "<svg" in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")  # self-contained


def test_the_sample_night_audits_an_accept(sample_run):
    """Issue 21: the night's audit draws at least one accepted document into the review flow
    (Variable docverify_audit_rate, default 2 %); its accepted record stays."""
    root, *_ = sample_run
    audits = sorted((root / "sme_packets").glob(f"sme_packet_{DS}_*_audit.json"))
    assert audits
    for path in audits:
        packet = json.loads(path.read_text())
        assert packet["review_kind"] == "audit" and packet["v5_decision"] == "AUTO_ACCEPT"
        assert (root / "accepted" / DS / f"{packet['doc_id']}.json").is_file()
    rep = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    assert len(rep["audit"]["sample"]) == len(audits)
    assert (root / "reports" / "trend.csv").is_file()


def test_retry_sample_keeps_every_attempt(sample_run):
    root, *_ = sample_run
    # one result object per document (issue 12): every attempt's report and V5 decision inside it
    ver = json.loads((root / "runs" / DS / sid("retry_shares") / "result.json").read_text())["result"]
    assert [a["decision"]["decision"] for a in ver["attempts"]] == ["AUTO_RETRY", "AUTO_ACCEPT"]
    assert ver["attempts"][1]["decision"]["rule"] and ver["attempts"][1]["fingerprint"]


def test_second_run_is_idempotent(sample_run):
    root, _, first, second_log = sample_run
    assert snapshot(root) == first  # same files, same bytes, no duplicates
    assert '"cache": "hit"' in second_log  # bundles reused


def test_reviewed_packet_is_never_overwritten(sample_run, airflow_db):
    root, *_ = sample_run
    packets = sorted((root / "sme_packets").glob("*.json"))
    target = packets[0]
    data = json.loads(target.read_text())
    data["review_status"] = "reviewed"
    target.write_text(json.dumps(data))
    before = target.read_bytes()
    run_dag(root)
    assert target.read_bytes() == before


def test_a_route_without_documents_is_skipped(airflow_db, tmp_path):
    """A batch of one clean document: no retry, no escalation → those routes are skipped, not failed."""
    incoming = tmp_path / "incoming" / DS
    incoming.mkdir(parents=True)
    stems = json.loads((SAMPLES / "expected_routes.json").read_text())["routes"]
    stem = next(s for s, r in stems.items() if r == "AUTO_ACCEPT")
    ok = sid(stem)
    shutil.copy(SAMPLES / f"{stem}.pdf", incoming / f"{stem}.pdf")
    run_dag(tmp_path)
    states = _latest_run_states()
    assert states["plan_retry_shards"] == "skipped"
    assert states["auto_fix_retry"] == "skipped"
    assert states["write_sme_packets"] == "skipped"
    assert states["accept"] == "success" and states["batch_report"] == "success"
    assert states["audit_sample"] == "success"  # one accept: audited (at least one a night)
    assert (tmp_path / "accepted" / DS / f"{ok}.json").is_file()
    # online mode (the default): batch mode's tasks skip themselves, verify runs as before
    batch_tasks = {t: s for t, s in states.items() if t.startswith("llm_batch_")}
    assert len(batch_tasks) == 6 and set(batch_tasks.values()) == {"skipped"}, batch_tasks
    assert states["plan_shards"] == "success" and states["verify"] == "success"


def _latest_run_states() -> dict[str, str]:
    from airflow.models import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as s:
        run = (s.query(DagRun).filter(DagRun.dag_id == "clinical_doc_verification")
               .order_by(DagRun.id.desc()).first())
        tis = s.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id).all()
        return {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in tis}


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip() for p in parts if len(p.strip()) >= 25]


def test_no_sample_text_in_the_logs(sample_run):
    root, first_log, _, second_log = sample_run
    log = first_log + second_log
    leaks = []
    for bundle in (root / "runs" / DS).glob("*/bundle.json"):
        for page in json.loads(bundle.read_text())["pages"]:
            for sentence in _sentences(page["text"]):
                if sentence in log:
                    leaks.append((bundle.parent.name, sentence[:40]))
    assert not leaks, leaks
    assert "lineage {" in log  # the lineage lines are there, and carry no text


def test_the_nights_log_carries_its_openlineage_events(sample_run):
    """The console transport (the embedded default) writes every task's START and COMPLETE into the
    log, with the night's datasets and facets; the lineage lines join to their task's event by
    ol_run_id; no event holds clinical text or a file name (ADR 0040)."""
    root, first_log, *_ = sample_run
    events = events_from_log(first_log)
    for e in events:
        parse(e)
    runs = task_events(events, "clinical_doc_verification")
    by_task: dict[str, list[list[dict]]] = {}
    for (job, _), evs in runs.items():
        by_task.setdefault(job.split(".", 1)[1], []).append(evs)
    for task_id in ("discover", "layout", "verify", "route", "accept", "write_sme_packets", "batch_report"):
        assert task_id in by_task, f"no OpenLineage event of {task_id}"
        for evs in by_task[task_id]:
            assert sorted(e["eventType"] for e in evs) == ["COMPLETE", "START"], (task_id, evs)
    assert len(by_task["layout_parse"]) >= 3  # the mapped parts: one run id each

    def complete(task_id):
        return next(e for evs in by_task[task_id] for e in evs if e["eventType"] == "COMPLETE")

    file = lambda rel: ("file", str(root / rel))  # noqa: E731
    assert datasets(complete("discover"), "inputs") == {file(f"incoming/{DS}")}
    assert datasets(complete("accept"), "outputs") == {file(f"accepted/{DS}")}
    assert datasets(complete("write_sme_packets"), "outputs") == {file("sme_packets")}
    assert datasets(complete("batch_report"), "outputs") == {file(f"reports/{DS}")}
    report = json.loads((root / "reports" / DS / "batch_report.json").read_text())
    night = complete("batch_report")["run"]["facets"]["docverify_night"]
    check_facet("docverify_night", night)
    assert (night["documents"], night["final_routes"], night["rules"]) == (
        report["documents"], report["final_routes"], report["rules"])
    verify = complete("verify")["run"]["facets"]["docverify_task"]
    check_facet("docverify_task", verify)
    assert sum(verify["counts"]["routes"].values()) == verify["counts"]["docs"]
    assert complete("verify")["run"]["facets"].get("sourceCode") is None  # disable_source_code

    # every lineage line of discover names the run id of discover's events
    ids = {json.loads(m)["ol_run_id"] for m in re.findall(r'lineage (\{.*?"task": "discover"\})', first_log)}
    assert ids == {complete("discover")["run"]["runId"]}

    names = {p.name for p in (root / "incoming" / DS).iterdir()}
    assert leaks(events, night_phi(root), names) == []
