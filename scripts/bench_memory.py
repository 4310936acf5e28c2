"""Memory of the idle Airflow process tree (ADR 0017): the components of `make up`
(scheduler with its LocalExecutor workers, dag-processor with its parsing processes, api-server,
triggerer) started by scripts/airflow_stack.py, left idle, then measured with psutil: the number
of processes, the sum of their RSS (counts pages shared between forked processes once per
process, so it overstates) and of their PSS (shared pages divided among the processes sharing
them: what the tree really costs the machine).

    python scripts/bench_memory.py                 # the defaults vs the local setup's settings

Two configurations: Airflow's defaults as `make up` ran them before (LocalExecutor parallelism
32 — with fork it starts all 32 workers at once —, dag-processor parsing_processes 2, one
api-server worker) and the settings scripts/write_airflow_cfg.py now writes (see SETTINGS there).
Writes docs/benchmarks/memory.md via scripts/benchlib.publish (``--no-write``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pathlib
import shutil
import sys
import tempfile
import time

import psutil

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts.airflow_stack import AirflowStack  # noqa: E402
from scripts.benchlib import publish  # noqa: E402
from scripts.write_airflow_cfg import LEAN_DEFAULTS  # noqa: E402


def measure(stack: AirflowStack) -> dict:
    n = rss = pss = 0
    by: dict[str, list[int]] = {}
    for name, proc in stack.procs.items():
        try:
            parent = psutil.Process(proc.pid)
            procs = [parent] + parent.children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in procs:
            try:
                mem = p.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            n += 1
            rss += mem.rss
            pss += mem.pss
            by.setdefault(name, [0, 0, 0])
            by[name][0] += 1
            by[name][1] += mem.rss
            by[name][2] += mem.pss
    return {"processes": n, "rss_mb": rss / 2**20, "pss_mb": pss / 2**20,
            "by": {k: (v[0], v[1] / 2**20, v[2] / 2**20) for k, v in by.items()}}


def idle(parallelism: int, env: dict[str, str], settle_s: float) -> dict:
    work = pathlib.Path(tempfile.mkdtemp(prefix="docverify-bench-memory-"))
    stack = AirflowStack(work / "home", work / "store", env=env, parallelism=parallelism)
    try:
        stack.start()
        time.sleep(settle_s)
        return measure(stack)
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=float, default=60.0, help="seconds idle before measuring")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    local = {f"AIRFLOW__{s.upper()}__{k.upper()}": v for s, vals in LEAN_DEFAULTS.items() for k, v in vals.items()}
    configs = [
        ("Airflow defaults (make up before ADR 0017's lean defaults)", 32,
         {"AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "2", "AIRFLOW__API__WORKERS": "1"}),
        ("scripts/write_airflow_cfg.py now", int(local.pop("AIRFLOW__CORE__PARALLELISM", "32")), local),
    ]
    rows = []
    for label, parallelism, env in configs:
        r = idle(parallelism, env, args.settle)
        rows.append((label, parallelism, env, r))
        print(label, r, flush=True)
    lines = ["# Memory of the idle Airflow process tree", "",
             f"`python scripts/bench_memory.py` on {dt.date.today().isoformat()}, {os.cpu_count()} cores (shared with "
             f"other sessions' work: figures taken under contention), Airflow components of scripts/airflow_stack.py "
             f"(as `airflow standalone` runs them), idle {args.settle:.0f} s after they report healthy. PSS divides "
             "pages shared between forked processes among them; RSS counts them in every process.", "",
             "| configuration | settings | processes | RSS sum (MB) | PSS sum (MB) | PSS by component (MB) |",
             "|---|---|---|---|---|---|"]
    for label, parallelism, env, r in rows:
        settings = ", ".join([f"parallelism {parallelism}"] + [f"{k.removeprefix('AIRFLOW__').lower()}={v}"
                                                               for k, v in env.items()])
        comp = ", ".join(f"{k} {v[2]:.0f} ({v[0]} proc.)" for k, v in sorted(r["by"].items()))
        lines.append(f"| {label} | {settings} | {r['processes']} | {r['rss_mb']:.0f} | {r['pss_mb']:.0f} | {comp} |")
    publish(lines, "memory.md", write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
