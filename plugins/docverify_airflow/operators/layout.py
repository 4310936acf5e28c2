"""The nightly DAG's Document AI step: :class:`DocumentAIBatchProcessOperator` configured at run
time from the Airflow Variables (processor, connection, storage root), so switching the layout
to Document AI is configuration, not a code change."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from docverify_airflow.operators.document_ai import DocumentAIBatchProcessOperator


class NightlyDocumentAIOperator(DocumentAIBatchProcessOperator):
    """Submit the night's PDFs that need a layout to the Layout Parser in batch, wait on the
    triggerer, and write the per-input results to ``runs/<ds>/docai_results.json`` for the
    ``layout`` task. Skips itself when ``docverify_layout`` is ``local``, when the storage root is
    not ``gs://`` (Document AI reads its inputs from GCS; ``layout`` then processes online), and
    when every document already has a Document AI bundle for the same PDF (a re-run)."""

    def __init__(self, **kwargs: Any) -> None:
        # the processor, connection and URIs are read from Variables in execute()
        super().__init__(processor_id="", gcs_output_uri="", **kwargs)

    def execute(self, context: Any) -> Any:
        from docverify import batch as B
        from docverify_airflow import config, tasks

        s = config.settings(context)
        if s.layout != "document_ai":
            raise AirflowSkipException("docverify_layout=local: the layout task parses the PDFs locally")
        batch = tasks.make_batch(context)
        if not config.is_remote(batch.store.root):
            raise AirflowSkipException(
                "the storage root is not gs://, so Document AI cannot read the PDFs in batch: "
                "the layout task sends them to the processor online (at most 15 pages each)")
        manifest = batch.manifest()["documents"]
        docs = B.docs_to_layout(batch, manifest)
        if not docs:
            batch.store.write_json(tasks.docai_results_rel(batch), [])
            raise AirflowSkipException("every document already has a Document AI bundle for the same PDF")
        proc = s.processor()
        self.project_id, self.location = proc["project"], proc["location"]
        self.processor_id, self.processor_version = proc["processor_id"], proc["processor_version"]
        self.gcp_conn_id = s.docai_conn_id
        self.poll_interval = s.docai_poll_s
        self.gcs_input_uris = [d["pdf_uri"] for d in docs]
        self.gcs_output_uri = batch.store.uri(f"docai/{batch.ds}/")
        self.log.info("Document AI: %d of %d document(s) to process with %s → %s", len(docs),
                      len(manifest), s.processor_name(), self.gcs_output_uri)
        return self._store(context, super().execute(context))

    def execute_complete(self, context: Any, event: dict[str, Any], rejected: list[dict[str, Any]] | None = None):
        return self._store(context, super().execute_complete(context, event, rejected=rejected))

    def _store(self, context: Any, results: list[dict[str, Any]] | None) -> dict[str, Any]:
        from docverify_airflow import tasks

        batch = tasks.make_batch(context)
        results = results or []
        batch.store.write_json(tasks.docai_results_rel(batch), results)
        ok = sum(1 for r in results if r.get("ok"))
        return {"documents": len(results), "ok": ok, "failed": len(results) - ok,
                "results": batch.store.uri(tasks.docai_results_rel(batch))}
