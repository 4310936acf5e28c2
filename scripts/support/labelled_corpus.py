"""The benchmarks' labelled corpora (test and benchmark support, not shipped: ADR 0053).

The labelled sample itself (records, page cuts, bundles) is read by the product's
:mod:`docverify.reporting.labelled_sample` (``docverify evaluate --corpus``); this module adds what only
the benchmarks and calibration scripts read: ``text_labeled_more``, ``text_labeled_large`` and
``forms_real`` in the sample's shape, and the committed tuning/test splits of ``docs/benchmarks/``.
The texts are not redistributable: nothing here copies them anywhere; callers name records by id only.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable
from typing import Any

from docverify.reporting.labelled_sample import LabelledRecord, load_records

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


def texts_by_type(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The records that hold a text, per label, in id order: the pools the multi-document generators draw from
    (``verifier_bench.multi_docs``, ``bench_classifier.hard_multidocs`` and ``same_type_multidocs``)."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: str(r["id"])):
        if (r.get("text") or "").strip():
            by_type.setdefault(r["proposed_doc_type"], []).append(r)
    return by_type
