"""The labelled real corpus (``text_labeled/combined_sample.jsonl``) as DocumentBundles.

Each record ``{id, corpus, proposed_doc_type, labels, text}`` is one real clinical text with one
label. :func:`to_bundle` cuts its text into pages of about :data:`PAGE_CHARS` characters on
paragraph boundaries, so the page-level code paths (segmentation, page accuracy) run on it.
Shared by ``scripts/bench_classifier.py`` and :func:`docverify.reporting.evaluate.evaluate_labelled_corpus`
so both measure the same thing. The texts are not redistributable: nothing here copies them
anywhere; callers name records by id only.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, NotRequired, TypedDict

from docverify.domain.models import DocumentBundle, Page

#: The labelled sample, relative to the corpora folder.
SAMPLE = pathlib.Path("text_labeled") / "combined_sample.jsonl"
#: The administrative ("Other") and genomic texts added to score the classifier on unseen text
#: (ADR 0011), relative to the corpora folder.
MORE = pathlib.Path("text_labeled_more") / "records.jsonl"
#: The fixed tuning/test split of both (record ids only), relative to the repository.
SPLIT_FILE = pathlib.Path("docs") / "benchmarks" / "classifier_split.json"
#: The larger labelled corpus (clinical notes incl. operative notes, radiology and pathology reports),
#: relative to the corpora folder; its own tuning/test split (record ids only), relative to the repository.
LARGE = pathlib.Path("text_labeled_large") / "records.jsonl"
LARGE_SPLIT_FILE = pathlib.Path("docs") / "benchmarks" / "classifier_split_large.json"
#: Real forms and administrative pages (label Other, a ``kind`` each), relative to the corpora folder; their
#: tuning/test split by source repository (record ids only), relative to the repository.
FORMS = pathlib.Path("forms_real") / "records.jsonl"
FORMS_SPLIT_FILE = pathlib.Path("docs") / "benchmarks" / "forms_split.json"
PAGE_CHARS = 3000
#: A form feed in a record's text is a real page break of its PDF (``forms_real``).
PAGE_BREAK = "\f"


class LabelledRecord(TypedDict):
    """One record of a labelled corpus file (``text_labeled_large``'s in the others' shape: see
    :func:`load_large_records`); ``labels`` is the corpus's own metadata, passed on as it is."""

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


def to_bundle(record: LabelledRecord, page_chars: int = PAGE_CHARS) -> DocumentBundle:
    """One record → a DocumentBundle whose pages come from :func:`record_pages`."""
    texts = record_pages(record.get("text") or "", page_chars)
    return DocumentBundle(
        doc_id=str(record["id"]),
        file_path=f"corpus://{record.get('corpus', '')}/{record['id']}",
        total_pages=len(texts),
        parser="bench:text-split",
        pages=[Page(page_num=i, text=t, paragraphs=[p for p in t.split("\n\n") if p.strip()])
               for i, t in enumerate(texts, 1)],
    )


def load_all_records(corpora: pathlib.Path | str) -> list[LabelledRecord]:
    """The records of ``combined_sample.jsonl`` and, when present, ``text_labeled_more``."""
    records = load_records(corpora)
    more = pathlib.Path(corpora) / MORE
    if more.is_file():
        with more.open(encoding="utf-8") as fh:
            records += [json.loads(line) for line in fh if line.strip()]
    return records


def source_group(record: LabelledRecord) -> str:
    """Records from one source document share a group (the pages of one PDF report, one FHIR
    file; instances of one shared examples file are their own documents)."""
    labels = record.get("labels") or {}
    key = labels.get("report") or labels.get("instance")
    if key:
        return f"{record['corpus']}:{key}"
    if "pdf_page" in labels and labels.get("repo_path"):
        return f"{record['corpus']}:{labels['repo_path']}"
    return f"{record['corpus']}:{record['id']}"


def load_split(repo: pathlib.Path | str) -> dict[str, Any]:
    """The committed split (``docs/benchmarks/classifier_split.json``)."""
    split: dict[str, Any] = json.loads((pathlib.Path(repo) / SPLIT_FILE).read_text(encoding="utf-8"))
    return split


def load_large_records(corpora: pathlib.Path | str) -> list[LabelledRecord]:
    """The records of ``text_labeled_large`` in the shape of the others (``corpus`` = its ``source``,
    ``proposed_doc_type`` = its ``label``, ``labels`` = its ``meta``); [] when the file is absent."""
    return _load_sourced(pathlib.Path(corpora) / LARGE)


def _load_sourced(path: pathlib.Path, *, kind: bool = False) -> list[LabelledRecord]:
    """The records ``{id, source, label, text, meta[, kind]}`` of ``path`` in the shape of the others
    (``corpus`` = ``source``, ``proposed_doc_type`` = ``label``, ``labels`` = ``meta``, with ``kind`` when
    asked); [] when the file is absent."""
    if not path.is_file():
        return []
    out: list[LabelledRecord] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                labels = {**(r.get("meta") or {}), **({"kind": r.get("kind")} if kind else {})}
                out.append({"id": r["id"], "corpus": r["source"], "proposed_doc_type": r["label"],
                            "text": r["text"], "labels": labels})
    return out


def large_stratum(record: LabelledRecord) -> str:
    """The stratum of a ``text_labeled_large`` record for the split: source, label, and the operative
    notes apart from the other clinical notes."""
    note = (record.get("labels") or {}).get("note") or ""
    return f"{record['corpus']}|{record['proposed_doc_type']}|{note}"


def part_records(corpora: pathlib.Path | str, repo: pathlib.Path | str, part: str, *,
                 forms: bool = True) -> list[LabelledRecord]:
    """The records of one part (``tune`` or ``test``) of the committed splits, in split order: the
    first split's ids, then ``text_labeled_large``'s, then ``forms_real``'s unless ``forms`` is False
    (absent records are skipped)."""
    old = {str(r["id"]): r for r in load_all_records(corpora)}
    large = {r["id"]: r for r in load_large_records(corpora)}
    records = [old[i] for i in load_split(repo)[part] if i in old]
    if large:
        records += [large[i] for i in load_large_split(repo)[part] if i in large]
    if forms:
        by_id = {r["id"]: r for r in load_forms_records(corpora)}
        if by_id:
            records += [by_id[i] for i in load_forms_split(repo)[part] if i in by_id]
    return records


def load_forms_records(corpora: pathlib.Path | str) -> list[LabelledRecord]:
    """The records of ``forms_real`` in the shape of the others (``corpus`` = its ``source``,
    ``proposed_doc_type`` = its ``label``, ``labels`` = its ``meta`` with its ``kind``; the text keeps its
    form feeds between real pages); [] when the file is absent."""
    return _load_sourced(pathlib.Path(corpora) / FORMS, kind=True)


def forms_stratum(source_kinds: list[str]) -> str:
    """The stratum of a ``forms_real`` source for the split, by the kinds of its records: ``business``
    (mostly business forms), ``research_consent`` (consent forms only), else ``clinic`` (intake,
    registration, release, questionnaires, benefit applications)."""
    if sum(k == "business_form" for k in source_kinds) * 2 > len(source_kinds):
        return "business"
    if all(k == "consent" for k in source_kinds):
        return "research_consent"
    return "clinic"


def load_forms_split(repo: pathlib.Path | str) -> dict[str, Any]:
    """The committed split of ``forms_real`` by source (``docs/benchmarks/forms_split.json``)."""
    split: dict[str, Any] = json.loads((pathlib.Path(repo) / FORMS_SPLIT_FILE).read_text(encoding="utf-8"))
    return split


def load_large_split(repo: pathlib.Path | str) -> dict[str, Any]:
    """The committed split of ``text_labeled_large`` (``docs/benchmarks/classifier_split_large.json``)."""
    split: dict[str, Any] = json.loads((pathlib.Path(repo) / LARGE_SPLIT_FILE).read_text(encoding="utf-8"))
    return split
