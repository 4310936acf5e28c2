"""Write docs/benchmarks/suite.md — the one place for the suite's changing figures (test counts, how
long `make test` took, on which commit) — from the log of a `make test` run, so the README, the
testing page and the benchmarks page link here instead of repeating numbers by hand.

    git clone . /tmp/x && cd /tmp/x && { time make test ; } > /tmp/make_test.log 2>&1
    python scripts/record_suite.py /tmp/make_test.log --commit $(git -C /tmp/x rev-parse --short HEAD)

The log is read for pytest's summary lines (`N passed, M deselected in S s (h:mm:ss)`, one per pytest
run of the target, in order) and the shell's `real` line; a log without a passing summary is refused
(exit 2): only a green run is recorded. Earlier runs stay below the newest, ten at most."""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts.benchlib import BENCHMARKS, publish  # noqa: E402

PAGE = "suite.md"
KEEP = 10
SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in (?P<secs>[\d.]+)s", re.M)
REAL = re.compile(r"^real\s+(?:(\d+)m)?([\d.]+)s", re.M)
HEAD = ["| date | commit | tests passed | first run (both cores) | real-stack run (one at a time) | `make test` wall |",
        "|---|---|---:|---|---|---|"]


def minutes(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s"


def parse(log: str) -> dict:
    runs = []
    for m in SUMMARY.finditer(log):
        counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", m["body"])}
        runs.append({"counts": counts, "seconds": float(m["secs"])})
    if not runs or any(r["counts"].get("failed") or r["counts"].get("error") or r["counts"].get("errors")
                       or not r["counts"].get("passed") for r in runs):
        raise ValueError("no green pytest summary in the log (a failed or empty run is not recorded)")
    real = REAL.search(log)
    wall = (int(real[1] or 0) * 60 + float(real[2])) if real else None
    return {"runs": runs, "wall": wall, "passed": sum(r["counts"]["passed"] for r in runs)}


def row(date: str, commit: str, got: dict) -> str:
    first = got["runs"][0]
    second = got["runs"][1] if len(got["runs"]) > 1 else None
    return (f"| {date} | {commit} | {got['passed']:,} | {first['counts']['passed']:,} in {minutes(first['seconds'])} | "
            + (f"{second['counts']['passed']:,} in {minutes(second['seconds'])}" if second else "—")
            + f" | {minutes(got['wall']) if got['wall'] is not None else '—'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=pathlib.Path, help="the output of `{ time make test ; }` (stdout and stderr)")
    ap.add_argument("--commit", required=True, help="the commit the clean clone was made from")
    ap.add_argument("--date", default=dt.date.today().isoformat())
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    try:
        got = parse(args.log.read_text(errors="replace"))
    except (OSError, ValueError) as exc:
        print(f"{args.log}: {exc}", file=sys.stderr)
        return 2
    page = BENCHMARKS / PAGE
    older = []
    if page.exists():
        older = [ln for ln in page.read_text().splitlines() if re.match(r"^\| \d{4}-\d\d-\d\d \|", ln)]
    rows = [row(args.date, args.commit, got), *[ln for ln in older if f"| {args.commit} |" not in ln]][:KEEP]
    lines = ["# The suite: `make test` from a clean clone (scripts/record_suite.py)", "",
             "Written by `scripts/record_suite.py` from the log of `make test` run on a fresh clone "
             "(`git clone . /tmp/x && cd /tmp/x && make test`) on this repository's 2-core machine, often "
             "shared with other work; the newest run first. The first run is everything but the real-stack "
             "tests on both cores (`pytest -m \"not e2e\" -n 2`), the second the real Airflow stacks and "
             "browsers one at a time (`pytest -m e2e`); the wall includes building the venv and the "
             "apt checks.", "", *HEAD, *rows]
    publish(lines, PAGE, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
