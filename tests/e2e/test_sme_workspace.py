"""A clinician answers a night's reviews in the review workspace, in a real browser against the
real Airflow components, following only what the README says:

unpause the nightly Dag (the review Dag is not paused at creation) → the night escalates → its
reviews appear in /docverify/reviews/ with no other step → Start reviewing → each review shows the
answer without scrolling → Agree, Correct by page, Cannot classify for the unreadable PDF, and a
refused answer whose reason is shown while nothing is sent → the next review opens by itself →
ground truth as answered. An answer refused in Required Actions (the REST call its form makes)
re-opens the review at once, and the workspace shows why. Clicks, keys and seconds per review go
to build/e2e/workspace_figures.json (the figures of docs/sme-guide.md)."""

from __future__ import annotations

import datetime as dt
import json
import time
from urllib.parse import quote

from scripts.airflow_stack import AirflowStack
from tests.dags.test_dag_patient_names import found
from tests.e2e.conftest import SHOTS
from tests.e2e.test_operator_night import DAG, EXPECTED, UI, _copy_samples
from tests.phi_scan import leaks, night_phi
from tests.sample_ids import sid


class Workspace(UI):
    """The workspace's gestures, counting what the SME does."""

    def __init__(self, driver, base_url: str):
        super().__init__(driver, base_url)
        self.clicks = self.keys = self.busy_resends = 0

    def click(self, element) -> None:
        self.clicks += 1
        element.click()  # no scrolling into view: the answer must be on screen already

    def key(self, keys: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        self.keys += 1
        ActionChains(self.d).send_keys(keys).perform()

    def ctrl_enter(self) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        self.keys += 1
        ActionChains(self.d).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()

    def login_as(self, user: str, password: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.delete_all_cookies()
        self.d.get(self.base + "/")
        self.wait(lambda: self.d.find_elements(By.NAME, "username"), what="login form")
        self.d.find_element(By.NAME, "username").send_keys(user)
        self.d.find_element(By.NAME, "password").send_keys(password)
        self.d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self.wait(lambda: "/auth/login" not in self.d.current_url and self.d.find_elements(
            By.XPATH, "//button[normalize-space()='Browse']"), what=f"home page after {user}'s login")

    def doc_on_screen(self) -> str:
        return self.by_css("h1").text.removeprefix("AUDIT — ")

    def answer_is_on_screen(self) -> bool:
        """The send button and the answer choices are inside the first screen, no scroll taken."""
        return self.d.execute_script(
            "const b=document.getElementById('send').getBoundingClientRect();"
            "const f=document.querySelector('#answer fieldset').getBoundingClientRect();"
            "return window.scrollY===0 && b.bottom<=window.innerHeight && f.top>=0 && b.right<=window.innerWidth;")

    def moved_on(self, doc: str) -> bool:
        """The page left ``doc`` after an answer. "The database was busy and nothing was sent" (SQLite
        under load, the workspace's own message) is answered as a person would, by sending again
        (not counted as an action; counted in ``busy_resends``)."""
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        if not self.d.find_elements("id", "send") or self.doc_on_screen() != doc:
            return True
        busy = [e for e in self.d.find_elements("css selector", ".refused") if "database was busy" in e.text]
        if busy:
            self.busy_resends += 1
            self.d.find_element("id", "send").click()
            WebDriverWait(self.d, 60).until(ec.staleness_of(busy[0]))
        return False

    def first_screen(self) -> dict:
        """What the review page shows before any scroll: the page numbers drawn (in order), the
        document's page count, page 1's top, width and height, the bottom of the first segment band, the
        viewport's height, whether page 1 is an image, the page's lead sentence."""
        return self.d.execute_script(
            "const d=document.querySelector('.doc');"
            "const p=[...document.querySelectorAll('.doc [data-page]')].map(e=>+e.dataset.page);"
            "const f=document.querySelector(\".doc [data-page='1'] .pageimg, .doc [data-page='1'] .pagetext\");"
            "const r=f?f.getBoundingClientRect():null;const b=document.querySelector('.doc .band');"
            "return {pages:p,n:d?+d.dataset.pages:-1,top:r?r.top:null,width:r?r.width:null,height:r?r.height:null,"
            "band:b?b.getBoundingClientRect().bottom:null,vh:window.innerHeight,"
            "img:!!document.querySelector(\".doc [data-page='1'] img\"),"
            "lead:(document.querySelector('.doc .lead')||{}).textContent||''};")

    def select(self, name: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        el = self.by_css(f"select[name='{name}']")
        self.clicks += 1
        Select(el).select_by_visible_text(value)


#: what the SME reads at the start of each step of an escalated, answered document's trail (ADR 0041)
TRAIL = ("First seen on night", "Layout:", "Verified: attempt 0 → ESCALATE_TO_SME rule 1", "V5 arbiter: ESCALATE_TO_SME",
         "SME packet", "Answered by admin", "Batch report of")


def follow_the_trail(ui: Workspace, stack: AirflowStack, root, doc: str) -> list[str]:
    """From the night's batch report, the document's trail link; on the trail every step from discovery to
    ground truth as the SME reads it; every task link opens its task instance (which the API knows,
    finished), the packet and report links their pages. Returns the task links' addresses."""
    from urllib.parse import unquote, urlparse

    night = sorted(p.name for p in (root / "reports").iterdir() if p.is_dir())[-1]
    ui.d.get(f"{stack.base_url}/docverify/reports/{night}")
    link = ui.wait(lambda: ui.d.find_elements(
        "xpath", f"//tr[td[1][normalize-space()='{doc}']]//a[normalize-space()='trail']"), 30, f"{doc}'s trail link")
    link[0].click()
    ui.wait(lambda: f"Trail of {doc}" in ui.d.find_element("tag name", "body").text, 30, "the trail page")
    ui.shot("18_document_trail")
    steps = [e.text for e in ui.d.find_elements("css selector", "li.step")]
    assert [next((t for t in TRAIL if s.startswith(t)), s) for s in steps] == list(TRAIL), steps
    assert "Hidden from you" not in ui.d.find_element("tag name", "body").text
    assert "EVIDENCE_FABRICATED" in steps[2] and "ground truth version 1" in steps[5], steps
    logs = [a.get_attribute("href") for a in ui.d.find_elements("css selector", "a.log")]
    pages = {a.get_attribute("href"): a.text for a in ui.d.find_elements("css selector", "a.packet, a.report")}
    assert len(logs) == len(steps) and {"packet", "batch report"} <= set(pages.values()), (logs, pages)
    for href in dict.fromkeys(logs):
        parts = [unquote(p) for p in urlparse(href).path.split("/")]  # /dags/<dag>/runs/<run>/tasks/<task>[/mapped/<i>]
        dag_id, run_id, task_id = parts[2], parts[4], parts[6]
        api = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
        ti = stack.api("GET", api + (f"/{parts[8]}" if len(parts) > 8 else ""))
        assert ti["state"] == "success", (href, ti["state"])
        ui.d.get(href)
        ui.wait(lambda t=task_id: t in ui.d.find_element("tag name", "body").text, 60, f"task {task_id} at {href}")
    for href, what in pages.items():
        ui.d.get(href)
        expect = f"SME packet — {doc}" if what == "packet" else "docverify batch report"
        ui.wait(lambda e=expect: e in ui.d.find_element("tag name", "body").text, 30, f"{what} at {href}")
    return logs


def test_an_sme_answers_a_night_in_the_workspace(driver, tmp_path_factory):
    work = tmp_path_factory.mktemp("workspace")
    root, home = work / "store", work / "airflow_home"
    # the night the scheduler starts on unpausing: the latest 02:00 UTC (catchup=False), yesterday's before 02:00
    now = dt.datetime.now(dt.UTC)
    today = now.date() if now.hour >= 2 else now.date() - dt.timedelta(days=1)
    _copy_samples(root, today)
    # files named after patients that take no review (ADR 0050): ignored, and a companion without its PDF
    incoming = root / "incoming" / today.isoformat()
    (incoming / "Müller notes.txt").write_text("Anruf Frau Müller\n")
    (incoming / "Schmidt, Anna - Pathologie.classification.json").write_text("{}")
    escalated = sorted(d for d, r in EXPECTED.items() if r.endswith("ESCALATE_TO_SME"))

    with AirflowStack(home, root, users={"viewer": "viewer"}) as stack:
        ui = Workspace(driver, stack.base_url)
        # a page of the workspace without a session: Airflow's login, then back to the page
        ui.d.get(f"{stack.base_url}/docverify/reviews/")
        ui.wait(lambda: "login" in ui.d.current_url, 30, "the login redirect")
        ui.login(stack.password)
        assert stack.api("GET", "/api/v2/dags/sme_review")["is_paused"] is False  # no step to find it first

        stack.unpause(DAG)  # the README's one step
        night = ui.wait(lambda: [r for r in stack.runs(DAG) if r["run_type"] == "scheduled"], 120, "the night")[0]
        assert stack.wait_for_run(DAG, night["dag_run_id"], 600)["state"] == "success"

        # the reviews appear by themselves: the escalations and tonight's audit
        def opened() -> int:
            ui.d.get(f"{stack.base_url}/docverify/reviews/")
            link = ui.d.find_elements("id", "start")
            return len(escalated) + 1 if link and f"({len(escalated) + 1} open)" in link[0].text else 0
        ui.wait(opened, 300, "the night's reviews open in the workspace")
        # a person reads before answering: Airflow 3.3.2 loses an answer given before the scheduler has
        # taken in the park (ADR 0031); the test answers at machine speed, so it waits for that
        ui.wait(lambda: stack.parks_settled("sme_review"), 60, "the scheduler's report of every review's park")
        ui.shot("11_review_queue")

        # an answer refused in Required Actions (the same REST call its form makes): the task opens the
        # review again at once, no retry spent, and the workspace says why
        review_of = {json.loads(p.read_text())["doc_id"]: p.name.removeprefix("sme_packet_").removesuffix(".json")
                     for p in (root / "sme_packets").glob("sme_packet_*.json")}
        key = review_of[sid("fabricated_evidence")]
        ti = [t for t in stack.paged("/api/v2/dags/sme_review/dagRuns/~/taskInstances", "task_instances")
              if t["task_id"] == "review" and t["rendered_map_index"] == key][0]
        detail = stack.api("GET", f"/api/v2/dags/sme_review/dagRuns/{quote(ti['dag_run_id'], safe='')}/taskInstances/"
                                  f"review/{ti['map_index']}/hitlDetails")
        unchanged = {k: v.get("value") for k, v in detail["params"].items()}
        stack.api("PATCH", f"/api/v2/dags/sme_review/dagRuns/{quote(ti['dag_run_id'], safe='')}/taskInstances/"
                           f"review/{ti['map_index']}/hitlDetails", {"chosen_options": ["Correct"],
                                                                     "params_input": unchanged})
        refusal = root / "sme_packets" / "refusals" / f"{key}.json"
        ui.wait(lambda: refusal.exists(), 120, "the refusal recorded by the review task")

        def reopened() -> bool:
            d = stack.api("GET", f"/api/v2/dags/sme_review/dagRuns/{quote(ti['dag_run_id'], safe='')}/taskInstances/"
                                 f"review/{ti['map_index']}/hitlDetails")
            return not d["response_received"] and d["task_instance"]["state"] == "awaiting_input"
        ui.wait(reopened, 120, "the refused review open again")
        ui.wait(lambda: stack.parks_settled("sme_review"), 60, "the scheduler's report of the second park")
        assert not list((root / "ground_truth").glob(f"gt_{key}*.json"))

        # skip and filters hold (ADR 0036): Start reviewing under a filter keeps it, a skipped review is
        # not offered again in this session, a review you opened stays yours (the queue resumes it)
        ui.d.get(f"{stack.base_url}/docverify/reviews/?kind=escalation")
        ui.by_css("#start").click()
        ui.wait(lambda: ui.d.find_elements("id", "send"), 30, "the first review under the filter")
        assert "kind=escalation" in ui.d.current_url and not ui.by_css("h1").text.startswith("AUDIT")
        skipped = ui.doc_on_screen()
        ui.d.find_element("id", "next").click()  # Skip (n)
        ui.wait(lambda: ui.d.find_elements("id", "send") and ui.doc_on_screen() != skipped, 30, "the review after a skip")
        assert "kind=escalation" in ui.d.current_url and not ui.by_css("h1").text.startswith("AUDIT")
        resumed = ui.doc_on_screen()
        ui.d.get(f"{stack.base_url}/docverify/reviews/")
        assert "skipped (this session)" in ui.d.page_source and "yours: resume" in ui.d.page_source
        assert ui.by_css("#start").text.startswith("Resume reviewing")

        def on_a_review() -> bool:
            """A review page; on the queue with only skipped reviews left, offer them again and resume."""
            if ui.d.find_elements("id", "send"):
                return True
            if "Reviews waiting" in ui.d.title and ui.d.find_elements("id", "unskip"):
                assert "Saved: your answer" in ui.by_css(".saved").text
                ui.d.find_element("id", "unskip").click()
                ui.wait(lambda: ui.d.find_elements("id", "start"), 30, "Resume after offering the skipped again")
                ui.d.find_element("id", "start").click()
            return False

        # the clinician works through the queue
        ui.click(ui.by_css("#start"))
        figures, done, saved_banners = [], set(), 0
        while len(done) < len(escalated) + 1:
            ui.wait(on_a_review, 60, "a review page")
            doc = ui.doc_on_screen()
            assert doc not in done, f"{doc} offered twice"
            if not done:
                assert doc == resumed, (doc, resumed)  # your own open review first
            if figures and "saved=" in ui.d.current_url:  # the confirmation names the answer and the next review
                banner = ui.by_css(".saved").text
                assert figures[-1]["doc_id"] in banner and doc in banner, banner
                saved_banners += 1
            elif done and len(done) < len(escalated):
                assert doc == skipped or "saved=" in ui.d.current_url, doc
            t0, clicks0, keys0 = time.monotonic(), ui.clicks, ui.keys
            assert ui.answer_is_on_screen(), f"{doc}: the answer is not on the first screen"
            assert ui.d.find_element("id", "trail").get_attribute("href").endswith(f"/docverify/trace/{doc}")
            # the document first (ADR 0036): every page once, in order; page 1 and its classification
            # on the first screen, no taller than the window (ADR 0051); an audit worded as an audit
            shown = ui.first_screen()
            assert shown["pages"] == list(range(1, shown["n"] + 1)), (doc, shown)
            if shown["n"]:
                assert shown["top"] is not None and shown["top"] < shown["vh"], (doc, shown)
                assert shown["band"] is not None and shown["band"] < shown["vh"], (doc, shown)
                assert shown["width"] >= 450 and shown["height"] <= shown["vh"] and shown["img"], (doc, shown)
            if ui.by_css("h1").text.startswith("AUDIT"):
                assert shown["lead"].startswith("Accepted automatically; confirm or correct"), shown["lead"]
            assert "could not be processed (see the decision)" not in ui.d.page_source
            if doc == sid("fabricated_evidence"):
                assert "refused" in ui.by_css(".refused").text  # the Required Actions refusal, with its reason
            if doc == sid("quest_cbc_panel"):
                ui.shot("12_review_page")
                ui.key("c")  # Correct, nothing changed: refused on the page, nothing sent
                ui.ctrl_enter()
                reason = ui.by_css(".refused").text
                assert "Not sent" in reason and "change" in reason.lower(), reason
                ui.shot("13_refused_shown")
                assert not list((root / "ground_truth").glob(f"gt_{review_of[doc]}*.json"))
                ui.select("page_1", "Other")
                ui.ctrl_enter()
            elif doc == sid("corrupt_truncated"):  # offered after every document with pages (ADR 0051)
                assert "Nothing to look at: the file is damaged" in ui.d.page_source
                ui.key("x")
                ui.select("unclassifiable_reason", "unreadable")
                ui.ctrl_enter()
            else:
                ui.key("a")
                ui.ctrl_enter()
            ui.wait(lambda d=doc: ui.moved_on(d), 90, f"the page after answering {doc}")
            figures.append({"doc_id": doc, "clicks": ui.clicks - clicks0, "keys": ui.keys - keys0,
                            "seconds": round(time.monotonic() - t0, 2), "pages_shown": shown["n"],
                            "page1_top_px": round(shown["top"]) if shown["top"] is not None else None,
                            "page1_width_px": round(shown["width"] or 0), "busy_resends": ui.busy_resends})
            done.add(doc)
        assert "Reviews waiting" in ui.d.title  # the queue once every review is answered
        assert saved_banners >= len(escalated) - 1, saved_banners
        assert skipped in done and figures[-1]["doc_id"] == skipped  # offered again only when brought back
        ui.shot("14_queue_done")

        gt = root / "ground_truth"
        try:
            ui.wait(lambda: len(list(gt.glob("*.json"))) >= len(escalated) + 1, 300, "every answer saved")
        except TimeoutError as exc:
            saved = sorted(p.name for p in gt.glob("*.json"))
            raise AssertionError(f"{exc}\nsaved: {saved}\n{stack.diagnose('sme_review')}") from exc
        records = {}
        for p in gt.glob("*.json"):
            r = json.loads(p.read_text())
            records[(r["doc_id"], r.get("review_kind", "escalation"))] = r
        src = {k: r["ground_truth_source"] for k, r in records.items()}
        assert src[(sid("quest_cbc_panel"), "escalation")] == "SME_CORRECTED"
        assert src[(sid("corrupt_truncated"), "escalation")] == "SME_UNCLASSIFIABLE"
        assert src[(sid("fabricated_evidence"), "escalation")] == "SME_VALIDATED"
        assert src[(sid("lab_requisition_form"), "escalation")] == "SME_VALIDATED"
        assert [k for k in src if k[1] == "audit"] and all(v == "SME_VALIDATED" for k, v in src.items() if k[1] == "audit")
        corrected = records[(sid("quest_cbc_panel"), "escalation")]["ground_truth_classification"]
        genomic = [c for s in corrected["segments"] for c in s["classifications"] if c["doc_type"] == "Genomic Report"]
        assert all(c["presence_level"] == "NO_EVIDENCE" and not c["top_evidence"] for c in genomic)  # no leftovers
        unreadable = records[(sid("corrupt_truncated"), "escalation")]
        assert unreadable["ground_truth_classification"] is None and unreadable["unclassifiable_reason"] == "unreadable"
        for (doc, _), r in records.items():
            assert r["reviewer"] == "admin", doc
        trail_links = follow_the_trail(ui, stack, root, sid("fabricated_evidence"))

        # no failed task; every review task ended by its answer
        for run in stack.runs("sme_review"):
            for t in stack.task_instances("sme_review", run["dag_run_id"]):
                assert t["state"] != "failed", (run["dag_run_id"], t["task_id"], t["rendered_map_index"])
        # a Viewer of the Dags sees counts, never a page holding clinical text
        ui.login_as("viewer", stack.passwords["viewer"])
        for path in ("/docverify/reviews/", f"/docverify/reviews/{key}", "/docverify/packets/",
                     f"/docverify/packets/{key}"):
            ui.d.get(stack.base_url + path)
            ui.wait(lambda: "for reviewers only" in ui.d.page_source, 30, f"the 403 page at {path}")
            assert "fabricated_evidence.pdf" not in ui.d.page_source and "Quest" not in ui.d.page_source
        ui.shot("15_viewer_refused")
        # … and no clinical text anywhere Airflow renders (ADR 0036): Required Actions (the list and a
        # review's tab), the task instance's views (logs, XComs, rendered templates) in the browser
        # as the Viewer, and every log, XCom, HITL detail and rendered field through the API
        phi = night_phi(root)
        assert len(phi) > 100, len(phi)  # the night's page text, evidence and messages to look for
        ti_path = (f"/dags/sme_review/runs/{quote(ti['dag_run_id'], safe='')}/tasks/review/mapped/"
                   f"{ti['map_index']}")
        for path, expect in (("/required_actions", sid("fabricated_evidence")), (f"{ti_path}/required_actions", key),
                             (ti_path, key), (f"{ti_path}/xcom", key), (f"{ti_path}/rendered_templates", key),
                             (f"{ti_path}/details", key)):
            ui.d.get(stack.base_url + path)
            ui.wait(lambda e=expect: e in ui.d.find_element("tag name", "body").text, 60,
                    f"{expect!r} on {path} for the Viewer")
            time.sleep(1)  # lists and tabs fill in after their first request
            shown = ui.d.find_element("tag name", "body").text
            assert not leaks(shown, phi), f"clinical text on {path} for a Viewer: {leaks(shown, phi)[:3]}"
            assert not found(shown, incoming), f"a patient's name on {path} for a Viewer: {found(shown, incoming)}"
        ui.shot("16_viewer_required_actions")
        # the trail for a Viewer of the Dags: the same steps and task links, nothing that may name the patient
        fabricated = sid("fabricated_evidence")
        ui.d.get(f"{stack.base_url}/docverify/trace/{fabricated}")
        ui.wait(lambda: f"Trail of {fabricated}" in ui.d.find_element("tag name", "body").text, 30,
                "the trail for the Viewer")
        shown = ui.d.find_element("tag name", "body").text
        assert "Hidden from you" in shown and "the input file's URI" in shown, shown
        assert "fabricated_evidence" not in ui.d.page_source and "file://" not in ui.d.page_source
        assert not leaks(shown, phi), leaks(shown, phi)[:3]
        assert [a.get_attribute("href") for a in ui.d.find_elements("css selector", "a.log")] == trail_links
        assert not ui.d.find_elements("css selector", "a.packet")
        ui.shot("17_viewer_trail")
        rendered = []
        for dag_id in (DAG, "sme_review"):
            for run in stack.runs(dag_id):
                for t in stack.task_instances(dag_id, run["dag_run_id"]):
                    rendered.append(json.dumps(t.get("rendered_fields") or {}, ensure_ascii=False))
                    if t.get("try_number"):
                        rendered.append(json.dumps(stack.api(
                            "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run['dag_run_id'], safe='')}/taskInstances/"
                                   f"{t['task_id']}/logs/{t['try_number']}?map_index={t['map_index']}"),
                            ensure_ascii=False))
                rendered += [json.dumps(x, ensure_ascii=False) for x in stack.xcoms(dag_id, run["dag_run_id"])]
        rendered += [json.dumps(h, ensure_ascii=False) for h in stack.paged("/api/v2/dags/~/dagRuns/~/hitlDetails", "hitl_details")]
        assert len(rendered) > 20
        leaked = leaks("\n".join(rendered), phi)
        assert not found("\n".join(rendered), incoming), found("\n".join(rendered), incoming)[:5]  # ADR 0050
        night = today.isoformat()
        ui.d.get(f"{stack.base_url}/docverify/reports/{night}")  # the batch report as the Viewer reads it
        ui.wait(lambda: "docverify batch report" in ui.d.find_element("tag name", "body").text, 30, "the report")
        assert not found(ui.d.page_source, incoming), found(ui.d.page_source, incoming)
        assert not leaked, f"clinical text in Airflow's logs, XComs, HITL details or rendered fields: {leaked[:5]}"
        ui.d.get(f"{stack.base_url}/docverify/trend/")
        ui.wait(lambda: "night(s)" in ui.d.page_source, 30, "the trend page for a Viewer")

        per = [f["clicks"] + f["keys"] for f in figures]
        (SHOTS / "workspace_figures.json").write_text(json.dumps(
            {"reviews": figures, "actions_per_review_mean": round(sum(per) / len(per), 2),
             "seconds_per_review_mean": round(sum(f["seconds"] for f in figures) / len(figures), 2),
             "scroll_to_answer_px": 0, "window": [1400, 1000]}, indent=2))
        assert sum(per) / len(per) <= 2.6, figures  # the bound across Agree, Correct, Cannot classify, audit
