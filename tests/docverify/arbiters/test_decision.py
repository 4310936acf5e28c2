"""The decision arbiter (decision_arbiter.md of the specification, shared/spec, outside this repository): the document's 32 tests by category (parsing,
fallback, safety overrides, citations, explanations, helpers, LLM call, integration), its
examples, the decisions taken where it is ambiguous, and the real google-genai client against the
fake Gemini endpoint (valid JSON, prose, garbage, timeout, 429, 500). It never raises."""

import asyncio
import json

import pytest
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from tests.fake_gemini import FakeGemini, Slow, error_body, text_reply

from docverify.arbiters import fraud_decision as D
from docverify.domain.resources import include_dir

EXAMPLE = json.loads((include_dir() / "examples" / "arbiters" / "decision_block.json").read_text())
DOC_AUDIT_EXAMPLE = ("DECISIÓN: BLOCK (confianza: 0.85) | Riesgo compuesto: 72.0/100 (high) | "
                     "Debate adversarial: pro-fraude 0.80 vs pro-cliente 0.60 | "
                     "Razonamiento: Evidencia fuerte de fraude | Señales detectadas (2): high_amount, off_hours")


def evidence(score=72.0, category="high", signals=("high_amount", "off_hours"), citations=()):
    return D.AggregatedEvidence(composite_risk_score=score, risk_category=category, all_signals=list(signals),
                                all_citations=list(citations))


def state(**over):
    s = json.loads(json.dumps(EXAMPLE))
    for k, val in over.items():
        if val is None:
            s.pop(k, None)
        else:
            s[k] = val
    return s


def text_model(*texts):
    calls = []

    def fn(messages, info):
        calls.append(messages)
        t = texts[min(len(calls), len(texts)) - 1]
        if isinstance(t, BaseException):
            raise t
        return ModelResponse(parts=[TextPart(t)])

    m = FunctionModel(fn)
    m.calls = calls  # type: ignore[attr-defined]
    return m


def run(coro):
    return asyncio.run(coro)


# --------------------------------------------------------------------------- parsing (6)

@pytest.mark.parametrize("d", D.DECISIONS)
def test_parse_valid_json_every_decision(d):
    p = D.parse_decision_response(json.dumps({"decision": d, "confidence": 0.9, "reasoning": "r"}))
    assert (p.decision, p.confidence, p.reasoning, p.stage) == (d, 0.9, "r", "json")


def test_parse_json_inside_prose_and_fences():
    p = D.parse_decision_response('Mi análisis:\n```json\n{"decision": "CHALLENGE", "confidence": 0.7}\n```\nFin.')
    assert (p.decision, p.confidence, p.stage) == ("CHALLENGE", 0.7, "json")


def test_parse_regex_fallback():
    p = D.parse_decision_response("Tras revisar todo, recomiendo BLOCK con confianza: 0.82 por el monto.")
    assert (p.decision, p.confidence, p.stage) == ("BLOCK", 0.82, "regex")
    # no confidence in the prose → 0.5 (our decision; Override 2 then escalates it)
    assert D.parse_decision_response("Decision: APPROVE").confidence == D.REGEX_DEFAULT_CONFIDENCE


@pytest.mark.parametrize("raw, expected", [(1.7, 1.0), (-0.2, 0.0), (85, 1.0), ("0.4", 0.4)])
def test_parse_confidence_clamping(raw, expected):
    assert D.parse_decision_response(json.dumps({"decision": "APPROVE", "confidence": raw})).confidence == expected


@pytest.mark.parametrize("text", ["", "   ", None, 42, "no sé qué decir", '{"decision": "MAYBE"}', "{broken json"])
def test_parse_invalid_inputs(text):
    assert D.parse_decision_response(text) is None


def test_parse_json_with_invalid_decision_falls_to_regex():
    p = D.parse_decision_response('{"decision": "block it", "note": "BLOCK", "confidence": 0.9}')
    assert p.decision == "BLOCK" and p.stage == "regex"


# --------------------------------------------------------------------------- fallback (4)

@pytest.mark.parametrize("category, expected", [
    ("low", ("APPROVE", 0.75)), ("medium", ("CHALLENGE", 0.70)), ("high", ("BLOCK", 0.80)),
    ("critical", ("BLOCK", 0.90)),
])
def test_fallback_by_category(category, expected):
    p = D.generate_fallback_decision(evidence(category=category))
    assert (p.decision, p.confidence) == expected
    assert D.FALLBACK[category] == expected


# --------------------------------------------------------------------------- safety overrides (4+)

@pytest.mark.parametrize("decision, conf, score, expected", [
    ("APPROVE", 0.9, 90.0, ("BLOCK", 0.9, [1])),           # Override 1 keeps a higher confidence
    ("CHALLENGE", 0.7, 85.1, ("BLOCK", 0.85, [1])),        # … and raises a lower one to 0.85
    ("APPROVE", 0.5, 40.0, ("ESCALATE_TO_HUMAN", 0.5, [2])),  # Override 2
    ("BLOCK", 0.8, 70.0, ("BLOCK", 0.8, [])),              # no override
    ("APPROVE", 0.3, 95.0, ("BLOCK", 0.85, [1])),          # both: 1 first, then 0.85 ≥ 0.55 (our order)
    ("APPROVE", 0.9, 85.0, ("APPROVE", 0.9, [])),          # strict: 85.0 is not > 85
    ("APPROVE", 0.55, 20.0, ("APPROVE", 0.55, [])),        # strict: 0.55 is not < 0.55
    ("BLOCK", 0.58, 70.0, ("BLOCK", 0.58, [])),            # the prompt says 0.6, the override 0.55
])
def test_safety_overrides(decision, conf, score, expected):
    d, c, fired = D.apply_safety_overrides(decision, conf, score)
    assert (d, c, fired) == expected
    assert [o.number for o in D.SAFETY_OVERRIDES] == [1, 2]
    assert (D.CRITICAL_SCORE, D.MIN_CONFIDENCE, D.PROMPT_ESCALATION_CONFIDENCE) == (85.0, 0.55, 0.6)


def test_prompt_says_escalate_below_0_6():
    assert "confianza < 0.6" in D.render_prompt("T", evidence(), D.create_minimal_debate())


# --------------------------------------------------------------------------- citations (4)

def test_citations_internal_document_example():
    ev = evidence(citations=["FP-01: Transacciones nocturnas > 3x promedio", "Threat: x (confidence: 0.5)"])
    assert D.build_citations_internal(ev) == [{"policy_id": "FP-01", "text": "Transacciones nocturnas > 3x promedio"}]


def test_citations_external_document_example():
    ev = evidence(citations=["Threat: merchant_watchlist (confidence: 0.85)", "FP-01: t"])
    assert D.build_citations_external(ev) == [{"source": "merchant_watchlist", "detail": "Confidence: 0.85"}]


def test_citations_internal_empty():
    assert D.build_citations_internal(evidence(citations=["free text", "Threat: a (confidence: 0.1)"])) == []


def test_citations_external_none_found():
    assert D.build_citations_external(evidence(citations=["FP-02: x"])) == [
        {"source": "external_threat_check", "detail": "No external threats detected"}]


# --------------------------------------------------------------------------- explanations (5)

@pytest.mark.parametrize("d, prefix", [
    ("APPROVE", "Su transacción ha sido aprobada. Todo está en orden."),
    ("CHALLENGE", "Hemos detectado actividad inusual"),
    ("BLOCK", "Por su seguridad, hemos bloqueado esta transacción"),
    ("ESCALATE_TO_HUMAN", "Su transacción está en revisión"),
])
def test_customer_explanation(d, prefix):
    msg = D.generate_customer_explanation(d)
    assert msg.startswith(prefix)
    if d == "CHALLENGE":
        assert "necesitamos verificar" in msg


def test_audit_explanation_document_example():
    debate = D.DebateArguments.model_validate(EXAMPLE["debate"])
    assert D.generate_audit_explanation("BLOCK", 0.85, evidence(), debate,
                                        "Evidencia fuerte de fraude") == DOC_AUDIT_EXAMPLE


def test_audit_lists_top_signals_and_counts_all():
    ev = evidence(signals=[f"s{i}" for i in range(8)])
    line = D.generate_audit_explanation("BLOCK", 0.9, ev, D.create_minimal_debate(), "r")
    assert line.endswith("Señales detectadas (8): s0, s1, s2, s3, s4")


# --------------------------------------------------------------------------- helpers (2)

def test_agent_trace_from_strings_and_dicts():
    assert D.extract_agent_trace(["a", {"agent": "b"}, {"agent_name": "c"}, {"name": "a"}, {"x": 1}, 3]) == ["a", "b", "c"]


def test_agent_trace_empty():
    assert D.extract_agent_trace(None) == [] and D.extract_agent_trace([]) == []


def test_minimal_debate_is_neutral():
    d = D.create_minimal_debate()
    assert d.pro_fraud_confidence == d.pro_customer_confidence == 0.5 and not d.pro_fraud_evidence


# --------------------------------------------------------------------------- LLM call (2)

def test_llm_call_success_sends_the_impartial_prompt():
    m = text_model('{"decision": "BLOCK", "confidence": 0.85}')
    out = run(D.call_llm_for_decision(m, D.render_prompt("TXN-0001", evidence(), D.create_minimal_debate())))
    assert json.loads(out)["decision"] == "BLOCK"
    sent = m.calls[0][0].parts[-1].content
    assert "JUEZ IMPARCIAL" in sent and "72.0/100" in sent and "TXN-0001" in sent


def test_llm_call_timeout_raises_within_the_limit():
    async def slow(messages, info):
        await asyncio.sleep(5)

    with pytest.raises(Exception) as exc:
        run(D.call_llm_for_decision(FunctionModel(slow), "p", timeout_s=0.05))
    assert "Time" in type(exc.value).__name__
    assert D.LLM_TIMEOUT_S == 30.0


# --------------------------------------------------------------------------- integration (5+)

def test_agent_success_reproduces_the_documents_audit_example():
    m = text_model('{"decision": "BLOCK", "confidence": 0.85, "reasoning": "Evidencia fuerte de fraude"}')
    out = run(D.decision_arbiter_agent(EXAMPLE, model=m))
    d = out["decision"]
    assert isinstance(d, D.FraudDecision)
    assert set(D.FraudDecision.model_fields) == {
        "transaction_id", "decision", "confidence", "signals", "citations_internal", "citations_external",
        "explanation_customer", "explanation_audit", "agent_trace"}
    assert d.explanation_audit == DOC_AUDIT_EXAMPLE
    assert (d.transaction_id, d.decision, d.confidence) == ("TXN-0001", "BLOCK", 0.85)
    assert d.citations_internal == [{"policy_id": "FP-01", "text": "Transacciones nocturnas > 3x promedio"}]
    assert d.citations_external == [{"source": "merchant_watchlist", "detail": "Confidence: 0.85"}]
    assert d.agent_trace[-1] == "decision_arbiter" and d.agent_trace[0] == "transaction_context"
    assert out["decision_arbiter"] == {"path": "llm_json", "overrides": [], "llm_error": ""}


@pytest.mark.parametrize("category, expected", [("low", "APPROVE"), ("medium", "CHALLENGE"), ("high", "BLOCK"),
                                                ("critical", "BLOCK")])
def test_agent_fallback_when_llm_fails(category, expected):
    ev = {**EXAMPLE["evidence"], "risk_category": category, "composite_risk_score": 50.0}
    out = run(D.decision_arbiter_agent(state(evidence=ev), model=text_model(RuntimeError("down"))))
    assert out["decision"].decision == expected and out["decision_arbiter"]["path"] == "fallback"
    assert out["decision_arbiter"]["llm_error"] == "RuntimeError"
    # no model at all: the same fallback
    assert run(D.decision_arbiter_agent(state(evidence=ev)))["decision"].decision == expected


def test_agent_applies_safety_overrides_to_llm_answers():
    ev = {**EXAMPLE["evidence"], "composite_risk_score": 91.0}
    out = run(D.decision_arbiter_agent(state(evidence=ev), model=text_model('{"decision": "APPROVE", "confidence": 0.6}')))
    d = out["decision"]
    assert (d.decision, d.confidence, out["decision_arbiter"]["overrides"]) == ("BLOCK", 0.85, [1])
    assert "decisión original APPROVE" in d.explanation_audit
    low = run(D.decision_arbiter_agent(EXAMPLE, model=text_model('{"decision": "BLOCK", "confidence": 0.3}')))
    assert low["decision"].decision == "ESCALATE_TO_HUMAN" and "decisión original BLOCK" in low["decision"].explanation_audit
    assert low["decision"].explanation_customer == D.CUSTOMER_MESSAGES["ESCALATE_TO_HUMAN"]


def test_agent_applies_overrides_to_the_fallback_too():
    ev = {**EXAMPLE["evidence"], "risk_category": "medium", "composite_risk_score": 90.0}
    out = run(D.decision_arbiter_agent(state(evidence=ev)))
    assert (out["decision"].decision, out["decision_arbiter"]["overrides"]) == ("BLOCK", [1])


@pytest.mark.parametrize("bad", [
    {"evidence": None}, {"evidence": {"composite_risk_score": 140, "risk_category": "high"}},
    {"evidence": {"composite_risk_score": 10, "risk_category": "extreme"}}, {"transaction": None},
])
def test_agent_missing_or_invalid_evidence_is_the_error_decision(bad):
    out = run(D.decision_arbiter_agent(state(**bad) if bad.get("transaction", 1) is not None
                                       else {k: v for k, v in EXAMPLE.items() if k != "transaction"}))
    d = out["decision"]
    assert (d.decision, d.confidence, d.signals) == ("ESCALATE_TO_HUMAN", 0.0, ["decision_arbiter_error"])
    assert out["decision_arbiter"]["path"] == "error" and "ERROR" in d.explanation_audit


def test_agent_never_raises_even_on_nonsense_state():
    for s in (None, 42, "x", [], {"transaction": 3}):
        assert run(D.decision_arbiter_agent(s))["decision"].decision == "ESCALATE_TO_HUMAN"


def test_agent_without_debate_uses_the_minimal_debate():
    out = run(D.decision_arbiter_agent(state(debate=None)))
    assert "pro-fraude 0.50 vs pro-cliente 0.50" in out["decision"].explanation_audit


def test_agent_regex_path_and_garbage():
    out = run(D.decision_arbiter_agent(EXAMPLE, model=text_model("Considero que BLOCK, confianza 0.9.")))
    assert (out["decision"].decision, out["decision_arbiter"]["path"]) == ("BLOCK", "llm_regex")
    out = run(D.decision_arbiter_agent(EXAMPLE, model=text_model("lorem ipsum")))
    assert out["decision_arbiter"] == {"path": "fallback", "overrides": [], "llm_error": "Unparseable"}


# --------------------------------------------------------------------------- the real client on the fake endpoint

@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def gemini(fake):
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    return GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))


@pytest.mark.parametrize("script, path, decision", [
    ([(200, text_reply('{"decision": "CHALLENGE", "confidence": 0.72, "reasoning": "equilibrado"}'))],
     "llm_json", "CHALLENGE"),
    ([(200, text_reply('Veredicto final: ESCALATE_TO_HUMAN (confianza: 0.4)'))], "llm_regex", "ESCALATE_TO_HUMAN"),
    ([(200, text_reply("%%% garbage %%%"))], "fallback", "BLOCK"),
    ([(429, error_body(429, "RESOURCE_EXHAUSTED"))], "fallback", "BLOCK"),
    ([(500, error_body(500, "INTERNAL"))], "fallback", "BLOCK"),
    ([(200, Slow(5.0, text_reply('{"decision": "APPROVE", "confidence": 0.9}')))], "fallback", "BLOCK"),
])
@pytest.mark.slow
def test_fake_gemini(fake, script, path, decision):
    fake.script = script
    slow = isinstance(script[0][1], Slow)  # only the slow answer gets a short limit (no timing elsewhere)
    out = run(D.decision_arbiter_agent(EXAMPLE, model=gemini(fake), timeout_s=1.0 if slow else D.LLM_TIMEOUT_S))
    assert (out["decision_arbiter"]["path"], out["decision"].decision) == (path, decision)
    assert len(fake.requests) >= 1
    body = fake.requests[0][1]
    assert "JUEZ IMPARCIAL" in body["contents"][0]["parts"][0]["text"]
