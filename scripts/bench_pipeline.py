"""Documents per minute of the whole domain pipeline on the embedded default (local parser,
offline classifier, V1–V5 with the retry loop), in one process, without Airflow.

    python scripts/bench_pipeline.py [--corpora DIR] [--repeat N]

Inputs: the sample batch (include/samples) and the 45 corpus PDFs. Prints a Markdown table and
writes docs/benchmarks/pipeline.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import pathlib
import platform
import resource
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from scripts.benchlib import publish  # noqa: E402

from docverify.judging.judges import OfflineJudge, Usage  # noqa: E402
from docverify.layout.errors import ParseError  # noqa: E402
from docverify.layout.pool import parse_many_bounded  # noqa: E402
from docverify.pipeline.document import verify_document  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    from scripts.support.corpora import default_corpora_dir

    ap.add_argument("--corpora", default=str(default_corpora_dir()))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    pdfs = sorted((ROOT / "include" / "samples").glob("*.pdf")) + sorted(pathlib.Path(args.corpora, "pdfs").glob("*.pdf"))
    companions = {p: p.with_suffix(".classification.json") for p in pdfs if p.with_suffix(".classification.json").exists()}
    judge = OfflineJudge()
    walls, parse_s, verify_s = [], [], []
    decisions, errors, usage = Counter(), Counter(), Usage()
    pages = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        parsed = dict(parse_many_bounded([str(p) for p in pdfs], workers=2, timeout_s=60))
        t1 = time.perf_counter()
        decisions.clear(), errors.clear()
        pages = 0

        async def verify_all(parsed=parsed):
            nonlocal pages
            for p in pdfs:
                res = parsed[str(p)]
                if isinstance(res, ParseError):
                    errors[res.code] += 1
                    continue
                pages += res.total_pages
                if p in companions:
                    cls = json.loads(companions[p].read_text())
                else:
                    cls = (await judge.classify(res)).classification
                result = await verify_document(res, cls, judge, usage=usage)
                decisions[result.final_decision + ("" if len(result.attempts) == 1 else " (after retry)")] += 1

        asyncio.run(verify_all())
        t2 = time.perf_counter()
        walls.append(t2 - t0), parse_s.append(t1 - t0), verify_s.append(t2 - t1)
    best = min(range(len(walls)), key=walls.__getitem__)
    n = len(pdfs)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        f"# Pipeline throughput (embedded default) — {dt.date.today()}",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; best of {args.repeat} runs; "
        f"`python scripts/bench_pipeline.py`.",
        "",
        "| documents | pages parsed | wall (s) | parse (s) | classify + V1–V5 (s) | documents / minute | peak RSS (MB) | LLM calls |",
        "|---|---|---|---|---|---|---|---|",
        f"| {n} | {pages} | {walls[best]:.2f} | {parse_s[best]:.2f} | {verify_s[best]:.2f} | {n / walls[best] * 60:.0f} | "
        f"{rss:.0f} | {usage.llm_calls} |",
        "",
        "Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(decisions.items()))
        + "; parse errors: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())),
        "",
        "Documents: the sample batch plus the 45 corpus PDFs (non-clinical ones included: they exercise the parser "
        "and the rules, their routes mean nothing clinically). Companion classifications are verified as given.",
    ]
    publish(lines, "pipeline.md", write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
