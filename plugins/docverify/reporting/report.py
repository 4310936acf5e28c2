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

from docverify.llm.cost import CostEstimate, estimate_cost
from docverify.reporting import evaluate, trend
from docverify.reporting.contract import (
    AuditSection,
    BatchJob,
    BatchKey,
    BatchRound,
    BatchSection,
    DocLLM,
    DocOutputs,
    FalseAcceptJSON,
    FeedbackJSON,
    JurySection,
    ModelsSection,
    NightFacts,
    OCRTotals,
    Report,
    ReportDoc,
    ReportError,
    ReportLLM,
    ReportWritten,
    StageTiming,
)
from docverify.reporting.evaluate import FalseAcceptFigures, FeedbackFigures
from docverify.reporting.evaluate_render import render_html, render_markdown
from docverify.sme.packets import review_id
from docverify.storage.night import Batch, lineage, load_stage_stats
from docverify.storage.paths import file_token, redact_names
from docverify.storage.runstore import DocSummary, StageRecord, SummaryError
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


def _models_section(stages: list[StageRecord]) -> ModelsSection | None:
    """The models that classified and judged the night, and the warning when they are the same."""
    seen = [st["models"] for st in stages if isinstance(st.get("models"), dict)]
    if not seen:
        return None
    classifiers = sorted({m["classifier"] for m in seen if m.get("classifier")})
    judges = sorted({m["judge"] for m in seen if m.get("judge")})
    flags = [m.get("self_verifying") for m in seen]
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


def _batch_section(records: list[BatchRound], price_model: str | None) -> BatchSection:
    """Batch mode's rounds (``_stages/llm_batch_*.json``): requests sent to batch jobs, what came
    back, what verify asked online instead, and the served requests' cost at the batch price."""
    if not records:
        return {}
    total: Counter[str] = Counter()
    for r in records:
        total.update({k: int(r.get(k) or 0) for k in BATCH_KEYS})
    model = price_model or next((r.get("model") for r in records if r.get("model")), None)
    cost = _cost(model, total, batch=True)
    return {  # the totals in the order of BATCH_KEYS
        "requests": total["requests"], "succeeded": total["succeeded"], "failed": total["failed"],
        "missing": total["missing"], "degenerate": total["degenerate"], "online_fallback": total["online_fallback"],
        "input_tokens": total["input_tokens"], "output_tokens": total["output_tokens"],
        "cached_tokens": total["cached_tokens"],
        "jobs": [BatchJob(round=r.get("round"), job=r.get("job"), state=r.get("state"), requests=r.get("requests", 0))
                 for r in records],
        "cost_usd": cost.usd, "cost_note": cost.note}


def _money(usd: float | None) -> str:
    return "n/a" if usd is None else f"${usd:.4f}"


def _sorted(c: Counter[str]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))}


def build(batch: Batch) -> Report:
    """The report from the manifest, the routes (every verified document's summary and the error
    records), the stage records (timings, LLM usage, outputs written) and, for the documents that
    went to the retry, their result — no other per-document read."""
    rs = batch.rs
    manifest = rs.manifest()
    routes_doc = rs.routes()
    routes0 = routes_doc.routes if routes_doc else {}
    stages = load_stage_stats(batch)
    summaries: dict[str, DocSummary] = dict(routes_doc.documents) if routes_doc else {}
    for doc_id in routes0.get("auto_fix_retry", []):  # their final result is the retry's
        rec = rs.result(doc_id)
        if rec is not None and (rec.result is not None or rec.error is not None):
            summaries[doc_id] = doc_summary(rec)
        else:
            summaries.pop(doc_id, None)
        rs.forget(doc_id)
    by_stage = {s.get("stage"): s for s in stages}
    accepted = set((by_stage.get("accept") or {}).get("documents") or [])
    packets = set((by_stage.get("write_sme_packets") or {}).get("written") or []) | set(
        (by_stage.get("write_sme_packets") or {}).get("kept_reviewed") or [])
    audit_stage = by_stage.get("audit_sample")
    audit_sample = (audit_stage.get("sample") if audit_stage else None) or {}
    docs: list[ReportDoc] = []
    final_routes: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    codes_final: Counter[str] = Counter()
    errors: list[ReportError] = []
    implementations: set[str] = set()
    for d in manifest.documents:
        doc_id = d.doc_id
        # no input URI and no message naming the file (ADR 0050): the manifest and the packet name it
        entry: ReportDoc = {"doc_id": doc_id, "sha256": d.sha256}
        s = summaries.get(doc_id)
        record = routes_doc.errors.get(doc_id) if routes_doc else None
        err: SummaryError | None = None if record is None else {
            "stage": record.stage, "error": record.error, "message": record.message}
        if err is None and s is not None and s.get("error"):
            err = s["error"]
        if s is not None:
            implementations.update(s.get("implementations") or [])
        if err is not None:
            errors.append({"doc_id": doc_id, "stage": err["stage"], "error": err["error"],
                           "message": redact_names(err["message"], doc_id, d.pdf_uri, d.pdf_rel,
                                                   d.classification_rel, d.production_rel)})
            entry["review_id"] = review_id(batch.ds, doc_id, d.sha256)
            # no verification ran: the reason is the error, not a V5 rule (ADR 0008)
            entry.update({"final_decision": "ESCALATE_TO_SME", "rule": None, "reason": "error", "error": err["error"],
                          "attempts": 0, "route": "write_sme_packets"})
            final_routes["ESCALATE_TO_SME"] += 1
            rules["error"] += 1
        elif s is not None and s.get("final_decision"):
            went_retry = doc_id in routes0.get("auto_fix_retry", [])
            entry.update({"final_decision": s["final_decision"], "rule": s["rule"], "attempts": s["attempts"],
                          "stop_reason": s["stop_reason"], "route": "auto_fix_retry" if went_retry else (
                              "accept" if s["final_decision"] == "AUTO_ACCEPT" else "write_sme_packets"),
                          "issue_codes": s["issue_codes"], "quality_score": s["quality_score"], "fixes": s["fixes"]})
            if s["final_decision"] == "ESCALATE_TO_SME":
                entry["review_id"] = review_id(batch.ds, doc_id, d.sha256)
            key = s["final_decision"] if not went_retry else f"AUTO_RETRY→{s['final_decision']}"
            final_routes[key] += 1
            rules[f"rule {s['rule']}" + (f" ({s['stop_reason']})" if s["stop_reason"] not in ("arbiter",) else "")] += 1
            codes.update(s["issue_codes_attempt_0"])
            codes_final.update(s["issue_codes_final"])
            entry["v5_audit"] = s["v5_audit"]
            if s.get("jury"):
                entry["jury"] = s["jury"]
        else:
            entry.update({"final_decision": "UNKNOWN", "error": "NOT_VERIFIED"})
            errors.append({"doc_id": doc_id, "stage": "verify", "error": "NOT_VERIFIED",
                           "message": "no verification result: a task failed for this document (see its log)"})
            final_routes["UNKNOWN"] += 1
        out: DocOutputs = {}
        if doc_id in accepted:
            out["accepted"] = rs.uri(rs.accepted_rel(doc_id))
        if doc_id in packets:
            out["sme_packet"] = rs.uri(rs.packet_rel(review_id(batch.ds, doc_id, entry.get("sha256"))))
        if doc_id in audit_sample:
            out["audit_packet"] = rs.uri(rs.packet_rel(review_id(batch.ds, doc_id, entry.get("sha256")) + "_audit"))
        out["run_dir"] = rs.uri(rs.run_dir(doc_id))
        entry["outputs"] = out
        docs.append(entry)

    llm: Counter[str] = Counter()
    per_doc_llm: dict[str, Counter[str]] = {}
    price_models: set[str] = set()
    by_model: dict[str, Counter[str]] = {}  # ADR 0034: a stage whose calls ran on several models
    timings: dict[str, StageTiming] = {}
    for st in stages:
        for doc_id, u in (st.get("llm_per_document") or {}).items():
            per_doc_llm.setdefault(doc_id, Counter()).update(u)
        if st.get("llm_by_model"):
            for m, u in st["llm_by_model"].items():
                by_model.setdefault(m, Counter()).update(u)
                price_models.add(m)
        elif (pm := st.get("price_model")):
            price_models.add(pm)
            if st.get("llm"):
                by_model.setdefault(pm, Counter()).update(st["llm"])
        name = st["stage"]
        t = timings.setdefault(name, {"seconds": 0.0, "tasks": 0, "docs": 0})
        t["seconds"] = round(t["seconds"] + st["seconds"], 3)
        t["tasks"] += 1
        t["docs"] += st["docs"]
        for k, v in st.get("llm", {}).items():
            llm[k] += v
        if st.get("parser"):
            implementations.add(st["parser"])
    n = len(docs)
    price_model = sorted(price_models)[0] if len(price_models) == 1 else None
    batch_records = [s["llm_batch"] for s in stages if s.get("llm_batch")]
    per_doc_batch: dict[str, Counter[str]] = {}
    for st in stages:
        for doc_id, u in (st.get("llm_batch_per_document") or {}).items():
            per_doc_batch.setdefault(doc_id, Counter()).update(u)
    for entry in docs:
        u = per_doc_llm.get(entry["doc_id"], Counter())
        doc_llm: DocLLM = {"calls": u.get("calls", 0), "cache_hits": u.get("cache_hits", 0),  # USAGE_KEYS' order
                           "input_tokens": u.get("input_tokens", 0), "output_tokens": u.get("output_tokens", 0),
                           "cached_tokens": u.get("cached_tokens", 0), "cost_usd": _cost(price_model, u).usd}
        entry["llm"] = doc_llm
        b = per_doc_batch.get(entry["doc_id"])
        if b:  # requests served by a batch job, at the batch price (ADR 0016)
            bc = _cost(price_model, b, batch=True).usd
            online = doc_llm["cost_usd"]
            doc_llm["batch_requests"] = b.get("requests", 0)
            doc_llm["cost_usd"] = None if bc is None or online is None else round(online + bc, 6)
    cost = _cost(price_model, llm)
    if len(price_models) > 1:
        cost = _cost_per_model(by_model, llm, cost, sorted(price_models))
    batch_section = _batch_section(batch_records, price_model if len(price_models) <= 1 else None)
    extra: Report = {}
    jury_docs = [d for d in docs if d.get("jury")]
    if jury_docs:
        extra["jury"] = jury_counts(jury_docs)
    feedback = feedback_section(batch.store)
    if audit_stage:
        extra["audit"] = audit_section(batch.ds, audit_stage, feedback)
    so = [st["second_opinion"] for st in stages if st.get("second_opinion") is not None]
    if so:
        total: Counter[str] = Counter()
        for c in so:
            total.update(c)
        extra["second_opinion"] = dict(sorted(total.items()))
    layout = by_stage.get("layout") or {}
    if layout.get("ocr_pages"):  # the local layout's OCR work, per document in its record (ADR 0052)
        extra["ocr"] = {"documents": len(layout.get("ocr") or {}), "pages": int(layout["ocr_pages"]),
                        "seconds": float(layout.get("ocr_seconds") or 0.0)}
    inputs = {k: got for k in ("orphan_companions", "removed", "ignored_files")
              if (got := (manifest.model_extra or {}).get(k))}
    for k in ("orphan_companions", "ignored_files"):  # opaque tokens, in the manifest's order (ADR 0050)
        if k in inputs:
            inputs[k] = [file_token(n) for n in inputs[k]]
    if not manifest.documents and manifest.incoming:  # an empty night names the folder it read (ADR 0036)
        inputs["folder_read"] = [manifest.incoming]
    if inputs:  # what the night's folder held besides its documents, and what left it (ADR 0024)
        extra["inputs"] = inputs
    batch_cost = batch_section.get("cost_usd")
    rep: Report = extra  # the optional sections first (the report's key order as written)
    rep.update({
        "ds": batch.ds, "run_id": batch.run_id, "documents": n,
        "routes_attempt_0": {k: len(v) for k, v in routes0.items()},
        "final_routes": _sorted(final_routes),
        "rules": _sorted(rules),
        "issues_by_code_attempt_0": _sorted(codes),
        "issues_by_code_final": _sorted(codes_final),
        "errors": errors,
        "llm": {"calls": llm["calls"], "cache_hits": llm["cache_hits"], "input_tokens": llm["input_tokens"],
                "output_tokens": llm["output_tokens"], "cached_tokens": llm["cached_tokens"],
                "calls_per_document": round(llm["calls"] / n, 3) if n else 0.0,
                "max_calls_per_document": max((d["llm"]["calls"] for d in docs), default=0),
                "cost_usd": cost.usd if not batch_section else (
                    None if cost.usd is None or batch_cost is None else round(cost.usd + batch_cost, 6)),
                "price_model": cost.model, "price_source": cost.source, "cost_note": cost.note,
                "mode": "batch" if batch_section else "online",
                **({"online_cost_usd": cost.usd, "batch": batch_section} if batch_section else {})},
        "implementations": sorted(implementations),
        **({"models": models} if (models := _models_section(stages)) else {}),
        "stage_timings": timings,
        "per_document": docs,
        "feedback": feedback,
    })
    return rep


def audit_section(ds: str, stage: StageRecord, feedback: FeedbackJSON) -> AuditSection:
    """The night's audit of accepted documents (ADR 0023): the rate, how many accepts, the sample
    with each document's inclusion probability, and the false-accept figures of this night and
    over all nights so far (from the feedback figures; absent until an audit is answered)."""
    out: AuditSection = {"rate": stage.get("rate"), "accepted": stage.get("accepted", 0),
                         "sample": stage.get("sample") or {}, "written": stage.get("written") or [],
                         "kept": stage.get("kept") or [], "weighted_up": stage.get("weighted_up") or []}
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
    if a.get("weighted_up"):
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
                rc = v.get("reason_codes", {})
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
    cost = _money(llm.get("cost_usd"))
    if llm.get("price_model"):
        cost += f" ({llm['price_model']}, {llm['price_source']} list prices)"
    elif llm.get("cost_note"):
        cost += f" ({llm['cost_note']})"
    line = (f"calls {llm['calls']} ({llm['calls_per_document']} per document, at most "
            f"{llm.get('max_calls_per_document', 0)}), cache hits {llm['cache_hits']}, input tokens "
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
    used = [d for d in rep["per_document"] if d.get("llm", {}).get("calls") or d.get("llm", {}).get("cache_hits")]
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
    if (d.get("outputs") or {}).get("audit_packet"):
        key = review_id(ds, d["doc_id"], d.get("sha256")) + "_audit"
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
    used = [d for d in rep["per_document"] if d.get("llm", {}).get("calls") or d.get("llm", {}).get("cache_hits")]
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
        "false_accept_night": (rep.get("audit") or {}).get("false_accept_night"), "night": night_facts(rep)}
    return written


def night_facts(rep: Report) -> NightFacts:
    """The night in counts, codes and implementation ids (the OpenLineage night facet): no
    document id, no file name, no message."""
    llm: ReportLLM = rep.get("llm") or {}
    models = rep.get("models")  # an empty night classified nothing
    return {"night": rep["ds"], "documents": rep["documents"], "final_routes": dict(rep["final_routes"]),
            "rules": dict(rep.get("rules") or {}), "issue_codes": dict(rep.get("issues_by_code_final") or {}),
            "error_codes": dict(Counter(str(e.get("error")) for e in rep.get("errors") or [])),
            "implementations": list(rep.get("implementations") or []),
            "models": {"classifier": models.get("classifier") if models else None,
                       "judge": models.get("judge") if models else None,
                       "self_verifying": models.get("self_verifying") if models else None},
            "llm": {"mode": llm.get("mode"), "calls": llm.get("calls"), "cache_hits": llm.get("cache_hits"),
                    "input_tokens": llm.get("input_tokens"), "output_tokens": llm.get("output_tokens"),
                    "cost_usd": llm.get("cost_usd"), "price_model": llm.get("price_model")}}
