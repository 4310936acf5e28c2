"""The verifier benchmark's parts: gold classifications are valid and correct, every error class
injects its error (and only where it applies), and a small run on real documents measures what it
says. The full figures come from scripts/bench_verifiers.py (docs/benchmarks/verifiers.md)."""

from __future__ import annotations

import asyncio
import random

import pytest
from scripts import verifier_bench as vb
from scripts.support.examples import GENOMIC_P1, GENOMIC_P2, NOTE_P3

from docverify.domain.models import ClassificationOutput
from docverify.judging.judges import OfflineJudge
from docverify.verify import v1_schema

RADIOLOGY = ("CHEST RADIOGRAPH, TWO VIEWS\nCOMPARISON: None.\nFINDINGS: The left lung is clear. No pleural effusion "
             "or pneumothorax. Heart size 12.5 cm, within normal limits.\nIMPRESSION: No acute cardiopulmonary "
             "process.")


def _doc() -> vb.BenchDoc:
    pages = [GENOMIC_P1, GENOMIC_P2, RADIOLOGY, NOTE_P3]
    truth = [vb.TruthSegment("Genomic Report", 1, 2), vb.TruthSegment("Radiology Report", 3, 3),
             vb.TruthSegment("Clinical Note", 4, 4)]
    return vb.BenchDoc(vb._bundle("bench-doc", pages, "test"), truth, ["a", "b", "c"])


def _other() -> vb.BenchDoc:
    text = ("PRIOR AUTHORIZATION REQUEST FORM\nMember name and insurance policy number on file.\n"
            "Requested service: outpatient physical therapy, 12 visits.\nProvider signature and date required.")
    return vb.BenchDoc(vb._bundle("bench-other", [text], "test"), [vb.TruthSegment("Other", 1, 1)], ["d"])


def test_gold_is_valid_complete_and_true_to_the_labels():
    doc = _doc()
    gold = vb.gold_classification(doc)
    cls = ClassificationOutput.model_validate(gold)
    assert v1_schema.check(doc.bundle, cls) == []
    assert [(s.dominant_type, s.page_start, s.page_end) for s in cls.segments] == [
        ("Genomic Report", 1, 2), ("Radiology Report", 3, 3), ("Clinical Note", 4, 4)]
    for seg in cls.segments:
        for tc in seg.classifications:
            for ev in tc.top_evidence:  # quoted verbatim from the cited page
                assert " ".join(ev.snippet.split()) in " ".join(doc.bundle.pages[ev.page - 1].text.split())


def test_gold_is_accepted_by_the_offline_verifiers():
    from tests.docverify.run_sync import verify_document_sync

    doc = _doc()
    assert verify_document_sync(doc.bundle, vb.gold_classification(doc), OfflineJudge()).final_decision == "AUTO_ACCEPT"


@pytest.mark.parametrize("ec", vb.CATALOGUE, ids=[e.name for e in vb.CATALOGUE])
def test_every_error_class_changes_the_gold_where_it_applies(ec):
    docs = [_doc(), _other()]
    applied = 0
    for doc in docs:
        gold = vb.gold_classification(doc)
        inj = ec.inject(doc, gold, random.Random(1), docs)
        if inj is None:
            continue
        applied += 1
        assert inj.classification != gold or inj.bundle != doc.bundle, ec.name
        assert gold == vb.gold_classification(doc), "the gold must not be modified in place"
    assert applied, f"{ec.name} applied to none of the test documents"


@pytest.mark.parametrize("mutate,line,changed", [
    (vb._change_number, "Heart size 12.5 cm", True),
    (vb._flip_negation, "No pleural effusion or pneumothorax.", True),
    (vb._add_negation, "The exam shows a small nodule.", True),
    (vb._swap_laterality, "The left lung is clear.", True),
    (vb._swap_laterality, "The lungs are clear.", False),
])
def test_mutators_change_exactly_what_they_name(mutate, line, changed):
    out = mutate(line, random.Random(3))
    assert (out is not None and out != line) == changed
    if mutate is vb._swap_laterality and changed:
        assert out == "The right lung is clear."


def test_caught_means_escalated_or_fixed():
    """Shares that do not sum to 1 are fixed and accepted (caught: the output no longer carries
    them); a changed number is escalated; the gold is accepted and flagged by nothing."""
    doc = _doc()
    cases = [(doc, k, inj) for d, k, inj in vb.build_cases([doc], seed=5)
             if k in ("gold", "shares_not_summing", "number_changed")]
    results = {r.kind: r for r in asyncio.run(vb.run_cases(cases, OfflineJudge()))}
    assert results["gold"].final_decision == "AUTO_ACCEPT" and not results["gold"].flagged
    assert results["shares_not_summing"].final_decision == "AUTO_ACCEPT" and results["shares_not_summing"].caught
    assert results["number_changed"].final_decision == "ESCALATE_TO_SME" and results["number_changed"].caught


@pytest.mark.slow
def test_a_small_run_on_real_documents(corpora_dir, repo_dir):
    """Ten documents of the test part: the summary counts every case once and the gold of real
    texts builds (the figures themselves are the benchmark's)."""
    from scripts.support.labelled_corpus import load_all_records, load_split

    records = load_all_records(corpora_dir)
    test_ids = set(load_split(repo_dir)["test"])
    docs = vb.single_docs([r for r in records if r["id"] in test_ids][:8]) + vb.multi_docs(
        [r for r in records if r["id"] in test_ids], 2, seed=1)
    cases = vb.build_cases(docs, seed=1)
    results = asyncio.run(vb.run_cases(cases, OfflineJudge()))
    fig = vb.summarise(results)
    assert sum(c.n for c in fig["classes"]) + sum(g["n"] for g in fig["correct"].values()) == len(cases)
    assert fig["correct"]["gold"]["n"] == len(docs)
    assert {c.name for c in fig["classes"] if c.n} >= {"number_changed", "documents_merged", "segment_type_swapped"}


def _script(repo_dir):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_verifiers_for_test", repo_dir / "scripts" / "bench_verifiers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_script_measures_an_llm_endpoint_with_model(repo_dir, corpora_dir, capsys):
    """``--model`` runs every judgment on a pydantic-ai model (here pydantic-ai's TestModel, which
    answers schema-valid nonsense: the report counts its LLM calls and does not write the docs)."""
    import json

    mod = _script(repo_dir)
    before = (repo_dir / "docs" / "benchmarks" / "verifiers.md").stat().st_mtime
    assert mod.main(["--corpora", str(corpora_dir), "--part", "test", "--limit", "2", "--multi", "0",
                     "--model", "test", "--json"]) == 0
    [part] = json.loads(capsys.readouterr().out)
    assert part["part"] == "test" and part["documents"] == 2
    assert sum(c["llm_calls"] for c in part["classes"]) > 0
    assert (repo_dir / "docs" / "benchmarks" / "verifiers.md").stat().st_mtime == before
