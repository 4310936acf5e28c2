"""What a verifier declares about itself: one :class:`VerifierSpec` per verifier module
(``verify/v1_schema.py`` … ``verify/v4_evidence.py``), listed in order by
:mod:`docverify.verify.registry`. Everything that used to be a per-verifier table elsewhere (the
rule-phase map of the pipeline, a method per verifier on the judge, the LLM judge's prompts, inputs,
output models and titles, the codes a judgment may report) is read from these objects (ADR 0002).

A verifier has a rule phase (pure, no LLM) and, optionally, a judgment phase: an offline
implementation and an LLM one (a prompt, the inputs the model reads, the structured findings it
answers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import get_args

from pydantic import BaseModel

from docverify.domain.codes import CATALOGUE, CodeSpec
from docverify.domain.models import SEVERITY_ORDER, ClassificationOutput, DocumentBundle, Issue, Severity
from docverify.domain.policy import VerifyPolicy
from docverify.verify.llm_io import DocumentInputs

#: ``rule_phase(bundle, classification, policy)`` → the rule phase's issues.
RulePhase = Callable[[DocumentBundle, ClassificationOutput, VerifyPolicy], list[Issue]]
#: ``offline_judgment(bundle, classification)`` → the offline judgment's issues.
OfflineJudgment = Callable[[DocumentBundle, ClassificationOutput], list[Issue]]
#: ``llm_inputs(bundle, classification)`` → exactly what the LLM judgment reads (the cache key's inputs).
LLMInputs = Callable[[DocumentBundle, ClassificationOutput], DocumentInputs]
#: ``blind_inputs(bundle, classification)`` → what a blind reading reads: each segment's pages and page
#: range, never the classifier's labels (the cache key's inputs; ADR 0034).
BlindInputs = Callable[[DocumentBundle, ClassificationOutput], DocumentInputs]
#: ``blind_compare(classification, reading, implementation)`` → the issues where the blind reading
#: disagrees with the classification (raises ``ValueError`` when the reading is unusable, e.g. a
#: segment left unread: the judgment is then incomplete, never "no issue").
BlindCompare = Callable[[ClassificationOutput, BaseModel, str], list[Issue]]
#: ``fixer(classification, issues)`` → what it changed, or None (:mod:`docverify.pipeline.autofix`).
Fixer = Callable[[ClassificationOutput, list[Issue]], "str | None"]


@dataclass(frozen=True)
class VerifierSpec:
    """One verifier, as the pipeline, the judges and the LLM judge see it.

    Attributes:
        agent: the id written on its issues and runs (``V2``); the registry's ids are the agent type.
        title: one word for messages (``consistency``).
        codes: every issue code it may raise (rule phase and judgment), each in the catalogue
            (:mod:`docverify.domain.codes`) under this agent.
        rule_phase: its rule phase, ``(bundle, classification, policy) -> issues``.
        judgment_codes: the codes its judgment phase may report (non-fixable in the catalogue).
        offline_judgment / offline_implementation: the offline judgment and its implementation id.
        prompt: the prompt's name (``include/prompts/<prompt>.md``, first line ``prompt: <prompt>``).
        prompt_text: the prompt itself instead of a file (same format: version line first).
        findings_model: the structured output of its LLM judgment (a ``JudgmentFindings``).
        llm_inputs: what its LLM judgment reads.
        new_codes: catalogue rows of codes this verifier brings (in its registry's catalogue,
            ``Registry.catalogue``; its issues are made from them: ``make_issue(ROW, …)``), so a new verifier needs no edit of :mod:`docverify.domain.codes`.
        fixers: auto-fixers of its auto-fixable codes that :mod:`docverify.pipeline.autofix` does not have.
        blind_prompt / blind_model / blind_inputs / blind_compare: an optional *blind* LLM reading
            asked before the judgment (ADR 0034): the model reads ``blind_inputs`` (the text without
            the classifier's labels) under ``blind_prompt`` (a file, version line first) and answers
            ``blind_model``; ``blind_compare`` turns its disagreement with the classification into
            issues (codes among ``judgment_codes``). All four or none; the call kind is
            :attr:`blind_kind`.
    """

    agent: str
    title: str
    codes: tuple[str, ...]
    rule_phase: RulePhase
    judgment_codes: tuple[str, ...] = ()
    offline_judgment: OfflineJudgment | None = None
    offline_implementation: str = ""
    prompt: str | None = None
    prompt_text: str | None = None
    findings_model: type[BaseModel] | None = None
    llm_inputs: LLMInputs | None = None
    new_codes: tuple[CodeSpec, ...] = ()
    fixers: Mapping[str, Fixer] = field(default_factory=lambda: MappingProxyType({}))
    blind_prompt: str | None = None
    blind_model: type[BaseModel] | None = None
    blind_inputs: BlindInputs | None = None
    blind_compare: BlindCompare | None = None

    @property
    def blind(self) -> bool:
        """Whether its LLM judgment asks a blind reading first (ADR 0034)."""
        return self.blind_prompt is not None

    @property
    def blind_kind(self) -> str:
        """The LLM call kind of its blind reading (``V2_BLIND``): a key of the judge's prompt, output
        and cache tables like ``classify`` or ``V2``."""
        return f"{self.agent}_BLIND"

    @property
    def judged(self) -> bool:
        """Whether it has a judgment phase (V1 has none: rules only)."""
        return self.offline_judgment is not None or self.findings_model is not None

    def check(self, catalogue: Mapping[str, CodeSpec] | None = None) -> None:
        """Refuse a spec that contradicts the catalogue or itself (raises ``ValueError``).
        ``catalogue``: the registry's (the specification's rows and every verifier's ``new_codes``);
        alone, the specification's rows and this spec's own."""
        if catalogue is None:
            catalogue = {**CATALOGUE, **{row.code: row for row in self.new_codes}}
        problems = []
        for code in self.codes:
            spec = catalogue.get(code)
            if spec is None:
                problems.append(f"{code} is not in the catalogue")
            elif spec.agent != self.agent:
                problems.append(f"{code} belongs to {spec.agent} in the catalogue")
        for code in self.judgment_codes:
            spec = catalogue.get(code)
            if code not in self.codes:
                problems.append(f"judgment code {code} is not one of its codes")
            elif spec is not None and (spec.auto_fixable or SEVERITY_ORDER[spec.severity] > SEVERITY_ORDER[Severity.MAJOR]):
                problems.append(f"judgment code {code} must be a non-fixable BLOCKER or MAJOR")
        if self.judged:
            if self.offline_judgment is None or not self.offline_implementation:
                problems.append("a judged verifier needs an offline judgment and its implementation id")
            if self.findings_model is None or self.llm_inputs is None:
                problems.append("a judged verifier needs a findings model and its LLM inputs")
            if self.prompt is None and self.prompt_text is None:
                problems.append("a judged verifier needs a prompt (a file name or the text)")
            if self.findings_model is not None:
                item = get_args(self.findings_model.model_fields["findings"].annotation)[0]
                if set(get_args(item.model_fields["code"].annotation)) != set(self.judgment_codes):
                    problems.append("its findings model's codes are not its judgment codes")
        if self.prompt_text is not None and not self.prompt_text.startswith(f"prompt: {self.prompt_name}\n"):
            problems.append(f"prompt_text must start with its version line 'prompt: {self.prompt_name}'")
        blind_parts = (self.blind_prompt, self.blind_model, self.blind_inputs, self.blind_compare)
        if any(p is not None for p in blind_parts):
            if not all(p is not None for p in blind_parts):
                problems.append("a blind reading needs its prompt, output model, inputs and comparison (all four)")
            if not self.judged:
                problems.append("a blind reading belongs to a judged verifier")
        missing = [c for c in self.fixers if c not in self.codes]
        if missing:
            problems.append(f"fixers for codes it does not raise: {missing}")
        if problems:
            raise ValueError(f"verifier {self.agent}: " + "; ".join(problems))

    @property
    def prompt_name(self) -> str:
        """The prompt's name (the file's stem, or ``<agent>_inline`` for a text prompt without one)."""
        return self.prompt or f"{self.agent.lower()}_inline"
