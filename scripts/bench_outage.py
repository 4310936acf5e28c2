"""An outage costs a wait, not a night of escalations — measured end to end.

The same small night (the sample batch of include/samples) runs twice through the project's real
stages in one process (tests/batch_stages.run_stages: discover → layout → verify per shard →
arbiter → auto_fix_retry → accept → write_sme_packets, then the batch report) with the LLM judge on
the real google-genai client against the loopback fake Gemini endpoint (tests/fake_gemini.py):
once without an outage, once with an overload window — every generateContent request answered
with the real 503 ``UNAVAILABLE`` "The model is overloaded." body (read from the shared corpora)
for ``--outage-s`` seconds, opened by request number ``--after-requests + 1``.

The judge is built as the Airflow path builds it (docverify_airflow.config.llm_judge's
arguments, defaults of the Variables): ``BackoffRetry(max_attempts=4)``, ``ThrottlePolicy(max_wait_s=
--budget)`` (the Variable docverify_llm_throttle_wait_s, 1200 s in production), the circuit breaker
at 5 consecutive outage answers, no shared limiter (Variable docverify_llm_rpm 0, the default), a
verdict cache in the run's own (fresh) storage root.

    python scripts/bench_outage.py --outage-s 90
    python scripts/bench_outage.py --outage-s 90 --budget 60      # past the budget: ServiceOutage

Reported per run: documents, wall, generateContent requests, 503s answered in the window, circuit
openings and probe requests, the first request served after the window closed, the documents
marked VERIFICATION_INCOMPLETE / CLASSIFICATION_FAILED, and whether every document's route and
final decision equal the run without an outage. Writes docs/benchmarks/outage.md (``--no-write``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
for p in (str(REPO), str(REPO / "plugins")):
    if p not in sys.path:
        sys.path.insert(0, p)

DS = "2026-11-20"


def counting_judge_class():
    """``LLMJudge`` counting its circuit breaker: openings (the streak of consecutive outage answers
    reaching ``breaker_threshold``) and probe requests (while the circuit is open, each attempt of the
    probing call sets ``_prober`` right before it sends one request)."""
    from docverify.llm.judge import LLMJudge

    class CountingJudge(LLMJudge):
        probes = openings = 0
        _probe_holder: object | None = None
        _streak = 0

        @property
        def _outage_streak(self) -> int:  # type: ignore[override]
            return self._streak

        @_outage_streak.setter
        def _outage_streak(self, value: int) -> None:
            if self.breaker_threshold and self._streak < self.breaker_threshold <= value:
                self.openings += 1
            self._streak = value

        @property
        def _prober(self) -> object | None:  # type: ignore[override]
            return self._probe_holder

        @_prober.setter
        def _prober(self, value: object | None) -> None:
            if value is not None:
                self.probes += 1
            self._probe_holder = value

    return CountingJudge


def make_judge(fake, store, budget_s: float, *, initial_wait_s: float = 1.0, max_backoff_s: float = 60.0):
    """The LLM judge as the Airflow path builds it (config.llm_judge with the Variables'
    defaults), with the waiting budget ``budget_s`` and a probe counter."""
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    from docverify.llm.cache import VerdictCache
    from docverify.llm.faults import BackoffRetry, ThrottlePolicy

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    return counting_judge_class()(
        model, "google:gemini-2.5-flash", cache=VerdictCache(store), timeout_s=120.0, output_retries=2,
        retry_policy=BackoffRetry(max_attempts=4),
        throttle=ThrottlePolicy(max_wait_s=budget_s, initial_wait_s=initial_wait_s, max_backoff_s=max_backoff_s))


class _AfterWindow(threading.Thread):
    """Samples the fake every 50 ms: when, after the window closed, it first served a request (not a
    503). No request is served inside the window, so the count of the last sample before it closed is
    the count at its close."""

    def __init__(self, fake) -> None:
        super().__init__(daemon=True)
        self.fake, self.stop, self.first_served_at = fake, threading.Event(), None
        self.start()

    def run(self) -> None:
        before = None
        while not self.stop.wait(0.05):
            f = self.fake
            with f.lock:
                served = f.count - f.overloaded_answers - f.throttled
            closed, now = f.outage_closed_at, time.monotonic()
            if closed is None or now < closed:
                before = served
            elif before is not None and served > before:
                self.first_served_at = now
                return


@dataclass
class Night:
    documents: int = 0
    wall_s: float = 0.0
    requests: int = 0
    overloaded: int = 0
    openings: int = 0
    probes: int = 0
    incomplete: int = 0
    classification_failed: int = 0
    routes: dict[str, Any] = field(default_factory=dict)
    window_s: float | None = None
    first_served_after_s: float | None = None
    raised: str = ""


def marked_documents(root: pathlib.Path) -> tuple[int, int]:
    """Documents whose stored result (runs/<ds>/<doc>/result.json) names VERIFICATION_INCOMPLETE /
    CLASSIFICATION_FAILED — what a night left behind even if it did not finish."""
    incomplete = failed = 0
    for p in (root / "runs" / DS).glob("*/result.json"):
        text = p.read_text()
        incomplete += "VERIFICATION_INCOMPLETE" in text
        failed += "CLASSIFICATION_FAILED" in text
    return incomplete, failed


def run_night(work: pathlib.Path, *, outage_s: float = 0.0, after_requests: int = 8, budget_s: float = 1200.0,
              latency_s: float = 0.0, names: list[str] | None = None, shard_size: int = 25,
              initial_wait_s: float = 1.0, max_backoff_s: float = 60.0, reraise: bool = True) -> Night:
    """One night of the sample batch (or of the samples ``names``) in a fresh storage root ``work``;
    an overload window of ``outage_s`` seconds from request ``after_requests + 1`` (0: none). A
    :class:`~docverify.judging.judges.JudgeThrottled` (the task-failing error) propagates, or with
    ``reraise=False`` ends the night: ``raised`` names it and the counts are those until then."""
    from tests.batch_stages import copy_samples, run_stages
    from tests.fake_gemini import FakeGemini, overload_body

    from docverify.judging.judges import JudgeThrottled
    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.storage.store import ArtifactStore

    if outage_s > 0:
        overload_body()  # the corpora's recording must be there before the night starts
    copy_samples(work, DS, names)
    b = Batch(store=ArtifactStore(work), ds=DS, run_id="bench-outage")
    fake = FakeGemini(latency_s=latency_s, keep_bodies=False)
    if outage_s > 0:
        fake.outage_after_requests, fake.outage_s = after_requests, outage_s
    fake.start()
    judge = make_judge(fake, b.store, budget_s, initial_wait_s=initial_wait_s, max_backoff_s=max_backoff_s)
    watch = _AfterWindow(fake) if outage_s > 0 else None
    night = Night()
    started = time.monotonic()
    try:
        run_stages(b, judge, shard_size=shard_size)
        report.write(b)
    except JudgeThrottled as exc:
        night.raised = type(exc).__name__
        if reraise:
            raise
    finally:
        night.wall_s = time.monotonic() - started
        if watch is not None:
            watch.stop.set()
        fake.stop()
        night.requests, night.overloaded = fake.count, fake.overloaded_answers
        night.openings, night.probes = judge.openings, judge.probes
        if fake.outage_opened_at is not None:
            night.window_s = fake.outage_s
            if watch is not None and watch.first_served_at is not None:
                night.first_served_after_s = watch.first_served_at - fake.outage_closed_at
    if night.raised:
        night.incomplete, night.classification_failed = marked_documents(work)
        return night
    rep = json.loads(b.store.read_bytes(f"reports/{DS}/batch_report.json"))
    for d in rep["per_document"]:
        codes = set(d.get("issue_codes") or [])
        night.incomplete += "VERIFICATION_INCOMPLETE" in codes
        night.classification_failed += d.get("error") == "CLASSIFICATION_FAILED" or "CLASSIFICATION_FAILED" in codes
        night.routes[d["doc_id"]] = (d.get("route"), d.get("final_decision"), d.get("error"))
    night.documents = len(rep["per_document"])
    return night


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outage-s", type=float, default=90.0, help="the overload window (seconds)")
    ap.add_argument("--after-requests", type=int, default=8, help="requests answered before the window opens")
    ap.add_argument("--budget", type=float, default=1200.0,
                    help="ThrottlePolicy.max_wait_s (Variable docverify_llm_throttle_wait_s; production 1200)")
    ap.add_argument("--latency", type=float, default=0.5, help="fake Gemini: seconds per answer")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = pathlib.Path(tempfile.mkdtemp(prefix="docverify-bench-outage-"))
    try:
        base = run_night(work / "base", latency_s=args.latency)
        print("no outage:", base, flush=True)
        out = run_night(work / "outage", outage_s=args.outage_s, after_requests=args.after_requests,
                        budget_s=args.budget, latency_s=args.latency, reraise=False)
        print("outage:", out, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    same = base.routes == out.routes
    differ = sorted(k for k in base.routes.keys() | out.routes.keys() if base.routes.get(k) != out.routes.get(k))
    extra = out.wall_s - base.wall_s
    cmd = "python scripts/bench_outage.py " + " ".join(sys.argv[1:])
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    lat = f"{args.latency:g}"

    def row(name: str, n: Night) -> str:
        after = f"{n.first_served_after_s:.1f}" if n.first_served_after_s is not None else "–"
        docs = n.documents if not n.raised else f"– ({n.raised})"
        return (f"| {name} | {docs} | {n.wall_s:.1f} | {n.requests} | {n.overloaded} | {n.openings} / "
                f"{n.probes} | {after} | {n.incomplete} | {n.classification_failed} |")

    setup = f"a {args.outage_s:g} s overload window, waiting budget {args.budget:g} s"
    lines = [
        f"## {dt.date.today().isoformat()}: {setup}", "",
        f"`{cmd}` at commit {commit} on {os.cpu_count()} cores **shared with other sessions' work**. The sample "
        f"batch (include/samples) through the project's stages in one process (tests/batch_stages.run_stages, then "
        f"the batch report), the LLM judge on the real google-genai client against tests/fake_gemini.py (latency "
        f"{lat} s, the offline brain), built with the Airflow path's arguments: BackoffRetry(4 attempts), "
        f"ThrottlePolicy(max_wait_s={args.budget:g}), circuit breaker at 5 consecutive outage answers, a fresh "
        f"verdict cache per run. The outage: from request {args.after_requests + 1} on, every generateContent "
        f"request answered for {args.outage_s:g} s with HTTP 503 and the real overload body (`err_503_overloaded` "
        f"of shared/corpora/realapi/errors/errors_from_issues.json, read at run time: UNAVAILABLE \"The model is "
        f"overloaded. Please try again later.\").", "",
        "| run | documents | wall (s) | requests | 503s answered | circuit openings / probe requests "
        "| first request served after the window (s) | VERIFICATION_INCOMPLETE | CLASSIFICATION_FAILED |",
        "|---|---|---|---|---|---|---|---|---|",
        row("no outage", base), row(f"{args.outage_s:g} s overload", out), "",
    ]
    if out.raised:
        lines += [
            f"- **The night raised `{out.raised}` after {out.wall_s:.1f} s** (the budget {args.budget:g} s is below "
            f"the {args.outage_s:g} s window): the verify task fails and Airflow retries it; documents marked "
            f"VERIFICATION_INCOMPLETE / CLASSIFICATION_FAILED: {out.incomplete} / {out.classification_failed}.", ""]
        ok = out.incomplete == out.classification_failed == 0
    else:
        lines += [
            f"- **Routes per document identical: {'yes' if same else 'NO'}** ({len(base.routes)} documents, route "
            f"+ final decision + error compared{'' if same else '; differing: ' + ', '.join(differ)}).",
            f"- Extra wall time: **{extra:.1f} s for a {args.outage_s:g} s outage** ({extra - args.outage_s:+.1f} s "
            f"beyond it): no Retry-After on a 503, so the judge backs off (`initial_wait_s × 2**n`, capped at 60 s, "
            f"half of it random) and, the circuit open, only the probing call sends; the first request after the "
            f"window leaves when the probe's current wait ends (up to a minute later), then the rest follow.",
            f"- Documents marked VERIFICATION_INCOMPLETE / CLASSIFICATION_FAILED with the outage: "
            f"{out.incomplete} / {out.classification_failed} (without: {base.incomplete} / "
            f"{base.classification_failed}).", ""]
        ok = same and out.incomplete == out.classification_failed == 0
    lines += [
        "The waiting budget is **1200 s in production** (Variable `docverify_llm_throttle_wait_s`); an outage "
        "longer than the budget does not mark documents either: the call raises `ServiceOutage` (a "
        "`JudgeThrottled`), the verify task fails and Airflow retries it. `tests/test_bench_outage.py` (in "
        "`make test-fast`) checks both on three documents: identical routes with a 3 s window, `ServiceOutage` "
        "with the budget below the window.", ""]
    from scripts.benchlib import BENCHMARKS, publish

    intro = ["# An outage costs a wait (scripts/bench_outage.py)", "",
             "The same night with and without an overload window of the model service. Each configuration is a "
             "section; a re-run replaces its own.", ""]
    old: list[str] = []
    path = BENCHMARKS / "outage.md"
    if path.exists() and not args.no_write:
        sections = path.read_text().split("\n## ")[1:]
        old = ["## " + sec.strip("\n") + "\n" for sec in sections if setup not in sec.split("\n", 1)[0]]
    publish(intro + lines + old, "outage.md", write=not args.no_write)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
