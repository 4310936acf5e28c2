"""The SME's notebook helper (spec slide 10): :class:`SMEReviewHelper` on a storage root.

It calls the modules that define each step: :mod:`docverify.sme.packets` (find, list and load
packets), :mod:`docverify.sme.context` (an issue's page context), :mod:`docverify.sme.render`
(a packet as Markdown) and :mod:`docverify.sme.ground_truth` (save an answer as a new
ground-truth version — the same writer the Airflow review DAG uses).

Packet text, page text and snippets are PHI: this module logs nothing of them.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping, Sequence
from typing import Any

from docverify.domain.models import GroundTruthRecord, SMEPacket
from docverify.sme.context import IssueContext, get_issue_context
from docverify.sme.ground_truth import (
    ground_truth_versions,
    save_review,
    save_unclassifiable,
)
from docverify.sme.packets import (
    html_rel,
    list_pending_reviews,
    load_packet,
    packet_key,
)
from docverify.sme.render import packet_markdown
from docverify.storage.store import ArtifactStore, StoragePath, as_root

__all__ = ["SMEReviewHelper"]


class SMEReviewHelper:
    """The SME's notebook interface (spec slide 10) on a storage root (a path, ``file://`` or
    ``gs://`` URI):

    1. ``list_pending_reviews()`` → 2. ``load_packet(doc_id)`` → 3. ``get_issue_context(doc_id,
    issue_id)`` per issue → 4./5. ``save_review(doc_id, agrees, …)`` (or ``cannot_classify(doc_id,
    reason)``) → 6. ground truth under ``ground_truth/``. ``save_review`` is the same writer the Airflow review DAG uses.
    """

    def __init__(self, storage_root: str | StoragePath, *, reviewer: str | None = None):
        self.store = ArtifactStore(as_root(storage_root))
        self.reviewer = reviewer

    def list_pending_reviews(self) -> list[dict[str, Any]]:
        """Pending packets: doc_id, pdf_filename, v5_rule, total_issues, top_severity, error,
        created_at, packet_uri (most severe first)."""
        return list_pending_reviews(self.store)

    def load_packet(self, doc_id: str) -> SMEPacket:
        return load_packet(self.store, doc_id)

    def get_issue_context(self, doc_id: str, issue_id: str, *, highlight: bool = True) -> IssueContext:
        """Page, 2 paragraphs before, the match, 3 after, and the highlight boxes of one issue."""
        return get_issue_context(self.store, self.load_packet(doc_id), issue_id, highlight=highlight)

    def packet_markdown(self, doc_id: str) -> str:
        return packet_markdown(self.load_packet(doc_id))

    def html_uri(self, doc_id: str) -> str | None:
        """URI of the packet's HTML rendering, when the nightly run wrote one."""
        rel = html_rel(packet_key(self.load_packet(doc_id)))
        return self.store.uri(rel) if self.store.exists(rel) else None

    def save_review(self, doc_id: str, agrees: bool, corrected_dominant_type: str | None = None,
                    correction_notes: str = "", reviewer: str | None = None, *,
                    corrected_segments: Sequence[Mapping[str, object]] | None = None, corrected_presence: dict[str, str] | None = None,
                    corrected_mixture: dict[str, str] | None = None) -> tuple[GroundTruthRecord, str]:
        """Save the answer as ground truth (see :func:`save_review`); the reviewer defaults to the
        helper's ``reviewer``, else the login name."""
        return save_review(self.store, doc_id, agrees=agrees, corrected_dominant_type=corrected_dominant_type,
                           corrected_segments=corrected_segments, correction_notes=correction_notes,
                           corrected_presence=corrected_presence, corrected_mixture=corrected_mixture,
                           reviewer=reviewer or self.reviewer or getpass.getuser(), channel="notebook")

    def cannot_classify(self, doc_id: str, reason: str, notes: str = "",
                        reviewer: str | None = None) -> tuple[GroundTruthRecord, str]:
        """Record that the document cannot be classified (``reason``: "unreadable", "wrong file",
        "needs a re-scan" or "other" with notes; see :func:`save_unclassifiable`)."""
        return save_unclassifiable(self.store, doc_id, reason=reason, notes=notes,
                                   reviewer=reviewer or self.reviewer or getpass.getuser(), channel="notebook")

    def ground_truth(self, doc_id: str) -> list[GroundTruthRecord]:
        return ground_truth_versions(self.store, doc_id)
