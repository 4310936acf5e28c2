"""An N-document night under the real scheduler, measured (ADR 0014): the embedded default
(offline judge) or the LLM path against the loopback fake Gemini endpoint with a given latency,
concurrency limit and requests-per-minute quota (429 + Retry-After beyond it).

    python scripts/bench_night.py --documents 100                       # offline
    python scripts/bench_night.py --judge llm --documents 150 --rpm 60 --latency 1
    python scripts/bench_night.py --judge llm --documents 150 --rpm 1000 --latency 3 --fake-concurrency 64
    python scripts/bench_night.py --documents 1000 10000                # bigger nights (a quiet machine)
    python scripts/bench_night.py --documents 1000 --in-process         # the stages without Airflow
    python scripts/bench_night.py --documents 1000 --split-scan-pages 0 --ocr-engine rapidocr-onnxruntime

The night: the sample PDFs (include/samples) and, with ``--corpora``, the corpus PDFs of
../shared/corpora/pdfs, repeated up to N; every repeat gets a one-line stamp ("bench copy NNNNN")
at the foot of its first page so that no two documents are byte-identical or share a verdict-cache
key (an LLM night of repeats would mostly hit the cache). The copies go to a temporary storage
root, never into the repository. Each night runs on a fresh Airflow home and storage root (nothing
cached) under scripts/airflow_stack.py (scheduler, dag-processor, api-server, triggerer,
LocalExecutor), measured by scripts/bench_scheduler.py's ``under_scheduler``.

Reported: wall (the run's start → end), task instances (whatever the DAG's task graph is), CPU
seconds and peak RSS of every Airflow process; on the LLM path the requests the endpoint got, the
429s it sent, its peak and effective concurrency (time answering / wall of the LLM traffic), the
quota bound ``max(requests × latency / concurrency, requests / RPM)`` and the ratio of the LLM
traffic's wall (first request → last answer) to it; and the night's outcome (documents accepted,
VERIFICATION_INCOMPLETE issues, CLASSIFICATION_FAILED), so a throttled night can be compared with
an unthrottled one; the layout stage's seconds, OCR'd documents, pages and seconds and the OCR engine
its record names. ``--in-process``: the same PDFs through the night's stages in this process
(tests/batch_stages' order, the layout with the DAG's 2 parse workers, the offline judge, the
report), no Airflow: wall, CPU (this process and its reaped parse workers) and the layout's share.
``--ocr-engine`` sets ``DOCVERIFY_OCR_ENGINE`` for the night (the task processes and their parse
workers inherit it). The 1-minute load average before each night is reported (a shared machine).
Writes docs/benchmarks/night.md via scripts/benchlib.publish (``--no-write``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import io
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "plugins"))
from scripts.airflow_stack import AirflowStack  # noqa: E402
from scripts.bench_scheduler import DAG, under_scheduler  # noqa: E402
from scripts.benchlib import publish  # noqa: E402

SAMPLES = REPO / "include" / "samples"
CORPORA = pathlib.Path(os.environ.get("DOCVERIFY_CORPORA", REPO.parent / "shared" / "corpora"))


@functools.lru_cache(maxsize=4096)
def _stamp_page(label: str, width: float, height: float) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format=(width, height))
    pdf.set_creation_date(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    pdf.add_page()
    pdf.set_font("Helvetica", size=6)
    pdf.text(18, height - 10, label)
    return bytes(pdf.output())


def stamped(src: pathlib.Path, label: str) -> bytes | None:
    """``src`` with ``label`` written at the foot of its first page; None if it cannot be read."""
    from pypdf import PdfReader, PdfWriter

    try:
        reader = PdfReader(src)
        writer = PdfWriter(clone_from=reader)
        page = writer.pages[0]
        box = page.mediabox
        overlay = PdfReader(io.BytesIO(_stamp_page(label, float(box.width), float(box.height)))).pages[0]
        page.merge_page(overlay)
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()
    except Exception:  # noqa: BLE001 - a deliberately broken sample is copied as it is
        return None


def build_night(incoming: pathlib.Path, n: int, corpora: bool) -> dict:
    """``n`` PDFs (and their companion classifications) under ``incoming``."""
    incoming.mkdir(parents=True, exist_ok=True)
    sources = sorted(SAMPLES.glob("*.pdf"))
    if corpora:
        sources += sorted((CORPORA / "pdfs").glob("*.pdf"))
    identical = 0
    for i in range(n):
        src = sources[i % len(sources)]
        copy = i // len(sources)
        stem = src.stem if copy == 0 else f"{src.stem}__{copy:05d}"
        data = src.read_bytes() if copy == 0 else stamped(src, f"bench copy {copy:05d}")
        if data is None:
            data, identical = src.read_bytes(), identical + 1
        (incoming / f"{stem}.pdf").write_bytes(data)
        companion = src.with_name(src.stem + ".classification.json")
        if companion.exists():
            shutil.copy2(companion, incoming / f"{stem}.classification.json")
    return {"documents": n, "sources": len(sources), "unstamped_copies": identical}


def outcome(store: pathlib.Path, ds: str) -> dict:
    """The night's outcome read from the storage root: documents accepted, each document's final
    decision, and the VERIFICATION_INCOMPLETE / CLASSIFICATION_FAILED issues of its last attempt.
    Reads ``runs/<ds>/<doc>/result.json`` (the typed run store of ADR 0010) or, for older checkouts,
    ``runs/<ds>/<doc>/attempt_<n>/report.json``."""
    import collections

    accepted = len(list((store / "accepted" / ds).glob("*.json")))
    incomplete = failed = docs = 0
    decisions: collections.Counter[str] = collections.Counter()
    night = store / "runs" / ds
    for doc in sorted(p for p in night.iterdir() if p.is_dir() and not p.name.startswith("_")) \
            if night.exists() else []:
        codes: list = []
        if (doc / "result.json").exists():
            r = json.loads((doc / "result.json").read_text())
            final = r.get("result") or {}
            attempts = final.get("attempts") or []
            codes = [i.get("code") for i in (attempts[-1].get("issues") or [])] if attempts else []
            if r.get("error"):
                codes.append((r["error"] or {}).get("code") or "ERROR")
            decisions[final.get("final_decision") or r.get("route") or "?"] += 1
        else:
            reports = sorted(doc.glob("attempt_*/report.json"), key=lambda p: int(p.parent.name.split("_")[1]))
            if not reports:
                continue
            codes = [i.get("code") for i in json.loads(reports[-1].read_text()).get("issues", [])]
            decision = reports[-1].with_name("v5_arbiter_decision.json")
            if decision.exists():
                d = json.loads(decision.read_text())
                decisions[str(d.get("decision") or d.get("route") or "?")] += 1
        docs += 1
        incomplete += codes.count("VERIFICATION_INCOMPLETE")
        failed += codes.count("CLASSIFICATION_FAILED")
    return {"reported": docs, "accepted": accepted, "verification_incomplete": incomplete,
            "classification_failed": failed,
            "decisions": ", ".join(f"{k} {v}" for k, v in sorted(decisions.items())) or "–", **layout_totals(night)}


def layout_totals(night: pathlib.Path) -> dict:
    """The layout stage's own figures from its record (``_stages/layout.json``): its seconds (the plan's,
    the parts' summed and the merge's), the OCR'd pages and seconds of the night (ADR 0052; absent in
    a record written before them: "–") and the OCR engine of its OCR'd bundles (the ``parser`` after
    ``+``)."""
    rec = night / "_stages" / "layout.json"
    layout = json.loads(rec.read_text()) if rec.exists() else {}
    parser = str(layout.get("parser") or "")
    return {"layout_s": layout.get("seconds"), "ocr_pages": layout.get("ocr_pages"),
            "ocr_s": layout.get("ocr_seconds"), "ocr_docs": len(layout.get("ocr") or {}) if "ocr" in layout else None,
            "ocr_engine": parser.partition("+")[2] or None}


def _num(value, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


class InFlight(threading.Thread):
    """Samples the fake endpoint's requests in flight twice a second; buckets() gives the mean per 10 s
    from the first request on — where the LLM traffic runs below the quota (ramp-up, the barrier
    before auto_fix_retry, the tail)."""

    def __init__(self, fake) -> None:
        super().__init__(daemon=True)
        self.fake, self.stop, self.samples = fake, threading.Event(), []
        self.start()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.samples.append((time.monotonic(), self.fake.in_flight, self.fake.count))

    def buckets(self, width: float = 10.0) -> list[float]:
        started = [t for t, _, c in self.samples if c > 0]
        if not started:
            return []
        t0, out = started[0], {}
        for t, k, _ in self.samples:
            if t >= t0:
                out.setdefault(int((t - t0) // width), []).append(k)
        return [round(sum(v) / len(v), 1) for _, v in sorted(out.items())]


def in_process_night(args, n: int, work: pathlib.Path) -> dict:
    """The night's stages on ``n`` PDFs in this process (no Airflow), the offline judge: discover →
    layout (2 parse workers, as the DAG's default) → verify shards → arbiter → retry → accept → SME
    packets → report. Wall and CPU seconds (this process and its reaped parse workers)."""
    from docverify.judging.judges import OfflineJudge
    from docverify.layout.split import DEFAULT_SPLIT_SCAN_PAGES
    from docverify.reporting import report
    from docverify.stages.common import Batch
    from docverify.stages.discover import discover
    from docverify.stages.layout import layout_local
    from docverify.stages.routes import accept, write_sme_packets
    from docverify.stages.verify import arbiter, auto_fix_retry_shard, plan_shards, retry_shards, verify_shard
    from docverify.storage.store import ArtifactStore

    ds = "2026-11-02"
    store = work / f"store-in-process-{n}"
    built = build_night(store / "incoming" / ds, n, args.corpora)
    split = DEFAULT_SPLIT_SCAN_PAGES if args.split_scan_pages is None else args.split_scan_pages
    b, judge = Batch(store=ArtifactStore(store), ds=ds, run_id="bench-night"), OfflineJudge()
    t0, c0 = time.perf_counter(), _cpu()
    discover(b.fresh())
    layout_local(b.fresh(), workers=2, timeout_s=60, ocr=not args.no_ocr, split_scan_pages=split)
    t_layout = time.perf_counter() - t0
    shards = plan_shards(b.fresh())
    for i, shard in enumerate(shards):
        verify_shard(b.fresh(), shard, judge, str(i))
    arbiter(b.fresh(), shards=len(shards))
    for i, shard in enumerate(retry_shards(b.fresh())):
        auto_fix_retry_shard(b.fresh(), shard, judge, str(i))
    t_verify = time.perf_counter() - t0 - t_layout  # classify + V1-V5 (+ the retries), one process
    accept(b.fresh())
    write_sme_packets(b.fresh())
    report.write(b.fresh())
    result = {"state": "done", "wall_s": time.perf_counter() - t0, "task_instances": "–", "cpu_s": _cpu() - c0,
              "peak_rss_mb": _peak_rss_mb(), "layout_wall_s": t_layout, "verify_wall_s": t_verify,
              **built, **outcome(store, ds)}
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return result


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _peak_rss_mb() -> float:
    import resource

    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024


def one_night(args, n: int, judge: str, work: pathlib.Path) -> dict:
    from tests.fake_gemini import FakeGemini

    ds = "2026-11-02"
    home, store = work / f"home-{judge}-{n}", work / f"store-{judge}-{n}"
    built = build_night(store / "incoming" / ds, n, args.corpora)
    variables = {"docverify_judge": judge, "docverify_ocr": "off" if args.no_ocr else "on"}
    if args.split_scan_pages is not None:  # ADR 0052: 0 = every PDF in one parse worker (before/after)
        variables["docverify_parse_split_scan_pages"] = str(args.split_scan_pages)
    env: dict[str, str] = {}
    fake = receiver = None
    if args.lineage == "off":  # the provider installed but switched off: the cost of lineage, by difference
        env["AIRFLOW__OPENLINEAGE__DISABLED"] = "True"
    elif args.lineage == "http":  # a lineage backend on loopback: every event counted (ADR 0040)
        from tests.lineage_events import LineageReceiver

        receiver = LineageReceiver().start()
        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = receiver.transport()
    if judge == "llm":
        fake = FakeGemini(latency_s=args.latency, max_concurrency=args.fake_concurrency, rpm=args.rpm,
                          keep_bodies=False).start()
        env["AIRFLOW_CONN_DOCVERIFY_LLM"] = json.dumps(
            {"conn_type": "pydanticai_vertex",
             "extra": {"model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}})
        limiter_rpm = args.limiter_rpm if args.limiter_rpm is not None else args.rpm
        variables["docverify_llm_rpm"] = str(limiter_rpm)
        if args.llm_mode == "batch":  # the provider's hook (google-genai) and trigger reach the fake's Batch API
            env["GOOGLE_GEMINI_BASE_URL"] = fake.base_url
            fake.batch_delay_s = args.batch_delay
            variables.update({"docverify_llm_mode": "batch", "docverify_llm_batch_poll_s": "2"})
        if args.pool_slots:  # as airflow_settings.yaml says: as many shards as the llm pool has slots
            variables["docverify_llm_shards"] = str(args.pool_slots)
    stack = AirflowStack(home, store, variables=variables, env=env, parallelism=args.parallelism)
    try:
        stack.start()
        if args.pool_slots:
            stack.airflow("pools", "set", "llm", str(args.pool_slots), "bench_night")
        stack.settle(DAG)  # today's scheduled (empty) run ends before the measured night
        before = fake.stats() if fake else {}
        profile = InFlight(fake) if fake else None
        conf = {k: v for k, v in (("concurrency", args.concurrency), ("max_shards", args.max_shards)) if v}
        if receiver is not None:
            receiver.events.clear()  # the settled empty night's events are not the measured night's
        result = under_scheduler(stack, ds, conf or None)
        if receiver is not None:
            time.sleep(5)  # the last COMPLETE events are posted from forked listeners
            result["lineage_events"] = len(receiver.events)
            result["lineage_bytes"] = sum(len(json.dumps(e)) for e in receiver.events)
            kinds: dict[str, int] = {}
            for e in receiver.events:
                kind = f"{e['eventType']} {'Dag run' if '.' not in e['job']['name'] else 'task'}"
                kinds[kind] = kinds.get(kind, 0) + 1
            result["lineage_kinds"] = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    finally:
        if receiver is not None:
            receiver.stop()
        if fake is not None and profile is not None:
            profile.stop.set()
        stack.stop()
        if fake is not None:
            fake.stop()
    result.update(built)
    result.update(outcome(store, ds))
    if fake is not None:
        s = fake.stats()
        requests = s["requests"] - before.get("requests", 0)
        accepted_requests = requests - (s["throttled"] - before.get("throttled", 0))
        conc = args.fake_concurrency or (args.pool_slots or 4) * 8  # no server limit: pool slots × the concurrency param
        bound = max(accepted_requests * args.latency / conc, accepted_requests / args.rpm * 60 if args.rpm else 0.0)
        result.update({"requests": requests, "throttled": s["throttled"] - before.get("throttled", 0),
                       "peak_concurrency": s["peak_concurrency"], "effective_concurrency": s["effective_concurrency"],
                       "llm_span_s": s["span_s"], "bound_s": bound,
                       "ratio": s["span_s"] / bound if bound else float("nan"),
                       "in_flight_profile": profile.buckets() if profile else [],
                       "batch_jobs": fake.batch_jobs, "batch_items": fake.batch_items})
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, nargs="+", default=[100])
    ap.add_argument("--judge", choices=("offline", "llm"), default="offline")
    ap.add_argument("--latency", type=float, default=1.0, help="fake Gemini: seconds per answer")
    ap.add_argument("--fake-concurrency", type=int, default=0, help="fake Gemini: requests served at once (0 = any)")
    ap.add_argument("--rpm", type=int, default=0, help="fake Gemini: requests per minute (0 = no quota)")
    ap.add_argument("--limiter-rpm", type=int, help="Variable docverify_llm_rpm (default: --rpm; 0 = no limiter)")
    ap.add_argument("--pool-slots", type=int, help="slots of the llm pool (default: airflow_settings.yaml)")
    ap.add_argument("--concurrency", type=int, help="the run's 'concurrency' param: documents at once in a shard "
                    "(default: the DAG's)")
    ap.add_argument("--llm-mode", choices=("online", "batch"), default="online",
                    help="Variable docverify_llm_mode (batch: the fake's Batch API answers the night's requests)")
    ap.add_argument("--batch-delay", type=float, default=30.0, help="fake Batch API: seconds until a job succeeds")
    ap.add_argument("--max-shards", type=int, help="the run's 'max_shards' param (default: the DAG's)")
    ap.add_argument("--parallelism", type=int, default=8, help="[core] parallelism of the LocalExecutor")
    ap.add_argument("--corpora", action="store_true", help="add ../shared/corpora/pdfs to the sample PDFs")
    ap.add_argument("--no-ocr", action="store_true", help="Variable docverify_ocr=off")
    ap.add_argument("--split-scan-pages", type=int, help="Variable docverify_parse_split_scan_pages (default: "
                    "airflow_settings.yaml's 8; 0 = a scan's pages in one worker, as before ADR 0052)")
    ap.add_argument("--ocr-engine", help="DOCVERIFY_OCR_ENGINE for the night (default: the parser's own, ADR 0058)")
    ap.add_argument("--in-process", action="store_true", help="the stages in this process, no Airflow (offline judge)")
    ap.add_argument("--keep", action="store_true", help="keep the Airflow homes and storage roots")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--label", default="", help="a note for the table's last column")
    ap.add_argument("--lineage", choices=("console", "off", "http"), default="console",
                    help="OpenLineage: as make configures it (console transport: events in the task logs), "
                         "switched off, or the HTTP transport to a loopback receiver that counts the events")
    args = ap.parse_args()
    if args.in_process and args.judge != "offline":
        ap.error("--in-process runs the offline judge only")
    if args.ocr_engine:
        os.environ["DOCVERIFY_OCR_ENGINE"] = args.ocr_engine  # the stack's processes and parse workers inherit it
    work = pathlib.Path(tempfile.mkdtemp(prefix="docverify-bench-night-"))
    rows = []
    try:
        for n in args.documents:
            load = os.getloadavg()[0]
            r = in_process_night(args, n, work) if args.in_process else one_night(args, n, args.judge, work)
            r["load_before"] = load
            rows.append((n, r))
            print(n, r, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    cmd = "python scripts/bench_night.py " + " ".join(sys.argv[1:])
    import subprocess

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    llm = args.judge == "llm"
    setup = (f"LLM judge against the fake Gemini endpoint (tests/fake_gemini.py: latency {args.latency:g} s, "
             f"{args.fake_concurrency or 'unlimited'} concurrent, quota {args.rpm or 'none'} RPM; Variable "
             f"docverify_llm_rpm={args.limiter_rpm if args.limiter_rpm is not None else args.rpm}, llm pool "
             f"{args.pool_slots or 'as in airflow_settings.yaml'}"
             f"{f'; batch mode, a job succeeds after {args.batch_delay:g} s' if args.llm_mode == 'batch' else ''})" if llm else "embedded default (offline judge)")
    if args.lineage != "console":
        setup += f", OpenLineage {'off' if args.lineage == 'off' else 'HTTP transport to a loopback receiver'}"
    if args.in_process:
        setup += ", in process (the stages without Airflow)"
    if args.ocr_engine or args.split_scan_pages is not None:
        setup += (f", DOCVERIFY_OCR_ENGINE={args.ocr_engine or '(default)'}, "
                  f"docverify_parse_split_scan_pages={'(default)' if args.split_scan_pages is None else args.split_scan_pages}")
    where = ("the stages in one process (discover, layout with 2 parse workers, verify by shard, arbiter, retry, "
             "accept, SME packets, report)" if args.in_process else
             "scheduler, dag-processor, api-server and triggerer of scripts/airflow_stack.py, LocalExecutor, "
             f"parallelism {args.parallelism}")
    lines = [f"## {dt.date.today().isoformat()}: {setup}", "",
             f"`{cmd}` at commit {commit} on {os.cpu_count()} cores **shared with other sessions' work (figures taken under "
             f"contention)**; fresh {'' if args.in_process else 'Airflow home and '}storage root per night; {where}"
             f"{', OCR off' if args.no_ocr else ''}"
             f"{f', docverify_parse_split_scan_pages={args.split_scan_pages}' if args.split_scan_pages is not None else ''}"
             f"{f', concurrency param {args.concurrency}' if args.concurrency else ''}"
             f"{f', max_shards param {args.max_shards}' if args.max_shards else ''}.", ""]
    head = ("| documents | state | wall (s) | task instances | CPU (s) | peak RSS (MB) | documents read | final decisions "
            "| accepted | VERIFICATION_INCOMPLETE | CLASSIFICATION_FAILED | layout (s, parts summed) | OCR'd documents "
            "| OCR'd pages | OCR (s, workers summed) | OCR engine | load before (1 min) |")
    sep = "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    if args.lineage == "http":
        head += " OpenLineage events | by kind | event bytes |"
        sep += "---|---|---|"
    if llm:
        head += " requests | 429s | peak / effective concurrency | LLM traffic (s) | bound (s) | ratio | batch jobs / items |"
        sep += "---|---|---|---|---|---|---|"
    lines += [head, sep]
    for n, r in rows:
        line = (f"| {n} | {r['state']} | {r['wall_s']:.1f} | {r['task_instances']} | {r['cpu_s']:.0f} | "
                f"{r['peak_rss_mb']:.0f} | {r['reported']} | {r['decisions']} | {r['accepted']} | "
                f"{r['verification_incomplete']} | "
                f"{r['classification_failed']} | {_num(r['layout_s'])} | {_num(r['ocr_docs'], '{}')} | "
                f"{_num(r['ocr_pages'], '{}')} | {_num(r['ocr_s'])} | {r.get('ocr_engine') or '–'} | "
                f"{r['load_before']:.1f} |")
        if args.lineage == "http":
            line += f" {r['lineage_events']} | {r['lineage_kinds']} | {r['lineage_bytes']:,} |"
        if llm:
            line += (f" {r['requests']} | {r['throttled']} ({100 * r['throttled'] / max(1, r['requests']):.1f} %) | "
                     f"{r['peak_concurrency']} / {r['effective_concurrency']:.1f} | {r['llm_span_s']:.1f} | "
                     f"{r['bound_s']:.1f} | {r['ratio']:.2f} | {r['batch_jobs']} / {r['batch_items']} |")
        lines.append(line)
    lines += ["", "Bound: `max(requests × latency / concurrency, requests / RPM)` over the requests the endpoint "
              "accepted; ratio: the LLM traffic's wall (the endpoint's first request → last answer) over it. "
              "Effective concurrency: the endpoint's time answering accepted requests / that wall. Requests: "
              "generateContent calls (online); batch items are answered by the Batch API's jobs."
              if llm else "", ""]
    old = ""
    out = REPO / "docs" / "benchmarks" / "night.md"
    if out.exists() and not args.no_write:  # each configuration is a section; a re-run replaces its own
        sections = out.read_text().split("\n## ")
        keep = [s for s in sections[1:] if setup not in s.split("\n", 1)[0]]
        old = "".join("\n## " + s for s in keep)
    title = ["# Nights under the scheduler (scripts/bench_night.py)", ""]
    publish(title + lines + ([old.strip("\n")] if old else []), "night.md", write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
