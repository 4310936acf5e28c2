"""``verify_document`` run to its end, for the tests that call it without an event loop of their own
(test support: not in the product, ADR 0053)."""

from __future__ import annotations

import asyncio
from typing import Any

from docverify.domain.models import DocumentBundle, VerificationResult
from docverify.judging.judges import Judge
from docverify.pipeline.document import VerifyDeps, verify_document


def verify_document_sync(bundle: DocumentBundle, classification: object, deps: VerifyDeps | Judge,
                         **keywords: Any) -> VerificationResult:
    """:func:`~docverify.pipeline.document.verify_document` run to its end (its keywords)."""
    return asyncio.run(verify_document(bundle, classification, deps, **keywords))
