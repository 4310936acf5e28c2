"""The Assets the docverify DAGs share: the nightly DAG emits them, the review DAG is scheduled
on the SME packets. One definition, imported by both DAG files (cheap: no other import)."""

from __future__ import annotations

from airflow.sdk import Asset

#: Emitted by ``clinical_doc_verification.write_sme_packets``; schedules ``sme_review``.
SME_PACKETS = Asset(name="docverify_sme_packets", uri="docverify://sme_packets")
#: Emitted by ``clinical_doc_verification.accept``.
ACCEPTED = Asset(name="docverify_accepted", uri="docverify://accepted")
