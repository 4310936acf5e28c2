"""The judgment phases behind one interface.

A *judge* produces the classification and the judgment phase of every verifier that has one
(V2, V3 and V4 today: :mod:`docverify.verify.registry`) through one method,
``judge(agent, bundle, classification)``. There are two implementations:

* :class:`OfflineJudge` (the embedded default) — deterministic lexicon/layout algorithms; real,
  weaker verifiers that need no network and no credentials;
* ``LLMJudge`` in :mod:`docverify.llm.judge` — pydantic-ai agents with structured output on a given
  model (Gemini in production, ``FunctionModel``/``TestModel`` in tests).

Every result names the implementation that produced it, so a report never presents an offline
verdict as an LLM one. The methods are ``async`` so that a shard can run its documents
concurrently; the offline implementation simply does its CPU work inline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from docverify.classify.offline import IMPLEMENTATION, classify_offline
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue
from docverify.verify.registry import REGISTRY, Registry

#: How an LLM judge asks a verifier that has a blind reading (V2, ADR 0034): ``instead`` of its labelled
#: prompt (the specification's LLM call budget: V2 0 or 1 call; the default), ``before`` it (one more call
#: per judged attempt), or ``off`` (the labelled prompt only).
BLIND_READINGS = ("instead", "before", "off")


class JudgeThrottled(RuntimeError):
    """The model's quota (429 / RESOURCE_EXHAUSTED) held a call back beyond the waiting budget.

    Throttling is not a verdict: a stage never turns this into a document's
    ``VERIFICATION_INCOMPLETE`` / ``CLASSIFICATION_FAILED``. It propagates, the task fails and
    Airflow retries it later (outputs already written are reused), so a throttled night is slower,
    never escalated. Only a real failure of the model may escalate a document."""


class CallDeferred(RuntimeError):
    """Batch mode's collect pass (:mod:`docverify.stages.batch_mode`): the call missed the verdict cache and
    was recorded for a Gemini batch job instead of being sent. Never a verdict: the collect pass
    stops the document there (a classification) or discards the judgment; the verify task later
    reads the batch's answer from the cache, or calls the model online when it has none."""


@dataclass
class Usage:
    llm_calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.llm_calls += other.llm_calls
        self.cache_hits += other.cache_hits
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens


@dataclass
class JudgmentResult:
    """Issues found by one judgment phase (``issue_id`` not yet assigned)."""

    issues: list[Issue]
    implementation: str
    usage: Usage = field(default_factory=Usage)


@dataclass
class ClassifyResult:
    classification: ClassificationOutput
    implementation: str
    usage: Usage = field(default_factory=Usage)


class Judge(ABC):
    """Classifier + the judgment phase of every verifier of the registry that has one."""

    #: The model name the price table knows (``gemini-2.5-flash``), or None (no LLM).
    price_model: str | None = None

    #: Stable id of the implementation, written into every report (e.g. ``offline-v1``).
    name: str

    @property
    def self_verifying(self) -> bool | None:
        """Whether the classification is judged by the model that made it (ADR 0034); None: no model
        (the offline judge)."""
        return None

    #: The verifiers this judge judges (their specs say how).
    registry: Registry = REGISTRY

    @property
    def classifier_id(self) -> str:
        """What a stored classification must have been made by to be reused on a re-run: a new
        classifier version (or prompt) classifies again instead of reusing the old output."""
        return self.name

    @property
    def classifying(self) -> Judge:
        """The judge whose model classifies: itself, unless the classification runs on another model
        than the judgments (the LLM judge with a separate judge connection, ADR 0034); its
        ``price_model`` prices the classification's usage."""
        return self

    @abstractmethod
    async def classify(self, bundle: DocumentBundle) -> ClassifyResult: ...

    @abstractmethod
    async def judge(
        self, agent: str, bundle: DocumentBundle, classification: ClassificationOutput
    ) -> JudgmentResult:
        """The judgment phase of verifier ``agent`` (``V2``: does each segment's page text support its
        labels? ``V3``: traps visible in the first :data:`V3_CONTEXT_CHARS` characters; ``V4``: quality
        of the evidence)."""



def models_of(judge: Judge) -> dict[str, str | bool | None]:
    """What classified and what judged, for the batch report (ADR 0034): ``{"classifier", "judge",
    "self_verifying"}`` — the classifier's and the judgments' implementation names (``llm:<model id>``
    on the LLM path) and whether the classification is judged by the model that made it (None for the
    offline judge: it runs no model)."""
    if judge.self_verifying is None:  # no model: the classifier's implementation id
        return {"classifier": judge.classifier_id, "judge": judge.name, "self_verifying": None}
    return {"classifier": judge.classifying.name, "judge": judge.name, "self_verifying": judge.self_verifying}


def judgment_call(
    judge: Judge, agent: str
) -> Callable[[DocumentBundle, ClassificationOutput], Awaitable[JudgmentResult]]:
    """The bound judgment of ``agent`` on ``judge``."""
    return partial(judge.judge, agent)


class OfflineJudge(Judge):
    """The embedded default: no LLM, no network. See ``classify/offline.py`` and the
    ``offline_judgment`` of each verifier's spec (``verify/v2_consistency.py``, ``verify/v3_traps.py``,
    ``verify/v4_evidence.py``)."""

    name = "offline-v1"

    def __init__(self, registry: Registry | None = None) -> None:
        if registry is not None:
            self.registry = registry

    @property
    def classifier_id(self) -> str:
        return f"{self.name}+{IMPLEMENTATION}"

    async def classify(self, bundle: DocumentBundle) -> ClassifyResult:
        return ClassifyResult(classify_offline(bundle), IMPLEMENTATION)

    async def judge(
        self, agent: str, bundle: DocumentBundle, classification: ClassificationOutput
    ) -> JudgmentResult:
        spec = self.registry[agent]
        if spec.offline_judgment is None:
            raise ValueError(f"{agent} has no judgment phase")
        return JudgmentResult(spec.offline_judgment(bundle, classification), spec.offline_implementation)
