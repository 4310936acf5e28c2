"""The feedback figures of :mod:`docverify.reporting.evaluate` for people: a terminal table (tabulate),
Markdown and an HTML fragment (Jinja2 templates ``include/templates/feedback_figures.*.j2``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tabulate import tabulate
from typing_extensions import TypedDict

from docverify.domain.templating import render
from docverify.reporting.evaluate import NA, AccuracyFigures, CodeFigures, CorpusFigures, FeedbackFigures


def _pct(x: float | None) -> str:
    return NA if x is None else f"{100 * x:.1f}%"


def accuracy_rows(a: AccuracyFigures) -> list[tuple[str, str]]:
    """(figure, value) rows of the accuracy figures, shared by the text, Markdown and HTML."""
    mean = _pct(a.page_accuracy_document_mean)
    return [
        ("dominant-type accuracy", a.dominant_type_accuracy.show()),
        ("page-level accuracy (over pages)", a.page_accuracy.show()),
        ("page-level accuracy (mean per document)", f"{mean} over {a.page_accuracy_documents} document(s)"),
        ("pages no primary segment covers (counted wrong)", str(a.pages_not_covered)),
        ("split accuracy (exact segments)", a.split_accuracy.show()),
        ("boundary precision", a.boundary_precision.show()),
        ("boundary recall", a.boundary_recall.show()),
        ("documents without segment truth (dominant type only)", str(a.documents_without_segment_truth)),
    ]


def summary_rows(f: FeedbackFigures) -> list[tuple[str, str]]:
    """(figure, value) rows of the store's feedback figures."""
    reasons = Counter(u.reason for u in f.unclassifiable)
    unclassifiable = f"{f.n_unclassifiable}" + (
        f" ({', '.join(f'{r}: {n}' for r, n in sorted(reasons.items()))}; "
        f"{', '.join(u.doc_id for u in f.unclassifiable)})" if reasons else "")
    missing = f"{f.n_primary_missing}" + (f" ({', '.join(f.primary_missing_doc_ids)})" if f.primary_missing_doc_ids else "")
    return [
        ("reviewed documents (latest ground truth)", str(f.n_reviewed)),
        ("  validated (SME_VALIDATED)", str(f.n_validated)),
        ("  corrected (SME_CORRECTED)", str(f.n_corrected)),
        ("  cannot classify (SME_UNCLASSIFIABLE; not scored)", unclassifiable),
        ("primary classification missing (not scored)", missing),
        ("escalation precision (escalations the SME corrected)", f.escalation_precision.show()),
        ("false-accept rate (audited accepts the SME corrected, weighted; Wilson 95% CI)", f.false_accept.show()),
        *accuracy_rows(f.accuracy),
    ]


def code_rows(table: dict[str, CodeFigures]) -> list[tuple[str, str, str, str, str]]:
    """(code, n, validated, corrected, rate) rows, most frequent first."""
    items = sorted(table.items(), key=lambda kv: (-kv[1].n, kv[0]))
    return [(k, str(v.n), str(v.validated), str(v.corrected), _pct(v.false_alarm_rate)) for k, v in items]


class CodeTable(TypedDict):
    """One table of :func:`code_tables`."""

    title: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]


def code_tables(f: FeedbackFigures) -> list[CodeTable]:
    """The per-code, per-trap, per-rule (and per-jury-decision) tables: title, header, rows."""
    specs = [
        ("False alarms per issue code", f.false_alarm_by_code,
         ("code", "n", "validated", "corrected", "false-alarm rate")),
        ("False alarms per trap (V3 TRAP_* codes)", f.false_alarm_by_trap,
         ("trap", "n", "validated", "corrected", "false-alarm rate")),
        ("Escalations per V5 rule", f.escalation_by_rule,
         ("rule", "n", "validated", "corrected", "false-alarm rate")),
    ] + ([("False alarms per code with the CR_V2 jury's decision", f.false_alarm_by_jury,
           ("code → jury", "n", "validated", "corrected", "validated share"))] if f.false_alarm_by_jury else [])
    out: list[CodeTable] = [{"title": title, "header": header, "rows": code_rows(table)}
                            for title, table, header in specs]
    if f.n_audited:
        head = ("n", "corrected", "false-accept rate (95% CI)")
        out += [{"title": "False accepts per document type (audits)", "header": ("accepted type", *head),
                 "rows": [(k, str(v.n), str(v.corrected), v.show()) for k, v in f.false_accept_by_type.items()]},
                {"title": "False accepts per night (audits)", "header": ("night", *head),
                 "rows": [(k, str(v.n), str(v.corrected), v.show()) for k, v in f.false_accept_by_night.items()]},
                {"title": "Errors the audits found", "header": ("kind", "documents"),
                 "rows": [(k, str(v)) for k, v in f.false_accept_errors.items()]}]
    return out


def per_corpus_rows(corpus: CorpusFigures) -> list[tuple[str, str, str, str]]:
    return [(k, str(v.documents), v.dominant_type_accuracy.show(), v.page_accuracy.show())
            for k, v in corpus.per_corpus.items()]


def _text_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """tabulate's "simple" table; cells keep their leading spaces (the summary indents sub-counts)."""
    text = tabulate(rows, headers=header, tablefmt="simple", disable_numparse=True, preserve_whitespace=True)
    return [line.rstrip() for line in text.split("\n")]


def render_text(figures: FeedbackFigures, corpus: CorpusFigures | None = None) -> str:
    """A plain-text table for the terminal."""
    out = [f"docverify feedback figures — {figures.source}", ""]
    if figures.n_reviewed == 0:
        out.append("no ground truth yet (n=0 reviewed documents)")
    else:
        out += _text_table(("figure", "value"), summary_rows(figures))
        for t in code_tables(figures):
            out += ["", t["title"] + ":"]
            out += _text_table(t["header"], t["rows"]) if t["rows"] else ["  none"]
    if figures.unreadable:
        out += ["", f"unreadable ({len(figures.unreadable)} file(s), skipped):"]
        out += [f"  {u.uri}: {u.reason}" for u in figures.unreadable]
    if corpus is not None:
        out += ["", f"offline classifier ({corpus.implementation}) on the labelled corpus — "
                f"{corpus.documents} texts, {corpus.pages} pages of ~{corpus.page_chars} characters:"]
        out += _text_table(("figure", "value"), accuracy_rows(corpus.accuracy))
        out += ["", "per corpus:"]
        out += _text_table(("corpus", "documents", "dominant type", "pages"), per_corpus_rows(corpus))
    return "\n".join(out) + "\n"


def render_markdown(figures: FeedbackFigures, corpus: CorpusFigures | None = None, *, level: int = 2,
                    title: str = "Feedback from SME reviews") -> str:
    """The figures as Markdown: a ``level`` heading, the summary table, the per-code, per-trap
    and per-rule tables, the unreadable files, and the corpus figures when given."""
    return render("feedback_figures.md.j2", h="#" * level, sub="#" * (level + 1), title=title, figures=figures,
                  summary=summary_rows(figures) if figures.n_reviewed else [], code_tables=code_tables(figures),
                  corpus=corpus, corpus_accuracy=accuracy_rows(corpus.accuracy) if corpus else [],
                  per_corpus=per_corpus_rows(corpus) if corpus else [])


def render_html(figures: FeedbackFigures, *, title: str = "Feedback from SME reviews") -> str:
    """An HTML fragment (``<h2>`` section) of the store's figures, for the batch report."""
    return render("feedback_figures.html.j2", title=title, figures=figures,
                  summary=summary_rows(figures) if figures.n_reviewed else [], code_tables=code_tables(figures))
