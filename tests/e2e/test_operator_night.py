"""What an operator and an SME do, in a real browser against the real Airflow components:

log in → trigger the paused nightly Dag from the UI as docs/operating.md says: with "Unpause … on
trigger" unticked the run waits in Queued; with the form's defaults (the box ticked) the Dag is
unpaused and the triggered runs and the latest scheduled night run → backfill three dates from the UI form → open a task log and find a lineage line
→ in Browse → Required Actions answer one review Agree and one Correct → ground truth, packets and
reports are where the README says. A screenshot per step lands in build/e2e/.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import pathlib
import shutil
import time

import pytest
from scripts.airflow_stack import AirflowStack
from tests.e2e.conftest import REPO, SHOTS
from tests.lineage_events import LineageReceiver, check_facet, datasets, leaks, parse, task_events
from tests.phi_scan import night_phi
from tests.sample_ids import expected_routes, sid

DAG = "clinical_doc_verification"
SAMPLES = REPO / "include" / "samples"
EXPECTED = expected_routes()  # by doc id (ADR 0050: opaque; tests.sample_ids.sid(stem) names a sample's)
QUEST, FABRICATED = sid("quest_cbc_panel"), sid("fabricated_evidence")


class UI:
    """The few gestures of the Airflow 3 UI the test needs, by visible text and stable attributes."""

    def __init__(self, driver, base_url: str):
        self.d, self.base = driver, base_url

    def shot(self, name: str) -> None:
        self.d.save_screenshot(str(SHOTS / f"{name}.png"))

    def wait(self, find, timeout: float = 30, what: str = "element"):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                found = find()
                if found:
                    return found
            except Exception as exc:  # not rendered yet
                last = exc
            time.sleep(0.3)
        self.shot(f"timeout_{int(time.time())}")
        raise TimeoutError(f"{what} not found after {timeout}s ({last!r}) at {self.d.current_url}")

    def by_css(self, css: str, timeout: float = 30):
        from selenium.webdriver.common.by import By

        return self.wait(lambda: [e for e in self.d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()],
                         timeout, css)[0]

    def button(self, text: str, timeout: float = 30):
        from selenium.webdriver.common.by import By

        xp = f"//button[normalize-space()='{text}']"
        return self.wait(lambda: [e for e in self.d.find_elements(By.XPATH, xp) if e.is_displayed()],
                         timeout, f"button {text!r}")[-1]

    def click(self, element) -> None:
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
        element.click()

    def login(self, password: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.get(self.base + "/")
        self.wait(lambda: self.d.find_elements(By.NAME, "username"), what="login form")
        self.d.find_element(By.NAME, "username").send_keys("admin")
        self.d.find_element(By.NAME, "password").send_keys(password)
        self.shot("01_login")
        self.d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self.wait(lambda: "/auth/login" not in self.d.current_url and self.d.find_elements(
            By.XPATH, "//button[normalize-space()='Browse']"), what="home page after login")

    def open_trigger_form(self, dag_id: str) -> None:
        self.d.get(f"{self.base}/dags/{dag_id}")
        self.click(self.by_css("button[aria-label='Trigger Dag']"))
        self.by_css("[data-testid='trigger-dag-submit'], [role=dialog]")

    def unpause_box(self):
        """The trigger form's "Unpause <dag> on trigger" box (shown for a paused Dag only)."""
        from selenium.webdriver.common.by import By

        xp = "//label[contains(normalize-space(), 'on trigger')]"
        return self.wait(lambda: [e for e in self.d.find_elements(By.XPATH, xp) if e.is_displayed()], 30,
                         "the Unpause … on trigger box")[0]

    @staticmethod
    def ticked(box) -> bool:
        from selenium.webdriver.common.by import By

        found = box.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")
        return bool(found[0].get_property("checked")) if found else box.get_attribute("data-state") == "checked"

    def trigger_paused(self, dag_id: str, *, unpause: bool) -> None:
        """Trigger a paused Dag from its form, nothing typed; ``unpause=False`` unticks the box first."""
        self.open_trigger_form(dag_id)
        submit = self.by_css("[data-testid='trigger-dag-submit']")
        assert submit.is_enabled(), "the Trigger button of the form is disabled with the default params"
        box = self.unpause_box()
        assert self.ticked(box), "the Unpause … on trigger box is not ticked by default on the paused Dag"
        if unpause:
            self.shot("03_trigger_form_defaults")
        else:
            self.click(box)
            self.wait(lambda: not self.ticked(box), 10, "the Unpause … on trigger box unticked")
            self.shot("03_trigger_form_unticked")
        self.click(submit)

    def _set_datetime(self, index: int, day: dt.date, hhmm: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        triggers = self.wait(lambda: [e for e in self.d.find_elements(By.CSS_SELECTOR, "[data-testid='datetime-input']")
                                      if e.is_displayed()], what="date pickers")
        self.click(triggers[index])
        date_in = self.by_css("[data-part=content][data-state=open] input[placeholder='YYYY/MM/DD']")
        date_in.send_keys(Keys.CONTROL, "a")
        date_in.send_keys(day.strftime("%Y/%m/%d"))
        time_in = self.by_css("[data-part=content][data-state=open] input[placeholder='HH:mm']")
        time_in.send_keys(Keys.CONTROL, "a")
        time_in.send_keys(hhmm)
        time_in.send_keys(Keys.ESCAPE)
        time.sleep(0.5)

    def backfill(self, dag_id: str, first: dt.date, last: dt.date) -> None:
        from selenium.webdriver.common.by import By

        self.open_trigger_form(dag_id)
        self.click(self.wait(lambda: self.d.find_elements(By.XPATH, "//*[normalize-space()='Backfill']"),
                             what="Backfill option")[0])
        self._set_datetime(0, first, "00:00")
        self._set_datetime(1, last, "23:59")
        run = self.button("Run Backfill")
        self.wait(lambda: run.is_enabled(), 20, "an enabled Run Backfill button")
        self.shot("05_backfill_form")
        self.click(run)

    def task_log(self, dag_id: str, run_id: str, task_id: str, needle: str) -> None:
        from urllib.parse import quote

        self.d.get(f"{self.base}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/{task_id}")
        self.wait(lambda: needle in self.d.page_source, 60, f"{needle!r} in the log of {task_id}")

    def open_review(self, doc_id: str, night: dt.date) -> None:
        from selenium.webdriver.common.by import By

        self.d.get(self.base + "/")
        self.click(self.button("Browse"))
        self.click(self.wait(lambda: self.d.find_elements(By.XPATH, "//a[normalize-space()='Required Actions']"),
                             what="Required Actions menu entry")[0])
        link = self.wait(lambda: [a for a in self.d.find_elements(By.PARTIAL_LINK_TEXT, f"{doc_id} ({night}) —")
                                  if a.is_displayed()], 120, f"the review of {doc_id} of {night}")[0]
        self.click(link)
        self.by_css("input[name='element_notes']")

    def choose(self, field: str, value: str) -> None:
        """Pick ``value`` in the form's select ``field`` (a react-select: type to filter, Enter)."""
        from selenium.webdriver.common.keys import Keys

        box = self.by_css(f"#element_{field} input[role=combobox]")
        self.click(box)
        box.send_keys(value)
        box.send_keys(Keys.ENTER)
        self.wait(lambda: value in self.by_css(f"#element_{field}").text, 10, f"{value!r} chosen in {field}")

    def open_packet_page(self) -> str:
        """Follow the form's link to the packet served by the api-server; its page title."""
        from selenium.webdriver.common.by import By

        link = self.wait(lambda: self.d.find_elements(By.PARTIAL_LINK_TEXT, "Full packet"), what="packet link")[0]
        href = link.get_attribute("href")
        self.d.get(href)
        self.wait(lambda: self.d.title.startswith("SME packet"), 30, "the packet page")
        return self.d.title

    def answer(self, option: str, *, corrected_type: str | None = None, pages: dict[int, str] | None = None,
               notes: str = "") -> None:
        if corrected_type:
            self.choose("corrected_dominant_type", corrected_type)
        for page, kind in (pages or {}).items():
            self.choose(f"page_{page}", kind)
        if notes:
            self.by_css("input[name='element_notes']").send_keys(notes)
        self.click(self.button(option))


def _copy_samples(root: pathlib.Path, day: dt.date) -> None:
    incoming = root / "incoming" / day.isoformat()
    incoming.mkdir(parents=True, exist_ok=True)
    for f in sorted(SAMPLES.glob("*.pdf")) + sorted(SAMPLES.glob("*.classification.json")):
        shutil.copy2(f, incoming / f.name)


def _routes(root: pathlib.Path, day: dt.date) -> dict[str, str]:
    rep = json.loads((root / "reports" / day.isoformat() / "batch_report.json").read_text())
    return {d["doc_id"]: ("AUTO_RETRY→" if d.get("route") == "auto_fix_retry" else "") + d["final_decision"]
            for d in rep["per_document"]}


def test_an_operator_night_in_the_browser(driver, tmp_path_factory):
    work = tmp_path_factory.mktemp("e2e")
    root, home = work / "store", work / "airflow_home"
    first_day = dt.datetime.now(dt.UTC).date()
    backfilled = [first_day - dt.timedelta(days=n) for n in (3, 2, 1)]
    # the next day's folder too: a run that crosses midnight before the trigger makes the manual night tomorrow's
    for day in [first_day, first_day + dt.timedelta(days=1), *backfilled]:
        _copy_samples(root, day)

    # a data engineer's lineage backend (ADR 0040): the provider's HTTP transport to a loopback receiver
    receiver = LineageReceiver().start()
    with AirflowStack(home, root, env={"AIRFLOW__OPENLINEAGE__TRANSPORT": receiver.transport()}) as stack:
        ui = UI(driver, stack.base_url)
        ui.login(stack.password)
        ui.shot("02_home")

        # docs/operating.md's Trigger paragraph, as an operator follows it. The nightly Dag is paused at
        # creation: a run triggered with "Unpause … on trigger" unticked waits in Queued, nothing starts
        stack.unpause("sme_review")
        assert stack.api("GET", f"/api/v2/dags/{DAG}")["is_paused"]
        ui.trigger_paused(DAG, unpause=False)
        queued = ui.wait(lambda: [r for r in stack.runs(DAG) if r["run_type"] == "manual"], 60, "the queued run")[0]
        time.sleep(20)  # the scheduler loops every second or so: it would have started it by now
        assert [(r["run_type"], r["state"]) for r in stack.runs(DAG)] == [("manual", "queued")]
        assert stack.api("GET", f"/api/v2/dags/{DAG}")["is_paused"]
        # the form's defaults (the box ticked): the Dag is unpaused and both triggered runs go; then, the
        # Dag running one night at a time (max_active_runs=1), the scheduler starts the latest scheduled
        # night too (catchup=False)
        latest_02 = [_latest_0200()]
        ui.trigger_paused(DAG, unpause=True)
        manual = ui.wait(lambda: [r for r in stack.runs(DAG) if r["run_type"] == "manual"
                                  and r["dag_run_id"] != queued["dag_run_id"]], 60, "the manual run")[0]
        assert not stack.api("GET", f"/api/v2/dags/{DAG}")["is_paused"]
        today = dt.date.fromisoformat(manual["logical_date"][:10])  # the form's default: now
        assert today in (first_day, first_day + dt.timedelta(days=1)), manual
        done = [stack.wait_for_run(DAG, r["dag_run_id"], 600) for r in (queued, manual)]
        assert [r["state"] for r in done] == ["success", "success"], done
        scheduled = ui.wait(lambda: [r for r in stack.runs(DAG) if r["run_type"] == "scheduled"], 120,
                            "the latest scheduled night, after the triggered runs")[0]
        latest_02.append(_latest_0200())
        assert scheduled["logical_date"][:10] in {d.isoformat() for d in latest_02}, scheduled  # the latest 02:00
        scheduled = stack.wait_for_run(DAG, scheduled["dag_run_id"], 600)
        assert scheduled["state"] == "success", scheduled
        # one night at a time (max_active_runs=1): the three runs never overlap. Which goes first is the
        # scheduler's choice (between 00:00 and 02:00 UTC the scheduled night, being older, may go first)
        at = dt.datetime.fromisoformat
        spans = sorted((at(r["start_date"]), at(r["end_date"])) for r in [*done, scheduled])
        assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans)), spans
        assert len(stack.runs(DAG)) == 3
        ui.d.get(f"{stack.base_url}/dags/{DAG}")
        ui.shot("04_runs")
        # the night's report, the index and a trail as an operator meets them (issue 42): the index's counts
        # are the report's, every escalated or audited row links to its review, nothing wider than the window
        _check_report_pages(ui, stack.base_url, json.loads(
            (root / "reports" / today.isoformat() / "batch_report.json").read_text()))
        assert _routes(root, today) == EXPECTED

        # a backfill of three dates from the UI form: each date reads its own incoming/<ds>/
        ui.backfill(DAG, backfilled[0], backfilled[-1])
        # one run per backfilled date: between 00:00 and 02:00 UTC the latest scheduled run (catchup off,
        # started when the Dag was unpaused) is yesterday's, and the backfill takes it instead of
        # creating a second run for that date
        def backfilled_runs():
            by_day = {r["logical_date"][:10]: r for r in stack.runs(DAG)
                      if r["run_type"] in ("backfill", "scheduled") and r.get("logical_date")}
            runs = [by_day.get(day.isoformat()) for day in backfilled]
            return runs if all(runs) and any(r["run_type"] == "backfill" for r in runs) else None
        runs = ui.wait(backfilled_runs, 120, "a run for each of the three backfilled dates")
        for run in runs:
            assert stack.wait_for_run(DAG, run["dag_run_id"], 900)["state"] == "success", run["dag_run_id"]
        for day in backfilled:
            assert _routes(root, day) == EXPECTED, day
        ui.shot("06_backfill_done")

        # a data engineer traces a document through the task log
        ui.task_log(DAG, manual["dag_run_id"], "write_sme_packets", "lineage")
        assert f'"doc_id": "{QUEST}"' in ui.d.page_source or QUEST in ui.d.page_source
        ui.shot("07_task_log_lineage")

        # the SME answers two reviews in Browse → Required Actions (once the scheduler has taken in every
        # review's park, as a person's reading time would: ADR 0031)
        ui.wait(lambda: stack.parks_settled("sme_review"), 60, "the scheduler's report of every review's park")
        ui.open_review(FABRICATED, today)
        ui.shot("08_review_form")
        ui.answer("Agree", notes="the snippet is on no page; the rest is right")
        ui.open_review(QUEST, backfilled[0])
        assert ui.open_packet_page() == f"SME packet — {QUEST}"  # served behind the login
        ui.shot("09_packet_page")
        ui.open_review(QUEST, backfilled[0])
        ui.answer("Correct", pages={1: "Other"}, notes="routine CBC panel, not genomic")
        ui.shot("10_review_answered")
        # and confirms one audit of an accepted document of tonight (issue 21: the accept stays)
        [audit] = [json.loads(p.read_text()) for p in (root / "sme_packets").glob(f"sme_packet_{today}_*_audit.json")]
        assert audit["review_kind"] == "audit" and audit["doc_id"] in EXPECTED
        ui.open_review(audit["doc_id"], today)
        ui.answer("Agree", notes="audit: the accepted classification is right")

        gt = root / "ground_truth"
        ui.wait(lambda: len(list(gt.glob("*.json"))) >= 3, 120, "three ground-truth records")
        audits = [json.loads(p.read_text()) for p in gt.glob("*_audit*.json")]
        assert [(a["doc_id"], a["ground_truth_source"], a["review_kind"]) for a in audits] == [
            (audit["doc_id"], "SME_VALIDATED", "audit")]
        assert (root / "accepted" / today.isoformat() / f"{audit['doc_id']}.json").exists()
        records = {json.loads(p.read_text())["doc_id"]: json.loads(p.read_text()) for p in gt.glob("*.json")
                   if "_audit" not in p.name}
        assert records[FABRICATED]["review_id"].startswith(f"{today}_{FABRICATED}_")
        assert records[QUEST]["review_id"].startswith(f"{backfilled[0]}_{QUEST}_")
        assert records[FABRICATED]["ground_truth_source"] == "SME_VALIDATED"
        assert records[QUEST]["ground_truth_source"] == "SME_CORRECTED"
        corrected = records[QUEST]["ground_truth_classification"]
        assert corrected["dominant_type_overall"] == "Other"
        assert [s["dominant_type"] for s in corrected["segments"]] == ["Other"]
        # consistent: the genomic claim the SME corrected is no longer PRIMARY
        assert all(m["presence_level"] != "PRIMARY" for m in corrected["document_mixture"]
                   if m["doc_type"] == "Genomic Report")

        # packets and reports of every night: the same file names on four nights are four reviews each
        for day in [today, *backfilled]:
            assert (root / "reports" / day.isoformat() / "batch_report.html").exists()
            for doc_id, route in EXPECTED.items():
                found = [p for p in (root / "sme_packets").glob(f"sme_packet_{day}_{doc_id}_*.json")
                         if not p.name.endswith("_audit.json")]
                assert len(found) == (0 if route.endswith("AUTO_ACCEPT") else 1), (day, doc_id)
            assert list((root / "sme_packets").glob(f"sme_packet_{day}_*_audit.json")), day  # an audit each night
        answered = {p.name for p in (root / "sme_packets").glob("*.json")
                    if json.loads(p.read_text())["review_status"] == "reviewed"}
        assert len(answered) == 3  # only the three reviews the SME answered, not their namesakes of other nights

        # no failed task anywhere; the Airflow components are still up
        for run in stack.runs(DAG) + stack.runs("sme_review"):
            for ti in stack.task_instances(run["dag_id"], run["dag_run_id"]):
                assert ti["state"] != "failed", (run["dag_run_id"], ti["task_id"])
        assert all(p.poll() is None for p in stack.procs.values())
        _check_lineage(stack, receiver.events, root, today, manual["dag_run_id"])
    receiver.stop()


def _check_report_pages(ui: UI, base: str, rep: dict) -> None:
    from docverify.reporting.trend import night_counts

    night, c = rep["ds"], night_counts(rep)
    ui.d.get(f"{base}/docverify/reports/")
    row = ui.wait(lambda: [r for r in ui.d.find_elements("css selector", "tr") if r.text.startswith(night)], 30,
                  "the night's row in the reports index")[0]
    cells = [td.text for td in row.find_elements("css selector", "td")]
    assert cells[1:5] == [str(c.documents), str(c.accepted), str(c.escalated), str(c.errors)], cells
    ui.d.get(f"{base}/docverify/reports/{night}")
    ui.wait(lambda: "Documents" in ui.d.page_source, 30, "the batch report")
    linked = {tr.find_element("css selector", "td").text for tr in ui.d.find_elements("css selector", "table.docs tr")
              if tr.find_elements("css selector", "a[href*='/docverify/reviews/']")}
    want = {d["doc_id"] for d in rep["per_document"] if d["final_decision"] == "ESCALATE_TO_SME"
            or (d.get("outputs") or {}).get("audit_packet")}
    assert linked == want and any((d.get("outputs") or {}).get("audit_packet") for d in rep["per_document"])
    assert ui.d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    ui.shot("07b_batch_report")
    # a trail: the packet step is a line or two (the workspace's two-pane rule hit its review link: a
    # window-tall gap), and every task log opens in a new tab, not inside the page
    doc = next(d["doc_id"] for d in rep["per_document"] if d.get("rule") is not None and d.get("review_id"))
    ui.d.get(f"{base}/docverify/trace/{doc}")
    step = ui.by_css("li.step[data-kind=sme_packet]")
    assert step.find_elements("css selector", "a.review") and step.size["height"] < 150, step.size
    logs = ui.d.find_elements("css selector", "a.log")
    assert logs and all(a.get_attribute("target") == "_blank" and "noopener" in (a.get_attribute("rel") or "")
                        for a in logs)
    ui.shot("07c_trail")


def _latest_0200() -> dt.date:
    """The date of the latest 02:00 UTC: the night the scheduler starts on unpausing (catchup off)."""
    now = dt.datetime.now(dt.UTC)
    return now.date() if now.hour >= 2 else now.date() - dt.timedelta(days=1)


def _check_lineage(stack: AirflowStack, events: list[dict], root: pathlib.Path, today: dt.date, manual: str) -> None:
    """What the lineage backend received: a START and a COMPLETE for every task instance that ran,
    both Dags' runs, the night's datasets and facets, events openlineage-python parses, and no
    clinical text or file name in any of them."""
    def answered() -> list[dict]:  # one COMPLETE per review task run (the transport may deliver one twice)
        return list({e["run"]["runId"]: e for e in events if e["job"]["name"] == "sme_review.review"
                     and e["eventType"] == "COMPLETE" and "docverify_task" in e["run"]["facets"]}.values())

    # the last events are posted from forked listeners: a review's COMPLETE leaves after its ground-truth
    # record is written (the caller waited for those), so wait for all three answers' events, not the first
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(answered()) < 3:
        time.sleep(1)
    for e in events:
        parse(e)
    ran = {(ti["task_id"], ti["map_index"]) for ti in stack.task_instances(DAG, manual) if ti["state"] == "success"}
    manual_events = [e for e in events if e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == manual]
    runs = task_events(manual_events, DAG)
    # the HTTP transport delivers at least once (it retries a slow answer), so a run may arrive twice:
    # each task instance that ran has both a START and a COMPLETE, and nothing else
    got = {(job.split(".", 1)[1], next((e["run"]["facets"]["airflow"]["taskInstance"].get("map_index", -1)
                                       for e in evs), -1)): {e["eventType"] for e in evs}
           for (job, _), evs in runs.items()}
    for key in ran:
        assert got.get(key) == {"COMPLETE", "START"}, (key, got.get(key))
    dag_runs = [e for e in events if e["job"]["name"] == DAG and e["eventType"] in ("START", "COMPLETE")]
    assert {e["eventType"] for e in dag_runs} == {"START", "COMPLETE"}  # the scheduler's Dag-run events

    def complete(task_id: str) -> dict:
        return next(e for (job, _), evs in runs.items() if job == f"{DAG}.{task_id}" for e in evs
                    if e["eventType"] == "COMPLETE")

    file = lambda rel: ("file", str(root / rel))  # noqa: E731
    assert datasets(complete("discover"), "inputs") == {file(f"incoming/{today}")}
    assert datasets(complete("discover"), "outputs") == {file(f"runs/{today}")}
    assert datasets(complete("accept"), "outputs") == {file(f"accepted/{today}")}
    assert datasets(complete("write_sme_packets"), "outputs") == {file("sme_packets")}
    assert datasets(complete("batch_report"), "outputs") == {file(f"reports/{today}")}
    night = complete("batch_report")["run"]["facets"]["docverify_night"]
    check_facet("docverify_night", night)
    assert night["night"] == today.isoformat() and night["final_routes"]
    for evs in runs.values():
        for e in evs:
            if e["eventType"] == "COMPLETE" and "docverify_task" in e["run"]["facets"]:
                check_facet("docverify_task", e["run"]["facets"]["docverify_task"])
    # the SME's three answers: the review Dag's tasks, packets in, ground truth out
    reviews = answered()
    assert len(reviews) == 3
    assert all(datasets(e, "outputs") == {file("ground_truth")} and datasets(e, "inputs") == {file("sme_packets")}
               for e in reviews)
    assert sorted(e["run"]["facets"]["docverify_task"]["counts"]["chosen_option"] for e in reviews) == [
        "Agree", "Agree", "Correct"]
    names = {p.name for p in root.glob("incoming/*/*")}
    assert leaks(events, night_phi(root), names) == []


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-x", "-q"])
