"""Parsing the two DAG files pulls in no heavy library beyond those it pulled already: a task process
parses its DAG file on every start, so a core module that imports numpy, sklearn, pypdfium2, the OCR
engine, pydantic-ai, google-genai, httpx, gcsfs/fsspec or PIL is imported inside the functions that need
it, never by what ``docverify_airflow.tasks.nightly`` imports at parse time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.dags.airflow_env import AIRFLOW_ENV, REPO

HEAVY = ("numpy", "sklearn", "pypdfium2", "rapidocr_onnxruntime", "onnxruntime", "pydantic_ai", "google",
         "httpx", "gcsfs", "fsspec", "PIL")

# Imported at DAG parse when this test was written, none by the core: httpx and fsspec by Airflow itself
# (airflow, airflow.sdk.io.fs); the google packages by the Google provider's GCS hook that
# docverify_airflow.assets imports (google.cloud.storage, and through base_google Secret Manager, api_core,
# auth, protobuf). Not in it, so caught: numpy, sklearn, pypdfium2, the OCR engine, pydantic_ai,
# google.genai, google.cloud.documentai, gcsfs, PIL.
TODAY = frozenset({
    "fsspec", "httpx",
    "google", "google._upb", "google.api", "google.api_core", "google.auth", "google.iam", "google.oauth2",
    "google.protobuf", "google.resumable_media", "google.rpc", "google.type",
    "google.cloud", "google.cloud._helpers", "google.cloud._http", "google.cloud.client", "google.cloud.exceptions",
    "google.cloud.location", "google.cloud.secretmanager_v1", "google.cloud.storage", "google.cloud.version",
})


def _family(module: str) -> str:
    """The package a module counts under: ``google.cloud.<x>`` and ``google.<x>`` (each Google library is
    its own package in the ``google`` namespace), else the top-level name."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["google", "cloud"] else 2 if parts[0] == "google" else 1
    return ".".join(parts[:depth])


@pytest.mark.slow
def test_parsing_the_dag_files_imports_no_new_heavy_package():
    code = ("import json, runpy, sys; [runpy.run_path(f) for f in sys.argv[2:]]; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in sys.argv[1].split(','))))")
    dags = [str(REPO / "dags" / name) for name in ("clinical_doc_verification.py", "sme_review.py")]
    proc = subprocess.run([sys.executable, "-c", code, ",".join(HEAVY), *dags], env={**os.environ, **AIRFLOW_ENV},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    imported = json.loads(proc.stdout.strip().splitlines()[-1])
    new = sorted({_family(m) for m in imported} - TODAY)
    assert not new, (f"parsing the DAG files now imports {new}: import it inside the function that needs it "
                     f"(python -X importtime shows which module pulls it)")
