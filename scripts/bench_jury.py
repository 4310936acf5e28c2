"""What the CR_V2 jury and the V5 second opinion cost in LLM requests per document — on the sample
batch and the corpus PDFs, through the real google-genai client against the local fake Gemini
endpoint (tests/fake_gemini.py: its jurors vote KEEP, its second opinion proposes AUTO_ACCEPT at
0.9, so routes do not change and the figures are pure call counts).

The findings put to the jury are those of the offline judgment phases (V2/V3/V4 judgments of the
embedded default): the fake's LLM judgments find nothing, so they would give the jury nothing to
review. The LLM judge's own requests (classify + V2 + V3 + V4, 3.79 per document) are in
docs/benchmarks/llm.md and add to these.

    python scripts/bench_jury.py [--corpora DIR] [--no-write]

Writes docs/benchmarks/jury.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import pathlib
import statistics
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from scripts.benchlib import publish  # noqa: E402
from tests.fake_gemini import FakeGemini, request_kind  # noqa: E402

from docverify.arbiters.jury import Juror, Jury  # noqa: E402
from docverify.arbiters.second_opinion import SecondOpinion  # noqa: E402
from docverify.judging.judges import OfflineJudge  # noqa: E402
from docverify.layout.errors import ParseError  # noqa: E402
from docverify.layout.pool import parse_many_bounded  # noqa: E402
from docverify.llm.cache import InMemoryVerdictCache  # noqa: E402
from docverify.llm.faults import BackoffRetry  # noqa: E402
from docverify.llm.judge import LLMJudge  # noqa: E402
from docverify.pipeline.document import VerifyDeps, verify_document  # noqa: E402


def main() -> int:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider
    from scripts.support.corpora import default_corpora_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", default=str(default_corpora_dir()))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    pdfs = sorted((ROOT / "include" / "samples").glob("*.pdf")) + sorted(pathlib.Path(args.corpora, "pdfs").rglob("*.pdf"))
    bundles = [r for _, r in parse_many_bounded([str(p) for p in pdfs], workers=2, timeout_s=60)
               if not isinstance(r, ParseError)]
    fake = FakeGemini().start()
    classifications = {b.doc_id: asyncio.run(OfflineJudge().classify(b)).classification.model_dump(mode="json")
                       for b in bundles}

    def llm(model_name: str) -> LLMJudge:
        model = GoogleModel(model_name, provider=GoogleProvider(api_key="fake", base_url=fake.base_url))
        return LLMJudge(model, f"google:{model_name}", cache=InMemoryVerdictCache(),
                        retry_policy=BackoffRetry(2, 0.01, 0.02))

    def judge(jury: str, second: bool) -> VerifyDeps:
        the_jury = None
        if jury == "shared":  # the default: all three on one connection (A and B share one call)
            m = llm("gemini-2.5-flash")
            the_jury = Jury([Juror("A", m), Juror("B", m), Juror("C", m, "JURY_EVIDENCE")])
        elif jury == "three":  # three connections (docverify_jury_conn_ids), as in Verga et al.
            the_jury = Jury([Juror("A", llm("gemini-2.5-flash")), Juror("B", llm("gemini-2.5-flash-lite")),
                             Juror("C", llm("gemini-2.0-flash"), "JURY_EVIDENCE")])
        return VerifyDeps(OfflineJudge(), jury=the_jury,
                          second_opinion=SecondOpinion(llm("gemini-2.5-flash")) if second else None)

    def run(j: VerifyDeps) -> tuple[list[int], Counter, Counter, int]:
        per_doc, kinds, actions = [], Counter(), Counter()
        for b in bundles:
            start = len(fake.requests)
            res = asyncio.run(verify_document(b, classifications[b.doc_id], j))
            per_doc.append(len(fake.requests) - start)
            kinds.update(request_kind(body) for _, body in fake.requests[start:])
            for a in res.attempts:
                for r in a.runs:
                    if r.phase == "jury":
                        actions.update(v["final_action"] for v in r.votes or [])
        findings = sum(actions.values())
        return per_doc, kinds, actions, findings

    rows = []
    for label, jury, second in (("offline judgments, no jury, no second opinion (embedded default)", "", False),
                                ("+ jury, one connection (A and B share a call)", "shared", False),
                                ("+ jury, three connections", "three", False),
                                ("+ V5 second opinion only", "", True),
                                ("+ jury (one connection) + second opinion", "shared", True)):
        j = judge(jury, second)
        per_doc, kinds, actions, findings = run(j)
        rerun, _, _, _ = run(j)  # the same judge again: every call a verdict-cache hit
        rows.append((label, statistics.mean(per_doc), max(per_doc), sum(rerun), dict(kinds), findings, dict(actions)))
    fake.stop()

    n = len(bundles)
    lines = [
        "# CR_V2 jury and V5 second opinion — LLM requests per document",
        "",
        f"Measured {dt.date.today()} by `scripts/bench_jury.py` ({os.cpu_count()} cores): {n} documents "
        f"({len(pdfs)} PDFs: the sample batch and the corpus PDFs that parse; offline classifications), "
        "the real google-genai client against the local fake Gemini endpoint (jurors vote KEEP, the second "
        "opinion proposes AUTO_ACCEPT 0.9). The findings the jury reviews are the offline judgment phases' "
        "(the fake's LLM judgments find none); the LLM judge's own requests (mean 3.79 per document, "
        "docs/benchmarks/llm.md) add to these.",
        "",
        "| configuration | requests per document (mean, max) | requests on a re-run | findings reviewed | requests by kind |",
        "|---|---|---|---|---|",
    ]
    for label, mean, mx, rerun, kinds, findings, _ in rows:
        lines.append(f"| {label} | {mean:.2f}, {mx} | {rerun} | {findings} ({findings / n:.2f} per document) | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or '-'} |")
    lines += [
        "",
        "A reviewed finding costs one request per distinct juror (model + prompt): 2 with one connection "
        "(A and B ask the same model the same question, so they share the answer — and vote alike), 3 with "
        "three connections. Findings of a retry attempt are reviewed again only when the classification the "
        "judgment reads changed (share fixes do not change it: cache hits). The second opinion costs one "
        "request per accept/retry decision of each attempt (an escalation is not asked).",
    ]
    publish(lines, "jury.md", write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
