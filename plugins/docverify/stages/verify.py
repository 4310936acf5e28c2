"""plan_shards → verify[shard] → route → auto_fix_retry: every attempt through
:func:`docverify.pipeline.document.verify_document`; one result per document, one summary per shard.

The verify and retry stages take the night's :class:`~docverify.pipeline.document.VerifyDeps` (judge, policy,
jury, second opinion; the Airflow task builds it once: ``docverify_airflow.wiring.verify_deps``) —
or a bare judge and ``policy=…`` — and hand it to every ``verify_document`` call, so attempt 0 and
the retry decide under the same switches."""

from __future__ import annotations

import asyncio
import functools
import logging

from pydantic import JsonValue
from typing_extensions import TypedDict

from docverify.domain.models import Decision, DocumentBundle, VerificationReport, VerificationResult
from docverify.domain.policy import VerifyPolicy
from docverify.judging.judges import CallDeferred, Judge, JudgeThrottled, Usage, models_of
from docverify.pipeline.document import VerifyDeps, as_deps, verify_document
from docverify.pipeline.retry import RawClassification
from docverify.stages.common import (
    AIRFLOW_MAP_LIMIT,
    MAX_SHARDS,
    ROUTE_TASKS,
    ROUTES,
    Batch,
    StageStats,
    gather_bounded,
    lineage,
    no_lineage,
    shard_size_for,
    split,
)
from docverify.stages.results import Arbitrated, StageOutcome
from docverify.storage.inputs import read_regular
from docverify.storage.limits import (
    MAX_COMPANION_BYTES,
    InputError,
    check_size,
    load_classification,
)
from docverify.storage.runstore import (
    BundleMeta,
    ClassificationMeta,
    DocResult,
    DocSummary,
    ErrorRecord,
    ManifestDoc,
    NightIndex,
    Routes,
    V5Decision,
)
from docverify.storage.stage_records import VerifyRead, stage_read
from docverify.storage.summaries import doc_summary

log = logging.getLogger("docverify.stages")


# =========================================================================== shards


def night_index(batch: Batch) -> NightIndex:
    """The layout stage's record (one read). A night laid out without it (a test writing bundles
    by hand) is indexed from the manifest, probing each document's folder."""
    rs = batch.rs
    index = rs.night_index()
    if index is not None:
        return index
    docs = rs.manifest().documents
    ok: list[str] = []
    errors: dict[str, ErrorRecord] = {}
    for d in docs:
        err = rs.error(d.doc_id)
        if d.input_error or err is not None:
            errors[d.doc_id] = err if err else ErrorRecord.of(d, d.input_error or "",
                                                              f"{d.pdf_uri}: refused at discovery", "discover")
        elif rs.exists(rs.bundle_rel(d.doc_id)):
            ok.append(d.doc_id)
    return NightIndex(documents=docs, ok=ok, failed=errors)


def plan_shards(batch: Batch, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    """Documents with a bundle in at most ``max_shards`` shards of at least ``shard_size`` (a shard
    is one mapped ``verify`` task). The plan is the task's return value (XCom): the arbiter gets
    it from there."""
    shard_size_for(0, shard_size, max_shards, map_limit)  # a bad param fails before anything is read
    index = night_index(batch)
    ok = index.ok
    shards = split(ok, shard_size, max_shards, map_limit)
    size = shard_size_for(len(ok), shard_size, max_shards, map_limit)
    log.info("planned %d shard(s) of at most %d for %d document(s); %d document(s) failed layout",
             len(shards), size, len(ok), len(index.failed))
    return shards


def read_bundle(batch: Batch, doc_id: str) -> DocumentBundle:
    bundle = batch.rs.bundle(doc_id)
    if bundle is None:
        raise FileNotFoundError(f"{batch.rs.uri(batch.rs.bundle_rel(doc_id))}: no bundle")
    return bundle


# =========================================================================== verify


def read_companion(batch: Batch, rel: str, size: int | None = None) -> dict[str, JsonValue]:
    """A ``<doc>.classification.json`` beside a PDF, within ``docverify.storage.limits`` (size checked
    before the read — from discovery's listing when given; bytes, nesting, numbers, segment
    counts, a JSON object), or InputError — ``INPUT_NOT_REGULAR`` when it is no longer a regular
    file (a symbolic link, a folder, gone since discovery: never followed, ADR 0033)."""
    uri = batch.rs.uri(rel)
    if size is not None:
        check_size(size, MAX_COMPANION_BYTES, uri, "classification")
    data = read_regular(batch.store, rel, uri, limit=MAX_COMPANION_BYTES, what="classification")
    return load_classification(data, uri)


def _decision_value(d: Decision) -> str:
    return str(getattr(d, "value", d))


def _error_decision(code: str | None) -> V5Decision:
    """The V5 decision of a document that ends in an error: escalated, no rule."""
    return {"decision": "ESCALATE_TO_SME", "rule": None, "reason": "error", "error": code}


def _error_result(doc: ManifestDoc, bundle: BundleMeta | None, code: str, message: str, stage: str) -> DocResult:
    return DocResult(doc_id=doc.doc_id, route="write_sme_packets", bundle=bundle, production_rel=doc.production_rel,
                     decision=_error_decision(code),
                     error=ErrorRecord(doc_id=doc.doc_id, stage=stage, error=code, message=message, file=doc.pdf_uri,
                                       sha256=doc.sha256))


async def classification_for(batch: Batch, doc: ManifestDoc, bundle: DocumentBundle, prior: DocResult | None,
                          judge: Judge, stats: StageStats, *, lineage_on: bool = True
                          ) -> tuple[RawClassification, ClassificationMeta] | DocResult:
    """The document's classification: the companion beside the PDF, the earlier run's (same
    classifier, same bundle), or the judge's classifier. A fault is the document's error result.
    ``lineage_on=False``: no lineage lines (batch mode's collect pass; the verify task writes them)."""
    rs, doc_id = batch.rs, doc.doc_id
    note = lineage if lineage_on else no_lineage
    out_uri = rs.uri(rs.result_rel(doc_id))
    if doc.classification_rel:
        try:
            raw = read_companion(batch, doc.classification_rel, doc.classification_bytes)
        except InputError as exc:  # this document only: escalated with the error in its packet
            stats.errors += 1
            note("classify", doc_id, source="provided", error=exc.code)
            return _error_result(doc, BundleMeta.of(bundle), exc.code, exc.message, "classify")
        meta = ClassificationMeta(source="provided", uri=rs.uri(doc.classification_rel), implementation="provided",
                                  bundle_sha256=bundle.sha256)
        note("classify", doc_id, source="provided", output_uri=out_uri)
        return raw, meta
    m = prior.classification_meta if prior is not None else None
    if batch.reuse and m is not None and prior is not None and prior.classification is not None \
            and m.source == "classifier" and m.classifier_id == judge.classifier_id and m.bundle_sha256 == bundle.sha256:
        stats.cache_hits += 1
        note("classify", doc_id, source="classifier", implementation=m.implementation, cache="hit",
                output_uri=out_uri)
        return prior.classification, m
    try:
        result = await judge.classify(bundle)
    except (JudgeThrottled, CallDeferred):
        raise  # throttling is not a verdict: the task fails and is retried (a deferred call: batch mode's collect)
    except Exception as exc:  # a classifier fault becomes a document error, never a failed batch
        # a failed call still cost tokens, priced by the classifier's model (ADR 0034)
        stats.add_usage(doc_id, getattr(exc, "usage", None), judge.classifying)
        stats.errors += 1
        note("classify", doc_id, implementation=judge.name, error="CLASSIFICATION_FAILED",
                exception=type(exc).__name__)
        return _error_result(doc, BundleMeta.of(bundle), "CLASSIFICATION_FAILED",
                             f"The classifier {judge.name} failed: {type(exc).__name__}", "classify")
    stats.add_usage(doc_id, result.usage, judge.classifying)  # the classifier's model prices it (ADR 0034)
    meta = ClassificationMeta(source="classifier", judge=judge.name, implementation=result.implementation,
                              classifier_id=judge.classifier_id, bundle_sha256=bundle.sha256)
    note("classify", doc_id, source="classifier", implementation=result.implementation, cache="miss",
            llm_calls=result.usage.llm_calls, dominant_type=result.classification.dominant_type_overall,
            segments=result.classification.number_of_segments, output_uri=out_uri)
    return result.classification.model_dump(mode="json"), meta


def _route(result: VerificationResult) -> str:
    if result.stop_reason == "max_retries":  # verify_document(max_retries=0): V5 wants the retry
        return "auto_fix_retry"
    return "accept" if result.final_decision == "AUTO_ACCEPT" else "write_sme_packets"


async def _verify_one(batch: Batch, doc: ManifestDoc, deps: VerifyDeps, stats: StageStats) -> DocResult:
    rs, doc_id, judge = batch.rs, doc.doc_id, deps.judge
    bundle = read_bundle(batch, doc_id)
    prior = rs.result(doc_id)
    got = await classification_for(batch, doc, bundle, prior, judge, stats)
    if isinstance(got, DocResult):
        return got
    raw, meta = got
    usage = Usage()
    # the one verify path: attempt 0 and its V5 decision (incl. the second opinion of the deps)
    result = await verify_document(bundle, raw, deps, max_retries=0, usage=usage, contain_faults=True)
    stats.add_usage(doc_id, usage, judge)
    route = _route(result)
    rec0 = result.attempts[0]
    decision = rec0.decision
    rec = DocResult(doc_id=doc_id, route=route, bundle=BundleMeta.of(bundle), classification=raw,
                    classification_meta=meta, production_rel=doc.production_rel,
                    decision=V5Decision(decision=_decision_value(decision.decision), rule=decision.rule))
    if route == "auto_fix_retry":
        rec.attempt_0 = rec0
        if prior is not None and prior.attempt_0 == rec0 and prior.classification == raw:
            rec.result = prior.result  # the retry of an earlier run of the same state (it re-checks it)
    else:
        rec.result = result
    judgment = [r for r in rec0.runs if r.phase == "judgment"]
    jury = [{k: v[k] for k in ("code", "votes", "reason_codes", "final_action", "flag_reason", "rule")}
            for r in rec0.runs if r.phase == "jury" for v in r.votes or []]  # ADR 0012: codes only
    lineage("verify", doc_id, implementation=sorted({f"{r.agent}-{r.phase}:{r.implementation}" for r in rec0.runs}),
            judgment_skipped=bool(judgment) and all(r.skipped for r in judgment),
            llm_calls=usage.llm_calls, cache_hits=usage.cache_hits,
            issue_codes=sorted(i.code for i in rec0.issues), **({"jury": jury} if jury else {}))
    lineage("v5_arbiter", doc_id, decision=_decision_value(decision.decision), rule=decision.rule,
            issue_codes=sorted(i.code for i in rec0.issues), fingerprint=rec0.fingerprint,
            output_uri=rs.uri(rs.result_rel(doc_id)), audit=decision.explanation_audit,
            **({"second_opinion": decision.second_opinion["override"]} if decision.second_opinion else {}))
    return rec


def verify_shard(batch: Batch, shard: list[str], deps: VerifyDeps | Judge, shard_key: str = "", *,
                 policy: VerifyPolicy | None = None) -> StageOutcome:
    """The ``verify[shard]`` task: per document classify (unless a companion classification is
    given or the earlier run's is reusable), V1, V2–V4 (judgments concurrent) and V5 on attempt 0,
    through :func:`docverify.pipeline.document.verify_document`; one ``result.json`` per document and one
    summary for the shard (routes, decisions, what the report shows) for the arbiter.
    A document's fault is that document's error (it escalates); throttling propagates.
    ``deps``: the judge, the policy (what runs beyond the specification), the jury and the second
    opinion (:class:`~docverify.pipeline.document.VerifyDeps`), or a bare judge with ``policy``."""
    deps = as_deps(deps, policy)
    rs = batch.rs
    stats = StageStats("verify")
    index = night_index(batch)
    by_id = {d.doc_id: d for d in index.documents}
    new = set(index.new)
    documents: dict[str, DocSummary] = {}
    so_counts: dict[str, int] = {}

    async def one(doc_id: str) -> None:
        doc = by_id[doc_id]
        if doc_id in new:  # no run folder before this night's layout: no earlier result to read
            rs.assume_absent(rs.result_rel(doc_id))
        try:
            rec = await _verify_one(batch, doc, deps, stats)
        except JudgeThrottled:
            raise
        except Exception as exc:  # noqa: BLE001 - this document only: it escalates, the night goes on
            stats.errors += 1
            lineage("verify", doc_id, error="VERIFICATION_FAILED", exception=type(exc).__name__)
            bundle = rs.bundle(doc_id)  # None when layout wrote none
            rec = _error_result(doc, BundleMeta.of(bundle) if bundle else None, "VERIFICATION_FAILED",
                                f"{doc.pdf_uri}: the verification could not be completed ({type(exc).__name__}); "
                                f"check its classification, then re-run", "verify")
        try:
            rs.write_result(rec)
        except (ValueError, TypeError) as exc:  # its content cannot be stored (not text): this document only
            stats.errors += 1
            lineage("verify", doc_id, error="VERIFICATION_FAILED", exception=type(exc).__name__)
            rec = _error_result(doc, rec.bundle, "VERIFICATION_FAILED",
                                f"{doc.pdf_uri}: the result could not be stored ({type(exc).__name__}); "
                                f"check its classification, then re-run", "verify")
            rs.write_result(rec)
        # a document waiting for the retry: its attempt 0 only (the retry's result is the retry's)
        documents[doc_id] = doc_summary(
            rec if rec.route != "auto_fix_retry" else rec.model_copy(update={"result": None}))
        a0 = rec.first_attempt
        so = a0.decision.second_opinion if a0 is not None else None
        if so is not None:
            so_counts["asked"] = so_counts.get("asked", 0) + 1
            so_counts[so["override"]] = so_counts.get(so["override"], 0) + 1
            so_counts["changed"] = so_counts.get("changed", 0) + int(so["changed"])
        rs.forget(doc_id)

    asyncio.run(gather_bounded([functools.partial(one, d) for d in shard], batch.concurrency))
    stats.docs = len(shard)
    extra: _VerifyExtra = {"second_opinion": so_counts} if deps.second_opinion is not None else {}
    extra["models"] = models_of(deps.judge)  # what classified and what judged (ADR 0034)
    return StageOutcome(stats.save(batch, f"verify_{shard_key}" if shard_key else None, shard=shard,
                                   documents=documents, **extra))


class _VerifyExtra(TypedDict, total=False):
    """What a verify shard's record holds besides the common keys and its summaries."""

    #: the V5 second opinion's counts (asked, each override, changed): when the deps have one
    second_opinion: dict[str, int]
    #: what classified and what judged (:func:`docverify.judging.judges.models_of`, ADR 0034)
    models: dict[str, str | bool | None]


# =========================================================================== V5 arbiter


def arbiter(batch: Batch, shards: int | None = None) -> Arbitrated:
    """The V5 branch: the routes of every document from the verify shards' summaries (attempt 0,
    with the second opinion of the deps when there is one, was decided in ``verify``),
    ``runs/<ds>/_routes.json``, and the task ids to follow. ``shards``: how many verify shards
    ran (``verify_0`` … in the stage records; the DAG passes the plan's length); None reads every
    verify record of the night.

    Returns the task ids to follow and the documents per route. ``accept`` and
    ``write_sme_packets`` are followed whenever documents may reach them — also from the retry.
    A document with no verification result (its shard was not verified) is never accepted: it
    gets the error ``VERIFICATION_FAILED`` and an SME packet.
    """
    rs = batch.rs
    stats = StageStats("route")
    index = night_index(batch)
    summaries: dict[str, DocSummary] = {}
    for i in range(shards or 0):
        if (record := rs.stage(f"verify_{i}")) is not None:
            summaries.update(VerifyRead.model_validate(record).documents)
    if shards is None:  # the shard keys are unknown: every verify record of the night
        for s in map(stage_read, rs.stages()):
            if isinstance(s, VerifyRead) and s.stage == "verify":
                summaries.update(s.documents)
    routes: dict[str, list[str]] = {r: [] for r in ROUTES}
    decisions: dict[str, V5Decision] = {}
    errors: dict[str, ErrorRecord] = {}
    for doc in index.documents:
        doc_id = doc.doc_id
        stats.docs += 1
        if doc_id in index.failed:
            errors[doc_id] = index.failed[doc_id]
            code = errors[doc_id].error
            route, dec = "write_sme_packets", _error_decision(code)
            lineage("route", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error", error=code)
        elif doc_id in summaries:
            route, dec = summaries[doc_id]["route"], summaries[doc_id]["decision"]
        else:  # no verification result (its shard did not run): never accepted
            stats.errors += 1
            errors[doc_id] = ErrorRecord.of(
                doc, "VERIFICATION_FAILED", f"{doc.pdf_uri}: no verification result for this document "
                "(its verify task did not run or failed); re-run", "route", sha256=doc.sha256)
            rs.write_if_changed(rs.error_rel(doc_id), errors[doc_id])
            route, dec = "write_sme_packets", _error_decision("VERIFICATION_FAILED")
            lineage("route", doc_id, decision="ESCALATE_TO_SME", rule=None, reason="error",
                    error="VERIFICATION_FAILED")
        routes[route].append(doc_id)
        decisions[doc_id] = dec
    night = Routes(ds=batch.ds, routes=routes, attempt_0=decisions, errors=errors, new=index.new,
                   documents={d: v for d, v in summaries.items() if d in decisions}).model_dump(mode="json")
    # _routes.json: the routes, attempt 0's decisions and the error records (unchanged on a re-run);
    # the stage's record (rewritten every run) carries them too, with this run's ``new`` documents
    # and the summaries, for the route tasks and the report
    rs.write_if_changed(rs.routes_rel, {k: night[k] for k in ("ds", "routes", "attempt_0", "errors")})
    follow = [r for r in ROUTES if routes[r]]
    if routes["auto_fix_retry"]:  # documents from the retry end in accept or write_sme_packets
        follow = list(ROUTES)
    counts = {k: len(v) for k, v in routes.items()}
    stats.save(batch, counts=counts, night=night)
    log.info("V5 routes: %s; following %s", counts, follow)
    return Arbitrated(routes=[ROUTE_TASKS[r] for r in follow], counts=counts)


def retry_shards(batch: Batch, shard_size: int = 25, max_shards: int = MAX_SHARDS,
                 map_limit: int = AIRFLOW_MAP_LIMIT) -> list[list[str]]:
    shard_size_for(0, shard_size, max_shards, map_limit)  # a bad param fails before anything is read
    routes = batch.rs.routes()
    return split(routes.routes["auto_fix_retry"] if routes else [], shard_size, max_shards, map_limit)


# =========================================================================== routes


def auto_fix_retry_shard(batch: Batch, shard: list[str], deps: VerifyDeps | Judge, shard_key: str = "", *,
                         policy: VerifyPolicy | None = None) -> StageOutcome:
    """Fix → verify again (same pipeline, V1–V5) for documents routed AUTO_RETRY, from the stored
    attempt 0; the final result goes into the document's ``result.json``. ``deps`` (or a bare judge
    and ``policy``): the ones the verify stage used."""
    deps = as_deps(deps, policy)
    judge = deps.judge
    rs = batch.rs
    stats = StageStats("auto_fix_retry")
    documents: dict[str, DocSummary] = {}

    async def one(doc_id: str) -> None:
        rec = rs.result(doc_id)
        a0 = None if rec is None else rec.first_attempt
        if rec is None or a0 is None:
            stats.errors += 1
            lineage("auto_fix_retry", doc_id, error="NO_ATTEMPT_0")
            return
        usage = Usage()
        first = VerificationReport(doc_id=doc_id, attempt=0, fingerprint=a0.fingerprint, issues=a0.issues,
                                   runs=a0.runs, quality_score=a0.quality_score)
        try:
            result = await verify_document(read_bundle(batch, doc_id), rec.classification, deps, first_report=first,
                                           usage=usage, contain_faults=True)
        except JudgeThrottled:
            raise
        except Exception as exc:  # noqa: BLE001 - this document only: it escalates
            stats.errors += 1
            lineage("auto_fix_retry", doc_id, error="VERIFICATION_FAILED", exception=type(exc).__name__)
            err = _error_result(ManifestDoc(doc_id=doc_id, pdf_rel="", pdf_uri=rec.bundle.file_path if rec.bundle else "",
                                            sha256=rec.bundle.sha256 if rec.bundle else ""),
                                rec.bundle, "VERIFICATION_FAILED", f"the retry could not be completed "
                                f"({type(exc).__name__}); re-run", "auto_fix_retry")
            new = rec.model_copy(update={"error": err.error, "result": None})
        else:
            stats.add_usage(doc_id, usage, judge)
            stats.docs += 1
            new = rec.model_copy(update={"result": result, "error": None})
            lineage("auto_fix_retry", doc_id, attempts=len(result.attempts), final_decision=result.final_decision,
                    rule=result.final_rule, stop_reason=result.stop_reason, llm_calls=usage.llm_calls,
                    fixes=[f.fixer for f in result.fixes_applied],
                    issue_codes=[sorted(i.code for i in a.issues) for a in result.attempts])
        rs.write_result(new)
        documents[doc_id] = doc_summary(new)
        rs.forget(doc_id)

    asyncio.run(gather_bounded([functools.partial(one, d) for d in shard], batch.concurrency))
    return StageOutcome(stats.save(batch, f"auto_fix_retry_{shard_key}" if shard_key else None, documents=documents))
