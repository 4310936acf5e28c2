"""Facts of a packet that every rendering shares (the packet's HTML and Markdown in
:mod:`docverify.sme.render`, the clinician's screen in :mod:`docverify.sme.document_view`): which
rule decided, the attempts, what is known of a file that could not be read, and whether a packet has
a page a person can look at (ADR 0051: a file without one is an operator's work first). Plain text;
each medium escapes it."""

from __future__ import annotations

from docverify.domain.models import SMEPacket

#: parse errors of a PDF that opened and holds pages, only without readable text
IMAGE_ONLY_ERRORS = ("NO_TEXT_LAYER",)


def has_pages(*, classified: bool, error_code: str | None, bundle_path: str | None, total_pages: int | None) -> bool:
    """Whether a packet has a page to look at: a classification (the document was read), a bundle
    with pages, or a PDF that opened without text (a scan, drawn as images; its ``error_code``). An
    empty, damaged, locked or non-PDF file, or one refused before reading, has none."""
    if classified:
        return True
    return error_code in IMAGE_ONLY_ERRORS or bool(bundle_path and total_pages is not None and total_pages > 0)


def packet_has_pages(packet: SMEPacket) -> bool:
    """:func:`has_pages` of a packet."""
    return has_pages(classified=isinstance(packet.primary_classification, dict),
                     error_code=packet.error["error"] if packet.error else None, bundle_path=packet.bundle_path,
                     total_pages=packet.total_pages)


def _size(n: int | None, code: str | None) -> str:
    if n is not None:
        return f"{n:,} bytes"
    return "0 bytes" if code == "EMPTY_FILE" else "unknown"


def file_facts(packet: SMEPacket) -> list[tuple[str, str]]:
    """What is known of a file that could not be read — (label, value) rows: file name, size in
    bytes ("0 bytes" for an empty file even when the error record has no size), pages, the error's
    code. [] when the packet has a primary classification. Never text of the document. The error's
    message is the operator's advice: each medium shows it labelled as such."""
    if isinstance(packet.primary_classification, dict):
        return []
    err = packet.error
    return [("File name", str((err and err.get("file_name")) or packet.pdf_filename or "unknown")),
            ("Size", _size(err.get("size_bytes") if err else None, err["error"] if err else None)),
            ("Pages", str(packet.total_pages) if packet.total_pages else "none read"),
            ("Error", str((err and err["error"]) or "none recorded"))]


def decided_by(packet: SMEPacket) -> str:
    """'rule 4', 'rule 5 (max_retries)', or 'not processed: CORRUPT' — a parse error is its own
    reason, never a V5 rule (ADR 0008)."""
    if packet.v5_rule is None:
        return f"not processed: {packet.error['error'] if packet.error else 'error'}"
    stop = packet.escalation_reason
    return f"rule {packet.v5_rule}" + (f" ({stop})" if stop not in ("arbiter", "error") else "")


def reason_line(packet: SMEPacket) -> str:
    """The decision's reason as the renderings show it: a parse error's by its code only (its
    message is the operator's advice, shown once, labelled)."""
    if packet.v5_rule is None and packet.error:
        return f"Not verified: the document could not be processed ({packet.error['error']})"
    return packet.v5_reason


def history_lines(packet: SMEPacket) -> list[str]:
    """One line per attempt and per fix after it (plain text; escape for the medium)."""
    out = []
    for a in packet.attempt_history:
        codes = ", ".join(f"{i['issue_id']} {i['severity']} {i['code']}" for i in a["issues"]) or "no issues"
        repair = " — every BLOCKER auto-fixable: repaired once before rule 1" if a.get("blocker_repair") else ""
        out.append(f"Attempt {a['attempt']}: {a['decision']} by rule {a['rule']}{repair} — {codes}")
        out += [f"  skipped {s}" for s in a.get("skipped_judgments", [])[:1]]
        out += [f"  fix {f['fixer']} ({', '.join(f['codes'])}): {f['description']}" for f in a["fixes_after"]]
    if packet.attempt_history:
        out.append(f"Final: {packet.v5_decision} — {decided_by(packet)}")
    return out
