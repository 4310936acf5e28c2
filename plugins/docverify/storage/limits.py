"""Every input limit of the pipeline, in one place, and the bounded JSON reader that applies them.

A limit is checked **before** the work it protects: a file's size before it is read, a JSON
document's bytes before it is parsed, its nesting, numbers and shape before it is validated.
Anything over a limit is an :class:`InputError` — a typed error with a stable ``code`` and a
message that names the file, the limit and the fix, and never quotes the input's bytes (they may
be PHI). One bad input becomes an error of **its document only**.

| limit | value | applies to |
|---|---|---|
| ``MAX_PDF_BYTES`` | 50 MiB | an incoming PDF (``stat`` before any read) |
| ``MAX_PAGES`` | 500 | pages of a PDF (local parser) |
| ``MAX_COMPANION_BYTES`` | 1 MiB | a ``<doc>.classification.json`` / ``<doc>.production.json`` |
| ``MAX_DOCAI_JSON_BYTES`` | 64 MiB | one Document AI output shard |
| ``MAX_JSON_DEPTH`` | 32 | nesting of a classification |
| ``DOCAI_MAX_DEPTH`` | 256 | nesting of a Document AI output shard |
| ``MAX_SEGMENTS`` | 500 | segments of a classification (the page limit: a segment has ≥ 1 page) |
| ``MAX_TYPES_PER_SEGMENT`` | 20 | classifications per segment / mixture entries |
| ``MAX_EVIDENCE_PER_TYPE`` | 50 | ``top_evidence`` items per type |
| ``MAX_ABS_INT`` | 10⁶ | any integer of a classification (pages, indexes, counts) |
| numbers | finite | NaN / Infinity / overflowing floats are refused |
| ``MAX_PAGE_CHARS`` | 100,000 | text of one page of a bundle (any parser): beyond it the document is TOO_LARGE, never sent to an LLM |
| ``PARSE_WORKER_MEMORY_BYTES`` | 2 GiB | address space of one parse worker (``RLIMIT_AS``) |
| ``MAX_NAME_BYTES`` | 120 | one path component built from an input name (see :mod:`docverify.storage.paths`) |
| text | Unicode | a JSON string (key or value) with a lone surrogate escape (``"\\ud83e"``) is refused (``INPUT_INVALID_JSON``), never repaired |
"""

from __future__ import annotations

import json
import math
import re
from typing import Literal, NoReturn, overload

from pydantic import JsonValue

MAX_PDF_BYTES = 50 * 1024 * 1024
MAX_COMPANION_BYTES = 1024 * 1024
MAX_DOCAI_JSON_BYTES = 64 * 1024 * 1024
MAX_JSON_DEPTH = 32
DOCAI_MAX_DEPTH = 256  # Document AI layout blocks nest (tables → rows → cells → blocks → …)
MAX_PAGES = 500
MAX_SEGMENTS = MAX_PAGES
MAX_TYPES_PER_SEGMENT = 20
MAX_EVIDENCE_PER_TYPE = 50
MAX_ABS_INT = 1_000_000
MAX_PAGE_CHARS = 100_000  # a dense A4 page at 6 pt holds ~15,000 characters
PARSE_WORKER_MEMORY_BYTES = 2 * 1024 * 1024 * 1024
MAX_NAME_BYTES = 120
HASH_CHUNK_BYTES = 1024 * 1024

#: stable codes of :class:`InputError`
INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
INPUT_INVALID_JSON = "INPUT_INVALID_JSON"
INPUT_NOT_OBJECT = "INPUT_NOT_OBJECT"
INPUT_TOO_DEEP = "INPUT_TOO_DEEP"
INPUT_BAD_NUMBER = "INPUT_BAD_NUMBER"
INPUT_TOO_MANY_ITEMS = "INPUT_TOO_MANY_ITEMS"
INPUT_NOT_REGULAR = "INPUT_NOT_REGULAR"
INPUT_UNSAFE_NAME = "INPUT_UNSAFE_NAME"
#: the bytes read are not the bytes discovered: the file was replaced after discovery (ADR 0052)
INPUT_CHANGED = "INPUT_CHANGED"
INPUT_CODES = (INPUT_TOO_LARGE, INPUT_INVALID_JSON, INPUT_NOT_OBJECT, INPUT_TOO_DEEP, INPUT_BAD_NUMBER,
               INPUT_TOO_MANY_ITEMS, INPUT_NOT_REGULAR, INPUT_UNSAFE_NAME, INPUT_CHANGED)


class InputError(ValueError):
    """An input over a limit or of the wrong shape. ``message`` names the file and the fix; it
    never holds bytes of the input."""

    def __init__(self, code: str, message: str, file: str = "") -> None:
        if code not in INPUT_CODES:
            raise ValueError(f"unknown input error code {code!r}")
        super().__init__(message)
        self.code, self.message, self.file = code, message, file

    def to_dict(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message, "file": self.file}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str]]:
        return (type(self), (self.code, self.message, self.file))


def check_size(size: int, limit: int, file: str, what: str) -> None:
    if size > limit:
        raise InputError(INPUT_TOO_LARGE, f"{file}: the {what} has {size} bytes, over the limit of {limit} "
                         f"(docverify.storage.limits); split or shrink it", file)


def _bad_constant(name: str) -> NoReturn:
    raise _BadNumber(name)


class _BadNumber(Exception):
    pass


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise _BadNumber("overflowing number")
    return v


def _depth_ok(obj: JsonValue, limit: int) -> bool:
    """Nesting of a parsed JSON value ≤ ``limit``, without recursion."""
    stack: list[tuple[JsonValue, int]] = [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d > limit:
                return False
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(obj: JsonValue) -> bool:
    """A string (key or value) of a parsed JSON value holds a lone UTF-16 surrogate: valid JSON
    (``"\\ud83e"``, a cut emoji) that is not Unicode text — it cannot be written as UTF-8."""
    stack: list[JsonValue] = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def scan_depth(data: bytes, limit: int) -> bool:
    """Bracket nesting of raw JSON ≤ ``limit`` (strings skipped), before the parser recurses."""
    depth, in_str, esc = 0, False, False
    for b in data:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return False
        elif b in (0x5D, 0x7D):
            depth -= 1
    return True


@overload
def load_json_object(data: bytes, file: str, what: str, *, max_bytes: int = ..., max_depth: int = ...,
                     require_object: Literal[True] = ...) -> dict[str, JsonValue]: ...
@overload
def load_json_object(data: bytes, file: str, what: str, *, max_bytes: int = ..., max_depth: int = ...,
                     require_object: bool) -> JsonValue: ...
def load_json_object(data: bytes, file: str, what: str, *, max_bytes: int = MAX_COMPANION_BYTES,
                     max_depth: int = MAX_JSON_DEPTH, require_object: bool = True) -> JsonValue:
    """Parse ``data`` as one JSON object within the limits: bytes, UTF-8, nesting, finite numbers
    (no NaN/Infinity/overflow, integers of at most 4300 digits), a top-level object (any JSON
    value with ``require_object=False``)."""
    check_size(len(data), max_bytes, file, what)
    if not scan_depth(data, max_depth):
        raise InputError(INPUT_TOO_DEEP, f"{file}: the {what} nests deeper than {max_depth} levels "
                         f"(docverify.storage.limits); it is not a classification, regenerate it", file)
    try:
        obj: JsonValue = json.loads(data.decode("utf-8"), parse_constant=_bad_constant, parse_float=_finite_float)
    except _BadNumber:
        raise InputError(INPUT_BAD_NUMBER, f"{file}: the {what} holds NaN, Infinity or an overflowing number; "
                         f"JSON numbers must be finite — regenerate it", file) from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        # the decoder's message may quote the input: only its position goes into ours
        pos = getattr(exc, "pos", None)
        where = f" (at byte {pos})" if isinstance(pos, int) else ""
        raise InputError(INPUT_INVALID_JSON, f"{file}: the {what} is not valid UTF-8 JSON{where} "
                         f"({type(exc).__name__}); regenerate it", file) from None
    if has_lone_surrogate(obj):  # refused, not repaired: a classification is evidence, never rewritten
        raise InputError(INPUT_INVALID_JSON, f"{file}: the {what} holds a lone UTF-16 surrogate escape "
                         f"(\\ud800–\\udfff without its pair, e.g. a cut emoji): valid JSON but not text; "
                         f"regenerate it", file)
    if require_object and not isinstance(obj, dict):
        raise InputError(INPUT_NOT_OBJECT, f"{file}: the {what} is a JSON {type(obj).__name__}, not an object; "
                         f"a classification is one JSON object (include/schemas/ClassificationOutput.json)", file)
    if not _depth_ok(obj, max_depth):  # pragma: no cover - the byte scan catches it first
        raise InputError(INPUT_TOO_DEEP, f"{file}: the {what} nests deeper than {max_depth} levels", file)
    return obj


def _ints_in_range(obj: JsonValue) -> bool:
    stack: list[JsonValue] = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and abs(v) > MAX_ABS_INT:
            return False
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def _at_most(items: JsonValue, limit: int, file: str, what: str) -> None:
    if isinstance(items, list) and len(items) > limit:
        raise InputError(INPUT_TOO_MANY_ITEMS, f"{file}: {len(items)} {what}, over the limit of {limit} "
                         f"(docverify.storage.limits); regenerate it", file)


def check_classification_shape(obj: dict[str, JsonValue], file: str) -> dict[str, JsonValue]:
    """Count limits of a classification (before pydantic sees it): segments, types per segment,
    evidence per type, integers within ±``MAX_ABS_INT``. Wrong types of fields are left to the
    schema check (V1 ``SCHEMA_INVALID``), which reports field paths only."""
    segs = obj.get("segments")
    _at_most(segs, MAX_SEGMENTS, file, "segments (a segment spans at least one page)")
    for seg in segs if isinstance(segs, list) else []:
        tcs = seg.get("classifications") if isinstance(seg, dict) else None
        _at_most(tcs, MAX_TYPES_PER_SEGMENT, file, "classifications in one segment")
        for tc in tcs if isinstance(tcs, list) else []:
            _at_most(tc.get("top_evidence") if isinstance(tc, dict) else None, MAX_EVIDENCE_PER_TYPE, file,
                     "evidence items for one type")
    _at_most(obj.get("document_mixture"), MAX_TYPES_PER_SEGMENT, file, "mixture entries")
    if not _ints_in_range(obj):
        raise InputError(INPUT_BAD_NUMBER, f"{file}: an integer is outside ±{MAX_ABS_INT} (docverify.storage.limits); "
                         f"pages, indexes and counts are small numbers — regenerate it", file)
    return obj


def load_classification(data: bytes, file: str) -> dict[str, JsonValue]:
    """A companion classification's bytes → a dict within every limit, or :class:`InputError`."""
    return check_classification_shape(load_json_object(data, file, "classification"), file)
