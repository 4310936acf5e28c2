"""Artifact store on any pathlib-like root.

The root is a :class:`pathlib.Path` in the CLI and the tests, and an Airflow
``ObjectStoragePath`` (``file://…`` or ``gs://…``) in the DAGs: the store only uses the
operations both have (``/``, ``exists``, ``read_bytes``, ``write_bytes``, ``iterdir``,
``mkdir``). The paths of a night's layout are built by :class:`docverify.storage.runstore.RunStore` only
(which also gives its objects as models and memoises reads); this class is the request layer::

    incoming/<ds>/<doc>.pdf                    input (never modified)
    runs/<ds>/<doc_id>/bundle.json             DocumentBundle
    runs/<ds>/<doc_id>/result.json             classification, attempts, V5 decisions (the night's)
    runs/<ds>/<doc_id>/attempt_<n>/…           report.json + v5_arbiter_decision.json (``verify --out``)
    accepted/<ds>/<doc_id>.json                accepted classification + provenance
    sme_packets/sme_packet_<review_id>.json    review packet
    ground_truth/gt_<review_id>.json           SME answer (versions: gt_<review_id>.v2.json, …)
    reports/<ds>/batch_report.json|.md|.html
    cache/llm/<key>.json                       verdict cache

Writes are atomic: a local file is written beside its name and renamed into place; a remote
object is uploaded in one request (a single GCS upload is atomic), never streamed into place.
Create-if-absent (``overwrite=False``) is atomic too: locally through ``os.link``; remotely
through the filesystem's ``pipe_file(..., mode="create")``, which gcsfs sends as a GCS upload
with the precondition ``ifGenerationMatch=0`` (the server refuses it with 412 when the object
exists, so of several concurrent writers exactly one wins).

File modes on a local root: the store's objects hold PHI (bundles, results, packets, ground truth,
accepted outputs, the verdict cache) — every file it writes is created ``0600`` and every folder it
creates ``0700``, whatever the process's umask (the file is opened with ``O_CREAT|O_EXCL`` and mode
0600, the folders made one by one with mode 0700 and chmod-ed, as a umask can only take bits away).
Folders that already exist (the root, ``incoming/``) are left as they are. Remote roots have no modes:
access is the bucket's IAM.

Remote roots (any fsspec-backed path: ``ObjectStoragePath``, ``UPath``) are driven through their
filesystem directly, one request per operation where possible: ``cat_file`` for reads (no ranged
read-ahead), ``pipe_file`` for writes, a fresh ``ls`` for listings (never a cached listing that
another process may have outdated). URIs of remote objects are the plain ``gs://bucket/key`` form,
without the Airflow connection id that ``str(ObjectStoragePath)`` embeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import re
import stat as stat_mod
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any, NotRequired, Protocol, TypedDict

from pydantic import BaseModel

from docverify.storage.limits import HASH_CHUNK_BYTES, INPUT_UNSAFE_NAME, InputError
from docverify.storage.paths import check_part, check_rel


class StatResult(Protocol):
    """What the store reads of a path's ``stat()``."""

    @property
    def st_size(self) -> int: ...


class StoragePath(Protocol):
    """A root of the store and every path under it: the operations :class:`pathlib.Path`,
    ``universal_pathlib``'s ``UPath`` and Airflow's ``ObjectStoragePath`` share, and the only ones
    the store uses on a path that is not remote (a remote path goes through its :class:`RemoteFS`)."""

    @property
    def name(self) -> str: ...

    @property
    def parent(self) -> StoragePath: ...

    def __truediv__(self, key: str, /) -> StoragePath: ...

    def exists(self) -> bool: ...

    def is_file(self) -> bool: ...

    def is_dir(self) -> bool: ...

    def iterdir(self) -> Iterator[StoragePath]: ...

    def stat(self) -> StatResult: ...

    def open(self, mode: str, /) -> IO[bytes]: ...

    def read_bytes(self) -> bytes: ...

    def write_bytes(self, data: bytes, /) -> int: ...

    def mkdir(self, *, parents: bool = ..., exist_ok: bool = ...) -> None: ...

    def unlink(self) -> None: ...


class ObjectInfo(TypedDict):
    """A remote object's metadata as fsspec gives it (``info``, each entry of a detailed ``ls``): the
    keys the store reads (gcsfs gives more of the service's JSON)."""

    name: str
    size: int
    #: "file" or "directory"
    type: str
    #: GCS: the object's live generation (what a compare-and-swap conditions on)
    generation: NotRequired[str | int]


class RemoteFS(Protocol):
    """The fsspec filesystem behind a remote path (gcsfs in production): the requests the store
    sends. ``info`` and ``ls`` give the service's own JSON (its object metadata)."""

    def invalidate_cache(self, path: str | None = None) -> None: ...

    def info(self, path: str) -> ObjectInfo: ...

    def ls(self, path: str, detail: bool = ..., *, refresh: bool = ...) -> list[ObjectInfo]: ...

    def cat_file(self, path: str) -> bytes: ...

    def open(self, path: str, mode: str = ...) -> IO[bytes]: ...

    def pipe_file(self, path: str, value: bytes, *, mode: str = ...) -> None: ...

    def rm_file(self, path: str) -> None: ...


def as_root(root: str | StoragePath) -> StoragePath:
    """A path or URI string → a path object. ``file://`` and plain paths become
    :class:`pathlib.Path`; other URIs (``gs://…``) a ``universal_pathlib`` ``UPath`` (fsspec). The
    core never imports Airflow: the DAG's tasks pass an ``ObjectStoragePath`` (on the storage
    connection) in as the root object instead of a string."""
    if not isinstance(root, str):
        return root
    if root.startswith("file://"):
        return pathlib.Path(root[len("file://") :])
    if "://" not in root:
        return pathlib.Path(root)
    from upath import UPath

    return UPath(root)


def local_path(path: StoragePath) -> pathlib.Path | None:
    """The local filesystem path behind ``path``, or None when it is remote."""
    if isinstance(path, pathlib.Path) and type(path).__module__.startswith("pathlib"):
        return path
    protocol = getattr(path, "protocol", None)
    if protocol in ("file", "local", ("file", "local")):
        return pathlib.Path(getattr(path, "path", str(path)))
    return None


def remote_target(path: StoragePath) -> tuple[RemoteFS, str] | None:
    """``(fsspec filesystem, key)`` behind a remote path, or None for a local path (or an object
    that has no fsspec filesystem, which is then used through its own pathlib methods)."""
    if local_path(path) is not None:
        return None
    fs, key = getattr(path, "fs", None), getattr(path, "path", None)
    if fs is None or not isinstance(key, str):
        return None
    return fs, key


def uri_of(path: StoragePath) -> str:
    """``file:///abs/path`` for a local path; ``<protocol>://<bucket>/<key>`` for a remote one
    (without the ``conn_id@`` that ``str(ObjectStoragePath)`` carries: the connection is
    configuration, not part of the object's name)."""
    local = local_path(path)
    if local is not None:
        return local.resolve().as_uri()
    protocol, key = getattr(path, "protocol", None), getattr(path, "path", None)
    if isinstance(protocol, tuple | list):
        protocol = protocol[0] if protocol else None
    if isinstance(protocol, str) and protocol and isinstance(key, str):
        return f"{protocol}://{key.lstrip('/')}"
    return str(path)


def to_jsonable(obj: object) -> object:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    return obj


def dumps(obj: object) -> bytes:
    return (json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode()


#: the store's own temporary names (a local write lands beside its target, then is renamed): a
#: distinctive prefix and exactly 32 hex digits, no extension — no upload is named so, and a
#: listing hides these names only (``.tmp-scan.pdf`` is an input like any other). The legacy
#: ``.tmp-<32 hex>`` of earlier versions is hidden too (a leftover of a killed write).
TMP_PREFIX = ".docverify-tmp-"
_TMP_NAME = re.compile(r"\.(?:docverify-)?tmp-[0-9a-f]{32}")


#: the lock files of :meth:`ArtifactStore.replace_if` / :meth:`~ArtifactStore.delete_if` on a local root
#: (``<prefix><32 hex>.lock``, hidden from listings too): the hex digits are the first 128 bits of the
#: sha256 of the object's name, so a lock name has 53 bytes whatever the object's name — an object
#: whose name has the full 255 bytes a folder entry may have can be replaced and deleted as well as
#: written (ADR 0033; the earlier ``<prefix><name>.lock`` added 21 bytes, and a name over 234 bytes
#: could be created but never released: ENAMETOOLONG)
LOCK_PREFIX = ".docverify-lock-"


def lock_name(name: str) -> str:
    """The lock file beside the object named ``name`` (see :data:`LOCK_PREFIX`)."""
    return f"{LOCK_PREFIX}{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.lock"


def is_tmp_name(name: str) -> bool:
    """True for the store's own temporary and lock names only (see :data:`TMP_PREFIX`,
    :data:`LOCK_PREFIX`)."""
    return _TMP_NAME.fullmatch(name) is not None or name.startswith(LOCK_PREFIX)


def _generation(fs: RemoteFS, key: str) -> str | None:
    """The live generation of a remote object (a fresh ``info``, never the listing cache)."""
    fs.invalidate_cache(key)
    gen = fs.info(key).get("generation")
    return str(gen) if gen is not None else None


def _upload_if_generation(fs: RemoteFS, key: str, data: bytes, generation: str) -> bool:
    """One GCS upload of ``data`` to ``key`` with ``ifGenerationMatch=<generation>``: False on 412
    (another writer's generation is live, or the object is gone). gcsfs's ``pipe_file`` sends only
    ``ifGenerationMatch=0`` (``mode="create"``), so the multipart upload is sent the way gcsfs's
    ``simple_upload`` does, with the generation of the caller's read."""
    from urllib.parse import quote

    call, location = getattr(fs, "call", None), getattr(fs, "_location", None)
    if call is None or location is None:
        raise NotImplementedError(f"compare-and-swap needs a GCS filesystem (gcsfs), not {type(fs).__name__}")
    bucket, _, name = key.lstrip("/").partition("/")
    meta = json.dumps({"name": name})
    body = (f"--==0==\nContent-Type: application/json; charset=UTF-8\n\n{meta}\n--==0==\n"
            f"Content-Type: application/octet-stream\n\n").encode() + data + b"\n--==0==--"
    try:
        call("POST", f"{location}/upload/storage/v1/b/{quote(bucket)}/o", uploadType="multipart",
             headers={"Content-Type": 'multipart/related; boundary="==0=="'}, data=body, json_out=True,
             ifGenerationMatch=str(generation))
    except Exception as exc:  # gcsfs maps 412 to FileExistsError / an HttpError with code 412
        if isinstance(exc, FileExistsError | FileNotFoundError) or getattr(exc, "code", None) in (404, 412) \
                or "412" in str(exc) or "conditionNotMet" in str(exc):
            return False
        raise
    fs.invalidate_cache(key)
    return True


def _delete_if_generation(fs: RemoteFS, key: str, generation: str) -> bool:
    """One GCS ``DELETE`` of ``key`` with ``ifGenerationMatch=<generation>``: False on 412 (another
    writer's generation is live) or 404 (the object is gone). gcsfs's ``rm_file`` sends no
    precondition, so the request is sent through its ``call`` as :func:`_upload_if_generation` does."""
    call = getattr(fs, "call", None)
    if call is None:
        raise NotImplementedError(f"compare-and-swap needs a GCS filesystem (gcsfs), not {type(fs).__name__}")
    bucket, _, name = key.lstrip("/").partition("/")
    try:
        call("DELETE", "b/{}/o/{}", bucket, name, ifGenerationMatch=str(generation))
    except Exception as exc:  # gcsfs maps 412 to FileExistsError, 404 to FileNotFoundError
        if isinstance(exc, FileExistsError | FileNotFoundError) or getattr(exc, "code", None) in (404, 412) \
                or "412" in str(exc) or "conditionNotMet" in str(exc):
            fs.invalidate_cache(key)
            return False
        raise
    fs.invalidate_cache(key)
    return True


#: modes of what the store creates on a local root (see the module docstring)
FILE_MODE = 0o600
DIR_MODE = 0o700


def _make_dirs(path: pathlib.Path) -> None:
    """``mkdir -p`` with every folder it creates ``0700`` (``Path.mkdir(parents=True)`` gives the
    parents the umask's default mode); existing folders are not touched."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue  # another writer made it: its mode is the same
        os.chmod(d, DIR_MODE)  # exactly 0700 whatever the umask


def _write_private(path: pathlib.Path, data: bytes) -> None:
    """A new file of mode 0600 holding ``data`` (``O_EXCL``: never an existing file's mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _name(path: StoragePath) -> str:
    return path.name


class OutsideRootError(PermissionError):
    """A path that would resolve outside the storage root (through a symbolic link)."""


class ArtifactStore:
    def __init__(self, root: str | StoragePath):
        self.root = as_root(root)
        local = local_path(self.root)
        self._real_root = os.path.realpath(local) if local is not None else None

    # ------------------------------------------------------------------ paths
    def path(self, rel: str, *, confine: bool = True) -> StoragePath:
        """``root / part / …``: every part through :func:`docverify.storage.paths.check_part` (no
        separators, ``..``, control characters or over-long names); on a local root the real path
        (symbolic links resolved) must stay under the root's, else :class:`OutsideRootError`
        (``confine=False`` only to *name* a path, never to open it)."""
        p = self.root
        for part in check_rel(rel):
            p = p / part
        if confine and self._real_root is not None:
            local = local_path(p)
            assert local is not None  # under a local root (it has a real path) every path is local
            real = os.path.realpath(local)
            if real != self._real_root and not real.startswith(self._real_root + os.sep):
                raise OutsideRootError(f"{rel} resolves outside the storage root (a symbolic link); "
                                       f"replace the link by the file itself")
        return p

    def uri(self, rel: str) -> str:
        """The URI naming ``rel`` (a symbolic link is named, not resolved)."""
        p = self.path(rel, confine=False)
        local = local_path(p)
        return local.absolute().as_uri() if local is not None else uri_of(p)

    @staticmethod
    def run_dir(ds: str, doc_id: str) -> str:
        return f"runs/{check_part(ds, 'date partition')}/{check_part(doc_id, 'doc id')}"

    @staticmethod
    def attempt_dir(ds: str, doc_id: str, attempt: int) -> str:
        return f"{ArtifactStore.run_dir(ds, doc_id)}/attempt_{int(attempt)}"

    PACKETS_DIR = "sme_packets"
    GROUND_TRUTH_DIR = "ground_truth"

    @staticmethod
    def packet_rel(doc_id: str) -> str:
        return f"{ArtifactStore.PACKETS_DIR}/sme_packet_{check_part(doc_id, 'doc id')}.json"

    @staticmethod
    def ground_truth_rel(doc_id: str, version: int = 1) -> str:
        suffix = "" if version == 1 else f".v{int(version)}"
        return f"{ArtifactStore.GROUND_TRUTH_DIR}/gt_{check_part(doc_id, 'doc id')}{suffix}.json"

    # ------------------------------------------------------------------ reads
    def exists(self, rel: str) -> bool:
        return bool(self.path(rel).exists())

    def read_bytes(self, rel: str) -> bytes:
        """The object's bytes (remote: one GET, no ranged read-ahead)."""
        target = self.path(rel)
        remote = remote_target(target)
        if remote is not None:
            fs, key = remote
            return bytes(fs.cat_file(key))
        return bytes(target.read_bytes())

    def size(self, rel: str) -> int:
        """The object's size in bytes, without reading it."""
        target = self.path(rel)
        remote = remote_target(target)
        if remote is not None:
            fs, key = remote
            return int(fs.info(key)["size"])
        return int(target.stat().st_size)

    def sha256(self, rel: str) -> str:
        """sha256 of the object, read in chunks of ``HASH_CHUNK_BYTES`` (memory stays flat)."""
        h = hashlib.sha256()
        target = self.path(rel)
        remote = remote_target(target)
        with (remote[0].open(remote[1], "rb") if remote is not None else target.open("rb")) as fh:
            while chunk := fh.read(HASH_CHUNK_BYTES):
                h.update(chunk)
        return h.hexdigest()

    def entries(self, rel_dir: str) -> list[tuple[str, str, int]]:
        """``(name, kind, size)`` of everything directly under ``rel_dir``, sorted by name, without
        following symbolic links: kind is ``file`` (a regular file), ``symlink`` or ``other`` (a
        folder, FIFO, socket, device). Remote roots have regular objects only."""
        d = self.path(rel_dir)
        remote = remote_target(d)
        out = []
        if remote is not None:
            fs, key = remote
            try:
                listing = fs.ls(key, detail=True, refresh=True)
            except FileNotFoundError:
                return []
            for e in listing:
                name = e["name"].rstrip("/").rsplit("/", 1)[-1]
                out.append((name, "file" if e.get("type") == "file" else "other", int(e.get("size") or 0)))
        else:
            local = local_path(d)
            if local is None:  # a pathlib-like object without an fsspec filesystem
                return [(p.name, "file" if p.is_file() else "other", 0) for p in sorted(d.iterdir(), key=_name)] \
                    if d.exists() else []
            try:
                scan = list(os.scandir(local))
            except (FileNotFoundError, NotADirectoryError):
                return []
            for entry in scan:
                st = entry.stat(follow_symlinks=False)
                kind = "symlink" if stat_mod.S_ISLNK(st.st_mode) else "file" if stat_mod.S_ISREG(st.st_mode) else "other"
                out.append((entry.name, kind, st.st_size))
        return sorted((e for e in out if not is_tmp_name(e[0])), key=lambda e: e[0])

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_bytes(rel))

    def read_json_if_exists(self, rel: str) -> Any | None:
        """The JSON at ``rel``, or None when there is none — one read instead of ``exists`` then
        ``read_json`` (two requests or more on a remote root)."""
        try:
            return self.read_json(rel)
        except FileNotFoundError:
            return None

    def list(self, rel_dir: str, suffix: str = "") -> list[str]:
        """Names (not paths) of the files directly under ``rel_dir``, sorted."""
        d = self.path(rel_dir)
        remote = remote_target(d)
        if remote is not None:
            fs, key = remote
            try:  # one fresh listing (refresh: a cached one may predate another process's writes)
                entries = fs.ls(key, detail=True, refresh=True)
            except FileNotFoundError:
                return []
            names = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "file"]
        elif not d.exists():
            return []
        else:
            names = [p.name for p in d.iterdir() if p.is_file()]
        return sorted(n for n in names if n.endswith(suffix) and not is_tmp_name(n))

    # ------------------------------------------------------------------ writes
    def write_bytes(self, rel: str, data: bytes, *, overwrite: bool = True) -> bool:
        """Write atomically; True when written. With ``overwrite=False`` an existing object is
        left alone and False is returned, atomically: locally through ``os.link``, remotely through
        ``pipe_file(mode="create")`` (gcsfs: one upload with ``ifGenerationMatch=0``, so two
        concurrent writers cannot both win). A filesystem without a native create mode falls back
        to fsspec's exists-then-write, which is not atomic."""
        if not check_rel(rel):  # the root itself is never an object: its temp file would sit beside it
            raise InputError(INPUT_UNSAFE_NAME, f"{rel!r} names no object under the storage root", rel)
        target = self.path(rel)
        remote = remote_target(target)
        if remote is not None:
            fs, key = remote  # an object store has no directories to make
            try:
                fs.pipe_file(key, data, mode="overwrite" if overwrite else "create")  # one upload
            except FileExistsError:
                if overwrite:
                    raise
                return False
            return True
        local = local_path(target)
        if local is None:  # a pathlib-like object without an fsspec filesystem
            if not overwrite and target.exists():
                return False
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            return True
        _make_dirs(local.parent)
        tmp = local.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"  # short: a 250-character name still fits
        _write_private(tmp, data)  # 0600: renamed into place with its mode
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

    # ------------------------------------------------------------------ compare-and-swap
    def read_versioned(self, rel: str) -> tuple[bytes, str] | None:
        """The object's bytes and its *version* (None when there is none), for
        :meth:`replace_if`: remotely the GCS object's ``generation`` (info, read, info again until
        both infos agree, so the bytes are that generation's); locally the sha256 of the bytes."""
        target = self.path(rel)
        remote = remote_target(target)
        if remote is None:
            try:
                data = self.read_bytes(rel)
            except FileNotFoundError:
                return None
            return data, hashlib.sha256(data).hexdigest()
        fs, key = remote
        for _ in range(5):
            try:
                before = _generation(fs, key)
                data = fs.cat_file(key)
                after = _generation(fs, key)
            except FileNotFoundError:
                return None
            if before is not None and before == after:
                return data, before
        raise RuntimeError(f"{rel}: the object kept changing while it was read")

    def replace_if(self, rel: str, data: bytes, version: str) -> bool:
        """Replace the object with ``data`` only when it still is ``version`` (of
        :meth:`read_versioned`); True when replaced, False when another writer changed (or
        deleted) it in between — an atomic compare-and-swap: of several writers holding the same
        version exactly one wins. Remotely one upload with the precondition
        ``ifGenerationMatch=<generation>`` (GCS refuses a stale one with 412); locally under an
        exclusive ``flock`` of a lock file beside the object (:func:`lock_name`: ``.docverify-lock-<32 hex>.lock``,
        hidden from listings; released by the kernel if the process dies), the compare and the atomic rename
        inside it."""
        if not check_rel(rel):
            raise InputError(INPUT_UNSAFE_NAME, f"{rel!r} names no object under the storage root", rel)
        target = self.path(rel)
        remote = remote_target(target)
        if remote is not None:
            return _upload_if_generation(remote[0], remote[1], data, version)

        def replace(local: pathlib.Path) -> None:
            tmp = local.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
            _write_private(tmp, data)
            try:
                os.replace(tmp, local)
            finally:
                if tmp.exists():
                    tmp.unlink()

        return self._local_if_version(target, version, replace)

    def delete_if(self, rel: str, version: str) -> bool:
        """Delete the object only when it still is ``version`` (of :meth:`read_versioned`); True
        when deleted, False when another writer changed (or deleted) it in between — the delete of
        :meth:`replace_if`'s compare-and-swap. Remotely one DELETE with the precondition
        ``ifGenerationMatch=<generation>`` (GCS refuses a stale one with 412); locally under the
        same ``flock`` as :meth:`replace_if` (so it excludes writers that use it, not a plain
        :meth:`write_bytes`), the compare and the unlink inside it."""
        if not check_rel(rel):
            raise InputError(INPUT_UNSAFE_NAME, f"{rel!r} names no object under the storage root", rel)
        target = self.path(rel)
        remote = remote_target(target)
        if remote is not None:
            return _delete_if_generation(remote[0], remote[1], version)
        return self._local_if_version(target, version, pathlib.Path.unlink)

    def _local_if_version(self, target: StoragePath, version: str, act: Callable[[pathlib.Path], None]) -> bool:
        """The local half of :meth:`replace_if` / :meth:`delete_if`: under the object's lock, ``act``
        on it only when its bytes still hash to ``version``; False when it changed or is gone."""
        local = local_path(target)
        if local is None:  # pragma: no cover - a pathlib-like object without a filesystem: not supported
            raise NotImplementedError(f"compare-and-swap on {type(target).__name__}")
        with self._locked(local):
            try:
                current = local.read_bytes()
            except FileNotFoundError:
                return False
            if hashlib.sha256(current).hexdigest() != version:
                return False
            act(local)
            return True

    @staticmethod
    def _locked(local: pathlib.Path) -> contextlib.AbstractContextManager[None]:
        import fcntl

        @contextlib.contextmanager
        def lock() -> Iterator[None]:
            _make_dirs(local.parent)
            path = local.parent / lock_name(local.name)  # bounded (ADR 0033); not *.json: no glob of objects sees it
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the lock; the (empty) lock file stays: deleting it would race

        return lock()

    def delete(self, rel: str) -> bool:
        """Remove the object (one request); False when there was none."""
        target = self.path(rel)
        remote = remote_target(target)
        try:
            if remote is not None:
                remote[0].rm_file(remote[1])
            else:
                target.unlink()
        except FileNotFoundError:
            return False
        return True

    def write_json(self, rel: str, obj: object, *, overwrite: bool = True) -> bool:
        return self.write_bytes(rel, dumps(obj), overwrite=overwrite)

    def write_text(self, rel: str, text: str, *, overwrite: bool = True) -> bool:
        return self.write_bytes(rel, text.encode(), overwrite=overwrite)
