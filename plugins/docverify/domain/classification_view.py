"""A classification as stored, read once at the edge for the pages and figures that show it.

A classification kept in a packet, a result or an accepted record is the classifier's JSON: valid
(:class:`~docverify.domain.models.ClassificationOutput`'s dump) or, when it did not parse (V1's
``SCHEMA_INVALID``, ``stop_reason`` schema), as it came. The SME pages and the figures still show
what can be read of an invalid one. :meth:`ClassificationView.read` validates it once into this
lenient view: every field has its JSON type or is None (a field of another type reads as absent,
never raises), a list keeps its objects in order (anything else in it is dropped), and a valid
classification reads with every value as stored (numbers are not converted: ``3.0`` stays
``3.0``). Code reads attributes, not ``.get`` chains over ``object``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from pydantic import (
    BeforeValidator,
    JsonValue,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    WrapValidator,
)

from docverify.domain.models import DOC_TYPES, PRESENCE_RANK, strongest_levels
from docverify.domain.read_models import StoredView

_T = TypeVar("_T")


def _or_none(value: JsonValue, handler: Callable[[JsonValue], _T]) -> _T | None:
    try:
        return handler(value)
    except ValidationError:
        return None


def _objects(value: JsonValue) -> list[dict[str, JsonValue]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


#: the field's JSON type, or None when it is absent or of another type
Lenient = Annotated[_T | None, WrapValidator(_or_none)]
#: the objects of a JSON list in order (none when it is no list): each read leniently
Objects = Annotated[list[_T], BeforeValidator(_objects)]
#: a JSON number as stored (int or float, never bool)
Number = StrictInt | StrictFloat


_View = StoredView  # a view, never written back; a validation error could quote page text (PHI)


class EvidenceView(_View):
    snippet: Lenient[StrictStr] = None
    page: Lenient[Number] = None
    anchors_found: Lenient[list[StrictStr]] = None


class EntryView(_View):
    """One type's entry of a segment (``classifications[]``) or of the document mixture."""

    doc_type: Lenient[StrictStr] = None
    presence_level: Lenient[StrictStr] = None
    confidence: Lenient[Number] = None
    segment_share: Lenient[Number] = None
    overall_share: Lenient[Number] = None
    top_evidence: Objects[EvidenceView] = []


class SegmentView(_View):
    segment_index: Lenient[Number] = None
    page_start: Lenient[Number] = None
    page_end: Lenient[Number] = None
    dominant_type: Lenient[StrictStr] = None
    reasoning: Lenient[StrictStr] = None
    classifications: Objects[EntryView] = []

    def entry(self, doc_type: str | None) -> EntryView | None:
        """The segment's entry of ``doc_type`` (the last one of that type, as a dict by type keeps)."""
        return next((e for e in reversed(self.classifications) if e.doc_type == doc_type), None)

    def pages(self) -> tuple[int, ...]:
        """The segment's pages (at most 501), none when its range is not two numbers."""
        if self.page_start is None or self.page_end is None:
            return ()
        lo, hi = sorted((int(self.page_start), int(self.page_end)))
        return tuple(range(max(lo, 1), min(hi, lo + 500) + 1))


class SelfEvaluationView(_View):
    confidence: Lenient[Number] = None
    notes: Lenient[StrictStr] = None


class ClassificationView(_View):
    dominant_type_overall: Lenient[StrictStr] = None
    number_of_segments: Lenient[Number] = None
    vendor_signals: Lenient[list[StrictStr]] = None
    classifier: Lenient[StrictStr] = ""
    self_evaluation: Lenient[SelfEvaluationView] = None
    segments: Objects[SegmentView] = []
    document_mixture: Objects[EntryView] = []

    @classmethod
    def read(cls, raw: dict[str, JsonValue] | None) -> ClassificationView | None:
        """The view of a stored classification; None when there is none (not a JSON object)."""
        return cls.model_validate(raw) if isinstance(raw, dict) else None

    def strongest(self) -> dict[str, str]:
        """Each type's strongest presence level over the mixture and every segment's entries
        (types and levels the models know only)."""
        entries = [*self.document_mixture, *(c for s in self.segments for c in s.classifications)]
        return strongest_levels((e.doc_type, e.presence_level) for e in entries
                                if e.doc_type in DOC_TYPES and e.presence_level in PRESENCE_RANK)
