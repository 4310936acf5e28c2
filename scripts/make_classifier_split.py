"""Split the labelled texts once into a tuning part and a test part (fixed seed).

    python scripts/make_classifier_split.py [--corpora DIR]

Reads ``text_labeled/combined_sample.jsonl`` and ``text_labeled_more/records.jsonl`` and writes
``docs/benchmarks/classifier_split.json`` (and ``text_labeled_large`` → ``classifier_split_large.json``,
``forms_real`` → ``forms_split.json``, by source repository): record ids only (the texts are not redistributable).
Records that come from one source document (the pages of one PDF, the instances of one
FHIR file of a report) share a group and land on the same side; each corpus × type is split
half/half over its groups with ``random.Random(SEED)``. The classifier's lexicon and thresholds
are tuned on ``tune`` only; ``scripts/bench_classifier.py`` reports both parts.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
from collections import defaultdict

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

from scripts.support.labelled_corpus import (  # noqa: E402
    FORMS,
    FORMS_SPLIT_FILE,
    LARGE,
    LARGE_SPLIT_FILE,
    MORE,
    SPLIT_FILE,
    forms_stratum,
    large_stratum,
    load_all_records,
    load_forms_records,
    load_large_records,
    source_group,
)

SEED = 13


def halves(by_stratum: dict, seed: int = SEED) -> tuple[list[str], list[str]]:
    """Each stratum's groups (stratum → group → record ids) shuffled with one ``random.Random(seed)`` and
    cut in half: the first half (rounded up) to the tuning part, the rest to the test part."""
    rng = random.Random(seed)
    tune: list[str] = []
    test: list[str] = []
    for key in sorted(by_stratum):
        groups = sorted(by_stratum[key])
        rng.shuffle(groups)
        half = (len(groups) + 1) // 2
        for i, g in enumerate(groups):
            (tune if i < half else test).extend(sorted(by_stratum[key][g]))
    return sorted(tune), sorted(test)


def make_split(records: list[dict]) -> dict:
    by_stratum: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_stratum[(r["corpus"], r["proposed_doc_type"])][source_group(r)].append(r["id"])
    tune, test = halves(by_stratum)
    return {"seed": SEED, "made_by": "scripts/make_classifier_split.py",
            "sources": ["text_labeled/combined_sample.jsonl", MORE.as_posix()], "tune": tune, "test": test}


def make_large_split(records: list[dict]) -> dict:
    """``text_labeled_large``: each record its own group (one TCGA report per patient already), split
    half/half per stratum (source × label × operative note or not) by :func:`halves` with its own
    generator, so the first split above is unchanged by it."""
    by_stratum: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for r in records:
        by_stratum[large_stratum(r)][r["id"]] = [r["id"]]
    tune, test = halves(by_stratum)
    return {"seed": SEED, "made_by": "scripts/make_classifier_split.py", "sources": [LARGE.as_posix()],
            "tune": tune, "test": test}


def make_forms_split(records: list[dict]) -> dict:
    """``forms_real``: by source repository — every form of one repository on one side, so the test part's
    clinics, agencies and tax forms are ones the tuning never saw — half/half per stratum
    (:func:`~scripts.support.labelled_corpus.forms_stratum`) by :func:`halves` with its own generator."""
    kinds: dict[str, list[str]] = defaultdict(list)
    for r in records:
        kinds[r["corpus"]].append(str((r.get("labels") or {}).get("kind")))
    by_stratum: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_stratum[forms_stratum(kinds[r["corpus"]])][r["corpus"]].append(r["id"])
    tune, test = halves(by_stratum)
    return {"seed": SEED, "made_by": "scripts/make_classifier_split.py", "sources": [FORMS.as_posix()],
            "grouped_by": "source", "tune": tune, "test": test}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=pathlib.Path, default=None)
    args = ap.parse_args(argv)
    from scripts.support.corpora import default_corpora_dir

    corpora = args.corpora or default_corpora_dir()
    large, forms = load_large_records(corpora), load_forms_records(corpora)
    splits = [(SPLIT_FILE, make_split(load_all_records(corpora)))]
    splits += [(LARGE_SPLIT_FILE, make_large_split(large))] if large else []
    splits += [(FORMS_SPLIT_FILE, make_forms_split(forms))] if forms else []
    for rel, split in splits:
        out = REPO / rel
        out.write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(REPO)}: tune {len(split['tune'])}, test {len(split['test'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
