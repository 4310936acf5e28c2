"""Time-bounded parsing in child processes: a PDF that hangs or crashes PDFium costs one
``TIMEOUT``/``CORRUPT`` result, never the caller.

* :func:`parse_pdf_bounded` — one file in a child, stopped when it runs out of time;
* :func:`parse_many_bounded` — a shard of files over a few long-lived children, each file still
  time-bounded; what the nightly DAG's layout task calls.

**A time budget that grows with the work** (ADR 0047). The parser reports each page it finishes
(:mod:`docverify.layout.progress`: a ``progress`` message on the pipe); the parent stops a file

* before its first report (opening it), after ``timeout_s`` (default 60 s) — also the whole
  file's limit for a ``parse_fn`` that reports no pages;
* when a page does not finish within ``page_timeout_s`` (default 60 s) of the previous report;
* in any case after ``file_ceiling_s`` (default 1800 s, and never less than ``timeout_s``).

So a 30-page scan whose pages take a few seconds each is read, and a page that hangs is stopped;
the ``TIMEOUT`` message says which limit was hit, how many pages were read of how many, and on
which page it stopped.

Children are fresh interpreters (``python -m docverify.layout.worker SPEC``, the caller's
``sys.path`` and environment) speaking one JSON message per line over stdin/stdout — not
multiprocessing, whose spawn/forkserver children re-import the parent's ``__main__`` file (inside
an Airflow task, the ``airflow`` entry script, which fails there) and never ``fork`` (Airflow task
processes are threaded). ``SPEC`` (``module:function``, default
:data:`DEFAULT_PARSE_FN`) is what a child runs on each file; its address space is capped at
``docverify.storage.limits.PARSE_WORKER_MEMORY_BYTES``.

**A crash is the file's only in a fresh worker.** A long-lived worker keeps what earlier files loaded
(the OCR engine, its libraries' threads and arenas count against the address-space cap), so a file
that would parse in a fresh worker can abort PDFium in a used one (a 5 MB text page after a scanned
page did). A worker that dies on a file it was given after another is replaced and the file is given
once more to the fresh worker; a crash there (or on a worker's first file) is the file's ``CORRUPT``.

**A long scan's pages across the workers** (ADR 0052). With OCR on and more than one worker, a file
is first handed out whole with ``split_scan_pages`` (default 8): a parser that finds that many
image-only pages among its first ones answers "split" (:class:`~docverify.layout.split.ScanSplit`)
instead of reading it, and the pool queues the file again as one page-range job per worker, at the
head of the queue; each range has the limits above as a file has, and its own ceiling. The ranges'
pages are merged in order into one bundle, which gets the whole document's scan verdict. A range that
fails (a page error, a ``TIMEOUT``, a crash after the one retry) is the file's error, its message
naming the page it stopped on and the pages read; ranges not started yet are dropped, those running
finish; other files go on. Each answer carries the OCR work of its job (``{"ocr": {"pages",
"seconds"}}``), summed per file in ``ocr_stats``.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import json
import multiprocessing.connection
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from docverify.domain.models import DocumentBundle
from docverify.layout import progress
from docverify.layout.errors import CORRUPT, TIMEOUT, TOO_LARGE, ParseError, ParseErrorDict
from docverify.layout.ocr import PAGE_TIMEOUT_ENV
from docverify.layout.split import (
    DEFAULT_SPLIT_SCAN_PAGES,
    SCAN_MAX_CHARS_PER_PAGE,
    RangeRead,
    ScanSplit,
    page_ranges,
)
from docverify.storage.limits import PARSE_WORKER_MEMORY_BYTES

#: seconds a file may take before its first page report (opening it), or in all when its parse_fn
#: reports no pages (the night's DAG param ``parse_timeout_s``)
DEFAULT_TIMEOUT_S = 60.0
#: seconds one page may take, counted from the previous report (Variable docverify_parse_page_timeout_s)
DEFAULT_PAGE_TIMEOUT_S = 60.0
#: seconds a file may take at most, however its pages advance (Variable docverify_parse_file_ceiling_s):
#: half the layout task's 60-minute execution_timeout
DEFAULT_FILE_CEILING_S = 1800.0
DEFAULT_PARSE_FN = "docverify.layout.local_pdf:parse_pdf"

Result = tuple[str, DocumentBundle | ParseError]


class OCRStat(TypedDict):
    """A file's OCR work in the parse workers: pages OCR'd, seconds spent reading them (summed over
    the workers that read its pages)."""

    pages: int
    seconds: float


@dataclass(frozen=True)
class _Job:
    """What a worker is given: a whole file (``first`` 0) or its pages ``first`` … ``last``."""

    path: str
    first: int = 0
    last: int = 0

    @property
    def span(self) -> tuple[int, int]:
        return self.first, self.last
#: what a worker runs on each file: ``fn(path, **kw)`` → a DocumentBundle (or its JSON)
ParseFn = Callable[..., object]


class _Message(TypedDict, total=False):
    """One line a worker writes (JSON): ready / a startup error, or a file's result."""

    ready: bool
    startup_error: str
    #: the file's DocumentBundle, as JSON (checked by the parent)
    ok: object
    error: ParseErrorDict
    #: the worker survived a MemoryError: the pool replaces it
    recycle: bool
    #: pages finished so far (docverify.layout.progress): ``{"done": k, "total": n, "ocr": m}``
    progress: dict[str, int]
    #: read this long scan in page ranges instead: ``{"total": n, "image_pages": k}`` (ADR 0052)
    split: dict[str, int]
    #: the job's OCR work: ``{"pages": k, "seconds": s}``
    ocr: dict[str, float]


def parse_pdf_bounded(
    path: str | os.PathLike[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S,
    file_ceiling_s: float = DEFAULT_FILE_CEILING_S,
    parse_fn: str | None = None,
    startup_timeout_s: float = 120.0,
    **kw: object,
) -> DocumentBundle:
    """:func:`parse_pdf` in a child process that is killed when it runs out of time: ``timeout_s``
    to open the file, ``page_timeout_s`` per page, ``file_ceiling_s`` in all (see the module).

    ``kw`` are :func:`parse_pdf`'s keyword arguments (JSON-serialisable). ``parse_fn`` is an
    optional ``"module:function"`` run in the child instead of :func:`parse_pdf` (an extension
    point, also used by the tests to simulate a hang or a crash).

    Raises:
        ParseError: the parse error, or ``TIMEOUT`` (child stopped), or ``CORRUPT`` (child crashed,
            the message names its exit code / signal).
        RuntimeError: the child process could not even start within ``startup_timeout_s`` (an
            environment problem, not a problem of the file).
    """
    limits = _Limits(timeout_s, page_timeout_s, file_ceiling_s)
    for _path, result in _parse_many([path], workers=1, limits=limits, parse_fn=parse_fn,
                                     startup_timeout_s=startup_timeout_s, per_file_kw=None, kw=kw,
                                     split_scan_pages=0, ocr_stats=None):
        if isinstance(result, ParseError):
            raise result
        return result
    raise RuntimeError("parse_many_bounded returned no result")  # pragma: no cover


def parse_many_bounded(
    paths: Iterable[str | os.PathLike[str]],
    *,
    workers: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S,
    file_ceiling_s: float = DEFAULT_FILE_CEILING_S,
    parse_fn: str | None = None,
    startup_timeout_s: float = 120.0,
    per_file_kw: Mapping[str, Mapping[str, object]] | None = None,
    split_scan_pages: int = DEFAULT_SPLIT_SCAN_PAGES,
    ocr_stats: dict[str, OCRStat] | None = None,
    **kw: object,
) -> Iterator[tuple[str, DocumentBundle | ParseError]]:
    """Parse many PDFs in ``workers`` child processes; yield ``(path, bundle or ParseError)``.

    Results come in completion order (not input order), exactly one per input path; ``path`` is
    ``str()`` of the input. Each file's time counts from the moment its worker is ready: ``timeout_s``
    until the parser reports the file open, then ``page_timeout_s`` for each page, ``file_ceiling_s``
    in all (see the module); a worker that times out or crashes is killed and replaced, so one bad file
    costs one ``TIMEOUT``/``CORRUPT`` result and a worker restart, never the shard. Workers are
    reused across files (the import of PDFium is paid once per worker). Closing the generator
    early stops the workers.

    ``kw`` (e.g. ``max_pages``) apply to every file; ``per_file_kw`` maps ``str(path)`` to extra
    keyword arguments for that file only (e.g. ``{"doc_id": ..., "file_uri": "gs://..."}``).

    With ``ocr`` true and ``workers`` > 1, a file with ``split_scan_pages`` image-only pages among its
    first ones is read in page ranges across the workers (0: never; see the module). ``ocr_stats``,
    when given, receives each file's OCR work (:class:`OCRStat`, ``str(path)`` → pages, seconds) as
    its workers report it (files without OCR'd pages have no entry).

    Raises:
        RuntimeError: a worker could not start within ``startup_timeout_s`` or died while
            starting (broken environment); failures of individual files are never raised.
    """
    yield from _parse_many(paths, workers=workers, limits=_Limits(timeout_s, page_timeout_s, file_ceiling_s),
                           parse_fn=parse_fn, startup_timeout_s=startup_timeout_s, per_file_kw=per_file_kw, kw=kw,
                           split_scan_pages=split_scan_pages, ocr_stats=ocr_stats)


@dataclass(frozen=True)
class _Limits:
    """A file's time limits (see the module): to open it, per page, in all."""

    open_s: float
    page_s: float
    ceiling_s: float

    def __post_init__(self) -> None:
        for name, value in (("timeout_s", self.open_s), ("page_timeout_s", self.page_s),
                            ("file_ceiling_s", self.ceiling_s)):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


def _parse_many(
    paths: Iterable[str | os.PathLike[str]],
    *,
    workers: int,
    limits: _Limits,
    parse_fn: str | None,
    startup_timeout_s: float,
    per_file_kw: Mapping[str, Mapping[str, object]] | None,
    kw: Mapping[str, object],
    split_scan_pages: int,
    ocr_stats: dict[str, OCRStat] | None,
) -> Iterator[Result]:
    """:func:`parse_many_bounded`, with the keyword arguments of every file as one mapping."""
    pending = collections.deque(_Job(str(p)) for p in paths)
    if not pending:
        return
    spec = parse_fn or DEFAULT_PARSE_FN
    per_file = {str(k): dict(v) for k, v in (per_file_kw or {}).items()}
    json.dumps([kw, per_file])  # fail early, in the caller, on non-JSON arguments
    split = max(0, int(split_scan_pages)) if int(workers) > 1 and kw.get("ocr") else 0

    def file_kw(path: str) -> dict[str, object]:
        return {**kw, **per_file.get(path, {})}

    def job_bytes(job: _Job) -> bytes:
        extra = {"page_range": list(job.span)} if job.first else {"split_scan_pages": split} if split else {}
        return json.dumps({"path": job.path, "kw": {**file_kw(job.path), **extra}}).encode()

    n_workers = max(1, int(workers) if split else min(int(workers), len(pending)))
    pool = _Pool(spec, pending, n_workers, limits, startup_timeout_s, job_bytes)
    pool.file_kw, pool.ocr_stats = file_kw, ocr_stats
    try:
        yield from pool.run()
    finally:
        pool.stop()


class _Pool:
    """The workers of one :func:`parse_many_bounded` call and their queue of files."""

    def __init__(self, spec: str, pending: collections.deque[_Job], n_workers: int, limits: _Limits,
                 startup_timeout_s: float, job_bytes: Callable[[_Job], bytes]) -> None:
        self.spec, self.pending, self.n_workers = spec, pending, n_workers
        self.limits, self.startup_timeout_s, self.job_bytes = limits, startup_timeout_s, job_bytes
        self.workers: list[_Worker] = []
        #: jobs whose worker died under them after an earlier job: they get one fresh worker
        self.retried: set[_Job] = set()
        #: files being read in page ranges (ADR 0052), by path
        self.splits: dict[str, RangeRead] = {}
        self.file_kw: Callable[[str], Mapping[str, object]] = lambda path: {}
        self.ocr_stats: dict[str, OCRStat] | None = None

    def run(self) -> Iterator[Result]:
        while self.pending or self._busy():
            self._fill()
            ready = multiprocessing.connection.wait(self._waitables(), timeout=self._wait_s())
            now = time.monotonic()
            for w in self._busy():
                result = self._step(w, ready, now)
                if result is not None:
                    yield result

    def stop(self) -> None:
        for w in self.workers:
            w.stop()

    def _busy(self) -> list[_Worker]:
        return [w for w in self.workers if w.job is not None]

    def _fill(self) -> None:
        """Give queued jobs to idle workers (page ranges queued by a split), then start workers up to
        the pool size; each gets its first job once it reports ready."""
        for w in list(self.workers):
            if w.job is None and w.ready and self.pending:
                self._send(w, self.pending.popleft())
        while len(self.workers) < self.n_workers and self.pending:
            w = _Worker(self.spec, self.startup_timeout_s, page_s=self.limits.page_s)
            w.job = self.pending.popleft()
            self.workers.append(w)

    def _waitables(self) -> list[int]:
        """The file descriptors to wait on: each busy worker's output pipe and, where the platform has
        one, its exit sentinel."""
        out: list[int] = []
        for w in self._busy():
            out += [w.conn.fileno()] + ([w.proc.sentinel] if w.proc.sentinel >= 0 else [])
        return out

    def _wait_s(self) -> float:
        busy = self._busy()
        if any(w.conn.buffered() for w in busy):  # a whole message already read from the pipe
            return 0.0
        return max(0.0, min(w.deadline for w in busy) - time.monotonic())

    def _step(self, w: _Worker, ready: Collection[object], now: float) -> Result | None:
        """What happened to busy worker ``w``: messages (page reports, then maybe its answer), its
        exit, its deadline, or nothing yet."""
        readable = w.conn.fileno() in ready or w.conn.buffered()
        if readable:
            msg = _receive(w.conn)
            while msg is not None and "progress" in msg:
                self._on_progress(w, msg["progress"])
                if not _poll(w.conn):
                    # the ceiling holds even for a worker whose reports never stop coming
                    return self._on_timeout(w) if time.monotonic() >= w.deadline else None
                msg = _receive(w.conn)
            if msg is not None:
                return self._on_message(w, msg)
        if readable or w.proc.sentinel in ready or not w.proc.is_alive():
            return self._on_exit(w)
        if now >= w.deadline:
            return self._on_timeout(w)
        return None

    def _on_progress(self, w: _Worker, report: Mapping[str, object]) -> None:
        """A page report: the file now has ``page_s`` for its next page (never past its ceiling)."""
        if w.job is None or not w.ready:
            return
        w.done, w.total, w.ocr = (_count(report.get(k)) for k in ("done", "total", "ocr"))
        w.reported = True
        self._arm(w, time.monotonic())

    def _arm(self, w: _Worker, now: float) -> None:
        """Set ``w``'s deadline and the limit it stands for: ``open`` (``open_s`` from the start, until
        the first report), ``page`` (``page_s`` from the last report), ``ceiling`` (from the start)."""
        lim = self.limits
        if w.reported:
            deadline, w.limit = now + lim.page_s, "page"
        else:
            deadline, w.limit = w.started + lim.open_s, "open"
        ceiling = w.started + max(lim.ceiling_s, lim.open_s)
        if ceiling <= deadline:
            deadline, w.limit = ceiling, "ceiling"
        w.deadline = deadline

    def _on_message(self, w: _Worker, msg: _Message) -> Result | None:
        assert w.job is not None  # _step runs for the busy workers only
        if "ready" in msg:
            w.ready = True
            self._send(w, w.job)
            return None
        if "startup_error" in msg:
            raise RuntimeError(f"parse worker could not start: {msg['startup_error']}")
        job, w.job = w.job, None
        w.jobs_done += 1
        self._count_ocr(job.path, msg.get("ocr"))
        if "split" in msg and not job.first:
            result = self._split(job, _count(msg["split"].get("total")))
        else:
            result = self._answer(job, _result_from_json(msg, job.path))
        if msg.get("recycle"):
            # the worker survived a MemoryError with its address space near the cap: the next file
            # gets a fresh worker, so one bomb never costs another document its parse
            self.workers.remove(w)
            w.stop()
        elif self.pending and w in self.workers:
            self._send(w, self.pending.popleft())
        return result

    def _on_exit(self, w: _Worker) -> Result | None:
        w.proc.join(timeout=5)
        code = _describe_exit(w.proc.exitcode)
        self.workers.remove(w)
        w.close()
        if w.ready and w.job is not None and w.jobs_done > 0 and w.job not in self.retried:
            # the worker had parsed other files: its state may be what failed, not this file
            self.retried.add(w.job)
            self.pending.appendleft(w.job)
            w.job = None
            return None
        job, err = _lost(
            w, f"parse worker died while starting (exit code {code}); check that docverify and pypdfium2 "
               f"import in a fresh interpreter",
            CORRUPT, lambda name: (
                f"{name} crashed the PDF parser (child process exit code {code}){self._range_note(w)}; the file is "
                f"probably damaged, or needed more than the parse worker's memory cap "
                f"(docverify.storage.limits.PARSE_WORKER_MEMORY_BYTES; a decompression bomb): re-export or repair it "
                f"(e.g. with qpdf) and retry, or route it through Document AI"))
        return self._answer(job, err)

    def _on_timeout(self, w: _Worker) -> Result | None:
        self.workers.remove(w)
        w.kill()
        job, err = _lost(
            w, f"parse worker did not start within {self.startup_timeout_s:g} s "
               f"(machine overloaded or a broken environment)",
            TIMEOUT, lambda name: self._timeout_text(w, name))
        return self._answer(job, err)

    def _timeout_text(self, w: _Worker, name: str) -> str:
        """The ``TIMEOUT`` message of ``w``'s job: a whole file's, or a page range's in the document's terms."""
        elapsed = time.monotonic() - w.started
        job = w.job
        if job is None or not job.first or job.path not in self.splits:
            return timeout_message(name, w.limit, self.limits, done=w.done, total=w.total, ocr=w.ocr, elapsed=elapsed)
        rr = self.splits[job.path]
        here = max(0, w.done - (job.first - 1)) if w.reported else 0
        return timeout_message(name, w.limit, self.limits, done=max(w.done, job.first - 1), total=rr.total,
                               ocr=rr.ocr + w.ocr, elapsed=elapsed, read=rr.read + here, span=job.span)

    def _range_note(self, w: _Worker) -> str:
        """Where a crash happened in a scan read in page ranges ("" for a whole file)."""
        job = w.job
        if job is None or not job.first or job.path not in self.splits:
            return ""
        rr = self.splits[job.path]
        here = max(0, w.done - (job.first - 1)) if w.reported else 0
        return (f" on page {job.first + here} of {rr.total} (pages {job.first}-{job.last}, one of the page ranges "
                f"read across the parse workers; {rr.read + here} of {rr.total} page(s) read)")

    def _split(self, job: _Job, total: int) -> Result | None:
        """A whole-file job answered "split": queue its page ranges at the head of the queue."""
        if total < 1:
            return self._answer(job, ParseError(CORRUPT, f"{pathlib.Path(job.path).name}: the parser asked to "
                                                f"split a file of {total} pages", job.path))
        ranges = page_ranges(total, self.n_workers)
        self.splits[job.path] = RangeRead(job.path, total, ranges)
        self.pending.extendleft(_Job(job.path, a, b) for a, b in reversed(ranges))
        return None

    def _answer(self, job: _Job, result: DocumentBundle | ParseError) -> Result | None:
        """A job's result: a whole file's is the file's; a page range's is kept until the file's last
        range is answered, then the file's result is the merged document (or its first failure)."""
        if not job.first:
            return job.path, result
        rr = self.splits[job.path]
        rr.answered(job.span, result)
        if isinstance(result, ParseError):  # the file fails: ranges not started yet are not read
            for queued in [j for j in self.pending if j.path == job.path]:
                self.pending.remove(queued)
                rr.open.discard(queued.span)
        if rr.open:
            return None
        del self.splits[job.path]
        kw = self.file_kw(job.path)
        return job.path, rr.merged(pathlib.Path(job.path).name,
                                   min_chars_per_doc=_count(kw.get("min_chars_per_doc", 1)),
                                   scan_max_chars_per_page=_count(kw.get("scan_max_chars_per_page",
                                                                         SCAN_MAX_CHARS_PER_PAGE)))

    def _count_ocr(self, path: str, report: object) -> None:
        """Add a job's OCR work (its answer's ``ocr``) to its file's :class:`OCRStat`."""
        if self.ocr_stats is None or not isinstance(report, Mapping):
            return
        pages, seconds = _count(report.get("pages")), report.get("seconds")
        if pages:
            stat = self.ocr_stats.setdefault(path, {"pages": 0, "seconds": 0.0})
            stat["pages"] += pages
            if isinstance(seconds, int | float) and seconds >= 0:
                stat["seconds"] = round(stat["seconds"] + float(seconds), 3)

    def _send(self, w: _Worker, job: _Job) -> None:
        """Hand ``job`` to worker ``w``; if its pipe is broken (it died after its last answer), put
        the job back at the head of the queue and drop the worker (a fresh one takes the job)."""
        w.job = job
        w.started = time.monotonic()
        w.reported, w.done, w.total, w.ocr = False, 0, 0, 0
        self._arm(w, w.started)
        try:
            w.conn.send_bytes(self.job_bytes(job))
        except (OSError, ValueError):
            w.job = None
            self.pending.appendleft(job)
            self.workers.remove(w)
            w.kill()


#: the settings behind each limit, as an operator changes them for the night
LIMIT_SETTINGS = {
    "open": "the DAG param parse_timeout_s",
    "page": "Variable docverify_parse_page_timeout_s",
    "ceiling": "Variable docverify_parse_file_ceiling_s",
}


def timeout_message(name: str, limit: str, limits: _Limits, *, done: int, total: int, ocr: int,
                    elapsed: float, read: int | None = None, span: tuple[int, int] | None = None) -> str:
    """The ``TIMEOUT`` message of a file stopped by ``limit`` (``open``, ``page`` or ``ceiling``):
    what happened (pages read of how many, the page it stopped on, the limit and its setting) and
    the fix. It never calls the file damaged: the parser did not say so. A page range of a scan read
    across the workers (``span``, ADR 0052): ``done`` is the last page it finished (or the page before
    its first), ``read`` the document's pages read in all."""
    read_s = f"{done if read is None else read} of {total} page(s) read" + (f", {ocr} of them by OCR" if ocr else "")
    if span is not None:
        read_s += f"; the scan was read in page ranges across the parse workers, this one pages {span[0]}-{span[1]}"
    end = span[1] if span is not None else total
    where = f"on page {done + 1} of {total}" if done < end else f"after reading all {total} page(s)"
    if limit == "open":
        return (f"{name} took longer than {limits.open_s:g} s to parse without reading a page (the limit to open a "
                f"PDF, {LIMIT_SETTINGS['open']}; for a parser that reports no pages, the whole file's) and the "
                f"parser was stopped: raise parse_timeout_s for this run, or route it through Document AI")
    if limit == "page" and done >= end:
        which = f"pages {span[0]}-{span[1]} of {total}" if span is not None else f"all {total} page(s)"
        return (f"{name}: {which} were read ({read_s}) but the parser did not finish within "
                f"{limits.page_s:g} s of the last one ({LIMIT_SETTINGS['page']}) and was stopped after "
                f"{elapsed:.0f} s: raise docverify_parse_page_timeout_s, or route the file through Document AI")
    if limit == "page":
        return (f"{name}: page {done + 1} of {total} did not finish within the per-page limit of {limits.page_s:g} s "
                f"({LIMIT_SETTINGS['page']}) and the parser was stopped after {elapsed:.0f} s with {read_s}; a page "
                f"this slow is usually a dense scan OCR'd on a busy machine: raise docverify_parse_page_timeout_s, "
                f"or route the file through Document AI")
    return (f"{name} reached the limit of {max(limits.ceiling_s, limits.open_s):g} s per file "
            f"({LIMIT_SETTINGS['ceiling']}) {where} with {read_s}, its pages still advancing, and the parser was "
            f"stopped: raise docverify_parse_file_ceiling_s, split the file, or route it through Document AI")


def _count(value: object) -> int:
    """A page count from a worker's report (an int ≥ 0; anything else is 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _lost(w: _Worker, not_started: str, code: str, message: Callable[[str], str]) -> tuple[_Job, ParseError]:
    """A worker gone (exited or killed): before it was ready the environment is broken (raised);
    after, its job gets the typed error ``code`` with ``message(file name)``."""
    if not w.ready:
        raise RuntimeError(not_started)
    assert w.job is not None  # _step runs for the busy workers only
    err = ParseError(code, message(pathlib.Path(w.job.path).name), w.job.path)
    job, w.job = w.job, None
    return job, err


def _receive(conn: _PipeConn) -> _Message | None:
    """The worker's next message, or None when there is none or its pipe broke."""
    if not _poll(conn):
        return None
    try:
        msg: _Message = json.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return None
    return msg


# =========================================================================== child processes


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


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (Linux's ``/proc/PID/task/*/children``; none elsewhere)."""
    out: list[int] = []
    for f in pathlib.Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            out += [int(c) for c in f.read_text().split()]
    return out


class _PipeConn:
    """One JSON message per line over the worker's stdin/stdout. The output is read in chunks into
    our own buffer (never through the file object's, which ``select`` cannot see): a worker may
    write several lines at once (page reports, then its answer) and each is seen."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None  # started with stdin and stdout PIPE
        self._in, self._out = proc.stdin, proc.stdout
        self._buf = bytearray()

    def fileno(self) -> int:
        return self._out.fileno()

    def buffered(self) -> bool:
        """A whole line is waiting in our buffer (``select`` on the pipe would not say so)."""
        return b"\n" in self._buf

    def poll(self) -> bool:
        import select

        return self.buffered() or bool(select.select([self._out], [], [], 0)[0])

    def send_bytes(self, data: bytes) -> None:
        self._in.write(data + b"\n")
        self._in.flush()

    def recv_bytes(self) -> bytes:
        """The next line (blocks until it is whole)."""
        while b"\n" not in self._buf:
            chunk = os.read(self._out.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("parse worker closed its output")
            self._buf += chunk
        end = self._buf.index(b"\n") + 1
        line = bytes(self._buf[:end])
        del self._buf[:end]
        return line

    def close(self) -> None:
        for f in (self._in, self._out):
            with contextlib.suppress(OSError, ValueError):
                f.close()


class _ProcHandle:
    """The small part of ``multiprocessing.Process`` the pool loop uses, on a Popen."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._p = proc
        self._pidfd: int | None = None
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
        """Kill the worker, then the processes it had started (a Tesseract call running the page the
        worker is stopped on would otherwise outlive it; looked up first, while they are its)."""
        children = _children(self._p.pid)
        self._p.kill()
        for child in children:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)

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
    #: the per-page limit, given to the worker's environment (``DOCVERIFY_PARSE_PAGE_TIMEOUT_S``): the
    #: OCR's Tesseract calls end before it (:func:`docverify.layout.ocr.tesseract_timeout_s`)
    page_s: float = DEFAULT_PAGE_TIMEOUT_S
    job: _Job | None = None
    ready: bool = False
    deadline: float = 0.0
    #: the current file: when it was sent, its page reports (any yet; pages done, of, OCR'd) and
    #: which limit ``deadline`` stands for (``startup`` until the worker is ready)
    started: float = 0.0
    reported: bool = False
    done: int = 0
    total: int = 0
    ocr: int = 0
    limit: str = "startup"
    #: how many files this worker has answered (a crash on a later one is retried in a fresh worker)
    jobs_done: int = 0
    proc: _ProcHandle = field(init=False)
    conn: _PipeConn = field(init=False)

    def __post_init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               PAGE_TIMEOUT_ENV: f"{self.page_s:g}"}
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


def _resolve_parse_fn(spec: str) -> ParseFn:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"parse_fn must look like 'module:function', got {spec!r}")
    fn: ParseFn = getattr(importlib.import_module(module), name)
    return fn


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

    def send(obj: _Message) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    try:
        fn = _resolve_parse_fn(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        send({"startup_error": f"{spec}: {type(exc).__name__}: {exc}"})
        return
    send({"ready": True})
    progress.listen(lambda done, total, ocr: send({"progress": {"done": done, "total": total, "ocr": ocr}}))
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if job is None:
            return
        send(_run_job(fn, job["path"], job["kw"]))


def _run_job(fn: ParseFn, path: str, kw: dict[str, object]) -> _Message:
    """A job's answer, with the OCR work it did (``ocr``: pages, seconds) when it OCR'd a page."""
    progress.take_ocr()  # nothing of an earlier job counts
    msg = _answer_job(fn, path, kw)
    pages, seconds = progress.take_ocr()
    if pages:
        msg["ocr"] = {"pages": pages, "seconds": round(seconds, 3)}
    return msg


def _answer_job(fn: ParseFn, path: str, kw: dict[str, object]) -> _Message:
    try:
        result = fn(path, **kw)
        if hasattr(result, "model_dump"):
            result = result.model_dump(mode="json")
        return {"ok": result}
    except ScanSplit as split:  # a long scan: the pool hands out its page ranges (ADR 0052)
        return {"split": {"total": split.total, "image_pages": split.image_pages}}
    except ParseError as exc:
        return {"error": exc.to_dict()}
    except MemoryError:
        name = pathlib.Path(path).name
        return {"error": ParseError(
            TOO_LARGE, f"{name} needs more memory to parse than the worker's cap of "
            f"{PARSE_WORKER_MEMORY_BYTES // 1048576} MB (docverify.storage.limits.PARSE_WORKER_MEMORY_BYTES); "
            f"the file may be a decompression bomb: repair or split it", path).to_dict(),
            "recycle": True}  # this worker's heap may stay near the cap: the pool replaces it
    except BaseException as exc:  # noqa: BLE001 - a custom parse_fn may raise anything
        name = pathlib.Path(path).name
        # the exception's text may quote the document: only its type goes into the message
        return {
            "error": ParseError(
                CORRUPT, f"{name} could not be parsed ({type(exc).__name__})", path
            ).to_dict()
        }


def _result_from_json(msg: _Message, path: str) -> DocumentBundle | ParseError:
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
