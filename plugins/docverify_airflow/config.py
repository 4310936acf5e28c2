"""Configuration from Airflow: Variables (and, for the Google path, connections) → the storage
root and the judge. The only module that turns Airflow configuration into domain objects."""

from __future__ import annotations

import logging
import pathlib

from docverify.judges import Judge, OfflineJudge

log = logging.getLogger(__name__)

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_STORAGE_ROOT = "data"  # a relative path is taken relative to the repository

VAR_STORAGE_ROOT = "docverify_storage_root"
VAR_STORAGE_CONN = "docverify_storage_conn_id"
VAR_JUDGE = "docverify_judge"


def _variable(key: str, default: str) -> str:
    from airflow.sdk import Variable

    try:
        return Variable.get(key, default=default)
    except Exception as exc:  # no metadata DB reachable (e.g. a bare unit test): use the default
        log.warning("could not read Variable %s (%s): using %r", key, type(exc).__name__, default)
        return default


def storage_root():
    """The artifact store root: ``file://`` → pathlib.Path; ``gs://`` → ObjectStoragePath on the
    connection named by ``docverify_storage_conn_id`` (default ``google_cloud_default``)."""
    root = _variable(VAR_STORAGE_ROOT, DEFAULT_STORAGE_ROOT).strip() or DEFAULT_STORAGE_ROOT
    if "://" not in root:
        path = pathlib.Path(root)
        return path if path.is_absolute() else REPO / path
    if root.startswith("file://"):
        from docverify.store import as_root

        return as_root(root)
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(root, conn_id=_variable(VAR_STORAGE_CONN, "google_cloud_default"))


def judge() -> Judge:
    """``offline`` (the embedded default). The Gemini judge is wired in by the Google issue;
    until then any other value is refused loudly rather than silently run offline."""
    kind = _variable(VAR_JUDGE, "offline").strip().lower()
    if kind == "offline":
        return OfflineJudge()
    raise ValueError(
        f"Variable {VAR_JUDGE}={kind!r} is not supported by this build: use 'offline' "
        f"(set it in airflow_settings.yaml and re-import the settings)"
    )
