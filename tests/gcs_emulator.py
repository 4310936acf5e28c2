"""A real GCS JSON-API server for tests: the ``gcp-storage-emulator`` package, in this process.

``GcsEmulator.start()`` serves an in-memory store on a free 127.0.0.1 port (a daemon thread; the
port is the one the OS gave the bound socket, so there is no pick-then-bind race), creates a
bucket and describes an Airflow connection that reaches it without credentials:

* ``AIRFLOW_CONN_<CONN_ID>`` (JSON) of type ``google_cloud_platform`` with the extras
  ``is_anonymous`` (``GoogleBaseHook`` then yields ``AnonymousCredentials``, which gcsfs accepts as
  its token and never refreshes), ``project`` and ``gcs.endpoint`` (the provider's
  ``airflow.providers.google.cloud.fs.gcs.get_fs`` passes it to ``GCSFileSystem(endpoint_url=…)``).
  So ``ObjectStoragePath("gs://…", conn_id=CONN_ID)`` works with no key file and no ADC.
* ``STORAGE_EMULATOR_HOST`` (gcsfs and google-cloud-storage honour it when no endpoint is given).
* ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``: gcsfs ≥ 2026 makes ``gcsfs.GCSFileSystem`` its
  ``ExtendedGcsFileSystem``, which asks the Storage Control **gRPC** API for each bucket's layout
  (zonal / hierarchical). The emulator speaks only the JSON API, the lookup times out after 60 s and
  is not cached on failure, so every operation would wait a minute. The variable must be set before
  gcsfs is first imported; :meth:`GcsEmulator.start` sets it and refuses to go on if an
  ``ExtendedGcsFileSystem`` was already imported.

Fidelity shim: the emulator ignores the ``ifGenerationMatch`` precondition on uploads (an upload
with ``ifGenerationMatch=0`` over an existing object silently replaces it, verified against
gcp-storage-emulator 2026.7.19). Real GCS answers 412 instead, and ``ArtifactStore``'s atomic
create-if-absent relies on that. While an emulator runs, its upload handler is wrapped to check the
precondition the way GCS does (``0``: the object must not exist; ``N``: its live generation must
be ``N``) and to count the requests that carried one (``precondition_requests``), so a test can
assert that the store sent it. The server handles one request at a time, so check-and-create in
the handler is atomic, as it is on GCS. :attr:`GcsEmulator.honours_preconditions_natively` records
whether the unwrapped emulator does it by itself (probed at start).

Environment for a subprocess (``airflow dags test``): :attr:`GcsEmulator.env`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import pytest

CONN_ID = "docverify_gcs_emulator"
BUCKET = "docverify-test"
PROJECT = "docverify-emulator"
_ZB_ENV = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"


def _object_name(request: Any) -> str | None:
    """The object an upload request names (query ``name``, else the JSON metadata part)."""
    if request.query.get("name"):
        return request.query["name"][0]
    data = request.data
    if isinstance(data, dict):
        meta = data.get("meta") if isinstance(data.get("meta"), dict) else data
        return meta.get("name")
    return None


def _quiet_disconnects(handle_error):
    """The server's error hook, silent for a client that hung up first: gcsfs's ``info`` races a
    metadata GET against a listing and drops the loser's connection, which the stdlib server
    would print as a BrokenPipeError traceback each time."""

    def handle(request, client_address):
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return None
        return handle_error(request, client_address)

    return handle


@dataclass
class GcsEmulator:
    """One emulator server. ``start()`` / ``stop()``; ``wipe()`` empties it (buckets kept)."""

    bucket: str = BUCKET
    conn_id: str = CONN_ID
    project: str = PROJECT
    port: int = 0
    precondition_requests: int = 0
    #: HTTP requests the server answered, by method (a test takes the difference around what it measures)
    requests: dict[str, int] = field(default_factory=dict)
    honours_preconditions_natively: bool | None = None
    _server: Any = field(default=None, repr=False)
    _patched: list = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ------------------------------------------------------------------ addresses
    @property
    def host(self) -> str:
        """``http://127.0.0.1:<port>`` — the value of ``STORAGE_EMULATOR_HOST``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def connection(self) -> dict:
        """The Airflow connection (JSON form of ``AIRFLOW_CONN_<ID>``) that reaches this server."""
        return {"conn_type": "google_cloud_platform",
                "extra": {"is_anonymous": True, "project": self.project, "gcs.endpoint": self.host}}

    @property
    def env(self) -> dict[str, str]:
        """Environment that points gcsfs and Airflow at this server (for subprocesses too)."""
        return {"STORAGE_EMULATOR_HOST": self.host, _ZB_ENV: "false",
                f"AIRFLOW_CONN_{self.conn_id.upper()}": json.dumps(self.connection)}

    def root_uri(self, prefix: str) -> str:
        return f"gs://{self.bucket}/{prefix.strip('/')}"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> GcsEmulator:
        os.environ.setdefault(_ZB_ENV, "false")
        if os.environ[_ZB_ENV].lower() in ("true", "1"):
            raise RuntimeError(f"{_ZB_ENV}={os.environ[_ZB_ENV]!r}: the emulator has no Storage Control gRPC "
                               f"API; unset it (or set it to false) for the GCS emulator tests")
        gcsfs = sys.modules.get("gcsfs")
        if gcsfs is not None and gcsfs.GCSFileSystem.__name__ != "GCSFileSystem":
            raise RuntimeError(f"gcsfs was imported before {_ZB_ENV}=false was set (it chose "
                               f"{gcsfs.GCSFileSystem.__name__}); set it in the environment of the test run")
        from gcp_storage_emulator.server import create_server

        self._server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=self.bucket)
        self._server.start()
        httpd = self._server._api._httpd
        self.port = httpd.server_address[1]
        httpd.handle_error = _quiet_disconnects(httpd.handle_error)
        self.honours_preconditions_natively = self._probe_preconditions()
        if not self.honours_preconditions_natively:
            self._wrap_uploads()
        self._count_requests()
        return self

    def request_count(self) -> int:
        return sum(self.requests.values())

    def _count_requests(self) -> None:
        """Count every request the server answers (``requests``), by HTTP method."""
        from gcp_storage_emulator import server

        emulator = self
        for method in ("GET", "POST", "DELETE", "PUT", "PATCH"):
            name = f"do_{method}"
            original = getattr(server.RequestHandler, name)

            def counted(handler, _original=original, _method=method):
                with emulator._lock:
                    emulator.requests[_method] = emulator.requests.get(_method, 0) + 1
                return _original(handler)

            setattr(server.RequestHandler, name, counted)
            self._patched.append((server.RequestHandler, name, original))

    def stop(self) -> None:
        self._unwrap_uploads()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def wipe(self) -> None:
        """Delete every object (the bucket stays)."""
        self._server.wipe(keep_buckets=True)

    def delete_prefix(self, prefix: str) -> int:
        """Delete the objects under ``prefix/``; returns how many."""
        storage = self._server._storage
        names = [n for n in list(storage.objects.get(self.bucket, {})) if n.startswith(prefix.strip("/") + "/")]
        for name in names:
            storage.delete_file(self.bucket, name)
        return len(names)

    def object_names(self, prefix: str = "") -> list[str]:
        """Names of the live objects under ``prefix`` (straight from the server's store)."""
        return sorted(n for n in self._server._storage.objects.get(self.bucket, {}) if n.startswith(prefix))

    # ------------------------------------------------------------------ preconditions
    def _upload(self, name: str, data: bytes, if_generation_match: str | None = None) -> int:
        """One multipart upload through plain HTTP; returns the status code."""
        meta = json.dumps({"name": name}).encode()
        body = (b"--B\r\nContent-Type: application/json\r\n\r\n" + meta + b"\r\n--B\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--B--")
        query = {"uploadType": "multipart"}
        if if_generation_match is not None:
            query["ifGenerationMatch"] = if_generation_match
        url = f"{self.host}/upload/storage/v1/b/{self.bucket}/o?{urllib.parse.urlencode(query)}"
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": 'multipart/related; boundary="B"'})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def _probe_preconditions(self) -> bool:
        """Does the bare emulator refuse ``ifGenerationMatch=0`` over an existing object?"""
        name = f"_probe/{uuid.uuid4().hex}"
        assert self._upload(name, b"first") == 200
        status = self._upload(name, b"second", if_generation_match="0")
        self._server._storage.delete_file(self.bucket, name)
        return status == HTTPStatus.PRECONDITION_FAILED

    def _wrap_uploads(self) -> None:
        from gcp_storage_emulator import server
        from gcp_storage_emulator.handlers import objects

        original = objects.insert
        emulator = self

        def insert(request, response, storage, *args, **kwargs):
            wanted = request.query.get("ifGenerationMatch")
            if wanted:
                with emulator._lock:
                    emulator.precondition_requests += 1
                name = _object_name(request)
                try:
                    live = storage.get_file_obj(request.params["bucket_name"], name) if name else None
                except Exception:  # noqa: BLE001 - the emulator raises NotFound for a missing object
                    live = None
                generation = str(live.get("generation")) if live else "0"
                if generation != wanted[0]:
                    response.status = HTTPStatus.PRECONDITION_FAILED
                    response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you "
                                             "specified did not hold.", "errors": [{"reason": "conditionNotMet"}]}})
                    return None
            return original(request, response, storage, *args, **kwargs)

        for _regex, handlers in server.HANDLERS:
            for method, handler in list(handlers.items()):
                if handler is original:
                    handlers[method] = insert
                    self._patched.append((handlers, method, original))
        objects.insert = insert  # the router's fallback for uploads posted without /upload
        self._patched.append((objects, "insert", original))

        original_delete = objects.delete

        def delete(request, response, storage, *args, **kwargs):
            """A DELETE with ``ifGenerationMatch`` (``ArtifactStore.delete_if``): 412 unless the
            live generation is the one named, as GCS does (the bare emulator ignores it)."""
            wanted = request.query.get("ifGenerationMatch")
            if wanted:
                with emulator._lock:
                    emulator.precondition_requests += 1
                try:
                    live = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
                except Exception:  # noqa: BLE001 - the emulator raises NotFound for a missing object
                    live = None
                if live is not None and str(live.get("generation")) != wanted[0]:
                    response.status = HTTPStatus.PRECONDITION_FAILED
                    response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you "
                                             "specified did not hold.", "errors": [{"reason": "conditionNotMet"}]}})
                    return None
            return original_delete(request, response, storage, *args, **kwargs)

        for _regex, handlers in server.HANDLERS:
            for method, handler in list(handlers.items()):
                if handler is original_delete:
                    handlers[method] = delete
                    self._patched.append((handlers, method, original_delete))

    def _unwrap_uploads(self) -> None:
        for target, key, original in reversed(self._patched):
            if isinstance(target, dict):
                target[key] = original
            else:
                setattr(target, key, original)
        self._patched.clear()


@dataclass
class GcsTestRoot:
    """A per-test prefix in the emulator's bucket: ``root_uri`` is ``gs://<bucket>/<prefix>``."""

    emulator: GcsEmulator
    prefix: str

    @property
    def host(self) -> str:
        return self.emulator.host

    @property
    def bucket(self) -> str:
        return self.emulator.bucket

    @property
    def conn_id(self) -> str:
        return self.emulator.conn_id

    @property
    def root_uri(self) -> str:
        return self.emulator.root_uri(self.prefix)

    def path(self, rel: str = "") -> Any:
        """``ObjectStoragePath`` of ``root_uri/rel`` on the emulator's connection."""
        from airflow.sdk import ObjectStoragePath

        uri = self.root_uri + (f"/{rel.strip('/')}" if rel.strip("/") else "")
        return ObjectStoragePath(uri, conn_id=self.conn_id)

    def object_names(self) -> list[str]:
        """Keys under this prefix, relative to it, as the server holds them."""
        n = len(self.prefix) + 1
        return [k[n:] for k in self.emulator.object_names(self.prefix + "/")]

    def wipe(self) -> int:
        return self.emulator.delete_prefix(self.prefix)


@pytest.fixture(scope="session")
def gcs_emulator():
    """The session's GCS emulator, with its connection and ``STORAGE_EMULATOR_HOST`` in
    ``os.environ`` (restored afterwards). Imports the tests' Airflow environment first, so
    AIRFLOW_HOME is the private one before Airflow reads its configuration."""
    import tests.dags.airflow_env  # noqa: F401

    emulator = GcsEmulator().start()
    saved = {k: os.environ.get(k) for k in emulator.env}
    os.environ.update(emulator.env)
    try:
        yield emulator
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        emulator.stop()


@pytest.fixture
def gcs_root(gcs_emulator, request):
    """A fresh ``gs://`` prefix for one test, emptied afterwards."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60].strip("-")
    root = GcsTestRoot(gcs_emulator, f"t-{name}-{uuid.uuid4().hex[:8]}")
    yield root
    root.wipe()
