"""What the LLM path sends: requests per document, prompt sizes, the prefix one document's calls
share (what Gemini's context caching can reuse), and an estimated cost per 1,000 documents — on
the sample batch and the corpus PDFs, through the real google-genai client against the local fake
Gemini endpoint (tests/fake_gemini.py: the offline classifier behind the API, judgments with no
findings). Token counts are estimated as characters / 4 (the fake has no tokenizer); the prices
are genai-prices' list prices for the model named below.

    python scripts/bench_llm.py [--model gemini-2.5-flash] [--corpora DIR]

Writes docs/benchmarks/llm.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import pathlib
import statistics
import sys
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from scripts.benchlib import publish  # noqa: E402
from tests.fake_gemini import FakeGemini, request_kind, user_text  # noqa: E402

from docverify.judging.judges import Usage  # noqa: E402
from docverify.layout.errors import ParseError  # noqa: E402
from docverify.layout.pool import parse_many_bounded  # noqa: E402
from docverify.llm.cache import InMemoryVerdictCache  # noqa: E402
from docverify.llm.cost import estimate_cost, price_source  # noqa: E402
from docverify.llm.faults import BackoffRetry  # noqa: E402
from docverify.llm.judge import LLMJudge  # noqa: E402
from docverify.pipeline.document import verify_document  # noqa: E402


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _blocker_documents(fake, model, model_name: str) -> list[tuple[str, list[str], int, str]]:
    """LLM requests spent on documents that a rule phase already condemns (rule 1): the sample
    batch's BLOCKER companions, the worked examples and two V1 BLOCKERs."""
    from scripts.support.examples import genomic_then_note, mutate, spec_escalate, spec_fabricated

    from docverify.domain.models import ClassificationOutput
    from docverify.layout.local_pdf import parse_pdf
    from docverify.pipeline.document import rule_phases

    samples = ROOT / "include" / "samples"
    cases = []
    for name in ("quest_cbc_panel", "fabricated_evidence"):
        cases.append((name, parse_pdf(str(samples / f"{name}.pdf")),
                      json.loads((samples / f"{name}.classification.json").read_text())))
    cases += [("spec_escalate", *spec_escalate()), ("spec_fabricated", *spec_fabricated())]
    b, c = genomic_then_note()
    cases.append(("V1 confidence 1.7", b, mutate(c, lambda c: c["segments"][0]["classifications"][2].update(
        confidence=1.7))))
    cases.append(("V1 page beyond the document", b, mutate(c, lambda c: c["segments"][1].update(page_end=5,
                                                                                             segment_page_count=3))))
    rows = []
    for name, bundle, raw in cases:
        judge = LLMJudge(model, f"google:{model_name}", cache=InMemoryVerdictCache(),
                         retry_policy=BackoffRetry(2, 0.01, 0.02))
        cls = ClassificationOutput.model_validate(raw)
        codes = sorted({f"{i.agent} {i.code}" for issues in rule_phases(bundle, cls).values() for i in issues
                        if i.severity == "BLOCKER"})
        start = len(fake.requests)
        result = asyncio.run(verify_document(bundle, raw, judge))
        rows.append((name, codes, len(fake.requests) - start, result.final_decision))
    return rows


def main() -> int:
    from scripts.support.corpora import default_corpora_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemini-2.5-flash")
    ap.add_argument("--corpora", default=str(default_corpora_dir()))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    pdfs = sorted((ROOT / "include" / "samples").glob("*.pdf")) + sorted(pathlib.Path(args.corpora, "pdfs").rglob("*.pdf"))
    bundles = [r for _, r in parse_many_bounded([str(p) for p in pdfs], workers=2, timeout_s=60)
               if not isinstance(r, ParseError)]
    fake = FakeGemini().start()
    model = GoogleModel(args.model, provider=GoogleProvider(api_key="fake", base_url=fake.base_url))
    cache = InMemoryVerdictCache()
    judge = LLMJudge(model, f"google:{args.model}", cache=cache, retry_policy=BackoffRetry(2, 0.01, 0.02))

    async def run(bundle):
        usage = Usage()
        cls = (await judge.classify(bundle)).classification
        result = await verify_document(bundle, cls.model_dump(mode="json"), judge, usage=usage)
        return result, usage

    per_doc = defaultdict(list)
    results = []
    for b in bundles:
        start = len(fake.requests)
        results.append(asyncio.run(run(b)))
        per_doc[b.doc_id] = fake.requests[start:]
    again_before = len(fake.requests)
    for b in bundles:  # an unchanged re-run: every call is a verdict-cache hit
        asyncio.run(run(b))
    rerun_calls = len(fake.requests) - again_before
    blocker_rows = _blocker_documents(fake, model, args.model)
    fake.stop()

    calls = [len(reqs) for reqs in per_doc.values()]
    chars_in = [sum(len(user_text(body)) for _, body in reqs) for reqs in per_doc.values()]
    shared = []  # per document: the share of the judgment prompts' characters that repeat the classify prompt's prefix
    for reqs in per_doc.values():
        texts = {request_kind(body): user_text(body) for _, body in reqs}
        base = texts.get("classify", "")
        judg = [t for k, t in texts.items() if k != "classify"]
        if base and judg:
            shared.append(sum(_common_prefix(base, t) for t in judg) / sum(len(t) for t in judg))
    n = len(per_doc)
    total_in = sum(chars_in) // 4
    total_out = sum(len(json.dumps(body)) for reqs in per_doc.values() for _, body in reqs) // 40  # rough
    cost = estimate_cost(args.model, input_tokens=total_in, output_tokens=total_out)
    decisions = defaultdict(int)
    for result, _ in results:
        decisions[result.final_decision] += 1
    lines = [
        "# LLM path — requests, prompt sizes, shared prefix, estimated cost",
        "",
        f"Measured {dt.date.today()} by `scripts/bench_llm.py` ({os.cpu_count()} cores): {n} documents "
        f"({len(pdfs)} PDFs: the sample batch and the corpus PDFs that parse), the real google-genai "
        f"client against the local fake Gemini endpoint. Tokens ≈ characters / 4; output tokens are a "
        f"rough guess; prices: {price_source()} list prices for `{args.model}`.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| requests per document (classify + V2 + V3 + V4 + retries) | mean {statistics.mean(calls):.2f}, max {max(calls)}, min {min(calls)} |",
        f"| requests on an unchanged re-run | {rerun_calls} (verdict cache) |",
        f"| prompt characters per document (all requests) | median {int(statistics.median(chars_in)):,}, max {max(chars_in):,} |",
        f"| judgment prompt characters that repeat the classify prompt's prefix | median {statistics.median(shared):.0%} |",
        f"| estimated input tokens per document | {total_in // n:,} |",
        f"| estimated cost per 1,000 documents | {('$%.2f' % (cost.usd * 1000 / n)) if cost.usd is not None else 'n/a'} |",
        f"| decisions (fake judgments find nothing) | {dict(decisions)} |",
        "",
        "A document with 0 requests has the same text as an earlier one: its calls are cache hits "
        "(the key holds the inputs, not the doc id). "
        "The document text is the first part of every user prompt, so a judgment call repeats the "
        "classify call's prompt up to the end of the page text it shares; V3 reads only the first "
        "4,000 characters and V4 only the pages of segments with evidence, so their share is lower on "
        "long documents. pydantic-ai sends the output schema as a tool declaration that differs per "
        "call, so whether Gemini's implicit caching reuses the shared text depends on how the service "
        "orders tools and contents — to be measured against the real endpoint.",
    ]
    lines += [
        "",
        "## Documents whose attempt 0 has a rule BLOCKER (ADR 0007)",
        "",
        "Supplied classifications (no classify call), each verified with a fresh verdict cache; the "
        "count is every request to the fake endpoint while the document is verified (all attempts).",
        "",
        "| document | rule-phase BLOCKER(s) on attempt 0 | LLM requests | final |",
        "|---|---|---|---|",
        *[f"| {name} | {', '.join(codes)} | {n} | {final} |" for name, codes, n, final in blocker_rows],
        f"| **mean** | | **{statistics.mean(r[2] for r in blocker_rows):.2f}** | |",
    ]
    publish(lines, "llm.md", write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
