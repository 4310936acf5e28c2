"""The end-to-end benchmark: the classifier *and* the verifiers, as a night runs them, on labelled real
documents — how many of the classifier's own errors the verifiers stop, how often an accept is wrong,
and how many correct classifications are escalated for nothing.

    python scripts/bench_end_to_end.py [--corpora DIR] [--part test|tune|both] [--limit N]
                                       [--model M] [--judge-model M] [--admin-trap-whole-document]
                                       [--no-independent-reading] [--no-write] [--json]

The documents of a part (the committed splits ``docs/benchmarks/classifier_split.json`` and
``classifier_split_large.json``; nothing here was tuned on the test part):

* **single** — every labelled text of the part as one document (pages of about 3,000 characters);
* **multi** — PDFs of 2–3 documents of different types made of the part's texts (seeded);
* **hard** — PDFs of 2–4 documents where some parts are short: a one-page cover or form, a one-page
  report, a last page holding only a signature block (seeded; ``bench_classifier.make_hard_multidocs``).

Each document is classified (the offline classifier, or ``--model``), then verified, fixed and
verified again exactly as the nightly tasks do (:func:`docverify.pipeline.document.verify_document`, at most
two retries; ``--judge-model`` for the judgments, default ``--model``). A classification is **right**
when its dominant type is the text's label (single) or its segments are the true ones, types and page
ranges (multi, hard). Reported: the classifier's errors and the share the verifiers **stop** (not
AUTO_ACCEPT); the **false-accept rate** (accepted and wrong after the fixes, over the accepts) with
its 95 % Wilson interval; the share of **right classifications escalated**, and the codes that
escalated them; per type and per source.

Writes ``docs/benchmarks/end_to_end.md`` (offline, both parts, no limit, default policy).
Figures and record ids only: no corpus text is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import pathlib
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
for _p in (REPO / "plugins", REPO / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from scripts import verifier_bench as vb  # noqa: E402

from bench_verifiers import default_corpora, make_judge  # noqa: E402
from benchlib import publish  # noqa: E402
from docverify.domain import labelled_corpus  # noqa: E402

OUT_NAME = "end_to_end.md"
MULTI_SEED = 4242
MULTI_DOCS = 60
HARD_SEED = 4343
HARD_DOCS = 150
#: The targets of the test part (offline).
TARGET_STOPPED = 0.80
TARGET_CORRECT_ESCALATED = 0.05
TARGET_FALSE_ACCEPT = 0.01


@dataclass
class Doc:
    """One benchmark document: its bundle, its true segments, where it comes from."""

    bench: vb.BenchDoc
    kind: str  # single | multi | hard
    source: str  # the corpus of a single document; the kind of a multi-document PDF

    @property
    def truth(self) -> list[tuple[str, int, int]]:
        return [(t.doc_type, t.page_start, t.page_end) for t in self.bench.truth]

    @property
    def doc_type(self) -> str:
        """The label of a single document; ``mixed`` for a multi-document PDF."""
        return self.bench.truth[0].doc_type if self.kind == "single" else "mixed"


def part_records(corpora: pathlib.Path, part: str) -> list[dict[str, Any]]:
    """The labelled records of ``part`` (``tune`` or ``test``) of all three corpora."""
    return labelled_corpus.part_records(corpora, REPO, part)


def part_documents(records: list[dict[str, Any]], *, multi: int = MULTI_DOCS, hard: int = HARD_DOCS,
                   seed_offset: int = 0) -> list[Doc]:
    """The single documents, the multi-document PDFs and the hard ones of a part's records."""
    from bench_classifier import make_hard_multidocs

    by_id = {str(r["id"]): r for r in records}
    docs = [Doc(d, "single", str(by_id[d.source_ids[0]].get("corpus", "")))
            for d in vb.single_docs(records)]
    docs += [Doc(d, "multi", "multi") for d in vb.multi_docs(records, multi, MULTI_SEED + seed_offset)]
    for bundle, truth in make_hard_multidocs(records, hard, HARD_SEED + seed_offset):
        docs.append(Doc(vb.BenchDoc(bundle, [vb.TruthSegment(*t) for t in truth], []), "hard", "hard"))
    return docs


def spans(classification: dict[str, Any]) -> list[tuple[str, int, int]]:
    segs = sorted(classification.get("segments") or [], key=lambda s: (s.get("page_start", 0), s.get("page_end", 0)))
    return [(s.get("dominant_type"), s.get("page_start"), s.get("page_end")) for s in segs]


def is_right(doc: Doc, classification: dict[str, Any]) -> bool:
    """Single: the dominant type is the label and so is every segment's (a page of one clinical note called a
    Radiology Report is wrong in the record that would be written); multi/hard: the same segments (types and
    page ranges)."""
    if doc.kind == "single":
        label = doc.truth[0][0]
        return (classification.get("dominant_type_overall") == label
                and all(t == label for t, _, _ in spans(classification)))
    return spans(classification) == doc.truth


@dataclass
class Outcome:
    doc_id: str
    kind: str
    source: str
    doc_type: str
    right: bool  # the classifier's own output
    right_final: bool  # what would be written (after the fixes)
    decision: str
    rule: int | None
    deciding_codes: list[str] = field(default_factory=list)  # BLOCKER/MAJOR codes of the last attempt
    classify_s: float = 0.0
    verify_s: float = 0.0
    confidence: float | None = None


async def run_doc(doc: Doc, classifier, deps) -> Outcome:
    from docverify.pipeline.document import verify_document

    t0 = time.perf_counter()
    produced = await classifier.classify(doc.bench.bundle)
    raw = produced.classification.model_dump(mode="json")
    t1 = time.perf_counter()
    result = await verify_document(doc.bench.bundle, raw, deps, contain_faults=True)
    t2 = time.perf_counter()
    final = result.final_classification if isinstance(result.final_classification, dict) else raw
    last = result.attempts[-1].issues if result.attempts else []
    deciding = sorted({i.code for i in last if i.severity in ("BLOCKER", "MAJOR")})
    conf = (raw.get("self_evaluation") or {}).get("confidence")
    return Outcome(doc.bench.doc_id, doc.kind, doc.source, doc.doc_type, is_right(doc, raw), is_right(doc, final),
                   result.final_decision, result.final_rule, deciding, t1 - t0, t2 - t1,
                   conf if isinstance(conf, (int, float)) else None)


async def run_all(docs: list[Doc], classifier, deps, concurrency: int = 8) -> list[Outcome]:
    sem = asyncio.Semaphore(concurrency)

    async def one(d: Doc) -> Outcome:
        async with sem:
            return await run_doc(d, classifier, deps)

    return list(await asyncio.gather(*(one(d) for d in docs)))


# --------------------------------------------------------------------------- figures


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def figures(outcomes: list[Outcome]) -> dict[str, Any]:
    """The headline figures of a list of outcomes."""
    from docverify.reporting.audit_sample import wilson_interval

    n = len(outcomes)
    wrong = [o for o in outcomes if not o.right]
    stopped = [o for o in wrong if o.decision != "AUTO_ACCEPT"]
    accepted = [o for o in outcomes if o.decision == "AUTO_ACCEPT"]
    false_accepts = [o for o in accepted if not o.right_final]
    right = [o for o in outcomes if o.right]
    right_escalated = [o for o in right if o.decision != "AUTO_ACCEPT"]
    lo, hi = wilson_interval(len(false_accepts), len(accepted)) if accepted else (0.0, 1.0)
    return {
        "documents": n,
        "classifier_wrong": len(wrong), "stopped": len(stopped), "stopped_rate": _rate(len(stopped), len(wrong)),
        "accepted": len(accepted), "false_accepts": len(false_accepts),
        "false_accept_rate": _rate(len(false_accepts), len(accepted)), "false_accept_ci": [lo, hi],
        "right": len(right), "right_escalated": len(right_escalated),
        "right_escalated_rate": _rate(len(right_escalated), len(right)),
        "escalated_by_code": dict(Counter(c for o in right_escalated for c in o.deciding_codes).most_common()),
        "stopping_codes": dict(Counter(c for o in stopped for c in o.deciding_codes).most_common()),
        "missed": sorted(o.doc_id for o in wrong if o.decision == "AUTO_ACCEPT"),
    }


def grouped(outcomes: list[Outcome], key) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[key(o)].append(o)
    return {k: figures(v) for k, v in sorted(groups.items())}


def confidence_separation(outcomes: list[Outcome]) -> dict[str, Any]:
    """How well the classifier's confidence separates its errors (AUROC of confidence for "right")."""
    pairs = [(o.confidence, o.right) for o in outcomes if o.confidence is not None]
    pos = [c for c, r in pairs if r]
    neg = [c for c, r in pairs if not r]
    if not pos or not neg:
        return {"auroc": None, "wrong": len(neg)}
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return {"auroc": wins / (len(pos) * len(neg)), "wrong": len(neg),
            "wrong_confidence": [round(min(neg), 2), round(max(neg), 2)], "right_min": round(min(pos), 2)}


def summarise(name: str, outcomes: list[Outcome], seconds: float) -> dict[str, Any]:
    return {
        "part": name, "seconds": seconds,
        "all": figures(outcomes),
        "by_kind": grouped(outcomes, lambda o: o.kind),
        "by_type": grouped([o for o in outcomes if o.kind == "single"], lambda o: o.doc_type),
        "by_source": grouped(outcomes, lambda o: o.source),
        "confidence": confidence_separation(outcomes),
        "classify_ms": 1000 * sum(o.classify_s for o in outcomes) / max(1, len(outcomes)),
        "verify_ms": 1000 * sum(o.verify_s for o in outcomes) / max(1, len(outcomes)),
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _row(label: str, f: dict[str, Any]) -> str:
    lo, hi = f["false_accept_ci"]
    codes = ", ".join(f"`{c}` {k}" for c, k in list(f["escalated_by_code"].items())[:4]) or "–"
    return (f"| {label} | {f['documents']} | {f['classifier_wrong']} | {f['stopped']} ({_pct(f['stopped_rate'])}) | "
            f"{f['false_accepts']}/{f['accepted']} = {_pct(f['false_accept_rate'])} ({_pct(lo)}–{_pct(hi)}) | "
            f"{f['right_escalated']}/{f['right']} = {_pct(f['right_escalated_rate'])} | {codes} |")


HEAD = ("| | documents | classifier wrong | stopped by the verifiers | false accepts (95 % CI) | "
        "right but escalated | escalated by (right ones) |\n|---|---:|---:|---:|---:|---:|---|")


def targets_met(part: dict[str, Any]) -> bool:
    a = part["all"]
    return ((a["stopped_rate"] is None or a["stopped_rate"] >= TARGET_STOPPED)
            and (a["right_escalated_rate"] or 0) <= TARGET_CORRECT_ESCALATED
            and (a["false_accept_rate"] or 0) <= TARGET_FALSE_ACCEPT)


def render(parts: list[dict[str, Any]], meta: dict[str, str]) -> list[str]:
    lines = ["# End-to-end benchmark: the classifier's own errors, through the verifiers", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += [
        f"- documents of a part: every labelled text of the part as one document (single), {MULTI_DOCS} PDFs of "
        f"2–3 documents (multi, seed {MULTI_SEED} + part), {HARD_DOCS} harder PDFs of 2–4 documents with short "
        f"parts (hard, seed {HARD_SEED} + part); parts from the committed splits (`classifier_split.json`, "
        "`classifier_split_large.json`).",
        "- right: single: dominant type = label, and every segment's type too; multi/hard: the same segments (types and page ranges). Stopped: "
        "not AUTO_ACCEPT. False accept: accepted and wrong after the automatic fixes. Right but escalated: the "
        "classifier was right and a person is asked anyway.",
        f"- targets (test part, offline): ≥ {TARGET_STOPPED:.0%} of the classifier's errors stopped, ≤ "
        f"{TARGET_CORRECT_ESCALATED:.0%} of right classifications escalated, false-accept rate ≤ "
        f"{TARGET_FALSE_ACCEPT:.0%}.",
        "",
    ]
    for p in parts:
        a = p["all"]
        lines += [f"## {p['part']} part — {'targets met' if targets_met(p) else 'targets NOT met'}", "",
                  HEAD, _row("**all**", a)]
        lines += [_row(k, f) for k, f in p["by_kind"].items()]
        lines += ["", "### Single documents per type", "", HEAD]
        lines += [_row(k, f) for k, f in p["by_type"].items()]
        lines += ["", "### Per source", "", HEAD]
        lines += [_row(k, f) for k, f in p["by_source"].items()]
        c = p["confidence"]
        lines += ["", "### What stopped the errors, what escalated the right ones", "",
                  "- codes on the stopped errors: " + (", ".join(f"`{k}` {v}" for k, v in a["stopping_codes"].items())
                                                     or "–"),
                  "- codes on the right classifications escalated: "
                  + (", ".join(f"`{k}` {v}" for k, v in a["escalated_by_code"].items()) or "–"),
                  f"- errors accepted (missed): {len(a['missed'])}"
                  + (f" — {', '.join(a['missed'][:30])}" if a["missed"] else ""),
                  f"- the classifier's confidence against being right: AUROC {c['auroc']:.3f}" if c["auroc"] is not None
                  else "- the classifier's confidence: no errors to separate",
                  f"- time per document: classify {p['classify_ms']:.1f} ms, verify (all attempts) "
                  f"{p['verify_ms']:.1f} ms; part in {p['seconds']:.0f} s", ""]
    return lines


def without_independent_reading(judge):
    """The offline judge with V2's lexical judgment only (what the classifier-independent reading adds is
    measured against it)."""
    import dataclasses

    from docverify.judging.judges import OfflineJudge
    from docverify.verify import v2_consistency
    from docverify.verify.registry import REGISTRY, build

    if not isinstance(judge, OfflineJudge):
        raise SystemExit("--no-independent-reading measures the offline judge only")
    lexical = dataclasses.replace(REGISTRY["V2"], offline_judgment=v2_consistency.lexical_judgment)
    return OfflineJudge(build(lexical if s.agent == "V2" else s for s in REGISTRY))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--part", choices=("test", "tune", "both"), default="both")
    ap.add_argument("--limit", type=int, default=0, help="at most N documents per part (a sample for real endpoints)")
    ap.add_argument("--model", default="", help="the classifier's pydantic-ai model (default: the offline classifier)")
    ap.add_argument("--judge-model", default="", help="the judgments' model (default: --model, or offline)")
    ap.add_argument("--admin-trap-whole-document", action="store_true", help="V3 trap 2, strict reading")
    ap.add_argument("--no-independent-reading", action="store_true",
                    help="switch off V2's classifier-independent reading (to measure what it adds)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from docverify.domain.policy import VerifyPolicy
    from docverify.pipeline.document import VerifyDeps

    corpora = args.corpora or default_corpora()
    classifier = make_judge(args.model)
    judge = make_judge(args.judge_model or args.model)
    policy = VerifyPolicy.from_overrides({"admin_trap_per_segment": not args.admin_trap_whole_document})
    if args.no_independent_reading:
        judge = without_independent_reading(judge)
    deps = VerifyDeps(judge=judge, policy=policy)
    parts = []
    for name in ("tune", "test") if args.part == "both" else (args.part,):
        docs = part_documents(part_records(corpora, name), seed_offset=int(name == "test"))
        if args.limit:
            docs = docs[: args.limit]
        t0 = time.perf_counter()
        outcomes = asyncio.run(run_all(docs, classifier, deps))
        parts.append(summarise(name, outcomes, time.perf_counter() - t0))
    meta = {
        "date": _dt.date.today().isoformat(),
        "classifier": getattr(classifier, "classifier_id", classifier.name),
        "judge": judge.name + (f" (`{args.judge_model or args.model}`)" if (args.judge_model or args.model) else ""),
        "policy": ", ".join(f"`{k}={v}`" for k, v in policy.model_dump().items()),
    }
    if args.json:
        print(json.dumps(parts, indent=1))
    else:
        write = (not args.no_write and not args.model and not args.judge_model and not args.limit
                 and args.part == "both" and policy == VerifyPolicy() and not args.no_independent_reading)
        publish(render(parts, meta), OUT_NAME, write=write)
    test = next((p for p in parts if p["part"] == "test"), None)
    if test is not None:
        a = test["all"]
        print(f"test part: stopped {a['stopped']}/{a['classifier_wrong']}, false accepts "
              f"{a['false_accepts']}/{a['accepted']}, right escalated {a['right_escalated']}/{a['right']}: "
              f"{'targets met' if targets_met(test) else 'TARGETS NOT MET'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
