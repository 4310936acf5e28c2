"""The decision arbiter of ``decision_arbiter.md`` of the specification (shared/spec, outside this repository) (Phase 4 of a fraud pipeline), exact to the
document: an LLM framed as an impartial judge, two-stage parsing of its answer (JSON, then regex),
a 30 s timeout, a deterministic fallback by risk category, two safety overrides, internal and
external citations, a customer and an audit explanation, the agent trace, a minimal debate when
Phase 3 failed, and an error decision. :func:`decision_arbiter_agent` never raises: it always
returns a valid :class:`FraudDecision`.

The LLM is reached through pydantic-ai (any ``Model``: Gemini via the project's connection,
``FunctionModel`` in tests); ``model=None`` runs the deterministic fallback only.

Decisions where the document is ambiguous (README "Decision arbiter"; each one is a test):

* The prompt tells the model to escalate below confidence 0.6; the enforced override escalates
  below 0.55. Both stay as written: a model answer with 0.55 ≤ confidence < 0.6 is not overridden.
* The overrides run in the document's order, Override 1 then Override 2. Score > 85 with
  confidence < 0.55 is therefore BLOCK with confidence 0.85 (Override 1 raises the confidence
  above Override 2's threshold).
* Both thresholds are strict (score 85.0 and confidence 0.55 do not trigger).
* The overrides apply to the fallback decision too (they only make it stricter).
* A confidence outside [0, 1] is clamped; the regex path without a confidence gets 0.5 (so
  Override 2 escalates it: an unstructured answer is not trusted on its own).
* Missing or invalid evidence is a critical error → the error decision. A missing debate →
  :func:`create_minimal_debate`.
* The audit line lists at most :data:`TOP_SIGNALS` signals; the count in brackets is all of them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

if TYPE_CHECKING:
    from pydantic_ai.models import Model

logger = logging.getLogger(__name__)

DecisionName = Literal["APPROVE", "CHALLENGE", "BLOCK", "ESCALATE_TO_HUMAN"]
DECISIONS: tuple[str, ...] = ("APPROVE", "CHALLENGE", "BLOCK", "ESCALATE_TO_HUMAN")
RiskCategory = Literal["low", "medium", "high", "critical"]

LLM_TIMEOUT_S = 30.0
PROMPT_NAME = "decision_arbiter_v1"
AGENT_NAME = "decision_arbiter"
TOP_SIGNALS = 5
REGEX_DEFAULT_CONFIDENCE = 0.5


# --------------------------------------------------------------------------- models


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Transaction(_Model):
    model_config = ConfigDict(extra="allow")
    transaction_id: str


class AggregatedEvidence(_Model):
    """Phase 2's output."""

    composite_risk_score: float = Field(ge=0.0, le=100.0)
    all_signals: list[str] = Field(default_factory=list)
    all_citations: list[str] = Field(default_factory=list)
    risk_category: RiskCategory


class DebateArguments(_Model):
    """Phase 3's output."""

    pro_fraud_argument: str
    pro_fraud_confidence: float = Field(ge=0.0, le=1.0)
    pro_fraud_evidence: list[str] = Field(default_factory=list)
    pro_customer_argument: str
    pro_customer_confidence: float = Field(ge=0.0, le=1.0)
    pro_customer_evidence: list[str] = Field(default_factory=list)


class FraudDecision(BaseModel):
    """Exactly the document's fields."""

    model_config = ConfigDict(extra="forbid")
    transaction_id: str
    decision: DecisionName
    confidence: float = Field(ge=0.0, le=1.0)
    signals: list[str]
    citations_internal: list[dict[str, str]]
    citations_external: list[dict[str, str]]
    explanation_customer: str
    explanation_audit: str
    agent_trace: list[str]


# --------------------------------------------------------------------------- rules as data

#: Deterministic fallback when the LLM fails: risk_category → (decision, confidence).
FALLBACK: Mapping[str, tuple[str, float]] = {
    "low": ("APPROVE", 0.75),
    "medium": ("CHALLENGE", 0.70),
    "high": ("BLOCK", 0.80),
    "critical": ("BLOCK", 0.90),
}

CRITICAL_SCORE = 85.0
MIN_CONFIDENCE = 0.55
PROMPT_ESCALATION_CONFIDENCE = 0.6  # what the prompt tells the model (not enforced; see module doc)


@dataclass(frozen=True)
class SafetyOverride:
    number: int
    name: str
    condition: Callable[[str, float, float], bool]  # (decision, confidence, score)
    apply: Callable[[str, float], tuple[str, float]]  # (decision, confidence) → new


SAFETY_OVERRIDES: tuple[SafetyOverride, ...] = (
    SafetyOverride(1, "critical_risk_score", lambda d, c, s: s > CRITICAL_SCORE,
                   lambda d, c: ("BLOCK", max(c, 0.85))),
    SafetyOverride(2, "low_confidence", lambda d, c, s: c < MIN_CONFIDENCE,
                   lambda d, c: ("ESCALATE_TO_HUMAN", c)),
)

#: Customer-facing messages (Spanish, as the document's). The document gives the first words of
#: three of them ("…"); the rest of each sentence is ours.
CUSTOMER_MESSAGES: Mapping[str, str] = {
    "APPROVE": "Su transacción ha sido aprobada. Todo está en orden.",
    "CHALLENGE": "Hemos detectado actividad inusual en esta transacción; necesitamos verificar su identidad "
                 "(código SMS, 2FA o llamada) antes de completarla.",
    "BLOCK": "Por su seguridad, hemos bloqueado esta transacción. Si la reconoce, contacte con su banco.",
    "ESCALATE_TO_HUMAN": "Su transacción está en revisión por nuestro equipo. Le informaremos del resultado "
                         "en breve.",
}
ERROR_CUSTOMER_MESSAGE = ("Su transacción está en revisión: un error del sistema impidió decidir automáticamente "
                          "y un especialista la revisará.")

POLICY_RE = re.compile(r"^\s*([A-Z]{2,}-\d+)\s*:\s*(.+?)\s*$")
THREAT_RE = re.compile(r"^\s*Threat\s*:\s*([^\s(]+)\s*\(\s*confidence\s*:\s*([0-9.]+)\s*\)\s*$", re.I)
NO_THREATS = {"source": "external_threat_check", "detail": "No external threats detected"}

_DECISION_RE = re.compile(r"\b(ESCALATE_TO_HUMAN|APPROVE|CHALLENGE|BLOCK)\b")
_CONFIDENCE_RE = re.compile(r"(?:confidence|confianza)\W{0,4}([0-9]+(?:\.[0-9]+)?)", re.I)
_JSON_RE = re.compile(r"\{.*\}", re.S)


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class ParsedDecision:
    decision: str
    confidence: float
    reasoning: str
    stage: Literal["json", "regex"]


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def parse_decision_response(text: str | None) -> ParsedDecision | None:
    """Two-stage parsing: (1) a JSON object (bare, fenced or inside prose) with a valid
    ``decision``; (2) a regex for a decision word (and ``confidence``/``confianza`` with a
    number). Confidence is clamped to [0, 1]. None when neither finds a decision."""
    if not isinstance(text, str) or not text.strip():
        return None
    m = _JSON_RE.search(text)
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and str(obj.get("decision", "")).strip().upper() in DECISIONS:
            try:
                conf = float(obj.get("confidence", REGEX_DEFAULT_CONFIDENCE))
            except (TypeError, ValueError):
                conf = REGEX_DEFAULT_CONFIDENCE
            return ParsedDecision(str(obj["decision"]).strip().upper(), _clamp(conf),
                                  str(obj.get("reasoning", "") or ""), "json")
    d = _DECISION_RE.search(text)
    if not d:
        return None
    c = _CONFIDENCE_RE.search(text)
    conf = _clamp(float(c.group(1))) if c else REGEX_DEFAULT_CONFIDENCE
    return ParsedDecision(d.group(1), conf, "Respuesta no estructurada del LLM (extracción por regex)", "regex")


def generate_fallback_decision(evidence: AggregatedEvidence) -> ParsedDecision:
    decision, conf = FALLBACK[evidence.risk_category]
    return ParsedDecision(decision, conf, f"Decisión determinista por categoría de riesgo ({evidence.risk_category})",
                          "json")


def apply_safety_overrides(decision: str, confidence: float, composite_risk_score: float
                           ) -> tuple[str, float, list[int]]:
    """Override 1 (score > 85 → BLOCK, confidence ≥ 0.85), then Override 2 (confidence < 0.55 →
    ESCALATE_TO_HUMAN). Returns the decision, the confidence and the numbers that fired."""
    fired: list[int] = []
    for o in SAFETY_OVERRIDES:
        if o.condition(decision, confidence, composite_risk_score):
            new_d, new_c = o.apply(decision, confidence)
            logger.warning("decision_arbiter safety override %d (%s): %s %.2f -> %s %.2f", o.number, o.name,
                           decision, confidence, new_d, new_c)
            decision, confidence = new_d, new_c
            fired.append(o.number)
    return decision, confidence, fired


def build_citations_internal(evidence: AggregatedEvidence) -> list[dict[str, str]]:
    """Policy matches: ``"FP-01: text"`` → ``{"policy_id": "FP-01", "text": "text"}``."""
    out = []
    for c in evidence.all_citations:
        if THREAT_RE.match(c):
            continue
        m = POLICY_RE.match(c)
        if m:
            out.append({"policy_id": m.group(1), "text": m.group(2)})
    return out


def build_citations_external(evidence: AggregatedEvidence) -> list[dict[str, str]]:
    """Threat intel: ``"Threat: merchant_watchlist (confidence: 0.85)"`` → ``{"source":
    "merchant_watchlist", "detail": "Confidence: 0.85"}``; none → the "no threats" entry."""
    out = []
    for c in evidence.all_citations:
        m = THREAT_RE.match(c)
        if m:
            out.append({"source": m.group(1), "detail": f"Confidence: {m.group(2)}"})
    return out or [dict(NO_THREATS)]


def generate_customer_explanation(decision: str) -> str:
    return CUSTOMER_MESSAGES[decision]


def generate_audit_explanation(decision: str, confidence: float, evidence: AggregatedEvidence,
                               debate: DebateArguments, reasoning: str) -> str:
    """``DECISIÓN: BLOCK (confianza: 0.85) | Riesgo compuesto: 72.0/100 (high) | Debate
    adversarial: pro-fraude 0.80 vs pro-cliente 0.60 | Razonamiento: … | Señales detectadas (2): a, b``"""
    signals = evidence.all_signals
    return (f"DECISIÓN: {decision} (confianza: {confidence:.2f}) | "
            f"Riesgo compuesto: {evidence.composite_risk_score:.1f}/100 ({evidence.risk_category}) | "
            f"Debate adversarial: pro-fraude {debate.pro_fraud_confidence:.2f} vs "
            f"pro-cliente {debate.pro_customer_confidence:.2f} | "
            f"Razonamiento: {reasoning} | "
            f"Señales detectadas ({len(signals)}): {', '.join(signals[:TOP_SIGNALS])}")


def extract_agent_trace(trace: JsonValue) -> list[str]:
    """Names of the agents that ran (strings, or dicts with ``agent``/``agent_name``/``name``),
    in order, each once. A trace that is not iterable raises TypeError."""
    names: list[str] = []
    entries = trace or []
    if not isinstance(entries, Iterable):
        raise TypeError(f"'{type(entries).__name__}' object is not iterable")
    for entry in entries:
        name = entry if isinstance(entry, str) else (
            next((entry[k] for k in ("agent", "agent_name", "name") if isinstance(entry, Mapping) and entry.get(k)),
                 None))
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return names


def create_minimal_debate(evidence: AggregatedEvidence | None = None) -> DebateArguments:
    """Phase 3 failed: a neutral debate (both sides 0.5, no evidence)."""
    return DebateArguments(
        pro_fraud_argument="Debate no disponible (fase 3 sin resultado)", pro_fraud_confidence=0.5,
        pro_customer_argument="Debate no disponible (fase 3 sin resultado)", pro_customer_confidence=0.5,
    )


def build_error_decision(transaction_id: str, error: BaseException | None, trace: JsonValue = None) -> FraudDecision:
    err = type(error).__name__ if error is not None else "UnknownError"
    return FraudDecision(
        transaction_id=transaction_id or "unknown", decision="ESCALATE_TO_HUMAN", confidence=0.0,
        signals=["decision_arbiter_error"], citations_internal=[], citations_external=[],
        explanation_customer=ERROR_CUSTOMER_MESSAGE,
        explanation_audit=f"ERROR DEL SISTEMA en decision_arbiter ({err}): ESCALATE_TO_HUMAN para revisión humana",
        agent_trace=_with_self(_safe_trace(trace)),
    )


def _safe_trace(trace: JsonValue) -> list[str]:
    try:
        return extract_agent_trace(trace)
    except Exception:  # noqa: BLE001
        return []


def _with_self(trace: list[str]) -> list[str]:
    return trace if AGENT_NAME in trace else [*trace, AGENT_NAME]


def render_prompt(transaction_id: str, evidence: AggregatedEvidence, debate: DebateArguments) -> str:
    # imports pydantic_ai: the deterministic fallback and `python -m docverify` run without it
    from docverify.llm.prompts import load_prompt

    _, template = load_prompt(PROMPT_NAME)
    return template.format(
        transaction_id=transaction_id, composite_risk_score=f"{evidence.composite_risk_score:.1f}",
        risk_category=evidence.risk_category, signals=", ".join(evidence.all_signals) or "(ninguna)",
        citations="; ".join(evidence.all_citations) or "(ninguna)",
        pro_fraud_confidence=f"{debate.pro_fraud_confidence:.2f}", pro_fraud_argument=debate.pro_fraud_argument,
        pro_fraud_evidence="; ".join(debate.pro_fraud_evidence) or "(ninguna)",
        pro_customer_confidence=f"{debate.pro_customer_confidence:.2f}",
        pro_customer_argument=debate.pro_customer_argument,
        pro_customer_evidence="; ".join(debate.pro_customer_evidence) or "(ninguna)",
    )


async def call_llm_for_decision(model: Model | str, prompt: str, *, timeout_s: float = LLM_TIMEOUT_S) -> str:
    """One pydantic-ai run (plain-text output) limited to ``timeout_s`` seconds. Raises on any
    fault; :func:`decision_arbiter_agent` turns that into the fallback."""
    from pydantic_ai import Agent
    from pydantic_ai.settings import ModelSettings

    agent = Agent(model, output_type=str, name=AGENT_NAME, model_settings=ModelSettings(temperature=0.0))
    result = await agent.run(prompt, timeout=timeout_s)
    return result.output


# --------------------------------------------------------------------------- the agent


DecisionPath = Literal["llm_json", "llm_regex", "fallback", "error"]


class DecisionRunDict(TypedDict):
    path: DecisionPath
    overrides: list[int]
    llm_error: str


class ArbiterOutput(TypedDict):
    """What :func:`decision_arbiter_agent` returns."""

    decision: FraudDecision
    decision_arbiter: DecisionRunDict


@dataclass(frozen=True)
class DecisionRun:
    """How a decision came about (beside the FraudDecision, which keeps the document's fields)."""

    path: DecisionPath
    overrides: tuple[int, ...] = ()
    llm_error: str = ""

    def to_dict(self) -> DecisionRunDict:
        return {"path": self.path, "overrides": list(self.overrides), "llm_error": self.llm_error}


async def decision_arbiter_agent(state: Mapping[str, JsonValue], *, model: Model | str | None = None,
                                 timeout_s: float = LLM_TIMEOUT_S) -> ArbiterOutput:
    """``state`` {transaction, evidence, debate, trace} → ``{"decision": FraudDecision,
    "decision_arbiter": DecisionRun-dict}``. Never raises."""
    transaction_id = "unknown"
    try:
        raw_tx = state.get("transaction") if isinstance(state, Mapping) else None
        if isinstance(raw_tx, Mapping) and raw_tx.get("transaction_id"):
            transaction_id = str(raw_tx["transaction_id"])
        transaction = Transaction.model_validate(raw_tx)
        transaction_id = transaction.transaction_id
        if state.get("evidence") is None:
            raise ValueError("state has no evidence (Phase 2 did not run)")
        evidence = AggregatedEvidence.model_validate(state["evidence"])
        debate = (DebateArguments.model_validate(state["debate"]) if state.get("debate") is not None
                  else create_minimal_debate(evidence))
        parsed: ParsedDecision | None = None
        llm_error = ""
        if model is not None:
            try:
                text = await call_llm_for_decision(model, render_prompt(transaction_id, evidence, debate),
                                                   timeout_s=timeout_s)
                parsed = parse_decision_response(text)
                if parsed is None:
                    llm_error = "Unparseable"
            except Exception as exc:  # noqa: BLE001 - every LLM fault → the fallback
                llm_error = type(exc).__name__
                logger.warning("decision_arbiter llm failed transaction_id=%s error=%s", transaction_id, llm_error)
        path: DecisionPath = "fallback" if parsed is None else "llm_json" if parsed.stage == "json" else "llm_regex"
        if parsed is None:
            parsed = generate_fallback_decision(evidence)
        decision, confidence, fired = apply_safety_overrides(parsed.decision, parsed.confidence,
                                                             evidence.composite_risk_score)
        reasoning = parsed.reasoning
        if 2 in fired:
            reasoning += f" [override 2: confianza {confidence:.2f} < {MIN_CONFIDENCE}; decisión original {parsed.decision}]"
        if 1 in fired:
            reasoning += (f" [override 1: riesgo {evidence.composite_risk_score:.1f} > {CRITICAL_SCORE:.0f}; "
                          f"decisión original {parsed.decision}]")
        result = FraudDecision(
            transaction_id=transaction_id, decision=decision, confidence=confidence,
            signals=list(evidence.all_signals),
            citations_internal=build_citations_internal(evidence),
            citations_external=build_citations_external(evidence),
            explanation_customer=generate_customer_explanation(decision),
            explanation_audit=generate_audit_explanation(decision, confidence, evidence, debate, reasoning.strip()),
            agent_trace=_with_self(extract_agent_trace(state.get("trace"))),
        )
        logger.info("decision_arbiter transaction_id=%s decision=%s confidence=%.2f path=%s overrides=%s",
                    transaction_id, decision, confidence, path, fired)
        return {"decision": result, "decision_arbiter": DecisionRun(path, tuple(fired), llm_error).to_dict()}
    except Exception as exc:  # noqa: BLE001 - the pipeline never crashes
        logger.warning("decision_arbiter error transaction_id=%s error=%s", transaction_id, type(exc).__name__)
        trace = state.get("trace") if isinstance(state, Mapping) else None
        return {"decision": build_error_decision(transaction_id, exc, trace),
                "decision_arbiter": DecisionRun("error", (), type(exc).__name__).to_dict()}


def validate_state(raw: JsonValue) -> None:
    """For the CLI: the input must at least be an object with ``transaction`` and ``evidence``
    (a missing ``debate`` is allowed: the minimal debate replaces it)."""
    if not isinstance(raw, Mapping):
        raise ValueError("the input must be a JSON object {transaction, evidence, debate}")
    missing = [k for k in ("transaction", "evidence") if k not in raw]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    try:
        Transaction.model_validate(raw["transaction"])
        AggregatedEvidence.model_validate(raw["evidence"])
        if raw.get("debate") is not None:
            DebateArguments.model_validate(raw["debate"])
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from exc
