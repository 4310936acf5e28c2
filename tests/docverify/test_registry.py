"""The verifier registry (docverify.verify.registry, ADR 0002): the registry, the code catalogue and
the prompts agree with each other, and a new verifier needs nothing but its spec (its module), a
registry line and a prompt — proven with a toy V6 built here from the registry alone, run through
the pipeline's verify path offline and through the LLM judge on a scripted pydantic-ai model."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
from pydantic import Field
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from tests.docverify.llm.test_llm_judge import PAGE1, PAGE2, make_bundle, make_classification

from docverify.domain.codes import CATALOGUE, CodeSpec, make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue, Severity, VerificationReport
from docverify.domain.resources import include_dir
from docverify.judging.judges import Judge, OfflineJudge
from docverify.llm import prompts as llm_prompts
from docverify.llm.judge import LLMJudge
from docverify.llm.schemas import AGENT_CODES, OUTPUT_TYPES
from docverify.pipeline.document import (
    AGENTS,
    AgentOutcome,
    VerifyDeps,
    assemble,
    verify_attempt,
    verify_document,
)
from docverify.verify import registry as R
from docverify.verify.llm_io import Finding, JudgmentFindings, page_entry
from docverify.verify.spec import VerifierSpec

# --------------------------------------------------------------------------- the shipped registry


def test_the_registry_lists_v1_to_v4_in_order():
    assert R.REGISTRY.agent_ids == ("V1", "V2", "V3", "V4")
    assert R.REGISTRY.judged_ids == AGENTS == ("V2", "V3", "V4")


def test_every_registered_code_is_in_the_catalogue_under_its_verifier_and_none_is_orphan():
    claimed = {}
    for spec in R.REGISTRY:
        for code in spec.codes:
            assert CATALOGUE[code].agent == spec.agent, code
            claimed[code] = spec.agent
        assert set(spec.judgment_codes) <= set(spec.codes)
        for code in spec.judgment_codes:  # a model can never report a fixable or a MINOR code
            assert not CATALOGUE[code].auto_fixable and CATALOGUE[code].severity != Severity.MINOR
    per_agent = {c.code for c in CATALOGUE.values() if c.agent != "ANY"}
    assert per_agent == set(claimed), per_agent ^ set(claimed)


def test_every_judged_verifier_has_a_prompt_and_no_prompt_is_orphan():
    files = {p.stem for p in (include_dir() / "prompts").glob("*.md")}
    for spec in R.REGISTRY.judged:
        assert spec.prompt in files, spec.agent
        assert llm_prompts.PROMPTS[spec.agent] == spec.prompt
        version, body = llm_prompts.load_prompt(spec.prompt)
        assert version == f"prompt: {spec.prompt}" and body
    used = set(llm_prompts.PROMPTS.values()) | set(llm_prompts.OTHER_PROMPTS)
    assert files == used, files ^ used


def test_the_llm_tables_and_the_agent_type_are_read_from_the_registry():
    for spec in R.REGISTRY.judged:
        assert OUTPUT_TYPES[spec.agent] is spec.findings_model
        assert AGENT_CODES[spec.agent] == spec.judgment_codes
    # the models check an agent id's form; the pipeline, its membership of the registry (ADR 0039)
    with pytest.raises(ValueError, match="pattern"):
        make_issue("TRAP_CONTEXT", "m", agent="X9")
    with pytest.raises(ValueError, match="unknown verifier"):
        assemble("d", 0, {}, [AgentOutcome([make_issue("TRAP_CONTEXT", "m", agent="V9")], [])])


def test_the_judge_interface_has_one_judgment_method():
    abstract = Judge.__abstractmethods__
    assert abstract == {"classify", "judge"}
    assert not [m for m in ("judge_consistency", "judge_context", "judge_evidence") if hasattr(Judge, m)]


def test_a_spec_that_contradicts_the_catalogue_is_refused():
    v2 = R.REGISTRY["V2"]
    with pytest.raises(ValueError, match="belongs to V3"):
        VerifierSpec(agent="V2", title="x", codes=(*v2.codes, "TRAP_CONTEXT"), rule_phase=v2.rule_phase).check()
    with pytest.raises(ValueError, match="share an agent id"):
        R.REGISTRY.extended(v2)


# --------------------------------------------------------------------------- a toy V6


class ToyFinding(Finding):
    code: Literal["TOY_WORD"]


class ToyFindings(JudgmentFindings):
    findings: list[ToyFinding] = Field(description="One entry per problem; empty when there is none.")


#: the toy's own catalogue rows (no edit of codes.py); its issues are made from them
SHOUTING = CodeSpec("TOY_SHOUTING", "V6", Severity.MINOR, False, "IG-99", "A page is all capitals")
WORD = CodeSpec("TOY_WORD", "V6", Severity.MAJOR, False, "IG-99", "A page names a clinic")


def _toy_rules(bundle: DocumentBundle, cls: ClassificationOutput, policy: Any) -> list[Issue]:
    return [make_issue(SHOUTING, "A page shouts", agent="V6", location=f"pages[{p.page_num}]")
            for p in bundle.pages if p.text.isupper()]


def _toy_offline(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    return [make_issue(WORD, "The word 'clinic' appears", agent="V6", location=f"pages[{p.page_num}]",
                       details={"implementation": "offline-toy-v1"})
            for p in bundle.pages if "clinic" in p.text]


def _toy_inputs(bundle: DocumentBundle, cls: ClassificationOutput) -> dict[str, Any]:
    return {"total_pages": bundle.total_pages, "pages": [page_entry(p.page_num, p.text) for p in bundle.pages]}


TOY = VerifierSpec(
    agent="V6",
    title="toy",
    codes=("TOY_SHOUTING", "TOY_WORD"),
    rule_phase=_toy_rules,
    judgment_codes=("TOY_WORD",),
    offline_judgment=_toy_offline,
    offline_implementation="offline-toy-v1",
    prompt="v6_toy_v1",
    prompt_text="prompt: v6_toy_v1\nReport every page that names a clinic as TOY_WORD (MAJOR).",
    findings_model=ToyFindings,
    llm_inputs=_toy_inputs,
    new_codes=(SHOUTING, WORD),
)


@pytest.fixture
def extended():
    """The registry plus the toy V6: a new registry, built once; nothing global changes, so nothing is
    put back afterwards (ADR 0039)."""
    return R.REGISTRY.extended(TOY)


def test_the_toy_is_in_the_extended_registry_only(extended):
    assert extended.agent_ids == ("V1", "V2", "V3", "V4", "V6") and "V6" not in R.REGISTRY
    assert extended.catalogue["TOY_WORD"].agent == "V6"  # its own catalogue rows, no edit of codes.py
    assert "TOY_WORD" not in CATALOGUE and "TOY_WORD" not in R.REGISTRY.catalogue
    assert Issue(issue_id="", agent="V6", severity="MAJOR", message="m", code="TOY_WORD").agent == "V6"


def test_the_toy_runs_through_the_pipeline_offline(extended):
    bundle, cls = make_bundle(PAGE1.upper(), PAGE2), make_classification()
    report: VerificationReport = asyncio.run(verify_attempt(bundle, cls, VerifyDeps(OfflineJudge(extended))))
    toy = [i for i in report.issues if i.agent == "V6"]
    assert [(i.issue_id, i.code) for i in toy] == [("V6-0001", "TOY_SHOUTING"), ("V6-0002", "TOY_WORD")]
    assert {(r.agent, r.phase, r.implementation) for r in report.runs if r.agent == "V6"} == {
        ("V6", "rules", "rules-v1"), ("V6", "judgment", "offline-toy-v1")}
    result = asyncio.run(verify_document(bundle, cls, OfflineJudge(extended)))
    assert "TOY_WORD" in {i.code for i in result.attempts[0].issues}
    assert result.final_decision == "ESCALATE_TO_SME"  # a non-fixable MAJOR of V6, like any verifier's


def _scripted(messages, info: AgentInfo) -> ModelResponse:
    """Answers the toy's call with one finding, every other judgment with none."""
    tool = info.output_tools[0]
    if "TOY_WORD" in json.dumps(tool.parameters_json_schema):
        args = {"findings": [{"code": "TOY_WORD", "severity": "MAJOR", "message": "A clinic is named",
                              "location": "pages[2]", "suggested_fix": "None"}]}
    else:
        args = {"findings": []}
    return ModelResponse(parts=[ToolCallPart(tool.name, args)])


def test_the_toy_runs_through_the_llm_judge(extended):
    judge = LLMJudge(FunctionModel(_scripted), "scripted", retry_policy=None, registry=extended)
    bundle, cls = make_bundle(PAGE1, PAGE2), make_classification()
    result = asyncio.run(judge.judge("V6", bundle, cls))
    assert [(i.agent, i.code, i.details["implementation"]) for i in result.issues] == [
        ("V6", "TOY_WORD", "llm:scripted")]
    assert llm_prompts.prompt_hash("v6_toy_v1")  # the text prompt is loadable by name (cache key, logs)
    report = asyncio.run(verify_attempt(bundle, cls, VerifyDeps(judge)))
    assert [i.code for i in report.issues if i.agent == "V6"] == ["TOY_WORD"]
    assert [r.implementation for r in report.runs if r.agent == "V6" and r.phase == "judgment"] == ["llm:scripted"]
    # pydantic-ai's TestModel answers every schema, the toy's too
    test_judge = LLMJudge(TestModel(), "test", retry_policy=None, registry=extended)
    answered = asyncio.run(test_judge.judge("V6", bundle, cls))
    assert all(i.code in ("TOY_WORD", "VERIFICATION_INCOMPLETE") for i in answered.issues)


def test_the_toy_and_the_default_kinds_share_one_framing_hash(extended, monkeypatch):
    """One function computes the framing hash (issue 41): the default tables' and an extended
    registry's kinds both go through ``docverify.llm.cache.framing_hash``, so changing the framing
    changes every key alike."""
    from docverify.llm import cache as llm_cache
    from docverify.llm import judge as llm_judge

    assert not hasattr(llm_judge, "_framing_hash_of") and llm_judge.framing_hash is llm_cache.framing_hash
    seen: list[type] = []
    real = llm_cache.framing_hash
    monkeypatch.setattr(llm_judge, "framing_hash", lambda t: seen.append(t) or real(t))
    judge = LLMJudge(FunctionModel(_scripted), "scripted", retry_policy=None, registry=extended)
    assert seen == [ToyFindings]  # the only kind the default table does not know
    assert judge._framing["V6"] == real(ToyFindings) != judge._framing["V4"]
