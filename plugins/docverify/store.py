"""Artifact store on any pathlib-like root.

The root is a :class:`pathlib.Path` in the CLI and the tests, and an Airflow
``ObjectStoragePath`` (``file://…`` or ``gs://…``) in the DAGs: the store only uses the
operations both have (``/``, ``exists``, ``read_bytes``, ``write_bytes``, ``iterdir``,
``mkdir``). The layout is DESIGN.md's:

    incoming/<ds>/<doc>.pdf                    input (never modified)
    runs/<ds>/<doc_id>/bundle.json             DocumentBundle
    runs/<ds>/<doc_id>/classification.json     ClassificationOutput (attempt 0)
    runs/<ds>/<doc_id>/attempt_<n>/report.json + v5_arbiter_decision.json
    accepted/<ds>/<doc_id>.json                accepted classification + provenance
    sme_packets/sme_packet_<doc_id>.json       review packet
    ground_truth/gt_<doc_id>.json              SME answer (versions: gt_<doc_id>.v2.json, …)
    reports/<ds>/batch_report.json|.md|.html
    cache/llm/<key>.json                       verdict cache

Writes are atomic: a local file is written beside its name and renamed into place; a remote
object is uploaded in one request (a single GCS upload is atomic), never streamed into place.
"""

from __future__ import annotations

import json
import os
import pathlib
import uuid
from typing import Any

from pydantic import BaseModel


def as_root(root: Any) -> Any:
    """A path or URI string → a path object. ``file://`` and plain paths become
    :class:`pathlib.Path`; other URIs (``gs://…``) become an ``ObjectStoragePath`` when Airflow
    is installed, else a ``universal_pathlib`` ``UPath``."""
    if not isinstance(root, str):
        return root
    if root.startswith("file://"):
        return pathlib.Path(root[len("file://") :])
    if "://" not in root:
        return pathlib.Path(root)
    try:  # pragma: no cover - exercised by the Airflow-side tests
        from airflow.sdk import ObjectStoragePath

        return ObjectStoragePath(root)
    except ImportError:  # pragma: no cover
        from upath import UPath

        return UPath(root)


def _local_path(path: Any) -> pathlib.Path | None:
    """The local filesystem path behind ``path``, or None when it is remote."""
    if isinstance(path, pathlib.Path) and type(path).__module__.startswith("pathlib"):
        return path
    protocol = getattr(path, "protocol", None)
    if protocol in ("file", "local", ("file", "local")):
        return pathlib.Path(getattr(path, "path", str(path)))
    return None


def uri_of(path: Any) -> str:
    local = _local_path(path)
    if local is not None:
        return local.resolve().as_uri()
    return str(path)


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return obj


def dumps(obj: Any) -> bytes:
    return (json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode()


class ArtifactStore:
    def __init__(self, root: Any):
        self.root = as_root(root)

    # ------------------------------------------------------------------ paths
    def path(self, rel: str) -> Any:
        p = self.root
        for part in rel.strip("/").split("/"):
            if part:
                p = p / part
        return p

    def uri(self, rel: str) -> str:
        return uri_of(self.path(rel))

    @staticmethod
    def run_dir(ds: str, doc_id: str) -> str:
        return f"runs/{ds}/{doc_id}"

    @staticmethod
    def attempt_dir(ds: str, doc_id: str, attempt: int) -> str:
        return f"runs/{ds}/{doc_id}/attempt_{attempt}"

    @staticmethod
    def packet_rel(doc_id: str) -> str:
        return f"sme_packets/sme_packet_{doc_id}.json"

    @staticmethod
    def ground_truth_rel(doc_id: str, version: int = 1) -> str:
        suffix = "" if version == 1 else f".v{version}"
        return f"ground_truth/gt_{doc_id}{suffix}.json"

    # ------------------------------------------------------------------ reads
    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read_bytes(self, rel: str) -> bytes:
        return self.path(rel).read_bytes()

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_bytes(rel))

    def list(self, rel_dir: str, suffix: str = "") -> list[str]:
        """Names (not paths) of the files directly under ``rel_dir``, sorted."""
        d = self.path(rel_dir)
        if not d.exists():
            return []
        names = [p.name for p in d.iterdir() if p.is_file() and p.name.endswith(suffix)]
        return sorted(n for n in names if not n.startswith(".tmp-"))

    # ------------------------------------------------------------------ writes
    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = True) -> bool:
        """Write atomically. With ``overwrite=False`` an existing file is left alone and
        False is returned (locally the create-if-absent is atomic too: ``os.link``)."""
        target = self.path(rel)
        local = _local_path(target)
        if local is None:
            if not overwrite and target.exists():
                return False
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)  # one upload: atomic on GCS
            return True
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.parent / f".tmp-{local.name}-{uuid.uuid4().hex}"
        tmp.write_bytes(data)
        try:
            if overwrite:
                os.replace(tmp, local)
                return True
            try:
                os.link(tmp, local)
            except FileExistsError:
                return False
            return True
        finally:
            if tmp.exists():
                tmp.unlink()

    def write_json(self, rel: str, obj: Any, *, overwrite: bool = True) -> bool:
        return self.write_bytes(rel, dumps(obj), overwrite=overwrite)

    def write_text(self, rel: str, text: str, *, overwrite: bool = True) -> bool:
        return self.write_bytes(rel, text.encode(), overwrite=overwrite)
