"""Local PDF parsing: a PDF file → :class:`~docverify.models.DocumentBundle`, or a :class:`ParseError`.

Library: **pypdfium2** (PDFium; Apache-2.0 / BSD-3-Clause), chosen by measurement on the 45 PDFs
of the shared corpus (``scripts/bench_parse.py`` → ``docs/benchmarks/parse.md``): on the files
all three open it extracts text ~15× faster than pypdf and ~40× faster than pdfplumber with the
lowest peak memory, tells "needs a password" apart from "damaged" by error code, opens both
empty-user-password files, and gives text geometry (for paragraphs and tables) at little cost.
pypdf and pdfplumber are not used at run time. PyMuPDF is excluded (AGPL).

Three entry points:

* :func:`parse_pdf` — in-process. Every failure is a :class:`ParseError` (library exceptions
  are wrapped), but a file that hangs or crashes PDFium hangs or crashes the caller.
* :func:`parse_pdf_bounded` — the same in a child process killed after ``timeout_s``
  (→ ``TIMEOUT``); a crash of the child (e.g. a segfault in PDFium) → ``CORRUPT``.
* :func:`parse_many_bounded` — a shard of files over a few long-lived child processes, each file
  still time-bounded; this is what the nightly DAG's layout task calls.

Children are fresh interpreters (``python -m docverify.layout.worker``, the caller's
``sys.path`` and environment) speaking one JSON message per line over stdin/stdout — not
multiprocessing, whose spawn/forkserver children re-import the parent's ``__main__`` file (inside
an Airflow task, the ``airflow`` entry script, which fails there) and never ``fork`` (Airflow task
processes are threaded).

Page text. PDFium's text of a page is split into its lines; every line is normalised (no NUL or
other control characters, ``\\t`` → space, PDFium's U+FFFE line-break hyphen → ``-``,
ligatures ﬁ/ﬂ/… → plain letters, NFC, trailing spaces stripped). Lines are grouped into
**paragraphs** using the geometry of their text rectangles (``FPDFText_CountRects`` /
``FPDFText_GetRect``, a few calls per line): a new paragraph starts at a vertical gap larger than
~1.45× the page's usual line pitch, at a jump back up the page (next column or region), at a
change of font size of more than 30 %, at a first-line indent, and before a line that starts with
a list marker. The page ``text`` is the paragraphs joined by one blank line, so every paragraph is
a verbatim substring of the page text and ``text.split("\\n\\n")`` gives them back.

``layout_metadata.block_types`` has one entry per paragraph: ``table`` (see below), ``list_item``
(starts with a bullet or an enumerator such as ``1.``, ``a)``, ``B.``), ``heading`` (one or two
short lines in a larger font, or in capitals, or ending with a colon, or a numbered section
title) or ``paragraph``.

``has_tables`` heuristic (cheap, geometric): a line is *tabular* when its text rectangles,
merged wherever the horizontal gap is under 1.5× the page's median line height, form ≥ 3
separate segments (cells separated by wide gaps; word gaps in prose are far smaller). A page has
tables when it has ≥ 3 tabular lines including ≥ 2 consecutive ones; a paragraph is a ``table``
block on such a page when at least half of its lines are tabular. Rotated pages are handled by
measuring along the text direction. Known limits: tables whose cells PDFium emits column by
column (one cell per line) are missed; figure labels laid out in a grid can count as a table.
When no geometry is available the same rule is applied to runs of 2+ spaces in the text.

Scans. ``NO_TEXT_LAYER`` is raised when the document has fewer than ``min_chars_per_doc``
non-space characters, or when no page has ``scan_max_chars_per_page`` (50) non-space characters
and at least one page is mostly covered by images (≥ 25 % of its area): a scan whose only "text"
is a stray caption or file name (e.g. "Background", "pdf.js"). Sparse documents without images
(a one-line letter, a short Arabic or vertical CJK sample) still parse.

Not thread-safe inside PDFium: in-process calls are serialised by a lock; use the bounded
functions for parallelism.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import ctypes
import datetime as _dt
import hashlib
import importlib
import json
import multiprocessing.connection
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata as _metadata
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docverify.layout.errors import (
    CORRUPT,
    EMPTY_FILE,
    ENCRYPTED,
    NO_TEXT_LAYER,
    NOT_A_PDF,
    TIMEOUT,
    TOO_LARGE,
    UNSUPPORTED,
    ZERO_PAGES,
    ParseError,
)
from docverify.limits import MAX_PAGES, MAX_PDF_BYTES, PARSE_WORKER_MEMORY_BYTES
from docverify.models import DocumentBundle, LayoutMetadata, Page


def _pypdfium2_version() -> str:
    try:
        return _metadata.version("pypdfium2")
    except _metadata.PackageNotFoundError:  # pragma: no cover - vendored copy
        return str(getattr(pdfium, "PYPDFIUM_INFO", "unknown"))


PARSER_ID = f"local:pypdfium2-{_pypdfium2_version()}"
"""Names the library and version that produced a bundle (``DocumentBundle.parser``)."""

DEFAULT_MAX_BYTES = MAX_PDF_BYTES  # docverify.limits: every limit in one place
DEFAULT_MAX_PAGES = MAX_PAGES
DEFAULT_TIMEOUT_S = 60.0
HEADER_WINDOW = 1024
"""``%PDF`` must occur within the first 1024 bytes (as Acrobat tolerates)."""
SCAN_MAX_CHARS_PER_PAGE = 50
SCAN_MIN_IMAGE_COVERAGE = 0.25

DEFAULT_PARSE_FN = "docverify.layout.local_pdf:parse_pdf"

_PDFIUM_LOCK = threading.Lock()

BlockType = str  # "heading" | "paragraph" | "list_item" | "table"


# =========================================================================== public API


def parse_pdf(
    path: str | os.PathLike[str],
    *,
    doc_id: str | None = None,
    file_uri: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pages: int = DEFAULT_MAX_PAGES,
    min_chars_per_doc: int = 1,
    scan_max_chars_per_page: int = SCAN_MAX_CHARS_PER_PAGE,
    ocr: bool = False,
) -> DocumentBundle:
    """Parse one PDF in this process.

    Args:
        path: the PDF file.
        doc_id: defaults to the file stem.
        file_uri: stored as ``file_path`` (e.g. the ``gs://`` URI the file came from); defaults
            to the absolute local path.
        max_bytes / max_pages: larger files → ``TOO_LARGE``.
        min_chars_per_doc: fewer non-space characters in the whole document → ``NO_TEXT_LAYER``.
        scan_max_chars_per_page: a document none of whose pages has this many non-space
            characters, with page images, is a scan → ``NO_TEXT_LAYER``; 0 disables the rule.
        ocr: OCR the pages without a text layer that are mostly images (:mod:`.ocr`); the
            bundle's ``parser`` then names the OCR engine and those pages carry
            ``ocr_confidence``. A scan OCR reads nothing on stays ``NO_TEXT_LAYER``.

    Raises:
        ParseError: always this type, with a code from ``PARSE_ERROR_CODES``.
    """
    p = pathlib.Path(path)
    try:
        return _parse(
            p,
            doc_id=doc_id,
            file_uri=file_uri,
            max_bytes=max_bytes,
            max_pages=max_pages,
            min_chars_per_doc=min_chars_per_doc,
            scan_max_chars_per_page=scan_max_chars_per_page,
            ocr=ocr,
        )
    except ParseError:
        raise
    except MemoryError as exc:
        raise ParseError(
            TOO_LARGE,
            f"{p.name} exhausted the memory available to the parser ({type(exc).__name__}); "
            f"parse it on a larger worker or route it through Document AI",
            str(p),
        ) from exc
    except Exception as exc:  # any library failure becomes a ParseError
        raise ParseError(
            CORRUPT,
            f"{p.name} could not be parsed ({type(exc).__name__}); "  # its text may quote the input
            f"the file is probably damaged: re-export it from the source system or repair it "
            f"(e.g. with qpdf) and retry",
            str(p),
        ) from exc


def parse_pdf_bounded(
    path: str | os.PathLike[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    parse_fn: str | None = None,
    **kw: Any,
) -> DocumentBundle:
    """:func:`parse_pdf` in a child process that is killed after ``timeout_s`` seconds.

    ``kw`` are :func:`parse_pdf`'s keyword arguments (JSON-serialisable). ``parse_fn`` is an
    optional ``"module:function"`` run in the child instead of :func:`parse_pdf` (an extension
    point, also used by the tests to simulate a hang or a crash).

    Raises:
        ParseError: the parse error, or ``TIMEOUT`` (child killed), or ``CORRUPT`` (child crashed,
            the message names its exit code / signal).
        RuntimeError: the child process could not even start (an environment problem, not a
            problem of the file).
    """
    for _path, result in parse_many_bounded([path], workers=1, timeout_s=timeout_s, parse_fn=parse_fn, **kw):
        if isinstance(result, ParseError):
            raise result
        return result
    raise RuntimeError("parse_many_bounded returned no result")  # pragma: no cover


def parse_many_bounded(
    paths: Iterable[str | os.PathLike[str]],
    *,
    workers: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    parse_fn: str | None = None,
    startup_timeout_s: float = 120.0,
    per_file_kw: Mapping[str, Mapping[str, Any]] | None = None,
    **kw: Any,
) -> Iterator[tuple[str, DocumentBundle | ParseError]]:
    """Parse many PDFs in ``workers`` child processes; yield ``(path, bundle or ParseError)``.

    Results come in completion order (not input order), exactly one per input path; ``path`` is
    ``str()`` of the input. Each file gets ``timeout_s`` seconds, counted from the moment its
    worker is ready; a worker that times out or crashes is killed and replaced, so one bad file
    costs one ``TIMEOUT``/``CORRUPT`` result and a worker restart, never the shard. Workers are
    reused across files (the import of PDFium is paid once per worker). Closing the generator
    early stops the workers.

    ``kw`` (e.g. ``max_pages``) apply to every file; ``per_file_kw`` maps ``str(path)`` to extra
    keyword arguments for that file only (e.g. ``{"doc_id": ..., "file_uri": "gs://..."}``).

    Raises:
        RuntimeError: a worker could not start within ``startup_timeout_s`` or died while
            starting (broken environment); failures of individual files are never raised.
    """
    pending = collections.deque(str(p) for p in paths)
    if not pending:
        return
    spec = parse_fn or DEFAULT_PARSE_FN
    per_file = {str(k): dict(v) for k, v in (per_file_kw or {}).items()}
    json.dumps([kw, per_file])  # fail early, in the caller, on non-JSON arguments

    def job_bytes(path: str) -> bytes:
        return json.dumps({"path": path, "kw": {**kw, **per_file.get(path, {})}}).encode()

    n_workers = max(1, min(int(workers), len(pending)))
    pool: list[_Worker] = []
    try:
        while pending or any(w.job is not None for w in pool):
            while len(pool) < n_workers and pending:
                w = _Worker(spec, startup_timeout_s)
                w.job = pending.popleft()  # sent once the worker reports ready
                pool.append(w)
            waitables: list[Any] = []
            for w in pool:
                if w.job is not None:
                    waitables += [w.conn] + ([w.proc.sentinel] if w.proc.sentinel >= 0 else [])
            now = time.monotonic()
            wait_s = max(0.0, min(w.deadline for w in pool if w.job is not None) - now)
            ready = multiprocessing.connection.wait(waitables, timeout=wait_s)
            now = time.monotonic()
            for w in list(pool):
                if w.job is None:
                    continue
                has_data = w.conn in ready and _poll(w.conn)
                if has_data:
                    try:
                        msg = json.loads(w.conn.recv_bytes())
                    except (EOFError, OSError):
                        has_data, msg = False, None
                    if has_data:
                        if "ready" in msg:
                            w.ready = True
                            _send_job(w, w.job, job_bytes, timeout_s, pool, pending)
                            continue
                        if "startup_error" in msg:
                            raise RuntimeError(f"parse worker could not start: {msg['startup_error']}")
                        job, w.job = w.job, None
                        yield job, _result_from_json(msg, job)
                        if pending and w in pool:
                            _send_job(w, pending.popleft(), job_bytes, timeout_s, pool, pending)
                        continue
                dead = w.proc.sentinel in ready or not w.proc.is_alive()
                if dead or (w.conn in ready and not has_data):
                    w.proc.join(timeout=5)
                    code = w.proc.exitcode
                    pool.remove(w)
                    w.close()
                    if not w.ready:
                        raise RuntimeError(
                            f"parse worker died while starting (exit code {_describe_exit(code)}); "
                            f"check that docverify and pypdfium2 import in a fresh interpreter"
                        )
                    job, w.job = w.job, None
                    name = pathlib.Path(job).name
                    yield job, ParseError(
                        CORRUPT,
                        f"{name} crashed the PDF parser (child process exit code {_describe_exit(code)}); "
                        f"the file is probably damaged, or needed more than the parse worker's memory cap "
                        f"(docverify.limits.PARSE_WORKER_MEMORY_BYTES; a decompression bomb): re-export or "
                        f"repair it (e.g. with qpdf) and retry, or route it through Document AI",
                        job,
                    )
                    continue
                if now >= w.deadline:
                    pool.remove(w)
                    w.kill()
                    if not w.ready:
                        raise RuntimeError(
                            f"parse worker did not start within {startup_timeout_s:g} s "
                            f"(machine overloaded or a broken environment)"
                        )
                    job, w.job = w.job, None
                    name = pathlib.Path(job).name
                    yield job, ParseError(
                        TIMEOUT,
                        f"{name} took longer than {timeout_s:g} s to parse and the parser was stopped; "
                        f"the file may be malformed or pathological: repair it (e.g. with qpdf) or route it "
                        f"through Document AI",
                        job,
                    )
    finally:
        for w in pool:
            w.stop()


# =========================================================================== child processes


def _send_job(w: _Worker, path: str, job_bytes, timeout_s: float, pool: list, pending: collections.deque) -> None:
    """Hand ``path`` to worker ``w``; if its pipe is broken (it died after its last answer), put
    the job back at the head of the queue and drop the worker (a fresh one takes the job)."""
    w.job = path
    w.deadline = time.monotonic() + timeout_s
    try:
        w.conn.send_bytes(job_bytes(path))
    except (OSError, ValueError):
        w.job = None
        pending.appendleft(path)
        pool.remove(w)
        w.kill()


def _poll(conn: _PipeConn) -> bool:
    try:
        return conn.poll()
    except (EOFError, OSError, ValueError):
        return False


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"{code}, killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"{code}, killed by signal {-code}"
    return str(code)


#: pids of the parse workers alive in this process (tests check none is left behind).
_LIVE: set[int] = set()


def live_worker_pids() -> set[int]:
    return {pid for pid in _LIVE if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


class _PipeConn:
    """One JSON message per line over the worker's stdin/stdout."""

    def __init__(self, proc: subprocess.Popen):
        self._in, self._out = proc.stdin, proc.stdout

    def fileno(self) -> int:
        return self._out.fileno()

    def poll(self) -> bool:
        import select

        return bool(select.select([self._out], [], [], 0)[0])

    def send_bytes(self, data: bytes) -> None:
        self._in.write(data + b"\n")
        self._in.flush()

    def recv_bytes(self) -> bytes:
        line = self._out.readline()
        if not line.endswith(b"\n"):
            raise EOFError("parse worker closed its output")
        return line

    def close(self) -> None:
        for f in (self._in, self._out):
            with contextlib.suppress(OSError, ValueError):
                f.close()


class _ProcHandle:
    """The small part of ``multiprocessing.Process`` the pool loop uses, on a Popen."""

    def __init__(self, proc: subprocess.Popen):
        self._p = proc
        self._pidfd = None
        with contextlib.suppress(AttributeError, OSError):  # Linux ≥ 5.3: readable when the child exits
            self._pidfd = os.pidfd_open(proc.pid)
        self.sentinel = self._pidfd if self._pidfd is not None else -1

    def is_alive(self) -> bool:
        return self._p.poll() is None

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._p.wait(timeout)

    @property
    def exitcode(self) -> int | None:
        return self._p.poll()

    def kill(self) -> None:
        self._p.kill()

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None
        if self._p.poll() is not None:
            _LIVE.discard(self._p.pid)


@dataclass
class _Worker:
    """A parse worker: a fresh interpreter running ``python -m docverify.layout.worker``.

    Not multiprocessing: its spawn and forkserver children re-import the parent's ``__main__``
    file, which inside an Airflow task is the ``airflow`` entry script — that import fails in the
    task runner (seen in a real scheduler run; ``airflow dags test`` hides it). A subprocess
    starts clean, with the parent's ``sys.path``."""

    spec: str
    startup_timeout_s: float
    job: str | None = None
    ready: bool = False
    deadline: float = 0.0
    proc: Any = field(init=False)
    conn: Any = field(init=False)

    def __post_init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        popen = subprocess.Popen(
            [sys.executable, "-m", "docverify.layout.worker", self.spec],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        _LIVE.add(popen.pid)
        self.proc = _ProcHandle(popen)
        self.conn = _PipeConn(popen)
        self.deadline = time.monotonic() + self.startup_timeout_s

    def kill(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.proc.kill()
        self.proc.join(timeout=10)
        self.close()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill a busy or unresponsive one."""
        if self.job is None and self.ready:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send_bytes(b"null")
            self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.kill()
        else:
            self.proc.join(timeout=1)
            self.close()

    def close(self) -> None:
        self.conn.close()
        self.proc.close()


def _resolve_parse_fn(spec: str):
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"parse_fn must look like 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module), name)


def _cap_memory() -> None:
    """Cap this worker's address space (``RLIMIT_AS``) at ``PARSE_WORKER_MEMORY_BYTES`` (or
    ``DOCVERIFY_PARSE_MEMORY_BYTES``): a decompression bomb ends as ``MemoryError`` → TOO_LARGE,
    or as a killed worker → CORRUPT, never as a machine out of memory. Lowering a limit needs
    no privilege; a platform without ``resource`` keeps only the timeout."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    limit = int(os.environ.get("DOCVERIFY_PARSE_MEMORY_BYTES") or PARSE_WORKER_MEMORY_BYTES)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def worker_main(spec: str) -> None:
    """Child loop (``python -m docverify.layout.worker SPEC``): report ready, then answer one
    JSON job per line until told to stop. stdout carries only the protocol: anything a library
    prints goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    _cap_memory()

    def send(obj: Any) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    try:
        fn = _resolve_parse_fn(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        send({"startup_error": f"{spec}: {type(exc).__name__}: {exc}"})
        return
    send({"ready": True})
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if job is None:
            return
        send(_run_job(fn, job["path"], job["kw"]))


def _run_job(fn, path: str, kw: dict[str, Any]) -> dict[str, Any]:
    try:
        result = fn(path, **kw)
        if hasattr(result, "model_dump"):
            result = result.model_dump(mode="json")
        return {"ok": result}
    except ParseError as exc:
        return {"error": exc.to_dict()}
    except MemoryError:
        name = pathlib.Path(path).name
        return {"error": ParseError(
            TOO_LARGE, f"{name} needs more memory to parse than the worker's cap of "
            f"{PARSE_WORKER_MEMORY_BYTES // 1048576} MB (docverify.limits.PARSE_WORKER_MEMORY_BYTES); "
            f"the file may be a decompression bomb: repair or split it", path).to_dict()}
    except BaseException as exc:  # noqa: BLE001 - a custom parse_fn may raise anything
        name = pathlib.Path(path).name
        # the exception's text may quote the document: only its type goes into the message
        return {
            "error": ParseError(
                CORRUPT, f"{name} could not be parsed ({type(exc).__name__})", path
            ).to_dict()
        }


def _result_from_json(msg: dict[str, Any], path: str) -> DocumentBundle | ParseError:
    if "error" in msg:
        return ParseError.from_dict(msg["error"])
    try:
        return DocumentBundle.model_validate(msg["ok"])
    except Exception as exc:  # a custom parse_fn returned something else
        return ParseError(
            CORRUPT,
            f"{pathlib.Path(path).name}: the parser returned an invalid DocumentBundle ({type(exc).__name__})",
            path,
        )


# =========================================================================== the parser


_MAGIC = (
    (b"PK\x03\x04", "a ZIP container (an Office document?)"),
    (b"\xd0\xcf\x11\xe0", "an old Office (OLE) document"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89PNG", "a PNG image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"{\\rtf", "an RTF document"),
    (b"<", "HTML or XML"),
)


def _sniff(head: bytes) -> str:
    """What the file looks like, named by its format only: never its bytes (they may be PHI)."""
    stripped = head.lstrip()
    for magic, what in _MAGIC:
        if stripped.startswith(magic):
            return f"it looks like {what}"
    if stripped[:64].isascii():
        return "it looks like plain text"
    return "its format is not recognised"


def _parse(
    p: pathlib.Path,
    *,
    doc_id: str | None,
    file_uri: str | None,
    max_bytes: int,
    max_pages: int,
    min_chars_per_doc: int,
    scan_max_chars_per_page: int,
    ocr: bool = False,
) -> DocumentBundle:
    name, file_ref = p.name, str(p)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise IsADirectoryError(f"{p} is not a regular file")
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED,
            f"{name} could not be read ({type(exc).__name__}: {exc.strerror or exc}); "
            f"check that the path exists and is a readable file",
            file_ref,
        ) from exc
    if size == 0:
        raise ParseError(
            EMPTY_FILE, f"{name} is empty (0 bytes); re-export or re-upload the document", file_ref
        )
    if size > max_bytes:
        raise ParseError(
            TOO_LARGE,
            f"{name} is {size / 1048576:.1f} MB, over the limit of {max_bytes / 1048576:g} MB "
            f"(max_bytes={max_bytes}); split it, or raise the limit for this run",
            file_ref,
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED, f"{name} could not be read ({exc.strerror or exc}); check the file's permissions", file_ref
        ) from exc
    if not data:
        raise ParseError(EMPTY_FILE, f"{name} is empty (0 bytes); re-export or re-upload the document", file_ref)
    if b"%PDF" not in data[:HEADER_WINDOW]:
        raise ParseError(
            NOT_A_PDF,
            f"{name} is not a PDF (no %PDF header in its first {HEADER_WINDOW} bytes; {_sniff(data[:64])}); "
            f"convert it to PDF or remove it from the batch",
            file_ref,
        )
    sha = hashlib.sha256(data).hexdigest()

    with _PDFIUM_LOCK:
        pages, total = _extract_pages(data, name, file_ref, max_pages, min_chars_per_doc, scan_max_chars_per_page,
                                      ocr=ocr)

    return DocumentBundle(
        doc_id=doc_id if doc_id is not None else p.stem,
        file_path=file_uri or str(p.resolve()),
        sha256=sha,
        total_pages=total,
        processing_timestamp=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        parser=OCR_PARSER_ID() if any(pg.ocr_confidence is not None for pg in pages) else PARSER_ID,
        pages=pages,
    )


def _open(data: bytes, name: str, file_ref: str) -> tuple[pdfium.PdfDocument, int]:
    """Open with the empty password (documents with an empty user password open transparently)."""
    raw = pdfium_c.FPDF_LoadMemDocument64(data, len(data), None)
    if not raw:
        err = pdfium_c.FPDF_GetLastError()
        if err == pdfium_c.FPDF_ERR_PASSWORD:
            raise ParseError(
                ENCRYPTED,
                f"{name} is encrypted with a user password; re-export it without a password "
                f"or supply the password",
                file_ref,
            )
        if err == pdfium_c.FPDF_ERR_SECURITY:
            raise ParseError(
                UNSUPPORTED,
                f"{name} uses an unsupported security handler (certificate or DRM encryption); "
                f"re-export it without protection",
                file_ref,
            )
        what = {
            pdfium_c.FPDF_ERR_FORMAT: "not in a readable PDF format",
            pdfium_c.FPDF_ERR_FILE: "not readable as a file",
            pdfium_c.FPDF_ERR_PAGE: "missing its pages",
        }.get(err, f"unreadable (PDFium error {err})")
        raise ParseError(
            CORRUPT,
            f"{name} is damaged: its PDF structure is {what}; re-export it from the source system "
            f"or repair it (e.g. with qpdf) and retry",
            file_ref,
        )
    doc = pdfium.PdfDocument(raw)  # takes ownership of the handle (closed by doc.close())
    n = pdfium_c.FPDF_GetPageCount(raw)
    return doc, n


def page_count(data: bytes, name: str) -> int:
    """The page count of a PDF held in memory, without extracting anything; the same typed
    errors as :func:`parse_pdf` when it cannot be opened (ENCRYPTED, UNSUPPORTED, CORRUPT)."""
    doc, n = _open(data, name, name)
    doc.close()
    return n


def _extract_pages(
    data: bytes,
    name: str,
    file_ref: str,
    max_pages: int,
    min_chars_per_doc: int,
    scan_max_chars_per_page: int,
    ocr: bool = False,
) -> tuple[list[Page], int]:
    doc, n = _open(data, name, file_ref)
    try:
        if n <= 0:
            raise ParseError(
                ZERO_PAGES,
                f"{name} is a readable PDF with no pages; re-export the document (the source export "
                f"probably failed)",
                file_ref,
            )
        if n > max_pages:
            raise ParseError(
                TOO_LARGE,
                f"{name} has {n} pages, over the limit of {max_pages} pages (max_pages); split it, "
                f"or raise the limit for this run",
                file_ref,
            )
        pages: list[Page] = []
        total_chars = 0
        dense_pages = 0
        image_pages = 0
        ocr_state = _OCRState() if ocr else None
        for i in range(n):
            try:
                page = doc[i]
            except Exception as exc:
                raise ParseError(
                    CORRUPT,
                    f"{name} is damaged: page {i + 1} of {n} cannot be loaded ({_clip(str(exc))}); "
                    f"re-export it from the source system or repair it (e.g. with qpdf) and retry",
                    file_ref,
                ) from exc
            try:
                textpage = page.get_textpage()
                try:
                    result = _page_layout(textpage)
                finally:
                    textpage.close()
                chars = len("".join(result.text.split()))  # non-space characters
                ocr_conf = None
                if chars < max(1, scan_max_chars_per_page) and _image_coverage(page) >= SCAN_MIN_IMAGE_COVERAGE:
                    image_pages += 1
                    if ocr_state is not None:
                        result, ocr_conf = _ocr_page(page, result, ocr_state)
                        chars = len("".join(result.text.split()))
                total_chars += chars
                if chars >= max(1, scan_max_chars_per_page):
                    dense_pages += 1
            finally:
                page.close()
            pages.append(
                Page(
                    page_num=i + 1,
                    text=result.text,
                    paragraphs=result.paragraphs,
                    layout_metadata=LayoutMetadata(block_types=result.block_types, has_tables=result.has_tables),
                    ocr_confidence=ocr_conf,
                )
            )
    finally:
        doc.close()

    ocr_note = _ocr_note(ocr_state)
    if total_chars < max(1, min_chars_per_doc):
        if image_pages and ocr_note:
            msg = (
                f"{name} is a scan with no text layer ({n} page(s) of images) {ocr_note}; check the scan's "
                f"quality (resolution, contrast) or route it through Document AI"
            )
        elif image_pages:
            msg = (
                f"{name} is a scan with no text layer ({n} page(s) of images, {total_chars} characters "
                f"of text); OCR it or route it through Document AI"
            )
        else:
            msg = (
                f"{name} has no extractable text on any of its {n} page(s) and no page images (blank or "
                f"damaged pages, or text drawn as vector outlines); check the source document, or OCR it / "
                f"route it through Document AI"
            )
        raise ParseError(NO_TEXT_LAYER, msg, file_ref)
    if scan_max_chars_per_page > 0 and dense_pages == 0 and image_pages > 0:
        raise ParseError(
            NO_TEXT_LAYER,
            f"{name} is a scan with no usable text layer (none of its {n} page(s) has "
            f"{scan_max_chars_per_page} characters of text, {total_chars} in total, and its pages are "
            f"images)" + (f" {ocr_note}; check the scan's quality or route it through Document AI"
                          if ocr_note else "; OCR it or route it through Document AI"),
            file_ref,
        )
    return pages, n


@dataclass
class _OCRState:
    """OCR within one document: pages tried and read, or why the engine could not run."""

    tried: int = 0
    read: int = 0
    unavailable: str = ""


def OCR_PARSER_ID() -> str:  # noqa: N802 - a constant computed on first use (the OCR package is optional)
    from docverify.layout.ocr import engine_id

    return f"{PARSER_ID}+{engine_id()}"


def _ocr_page(page: pdfium.PdfPage, result: _PageLayout, state: _OCRState) -> tuple[_PageLayout, float | None]:
    """OCR an image page without a text layer (kept in its own function: the parse worker's
    memory limits are set elsewhere). Returns the page layout built from the OCR'd lines and
    its confidence, or the unchanged layout and None when the engine is unavailable."""
    from docverify.layout import ocr

    if state.unavailable:
        return result, None
    try:
        ocr.get_engine()
    except ocr.OCRUnavailable as exc:
        state.unavailable = str(exc)
        return result, None
    state.tried += 1
    try:
        read = ocr.read_page(page)
    except Exception:  # the engine failed on this image: the page stays unread (confidence 0)
        return result, 0.0
    if not read.paragraphs:
        return result, 0.0
    state.read += 1
    paragraphs = [normalise_line(p) for p in read.paragraphs]
    paragraphs = [p for p in paragraphs if p.strip()]
    return (
        _PageLayout(text="\n\n".join(paragraphs), paragraphs=paragraphs,
                    block_types=["paragraph"] * len(paragraphs), has_tables=False),
        read.confidence,
    )


def _ocr_note(state: _OCRState | None) -> str:
    if state is None:
        return ""
    if state.unavailable:
        return f"and OCR is unavailable here ({_clip(state.unavailable)})"
    if state.tried:
        return f"and OCR read no usable text on its {state.tried} image page(s)"
    return ""


def _image_coverage(page: pdfium.PdfPage) -> float:
    """Fraction of the page area covered by image objects (sum of their clipped boxes, ≤ 1)."""
    try:
        l0, b0, r0, t0 = page.get_bbox()
        area = max(1e-6, (r0 - l0) * (t0 - b0))
        covered = 0.0
        for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=4):
            left, bottom, right, top = obj.get_bounds()
            w = min(right, r0) - max(left, l0)
            h = min(top, t0) - max(bottom, b0)
            if w > 0 and h > 0:
                covered += w * h
        return min(1.0, covered / area)
    except Exception:
        return 0.0


# --------------------------------------------------------------------------- text normalisation

_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff\ufffe\uffff]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")


def normalise_line(s: str) -> str:
    """One line of PDFium text → clean text (no control characters, no trailing spaces)."""
    s = s.replace("\ufffe", "-")  # PDFium marks a hyphen that it joined across a line break
    s = s.replace("\t", " ")
    s = _CONTROL_RE.sub("", s)
    s = _SURROGATE_RE.sub("\ufffd", s)
    s = s.translate(_LIGATURES)
    s = unicodedata.normalize("NFC", s)
    return s.rstrip()


# --------------------------------------------------------------------------- page layout


@dataclass
class _Line:
    text: str
    blank_before: bool = False
    rects: list[tuple[float, float, float, float]] = field(default_factory=list)
    # filled in by _geometry:
    along: list[tuple[float, float]] = field(default_factory=list)  # intervals along the text direction
    pos: float = 0.0  # centre across the text direction
    size: float = 0.0  # extent across the text direction (≈ font height)
    segments: int = 1
    tabular: bool = False


@dataclass
class _PageLayout:
    text: str
    paragraphs: list[str]
    block_types: list[BlockType]
    has_tables: bool


def _page_layout(tp: pdfium.PdfTextPage) -> _PageLayout:
    lines = _read_lines(tp)
    geom = _geometry(lines)
    paras = _group(lines, geom)
    texts = ["\n".join(ln.text for ln in para) for para in paras]
    has_tables = _page_has_tables(lines)
    median_size = geom.size if geom else 0.0
    kinds = [_block_type(para, txt, has_tables, median_size) for para, txt in zip(paras, texts, strict=True)]
    return _PageLayout(text="\n\n".join(texts), paragraphs=texts, block_types=kinds, has_tables=has_tables)


def _read_lines(tp: pdfium.PdfTextPage) -> list[_Line]:
    """PDFium's lines (split on its CRLF), normalised, each with its text rectangles."""
    n_chars = tp.count_chars()
    if n_chars <= 0:
        return []
    raw = tp.get_text_range(0, n_chars, errors="surrogatepass")
    astral = [m.start() for m in _ASTRAL_RE.finditer(raw)]  # 2 UTF-16 units each

    def u16(i: int) -> int:  # python index → UTF-16 text index
        return i + bisect.bisect_left(astral, i) if astral else i

    out: list[_Line] = []
    blank = False
    start = 0
    for piece in raw.split("\r\n"):
        end = start + len(piece)
        sub = [normalise_line(s) for s in re.split(r"[\r\n]", piece)]  # stray CR/LF inside a line
        text = "\n".join(s for s in sub if s.strip())
        if not text.strip():
            blank = bool(out)
        else:
            line = _Line(text=text, blank_before=blank)
            blank = False
            try:
                line.rects = _line_rects(tp, u16(start), u16(end) - 1)
            except Exception:
                line.rects = []
            out.append(line)
        start = end + 2
    return out


def _line_rects(tp: pdfium.PdfTextPage, t_first: int, t_last: int) -> list[tuple[float, float, float, float]]:
    if t_last < t_first:
        return []
    c0 = pdfium_c.FPDFText_GetCharIndexFromTextIndex(tp, t_first)
    c1 = pdfium_c.FPDFText_GetCharIndexFromTextIndex(tp, t_last)
    if c0 < 0 or c1 < c0:
        return []
    n = pdfium_c.FPDFText_CountRects(tp, c0, c1 - c0 + 1)
    rects = []
    left, top, right, bottom = ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    for j in range(max(0, n)):
        if pdfium_c.FPDFText_GetRect(tp, j, left, top, right, bottom):
            lo_x, hi_x = sorted((left.value, right.value))
            lo_y, hi_y = sorted((bottom.value, top.value))
            if hi_x - lo_x > 0 or hi_y - lo_y > 0:
                rects.append((lo_x, lo_y, hi_x, hi_y))
    return rects


@dataclass
class _PageGeom:
    vertical: bool  # text runs along the y axis (rotated page content)
    size: float  # median line height (across the text direction)
    pitch: float  # usual distance between consecutive lines of a paragraph
    direction: float  # +1/-1: sign of the position change from one line to the next


def _geometry(lines: list[_Line]) -> _PageGeom | None:
    with_rects = [ln for ln in lines if ln.rects]
    if not with_rects:
        return None
    # orientation: majority (by characters) of lines whose box is longer along y than along x
    vote_v = vote_h = 0
    for ln in with_rects:
        w = max(r[2] for r in ln.rects) - min(r[0] for r in ln.rects)
        h = max(r[3] for r in ln.rects) - min(r[1] for r in ln.rects)
        if len(ln.text) >= 3:
            if h > w:
                vote_v += len(ln.text)
            else:
                vote_h += len(ln.text)
    vertical = vote_v > vote_h
    for ln in with_rects:
        # across the text direction: the median rectangle (robust to OCR specks and sub/superscripts)
        if vertical:
            ln.along = sorted((r[1], r[3]) for r in ln.rects)
            across = [(r[0], r[2]) for r in ln.rects]
        else:
            ln.along = sorted((r[0], r[2]) for r in ln.rects)
            across = [(r[1], r[3]) for r in ln.rects]
        ln.pos = statistics.median((lo + hi) / 2 for lo, hi in across)
        ln.size = statistics.median(hi - lo for lo, hi in across)
    size = statistics.median(ln.size for ln in with_rects) or 1.0
    gap = 1.5 * size
    for ln in with_rects:
        segs = 0
        last_end = None
        for a, z in ln.along:
            if last_end is None or a - last_end >= gap:
                segs += 1
                last_end = z
            else:
                last_end = max(last_end, z)
        ln.segments = segs
        ln.tabular = segs >= 3
    diffs = [b.pos - a.pos for a, b in zip(lines, lines[1:], strict=False) if a.rects and b.rects and a.pos != b.pos]
    direction = (1.0 if statistics.median(diffs) > 0 else -1.0) if diffs else (1.0 if vertical else -1.0)
    pitches = [
        (b.pos - a.pos) * direction
        for a, b in zip(lines, lines[1:], strict=False)
        if a.rects and b.rects and 0.5 * size < (b.pos - a.pos) * direction < 4 * size
    ]
    pitch = statistics.median(pitches) if pitches else 1.25 * size
    # text-only fallback for lines without rectangles
    for ln in lines:
        if not ln.rects:
            ln.tabular = _tabular_by_spaces(ln.text)
    return _PageGeom(vertical=vertical, size=size, pitch=pitch, direction=direction)


def _tabular_by_spaces(text: str) -> bool:
    return len([c for c in re.split(r" {2,}|\t", text.strip()) if c]) >= 3


_LIST_RE = re.compile(
    r"^\s*(?:[\u2022\u00b7\u25aa\u25cf\u25e6\u2023\u2043\u25a0\u25a1\u2013\u2014*+>-]"
    r"|\(?\d{1,3}[.)]|\(?[A-Za-z][.)]|\(?[ivxIVX]{1,5}[.)])\s+\S"
)


def _starts_list(text: str) -> bool:
    return bool(_LIST_RE.match(text))


def _group(lines: list[_Line], geom: _PageGeom | None) -> list[list[_Line]]:
    if not lines:
        return []
    if geom is None:
        for ln in lines:
            ln.tabular = _tabular_by_spaces(ln.text)
    paras: list[list[_Line]] = [[lines[0]]]
    for prev, cur in zip(lines, lines[1:], strict=False):
        if _breaks(prev, cur, geom, paras[-1]):
            paras.append([cur])
        else:
            paras[-1].append(cur)
    return paras


def _breaks(prev: _Line, cur: _Line, geom: _PageGeom | None, para: list[_Line]) -> bool:
    if cur.blank_before:
        return True
    if _starts_list(cur.text):
        return True
    if geom is None or not prev.rects or not cur.rects:
        return False
    size = geom.size
    step = (cur.pos - prev.pos) * geom.direction
    if step < -0.5 * size:  # back up the page: next column or another region
        return True
    if step > max(1.45 * geom.pitch, geom.pitch + 0.5 * size):  # a vertical gap
        return True
    big, small = max(prev.size, cur.size), min(prev.size, cur.size)
    if small > 0 and big / small > 1.3 and len(prev.text) >= 3 and len(cur.text) >= 3 and abs(step) > 0.5 * size:
        return True  # font size changes: heading ↔ body
    if not geom.vertical and prev.along and cur.along and abs(step) > 0.5 * size:
        indent = cur.along[0][0] - prev.along[0][0]
        first = para[0]
        hanging = _starts_list(first.text)  # continuation lines of a list item are indented
        if 0.8 * size < indent < 8 * size and not hanging and not cur.tabular:
            return True  # first-line indent of a new paragraph
    return False


def _page_has_tables(lines: list[_Line]) -> bool:
    flags = [ln.tabular for ln in lines]
    if sum(flags) < 3:
        return False
    return any(a and b for a, b in zip(flags, flags[1:], strict=False))


_SECTION_RE = re.compile(r"^(?:\d+(?:\.\d+)*|[IVX]{1,5})\.?\s+\S")


def _block_type(para: list[_Line], text: str, page_has_tables: bool, median_size: float) -> BlockType:
    n_tab = sum(1 for ln in para if ln.tabular)
    if page_has_tables and n_tab * 2 >= len(para) and n_tab >= 1:
        return "table"
    if _starts_list(text):
        return "list_item"
    flat = " ".join(text.split())
    words = flat.split()
    if len(para) <= 2 and 0 < len(flat) <= 100 and words:
        letters = [c for c in flat if c.isalpha()]
        upper = sum(1 for c in letters if c.isupper())
        big_font = median_size > 0 and max(ln.size for ln in para) >= 1.25 * median_size and len(letters) >= 2
        caps = len(letters) >= 4 and upper >= 0.85 * len(letters) and len(words) <= 10
        colon = flat.endswith(":") and len(words) <= 6
        section = bool(_SECTION_RE.match(flat)) and len(words) <= 8 and not flat.endswith(".")
        if (big_font and not flat.endswith(".")) or caps or colon or section:
            return "heading"
    return "paragraph"


def _clip(s: str, n: int = 200) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
