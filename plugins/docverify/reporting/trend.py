"""The trend over the last nights (ADR 0023): one row per night from the stored batch reports
(``reports/<ds>/batch_report.json``), with the false-accept rate of each night from the ground
truth so far (audits are answered after their night's report was written). Exported as
``reports/trend.json`` and ``reports/trend.csv`` for a warehouse, and shown in the batch report.

Columns: night, documents, the final routes (accepted — directly or after the automatic fix and
retry —, of them retried then accepted, escalated, unknown), escalation rate (escalated / documents), audited (documents drawn for the audit), the night's
false-accept rate with its 95 % Wilson interval and n (answered audits), the LLM cost (USD, None
when unpriced) and ``task_seconds`` — the sum of the night's stage timings (task time, not the
run's wall-clock span, which the report does not hold).

:func:`night_counts` is the one source of a night's headline counts: the trend row, the report's
counts line and the reports index read them from it (issue 42: the index counted only the direct
accepts, 8, where the night's trend row said 9)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, JsonValue

from docverify.reporting.contract import FalseAcceptJSON, FeedbackJSON, Report, TrendRow
from docverify.storage.store import ArtifactStore

TREND_NIGHTS = 14
COLUMNS = ("night", "documents", "accepted", "retried_accepted", "escalated", "unknown", "escalation_rate",
           "audited", "false_accept_rate", "false_accept_ci95_low", "false_accept_ci95_high", "false_accept_n",
           "cost_usd", "task_seconds")
_NIGHT = re.compile(r"\d{4}-\d\d-\d\d")


@dataclass(frozen=True)
class NightCounts:
    """A night's headline counts from its report's final routes (after the retry)."""

    documents: int
    accepted: int  #: accepted at last: directly or after the automatic fix and retry
    retried_accepted: int  #: of them, accepted after the retry
    escalated: int  #: escalated at last: directly, after the retry, or unreadable
    unknown: int  #: no verification result (a task failed)
    errors: int  #: rows of the report's Errors section

    @property
    def empty(self) -> bool:
        """An EMPTY NIGHT: no PDF found in the night's folder."""
        return self.documents == 0

    @property
    def escalation_rate(self) -> float | None:
        return round(self.escalated / self.documents, 4) if self.documents else None


class _AuditRead(BaseModel):
    sample: dict[str, float] = {}


class _LLMRead(BaseModel):
    cost_usd: float | int | None = None


class _TimingRead(BaseModel):
    seconds: float | int = 0.0


class StoredReport(BaseModel):
    """A batch report read back (a stored one, or the one being written): the keys the trend and the
    reports index read, validated once where the report is read (ADR 0056). An older night's report
    may lack a section: each key has its empty default."""

    model_config = ConfigDict(frozen=True)

    ds: str | None = None
    run_id: str | None = None
    documents: int | None = 0
    final_routes: dict[str, int] = {}
    errors: list[dict[str, str | None]] = []
    audit: _AuditRead | None = None
    llm: _LLMRead = _LLMRead()
    stage_timings: dict[str, _TimingRead] = {}

    @classmethod
    def of(cls, rep: Report | dict[str, JsonValue] | StoredReport) -> StoredReport:
        return rep if isinstance(rep, StoredReport) else cls.model_validate(rep)


def night_counts(rep: Report | dict[str, JsonValue] | StoredReport) -> NightCounts:
    """The counts of a report (the one being written or a stored one, read as :class:`StoredReport`)."""
    r = StoredReport.of(rep)

    def ending(final: str) -> int:
        return sum(v for k, v in r.final_routes.items() if k.split("→")[-1] == final)
    return NightCounts(documents=r.documents or 0, accepted=ending("AUTO_ACCEPT"),
                       retried_accepted=r.final_routes.get("AUTO_RETRY→AUTO_ACCEPT", 0),
                       escalated=ending("ESCALATE_TO_SME"), unknown=r.final_routes.get("UNKNOWN", 0),
                       errors=len(r.errors))


def _row(rep: StoredReport, fa: FalseAcceptJSON | None) -> TrendRow:
    c = night_counts(rep)
    return {
        "night": rep.ds, "documents": c.documents,
        "accepted": c.accepted, "retried_accepted": c.retried_accepted,
        "escalated": c.escalated, "unknown": c.unknown,
        "escalation_rate": c.escalation_rate,
        "audited": len(rep.audit.sample) if rep.audit else 0,
        "false_accept_rate": fa["rate"] if fa else None,
        "false_accept_ci95_low": fa["ci95_low"] if fa else None,
        "false_accept_ci95_high": fa["ci95_high"] if fa else None, "false_accept_n": fa["n"] if fa else 0,
        "cost_usd": rep.llm.cost_usd,
        "task_seconds": round(sum(t.seconds for t in rep.stage_timings.values()), 3),
    }


def build(store: ArtifactStore, current: Report | None = None, nights: int = TREND_NIGHTS, *,
          feedback: FeedbackJSON | None = None) -> list[dict[str, object]]:
    """:func:`night_rows` as plain JSON objects (the trend pages' rows)."""
    return [dict(r) for r in night_rows(store, current, nights, feedback=feedback)]


def night_rows(store: ArtifactStore, current: Report | None = None, nights: int = TREND_NIGHTS, *,
               feedback: FeedbackJSON | None = None) -> list[TrendRow]:
    """The last ``nights`` nights, oldest first: the stored reports, with ``current`` (the report
    being written) in place of its night's stored one. A report that cannot be read is skipped.
    The false-accept figures come from ``feedback`` (the feedback figures as a dict), else from
    ``current``'s."""
    reports: dict[str, StoredReport] = {}
    for name, kind, _ in store.entries("reports"):
        if kind != "other" or not _NIGHT.fullmatch(name):
            continue
        stored = read_stored_report(store, name)
        if stored is not None:
            reports[name] = stored
    if current is not None:
        reports[current["ds"]] = StoredReport.of(current)
    fb = feedback if feedback is not None else current["feedback"] if current is not None else {}
    by_night: dict[str, FalseAcceptJSON] = fb.get("false_accept_by_night") or {} if "error" not in fb else {}
    return [_row(reports[d], by_night.get(d)) for d in sorted(reports)[-nights:]]


def read_stored_report(store: ArtifactStore, night: str) -> StoredReport | None:
    """A night's stored batch report, validated once; ``None`` when there is none or it cannot be read
    or is not a report (a pydantic ValidationError is a ValueError): the trend and the reports index skip it."""
    try:
        raw = store.read_json_if_exists(f"reports/{night}/batch_report.json")
        return StoredReport.model_validate(raw) if isinstance(raw, dict) else None
    except (OSError, ValueError):
        return None


def to_csv(rows: Sequence[Mapping[str, object]]) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r.get(k) is None else r[k] for k in COLUMNS})
    return out.getvalue()


def write(store: ArtifactStore, rows: Sequence[TrendRow]) -> dict[str, str]:
    """``reports/trend.json`` and ``reports/trend.csv`` (rewritten with every report)."""
    store.write_text("reports/trend.json", json.dumps({"nights": rows, "columns": list(COLUMNS)}, indent=1))
    store.write_text("reports/trend.csv", to_csv(rows))
    return {"json": store.uri("reports/trend.json"), "csv": store.uri("reports/trend.csv")}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown(rows: Sequence[TrendRow]) -> list[str]:
    """The trend table as Markdown lines ([] without rows)."""
    if not rows:
        return []
    lines = ["## Trend over the last nights", "",
             "| night | documents | accepted | escalated | escalation rate | audited | false-accept rate (95% CI, n) "
             "| cost | task seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fa = ("n/a" if r["false_accept_rate"] is None else
              f"{_pct(r['false_accept_rate'])} ({_pct(r['false_accept_ci95_low'])}–{_pct(r['false_accept_ci95_high'])}, "
              f"n={r['false_accept_n']})")
        cost = "n/a" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}"
        lines.append(f"| {r['night']} | {r['documents']} | {r['accepted']} | {r['escalated']} | "
                     f"{_pct(r['escalation_rate'])} | {r['audited']} | {fa} | {cost} | {r['task_seconds']} |")
    return lines + ["", "Exported as `reports/trend.json` and `reports/trend.csv`.", ""]
