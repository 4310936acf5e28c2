"""Intake packets out of fold: the end-to-end figures of the tuning part, honestly held back.

    python scripts/cv_intake.py [--folds 3] [--packets 150] [--no-ocr] [--json]

On the tuning part the independent reader has read every form and every report the intake packets are
made of, so ``bench_end_to_end.py --part tune`` sees its own training material: the tuning part stops all
of its packets' errors while the test part stops 70 % (ADR 0049). To tune without looking at the test part,
this script splits the tuning records into ``--folds`` folds by source (a form's repository, a report's
source group), and for each fold trains the reader on the other folds (``train_independent_reader.train``,
same settings), builds intake packets from the fold's own forms and reports, and runs the classifier and
the verifiers on them as the benchmark does. The figures are summed over the folds.

What stays in-sample: the offline classifier (lexicon and its calibration are fitted on the whole tuning
part) and the form-layout rules; only the reader is held back. Nothing is written to the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import pathlib
import sys
import time
from typing import Any

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
for _p in (REPO / "plugins", REPO / "scripts", REPO):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import bench_end_to_end as e2e  # noqa: E402
import intake_packets as ip  # noqa: E402
import train_independent_reader as tir  # noqa: E402
from docverify.verify import independent as ind  # noqa: E402


def group_of(record: dict[str, Any]) -> str:
    """A record's source: a form's repository, a report's source group (never split across folds)."""
    if ip.is_form(record):
        return f"form:{record.get('source') or record['id']}"
    return f"report:{tir.source_group(record) if 'corpus' in record else record['id']}"


def fold_of(group: str, folds: int) -> int:
    return int(hashlib.sha256(group.encode()).hexdigest(), 16) % folds


CACHE = REPO / "build" / "cv_readers"


def training_code() -> bytes:
    """What a trained reader depends on: the training script, and the reader's code that turns a text into
    features and lengths (its tokens, hashing, letters and length classes, and the Reader it is loaded as) --
    not the verifiers' use of a reading (``disagreements`` and its thresholds' use), whose change needs no
    retrain."""
    parts = [pathlib.Path(tir.__file__).read_bytes()]
    parts += [inspect.getsource(f).encode() for f in (ind.tokens, ind._bucket, ind.features, ind.letters, ind.Reader)]
    parts.append(repr((ind.N_BUCKETS, ind._TOKEN.pattern, ind._LETTERS.pattern, ind.MIN_PAGE_LETTERS,
                       ind.SHORT_MIN_LETTERS, ind.TINY_MIN_LETTERS)).encode())
    return b"\0".join(parts)


def reader_key(records: list[dict[str, Any]]) -> str:
    """The cache key of a reader trained on ``records``: their ids and the code it is trained with
    (:func:`training_code`)."""
    h = hashlib.sha256()
    h.update(training_code())
    for rid in sorted(str(r["id"]) for r in records):
        h.update(rid.encode() + b"\0")
    return h.hexdigest()[:16]


def train_reader(records: list[dict[str, Any]]) -> ind.Reader:
    """The reader trained on ``records``, cached under build/cv_readers by the records' ids and the code it is
    trained with (a retrain takes minutes)."""
    out = CACHE / f"{reader_key(records)}.npz"
    if not out.exists():
        arrays, _ = tir.train_records(sorted(records, key=lambda r: str(r["id"])))
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            np.savez_compressed(fh, **arrays)
        tmp.replace(out)
    return ind.load(out)


async def details(doc: e2e.Doc, classifier: Any, deps: Any, reader: ind.Reader) -> dict[str, Any]:
    """What went wrong in one packet the verifiers accepted wrongly: its true and accepted segments, and each
    page whose type differs — its letters, whether it is a form (and OCR'd), the reader's reading."""
    from docverify.pipeline.document import verify_document

    raw = (await doc_classify(classifier, doc)).classification.model_dump(mode="json")
    result = await verify_document(doc.bench.bundle, raw, deps, contain_faults=True)
    final = result.final_classification if isinstance(result.final_classification, dict) else raw
    truth, pred = doc.truth, e2e.spans(final)

    pages = []
    for page in doc.bench.bundle.pages:
        t, p = e2e.type_at(truth, page.page_num) or "?", e2e.type_at(pred, page.page_num) or "?"
        starts_t = any(a == page.page_num for _, a, _ in truth)
        starts_p = any(a == page.page_num for _, a, _ in pred)
        if t != p or starts_t != starts_p:
            reading = reader.read(page.text)
            best = max(reading.probs, key=lambda k: reading.probs[k])
            pages.append({"page": page.page_num, "truth": t, "accepted": p, "truth_starts": starts_t,
                          "accepted_starts": starts_p, "letters": ind.letters(page.text),
                          "read_as": best, "p": round(reading.probs[best], 3),
                          "p_truth": round(reading.probs.get(t, 0.0), 3),
                          "familiarity": round(reading.familiarity, 3), "head": page.text[:160]})
    forms = [(f.position, f.kind, f.one_page) for f in doc.packet.forms] if doc.packet else []
    return {"doc_id": doc.bench.doc_id, "truth": truth, "accepted": pred, "ocr": bool(doc.packet and doc.packet.ocr),
            "forms": forms, "codes": sorted({i.code for a in result.attempts for i in a.issues}), "pages": pages}


async def doc_classify(classifier: Any, doc: e2e.Doc) -> Any:
    return await classifier.classify(doc.bench.bundle)


def run_fold(k: int, folds: int, records: list[dict[str, Any]], args: argparse.Namespace,
             classifier: Any, deps: Any) -> list[e2e.Outcome]:
    held = [r for r in records if fold_of(group_of(r), folds) == k]
    train = [r for r in records if fold_of(group_of(r), folds) != k]
    reader = train_reader(train)
    ind.default_reader = lambda: reader  # the verifiers read with the fold's reader
    offset = 10 + k  # packets of their own seeds, not the benchmark's
    ocr_pages = None
    if not args.no_ocr:
        ocr_pages, _ = e2e.scan_forms(held, offset)
    docs = e2e.part_documents(held, intake=args.packets, seed_offset=offset, kinds=args.kinds, ocr_pages=ocr_pages)
    forms = sum(ip.is_form(r) for r in held)
    print(f"fold {k}: {len(held)} records held back ({forms} forms), reader trained on {len(train)}; "
          f"{len(docs)} packets", file=sys.stderr)
    outcomes = asyncio.run(e2e.run_all(docs, classifier, deps))
    if args.details:
        missed = {o.doc_id for o in outcomes if o.false_accept}
        with args.details.open("a") as fh:
            for d in docs:
                if d.bench.doc_id in missed:
                    fh.write(json.dumps(asyncio.run(details(d, classifier, deps, reader))) + "\n")
    return outcomes


def _kinds(value: str) -> tuple[str, ...]:
    """``--kinds``: the benchmark's kinds named, in its order; an unknown name is an error, not an empty fold."""
    named = {x.strip() for x in value.split(",")}
    if named - set(e2e.KINDS):
        raise argparse.ArgumentTypeError(f"choose among {', '.join(e2e.KINDS)} (got {value!r})")
    return tuple(k for k in e2e.KINDS if k in named)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--packets", type=int, default=150, help="intake packets per fold")
    ap.add_argument("--no-ocr", action="store_true")
    ap.add_argument("--kinds", default="intake", type=_kinds,
                    help=f"comma-separated kinds of documents per fold ({', '.join(e2e.KINDS)}); default intake")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--details", type=pathlib.Path, default=None,
                    help="append one JSON line per false accept: its segments and the pages that differ (tuning data)")
    args = ap.parse_args(argv)
    from docverify.domain.policy import VerifyPolicy
    from docverify.pipeline.document import VerifyDeps

    records = e2e.part_records(args.corpora or e2e.default_corpora(), "tune")
    classifier = e2e.make_judge("")
    deps = VerifyDeps(judge=e2e.make_judge(""), policy=VerifyPolicy())
    t0 = time.perf_counter()
    outcomes: list[e2e.Outcome] = []
    for k in range(args.folds):
        outcomes += run_fold(k, args.folds, records, args, classifier, deps)
    summary = e2e.summarise("tune out of fold", outcomes, time.perf_counter() - t0)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print("\n".join(e2e.render([summary], {"folds": str(args.folds)}, args.kinds)))
    a = summary["all"]
    print(f"out of fold: wrong {a['classifier_wrong']}/{a['documents']}, stopped {a['stopped']} "
          f"({a['fixed']} fixed), false accepts {a['false_accepts']}/{a['accepted']}, right escalated "
          f"{a['right_escalated']}/{a['right']}, escalation precision {a['escalated_wrong']}/{a['escalations']}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
