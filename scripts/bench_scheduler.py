"""A night under the real scheduler, measured: the sample batch (and an N-document night) run
once by the Airflow components of scripts/airflow_stack.py (scheduler, dag-processor,
api-server, triggerer; LocalExecutor) and once by `airflow dags test` in the same Airflow home,
on fresh storage roots (nothing cached).

    python scripts/bench_scheduler.py                 # the 13-document sample night
    python scripts/bench_scheduler.py --documents 300 # + a 300-document night (samples repeated)

Reported per night: wall from the run's start to its end (the api's start_date/end_date; for
`dags test` the command's wall), task instances, CPU seconds of every Airflow process (the
components, their workers and the task processes they reaped; sampled from /proc before and
after), and the peak RSS of the Airflow process tree. Writes docs/benchmarks/scheduler.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts.airflow_stack import AirflowStack  # noqa: E402

SAMPLES = REPO / "include" / "samples"
DAG = "clinical_doc_verification"


def fill(root: pathlib.Path, ds: str, n: int) -> int:
    """``n`` documents under incoming/<ds>/: the sample batch, repeated under new names (each copy
    a distinct file; companions follow their PDF)."""
    incoming = root / "incoming" / ds
    incoming.mkdir(parents=True, exist_ok=True)
    pdfs = sorted(SAMPLES.glob("*.pdf"))
    count = 0
    for i in range(n):
        src = pdfs[i % len(pdfs)]
        copy = i // len(pdfs)
        stem = src.stem if copy == 0 else f"{src.stem}__{copy:04d}"
        shutil.copy2(src, incoming / f"{stem}.pdf")
        companion = src.with_name(src.stem + ".classification.json")
        if companion.exists():
            shutil.copy2(companion, incoming / f"{stem}.classification.json")
        count += 1
    return count


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            continue
    return total


class PeakRSS(threading.Thread):
    def __init__(self, pids_fn):
        super().__init__(daemon=True)
        self.pids_fn, self.peak, self.stop = pids_fn, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            rss = 0
            for pid in self.pids_fn():
                try:
                    rss += psutil.Process(pid).memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            self.peak = max(self.peak, rss)
            time.sleep(0.5)


def under_scheduler(stack: AirflowStack, ds: str, conf: dict | None = None) -> dict:
    before = cpu_seconds(stack.pids())
    rss = PeakRSS(stack.pids)
    rss.start()
    t0 = time.monotonic()
    run_id = stack.trigger(DAG, logical_date=f"{ds}T03:00:00Z", conf=conf)
    run = stack.wait_for_run(DAG, run_id, timeout=3600)
    elapsed = time.monotonic() - t0
    rss.stop.set()
    rss.join()
    tis = stack.task_instances(DAG, run_id)
    start = dt.datetime.fromisoformat(run["start_date"].replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(run["end_date"].replace("Z", "+00:00"))
    durations = sorted(((ti["duration"] or 0.0), ti["task_id"]) for ti in tis)
    # orchestration: the time no task of the run was executing (waiting for the scheduler, the
    # executor and task start-up), from the union of the task instances' [start, end] intervals
    spans = sorted((dt.datetime.fromisoformat(ti["start_date"].replace("Z", "+00:00")),
                    dt.datetime.fromisoformat(ti["end_date"].replace("Z", "+00:00")))
                   for ti in tis if ti.get("start_date") and ti.get("end_date"))
    busy, cur_s, cur_e = 0.0, None, None
    for a, b in spans:
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                busy += (cur_e - cur_s).total_seconds()
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        busy += (cur_e - cur_s).total_seconds()
    return {"run_id": run_id, "state": run["state"], "wall_s": (end - start).total_seconds(), "trigger_to_done_s": elapsed,
            "task_instances": len(tis), "cpu_s": cpu_seconds(stack.pids()) - before,
            "peak_rss_mb": rss.peak / 2**20,
            "task_seconds": sum(d for d, _ in durations),
            "idle_s": (end - start).total_seconds() - busy,
            "slowest": [f"{t} {d:.1f}s" for d, t in durations[-3:]]}


def dags_test(stack: AirflowStack, ds: str) -> dict:
    env = {**stack.env, "DOCVERIFY_DEADLINE_MINUTES": "0"}  # `dags test` cannot run a Dag with a DeadlineAlert
    mine = psutil.Process().cpu_times()
    before = mine.children_user + mine.children_system
    t0 = time.monotonic()
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "airflow"), "dags", "test", DAG,
                           f"{ds}T03:00:00+00:00"], env=env, capture_output=True, text=True, cwd=stack.home)
    wall = time.monotonic() - t0
    usage = psutil.Process().cpu_times()
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-5000:], file=sys.stderr)
    return {"state": "success" if proc.returncode == 0 else f"failed ({proc.returncode})", "wall_s": wall,
            "cpu_s": usage.children_user + usage.children_system - before}


def night_rows(stack: AirflowStack, sizes: list[int], first: dt.date, how: str, measure) -> list[tuple]:
    """One night per size, on consecutive dates from ``first``, each measured by ``measure``."""
    rows = []
    for i, n in enumerate(sizes):
        ds = (first + dt.timedelta(days=i)).isoformat()
        fill(stack.storage_root, ds, n)
        result = measure(stack, ds)
        rows.append((n, how, result))
        print(n, how, result, flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, nargs="*", default=[13], help="night sizes (13 = the sample batch)")
    ap.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "scheduler.md"))
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="docverify-bench-scheduler-"))
    rows = []
    try:
        stack = AirflowStack(work / "home", work / "store")
        stack.start()
        try:
            stack.unpause(DAG)  # the scheduler creates today's (empty) scheduled run: let it finish first,
            deadline = time.monotonic() + 600  # else the measured night waits behind it (max_active_runs=1)
            while time.monotonic() < deadline and not (
                    (runs := stack.runs(DAG)) and all(r["state"] in ("success", "failed") for r in runs)):
                time.sleep(1)
            rows += night_rows(stack, args.documents, dt.date(2026, 11, 1), "scheduler (LocalExecutor)",
                               under_scheduler)
        finally:
            stack.stop()
        rows += night_rows(stack, args.documents, dt.date(2026, 11, 15), "airflow dags test", dags_test)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = ["# A night under the scheduler vs `airflow dags test`", "",
             f"Measured by `python scripts/bench_scheduler.py --documents {' '.join(map(str, args.documents))}` on "
             f"{os.cpu_count()} cores, {dt.date.today().isoformat()}, fresh storage roots (nothing cached), the "
             "embedded default (local parser, offline judgments). Scheduler: scheduler, dag-processor, "
             "api-server (1 worker) and triggerer started by scripts/airflow_stack.py, LocalExecutor, parallelism 8. "
             "Wall: the run's start_date → end_date from the REST API (`dags test`: the command). CPU: every "
             "Airflow process and the task processes they reaped.", "",
             "| documents | how | state | run wall (s) | trigger → done (s) | no task running (s) | task instances | CPU (s) | peak RSS of Airflow (MB) | slowest tasks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n, how, r in rows:
        lines.append(f"| {n} | {how} | {r['state']} | {r['wall_s']:.1f} | {r['trigger_to_done_s']:.1f} | "
                     f"{r['idle_s']:.1f} | {r['task_instances']} | "
                     f"{r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} | {', '.join(r['slowest'])} |"
                     if "task_instances" in r else
                     f"| {n} | {how} | {r['state']} | {r['wall_s']:.1f} | {r['wall_s']:.1f} | – | – | {r['cpu_s']:.1f} | – | – |")
    for n in args.documents:
        s = next(r for m, h, r in rows if m == n and h.startswith("scheduler"))
        t = next(r for m, h, r in rows if m == n and h.startswith("airflow"))
        lines.append("")
        lines.append(f"{n} documents: the scheduler night takes {s['wall_s'] / t['wall_s']:.2f}× the wall of "
                     f"`airflow dags test` from the run's start to its end, {s['trigger_to_done_s'] / t['wall_s']:.2f}× "
                     f"from the trigger (REST API) to done (`dags test`: the whole command, start-up included).")
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
