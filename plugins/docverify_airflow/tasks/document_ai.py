"""The application's side of Document AI: Variables → the batch request the nightly DAG's
``document_ai`` task runs (:func:`plan`, by the ``plan_document_ai`` task upstream, so the
operator's templated fields come from XCom and are never set inside ``execute()``), and the
operator's per-input results → what the core's layout stage reads (:func:`results_for_layout`:
the package's error codes mapped onto the core's :mod:`docverify.layout.errors`).

The provider-style package (:mod:`docverify_documentai`) knows nothing of this application; this
module is the only place the two meet."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypedDict

from docverify.layout import errors as E
from docverify.stages.layout import DocAIResult
from docverify_documentai.errors import DocumentAIErrorCode

if TYPE_CHECKING:
    from docverify.stages.common import Batch
    from docverify_airflow.config import Settings
    from docverify_documentai.utils.document_ai import InputResult

log = logging.getLogger(__name__)

# every code of the package → the core's ParseError code for that document
ERROR_CODES: dict[DocumentAIErrorCode, str] = {
    DocumentAIErrorCode.TOO_MANY_PAGES: E.TOO_MANY_PAGES,
    DocumentAIErrorCode.UNSUPPORTED: E.UNSUPPORTED,
    DocumentAIErrorCode.NOT_A_PDF: E.NOT_A_PDF,
}


class DocAIRequest(TypedDict):
    """The ``document_ai`` task's templated fields (:func:`plan`): ``skip`` a reason, or "" to run."""

    skip: str
    project_id: str | None
    location: str | None
    processor_id: str | None
    processor_version: str | None
    gcs_input_uris: list[str]
    gcs_output_uri: str
    gcp_conn_id: str
    poll_interval: float


def plan(batch: Batch, settings: Settings) -> DocAIRequest:
    """The ``document_ai`` task's request, one XCom key each (``multiple_outputs``): ``skip`` (a
    reason, or "" to run), ``project_id``, ``location``, ``processor_id``, ``processor_version``,
    ``gcs_input_uris``, ``gcs_output_uri``, ``gcp_conn_id``, ``poll_interval``. Skipped when
    ``docverify_layout`` is ``local``, when the storage root is not ``gs://`` (Document AI reads
    its batch inputs from GCS; ``layout`` then processes online), and when every document already
    has a Document AI bundle for the same PDF (a re-run)."""
    from docverify.stages.layout import docs_to_layout
    from docverify_airflow import config

    request: DocAIRequest = {"skip": "", "project_id": None, "location": "us", "processor_id": "",
                               "processor_version": None, "gcs_input_uris": [], "gcs_output_uri": "",
                               "gcp_conn_id": settings.docai_conn_id, "poll_interval": settings.docai_poll_s}
    if settings.layout != "document_ai":
        return {**request, "skip": "docverify_layout=local: the layout task parses the PDFs locally"}
    if not config.is_remote(batch.rs.root):
        return {**request, "skip": "the storage root is not gs://, so Document AI cannot read the PDFs in batch: "
                                   "the layout task sends them to the processor online (at most 15 pages each)"}
    manifest = batch.rs.manifest().documents
    docs = docs_to_layout(batch, manifest)
    if not docs:
        return {**request, "skip": "every document already has a Document AI bundle for the same PDF"}
    proc = settings.processor()
    out = batch.rs.uri(f"docai/{batch.ds}/")
    log.info("Document AI: %d of %d document(s) to process with %s → %s", len(docs), len(manifest),
             settings.processor_name(), out)
    return {**request, "project_id": proc["project"], "location": proc["location"],
            "processor_id": proc["processor_id"], "processor_version": proc["processor_version"],
            "gcs_input_uris": [d.pdf_uri for d in docs], "gcs_output_uri": out}


def results_for_layout(results: list[InputResult] | None) -> list[DocAIResult]:
    """The operator's results (None when it skipped) with each ``error_code`` in the core's terms."""
    out: list[DocAIResult] = []
    for r in results or []:
        code = r.get("error_code")
        out.append(DocAIResult(input_uri=r["input_uri"], output_uri=r.get("output_uri") or "", ok=bool(r.get("ok")),
                               status_code=r.get("status_code"), status_message=r.get("status_message"),
                               error_code=ERROR_CODES[DocumentAIErrorCode(code)] if code else None))
    return out
