"""An input is checked again when it is used, not only when discovery listed it (ADR 0033).

``discover`` lists the incoming folder without following links and refuses a symbolic link, a
folder, a FIFO named ``*.pdf`` (``INPUT_NOT_REGULAR``). A file system can change under a night
(a sync tool, an operator, an attacker): a PDF or a companion listed as a regular file may be a
symbolic link, a folder or gone when a later stage reads it. A stage that reads a list of inputs
asks :func:`entry_problem` / :func:`read_regular` here, so such an entry becomes that document's
``INPUT_NOT_REGULAR`` (an :class:`~docverify.storage.limits.InputError`, its error record and packet) and
the other documents go on — never an ``OutsideRootError`` or ``FileNotFoundError`` out of the
stage, never a link followed:

* on a local root the entry is examined with ``lstat`` / opened with ``O_NOFOLLOW`` (its folder
  through :meth:`~docverify.storage.store.ArtifactStore.path`, which refuses a folder that resolves
  outside the root), then ``fstat``: only a regular file is read, and only what was opened is read
  (no check-then-open window on the entry itself);
* on a remote root (``gs://``) there are no links: an object that is gone (or now a "folder") is
  the same refusal.

The parse workers of the local layout open the PDF the same way themselves
(:func:`docverify.layout.local_pdf.parse_pdf` with ``root``)."""

from __future__ import annotations

import errno
import os
import stat as stat_mod

from docverify.storage.limits import (
    HASH_CHUNK_BYTES,
    INPUT_CHANGED,
    INPUT_NOT_REGULAR,
    InputError,
    check_size,
)
from docverify.storage.store import ArtifactStore, OutsideRootError, local_path, remote_target

#: what an entry is now, in words (the error message names it; never the bytes of anything)
GONE = "gone (removed or renamed since the night's discovery)"
LINK = "a symbolic link"
FOLDER = "a folder"
SPECIAL = "a FIFO, socket or device"
ESCAPES = "under a folder that resolves outside the storage root (a symbolic link)"


def _split(rel: str) -> tuple[str, str]:
    parent, _, name = rel.rstrip("/").rpartition("/")
    return parent, name


def _kind(mode: int) -> str | None:
    if stat_mod.S_ISREG(mode):
        return None
    if stat_mod.S_ISLNK(mode):
        return LINK
    return FOLDER if stat_mod.S_ISDIR(mode) else SPECIAL


def entry_problem(store: ArtifactStore, rel: str) -> str | None:
    """None when ``rel`` is a regular file under the storage root now; else what it is, in words
    (:data:`LINK`, :data:`FOLDER`, :data:`SPECIAL`, :data:`GONE`, :data:`ESCAPES`). Never follows
    the entry; never reads it. An error of the storage itself (a permission, a network fault) is
    raised as it is."""
    parent, name = _split(rel)
    try:
        folder = store.path(parent) if parent else store.root
    except OutsideRootError:
        return ESCAPES
    target = folder / name
    remote = remote_target(target)
    if remote is not None:
        fs, key = remote
        try:
            info = fs.info(key)
        except FileNotFoundError:
            return GONE
        return None if info.get("type") == "file" else FOLDER
    local = local_path(target)
    if local is None:  # a pathlib-like object without a filesystem: what it says of itself
        return None if target.is_file() else GONE
    try:
        st = os.lstat(local)
    except (FileNotFoundError, NotADirectoryError):
        return GONE
    return _kind(st.st_mode)


def not_regular(uri: str, problem: str, what: str = "PDF") -> InputError:
    """The refusal of an input that is no longer a regular file (``INPUT_NOT_REGULAR``)."""
    return InputError(INPUT_NOT_REGULAR, f"{uri} is now {problem}, not a regular file (it was one when the incoming "
                      f"folder was listed): it is not followed or read; put the {what} itself in the folder and run "
                      f"the night again", uri)


def changed(doc_id: str, uri: str) -> InputError:
    """The refusal of an input whose bytes, as read to be laid out, are not the bytes discovery
    hashed (``INPUT_CHANGED``, ADR 0052): another file was put in its place after discovery. The
    message names the document by its id, never by its file name (it may name the patient)."""
    return InputError(INPUT_CHANGED, f"{doc_id}: the PDF read for this document is not the one the night's "
                      f"discovery listed (its sha256 differs from the manifest's: the file was replaced after "
                      f"discovery); it was not laid out: re-run the night so that discovery lists the file as it is "
                      f"now", uri)


def read_regular(store: ArtifactStore, rel: str, uri: str, *, limit: int, what: str) -> bytes:
    """The bytes of the regular file ``rel``, at most ``limit`` (else ``INPUT_TOO_LARGE``, from
    its size before the read and from the bytes read); anything else — a link, a folder, a FIFO,
    gone — is ``INPUT_NOT_REGULAR`` (see the module docstring). ``uri`` and ``what`` name it."""
    fd = _open_regular(store, rel, uri, what)
    if fd is None:  # remote: no links; an object that is gone, or a "folder", is refused alike
        try:
            check_size(store.size(rel), limit, uri, what)
            data = store.read_bytes(rel)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise not_regular(uri, GONE, what) from None
    else:
        with os.fdopen(fd, "rb") as fh:
            check_size(os.fstat(fh.fileno()).st_size, limit, uri, what)
            data = fh.read(limit + 1)
    check_size(len(data), limit, uri, what)  # grown since its size was read
    return data


def sha256_regular(store: ArtifactStore, rel: str, uri: str, *, what: str = "PDF") -> str:
    """sha256 of the regular file ``rel``, streamed in chunks (remote: :meth:`ArtifactStore.sha256`);
    ``INPUT_NOT_REGULAR`` when it is no longer one (see :func:`read_regular`): discovery's listing
    saw a regular file, the hash must read that file, never a link put in its place since."""
    import hashlib

    fd = _open_regular(store, rel, uri, what)
    if fd is None:
        try:
            return store.sha256(rel)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise not_regular(uri, GONE, what) from None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def _open_regular(store: ArtifactStore, rel: str, uri: str, what: str) -> int | None:
    """A descriptor of the regular file ``rel`` under a local root, opened without following a
    link and checked (regular, under the root), or None on a remote root; raises
    ``INPUT_NOT_REGULAR`` otherwise."""
    parent, name = _split(rel)
    try:
        folder = store.path(parent) if parent else store.root
    except OutsideRootError:
        raise not_regular(uri, ESCAPES, what) from None
    local = local_path(folder / name)
    if local is None:
        return None
    try:
        fd = os.open(local, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise not_regular(uri, LINK, what) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise not_regular(uri, GONE, what) from None
        raise
    try:
        st = os.fstat(fd)
        problem = _kind(st.st_mode) or (None if opened_inside(fd, real_root(store)) else ESCAPES)
    except BaseException:
        os.close(fd)
        raise
    if problem:
        os.close(fd)
        raise not_regular(uri, problem, what)
    return fd


def opened_inside(fd: int, root: str | None) -> bool:
    """True when the file open as ``fd`` is under the folder ``root`` (a real path; None: no
    local root, nothing to check): what was opened, as the kernel names it (``/proc/self/fd``), so
    a folder swapped for a link between a check and the open is seen. Without ``/proc`` the
    path cannot be known from the descriptor: True (the folder was checked before the open)."""
    if root is None:
        return True
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True
    return opened.startswith(root.rstrip(os.sep) + os.sep)


def real_root(store: ArtifactStore) -> str | None:
    """The real path (links resolved) of a local storage root; None for a remote one."""
    local = local_path(store.root)
    return os.path.realpath(local) if local is not None else None
