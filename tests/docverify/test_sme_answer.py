"""An SME's answer (docverify.sme.answer): the form read into a ReviewAnswer, every rule checked
before anything is sent (a dry run of the correction), and saved — Agree, Correct and Cannot
classify — on packets of a real run of the nightly stages on the sample batch."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.docverify.review_night import run_night
from tests.sample_ids import sid

from docverify.domain.models import DOC_TYPES
from docverify.reporting.evaluate import evaluate_store
from docverify.sme.answer import (
    AGREE,
    CANNOT_CLASSIFY,
    CORRECT,
    UNCLASSIFIABLE_REASONS,
    AnswerRefused,
    ReviewAnswer,
    answer_from_form,
    check_answer,
    page_field,
    page_types,
    parse_segments,
    save_answer,
    segments_from_pages,
)
from docverify.sme.ground_truth import ground_truth_versions, validate_segments
from docverify.sme.packets import load_packet
from docverify.storage.store import ArtifactStore


@pytest.fixture(scope="module")
def night_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("night")
    run_night(root)
    return root


@pytest.fixture
def store(night_root, tmp_path):
    shutil.copytree(night_root, tmp_path / "root")
    return ArtifactStore(tmp_path / "root")


def _written(store) -> list[str]:
    return sorted(p.name for p in (store.root / "ground_truth").glob("gt_*.json")) \
        if (store.root / "ground_truth").exists() else []


def _form(store, doc, option, **fields) -> ReviewAnswer:
    """What the form sends: every page field preset to the classifier's type, with the SME's changes."""
    preset = page_types(load_packet(store, doc))
    params = {page_field(i): t for i, t in enumerate(preset, start=1)}
    params.update(corrected_dominant_type=None, notes="", unclassifiable_reason=None)
    params.update(fields)
    return answer_from_form([option], params, preset)


def test_the_constants():
    assert (AGREE, CORRECT, CANNOT_CLASSIFY) == ("Agree", "Correct", "Cannot classify")
    assert UNCLASSIFIABLE_REASONS == ("unreadable", "wrong file", "needs a re-scan", "other")


# --------------------------------------------------------------------------- the form


def test_the_form_becomes_an_answer(store):
    preset = page_types(load_packet(store, sid("fabricated_evidence")))
    assert len(preset) == 3 and all(t in DOC_TYPES for t in preset)
    a = answer_from_form([AGREE], {page_field(i): t for i, t in enumerate(preset, 1)} | {"notes": "ok"}, preset)
    assert (a.choice, a.page_types, a.corrected_segments, a.notes) == (AGREE, None, None, "ok")  # pages as preset
    changed = [*preset[:2], "Other"]
    a = answer_from_form([CORRECT], {page_field(i): t for i, t in enumerate(changed, 1)}, preset)
    assert a.page_types == changed
    a = answer_from_form([CANNOT_CLASSIFY], {"unclassifiable_reason": "wrong file", "corrected_segments": " "}, [])
    assert (a.unclassifiable_reason, a.corrected_segments) == ("wrong file", None)


@pytest.mark.parametrize("chosen", [[], [AGREE, CORRECT], ["Maybe"]])
def test_exactly_one_known_answer(chosen):
    with pytest.raises(AnswerRefused, match="Choose exactly one answer: Agree, Correct, Cannot classify") as exc:
        answer_from_form(chosen, {}, [])
    assert exc.value.reason == str(exc.value) and isinstance(exc.value, ValueError)


def test_a_value_the_form_does_not_offer_is_refused():
    with pytest.raises(AnswerRefused, match="notes: this field has a value the form does not offer") as exc:
        answer_from_form([CORRECT], {"notes": {"x": 1}}, [])
    assert exc.value.field == "notes"


def test_page_ranges_and_page_types():
    assert parse_segments("1-2 Genomic Report; 3 clinical note") == [
        {"page_start": 1, "page_end": 2, "dominant_type": "Genomic Report"},
        {"page_start": 3, "page_end": 3, "dominant_type": "Clinical Note"}]
    assert parse_segments("  ") is None and parse_segments(None) is None
    assert parse_segments('[{"page_start": 1, "page_end": 1, "dominant_type": "Other"}]')[0]["page_end"] == 1
    assert segments_from_pages(["Other", "Other", "Clinical Note"]) == [
        {"page_start": 1, "page_end": 2, "dominant_type": "Other"},
        {"page_start": 3, "page_end": 3, "dominant_type": "Clinical Note"}]


@pytest.mark.parametrize("raw,match", [
    ("[" * 40_000 + "]" * 40_000, "nested too deeply"),
    ('[{"a": [[[[[1]]]]]}]', "nested too deeply"),
    ("[" + "1" * 5000 + "]", "the JSON cannot be read"),
    ("[{page_start: 1]", r"not valid JSON at character 2"),
    ("x" * 200_000, "too long"),
    ("1-2 Lab Report", "range #1 names no document type"),
    ("1 Other; pages two", "cannot read range #2"),
    ("1-99999999999999 Other", r"Range #1 \(pages 1–99999999999999\) goes beyond the document's last page: "
                               r"no document has more than 500 pages"),
    ("1-" + "9" * 5000 + " Other", r"Range #1 \(pages 1–999999999999…\) goes beyond"),
])
def test_malformed_page_ranges_are_refused_never_crash(raw, match):
    with pytest.raises(AnswerRefused, match=match):
        parse_segments(raw)


def test_huge_page_numbers_name_the_page_count():
    with pytest.raises(AnswerRefused, match=r"the document has 3 page\(s\)"):
        parse_segments("1-99999999999999 Other", total_pages=3)
    for total in (3, 0):  # the writer's own check too, with or without a known page count
        with pytest.raises(ValueError, match="is beyond the document's last page"):
            validate_segments([{"page_start": 1, "page_end": 99999999999999, "dominant_type": "Other"}], total)


# --------------------------------------------------------------------------- the rules


REFUSALS = [
    (sid("fabricated_evidence"), AGREE, {"corrected_dominant_type": "Other"},
     "'Agree' was chosen but a correction was filled in"),
    (sid("fabricated_evidence"), AGREE, {"page_3": "Other"}, "'Agree' was chosen but a correction was filled in"),
    (sid("fabricated_evidence"), AGREE, {"unclassifiable_reason": "unreadable"}, "A reason for 'Cannot classify'"),
    (sid("corrupt_truncated"), AGREE, {}, "There is no classification to agree with"),
    (sid("fabricated_evidence"), CORRECT, {},
     "^Correct needs a change: choose another type for at least one page, or answer Agree$"),
    (sid("fabricated_evidence"), CORRECT, {"page_2": None}, "Every page needs a type: page 2 has none"),
    (sid("corrupt_truncated"), CORRECT, {"corrected_segments": "1-2 Other; 4 Other"},
     "range #2 starts at page 4, .* so it must start at page 3"),
    (sid("corrupt_truncated"), CORRECT, {"corrected_segments": "2-1 Other"}, "range #1 ends at page 1, before"),
    (sid("corrupt_truncated"), CORRECT, {"corrected_segments": "1-99999999999999 Other"},
     "goes beyond the document's last page"),
    (sid("corrupt_truncated"), CORRECT, {"corrected_segments": "[" * 50_000}, "nested too deeply"),
    (sid("corrupt_truncated"), CORRECT, {"corrected_segments": '[{"page_start": 1}]'}, "range #1 needs exactly"),
    (sid("fabricated_evidence"), CORRECT, {"corrected_dominant_type": "Radiology Report", "page_3": "Other"},
     "The corrected dominant type Radiology Report is the type of no page"),
    (sid("corrupt_truncated"), CANNOT_CLASSIFY, {}, "'Cannot classify' needs a reason: choose one of unreadable"),
    (sid("corrupt_truncated"), CANNOT_CLASSIFY, {"unclassifiable_reason": "other"}, "With the reason 'other'"),
    (sid("corrupt_truncated"), CANNOT_CLASSIFY, {"unclassifiable_reason": "bored"}, "needs a reason"),
    (sid("fabricated_evidence"), CANNOT_CLASSIFY, {"unclassifiable_reason": "unreadable", "page_1": "Other"},
     "'Cannot classify' was chosen but a correction was filled in"),
]


@pytest.mark.parametrize("doc,option,fields,match", REFUSALS)
def test_check_and_save_refuse_alike_and_write_nothing(store, doc, option, fields, match):
    answer = _form(store, doc, option, **fields)
    with pytest.raises(AnswerRefused, match=match) as checked:
        check_answer(store, doc, answer)
    with pytest.raises(AnswerRefused) as saved:
        save_answer(store, doc, answer, reviewer="dr.a")
    assert saved.value.reason == checked.value.reason
    assert _written(store) == [] and load_packet(store, doc).review_status == "pending"


def test_a_correction_that_changes_nothing_is_refused_after_the_dry_run(store):
    primary_type = load_packet(store, sid("quest_cbc_panel")).primary_classification["dominant_type_overall"]
    answer = _form(store, sid("quest_cbc_panel"), CORRECT, corrected_dominant_type=primary_type)
    with pytest.raises(AnswerRefused, match="^Correct needs a change"):
        check_answer(store, sid("quest_cbc_panel"), answer)


def test_check_answer_is_a_dry_run_of_what_save_answer_writes(store):
    answer = _form(store, sid("fabricated_evidence"), CORRECT, page_3="Other", notes="page 3 is a cover letter")
    changes = check_answer(store, sid("fabricated_evidence"), answer)
    assert changes and _written(store) == []
    record, uri = save_answer(store, sid("fabricated_evidence"), answer, reviewer="dr.a", channel="workspace")
    assert record.ground_truth_source == "SME_CORRECTED" and record.corrections_applied == changes
    assert [(s["page_start"], s["page_end"], s["dominant_type"]) for s in
            record.ground_truth_classification["segments"]][-1] == (3, 3, "Other")
    assert record.correction_notes == "page 3 is a cover letter" and uri.endswith(".json")


def test_agree_and_page_ranges_on_an_unreadable_document(store):
    assert check_answer(store, sid("quest_cbc_panel"), _form(store, sid("quest_cbc_panel"), AGREE)) == []
    record, _ = save_answer(store, sid("quest_cbc_panel"), _form(store, sid("quest_cbc_panel"), AGREE), reviewer="dr.a")
    assert record.ground_truth_source == "SME_VALIDATED"
    answer = _form(store, sid("corrupt_truncated"), CORRECT, corrected_segments="1-2 Clinical Note; 3 Other")
    record, _ = save_answer(store, sid("corrupt_truncated"), answer, reviewer="dr.b")
    assert [s["dominant_type"] for s in record.ground_truth_classification["segments"]] == ["Clinical Note", "Other"]


def test_cannot_classify_is_a_version_of_its_own_and_counted_apart(store):
    answer = _form(store, sid("corrupt_truncated"), CANNOT_CLASSIFY, unclassifiable_reason="needs a re-scan",
                   notes="pages cut off")
    assert check_answer(store, sid("corrupt_truncated"), answer) == []
    record, uri = save_answer(store, sid("corrupt_truncated"), answer, reviewer="dr.a", reviewed_at="2026-11-22T10:00:00Z",
                              channel="workspace")
    assert (record.ground_truth_source, record.ground_truth_classification, record.unclassifiable_reason,
            record.correction_notes, record.version) == ("SME_UNCLASSIFIABLE", None, "needs a re-scan",
                                                         "pages cut off", 1)
    packet = load_packet(store, sid("corrupt_truncated"))
    assert (packet.review_status, packet.ground_truth_version, packet.ground_truth_path) == ("reviewed", 1, uri)
    # a later answer is a new version; the figures count the document apart, never as right or wrong
    other = _form(store, sid("corrupt_truncated"), CANNOT_CLASSIFY, unclassifiable_reason="other", notes="a fax cover")
    assert save_answer(store, sid("corrupt_truncated"), other, reviewer="dr.b")[0].version == 2
    assert [r.unclassifiable_reason for r in ground_truth_versions(store, sid("corrupt_truncated"))] == [
        "needs a re-scan", "other"]
    f = evaluate_store(store)
    assert (f.n_reviewed, f.n_unclassifiable, f.n_primary_missing) == (1, 1, 0)
    assert [(sid("corrupt_truncated") in u.doc_id, u.reason) for u in f.unclassifiable] == [(True, "other")]


def test_save_answer_needs_a_reviewer(store):
    with pytest.raises(AnswerRefused, match="no reviewer"):
        save_answer(store, sid("quest_cbc_panel"), _form(store, sid("quest_cbc_panel"), AGREE), reviewer=" ")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choice=st.sampled_from([AGREE, CORRECT, CANNOT_CLASSIFY]),
       pages=st.lists(st.sampled_from([None, *DOC_TYPES]), min_size=3, max_size=3),
       dominant=st.sampled_from([None, *DOC_TYPES]), reason=st.sampled_from([None, *UNCLASSIFIABLE_REASONS]),
       notes=st.sampled_from(["", "why"]))
def test_check_answer_refuses_exactly_what_save_answer_refuses(night_root, tmp_path_factory, choice, pages,
                                                                dominant, reason, notes):
    root = tmp_path_factory.mktemp("copy") / "root"
    shutil.copytree(night_root, root)
    store = ArtifactStore(root)
    answer = _form(store, sid("fabricated_evidence"), choice, corrected_dominant_type=dominant,
                   unclassifiable_reason=reason, notes=notes,
                   **{page_field(i): t for i, t in enumerate(pages, start=1)})
    try:
        changes = check_answer(store, sid("fabricated_evidence"), answer)
    except AnswerRefused as refused:
        with pytest.raises(AnswerRefused) as saved:
            save_answer(store, sid("fabricated_evidence"), answer, reviewer="dr.h")
        assert saved.value.reason == refused.reason and _written(store) == []
        return
    record, _ = save_answer(store, sid("fabricated_evidence"), answer, reviewer="dr.h")
    assert record.corrections_applied == changes
    assert record.ground_truth_source == {AGREE: "SME_VALIDATED", CORRECT: "SME_CORRECTED",
                                          CANNOT_CLASSIFY: "SME_UNCLASSIFIABLE"}[choice]
