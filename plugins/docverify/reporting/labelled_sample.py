"""The labelled sample of real clinical texts (``text_labeled/combined_sample.jsonl`` in the corpora
folder) as DocumentBundles: what ``docverify evaluate --corpus DIR`` reads to measure the offline
classifier (:func:`docverify.reporting.evaluate.evaluate_labelled_corpus`).

Each record ``{id, corpus, proposed_doc_type, labels, text}`` is one real clinical text with one
label. :func:`to_bundle` cuts its text into pages of about :data:`PAGE_CHARS` characters on
paragraph boundaries, so the page-level code paths (segmentation, page accuracy) run on it. The
benchmarks' corpora (the other labelled files, the committed splits) are read by
``scripts/support/labelled_corpus.py`` on top of this module, so both measure the same thing
(ADR 0053). The product names no corpora folder: the caller passes it. The texts are not
redistributable: nothing here copies them anywhere; callers name records by id only.
"""

from __future__ import annotations

import json
import pathlib
from typing import NotRequired, TypedDict

from docverify.domain.models import DocumentBundle, Page
from docverify.layout.structure import normalise_line

#: The labelled sample, relative to the corpora folder.
SAMPLE = pathlib.Path("text_labeled") / "combined_sample.jsonl"
PAGE_CHARS = 3000
#: A form feed in a record's text is a real page break of its PDF (``forms_real``).
PAGE_BREAK = "\f"


class LabelledRecord(TypedDict):
    """One record of a labelled corpus file (the benchmarks' other corpora are read into this shape
    too); ``labels`` is the corpus's own metadata, passed on as it is."""

    id: str
    corpus: NotRequired[str]
    proposed_doc_type: str
    labels: NotRequired[dict[str, object] | None]
    text: NotRequired[str | None]


class CorpusNotFound(FileNotFoundError):
    """The labelled sample is not where it was looked for."""


def sample_path(location: pathlib.Path | str) -> pathlib.Path:
    """The ``combined_sample.jsonl`` behind ``location``: the file itself, the ``text_labeled``
    folder holding it, or the corpora folder holding ``text_labeled/``."""
    loc = pathlib.Path(location)
    for candidate in (loc, loc / SAMPLE.name, loc / SAMPLE):
        if candidate.is_file():
            return candidate
    raise CorpusNotFound(
        f"no labelled sample at {loc}: pass the corpora folder (holding {SAMPLE.as_posix()}), the "
        f"text_labeled folder, or the .jsonl file itself (DOCVERIFY_CORPORA names the corpora folder)"
    )


def load_records(location: pathlib.Path | str) -> list[LabelledRecord]:
    """The records of the labelled sample (see :func:`sample_path` for ``location``)."""
    path = sample_path(location)
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def split_pages(text: str, page_chars: int = PAGE_CHARS) -> list[str]:
    """Cut ``text`` into pages of about ``page_chars`` characters: at the last paragraph break
    (blank line) of the window, else the last line break, else the last sentence end, else the
    last space (in the window's second half); a text without any becomes one empty page."""
    pages: list[str] = []
    start, n = 0, len(text)
    while start < n:
        if n - start <= page_chars:
            cut = n
        else:
            lo, hi = start + page_chars // 2, start + page_chars
            cut = -1
            for sep in ("\n\n", "\n", ". ", " "):
                i = text.rfind(sep, lo, hi)
                if i > 0:
                    cut = i + len(sep)
                    break
            if cut <= start:
                cut = hi
        page = text[start:cut].strip()
        if page:
            pages.append(page)
        start = cut
    return pages or [""]


def record_pages(text: str, page_chars: int = PAGE_CHARS) -> list[str]:
    """A record's pages: its real pages where the text carries them (form feeds), each cut further by
    :func:`split_pages` when longer than ``page_chars``; else :func:`split_pages` of the whole text."""
    if PAGE_BREAK not in text:
        return split_pages(text, page_chars)
    pages = [p for chunk in text.split(PAGE_BREAK) if chunk.strip() for p in split_pages(chunk, page_chars)]
    return pages or [""]


def text_page(num: int, text: str) -> Page:
    """Page ``num`` of a labelled text as a night holds a PDF's page: each line cleaned as the local parser cleans
    a text layer's (:func:`docverify.layout.structure.normalise_line`: no control characters -- a text layer read
    as UTF-16 bytes holds a NUL between its letters --, no trailing spaces, NFC), paragraphs at blank lines."""
    clean = "\n".join(normalise_line(line) for line in text.split("\n"))
    return Page(page_num=num, text=clean, paragraphs=[p for p in clean.split("\n\n") if p.strip()])


def to_bundle(record: LabelledRecord, page_chars: int = PAGE_CHARS) -> DocumentBundle:
    """One record → a DocumentBundle whose pages come from :func:`record_pages`."""
    texts = record_pages(record.get("text") or "", page_chars)
    return DocumentBundle(
        doc_id=str(record["id"]),
        file_path=f"corpus://{record.get('corpus', '')}/{record['id']}",
        total_pages=len(texts),
        parser="bench:text-split",
        pages=[text_page(i, t) for i, t in enumerate(texts, 1)],
    )
