"""The batch report: ``reports/<ds>/batch_report.json``, ``.md`` and a self-contained ``.html``.

Per-route counts (final, after the retry), per-rule counts, issues by code, per-document errors,
LLM calls and tokens (zero offline), per-stage timings, and a lineage index (document → its
outputs), and the "Feedback from SME reviews" figures over all the store's ground truth so far
(:mod:`docverify.reporting.evaluate`). No page text and no issue messages: the report is safe to mail around.
No file name either (ADR 0050): documents are named by their opaque ids, an error message names
the document's id in place of its file, ignored files and orphan companions are opaque tokens.
The JSON's contract (its TypedDicts) is :mod:`docverify.reporting.contract`.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from docverify.llm.cost import CostEstimate, estimate_cost
from docverify.reporting import evaluate, trend
from docverify.reporting.contract import (
    AuditSection,
    BatchJob,
    BatchKey,
    BatchSection,
    DocDecision,
    DocLLM,
    DocOutputs,
    FalseAcceptJSON,
    FeedbackJSON,
    JurySection,
    ModelsSection,
    NightFacts,
    OCRTotals,
    PacketOutputs,
    Report,
    ReportDoc,
    ReportError,
    ReportLLM,
    ReportSections,
    ReportWritten,
    StageTiming,
)
from docverify.reporting.evaluate import FalseAcceptFigures, FeedbackFigures
from docverify.reporting.evaluate_render import render_html, render_markdown
from docverify.sme.packets import review_id
from docverify.storage.night import Batch, lineage, load_stage_records
from docverify.storage.paths import file_token, redact_names
from docverify.storage.runstore import DocSummary, Manifest, ManifestDoc, Routes, SummaryError
from docverify.storage.stage_records import AuditRead, BatchRoundRecord, NightStages, StageRead
from docverify.storage.store import ArtifactStore
from docverify.storage.summaries import doc_summary

log = logging.getLogger("docverify.reporting.report")


def _llm_cells(u: DocLLM) -> list[int]:
    """A document's ``USAGE_KEYS`` counts, in that order."""
    return [u["calls"], u["cache_hits"], u["input_tokens"], u["output_tokens"], u["cached_tokens"]]



def _cost_per_model(by_model: dict[str, Counter[str]], total: Counter[str], whole: CostEstimate,
                    models: list[str]) -> CostEstimate:
    """The night's cost when its calls ran on several models (ADR 0034: the classifier and the judge
    apart): the sum of each model's usage at its own price, when the stages recorded their usage per
    model and it adds up to the total; else no figure, with a note."""
    keys = ("calls", "input_tokens", "output_tokens")
    covered = all(sum(u.get(k, 0) for u in by_model.values()) == total.get(k, 0) for k in keys)
    if not covered:
        return dataclasses.replace(whole, usd=None, model=None, note=f"several models in one run: {models}")
    parts = {m: _cost(m, u) for m, u in sorted(by_model.items()) if u.get("input_tokens") or u.get("output_tokens")}
    usd = None if any(c.usd is None for c in parts.values()) else round(sum(c.usd or 0.0 for c in parts.values()), 6)
    note = "priced per model: " + "; ".join(
        f"{m} {_money(c.usd)}" + (f" ({c.note})" if c.note else "") for m, c in parts.items())
    return dataclasses.replace(whole, usd=usd, model=", ".join(parts) or None, note=note)


SELF_VERIFYING_WARNING = ("the classification is verified by its own model: the judgments ran on the classifier's "
                          "model (Variable docverify_judge_conn_id is empty or names the same model), so they share "
                          "its blind spots; name another model's connection in docverify_judge_conn_id (ADR 0034)")


def _models_section(stages: list[StageRead]) -> ModelsSection | None:
    """The models that classified and judged the night, and the warning when they are the same."""
    seen = [st.models for st in stages if st.models is not None]
    if not seen:
        return None
    classifiers = sorted({m.classifier for m in seen if m.classifier})
    judges = sorted({m.judge for m in seen if m.judge})
    flags = [m.self_verifying for m in seen]
    self_verifying = None if all(f is None for f in flags) else any(bool(f) for f in flags)
    return {"classifier": classifiers, "judge": judges, "self_verifying": self_verifying,
            "warning": SELF_VERIFYING_WARNING if self_verifying else ""}


def models_lines(rep: Report) -> list[str]:
    """The report's "Models" lines (none for a report without the section)."""
    m = rep.get("models")
    if not m:
        return []
    lines = [f"- classified by: {', '.join(m['classifier']) or '—'}", f"- judged by: {', '.join(m['judge']) or '—'}"]
    if m["warning"]:
        lines.append(f"- WARNING: {m['warning']}")
    return lines


def _cost(model: str | None, usage: Mapping[str, int], batch: bool = False) -> CostEstimate:
    return estimate_cost(model, input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0),
                         cached_tokens=usage.get("cached_tokens", 0), batch=batch)


BATCH_KEYS: tuple[BatchKey, ...] = ("requests", "succeeded", "failed", "missing", "degenerate", "online_fallback",
                                    "input_tokens", "output_tokens", "cached_tokens")


def _batch_section(records: list[BatchRoundRecord], price_model: str | None) -> BatchSection | None:
    """Batch mode's rounds (``_stages/llm_batch_*.json``): requests sent to batch jobs, what came
    back, what verify asked online instead, and the served requests' cost at the batch price
    (None in online mode)."""
    if not records:
        return None
    total: Counter[str] = Counter()
    for r in records:
        total.update({k: int(getattr(r, k)) for k in BATCH_KEYS})
    model = price_model or next((r.model for r in records if r.model), None)
    cost = _cost(model, total, batch=True)
    return {  # the totals in the order of BATCH_KEYS
        "requests": total["requests"], "succeeded": total["succeeded"], "failed": total["failed"],
        "missing": total["missing"], "degenerate": total["degenerate"], "online_fallback": total["online_fallback"],
        "input_tokens": total["input_tokens"], "output_tokens": total["output_tokens"],
        "cached_tokens": total["cached_tokens"],
        "jobs": [BatchJob(round=r.round, job=r.job, state=r.state, requests=r.requests) for r in records],
        "cost_usd": cost.usd, "cost_note": cost.note}


def _money(usd: float | None) -> str:
    return "n/a" if usd is None else f"${usd:.4f}"


def _sorted(c: Counter[str]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))}


@dataclass(frozen=True)
class _Night:
    """What the report reads of a night: the manifest, the routes, the stage records (typed, ADR 0056)
    and each verified document's final summary (the retry's for those that went to the retry)."""

    manifest: Manifest
    routes: Routes | None
    stages: NightStages
    summaries: dict[str, DocSummary]

    @property
    def attempt_0(self) -> dict[str, list[str]]:
        return self.routes.routes if self.routes else {}

    @property
    def retried(self) -> list[str]:
        return self.attempt_0.get("auto_fix_retry", [])


def _read_night(batch: Batch) -> _Night:
    """The manifest, the routes and the stage records; for the documents that went to the retry,
    their result — no other per-document read."""
    rs = batch.rs
    routes = rs.routes()
    night = _Night(rs.manifest(), routes, load_stage_records(batch), dict(routes.documents) if routes else {})
    for doc_id in night.retried:  # their final result is the retry's
        rec = rs.result(doc_id)
        if rec is not None and (rec.result is not None or rec.error is not None):
            night.summaries[doc_id] = doc_summary(rec)
        else:
            night.summaries.pop(doc_id, None)
        rs.forget(doc_id)
    return night


@dataclass(frozen=True)
class _DocRow:
    """One document's row of ``per_document`` and what it adds to the night's counts."""

    decision: DocDecision
    route: str
    rule: str | None = None
    error: ReportError | None = None
    codes_0: list[str] = dataclasses.field(default_factory=list)
    codes_final: list[str] = dataclasses.field(default_factory=list)


def _error_row(ds: str, d: ManifestDoc, err: SummaryError) -> _DocRow:
    """A document no verification ran on: escalated, the reason is its error, not a V5 rule (ADR 0008);
    its message names the document's id, never its file (ADR 0050)."""
    entry: DocDecision = {"doc_id": d.doc_id, "sha256": d.sha256, "review_id": review_id(ds, d.doc_id, d.sha256),
                        "final_decision": "ESCALATE_TO_SME", "rule": None, "reason": "error", "error": err["error"],
                        "attempts": 0, "route": "write_sme_packets"}
    message = redact_names(err["message"], d.doc_id, d.pdf_uri, d.pdf_rel, d.classification_rel, d.production_rel)
    return _DocRow(entry, "ESCALATE_TO_SME", "error",
                   {"doc_id": d.doc_id, "stage": err["stage"], "error": err["error"], "message": message})


def _verified_row(ds: str, d: ManifestDoc, s: DocSummary, went_retry: bool) -> _DocRow:
    """A verified document: its final decision, rule and codes (attempt 0's and the final ones)."""
    final = s["final_decision"]
    route = "auto_fix_retry" if went_retry else ("accept" if final == "AUTO_ACCEPT" else "write_sme_packets")
    entry: DocDecision = {"doc_id": d.doc_id, "sha256": d.sha256, "final_decision": final, "rule": s["rule"],
                        "attempts": s["attempts"], "stop_reason": s["stop_reason"], "route": route,
                        "issue_codes": s["issue_codes"], "quality_score": s["quality_score"], "fixes": s["fixes"]}
    if final == "ESCALATE_TO_SME":
        entry["review_id"] = review_id(ds, d.doc_id, d.sha256)
    entry["v5_audit"] = s["v5_audit"]
    if s.get("jury"):
        entry["jury"] = s["jury"]
    stop = f" ({s['stop_reason']})" if s["stop_reason"] != "arbiter" else ""
    return _DocRow(entry, f"AUTO_RETRY→{final}" if went_retry else final, f"rule {s['rule']}{stop}",
                   codes_0=s["issue_codes_attempt_0"], codes_final=s["issue_codes_final"])


def _unverified_row(d: ManifestDoc) -> _DocRow:
    """A document with neither a result nor an error: a task failed for it."""
    return _DocRow({"doc_id": d.doc_id, "sha256": d.sha256, "final_decision": "UNKNOWN", "error": "NOT_VERIFIED"},
                   "UNKNOWN", error={"doc_id": d.doc_id, "stage": "verify", "error": "NOT_VERIFIED",
                                     "message": "no verification result: a task failed for this document "
                                                "(see its log)"})


def _doc_row(batch: Batch, night: _Night, d: ManifestDoc) -> _DocRow:
    """A document's row: an error record first (the routes' or its summary's), else its result."""
    s = night.summaries.get(d.doc_id)
    record = night.routes.errors.get(d.doc_id) if night.routes else None
    err: SummaryError | None = None if record is None else {
        "stage": record.stage, "error": record.error, "message": record.message}
    if err is None and s is not None and s.get("error"):
        err = s["error"]
    if err is not None:
        row = _error_row(batch.ds, d, err)
    elif s is not None and s.get("final_decision"):
        row = _verified_row(batch.ds, d, s, d.doc_id in night.retried)
    else:
        row = _unverified_row(d)
    return row


def _outputs(batch: Batch, stages: NightStages, d: ManifestDoc) -> DocOutputs:
    """What the night wrote for a document (URIs): accepted, its packet, its audit packet, its run folder."""
    rs, doc_id = batch.rs, d.doc_id
    packets = set(stages.packets.written) | set(stages.packets.kept_reviewed) if stages.packets else set()
    out: PacketOutputs = {}
    if stages.accept and doc_id in stages.accept.documents:
        out["accepted"] = rs.uri(rs.accepted_rel(doc_id))
    if doc_id in packets:
        out["sme_packet"] = rs.uri(rs.packet_rel(review_id(batch.ds, doc_id, d.sha256)))
    if stages.audit and doc_id in stages.audit.sample:
        out["audit_packet"] = rs.uri(rs.packet_rel(review_id(batch.ds, doc_id, d.sha256) + "_audit"))
    return {**out, "run_dir": rs.uri(rs.run_dir(doc_id))}


@dataclass
class _Usage:
    """The stage records' LLM usage summed: the night's, each document's (online and batch), per
    price model (ADR 0034), and each stage's timing."""

    llm: Counter[str] = dataclasses.field(default_factory=Counter)
    per_doc: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    per_doc_batch: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    by_model: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    price_models: set[str] = dataclasses.field(default_factory=set)
    timings: dict[str, StageTiming] = dataclasses.field(default_factory=dict)

    @property
    def price_model(self) -> str | None:
        return sorted(self.price_models)[0] if len(self.price_models) == 1 else None

    def add(self, st: StageRead) -> None:
        for doc_id, u in st.llm_per_document.items():
            self.per_doc.setdefault(doc_id, Counter()).update(u)
        for doc_id, u in st.llm_batch_per_document.items():
            self.per_doc_batch.setdefault(doc_id, Counter()).update(u)
        if st.llm_by_model:
            for m, u in st.llm_by_model.items():
                self.by_model.setdefault(m, Counter()).update(u)
                self.price_models.add(m)
        elif st.price_model:
            self.price_models.add(st.price_model)
            if st.llm:
                self.by_model.setdefault(st.price_model, Counter()).update(st.llm)
        t = self.timings.setdefault(st.stage, {"seconds": 0.0, "tasks": 0, "docs": 0})
        t["seconds"] = round(t["seconds"] + st.seconds, 3)
        t["tasks"] += 1
        t["docs"] += st.docs
        self.llm.update(st.llm)


def _usage(stages: NightStages) -> _Usage:
    use = _Usage()
    for st in stages.records:
        use.add(st)
    return use


def _doc_llm(u: Counter[str], b: Counter[str] | None, price_model: str | None) -> DocLLM:
    """A document's usage and cost; with the requests a batch job served, at the batch price (ADR 0016)."""
    doc_llm: DocLLM = {"calls": u["calls"], "cache_hits": u["cache_hits"],  # USAGE_KEYS' order
                       "input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
                       "cached_tokens": u["cached_tokens"], "cost_usd": _cost(price_model, u).usd}
    if b:
        bc = _cost(price_model, b, batch=True).usd
        online = doc_llm["cost_usd"]
        doc_llm["batch_requests"] = b["requests"]
        doc_llm["cost_usd"] = None if bc is None or online is None else round(online + bc, 6)
    return doc_llm


def _llm_section(use: _Usage, docs: list[ReportDoc], stages: NightStages) -> ReportLLM:
    """The night's calls, tokens and estimated cost (online, and batch mode's rounds at the batch price)."""
    llm, n = use.llm, len(docs)
    cost = _cost(use.price_model, llm)
    if len(use.price_models) > 1:
        cost = _cost_per_model(use.by_model, llm, cost, sorted(use.price_models))
    section = _batch_section([s.llm_batch for s in stages.records if s.llm_batch], use.price_model)
    batch_cost = section["cost_usd"] if section else None
    out: ReportLLM = {"calls": llm["calls"], "cache_hits": llm["cache_hits"], "input_tokens": llm["input_tokens"],
            "output_tokens": llm["output_tokens"], "cached_tokens": llm["cached_tokens"],
            "calls_per_document": round(llm["calls"] / n, 3) if n else 0.0,
            "max_calls_per_document": max((d["llm"]["calls"] for d in docs), default=0),
            "cost_usd": cost.usd if not section else (
                None if cost.usd is None or batch_cost is None else round(cost.usd + batch_cost, 6)),
            "price_model": cost.model, "price_source": cost.source, "cost_note": cost.note,
            "mode": "batch" if section else "online"}
    if section:
        out["online_cost_usd"] = cost.usd
        out["batch"] = section
    return out


def _inputs(manifest: Manifest) -> dict[str, list[str]]:
    """What the night's folder held besides its documents, and what left it (ADR 0024): ignored files
    and orphan companions as opaque tokens, in the manifest's order (ADR 0050); an empty night names
    the folder it read (ADR 0036)."""
    extra = manifest.model_extra or {}
    inputs: dict[str, list[str]] = {k: extra[k] for k in ("orphan_companions", "removed", "ignored_files")
                                    if extra.get(k)}
    for k in ("orphan_companions", "ignored_files"):
        if k in inputs:
            inputs[k] = [file_token(n) for n in inputs[k]]
    if not manifest.documents and manifest.incoming:
        inputs["folder_read"] = [manifest.incoming]
    return inputs


def _sections(batch: Batch, night: _Night, docs: list[ReportDoc], feedback: FeedbackJSON) -> ReportSections:
    """The report's optional sections, in the report's order: the jury, the audit, the V5 second
    opinion, the local layout's OCR work (ADR 0052), the folder's other files."""
    out: ReportSections = {}
    jury_docs = [d for d in docs if "jury" in d]
    if jury_docs:
        out["jury"] = jury_counts(jury_docs)
    if night.stages.audit:
        out["audit"] = audit_section(batch.ds, night.stages.audit, feedback)
    so = [st.second_opinion for st in night.stages.records if st.second_opinion is not None]
    if so:
        total: Counter[str] = Counter()
        for c in so:
            total.update(c)
        out["second_opinion"] = dict(sorted(total.items()))
    layout = night.stages.layout
    if layout and layout.ocr_pages:
        out["ocr"] = {"documents": len(layout.ocr), "pages": layout.ocr_pages, "seconds": layout.ocr_seconds}
    if inputs := _inputs(night.manifest):
        out["inputs"] = inputs
    return out


def build(batch: Batch) -> Report:
    """The report from the manifest, the routes (every verified document's summary and the error
    records), the stage records (timings, LLM usage, outputs written) and, for the documents that
    went to the retry, their result — no other per-document read."""
    night = _read_night(batch)
    use = _usage(night.stages)
    rows = [_doc_row(batch, night, d) for d in night.manifest.documents]
    docs: list[ReportDoc] = [
        {**r.decision, "outputs": _outputs(batch, night.stages, d), "llm": _doc_llm(
            use.per_doc.get(d.doc_id, Counter()), use.per_doc_batch.get(d.doc_id), use.price_model)}
        for r, d in zip(rows, night.manifest.documents, strict=True)]
    implementations = {i for d in night.manifest.documents if (s := night.summaries.get(d.doc_id)) is not None
                       for i in s.get("implementations", [])}
    feedback = feedback_section(batch.store)
    models = _models_section(night.stages.records)
    with_models: ReportSections = {"models": models} if models else {}
    rep: Report = {
        **_sections(batch, night, docs, feedback),  # the optional sections first (the report's key order)
        "ds": batch.ds, "run_id": batch.run_id, "documents": len(docs),
        "routes_attempt_0": {k: len(v) for k, v in night.attempt_0.items()},
        "final_routes": _sorted(Counter(r.route for r in rows)),
        "rules": _sorted(Counter(r.rule for r in rows if r.rule)),
        "issues_by_code_attempt_0": _sorted(Counter(c for r in rows for c in r.codes_0)),
        "issues_by_code_final": _sorted(Counter(c for r in rows for c in r.codes_final)),
        "errors": [r.error for r in rows if r.error is not None],
        "llm": _llm_section(use, docs, night.stages),
        "implementations": sorted(implementations | {st.parser for st in night.stages.records if st.parser}),
        **with_models,
        "stage_timings": use.timings,
        "per_document": docs,
        "feedback": feedback,
    }
    return rep


def audit_section(ds: str, stage: AuditRead, feedback: FeedbackJSON) -> AuditSection:
    """The night's audit of accepted documents (ADR 0023): the rate, how many accepts, the sample
    with each document's inclusion probability, and the false-accept figures of this night and
    over all nights so far (from the feedback figures; absent until an audit is answered)."""
    out: AuditSection = {"rate": stage.rate, "accepted": stage.accepted, "sample": stage.sample,
                         "written": stage.written, "kept": stage.kept, "weighted_up": stage.weighted_up}
    if isinstance(feedback, dict) and "error" not in feedback:
        out["false_accept_night"] = (feedback.get("false_accept_by_night") or {}).get(ds)
        out["false_accept_overall"] = feedback.get("false_accept")
    return out


def audit_markdown(rep: Report) -> list[str]:
    """The audit section ("" when the night drew no audit)."""
    a = rep.get("audit")
    if not a:
        return []

    def line(fig: FalseAcceptJSON | None) -> str:
        return FalseAcceptFigures.model_validate(fig).show() if fig else "n/a (no audit answered yet)"

    lines = ["## Audit of accepted documents", "",
             f"{len(a['sample'])} of {a['accepted']} accepted document(s) drawn for an SME audit "
             f"(rate {a['rate']}; lower classifier confidence drawn more).", ""]
    if a["weighted_up"]:
        lines += [f"{len(a['weighted_up'])} accepted document(s) drawn with the largest weight because the "
                  "independent reading abstained on them (a text unlike its training material): "
                  + ", ".join(md(d) for d in a["weighted_up"]), ""]
    lines += [f"- {md(d)} (inclusion probability {p:.3f})" for d, p in a["sample"].items()]
    lines += ["", f"False-accept rate this night: {line(a.get('false_accept_night'))}",
              "", f"False-accept rate over all nights: {line(a.get('false_accept_overall'))}", ""]
    return lines


def jury_counts(docs: list[ReportDoc]) -> JurySection:
    actions: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for d in docs:
        for v in d["jury"]:
            actions[v["final_action"]] += 1
            rules[f"rule {v['rule']}"] += 1
            if v["flag_reason"]:
                reasons[v["flag_reason"]] += 1
    return {"documents": len(docs), "findings_reviewed": sum(actions.values()), "final_actions": _sorted(actions),
            "rules": _sorted(rules), "flag_reasons": _sorted(reasons)}


def jury_markdown(rep: Report) -> list[str]:
    lines: list[str] = []
    if rep.get("jury"):
        j = rep["jury"]
        lines += ["## CR_V2 jury", "", f"{j['findings_reviewed']} finding(s) of {j['documents']} document(s) reviewed; "
                  f"final actions: " + ", ".join(f"{k}={v}" for k, v in j["final_actions"].items())
                  + "; rules: " + ", ".join(f"{k}={v}" for k, v in j["rules"].items())
                  + ("; flag reasons: " + ", ".join(f"{k}={v}" for k, v in j["flag_reasons"].items())
                     if j["flag_reasons"] else ""), "",
                  "| document | attempt | agent | finding | A | B | C | decision | flag reason | rule |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for d in rep["per_document"]:
            for v in d.get("jury", []):
                rc = v["reason_codes"]
                cell = [f"{v['votes'][a]}" + (f" ({rc[a]})" if rc.get(a) else "") for a in ("A", "B", "C")]
                lines.append(f"| {d['doc_id']} | {v['attempt']} | {v['agent']} | {v['code']} | " + " | ".join(cell)
                             + f" | {v['final_action']} | {v['flag_reason'] or ''} | {v['rule']} |")
        lines.append("")
    if rep.get("second_opinion"):
        so = rep["second_opinion"]
        lines += ["## V5 second opinion", "", ", ".join(f"{k}={v}" for k, v in so.items()), ""]
    return lines


def feedback_section(store: ArtifactStore) -> FeedbackJSON:
    """The "Feedback from SME reviews" figures over all the store's ground truth so far
    (:func:`docverify.reporting.evaluate.evaluate_store` without its per-document rows). A failure here
    never fails the report: it becomes ``{"error": …}`` (the exception's type only)."""
    try:
        return evaluate.evaluate_store(store).model_dump(mode="json", exclude={"per_document"})
    except Exception as exc:  # the report must be written even when the store cannot be read
        log.warning("feedback figures not computed: %s", type(exc).__name__)
        return {"error": type(exc).__name__, "message": "the feedback figures could not be computed; "
                "run `python -m docverify evaluate --root <root>` to see why"}


def _feedback_figures(rep: Report) -> FeedbackFigures | None:
    fb = rep.get("feedback")
    return None if not fb or "error" in fb else FeedbackFigures.model_validate(fb)


def feedback_markdown(rep: Report) -> str:
    """The feedback section of the Markdown report ("" for a report built before it existed)."""
    if "feedback" not in rep:
        return ""
    figures = _feedback_figures(rep)
    if figures is None:
        return f"## Feedback from SME reviews\n\nnot computed: `{rep['feedback']['error']}`\n"
    return render_markdown(figures, level=2)


def feedback_html(rep: Report) -> str:
    """The feedback section of the HTML report ("" for a report built before it existed)."""
    if "feedback" not in rep:
        return ""
    figures = _feedback_figures(rep)
    if figures is None:
        return (f"<h2>Feedback from SME reviews</h2><p>not computed: "
                f"<code>{html.escape(rep['feedback']['error'])}</code></p>")
    return render_html(figures)


def llm_line(llm: ReportLLM) -> str:
    cost = _money(llm["cost_usd"])
    if llm["price_model"]:
        cost += f" ({llm['price_model']}, {llm['price_source']} list prices)"
    elif llm["cost_note"]:
        cost += f" ({llm['cost_note']})"
    line = (f"calls {llm['calls']} ({llm['calls_per_document']} per document, at most "
            f"{llm['max_calls_per_document']}), cache hits {llm['cache_hits']}, input tokens "
            f"{llm['input_tokens']}, output tokens {llm['output_tokens']}, cached tokens {llm['cached_tokens']}; "
            f"estimated cost {cost}")
    b = llm.get("batch")
    if b:  # batch mode: the calls above are the online ones; the batch jobs' requests at the batch price
        line += (f"; mode batch: {b['requests']} request(s) sent to Gemini batch jobs, {b['succeeded']} answered "
                 f"({b['input_tokens']} input, {b['output_tokens']} output tokens, {_money(b['cost_usd'])} at the "
                 f"batch price: {b['cost_note']}), {b['online_fallback']} failed or missing and asked online; "
                 f"online calls {_money(llm.get('online_cost_usd'))}")
    else:
        line += "; mode online"
    return line


def summary_line(rep: Report) -> str:
    routes = ", ".join(f"{k}={v}" for k, v in rep["final_routes"].items()) or "none"
    inputs = rep.get("inputs") or {}
    ignored = len(inputs.get("ignored_files") or [])
    also = f"; {ignored} file(s) in the folder ignored (not PDFs)" if ignored else ""
    if not rep["documents"]:
        folder = (inputs.get("folder_read") or [""])[0]
        return (f"batch {rep['ds']}: EMPTY NIGHT — 0 documents found{f' in {folder}' if folder else ''}, nothing "
                f"was verified (check the delivery of this date's PDFs and the batch_prefix, then re-run it){also}")
    return (f"batch {rep['ds']}: {rep['documents']} document(s); routes: {routes}; "
            f"errors: {len(rep['errors'])}; LLM calls: {rep['llm']['calls']}{also}")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def md(text: object) -> str:
    """Text for a Markdown table cell or list item: Markdown and HTML characters escaped with
    a backslash, line breaks folded — a file name never becomes markup or a link."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def to_markdown(rep: Report) -> str:
    ignored, note = inputs_lines(rep)
    lines = [f"# docverify batch report — {rep['ds']}", "", summary_line(rep), "", f"**{counts_line(rep)}**", ""]
    if ignored:
        lines += ["## Not verified", "", *[f"- {md(x)}" for x in ignored], *(["", md(note)] if note else []), ""]
    lines += ["## Final routes", "", "| route | documents |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep["final_routes"].items()]
    lines += ["", "## V5 rules that decided", "", "| rule | documents |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep["rules"].items()]
    lines += ["", "## Issues by code (attempt 0)", "", "| code | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep["issues_by_code_attempt_0"].items()] or ["| — | 0 |"]
    lines += ["", "## Documents", "", "| document | route | final decision | rule | attempts | issue codes (attempt 0) |",
              "|---|---|---|---|---|---|"]
    for d in rep["per_document"]:
        lines.append(f"| {md(d['doc_id'])} | {route_label(d)} | {d['final_decision']} | {rule_label(d)} | "
                     f"{d.get('attempts', '')} | {md(codes_label(d))} |")
    lines += ["", "## Errors", ""]
    lines += [f"- **{md(e['doc_id'])}** ({md(e['stage'])}): {md(e['error'])} — {md(e['message'])}"
              for e in rep["errors"]] or ["none"]
    llm = rep["llm"]
    lines += ["", "## LLM usage", "", llm_line(llm), ""]
    used = [d for d in rep["per_document"] if d["llm"]["calls"] or d["llm"]["cache_hits"]]
    if used:
        lines += ["| document | calls | cache hits | input tokens | output tokens | cached tokens | est. cost |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {d['doc_id']} | " + " | ".join(str(c) for c in _llm_cells(d["llm"]))
                  + f" | {_money(d['llm']['cost_usd'])} |" for d in used]
        lines.append("")
    lines += jury_markdown(rep)
    lines += audit_markdown(rep)
    lines += trend_markdown(rep)
    models = models_lines(rep)
    if models:
        lines += ["## Models that classified and judged", "", *[md(x) for x in models], ""]
    lines += ["## Implementations that ran", ""] + [f"- {i}" for i in rep["implementations"]]
    lines += ["", "## Stage timings", "", "| stage | tasks | documents | seconds |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['tasks']} | {v['docs']} | {v['seconds']} |" for k, v in rep["stage_timings"].items()]
    if "ocr" in rep:
        lines += ["", ocr_line(rep["ocr"])]
    feedback = feedback_markdown(rep)
    return "\n".join(lines) + "\n" + (f"\n{feedback}" if feedback else "")


_COLOURS = {"AUTO_ACCEPT": "#2e7d32", "ESCALATE_TO_SME": "#c62828", "UNKNOWN": "#757575"}


def _bars(title: str, data: dict[str, int]) -> str:
    if not data:
        return f"<h2>{html.escape(title)}</h2><p>none</p>"
    width, bar_h, label_w = 640, 24, 260
    top = max(data.values()) or 1
    rows = []
    for i, (k, v) in enumerate(data.items()):
        w = int((width - label_w - 40) * v / top)
        colour = _COLOURS.get(k.split("→")[-1], "#f9a825" if "RETRY" in k else "#1565c0")
        y = i * (bar_h + 6)
        rows.append(f'<text x="0" y="{y + 17}" font-size="13">{html.escape(k)}</text>'
                    f'<rect x="{label_w}" y="{y}" width="{max(w, 2)}" height="{bar_h}" fill="{colour}"/>'
                    f'<text x="{label_w + max(w, 2) + 6}" y="{y + 17}" font-size="13">{v}</text>')
    h = len(data) * (bar_h + 6)
    return (f"<h2>{html.escape(title)}</h2><svg role='img' aria-label='{html.escape(title)}' width='{width}' "
            f"height='{h}' xmlns='http://www.w3.org/2000/svg'>{''.join(rows)}</svg>")


def rule_label(d: ReportDoc) -> str:
    """'rule 5', or 'error CORRUPT' for a document that could not be processed (no V5 rule)."""
    if d.get("error") and d.get("rule") is None:
        return f"error {d['error']}"
    return f"rule {d['rule']}" if d.get("rule") is not None else ""


#: The route a document took, by the task that carried it (the report's ``route`` field).
ROUTE_NAMES = {"accept": "AUTO_ACCEPT", "auto_fix_retry": "AUTO_RETRY", "write_sme_packets": "ESCALATE_TO_SME"}


def route_label(d: ReportDoc) -> str:
    return ROUTE_NAMES.get(str(d.get("route", "")), str(d.get("route", "")))


def codes_label(d: ReportDoc) -> str:
    """Each issue code once, with its count: ``EVIDENCE_FABRICATED ×2, SHARES_SUM``. A document that
    could not be processed has its error in the rule column, not here again."""
    counts = Counter(d.get("issue_codes") or [])
    return ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in counts.items())


def review_link(d: ReportDoc, ds: str) -> str:
    """The review page in the workspace (served by the api-server, where this report is served too:
    /docverify/reports/<night>) of an escalated document, and of an accepted one drawn for the audit
    (its key: the review's with ``_audit``, as the audit stage writes it)."""
    from urllib.parse import quote

    rid = d.get("review_id")
    if rid:
        return f"<a class='review' href='/docverify/reviews/{html.escape(quote(rid, safe=''))}'>review</a>"
    if "audit_packet" in d["outputs"]:
        key = review_id(ds, d["doc_id"], d["sha256"]) + "_audit"
        return f"<a class='audit' href='/docverify/reviews/{html.escape(quote(key, safe=''))}'>audit review</a>"
    return ""


def counts_line(rep: Report) -> str:
    """The night's headline counts, as the reports index and the trend show them (one source:
    :func:`docverify.reporting.trend.night_counts`)."""
    c = trend.night_counts(rep)
    if c.empty:
        return "EMPTY NIGHT: no PDF found, nothing verified."
    retried = f" ({c.retried_accepted} after the automatic fix and retry)" if c.retried_accepted else ""
    return (f"{c.documents} document(s): {c.accepted} accepted{retried}, {c.escalated} escalated to an SME, "
            f"{c.errors} in error" + (f", {c.unknown} without a result" if c.unknown else "") + ".")


#: where the names of the files the report lists by token are (ADR 0050): the night's manifest
_NAMES_NOTE = ("their names are in the night's manifest (runs/{ds}/_manifest.json), which may name a patient: "
               "open it in the storage bucket, not here")


def inputs_lines(rep: Report) -> tuple[list[str], str]:
    """What the night's folder held that was not verified, and where the files' names are ([] and
    "" when nothing): files ignored by discover (neither PDFs nor companions), companions without
    their PDF, documents withdrawn because their PDF left the folder — by count and opaque token."""
    inputs = rep.get("inputs") or {}
    lines = []
    for key, what in (("ignored_files", "file(s) in the folder ignored: neither PDFs nor their companions, not read"),
                      ("orphan_companions", "companion file(s) without their PDF, not read"),
                      ("removed", "document(s) withdrawn: their PDF left the folder since an earlier run")):
        listed = [str(x) for x in inputs.get(key) or []]
        if listed:
            lines.append(f"{len(listed)} {what}: {', '.join(listed)}")
    files = inputs.get("ignored_files") or inputs.get("orphan_companions")
    return lines, ("Files are listed by token; " + _NAMES_NOTE.format(ds=rep["ds"]) + "." if files else "")


def inputs_html(rep: Report) -> str:
    """The "Not verified" section of the HTML report ("" when the folder held only documents)."""
    lines, note = inputs_lines(rep)
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(x)}</li>" for x in lines)
    return f"<h2 id='inputs'>Not verified</h2><ul>{items}</ul>" + (
        f"<p class='muted'>{html.escape(note)}</p>" if note else "") + "\n"


def trail_link(d: ReportDoc) -> str:
    """The document's whole trail across nights and Dags (/docverify/trace/<doc_id>, served beside
    this report: ids and codes, each step linked to its task's log)."""
    from urllib.parse import quote

    return f"<a class='trail' href='/docverify/trace/{html.escape(quote(d['doc_id'], safe=''))}'>trail</a>"


def to_html(rep: Report) -> str:
    esc = html.escape
    docs = "".join(
        f"<tr><td>{esc(d['doc_id'])}</td><td>{esc(route_label(d))}</td><td>{esc(d['final_decision'])}</td>"
        f"<td>{esc(rule_label(d))}</td><td>{esc(str(d.get('attempts', '')))}</td>"
        f"<td>{esc(codes_label(d))}</td><td>{review_link(d, rep['ds'])}</td><td>{trail_link(d)}</td></tr>"
        for d in rep["per_document"])
    errors = "".join(f"<li><b>{esc(e['doc_id'])}</b> ({esc(e['stage'])}): <code>{esc(e['error'])}</code> — "
                     f"{esc(e['message'])}</li>" for e in rep["errors"]) or "<li>none</li>"
    stages = "".join(f"<tr><td>{esc(k)}</td><td>{v['tasks']}</td><td>{v['docs']}</td><td>{v['seconds']}</td></tr>"
                     for k, v in rep["stage_timings"].items())
    llm = rep["llm"]
    used = [d for d in rep["per_document"] if d["llm"]["calls"] or d["llm"]["cache_hits"]]
    llm_table = ("<table><tr><th>document</th><th>calls</th><th>cache hits</th><th>input tokens</th>"
                 "<th>output tokens</th><th>cached tokens</th><th>est. cost</th></tr>"
                 + "".join(f"<tr><td>{esc(d['doc_id'])}</td>" + "".join(f"<td>{c}</td>" for c in _llm_cells(d["llm"]))
                           + f"<td>{esc(_money(d['llm']['cost_usd']))}</td></tr>" for d in used)
                 + "</table>") if used else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>docverify batch report {esc(rep['ds'])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1000px}}table{{border-collapse:collapse;max-width:100%}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}th{{background:#f3f3f3}}code{{background:#f6f6f6}}
td:first-child,li,p,code{{overflow-wrap:anywhere}}table.docs td:first-child{{min-width:12em}}.muted{{color:#666}}</style>
</head><body>
<h1>docverify batch report — {esc(rep['ds'])}</h1>
<p>{esc(summary_line(rep))}</p>
<p class='counts'><b>{esc(counts_line(rep))}</b></p>
{inputs_html(rep)}{_bars("Final routes", rep["final_routes"])}
{_bars("V5 rules that decided", rep["rules"])}
{_bars("Issues by code (attempt 0)", rep["issues_by_code_attempt_0"])}
<h2>Documents</h2>
<table class='docs'><tr><th>document</th><th>route</th><th>final decision</th><th>rule</th><th>attempts</th><th>issue codes (attempt 0)</th><th>SME</th><th>trail</th></tr>{docs}</table>
<h2>Errors</h2><ul>{errors}</ul>
<h2>LLM usage</h2><p>{esc(llm_line(llm))}</p>{llm_table}
{models_html(rep)}{jury_html(rep)}{audit_html(rep)}{trend_html(rep)}<h2>Implementations that ran</h2><ul>{''.join(f"<li>{esc(i)}</li>" for i in rep['implementations'])}</ul>
<h2>Stage timings</h2><table><tr><th>stage</th><th>tasks</th><th>documents</th><th>seconds</th></tr>{stages}</table>
{f"<p>{esc(ocr_line(rep['ocr']))}</p>" if "ocr" in rep else ""}{feedback_html(rep)}</body></html>
"""


def ocr_line(ocr: OCRTotals) -> str:
    """The layout's OCR work in one sentence (ADR 0052)."""
    return (f"OCR (layout): {ocr['pages']} page(s) of {ocr['documents']} document(s) in {ocr['seconds']:.1f} s "
            f"(summed over the parse workers)")


def models_html(rep: Report) -> str:
    """The "Models that classified and judged" section as HTML ("" without it)."""
    lines = models_lines(rep)
    if not lines:
        return ""
    return ("<h2>Models that classified and judged</h2><ul>"
            + "".join(f"<li>{html.escape(x[2:])}</li>" for x in lines) + "</ul>\n")


def trend_markdown(rep: Report) -> list[str]:
    return trend.markdown(rep.get("trend") or [])


def trend_html(rep: Report) -> str:
    """The trend table as HTML ("" without rows)."""
    lines = trend_markdown(rep)
    if not lines:
        return ""
    esc = html.escape
    rows = [line for line in lines if line.startswith("| ")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    table = "".join("<tr>" + "".join(f"<{t}>{esc(c)}</{t}>" for c in cs) + "</tr>"
                    for t, cs in zip(["th"] + ["td"] * (len(cells) - 1), cells, strict=True))
    return f"<h2>Trend over the last nights</h2><table>{table}</table><p>{esc(lines[-2])}</p>\n"


def audit_html(rep: Report) -> str:
    """The audit section as HTML ("" when the night drew no audit)."""
    lines = audit_markdown(rep)
    if not lines:
        return ""
    esc = html.escape
    items = "".join(f"<li>{esc(x[2:].replace(chr(92), ''))}</li>" for x in lines if x.startswith("- "))
    paras = "".join(f"<p>{esc(x)}</p>" for x in lines[2:] if x and not x.startswith("- "))
    return f"<h2>Audit of accepted documents</h2>{paras}<ul>{items}</ul>\n"


def jury_html(rep: Report) -> str:
    """The jury and second-opinion sections ("" when neither ran)."""
    md = jury_markdown(rep)
    if not md:
        return ""
    out: list[str] = []
    rows: list[str] = []
    for line in md:
        if line.startswith("## "):
            if rows:
                out.append("<table>" + "".join(rows) + "</table>")
                rows = []
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("|---"):
            continue
        elif line.startswith("| "):
            tag = "th" if not rows else "td"
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
        elif line:
            out.append(f"<p>{html.escape(line)}</p>")
    if rows:
        out.append("<table>" + "".join(rows) + "</table>")
    return "\n".join(out) + "\n"


def write(batch: Batch) -> ReportWritten:
    """Build the night's report and write it as JSON, Markdown and HTML (and the trend); returns
    what was written (the Airflow task's XCom is made from it)."""
    rep = build(batch)
    rs = batch.rs
    trend_uris: dict[str, str]
    try:  # the last nights from the stored reports (a failure here never fails the report)
        rep["trend"] = trend.night_rows(batch.store, rep.copy())
        trend_uris = trend.write(batch.store, rep["trend"])
    except Exception as exc:
        log.warning("trend not written: %s", type(exc).__name__)
        rep["trend"], trend_uris = [], {}
    rs.write_json(rs.report_rel("json"), rep)  # like .md and .html: rewritten each run (timings change)
    rs.write_text(rs.report_rel("md"), to_markdown(rep))
    rs.write_text(rs.report_rel("html"), to_html(rep))
    for d in rep["per_document"]:
        lineage("batch_report", d["doc_id"], final_decision=d["final_decision"], rule=d.get("rule"),
                outputs=d["outputs"])
    written: ReportWritten = {
        "summary": summary_line(rep), "json": rs.uri(rs.report_rel("json")),
        "markdown": rs.uri(rs.report_rel("md")), "html": rs.uri(rs.report_rel("html")),
        "final_routes": rep["final_routes"], "errors": len(rep["errors"]), "trend": trend_uris,
        "false_accept_night": rep["audit"].get("false_accept_night") if "audit" in rep else None, "night": night_facts(rep)}
    return written


def night_facts(rep: Report) -> NightFacts:
    """The night in counts, codes and implementation ids (the OpenLineage night facet): no
    document id, no file name, no message."""
    llm = rep["llm"]
    models = rep.get("models")  # an empty night classified nothing
    return {"night": rep["ds"], "documents": rep["documents"], "final_routes": dict(rep["final_routes"]),
            "rules": dict(rep["rules"]), "issue_codes": dict(rep["issues_by_code_final"]),
            "error_codes": dict(Counter(e["error"] for e in rep["errors"])),
            "implementations": list(rep["implementations"]),
            "models": {"classifier": models["classifier"] if models else None,
                       "judge": models["judge"] if models else None,
                       "self_verifying": models["self_verifying"] if models else None},
            "llm": {"mode": llm["mode"], "calls": llm["calls"], "cache_hits": llm["cache_hits"],
                    "input_tokens": llm["input_tokens"], "output_tokens": llm["output_tokens"],
                    "cost_usd": llm["cost_usd"], "price_model": llm["price_model"]}}
