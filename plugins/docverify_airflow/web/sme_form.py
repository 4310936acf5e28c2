"""The SME review form: its answer options and fields (shared by the review operator, which shows
the form, and :mod:`docverify_airflow.tasks.sme_review`, which reads the answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import Param

from docverify.sme.answer import AGREE, CANNOT_CLASSIFY, CORRECT, UNCLASSIFIABLE_REASONS

if TYPE_CHECKING:
    from docverify_airflow.airflow_internals import HITLUser

__all__ = ["AGREE", "CANNOT_CLASSIFY", "CORRECT", "MAX_PAGE_FIELDS", "NOT_CORRECTED", "UNCLASSIFIABLE_REASONS",
           "assigned_users", "page_field", "review_form_params"]


#: Documents up to this many pages get one type field per page (nothing to type, always a valid
#: segmentation); longer ones (and documents whose page count is unknown) a page-range line.
MAX_PAGE_FIELDS = 30
NOT_CORRECTED = "— not corrected —"


def page_field(page: int) -> str:
    return f"page_{page}"


def review_form_params(page_types: list[str | None] | None = None) -> dict[str, Param]:
    """The form fields of the review (the corrections count only with *Correct*).

    ``page_types``: the primary classification's type of each page (None where it has none).
    Up to :data:`MAX_PAGE_FIELDS` pages, each page is a choice of the five types, preset to what
    the classifier said: the SME changes the pages that are wrong and the segments follow.
    Otherwise one optional text field takes page ranges, ``1-2 Genomic Report; 3 Clinical Note``."""
    from docverify.domain.models import DOC_TYPES

    fields: dict[str, Param] = {
        "corrected_dominant_type": Param(
            None, type=["null", "string"], enum=[None, *DOC_TYPES], values_display={"null": NOT_CORRECTED},
            title="Corrected dominant type",
            description="Only with Correct: what the whole document really is (leave it at "
                        f"'{NOT_CORRECTED}' when the page types below say it all)."),
    }
    if page_types and len(page_types) <= MAX_PAGE_FIELDS:
        for i, kind in enumerate(page_types, start=1):
            # a page the classifier typed can only be changed to another type (a page without a
            # type is refused): the form offers no empty choice there
            fields[page_field(i)] = Param(
                kind, type="string", enum=list(DOC_TYPES), title=f"Page {i}",
                description="The type of this page; change it only if it is wrong (with Correct)."
                if i == 1 else "") if kind else Param(
                None, type=["null", "string"], enum=[None, *DOC_TYPES],
                values_display={"null": "— choose a type (with Correct) —"}, title=f"Page {i}",
                description="The classifier gave this page no type: choose one when you answer Correct.")
    else:
        fields["corrected_segments"] = Param(
            None, type=["null", "string"], title="Corrected segments (page ranges)",
            pattern=r"^\s*(\[.*\]|\d+\s*(-\s*\d+)?\s+[A-Za-z ]+?\s*([;\n]\s*\d+\s*(-\s*\d+)?\s+[A-Za-z ]+?\s*)*;?)\s*$",
            description="Only with Correct, optional: page ranges in page order covering every page once, "
                        "e.g. 1-2 Genomic Report; 3 Clinical Note")
    fields["unclassifiable_reason"] = Param(
        None, type=["null", "string"], enum=[None, *UNCLASSIFIABLE_REASONS], values_display={"null": "—"},
        title="Why it cannot be classified",
        description=f"Only with {CANNOT_CLASSIFY!r}: the file is unreadable, the wrong file, or needs a re-scan "
                    "(with 'other', say why in the notes).")
    fields["notes"] = Param("", type=["null", "string"], title="Notes",
                            description="Why, in your words (kept with the ground truth). Airflow shows the answer to "
                                        "everyone who may read this Dag: do not copy patient details or page "
                                        "text here (ADR 0036).")
    return fields


def assigned_users(assignees: str | list[str] | None) -> list[HITLUser] | None:
    """``"alice, bob"`` or ``"7:alice"`` (id:name) → HITL users; empty → None (anyone may answer)."""
    items = assignees.split(",") if isinstance(assignees, str) else list(assignees or [])
    users: list[HITLUser] = []
    for item in (i.strip() for i in items):
        if item:
            uid, _, name = item.partition(":")
            users.append({"id": uid.strip(), "name": (name or uid).strip()})
    return users or None
