"""The bases of the read models: stored JSON (a result, a packet, a report, a classification) validated once where
it is read (ADR 0056), keeping the keys the reader uses, each with the default an older object reads as, and
leaving the others alone. A validation error never quotes the input: a stored object may hold page text (PHI)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StoredRead(BaseModel):
    """A stored object as one reader reads it: unknown keys ignored, the input never in an error."""

    model_config = ConfigDict(extra="ignore", hide_input_in_errors=True)


class StoredView(StoredRead):
    """The same, frozen: a view that is never written back."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)
