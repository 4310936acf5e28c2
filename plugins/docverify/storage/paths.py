"""The one safe builder for every identifier that becomes part of a storage path.

Every path the artifact store touches is ``root / part / part / …``; each part goes through
:func:`check_part` (in :meth:`docverify.storage.store.ArtifactStore.path`), so nothing is read or written
outside the root: no separators inside a part, no ``.``/``..``, no control characters, no
over-long component. Identifiers that come from outside (file names → doc ids, the date, the
``batch_prefix`` param, doc ids given to the SME helper) are checked or encoded here first, and a
refusal is an :class:`~docverify.storage.limits.InputError` with code ``INPUT_UNSAFE_NAME``.

Doc ids (:func:`doc_id_for`) are opaque, stable and unique (ADR 0050): ``doc-`` plus 12 hex digits
of the sha256 of the file name's bytes (its last path part), so no part of the name — which
hospitals make of the patient's name — reaches a report, a log, an XCom or a Required Action,
while the same name gets the same id on every run and night (re-runs and backfills find their
earlier outputs; the trail across nights holds). ``a.pdf`` and ``a.PDF`` get two ids. The file
name itself is kept in the manifest and the packet, for those who may read packets.

A listed name that cannot be a path part at all (:func:`name_problem`: a control character, a
backslash, bytes that are not UTF-8 — on Linux they reach Python as lone surrogate escapes — or
over 255 bytes) still gets its doc id from :func:`doc_id_for` (the hash is over the name's
bytes), is never read, and is named only in forms that can be written anywhere: its URI
percent-encodes the raw bytes (:func:`quoted_name`), its readable form escapes every unsafe
character with a backslash (:func:`printable_name`: injective, so two names never share it).
"""

from __future__ import annotations

import hashlib
import re

from docverify.storage.limits import INPUT_UNSAFE_NAME, MAX_NAME_BYTES, InputError

#: a file-system component may have 255 bytes; the store's own prefixes/suffixes stay far below
MAX_PART_BYTES = 255
#: an opaque doc id: this prefix and 12 hex digits of the sha256 of the file name's bytes (ADR 0050)
DOC_ID_PREFIX = "doc-"
DOC_ID_HEX = 12
#: used with ``fullmatch`` only: ``$`` alone also matches before a final newline (``"a\\n"``)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DS = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.:+-]{0,63}$")


def _refuse(value: str, why: str, what: str) -> InputError:
    shown = value if len(value) <= 60 and value.isprintable() else f"<{len(value)} characters>"
    return InputError(INPUT_UNSAFE_NAME, f"{what} {shown!r} cannot be part of a storage path: {why}", value)


def check_part(part: str, what: str = "path component") -> str:
    """One path component, or :class:`InputError`: non-empty, not ``.``/``..``, no ``/`` or
    ``\\``, no control characters, UTF-8 text (no lone surrogate), at most 255 UTF-8 bytes."""
    if not isinstance(part, str) or not part:
        raise _refuse(str(part), "it is empty", what)
    if part in (".", ".."):
        raise _refuse(part, "it names the current or the parent folder", what)
    if "/" in part or "\\" in part:
        raise _refuse(part, "it holds a path separator", what)
    if any(ord(c) < 32 or ord(c) == 127 for c in part):
        raise _refuse(part, "it holds a control character", what)
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: bytes that are not UTF-8, or a cut character
        raise _refuse(part, "it is not UTF-8 text (a lone surrogate)", what) from None
    if len(part.encode("utf-8")) > MAX_PART_BYTES:
        raise _refuse(part, f"it is longer than {MAX_PART_BYTES} bytes", what)
    return part


def bounded_part(stem: str, suffix: str = "") -> str:
    """One path component derived from an id (``stem``: the caller checked the id with
    :func:`check_part`; it may pass 255 bytes with its affixes) and a short fixed ``suffix``: ``stem + suffix`` when it fits in :data:`MAX_PART_BYTES`; else the stem cut (at a
    character boundary) to leave room for ``~`` and 16 hex digits of the sha256 of the whole stem,
    then the suffix — so a name derived from an id of the full 255 bytes still fits, and two ids
    that share the cut prefix keep distinct names (ADR 0033). Only for names nothing parses back
    into an id (a withdrawn copy's name: its record names the id)."""
    name = stem + suffix
    if len(name.encode("utf-8")) <= MAX_PART_BYTES:
        return check_part(name)
    tag = "~" + hashlib.sha256(stem.encode("utf-8")).hexdigest()[:16]
    room = MAX_PART_BYTES - len((tag + suffix).encode("utf-8"))
    cut = stem.encode("utf-8")[:room].decode("utf-8", "ignore")  # never half a character
    return check_part(cut + tag + suffix)


def check_rel(rel: str, what: str = "relative path") -> list[str]:
    """The parts of a relative path (``a/b/c``), each checked; empty parts (``a//b``, leading or
    trailing ``/``) are dropped."""
    return [check_part(p, what) for p in rel.split("/") if p]


def safe_id(value: str, what: str = "id") -> str:
    """An id used as a path component as it is (doc ids, shard keys): ``[A-Za-z0-9._-]``, not
    starting with ``.`` or ``-``, at most :data:`~docverify.storage.limits.MAX_NAME_BYTES` bytes."""
    if not isinstance(value, str) or not _SAFE.fullmatch(value) or len(value) > MAX_NAME_BYTES:
        raise _refuse(str(value), "use letters, digits, '.', '_' or '-' (not first), "
                      f"at most {MAX_NAME_BYTES} characters", what)
    return check_part(value, what)


def safe_ds(ds: str) -> str:
    """The run's date partition (``2026-11-21``, or a run id-like token)."""
    if not isinstance(ds, str) or not _DS.fullmatch(ds) or ".." in ds:
        raise _refuse(str(ds), "a date partition is a short token like 2026-11-21", "date partition")
    return ds


def safe_prefix(prefix: str) -> str:
    """The ``batch_prefix`` param: a folder relative to the storage root, each part checked
    (``..``, control characters and over-long parts refused; leading ``/`` ignored)."""
    parts = check_rel(prefix, "batch_prefix")
    if not parts:
        raise _refuse(prefix, "it names no folder", "batch_prefix")
    return "/".join(parts)


def name_bytes(name: str) -> bytes:
    """The bytes of a listed file name: a lone surrogate escape (a non-UTF-8 byte on Linux) back
    to its byte; any other lone surrogate (a remote listing) as UTF-8 would encode it."""
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def name_problem(name: str) -> str | None:
    """Why a listed file name cannot be a storage path part (None when it can)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not UTF-8 text (bytes of another encoding, or a cut character)"
    try:
        check_part(name, "file name")
    except InputError as exc:
        return exc.message.rsplit(": ", 1)[-1]
    return None


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable_name(name: str) -> str:
    """A file name in a form safe in any report, log line or file: a backslash and every
    character that is not printable as a backslash escape — ``\\n``, ``\\x7f`` (ASCII controls),
    ``\\xe9`` (a byte that is not UTF-8: only bytes ≥ 0x80 come out so), ``\\ud83e`` (a lone
    surrogate, a bidi or format character), ``\\U000e0001``; others as they are. Injective."""
    out = []
    for c in name:
        o = ord(c)
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif 0xDC80 <= o <= 0xDCFF:  # surrogateescape: the byte that is not UTF-8
            out.append(f"\\x{o - 0xDC00:02x}")
        elif c.isprintable():
            out.append(c)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
    return "".join(out)


def quoted_name(name: str) -> str:
    """The name's bytes percent-encoded (RFC 3986): how a URI names a file whatever its bytes."""
    from urllib.parse import quote

    return quote(name_bytes(name), safe="")


def doc_id_for(name: str) -> str:
    """The opaque, stable doc id of an incoming file name: ``doc-`` + 12 hex of the sha256 of the
    name's bytes (see the module docstring and ADR 0050). No part of the name is in it."""
    base = name.rsplit("/", 1)[-1]
    return f"{DOC_ID_PREFIX}{hashlib.sha256(name_bytes(base)).hexdigest()[:DOC_ID_HEX]}"


def file_token(name: str) -> str:
    """An opaque token naming a listed file that is no document (an ignored file, a companion
    without its PDF) where a Viewer or a log sees it: ``file-`` + 12 hex of the sha256 of the
    name's bytes. The manifest keeps the names, in the same order."""
    base = name.rsplit("/", 1)[-1]
    return f"file-{hashlib.sha256(name_bytes(base)).hexdigest()[:DOC_ID_HEX]}"


def name_forms(name: str) -> set[str]:
    """The ways a message may quote a listed file name or path: as it is, escaped
    (:func:`printable_name`), percent-encoded (:func:`quoted_name`), its last part and that part
    without ``.pdf`` — what :func:`redact_names` takes out of a message a Viewer sees."""
    from urllib.parse import unquote

    out: set[str] = set()
    for form in {name, unquote(name)}:
        base = form.rstrip("/").rsplit("/", 1)[-1]
        stem = base[:-4] if base.lower().endswith(".pdf") else base
        out |= {form, base, stem, printable_name(form), printable_name(base), quoted_name(base), quoted_name(stem)}
    return {f for f in out if len(f) >= 3}


def redact_names(message: str, doc_id: str, *names: str | None) -> str:
    """``message`` with every form of the given file names or URIs (:func:`name_forms`) replaced by
    ``[document <doc_id>]`` (longest first, in one pass): what a Viewer or a log is shown of a message that
    names the input (the full message stays with the packet)."""
    forms: set[str] = set()
    for n in names:
        if n:
            forms |= name_forms(n)
    if not forms:
        return message
    one = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))  # one pass
    return one.sub(f"[document {doc_id}]", message)
