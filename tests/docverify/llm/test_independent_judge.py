"""Independence on the LLM path (ADR 0034), on pydantic-ai ``FunctionModel``s:

* V2's blind reading: the model reads each segment's text without the classifier's labels; a segment
  it reads as another type with enough probability is ``INDEPENDENT_READING_DISAGREES`` naming both
  labels and the probability; an unusable reading is incomplete, never "no issue"; its cache key
  covers its own prompt and exactly its inputs;
* the classifier and the judge on two models: each call goes to its own model, its cache key names
  its own model, and the judge knows whether it verifies its own model's answer;
* the verifier registry declares the blind reading (a spec missing part of it is refused).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from tests.docverify.blind_reader import SEGMENTS_RE, is_blind, prompt_text
from tests.docverify.llm.test_llm_judge import PAGE1, PAGE2, answer_dict, make_bundle, make_classification

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import ClassificationOutput
from docverify.judging.judges import models_of
from docverify.llm.cache import InMemoryVerdictCache
from docverify.llm.judge import LLMJudge
from docverify.llm.prompts import PROMPTS, load_prompt, prompt_hash
from docverify.verify import v2_blind
from docverify.verify.registry import REGISTRY
from docverify.verify.spec import VerifierSpec


def run(coro):
    return asyncio.run(coro)


class Model:
    """A FunctionModel function answering by call kind: the blind reading with ``readings`` (segment
    index → (type, probability)), a judgment with no findings, a classification with ``answer_dict``;
    it keeps every call's kind and user prompt."""

    def __init__(self, readings: dict[int, tuple[str, float]] | None = None, *, blind_args=None):
        self.readings = readings or {}
        self.blind_args = blind_args
        self.calls: list[tuple[str, str]] = []

    def __call__(self, messages, info) -> ModelResponse:
        text = prompt_text(messages)
        params = json.dumps(info.output_tools[0].parameters_json_schema)
        if is_blind(info):
            kind = "V2_BLIND"
            if self.blind_args is not None:
                args = self.blind_args
            else:
                segs = json.loads(SEGMENTS_RE.search(text).group(1))
                args = {"segment_readings": [
                    {"segment_index": s["segment_index"],
                     "doc_type": self.readings.get(s["segment_index"], ("Other", 0.0))[0],
                     "probability": self.readings.get(s["segment_index"], ("Other", 0.0))[1],
                     "reason": "what the text is"} for s in segs]}
        elif "dominant_type_overall" in params:
            kind, args = "classify", answer_dict()
        else:
            kind, args = "judgment", {"findings": []}
        self.calls.append((kind, text))
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])


def judge_on(fn, model_id: str = "judge-model", **kw) -> LLMJudge:
    kw.setdefault("retry_policy", None)
    kw.setdefault("blind_reading", "before")  # both of V2's calls (the default asks blind instead)
    return LLMJudge(FunctionModel(fn), model_id, **kw)


# --------------------------------------------------------------------------- the blind reading


def test_the_blind_reading_sees_the_text_and_the_page_ranges_never_the_labels():
    fn = Model()
    cls = make_classification()
    run(judge_on(fn).judge("V2", make_bundle(PAGE1, PAGE2), cls))
    (blind,) = [t for k, t in fn.calls if k == "V2_BLIND"]
    assert PAGE1.splitlines()[0] in blind and PAGE2.splitlines()[0] in blind
    segments = json.loads(SEGMENTS_RE.search(blind).group(1))
    assert segments == [{"segment_index": 1, "page_start": 1, "page_end": 1},
                        {"segment_index": 2, "page_start": 2, "page_end": 2}]
    # nothing of the classifier's answer: no <classification> block, none of its reasoning, evidence or levels
    assert "<classification>" not in blind
    for leak in ("Sequencing report.", "Clinic note.", "PRIMARY", "NO_EVIDENCE", "presence_level", "0.9"):
        assert leak not in blind.split("<segments>")[1].split("</segments>")[0], leak
    assert blind.rstrip().endswith(load_prompt("v2_blind_v1")[1].rstrip())  # the task last
    # the blind reading comes first, then the judgment that sees the classification
    assert [k for k, _ in fn.calls] == ["V2_BLIND", "judgment"]
    assert "<classification>" in fn.calls[1][1]


def test_a_confident_other_reading_is_a_major_non_fixable_finding_naming_both_labels():
    fn = Model({1: ("Pathology Report", 0.92)})
    result = run(judge_on(fn).judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    (issue,) = result.issues
    assert (issue.code, issue.agent, issue.severity, issue.auto_fixable) == (
        "INDEPENDENT_READING_DISAGREES", "V2", CATALOGUE["INDEPENDENT_READING_DISAGREES"].severity, False)
    assert "Genomic Report" in issue.message and "Pathology Report" in issue.message and "0.92" in issue.message
    assert issue.location == "segments[1] → Genomic Report"
    assert issue.details["blind_label"] == "Pathology Report" and issue.details["classifier_label"] == "Genomic Report"
    assert issue.details["probability"] == 0.92 and issue.details["implementation"] == "llm:judge-model"
    assert result.usage.llm_calls == 2


@pytest.mark.parametrize(("reading", "found"), [
    (("Genomic Report", 0.99), False),  # the same label
    (("Pathology Report", v2_blind.DISAGREE_PROBABILITY - 0.01), False),  # another label, not confident enough
    (("Pathology Report", v2_blind.DISAGREE_PROBABILITY), True),
])
def test_only_a_confident_disagreement_is_a_finding(reading, found):
    result = run(judge_on(Model({1: reading})).judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    assert [i.code for i in result.issues] == (["INDEPENDENT_READING_DISAGREES"] if found else [])


@pytest.mark.parametrize("args", [
    {"segment_readings": []},  # reads nothing
    {"segment_readings": [{"segment_index": 1, "doc_type": "Other", "probability": 0.5, "reason": "r"}]},  # one of two
    {"segment_readings": [{"segment_index": i, "doc_type": "Other", "probability": 0.5, "reason": "r"}
                          for i in (1, 2, 3)]},  # a segment that does not exist
])
def test_a_reading_that_does_not_read_every_segment_once_is_incomplete_never_no_issue(args):
    result = run(judge_on(Model(blind_args=args)).judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    (issue,) = result.issues
    assert issue.code == "VERIFICATION_INCOMPLETE" and "blind reading" in issue.message and issue.agent == "V2"


def test_a_failed_blind_reading_is_incomplete_and_the_judgment_still_runs():
    def fn(messages, info):
        if is_blind(info):
            raise RuntimeError("down")
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"findings": []})])

    result = run(judge_on(fn).judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    (issue,) = result.issues
    assert issue.code == "VERIFICATION_INCOMPLETE" and "blind reading" in issue.message
    assert result.usage.llm_calls == 2  # both calls were made


def test_the_blind_key_covers_its_prompt_and_exactly_its_inputs():
    judge = judge_on(Model(), cache=InMemoryVerdictCache())
    bundle, cls = make_bundle(PAGE1, PAGE2), make_classification()
    key = judge.cache_key_for("V2_BLIND", bundle, cls)
    assert key != judge.cache_key_for("V2", bundle, cls)
    # the labels are not its inputs: relabelling a segment keeps the blind key, changes the judgment's
    data = cls.model_dump(mode="json")
    data["segments"][0]["dominant_type"] = "Other"
    data["segments"][0]["reasoning"] = "something else"
    relabelled = ClassificationOutput.model_validate(data)
    assert judge.cache_key_for("V2_BLIND", bundle, relabelled) == key
    assert judge.cache_key_for("V2", bundle, relabelled) != judge.cache_key_for("V2", bundle, cls)
    # the text, the page ranges and the model are
    assert judge.cache_key_for("V2_BLIND", make_bundle(PAGE1, PAGE2 + " more"), cls) != key
    data = cls.model_dump(mode="json")
    data["segments"] = data["segments"][:1]
    data["segments"][0]["page_end"] = 2
    assert judge.cache_key_for("V2_BLIND", bundle, ClassificationOutput.model_validate(data)) != key
    assert judge_on(Model(), "other-model").cache_key_for("V2_BLIND", bundle, cls) != key
    assert PROMPTS["V2_BLIND"] == "v2_blind_v1" and prompt_hash("v2_blind_v1")


def test_a_cached_blind_reading_costs_no_call_and_gives_the_same_finding():
    fn = Model({2: ("Radiology Report", 0.8)})
    judge = judge_on(fn, cache=InMemoryVerdictCache())
    bundle, cls = make_bundle(PAGE1, PAGE2), make_classification()
    first = run(judge.judge("V2", bundle, cls))
    second = run(judge.judge("V2", bundle, cls))
    assert len(fn.calls) == 2 and (second.usage.llm_calls, second.usage.cache_hits) == (0, 2)
    assert [i.model_dump() for i in second.issues] == [i.model_dump() for i in first.issues]
    assert [i.code for i in first.issues] == ["INDEPENDENT_READING_DISAGREES"]


def test_v3_and_v4_have_no_blind_reading():
    for agent in ("V3", "V4"):
        fn = Model()
        run(judge_on(fn).judge(agent, make_bundle(PAGE1, PAGE2), make_classification()))
        assert [k for k, _ in fn.calls] == ["judgment"]


# --------------------------------------------------------------------------- the registry declares it


def test_the_registry_declares_v2s_blind_reading_and_refuses_half_a_declaration():
    spec = REGISTRY["V2"]
    assert spec.blind and spec.blind_kind == "V2_BLIND" and spec.blind_prompt == "v2_blind_v1"
    assert [s.agent for s in REGISTRY.judged if s.blind] == ["V2"]
    assert "INDEPENDENT_READING_DISAGREES" in spec.judgment_codes
    with pytest.raises(ValueError, match="all four"):
        VerifierSpec(agent="V2", title="consistency", codes=spec.codes, rule_phase=spec.rule_phase,
                     judgment_codes=spec.judgment_codes, offline_judgment=spec.offline_judgment,
                     offline_implementation=spec.offline_implementation, prompt=spec.prompt,
                     findings_model=spec.findings_model, llm_inputs=spec.llm_inputs,
                     blind_prompt="v2_blind_v1").check()


# --------------------------------------------------------------------------- two models


def test_the_classifier_and_the_judge_run_on_their_own_models():
    classifier_fn, judge_fn = Model(), Model({1: ("Pathology Report", 0.95)})
    classifier = judge_on(classifier_fn, "classifier-model", cache=InMemoryVerdictCache())
    judge = judge_on(judge_fn, "judge-model", cache=InMemoryVerdictCache(), classifier=classifier)
    bundle = make_bundle(PAGE1, PAGE2)

    got = run(judge.classify(bundle))
    assert got.classification.classifier == "llm:classifier-model" and got.implementation == "llm:classifier-model"
    assert [k for k, _ in classifier_fn.calls] == ["classify"] and judge_fn.calls == []
    result = run(judge.judge("V2", bundle, got.classification))
    assert [k for k, _ in judge_fn.calls] == ["V2_BLIND", "judgment"] and len(classifier_fn.calls) == 1
    assert result.implementation == "llm:judge-model" and result.issues[0].code == "INDEPENDENT_READING_DISAGREES"

    # a re-run reuses the classification only if the same classifier made it; the keys name each model
    assert judge.classifier_id == classifier.classifier_id and judge.classifier_id.startswith("llm:classifier-model+")
    assert judge.cache_key_for("classify", bundle) == classifier.cache_key_for("classify", bundle)
    assert judge.cache_key_for("classify", bundle) != judge_on(Model(), "judge-model").cache_key_for("classify", bundle)
    assert (judge.classifier_model_id, judge.model_id, judge.self_verifying) == ("classifier-model", "judge-model", False)
    assert judge.classifying is classifier
    assert models_of(judge) == {"classifier": "llm:classifier-model", "judge": "llm:judge-model",
                                "self_verifying": False}


def test_one_model_for_both_is_self_verifying():
    judge = judge_on(Model(), "same-model")
    assert judge.self_verifying and judge.classifying is judge
    assert models_of(judge) == {"classifier": "llm:same-model", "judge": "llm:same-model", "self_verifying": True}
    # two connections that give the same model are no better
    twin = judge_on(Model(), "same-model", classifier=judge_on(Model(), "same-model"))
    assert twin.self_verifying


def test_the_offline_judge_names_its_classifier_and_runs_no_model():
    from docverify.judging.judges import OfflineJudge

    m = models_of(OfflineJudge())
    assert m["judge"] == "offline-v1" and m["classifier"].startswith("offline-v1+") and m["self_verifying"] is None


# --------------------------------------------------------------------------- the call budget (ADR 0034)


def test_by_default_v2_is_asked_blind_instead_of_labelled_within_the_specifications_budget():
    """The specification's LLM budget: V2 0 or 1 call. By default the one call is the blind reading (no
    labelled V2 prompt); V3 and V4 one each; a disagreement still becomes the finding."""
    fn = Model({1: ("Pathology Report", 0.92)})
    judge = LLMJudge(FunctionModel(fn), "judge-model", retry_policy=None)
    assert judge.blind_reading == "instead"
    bundle, cls = make_bundle(PAGE1, PAGE2), make_classification()
    result = run(judge.judge("V2", bundle, cls))
    assert [k for k, _ in fn.calls] == ["V2_BLIND"] and result.usage.llm_calls == 1
    assert [i.code for i in result.issues] == ["INDEPENDENT_READING_DISAGREES"]
    for agent in ("V3", "V4"):
        assert run(judge.judge(agent, bundle, cls)).usage.llm_calls == 1
    assert [k for k, _ in fn.calls] == ["V2_BLIND", "judgment", "judgment"]


@pytest.mark.parametrize("mode, kinds", [("before", ["V2_BLIND", "judgment"]), ("off", ["judgment"])])
def test_the_blind_reading_before_the_labelled_prompt_or_off_is_opt_in(mode, kinds):
    fn = Model()
    run(LLMJudge(FunctionModel(fn), "judge-model", retry_policy=None, blind_reading=mode)
        .judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    assert [k for k, _ in fn.calls] == kinds


def test_an_unknown_blind_reading_mode_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="instead, before, off"):
        LLMJudge(FunctionModel(Model()), "judge-model", blind_reading="sometimes")
