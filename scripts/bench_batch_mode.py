"""Batch mode (ADR 0016, Variable ``docverify_llm_mode``) against online mode on the same night: the
sample batch (and, with ``--corpora``, the corpus PDFs under ``<DIR>/pdfs``) through the nightly stages in one process,
the LLM judge on the real google-genai client against the local fake Gemini endpoint
(tests/fake_gemini.py: the offline classifier behind the API, judgments with no findings) and its
fake Batch API (upload, create, poll, results file) through the Google provider's
``GenAIGeminiAPIHook``. Reports requests, batch jobs, verify's online calls, routes (equal or not),
and the estimated cost of each mode: online at genai-prices' list prices, batch at its batch
prices. Token counts are the fake's (characters / 4: not a tokenizer), so the cost figures are
estimates of the ratio, not of a bill; the fake's batch job finishes at once (a real one takes up to
24 hours), so the walls say nothing about a real night's latency.

    python scripts/bench_batch_mode.py [--corpora DIR] [--no-write]

Writes docs/benchmarks/batch_mode.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from scripts.benchlib import publish  # noqa: E402
from tests.batch_stages import llm_batch_rounds, run_stages  # noqa: E402
from tests.fake_gemini import FakeGemini  # noqa: E402

from docverify.llm.cache import VerdictCache  # noqa: E402
from docverify.llm.faults import BackoffRetry  # noqa: E402
from docverify.llm.judge import LLMJudge  # noqa: E402
from docverify.reporting import report  # noqa: E402
from docverify.stages.common import Batch  # noqa: E402
from docverify.storage.store import ArtifactStore  # noqa: E402

DS = "2026-11-24"


def judge_on(fake: FakeGemini, store: ArtifactStore) -> LLMJudge:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    return LLMJudge(model, "google:gemini-2.5-flash", cache=VerdictCache(store),
                    retry_policy=BackoffRetry(max_attempts=2, initial_wait_s=0.01, max_wait_s=0.02))


def night(root: pathlib.Path, corpora: pathlib.Path | None) -> Batch:
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True)
    for f in (ROOT / "include" / "samples").iterdir():
        if f.suffix == ".pdf" or f.name.endswith(".classification.json"):
            shutil.copy(f, incoming / f.name)
    if corpora is not None:
        if not (corpora / "pdfs").is_dir():
            raise SystemExit(f"{corpora}/pdfs: no such folder (--corpora names the shared corpora)")
        for f in sorted((corpora / "pdfs").rglob("*.pdf")):
            shutil.copy(f, incoming / f"corpus_{f.stem}.pdf")
    return Batch(store=ArtifactStore(root), ds=DS, run_id="bench-batch")


def run(mode: str, root: pathlib.Path, corpora, fail_fraction: float = 0.0) -> dict:
    fake = FakeGemini(keep_bodies=False).start()
    fake.batch_fail_fraction = fail_fraction
    os.environ["GOOGLE_GEMINI_BASE_URL"] = fake.base_url
    try:
        b = night(root, corpora)
        judge = judge_on(fake, b.store)
        t0 = time.perf_counter()
        run_stages(b, judge, shard_size=25, before_verify=llm_batch_rounds(judge) if mode == "batch" else None)
        wall = time.perf_counter() - t0
        report.write(b)
        rep = json.loads(b.store.read_bytes(f"reports/{DS}/batch_report.json"))
        verify_calls = sum(s["llm"]["calls"] for s in b.fresh().rs.stages() if s["stage"] == "verify")
        return {"mode": mode, "fail": fail_fraction, "wall": wall, "rep": rep, "verify_calls": verify_calls,
                "online_requests": fake.count, "jobs": fake.batch_jobs, "items": fake.batch_items}
    finally:
        fake.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None,
                    help="also the PDFs under <DIR>/pdfs (the shared corpora, e.g. ../shared/corpora)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        runs = [run("online", tmp / "online", args.corpora), run("batch", tmp / "batch", args.corpora),
                run("batch", tmp / "batch-fail", args.corpora, fail_fraction=0.1)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def routes(r):
        return {d["doc_id"]: (d["final_decision"], d.get("error")) for d in r["rep"]["per_document"]}

    base = runs[0]
    lines = [f"# Batch mode against online mode ({dt.date.today().isoformat()})", "",
             f"`python scripts/bench_batch_mode.py{' --corpora ' + str(args.corpora) if args.corpora else ''}`: "
             f"{base['rep']['documents']} documents, in-process stages, real google-genai client and the "
             "provider's GenAIGeminiAPIHook against tests/fake_gemini.py (tokens = characters / 4; the fake's "
             "batch jobs finish at once). Cost: genai-prices "
             f"({base['rep']['llm']['price_source']}) list prices online, its batch prices for requests a batch "
             "job answered.", "",
             "| mode | batch items failed | batch jobs | requests sent to batch jobs | answered by a job | verify's online calls | input / output tokens | estimated cost | same routes as online | wall |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        llm = r["rep"]["llm"]
        b = llm.get("batch") or {}
        toks = (f"{llm['input_tokens'] + b.get('input_tokens', 0):,} / {llm['output_tokens'] + b.get('output_tokens', 0):,}")
        lines.append(f"| {llm['mode']} | {r['fail']:.0%} | {r['jobs']} | {b.get('requests', 0)} | {b.get('succeeded', 0)} | "
                     f"{r['verify_calls']} | {toks} | ${llm['cost_usd']:.4f} | "
                     f"{'yes' if routes(r) == routes(base) else 'NO'} | {r['wall']:.1f} s |")
    batch = runs[1]["rep"]["llm"]
    ratio = batch["cost_usd"] / base["rep"]["llm"]["cost_usd"] if base["rep"]["llm"]["cost_usd"] else float("nan")
    lines += ["", f"Batch / online cost on this night: **{ratio:.2f}** ({batch['batch']['cost_note']}). Online, "
              "documents with identical content (the same verdict-cache key) miss the cache concurrently and each "
              "makes its calls; batch mode sends such a request once, so it can send fewer requests than online "
              "makes calls. Verify's online calls in batch mode are the requests no job answered.", ""]
    publish(lines, "batch_mode.md", write=not args.no_write)


if __name__ == "__main__":
    main()
