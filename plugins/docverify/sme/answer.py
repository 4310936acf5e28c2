"""An SME's answer to a review packet: the one place its rules live.

Every channel that takes an answer — the Airflow HITL form (``docverify_airflow.tasks.sme_review``), the
web review workspace — reads it with :func:`answer_from_form`, checks it with :func:`check_answer`
(before sending it, so the SME sees why an answer is refused) and saves it with
:func:`save_answer`, which checks again and writes the ground-truth record
(:mod:`docverify.sme.ground_truth`). The rules (docs/adr/0004-sme-answers.md):

* exactly one answer: **Agree**, **Correct** or **Cannot classify**;
* *Agree* needs a primary classification and no correction;
* *Correct* needs at least one change; every page needs a type; page ranges must cover the
  document's pages in order, once each, within its page count; the correction must hold (a dry
  run of :func:`docverify.sme.ground_truth.apply_correction`, nothing written);
* *Cannot classify* needs a reason from :data:`UNCLASSIFIABLE_REASONS` (notes are required with
  "other") and no correction.

A refusal is :class:`AnswerRefused` (a ValueError) whose ``reason`` is one sentence a clinician
understands, naming what to change by page numbers and types only — never document text.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from docverify.domain.classification_view import ClassificationView
from docverify.domain.models import DOC_TYPES, GroundTruthRecord, SMEPacket, UnclassifiableReason
from docverify.sme.ground_truth import (
    NoChange,
    apply_correction,
    packet_bundle,
    save_review,
    save_unclassifiable,
)
from docverify.sme.packets import load_packet
from docverify.storage.limits import MAX_PAGES
from docverify.storage.store import ArtifactStore

AGREE = "Agree"
CORRECT = "Correct"
CANNOT_CLASSIFY = "Cannot classify"
CHOICES = (AGREE, CORRECT, CANNOT_CLASSIFY)
#: Why a document cannot be classified (the form's choices; GroundTruthRecord.unclassifiable_reason).
UNCLASSIFIABLE_REASONS: tuple[str, ...] = typing.get_args(UnclassifiableReason)
#: corrected_segments as text: at most this many characters, JSON at most this deep ([{…{…}}]).
MAX_SEGMENTS_TEXT = 100_000
MAX_JSON_DEPTH = 4
#: a page number written with more digits than this is beyond every document (and never converted)
_MAX_DIGITS = 9
EXAMPLE_RANGES = "1-2 Genomic Report; 3 Clinical Note"


class AnswerRefused(ValueError):
    """The answer cannot be saved. ``reason``: one sentence for the SME naming what to change
    (page numbers and types only); ``field``: the form field it concerns, when one does."""

    def __init__(self, reason: str, *, field: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.field = field


class ReviewAnswer(BaseModel):
    """One SME answer as the channels hand it over (see :func:`answer_from_form`).

    ``page_types``: the type of every page when the SME changed at least one (None: the pages as
    the form preset them); ``corrected_segments``: page ranges as text
    (``1-2 Genomic Report; 3 Clinical Note``, or JSON) or as a list of
    ``{page_start, page_end, dominant_type}``."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    choice: Literal["Agree", "Correct", "Cannot classify"]
    corrected_dominant_type: str | None = None
    page_types: list[str | None] | None = None
    corrected_segments: str | list[JsonValue] | None = None
    unclassifiable_reason: str | None = None
    notes: str = ""


# --------------------------------------------------------------------------- pages and ranges


def page_field(page: int) -> str:
    """The form field of page ``page`` (1-based): ``page_1``, ``page_2``, …"""
    return f"page_{page}"


def page_types(packet: SMEPacket) -> list[str | None]:
    """The primary classification's type of each page of the packet's document (None where no
    segment covers it); [] when the page count is unknown (a document that could not be parsed)."""
    total = max(0, min(packet.total_pages, MAX_PAGES))
    types: list[str | None] = [None] * total
    primary = ClassificationView.read(packet.primary_classification)
    for seg in primary.segments if primary is not None else []:
        if seg.page_start is None or seg.page_end is None:
            continue
        for page in range(max(1, int(seg.page_start)), min(total, int(seg.page_end)) + 1):
            types[page - 1] = seg.dominant_type
    return types


def segments_from_pages(types: list[str | None]) -> list[dict[str, object]]:
    """Consecutive pages of one type → one segment ``{page_start, page_end, dominant_type}``."""
    out: list[dict[str, object]] = []
    for page, kind in enumerate(types, start=1):
        if out and out[-1]["dominant_type"] == kind:
            out[-1]["page_end"] = page
        else:
            out.append({"page_start": page, "page_end": page, "dominant_type": kind})
    return out


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s+(.+?)\s*$")


def _json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside JSON strings (a scan, no parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _beyond(k: int, first: str, last: str, total_pages: int) -> AnswerRefused:
    def shown(d: str) -> str:
        return d if len(d) <= 15 else d[:12] + "…"

    pages = f"page {shown(first)}" if first == last else f"pages {shown(first)}–{shown(last)}"
    where = (f"the document has {total_pages} page(s)" if total_pages
             else f"no document has more than {MAX_PAGES} pages")
    return AnswerRefused(f"Range #{k} ({pages}) goes beyond the document's last page: {where}; "
                         f"correct the page numbers of range #{k}.", field="corrected_segments")


def parse_segments(raw: object, *, total_pages: int = 0) -> list[dict[str, object]] | None:
    """The corrected segments from the form: page ranges (``1-2 Genomic Report; 3 Clinical Note``,
    ``;`` or new lines between ranges, types in any letter case) or a JSON list. Reads the syntax
    and names the range that is wrong (AnswerRefused); coverage and order are checked by
    :func:`check_answer`. A page number beyond ``total_pages`` (or :data:`MAX_PAGES` when the
    page count is unknown) is refused here, before it is converted."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, list):
        return raw
    field = "corrected_segments"
    text = str(raw).strip()
    if len(text) > MAX_SEGMENTS_TEXT:
        raise AnswerRefused(f"corrected_segments: the page ranges are too long ({len(text)} characters, at most "
                            f"{MAX_SEGMENTS_TEXT}); write one range per group of pages, like {EXAMPLE_RANGES}",
                            field=field)
    if text.startswith(("[", "{")):
        if _json_depth(text) > MAX_JSON_DEPTH:
            raise AnswerRefused(f"corrected_segments: the JSON is nested too deeply (at most {MAX_JSON_DEPTH} "
                                f"levels); write page ranges like {EXAMPLE_RANGES}", field=field)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AnswerRefused(f"corrected_segments: not valid JSON at character {exc.pos}; or write page ranges "
                                f"like {EXAMPLE_RANGES}", field=field) from None
        except (ValueError, RecursionError):  # a number too long to convert; nesting the scan missed
            raise AnswerRefused(f"corrected_segments: the JSON cannot be read; write page ranges like "
                                f"{EXAMPLE_RANGES}", field=field) from None
        if not isinstance(value, list):
            raise AnswerRefused(f"corrected_segments: give a list of ranges; write page ranges like "
                                f"{EXAMPLE_RANGES}", field=field)
        return value
    by_name = {t.lower(): t for t in DOC_TYPES}
    limit = total_pages or MAX_PAGES
    out: list[dict[str, object]] = []
    for part in (p for p in re.split(r"[;\n]", text) if p.strip()):
        k = len(out) + 1
        m = _RANGE.match(part)
        if not m:
            raise AnswerRefused(f"corrected_segments: cannot read range #{k}; write each range as pages then a "
                                f"type, like {EXAMPLE_RANGES}", field=field)
        first_s, last_s = m.group(1), m.group(2) or m.group(1)
        if any(len(d.lstrip("0")) > _MAX_DIGITS for d in (first_s, last_s)) or max(int(first_s), int(last_s)) > limit:
            raise _beyond(k, first_s, last_s, total_pages)
        kind = by_name.get(m.group(3).strip().lower())
        if kind is None:
            raise AnswerRefused(f"corrected_segments: range #{k} names no document type; use one of "
                                f"{', '.join(DOC_TYPES)}", field=field)
        out.append({"page_start": int(first_s), "page_end": int(last_s), "dominant_type": kind})
    return out


def check_ranges(segments: object, total_pages: int) -> list[dict[str, object]]:
    """``segments`` checked as a clinician reads them: a list of ranges, each with a first and a
    last page and one of the five types, in page order, without gaps or overlaps, covering pages
    1..``total_pages`` (1..at most :data:`MAX_PAGES` when the page count is unknown). Returns the
    ranges ``{page_start, page_end, dominant_type}`` (and ``presence`` when given); raises
    AnswerRefused naming the range (#1 is the first)."""
    field = "corrected_segments"
    if not isinstance(segments, list) or not segments:
        raise AnswerRefused(f"corrected_segments: give at least one page range, like {EXAMPLE_RANGES}", field=field)
    limit, expect = total_pages or MAX_PAGES, 1
    out: list[dict[str, object]] = []
    for k, seg in enumerate(segments, start=1):
        if not isinstance(seg, dict) or not {"page_start", "page_end", "dominant_type"} <= set(seg) \
                or not set(seg) <= {"page_start", "page_end", "dominant_type", "presence"}:
            raise AnswerRefused(f"corrected_segments: range #{k} needs exactly a first page, a last page and a type "
                                f"(page_start, page_end, dominant_type)", field=field)
        first, last = seg["page_start"], seg["page_end"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (first, last)):
            raise AnswerRefused(f"corrected_segments: range #{k} needs whole page numbers from 1", field=field)
        if first > limit or last > limit:
            raise _beyond(k, str(first), str(last), total_pages)
        if last < first:
            raise AnswerRefused(f"corrected_segments: range #{k} ends at page {last}, before its first page "
                                f"{first}; write it as {last}-{first}", field=field)
        if first != expect:
            raise AnswerRefused(f"corrected_segments: range #{k} starts at page {first}, but the ranges must follow "
                                f"each other without gaps or overlaps, so it must start at page {expect}",
                                field=field)
        if seg["dominant_type"] not in DOC_TYPES:
            raise AnswerRefused(f"corrected_segments: range #{k} names no document type; use one of "
                                f"{', '.join(DOC_TYPES)}", field=field)
        out.append(dict(seg))
        expect = last + 1
    if total_pages and expect != total_pages + 1:
        raise AnswerRefused(f"corrected_segments: the ranges end at page {expect - 1} but the document has "
                            f"{total_pages} page(s); add a range for pages {expect}–{total_pages}", field=field)
    return out


# --------------------------------------------------------------------------- the form


def answer_from_form(chosen_options: list[str], params: Mapping[str, JsonValue],
                     preset_pages: list[str | None]) -> ReviewAnswer:
    """The answer of a review form (the HITL payload's ``chosen_options`` and ``params_input``, or
    the workspace's form with the same field names: ``corrected_dominant_type``,
    ``corrected_segments``, ``notes``, ``unclassifiable_reason`` and one :func:`page_field` per
    page). ``preset_pages``: the page types the form was preset to (:func:`page_types`); page
    fields equal to them are no correction. Raises AnswerRefused."""
    chosen = list(chosen_options or [])
    if len(chosen) != 1 or chosen[0] not in CHOICES:
        raise AnswerRefused(f"Choose exactly one answer: {', '.join(CHOICES)} (the form sent {len(chosen)} "
                            f"answer(s){'' if all(c in CHOICES for c in chosen) else ', one not in the list'}).",
                            field="chosen_options")
    params = params or {}
    pages: list[JsonValue] | None = None  # ReviewAnswer checks them
    if preset_pages and page_field(1) in params:
        pages = [params.get(page_field(i)) or None for i in range(1, len(preset_pages) + 1)]
        if pages == list(preset_pages):
            pages = None  # as preset: the SME changed no page
    segments = params.get("corrected_segments")
    if isinstance(segments, str) and not segments.strip():
        segments = None
    values: dict[str, JsonValue] = {
        "choice": chosen[0], "corrected_dominant_type": params.get("corrected_dominant_type") or None,
        "page_types": pages, "corrected_segments": segments,
        "unclassifiable_reason": params.get("unclassifiable_reason") or None,
        "notes": params.get("notes") or ""}
    try:
        return ReviewAnswer.model_validate(values)
    except ValidationError as exc:
        where = ".".join(str(x) for x in exc.errors()[0]["loc"]) or "the answer"
        raise AnswerRefused(f"{where}: this field has a value the form does not offer; choose it again",
                            field=where.split(".")[0]) from None


# --------------------------------------------------------------------------- checking and saving


@dataclass
class _Checked:
    packet: SMEPacket
    segments: list[dict[str, object]] | None
    changes: list[str]


def _check(store: ArtifactStore, review_id: str, answer: ReviewAnswer) -> _Checked:
    packet = load_packet(store, review_id)
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    total = int(packet.total_pages or 0)
    corrected = answer.corrected_dominant_type is not None or answer.page_types is not None \
        or answer.corrected_segments is not None
    if answer.choice != CANNOT_CLASSIFY and answer.unclassifiable_reason is not None:
        raise AnswerRefused(f"A reason for '{CANNOT_CLASSIFY}' was chosen with '{answer.choice}': clear the reason, "
                            f"or answer '{CANNOT_CLASSIFY}'", field="unclassifiable_reason")
    if answer.choice == AGREE:
        if corrected:
            raise AnswerRefused(f"'{AGREE}' was chosen but a correction was filled in: clear the correction, or "
                                f"answer '{CORRECT}'")
        if primary is None:
            raise AnswerRefused(f"There is no classification to agree with (the document could not be processed): "
                                f"answer '{CORRECT}' with the type of each page, or '{CANNOT_CLASSIFY}'")
        return _Checked(packet, None, [])
    if answer.choice == CANNOT_CLASSIFY:
        if corrected:
            raise AnswerRefused(f"'{CANNOT_CLASSIFY}' was chosen but a correction was filled in: clear the "
                                f"correction, or answer '{CORRECT}'")
        if answer.unclassifiable_reason not in UNCLASSIFIABLE_REASONS:
            raise AnswerRefused(f"'{CANNOT_CLASSIFY}' needs a reason: choose one of "
                                f"{', '.join(UNCLASSIFIABLE_REASONS)}", field="unclassifiable_reason")
        if answer.unclassifiable_reason == "other" and not answer.notes.strip():
            raise AnswerRefused("With the reason 'other', say in the notes why the document cannot be classified",
                                field="notes")
        return _Checked(packet, None, [])
    # Correct
    if not corrected:
        raise AnswerRefused("Correct needs a change: choose another type for at least one page, or answer Agree")
    dominant = answer.corrected_dominant_type
    if dominant is not None and dominant not in DOC_TYPES:
        raise AnswerRefused(f"The corrected dominant type must be one of {', '.join(DOC_TYPES)}",
                            field="corrected_dominant_type")
    segments = None
    if answer.page_types is not None:
        if answer.corrected_segments is not None:
            raise AnswerRefused("Give the type of each page or page ranges, not both", field="corrected_segments")
        if total and len(answer.page_types) != total:
            raise AnswerRefused(f"The answer gives a type for {len(answer.page_types)} page(s) but the document has "
                                f"{total}: open the review again")
        for page, kind in enumerate(answer.page_types, start=1):
            if kind is None:
                raise AnswerRefused(f"Every page needs a type: page {page} has none; choose one of the five types",
                                    field=page_field(page))
            if kind not in DOC_TYPES:
                raise AnswerRefused(f"Page {page}: choose one of {', '.join(DOC_TYPES)}", field=page_field(page))
        segments = segments_from_pages(answer.page_types)
    elif answer.corrected_segments is not None:
        segments = check_ranges(parse_segments(answer.corrected_segments, total_pages=total), total)
    view = ClassificationView.read(primary)
    kept = view.segments if view is not None else []
    types = {s["dominant_type"] for s in segments} if segments is not None else \
        {s.dominant_type for s in kept} if len(kept) > 1 else None
    if dominant is not None and types is not None and dominant not in types:
        raise AnswerRefused(f"The corrected dominant type {dominant} is the type of no page: give it to at least one "
                            f"page, or leave the dominant type as it is", field="corrected_dominant_type")
    try:  # the dry run: every rule the save applies, nothing written
        _, changes = apply_correction(primary, doc_id=packet.doc_id, total_pages=total,
                                      corrected_dominant_type=dominant, corrected_segments=segments,
                                      bundle=packet_bundle(store, packet))
    except NoChange:
        raise AnswerRefused("Correct needs a change: choose another type for at least one page, "
                            "or answer Agree") from None
    except RecursionError:
        raise AnswerRefused("corrected_segments: the ranges cannot be read; write page ranges like "
                            f"{EXAMPLE_RANGES}", field="corrected_segments") from None
    except AnswerRefused:
        raise
    except ValueError as exc:
        raise AnswerRefused(str(exc)) from None
    return _Checked(packet, segments, changes)


def check_answer(store: ArtifactStore, review_id: str, answer: ReviewAnswer) -> list[str]:
    """Every rule the save applies to ``answer`` for the packet ``review_id``, including a dry
    run of the correction (nothing is written). Returns the changes the correction would make
    ([] for Agree and Cannot classify). Raises AnswerRefused with the reason (PacketNotFoundError
    when there is no such packet)."""
    return _check(store, review_id, answer).changes


def save_answer(store: ArtifactStore, review_id: str, answer: ReviewAnswer, *, reviewer: str,
                reviewed_at: str | None = None, channel: str = "") -> tuple[GroundTruthRecord, str]:
    """Check ``answer`` (:func:`check_answer`), then write it as a new ground-truth version:
    Agree → SME_VALIDATED, Correct → SME_CORRECTED (:func:`docverify.sme.ground_truth.save_review`),
    Cannot classify → SME_UNCLASSIFIABLE (:func:`docverify.sme.ground_truth.save_unclassifiable`).
    The packet becomes reviewed. Returns (record, uri); raises AnswerRefused."""
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise AnswerRefused("The answer has no reviewer: sign in and answer again")
    checked = _check(store, review_id, answer)
    try:
        if answer.choice == CANNOT_CLASSIFY:
            return save_unclassifiable(store, review_id, reason=str(answer.unclassifiable_reason),
                                       notes=answer.notes, reviewer=reviewer, reviewed_at=reviewed_at,
                                       channel=channel)
        return save_review(store, review_id, agrees=answer.choice == AGREE,
                           corrected_dominant_type=answer.corrected_dominant_type,
                           corrected_segments=checked.segments, correction_notes=answer.notes,
                           reviewer=reviewer, reviewed_at=reviewed_at, channel=channel)
    except AnswerRefused:
        raise
    except ValueError as exc:  # checked above: only a packet changed meanwhile gets here
        raise AnswerRefused(str(exc)) from None
