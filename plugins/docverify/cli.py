"""``python -m docverify`` — the domain core from the command line.

    parse FILE.pdf                         → DocumentBundle JSON (errors: JSON + exit code 2)
    parse DOCAI.json | SHARDS_FOLDER/      → the same from Document AI output (Layout Parser or OCR)
    classify BUNDLE.json                   → ClassificationOutput (offline unless --model is given)
    verify --bundle B --classification C   → {"final_decision", "attempts", "fixes_applied", …}
           [--blocker-repair] [--no-patient-identity] [--min-primary-confidence X] [--no-label-text-guard]
    arbiter ISSUES.json                    → ArbiterDecision (V5; --kind v5 is the default)
    arbiter --kind cr_v2 VOTES.json        → the CR_V2 vote per item (--cr-version v1 for CR v1)
    arbiter --kind decision STATE.json     → {"decision": FraudDecision, …} (--model for the LLM, else fallback)
    evaluate --root ROOT [--corpus DIR]    → feedback figures: SME ground truth vs primary (text; --json)
    trace DOC_ID --root ROOT [--json]      → one document's trail across nights and Dags (text; --json)

Every failure prints one JSON object ``{"error": CODE, "message": …, "file": …}`` on stdout and
exits with 2: never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sys
from collections.abc import Callable
from typing import Any

from docverify.arbiters.cr_vote import VoteInputError, arbiter_vote, arbiter_vote_all
from docverify.arbiters.fraud_decision import decision_arbiter_agent, validate_state
from docverify.arbiters.v5 import decide
from docverify.domain.models import DocumentBundle, Issue
from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
from docverify.judging.judges import Judge, OfflineJudge
from docverify.layout import docai
from docverify.layout.errors import ParseError
from docverify.layout.pool import parse_pdf_bounded
from docverify.pipeline.document import VerifyDeps, verify_document
from docverify.reporting import evaluate_render
from docverify.reporting.evaluate import evaluate_labelled_corpus, evaluate_store
from docverify.reporting.labelled_sample import CorpusNotFound
from docverify.reporting.outputs import write_outcome
from docverify.reporting.trace import UnknownDocument, document_trace, render_text
from docverify.storage.limits import (
    MAX_COMPANION_BYTES,
    MAX_DOCAI_JSON_BYTES,
    InputError,
    check_classification_shape,
    check_size,
    load_json_object,
)
from docverify.storage.paths import doc_id_for, printable_name
from docverify.storage.store import ArtifactStore, to_jsonable

EXIT_INPUT_ERROR = 2


class CLIError(Exception):
    def __init__(self, code: str, message: str, file: str = ""):
        super().__init__(message)
        self.code, self.message, self.file = code, message, file

    def to_dict(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message, "file": self.file}


def _emit(obj: object) -> None:
    text = json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):  # a path that is not text (a lone surrogate): escaped
        text = json.dumps(to_jsonable(obj), indent=2, ensure_ascii=True)
    sys.stdout.write(text + "\n")


def _read_json(path: str, what: str, *, require_object: bool = False) -> Any:
    """A JSON input within ``docverify.storage.limits`` (size checked before the read, nesting, finite
    numbers); a refusal is the CLI's JSON error with the limit's code, never a traceback. The
    message names the file and the limit, never the file's content."""
    p = pathlib.Path(path)
    if not p.is_file():
        raise CLIError("FILE_NOT_FOUND", f"{what} file {path} does not exist", path)
    try:
        check_size(p.stat().st_size, MAX_DOCAI_JSON_BYTES, path, what)
        return load_json_object(p.read_bytes(), path, what, max_bytes=MAX_DOCAI_JSON_BYTES,
                                require_object=require_object)
    except InputError as exc:
        code = "INVALID_JSON" if exc.code == "INPUT_INVALID_JSON" else exc.code
        raise CLIError(code, exc.message, path) from None


def _read_classification(path: str) -> dict[str, Any]:
    """A classification file within every limit of a companion classification (a JSON object,
    segments, nesting, numbers)."""
    p = pathlib.Path(path)
    if p.is_file():
        try:
            check_size(p.stat().st_size, MAX_COMPANION_BYTES, path, "classification")
        except InputError as exc:
            raise CLIError(exc.code, exc.message, path) from None
    raw = _read_json(path, "classification", require_object=True)
    try:
        return check_classification_shape(raw, path)
    except InputError as exc:
        raise CLIError(exc.code, exc.message, path) from None


def _load_bundle(path: str) -> DocumentBundle:
    from pydantic import ValidationError

    raw = _read_json(path, "bundle", require_object=True)
    try:
        return DocumentBundle.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise CLIError("INVALID_BUNDLE", f"{path} is not a DocumentBundle ({where}: {first['msg']}); "
                       f"produce one with `python -m docverify parse FILE.pdf`", path) from exc


def make_judge(model: str | None) -> Judge:
    """The offline judge, or the LLM judge on a pydantic-ai model name
    (e.g. ``google-gla:gemini-2.5-flash``; credentials from the model provider's environment)."""
    model = model or os.environ.get("DOCVERIFY_MODEL")
    if not model:
        return OfflineJudge()
    from docverify.llm.judge import LLMJudge  # pydantic_ai: only with a model

    return LLMJudge(model, model_id=model)


def cmd_parse(args: argparse.Namespace) -> int:
    """A PDF (local parser, time-bounded child process), or a Document AI output — a ``.json``
    file or a folder of shards — converted by ``docverify.layout.docai``. For Document AI output,
    ``doc_id`` is the folder's name or the file's stem (without its ``-<shard>`` suffix) and
    ``sha256`` is that of the JSON bytes (the PDF is not at hand)."""
    path = pathlib.Path(args.file)
    if not path.exists():
        raise CLIError("FILE_NOT_FOUND", f"{args.file} does not exist", args.file)
    try:
        if path.is_dir() or path.suffix.lower() == ".json":
            docs = docai.load_docai_output(path)
            bundle = docai.bundle_from_docai(docs, doc_id=docai.default_doc_id(path, docs),
                                             file_path=str(path.resolve()), sha256=docai.docai_output_sha256(path))
        else:
            bundle = parse_pdf_bounded(path, timeout_s=args.timeout, ocr=not args.no_ocr)
    except ParseError as exc:
        _emit(exc.to_dict())
        return EXIT_INPUT_ERROR
    _emit(bundle.model_copy(update={"doc_id": _as_text(bundle.doc_id), "file_path": _as_text(bundle.file_path)}))
    return 0


def _as_text(value: str) -> str:
    """A name that is not UTF-8 text (bytes of another encoding in a file name reach Python as lone
    surrogates) in its escaped form (``caf\\xe9``), so the bundle is text ``verify`` reads back."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return printable_name(value)
    return value


def cmd_classify(args: argparse.Namespace) -> int:
    bundle = _load_bundle(args.bundle)
    judge = make_judge(args.model)
    result = asyncio.run(judge.classify(bundle))
    _emit(result.classification)
    return 0


def verify_policy(args: argparse.Namespace) -> VerifyPolicy:
    """The :class:`~docverify.domain.policy.VerifyPolicy` of ``verify``'s flags (the Airflow Variables'
    counterparts; unset flags take the policy's defaults)."""
    if not 0.0 <= args.min_primary_confidence <= 1.0:
        raise CLIError("INVALID_ARGUMENT", f"--min-primary-confidence {args.min_primary_confidence}: give a "
                       f"confidence between 0 and 1 (0 = off)")
    return VerifyPolicy.from_overrides({name: getattr(args, name) for name in VerifyPolicy.model_fields})


def cmd_verify(args: argparse.Namespace) -> int:
    bundle = _load_bundle(args.bundle)
    classification = _read_classification(args.classification)
    judge = make_judge(args.model)
    deps = VerifyDeps(judge, policy=verify_policy(args))
    result = asyncio.run(verify_document(bundle, classification, deps))
    if args.out:
        store = ArtifactStore(args.out)
        run_dir = ArtifactStore.run_dir(args.ds, bundle.doc_id)
        store.write_json(f"{run_dir}/bundle.json", bundle)
        store.write_json(f"{run_dir}/classification.json", classification)
        outputs = write_outcome(store, args.ds, bundle, result, provenance={"judge": judge.name})
        sys.stderr.write("wrote: " + json.dumps(outputs) + "\n")
    _emit(result)
    return 0


def cmd_arbiter(args: argparse.Namespace) -> int:
    kind = getattr(args, "kind", "v5")
    if kind == "cr_v2":
        return _arbiter_cr(args)
    if kind == "decision":
        return _arbiter_decision(args)
    from pydantic import TypeAdapter, ValidationError

    raw = _read_json(args.issues, "issues")
    if isinstance(raw, dict) and "issues" in raw:
        raw = raw["issues"]  # a report.json works too
    try:
        issues = TypeAdapter(list[Issue]).validate_python(raw)
    except ValidationError as exc:
        raise CLIError("INVALID_ISSUES", f"{args.issues} is not a JSON list of issues: {exc.errors()[0]['msg']}",
                       args.issues) from exc
    _emit(decide(issues))
    return 0


def _arbiter_cr(args: argparse.Namespace) -> int:
    """``{"actions_by_tuple": {id: {A, B, C}}, "conflict_flags": {id: type}}`` (the document's
    input) or one item ``{"votes": {A, B, C}, "conflict_type": …}``; a vote is an action or
    ``{"action", "reason_code"}``."""
    raw = _read_json(args.issues, "votes")
    fix = ('give {"actions_by_tuple": {"<id>": {"A": "KEEP", "B": {"action": "FLIP", "reason_code": '
           '"NEGATION_SCOPE"}, "C": "DROP"}}, "conflict_flags": {"<id>": "<conflict_type>"}}')
    try:
        if isinstance(raw, dict) and isinstance(raw.get("actions_by_tuple"), dict):
            flags = raw.get("conflict_flags") or {}
            if not isinstance(flags, dict):
                raise VoteInputError("conflict_flags must be an object tuple_id → conflict_type")
            results = arbiter_vote_all(raw["actions_by_tuple"], flags, version=args.cr_version)
            _emit({"version": args.cr_version, "results": {k: v.to_dict() for k, v in results.items()}})
        elif isinstance(raw, dict) and isinstance(raw.get("votes"), dict):
            _emit(arbiter_vote(raw["votes"], raw.get("conflict_type"), version=args.cr_version).to_dict())
        else:
            raise VoteInputError("no actions_by_tuple (or votes) object")
    except VoteInputError as exc:
        raise CLIError("INVALID_VOTES", f"{args.issues}: {exc}; {fix}", args.issues) from exc
    return 0


def _arbiter_decision(args: argparse.Namespace) -> int:
    """``{"transaction", "evidence", "debate"?, "trace"?}`` → the decision arbiter's answer. With
    ``--model`` (or $DOCVERIFY_MODEL) the LLM is asked; otherwise the deterministic fallback runs."""
    raw = _read_json(args.issues, "decision input")
    try:
        validate_state(raw)
    except ValueError as exc:
        raise CLIError("INVALID_DECISION_INPUT", f"{args.issues} is not a decision-arbiter input ({exc}); give "
                       f'{{"transaction": {{"transaction_id": …}}, "evidence": {{"composite_risk_score": 0-100, '
                       f'"risk_category": "low|medium|high|critical", "all_signals": […], "all_citations": […]}}, '
                       f'"debate": {{…}}}}', args.issues) from exc
    model = args.model or os.environ.get("DOCVERIFY_MODEL") or None
    out = asyncio.run(decision_arbiter_agent(raw, model=model))
    _emit({**out, "decision": out["decision"].model_dump(mode="json")})
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Feedback figures of a store (and of the offline classifier on the labelled corpus with
    ``--corpus``). Unreadable ground-truth files are listed, not fatal: exit 0."""
    store = ArtifactStore(args.root)
    if isinstance(store.root, pathlib.Path) and not store.root.is_dir():
        raise CLIError("ROOT_NOT_FOUND", f"storage root {args.root} is not a folder: pass the artifact store's "
                       f"root (the folder holding ground_truth/ and sme_packets/), a path or a URI", args.root)
    figures = evaluate_store(store)
    corpus = None
    if args.corpus:
        try:
            corpus = evaluate_labelled_corpus(args.corpus)
        except CorpusNotFound as exc:
            raise CLIError("CORPUS_NOT_FOUND", str(exc), args.corpus) from exc
    if args.json:
        _emit({"store": figures.model_dump(mode="json"),
               "labelled_corpus": corpus.model_dump(mode="json") if corpus else None})
    else:
        sys.stdout.write(evaluate_render.render_text(figures, corpus))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """One document's trail (:func:`docverify.reporting.trace.document_trace`): every night, attempt, route,
    packet, answer and ground-truth version, each with its Airflow task instance. An unknown doc id
    or an unsafe one is the CLI's JSON error (exit 2)."""
    store = ArtifactStore(args.root)
    if isinstance(store.root, pathlib.Path) and not store.root.is_dir():
        raise CLIError("ROOT_NOT_FOUND", f"storage root {args.root} is not a folder: pass the artifact store's "
                       f"root (the folder holding runs/ and sme_packets/), a path or a URI", args.root)
    # a file name gives its document's id (ADR 0050: the ids are opaque; the name is the operator's handle)
    doc_id = doc_id_for(args.doc_id) if args.doc_id.lower().endswith(".pdf") else args.doc_id
    try:
        trace = document_trace(store, doc_id)
    except UnknownDocument as exc:
        raise CLIError(exc.code, exc.message, args.root) from None
    if args.json:
        _emit(trace.model_dump(mode="json", exclude_none=True))
    else:
        sys.stdout.write(render_text(trace))
    return 0


def _policy_flags(sv: argparse.ArgumentParser) -> None:
    """``verify``'s switches of :class:`docverify.domain.policy.VerifyPolicy` (defaults: the policy's)."""
    D = DEFAULT_POLICY
    on_off = argparse.BooleanOptionalAction
    sv.add_argument("--blocker-repair", action=on_off, default=D.blocker_repair,
                    help="repair an attempt whose BLOCKERs are all auto-fixable once before V5's rule 1 (README "
                    "'Auto-fixable BLOCKERs'; Variable docverify_blocker_repair); default: "
                    f"{'on' if D.blocker_repair else 'off'} (any BLOCKER escalates)")
    sv.add_argument("--patient-identity", action=on_off, default=D.patient_identity,
                    help="V2: PATIENT_IDENTITY_CONFLICT for two patient identifiers in one segment (default: "
                    f"{'on' if D.patient_identity else 'off'})")
    sv.add_argument("--min-primary-confidence", type=float, default=D.min_primary_confidence, metavar="X",
                    help=f"V2: LOW_CONFIDENCE_PRIMARY below this confidence (0 = off; default {D.min_primary_confidence})")
    sv.add_argument("--admin-trap-per-segment", action=on_off, default=D.admin_trap_per_segment,
                    help="V3 trap 2 per segment (off: the strict whole-document reading; default: "
                    f"{'on' if D.admin_trap_per_segment else 'off'})")
    sv.add_argument("--admin-trap-counts-mentions", action=on_off, default=D.admin_trap_counts_mentions,
                    help="V3 trap 2 also counts a report type at MENTION_ONLY (on: the strict letter, any level but "
                    "NO_EVIDENCE; off: PRIMARY or EMBEDDED_RAW only, ADR 0046; default: "
                    f"{'on' if D.admin_trap_counts_mentions else 'off'})")
    sv.add_argument("--admin-trap-spares-read-reports", action=on_off, default=D.admin_trap_spares_read_reports,
                    help="V3 trap 2 spares a report segment that V2's independent reading reads as its type (opt-in, "
                    "ADR 0062; default: "
                    f"{'on' if D.admin_trap_spares_read_reports else 'off'}: the specification's letter)")
    sv.add_argument("--label-text-guard", action=on_off, default=D.label_text_guard,
                    help="with --model: the offline label-versus-text check beside the model's V2 judgment (default: "
                    f"{'on' if D.label_text_guard else 'off'})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m docverify", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("parse", help="PDF, or Document AI output (.json or a folder of shards) → DocumentBundle JSON")
    sp.add_argument("file", help="a PDF, a Document AI output .json, or a folder of its <name>-<n>.json shards")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds before TIMEOUT (default 60)")
    sp.add_argument("--no-ocr", action="store_true", help="do not OCR scanned pages (they stay NO_TEXT_LAYER)")
    sp.set_defaults(fn=cmd_parse)
    sc = sub.add_parser("classify", help="DocumentBundle → ClassificationOutput")
    sc.add_argument("bundle")
    sc.add_argument("--model", help="pydantic-ai model name (default: $DOCVERIFY_MODEL, else offline)")
    sc.set_defaults(fn=cmd_classify)
    sv = sub.add_parser("verify", help="V1–V4 + V5 with the retry loop")
    sv.add_argument("--bundle", required=True)
    sv.add_argument("--classification", required=True)
    sv.add_argument("--model", help="pydantic-ai model name for the judgment phases (default: offline)")
    sv.add_argument("--out", help="artifact store root: writes the per-document artifacts like the DAG")
    sv.add_argument("--ds", default="adhoc", help="date partition used under --out (default: adhoc)")
    _policy_flags(sv)
    sv.set_defaults(fn=cmd_verify)
    sa = sub.add_parser("arbiter", help="V5: a JSON list of issues → ArbiterDecision; or the CR_V2 vote / the "
                        "decision arbiter (--kind)")
    sa.add_argument("issues", metavar="FILE", help="issues (v5), votes (cr_v2) or {transaction, evidence, debate} "
                    "(decision)")
    sa.add_argument("--kind", choices=("v5", "cr_v2", "decision"), default="v5", help="which arbiter (default v5)")
    sa.add_argument("--cr-version", choices=("v1", "v2"), default="v2", help="cr_v2 only: the rule version")
    sa.add_argument("--model", help="decision only: pydantic-ai model name (default: $DOCVERIFY_MODEL, else the "
                    "deterministic fallback)")
    sa.set_defaults(fn=cmd_arbiter)
    se = sub.add_parser("evaluate", help="feedback figures: SME ground truth vs primary classifications")
    se.add_argument("--root", required=True, help="artifact store root: a path or URI (file://, gs://)")
    se.add_argument("--corpus", help="also the offline classifier on the labelled corpus: the corpora folder, "
                    "its text_labeled folder or combined_sample.jsonl")
    se.add_argument("--json", action="store_true", help="print the figures as JSON instead of a text table")
    se.set_defaults(fn=cmd_evaluate)
    st = sub.add_parser("trace", help="one document's trail: nights, attempts, route, packet, answer, ground truth, "
                        "each with its Airflow task instance")
    st.add_argument("doc_id", help="the document's id as the batch report lists it (doc-<12 hex>), or its PDF's "
                    "file name (ending .pdf), whose id it is")
    st.add_argument("--root", required=True, help="artifact store root: a path or URI (file://, gs://)")
    st.add_argument("--json", action="store_true", help="print the trace as JSON instead of text")
    st.set_defaults(fn=cmd_trace)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    fn: Callable[[argparse.Namespace], int] = args.fn  # the subcommand's cmd_* (set_defaults)
    try:
        return fn(args)
    except (CLIError, InputError) as exc:
        _emit(exc.to_dict())
        return EXIT_INPUT_ERROR
    except (RecursionError, MemoryError) as exc:  # an input beyond what a check caught: still no traceback
        _emit({"error": "INPUT_TOO_COMPLEX", "message": f"the input could not be processed ({type(exc).__name__}); "
               f"check it against include/schemas/", "file": ""})
        return EXIT_INPUT_ERROR
