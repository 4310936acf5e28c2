"""Document AI output (the ``Document`` JSON) → :class:`~docverify.domain.models.DocumentBundle`.

Pure domain code: no Google client, no Airflow. The JSON comes from a batch operation's output
folder, an online ``process_document`` answer (a ``ProcessResponse`` ``{"document": …}`` is
unwrapped) or a file on disk; :func:`load_docai_output` reads it from any pathlib-like root
(``pathlib.Path``, Airflow's ``ObjectStoragePath`` on ``gs://``) and :func:`bundle_from_docai`
converts it.

**Layout Parser** (``documentLayout.blocks`` present). There is no ``Document.text`` and no
``pages``: page text is rebuilt from the blocks. The blocks are walked depth first in document
order (the reading order Document AI gives); every block with text becomes one *piece* on one
page, and a page's pieces, in that order, are its ``paragraphs``; ``text`` is the paragraphs
joined by a blank line (runs of blank lines inside a piece are reduced to one newline, so
``text.split("\\n\\n") == paragraphs`` as with the local parser).

* ``textBlock``: its own ``text`` is a piece of its ``type`` as Document AI names it
  (``heading-1`` … ``heading-6``, ``paragraph``, ``header``, ``footer``, ``title``…; missing →
  ``paragraph``), then its nested ``blocks`` follow.
* ``tableBlock``: ``headerRows`` then ``bodyRows``; a cell's text is everything inside its
  ``blocks`` (recursively: nested text, lists, even tables), flattened to one line; a row is its
  cells joined by ``" | "``; rows are joined by newlines into one ``table`` piece per page (a row
  belongs to the page of the first block inside it, else to the table's first page, so a table
  that runs over a page break is split there). ``caption`` → a ``caption`` piece before it.
  ``has_tables`` is true on every page of a table block's ``pageSpan`` and every page holding one
  of its rows.
* ``listBlock``: each entry's text becomes one ``list_item`` piece (its text blocks joined by a
  space); a table or a nested list inside an entry stays its own ``table`` / ``list_item`` piece.
* ``imageBlock``: its ``imageText``, if any, is an ``image`` piece.

``layout_metadata.block_types`` is parallel to ``paragraphs`` (one entry per paragraph, in order,
as the local parser does), with the Document AI type names above plus ``table``, ``list_item``,
``caption``, ``image``.

*A block spanning several pages* (``pageStart < pageEnd``): its own text goes to ``pageStart``;
its children carry their own spans and land on their own pages (a ``heading-1`` spanning pages 1–8
puts the heading on page 1 and each child paragraph on its page). A leaf text block spanning a
page break is not split (Document AI gives no offset to split it at): it stays whole on its first
page. A block without a ``pageSpan`` (or with ``pageStart`` omitted, which proto3 does for 0 and
which is never a valid 1-based page) takes the page of the block before it in reading order, or
its parent's, kept within ``pageEnd`` when that is given. ``total_pages`` is the largest
``pageEnd`` (of blocks and of ``chunkedDocument`` chunks); pages without any piece still appear,
with empty text, so page numbers run 1..N. Trailing blank pages of the PDF are invisible in
Layout Parser output and cannot be counted.

**OCR fallback** (no layout blocks: Enterprise OCR, Form/Invoice Parser and other processors):
``Document.text`` plus ``pages[]``. A page's ``text`` is the text its own ``layout.textAnchor``
points at; its ``paragraphs`` come from ``pages[].paragraphs[].layout.textAnchor`` (else
``blocks``, else ``lines``, else the page text as one paragraph), block type ``paragraph`` or
``table`` when the paragraph overlaps a cell of one of the page's ``tables`` (``has_tables`` is
true when the page has any). A page without a text anchor gets its paragraphs joined by newlines,
or, in a one-page document, the whole text. ``pageNumber`` (1-based) orders pages; when omitted,
the page after the previous one. Text without pages is one page.

**proto3 JSON traps handled.** int64 fields as strings (``"startIndex": "12"``); zero values
omitted (a missing ``startIndex`` is 0, a missing ``shardIndex`` is 0, a missing ``shardCount``
means "not sharded"); camelCase (the REST API, batch output, ``Document.to_json``) and snake_case
keys (``Document.to_json(preserving_proto_field_name=True)`` / ``Document.to_dict``, which also
spell ``type`` as ``type_`` and print every default value) are both accepted, field by field.

**Shards.** A large document's batch output is ``<name>-0.json``, ``<name>-1.json``… each with
``shardInfo {shardIndex, shardCount, textOffset}``. Text anchors inside shard *k* index that
shard's own ``text``; ``textOffset`` is where that text starts in the whole document's text (the
sum of the lengths of the shards before it: Document AI's reference and the Document AI Toolbox,
which adds ``textOffset`` to every text segment of a shard when it merges shards). Shards are
merged in ``shardIndex`` order whatever order they are given in: the OCR texts are concatenated
and each anchor is shifted by its shard's offset (so a segment that runs past the end of its
shard, which the reference allows, still resolves); layout blocks are concatenated. Missing
shards → ``DOCAI_SHARDS_MISSING``; a duplicate index, differing ``shardCount`` values, a declared
``textOffset`` that disagrees with the texts, or several unsharded documents →
``DOCAI_SHARDS_INCONSISTENT``.

``parser`` is :data:`PARSER_ID_LAYOUT` or :data:`PARSER_ID_OCR`, followed by ``@<processor
version>`` when a ``revisions[].processor`` resource name carries ``processorVersions/<id>``.

Errors are :class:`~docverify.layout.errors.ParseError` with the ``DOCAI_*`` codes,
``TOO_MANY_PAGES`` (over :data:`MAX_PAGES`) or ``UNSUPPORTED`` (unreadable path); messages name
the file and the fix and never contain document text. Nothing here logs.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import pathlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeGuard

from docverify.domain.models import DocumentBundle, LayoutMetadata, Page
from docverify.layout.errors import (
    DOCAI_INVALID_JSON,
    DOCAI_NO_CONTENT,
    DOCAI_SHARDS_INCONSISTENT,
    DOCAI_SHARDS_MISSING,
    TOO_MANY_PAGES,
    UNSUPPORTED,
    ParseError,
)
from docverify.storage.limits import DOCAI_MAX_DEPTH, MAX_DOCAI_JSON_BYTES, scan_depth

PARSER_ID_LAYOUT = "document_ai:layout-parser"
"""``DocumentBundle.parser`` of a bundle made from Layout Parser output (``documentLayout``)."""
PARSER_ID_OCR = "document_ai:ocr"
"""``DocumentBundle.parser`` of a bundle made from ``text`` + ``pages`` (OCR and other processors)."""

MAX_PAGES = 500
"""Layout Parser's limit per document (batch); more pages → ``TOO_MANY_PAGES`` (it also stops a
corrupt ``pageEnd`` such as ``"999999999"`` from allocating millions of empty pages)."""

_SHARD_NAME_RE = re.compile(r"^(?P<prefix>.*)-(?P<index>\d+)\.json$", re.IGNORECASE)
_VERSION_RE = re.compile(r"processorVersions/([^/\s]+)")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufeff\ufffe\uffff]")
_BLANK_LINES_RE = re.compile(r"\n{2,}")
_OWN_PIECE_KINDS = frozenset({"table", "list_item", "caption"})


class _Invalid(Exception):
    """A field of the wrong JSON type (turned into DOCAI_INVALID_JSON with the file's name)."""


class OutputPath(Protocol):
    """What the converter uses of a path to an output file or folder: a :class:`pathlib.Path`, or a
    pathlib-like object such as Airflow's ``ObjectStoragePath`` on ``gs://``."""

    @property
    def name(self) -> str: ...

    def iterdir(self) -> Iterable[OutputPath]: ...

    def read_bytes(self) -> bytes: ...


# =========================================================================== public API


def load_docai_output(path: object) -> list[dict[str, object]]:
    """Read one Document AI output: a ``.json`` file, or a folder whose ``*.json`` files are the
    shards of one document (a batch operation writes one folder per input document).

    ``path`` is a ``str``, an ``os.PathLike`` or any pathlib-like object (e.g. Airflow's
    ``ObjectStoragePath`` on ``gs://``); only its ``name``, ``iterdir()`` and ``read_bytes()`` are
    used. A name ending in ``.json`` is read as a file; anything else is listed as a folder (and
    read as a file if it is not one). Returns the parsed JSON objects, in natural name order
    (``x-2.json`` before ``x-10.json``); :func:`bundle_from_docai` orders shards by
    ``shardInfo.shardIndex`` anyway.

    Raises:
        ParseError: ``UNSUPPORTED`` (path missing or unreadable), ``DOCAI_NO_CONTENT`` (a folder
            without ``.json`` files), ``DOCAI_SHARDS_INCONSISTENT`` (a folder holding the outputs
            of several documents), ``DOCAI_INVALID_JSON`` (empty file, not JSON, not an object).
    """
    root = _as_pathlike(path)
    out: list[dict[str, object]] = []
    for f in _output_files(root):
        out.append(_parse_json(_read(f), f))
    return out


def docai_output_sha256(path: object) -> str:
    """sha256 of the output's JSON bytes: of the file, or of the folder's ``*.json`` files
    concatenated in the order :func:`load_docai_output` reads them. (The bundle's ``sha256``
    normally is the source PDF's; this is for when only the JSON is at hand, e.g. the CLI.)"""
    h = hashlib.sha256()
    for f in _output_files(_as_pathlike(path)):
        h.update(_read(f))
    return h.hexdigest()


def default_doc_id(path: object, docs: Sequence[dict[str, object]] | None = None) -> str:
    """A doc id for an output read from ``path``: a folder's name, or a file's name without
    ``.json`` and, when ``docs`` show it is a shard (``shardInfo``), without the ``-<shardIndex>``
    that batch processing appends (``report-0.json`` → ``report``)."""
    root = _as_pathlike(path)
    name = str(root.name)
    if not name.lower().endswith(".json"):
        return name
    stem = name[: -len(".json")]
    m = _SHARD_NAME_RE.match(name)
    if m and docs and len(docs) == 1 and isinstance(docs[0], dict):
        info = _get(_unwrap(docs[0]), "shardInfo")
        if isinstance(info, dict) and info:
            return m.group("prefix")
    return stem


def bundle_from_docai(
    doc: dict[str, object] | Sequence[dict[str, object]],
    *,
    doc_id: str,
    file_path: str,
    sha256: str,
    parser: str | None = None,
) -> DocumentBundle:
    """Convert a Document AI ``Document`` (a dict, or a list of dicts = the shards of one
    document, in any order) into a DocumentBundle.

    Layout Parser output (``documentLayout.blocks``) is used when present, else the OCR fields
    (``text`` + ``pages``); see the module docstring for how page text, paragraphs, block types
    and ``has_tables`` are built, and for the proto3-JSON and sharding rules.

    Args:
        doc: the parsed JSON (camelCase or snake_case keys; a ``{"document": …}``
            ProcessResponse is unwrapped).
        doc_id / file_path / sha256: copied into the bundle (``file_path`` is normally the source
            PDF's URI and ``sha256`` its digest); ``file_path`` (else ``doc_id``) names the
            document in error messages.
        parser: overrides the detected ``parser`` id (:data:`PARSER_ID_LAYOUT` /
            :data:`PARSER_ID_OCR`, plus ``@<processor version>`` when the JSON names one).

    Raises:
        ParseError: ``DOCAI_INVALID_JSON``, ``DOCAI_NO_CONTENT``, ``DOCAI_SHARDS_MISSING``,
            ``DOCAI_SHARDS_INCONSISTENT`` or ``TOO_MANY_PAGES``.
    """
    where = file_path or doc_id
    name = _short(where)
    docs = _shard_list(doc, name, where)
    layout, pages, base, version = _read_pages(docs, name, where)
    _require_text(pages, layout, docs, name, where)
    return DocumentBundle(
        doc_id=doc_id,
        file_path=file_path,
        sha256=sha256,
        total_pages=len(pages),
        processing_timestamp=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        parser=parser if parser is not None else (f"{base}@{version}" if version else base),
        pages=pages,
    )


def _shard_list(doc: object, name: str, where: str) -> list[dict[str, object]]:
    """The shards of one document as unwrapped Document objects (one dict is one shard)."""
    if isinstance(doc, dict):
        docs = [doc]
    elif isinstance(doc, list | tuple):
        docs = list(doc)
    else:
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name}: expected a Document AI Document (a JSON object) or a list of its shards, got "
            f"{type(doc).__name__}; pass the JSON that Document AI wrote (load it with load_docai_output)",
            where,
        )
    if not docs:
        raise ParseError(
            DOCAI_NO_CONTENT,
            f"{name}: no Document AI output was given (an empty list of shards); point at the JSON "
            f"file or the folder Document AI wrote for this document",
            where,
        )
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise ParseError(
                DOCAI_INVALID_JSON,
                f"{name}: shard #{i} is a JSON {type(d).__name__}, not a Document object; pass the "
                f"JSON files Document AI wrote, unchanged",
                where,
            )
    return [_unwrap(d) for d in docs]


def _read_pages(docs: list[dict[str, object]], name: str,
                where: str) -> tuple[bool, list[Page], str, str]:
    """(Layout Parser output?, the pages, the parser id, the processor version) of the shards; a
    malformed Document is ``DOCAI_INVALID_JSON``."""
    try:
        shards = _order_shards(docs, name, where)
        layout = any(_blocks_of(s) for s in shards)
        if layout:
            pages, base = _pages_from_layout(shards, name, where), PARSER_ID_LAYOUT
        else:
            pages, base = _pages_from_ocr(shards, name, where), PARSER_ID_OCR
        return layout, pages, base, _processor_version(shards)
    except _Invalid as exc:
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name} is not a valid Document AI Document ({exc}); pass the JSON Document AI wrote, "
            f"unchanged (Document.to_json / the batch output files)",
            where,
        ) from exc
    except RecursionError as exc:
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name}: its layout blocks are nested too deeply to walk; this is not a Document AI "
            f"Layout Parser output as written by the service",
            where,
        ) from exc


def _require_text(pages: list[Page], layout: bool, shards: list[dict[str, object]], name: str, where: str) -> None:
    """``DOCAI_NO_CONTENT`` when no page holds text, naming why (OCR pages pointing into a missing
    ``Document.text``, or a blank / unreadable document)."""
    if any(p.text.strip() for p in pages):
        return
    if not layout and pages and not any(_str(s, "text") for s in shards):
        raise ParseError(
            DOCAI_NO_CONTENT,
            f"{name}: its {len(pages)} page(s) point into Document.text, which is missing or empty "
            f"(an output saved without its text, e.g. by a Splitter or Classifier); process the PDF "
            f"with the Layout Parser or Enterprise OCR and convert that output",
            where,
        )
    kind = "Layout Parser blocks" if layout else "OCR pages"
    raise ParseError(
        DOCAI_NO_CONTENT,
        f"{name}: the Document AI output holds no text ({kind}, {len(pages)} page(s), all empty); "
        f"the document may be blank or an image Document AI could not read: check the source PDF, "
        f"or reprocess it with the Layout Parser or Enterprise OCR",
        where,
    )


# =========================================================================== proto3 JSON access


@functools.cache
def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


def _get(obj: object, camel: str) -> object:
    """Field ``camel`` of a JSON object, under its camelCase or snake_case name (``type`` also as
    proto-plus's ``type_``); None when absent or when ``obj`` is not an object."""
    if not isinstance(obj, dict):
        return None
    v = obj.get(camel)
    if v is None:
        snake = _snake(camel)
        if snake != camel:
            v = obj.get(snake)
        if v is None and camel == "type":
            v = obj.get("type_")
    return v


def _list(obj: object, camel: str) -> list[object]:
    v = _get(obj, camel)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Invalid(f"{camel} is a JSON {type(v).__name__}, expected a list")
    return v


def _obj(obj: object, camel: str) -> dict[str, object]:
    v = _get(obj, camel)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Invalid(f"{camel} is a JSON {type(v).__name__}, expected an object")
    return v


def _str(obj: object, camel: str) -> str:
    v = _get(obj, camel)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _Invalid(f"{camel} is a JSON {type(v).__name__}, expected a string")
    return v


def _int(obj: object, camel: str) -> int | None:
    """An int64/int32 field: a number or (proto3 JSON int64) a decimal string; None if absent."""
    v = _get(obj, camel)
    if v is None:
        return None
    if isinstance(v, bool):
        raise _Invalid(f"{camel} is a boolean, expected an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise _Invalid(f"{camel} is {type(v).__name__} {str(v)[:20]!r}, expected an integer")


def _unwrap(d: dict[str, object]) -> dict[str, object]:
    """A ProcessResponse (``{"document": {...}, "humanReviewStatus": ...}``) → its Document."""
    inner = d.get("document")
    if isinstance(inner, dict) and not any(k in d for k in ("text", "pages", "documentLayout", "document_layout")):
        return inner
    return d


def _clean(s: str) -> str:
    """Document AI text → clean text: CR/CRLF → LF, tab → space, no control characters, NFC, no
    trailing spaces on a line, no leading/trailing blank lines."""
    if not s:
        return ""
    s = s.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    s = _CONTROL_RE.sub("", s)
    s = unicodedata.normalize("NFC", s)
    if " \n" in s or s.endswith(" "):
        s = "\n".join(line.rstrip() for line in s.split("\n"))
    return s.strip()


def _short(where: str) -> str:
    """The last path component of a path or URI (for messages), or the whole string."""
    tail = where.rstrip("/").rsplit("/", 1)[-1]
    return tail or where


# =========================================================================== shards


def _order_shards(docs: list[dict[str, object]], name: str, where: str) -> list[dict[str, object]]:
    """The shards in ``shardIndex`` order, after checking that they are all there and belong together."""
    infos = []
    for d in docs:
        info = _obj(d, "shardInfo")
        count = _int(info, "shardCount") or 0
        index = _int(info, "shardIndex") or 0
        if count < 0 or index < 0:
            raise _Invalid(f"negative shardInfo (shardIndex {index}, shardCount {count})")
        infos.append((index, count))
    counts = {c for _, c in infos}
    if len(docs) == 1:
        index, count = infos[0]
        if count > 1:
            missing = [i for i in range(count) if i != index]
            raise ParseError(
                DOCAI_SHARDS_MISSING,
                f"{name}: shard {index} of {count} was given alone; shard(s) {_fmt(missing)} are missing. "
                f"Pass the whole output folder of this document (every <name>-<n>.json Document AI wrote)",
                where,
            )
        return docs
    if 0 in counts or 1 in counts:
        raise ParseError(
            DOCAI_SHARDS_INCONSISTENT,
            f"{name}: {len(docs)} JSON documents were given but not all are shards of one document "
            f"(shardInfo.shardCount missing or 1); convert each document's output on its own",
            where,
        )
    if len(counts) > 1:
        raise ParseError(
            DOCAI_SHARDS_INCONSISTENT,
            f"{name}: the shards disagree on shardInfo.shardCount ({_fmt(sorted(counts))}): they come from "
            f"different documents or operations; pass only the files of one document's output folder",
            where,
        )
    _check_indices([i for i, _ in infos], counts.pop(), name, where)
    order = sorted(range(len(docs)), key=lambda k: infos[k][0])
    return [docs[k] for k in order]


def _check_indices(indices: list[int], count: int, name: str, where: str) -> None:
    """Each of the ``count`` shard indices given exactly once, none beyond ``count``."""
    dupes = sorted({i for i in indices if indices.count(i) > 1})
    if dupes:
        raise ParseError(
            DOCAI_SHARDS_INCONSISTENT,
            f"{name}: shard index(es) {_fmt(dupes)} appear more than once; the folder mixes outputs of "
            f"several operations: keep one operation's files",
            where,
        )
    beyond = sorted(i for i in indices if i >= count)
    if beyond:
        raise ParseError(
            DOCAI_SHARDS_INCONSISTENT,
            f"{name}: shard index(es) {_fmt(beyond)} are beyond shardCount {count}; the files do not belong "
            f"together: keep one operation's output folder",
            where,
        )
    missing = sorted(set(range(count)) - set(indices))
    if missing:
        raise ParseError(
            DOCAI_SHARDS_MISSING,
            f"{name}: shardCount is {count} but only {len(indices)} shard(s) were given; shard(s) "
            f"{_fmt(missing)} are missing. Copy the whole output folder of this document "
            f"(<name>-0.json … <name>-{count - 1}.json) and convert again",
            where,
        )


def _fmt(xs: list[int]) -> str:
    return ", ".join(str(x) for x in xs)


def _processor_version(shards: list[dict[str, object]]) -> str:
    for s in shards:
        for rev in _list(s, "revisions"):
            m = _VERSION_RE.search(_str(rev, "processor"))
            if m:
                return m.group(1)
    return ""


def _check_pages(n: int, name: str, where: str) -> None:
    if n > MAX_PAGES:
        raise ParseError(
            TOO_MANY_PAGES,
            f"{name}: the Document AI output spans {n} pages, over the limit of {MAX_PAGES} pages per "
            f"document; split the PDF into parts of at most {MAX_PAGES} pages and process each",
            where,
        )


def _make_pages(total: int, texts: dict[int, list[str]], kinds: dict[int, list[str]],
                tables: set[int], page_text: dict[int, str] | None = None) -> list[Page]:
    pages = []
    for n in range(1, total + 1):
        paras = texts.get(n, [])
        text = page_text[n] if page_text is not None and n in page_text else "\n\n".join(paras)
        pages.append(Page(page_num=n, text=text, paragraphs=paras,
                          layout_metadata=LayoutMetadata(block_types=kinds.get(n, []), has_tables=n in tables)))
    return pages


# =========================================================================== Layout Parser


def _blocks_of(d: dict[str, object]) -> list[object]:
    return _list(_obj(d, "documentLayout"), "blocks")


@dataclass
class _Piece:
    page: int
    kind: str
    text: str


@dataclass
class _LayoutWalk:
    name: str
    where: str
    pieces: list[_Piece] = field(default_factory=list)
    max_page: int = 0
    table_pages: set[int] = field(default_factory=set)

    def span(self, block: object, default: int) -> tuple[int, int]:
        """(first, last) page of a block; see the module docstring for omitted values."""
        ps = _obj(block, "pageSpan")
        start = _int(ps, "pageStart") or 0
        end = _int(ps, "pageEnd") or 0
        if start < 1:
            start = min(default, end) if end >= 1 else default
        end = max(end, start)
        _check_pages(end, self.name, self.where)  # before a bad pageEnd allocates anything
        self.max_page = max(self.max_page, end)
        return start, end

    def walk(self, blocks: list[object], page: int, out: list[_Piece]) -> None:
        """Append the pieces of ``blocks`` (depth first, document order) to ``out``."""
        for block in blocks:
            if not isinstance(block, dict):
                raise _Invalid(f"a layout block is a JSON {type(block).__name__}, expected an object")
            start, end = self.span(block, page)
            n0 = len(out)
            text_block = _get(block, "textBlock")
            if text_block is not None:
                if not isinstance(text_block, dict):
                    raise _Invalid("textBlock is not an object")
                text = _piece_text(_str(text_block, "text"))
                if text:
                    out.append(_Piece(start, _str(text_block, "type") or "paragraph", text))
                self.walk(_list(text_block, "blocks"), start, out)
            elif _get(block, "tableBlock") is not None:
                self.table(_obj(block, "tableBlock"), start, end, out)
            elif _get(block, "listBlock") is not None:
                self.list_block(_obj(block, "listBlock"), start, out)
            elif _get(block, "imageBlock") is not None:
                text = _piece_text(_str(_obj(block, "imageBlock"), "imageText"))
                if text:
                    out.append(_Piece(start, "image", text))
            # the next block without a span follows the last page seen in reading order
            page = out[-1].page if len(out) > n0 else start

    def table(self, table: dict[str, object], start: int, end: int, out: list[_Piece]) -> None:
        """One ``table`` piece per page the table's rows are on (cells ``" | "``, rows by newline)."""
        self.table_pages.update(range(start, end + 1))
        caption = _piece_text(_str(table, "caption"))
        if caption:
            out.append(_Piece(start, "caption", caption))
        pieces: list[_Piece] = []
        for row in _list(table, "headerRows") + _list(table, "bodyRows"):
            cells: list[str] = []
            row_page = None
            for cell in _list(row, "cells"):
                sub: list[_Piece] = []
                self.walk(_list(cell, "blocks"), start if row_page is None else row_page, sub)
                if sub and row_page is None:
                    row_page = sub[0].page
                cells.append(" ".join(" ".join(p.text.split()) for p in sub))
            if not any(cells):
                continue
            row_page = row_page or start
            line = " | ".join(cells)
            self.table_pages.add(row_page)
            if pieces and pieces[-1].page == row_page:
                pieces[-1].text += "\n" + line
            else:
                pieces.append(_Piece(row_page, "table", line))
        out.extend(pieces)

    def list_block(self, lst: dict[str, object], page: int, out: list[_Piece]) -> None:
        """One ``list_item`` piece per entry (per page, if an entry crosses a page break); tables
        and nested lists inside an entry keep their own pieces."""
        for entry in _list(lst, "listEntries"):
            sub: list[_Piece] = []
            self.walk(_list(entry, "blocks"), page, sub)
            own: _Piece | None = None  # this entry's item being filled
            for p in sub:
                if p.kind in _OWN_PIECE_KINDS:
                    out.append(p)
                    own = None
                elif own is not None and own.page == p.page:
                    own.text += " " + p.text
                else:
                    own = _Piece(p.page, "list_item", p.text)
                    out.append(own)
            if sub:
                page = sub[-1].page


def _piece_text(s: str) -> str:
    s = _clean(s)
    return _BLANK_LINES_RE.sub("\n", s) if "\n\n" in s else s


def _pages_from_layout(shards: list[dict[str, object]], name: str, where: str) -> list[Page]:
    walk = _LayoutWalk(name, where)
    page = 1
    for s in shards:
        blocks = _blocks_of(s)
        walk.walk(blocks, page, walk.pieces)
        if walk.pieces:
            page = walk.pieces[-1].page
        for chunk in _list(_obj(s, "chunkedDocument"), "chunks"):
            walk.span(chunk, 1)
    total = max([walk.max_page, *(p.page for p in walk.pieces)])
    for s in shards:  # a Layout Parser output that also carries pages[]
        total = max([total, len(_list(s, "pages")), *((_int(p, "pageNumber") or 0) for p in _list(s, "pages"))])
    _check_pages(total, name, where)
    texts: dict[int, list[str]] = {}
    kinds: dict[int, list[str]] = {}
    for p in walk.pieces:
        texts.setdefault(p.page, []).append(p.text)
        kinds.setdefault(p.page, []).append(p.kind)
    return _make_pages(total, texts, kinds, walk.table_pages)


# =========================================================================== OCR (text + pages)


def _shard_text(shards: list[dict[str, object]], name: str, where: str) -> tuple[list[int], str]:
    """(each shard's offset in the whole text, the whole ``Document.text``), checking each shard's
    declared ``textOffset`` against the text of the shards before it."""
    texts: list[str] = []
    offsets: list[int] = []
    cum = 0
    for s in shards:
        t = _str(s, "text")
        declared = _int(_obj(s, "shardInfo"), "textOffset")
        if len(shards) > 1 and declared is not None and declared != cum:
            raise ParseError(
                DOCAI_SHARDS_INCONSISTENT,
                f"{name}: shard {_int(_obj(s, 'shardInfo'), 'shardIndex') or 0} declares textOffset {declared} "
                f"but the shards before it hold {cum} characters of text; a shard was altered or comes from "
                f"another operation: take the whole output folder of one operation again",
                where,
            )
        offsets.append(cum)
        texts.append(t)
        cum += len(t)
    return offsets, "".join(texts)


def _anchor_text(full: str, layout: object, off: int) -> tuple[str | None, list[tuple[int, int]]]:
    """(text, global segments) of a layout's textAnchor into ``full``; text None when there is no anchor."""
    ta = _obj(layout, "textAnchor") if isinstance(layout, dict) else {}
    segs = _list(ta, "textSegments")
    if not segs:
        content = _str(ta, "content")
        return (content if content else None), []
    spans = []
    for seg in segs:
        a = off + max(0, _int(seg, "startIndex") or 0)
        b = off + max(0, _int(seg, "endIndex") or 0)
        if b > a:
            spans.append((a, b))
    return "".join(full[a:b] for a, b in spans), spans


def _pages_from_ocr(shards: list[dict[str, object]], name: str, where: str) -> list[Page]:
    offsets, full = _shard_text(shards, name, where)
    anchor = functools.partial(_anchor_text, full)
    page_paras: dict[int, list[str]] = {}
    page_kinds: dict[int, list[str]] = {}
    page_text: dict[int, str] = {}
    tables: set[int] = set()
    last = 0
    n_pages = sum(len(_list(s, "pages")) for s in shards)
    for s, off in zip(shards, offsets, strict=True):
        for pg in _list(s, "pages"):
            if not isinstance(pg, dict):
                raise _Invalid(f"a page is a JSON {type(pg).__name__}, expected an object")
            num = _int(pg, "pageNumber") or 0
            num = num if num >= 1 else last + 1
            last = max(last, num)
            _check_pages(last, name, where)
            cells: list[tuple[int, int]] = []
            page_tables = _list(pg, "tables")
            for table in page_tables:
                for row in _list(table, "headerRows") + _list(table, "bodyRows"):
                    for cell in _list(row, "cells"):
                        cells += anchor(_get(cell, "layout"), off)[1]
            if page_tables:
                tables.add(num)
            items = _list(pg, "paragraphs") or _list(pg, "blocks") or _list(pg, "lines")
            paras, kinds = page_paras.setdefault(num, []), page_kinds.setdefault(num, [])
            for item in items:
                text, spans = anchor(_get(item, "layout"), off)
                text = _clean(text or "")
                if text:
                    paras.append(text)
                    in_table = any(a < d and c < b for a, b in spans for c, d in cells)
                    kinds.append("table" if in_table else "paragraph")
            own, _ = anchor(_get(pg, "layout"), off)
            if own is not None:
                text = _clean(own)
            elif paras:
                text = "\n".join(paras)
            else:
                text = _clean(full) if n_pages == 1 else ""
            page_text[num] = (page_text[num] + "\n\n" + text).strip() if num in page_text else text
            if not paras and text:
                paras.append(text)
                kinds.append("paragraph")
    if n_pages == 0 and full.strip():  # text without pages: one page
        last = 1
        page_text[1] = _clean(full)
        page_paras[1] = [p for p in (_clean(x) for x in page_text[1].split("\n\n")) if p]
        page_kinds[1] = ["paragraph"] * len(page_paras[1])
    return _make_pages(last, page_paras, page_kinds, tables, page_text)


# =========================================================================== files


def _is_output_path(path: object) -> TypeGuard[OutputPath]:
    return hasattr(path, "iterdir") and hasattr(path, "read_bytes") and hasattr(path, "name")


def _as_pathlike(path: object) -> OutputPath:
    if isinstance(path, str):
        return pathlib.Path(path)
    if _is_output_path(path):
        return path
    if isinstance(path, os.PathLike):
        return pathlib.Path(os.fspath(path))
    raise TypeError(f"expected a path or a pathlib-like object, got {type(path).__name__}")


def _natural_key(name: str) -> list[int | str]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def _output_files(root: OutputPath) -> list[OutputPath]:
    """The JSON file(s) of one output: ``root`` itself, or the ``*.json`` inside the folder ``root``."""
    name = str(root.name)
    if name.lower().endswith(".json"):
        return [root]
    try:
        children = list(root.iterdir())
    except NotADirectoryError:
        return [root]
    except FileNotFoundError as exc:
        raise ParseError(
            UNSUPPORTED,
            f"{name or root}: no such Document AI output file or folder; check the path (a batch "
            f"operation writes <output prefix>/<operation id>/<input index>/<name>-<shard>.json)",
            str(root),
        ) from exc
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED, f"{name or root} could not be listed ({type(exc).__name__}: {exc}); check the "
            f"path and its permissions", str(root),
        ) from exc
    files = sorted((c for c in children if str(c.name).lower().endswith(".json")), key=lambda c: _natural_key(c.name))
    if not files:
        raise ParseError(
            DOCAI_NO_CONTENT,
            f"{name}: the folder holds no .json file; point at the folder Document AI wrote for this "
            f"document (…/<operation id>/<input index>/), or at one of its JSON files",
            str(root),
        )
    prefixes = {m.group("prefix") for m in (_SHARD_NAME_RE.match(c.name) for c in files) if m}
    if len(prefixes) > 1:
        raise ParseError(
            DOCAI_SHARDS_INCONSISTENT,
            f"{name}: the folder holds the outputs of {len(prefixes)} different documents "
            f"({', '.join(sorted(prefixes)[:5])}); convert each document's shards on their own",
            str(root),
        )
    return files


def _size(f: OutputPath) -> int | None:
    stat = getattr(f, "stat", None)  # not every pathlike has one: the read itself is then the check
    if stat is None:
        return None
    try:
        st = stat()
    except Exception:  # noqa: BLE001 - no size available: the read itself is then the check
        return None
    size = getattr(st, "st_size", None)
    if size is None and isinstance(st, dict):
        size = st.get("size")
    return int(size) if size is not None else None


def _read(f: OutputPath) -> bytes:
    size = _size(f)
    if size is not None and size > MAX_DOCAI_JSON_BYTES:  # checked before the read (docverify.storage.limits)
        raise ParseError(
            DOCAI_INVALID_JSON, f"{f.name} has {size} bytes, over the limit of {MAX_DOCAI_JSON_BYTES} for one "
            f"Document AI output shard (docverify.storage.limits.MAX_DOCAI_JSON_BYTES); it was not read", str(f))
    try:
        return f.read_bytes()
    except FileNotFoundError as exc:
        raise ParseError(
            UNSUPPORTED, f"{f.name}: no such Document AI output file; check the path", str(f)
        ) from exc
    except OSError as exc:
        raise ParseError(
            UNSUPPORTED, f"{f.name} could not be read ({type(exc).__name__}: {exc}); check the path and "
            f"its permissions", str(f),
        ) from exc


def _parse_json(data: bytes, f: OutputPath) -> dict[str, object]:
    name = str(f.name)
    if not data.strip():
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name} is empty; the Document AI output was not written completely: download it again "
            f"or reprocess the document",
            str(f),
        )
    if not scan_depth(data, DOCAI_MAX_DEPTH):
        raise ParseError(
            DOCAI_INVALID_JSON, f"{name} nests deeper than {DOCAI_MAX_DEPTH} levels (docverify.storage.limits); it is not "
            f"a Document AI output: download it again or reprocess the document", str(f))
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name} is not valid JSON{where}: {type(exc).__name__}; the file is truncated or not a "
            f"Document AI output: download it again or reprocess the document",
            str(f),
        ) from exc
    if not isinstance(obj, dict):
        raise ParseError(
            DOCAI_INVALID_JSON,
            f"{name} holds a JSON {type(obj).__name__}, not a Document AI Document object; point at the "
            f"JSON files Document AI wrote",
            str(f),
        )
    return obj
