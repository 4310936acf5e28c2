"""The batch report names the models that classified and judged, warns when one model did both, and
prices each model's usage at its own price (ADR 0034)."""

from __future__ import annotations

from collections import Counter

from docverify.judging.judges import Judge, Usage
from docverify.llm.cost import estimate_cost
from docverify.reporting import report
from docverify.stages.common import StageStats
from docverify.storage.stage_records import StageRead, stage_read


class Priced(Judge):
    """A judge that only has a name and a price model (the stage statistics read nothing else)."""

    def __init__(self, price_model: str):
        self.price_model = price_model
        self.name = f"llm:{price_model}"

    async def classify(self, bundle):  # pragma: no cover - never called
        raise NotImplementedError

    async def judge(self, agent, bundle, classification):  # pragma: no cover - never called
        raise NotImplementedError


def test_a_stage_on_two_models_records_and_prices_each_models_usage():
    stats = StageStats("verify")
    stats.add_usage("d1", Usage(llm_calls=1, input_tokens=10_000, output_tokens=1_000), Priced("gemini-2.5-flash"))
    stats.add_usage("d1", Usage(llm_calls=4, input_tokens=40_000, output_tokens=2_000), Priced("gemini-2.5-pro"))
    rec = stats.record()
    assert rec["price_model"] == "gemini-2.5-flash+gemini-2.5-pro"  # not priceable from the total
    assert rec["llm_by_model"] == {
        "gemini-2.5-flash": {"calls": 1, "cache_hits": 0, "input_tokens": 10_000, "output_tokens": 1_000,
                             "cached_tokens": 0},
        "gemini-2.5-pro": {"calls": 4, "cache_hits": 0, "input_tokens": 40_000, "output_tokens": 2_000,
                           "cached_tokens": 0}}
    total = Counter(rec["llm"])
    by_model = {m: Counter(u) for m, u in rec["llm_by_model"].items()}
    whole = estimate_cost(rec["price_model"], input_tokens=total["input_tokens"], output_tokens=total["output_tokens"])
    assert whole.usd is None
    cost = report._cost_per_model(by_model, total, whole, sorted(by_model))
    flash = estimate_cost("gemini-2.5-flash", input_tokens=10_000, output_tokens=1_000).usd
    pro = estimate_cost("gemini-2.5-pro", input_tokens=40_000, output_tokens=2_000).usd
    assert flash and pro and pro > flash
    assert cost.usd == round(flash + pro, 6) and cost.note.startswith("priced per model")
    # usage that does not add up to the total is not priced
    short = {"gemini-2.5-flash": by_model["gemini-2.5-flash"]}
    assert report._cost_per_model(short, total, whole, sorted(by_model)).usd is None


def test_one_model_keeps_the_single_price_model_and_no_split():
    stats = StageStats("verify")
    for _ in range(2):
        stats.add_usage("d1", Usage(llm_calls=1, input_tokens=100, output_tokens=10), Priced("gemini-2.5-flash"))
    rec = stats.record()
    assert rec["price_model"] == "gemini-2.5-flash" and "llm_by_model" not in rec


def read(records: list[dict]) -> list[StageRead]:
    """Stored stage records as the report reads them: validated into each stage's model (ADR 0056)."""
    return [stage_read(r) for r in records]


def test_the_models_section_and_its_warning():
    apart = [{"stage": "verify", "models": {"classifier": "llm:google:gemini-2.5-flash",
                                            "judge": "llm:openai:local-model", "self_verifying": False}}]
    section = report._models_section(read(apart))
    assert section == {"classifier": ["llm:google:gemini-2.5-flash"], "judge": ["llm:openai:local-model"],
                       "self_verifying": False, "warning": ""}
    lines = report.models_lines({"models": section})
    assert lines == ["- classified by: llm:google:gemini-2.5-flash", "- judged by: llm:openai:local-model"]

    same = [{"stage": "verify", "models": {"classifier": "llm:google:gemini-2.5-flash",
                                           "judge": "llm:google:gemini-2.5-flash", "self_verifying": True}}] * 2
    section = report._models_section(read(same))
    assert section["self_verifying"] and "verified by its own model" in section["warning"]
    assert report.models_lines({"models": section})[-1].startswith("- WARNING: the classification is verified")
    assert "verified by its own model" in report.models_html({"models": section})

    offline = [{"stage": "verify", "models": {"classifier": "offline-v1+x", "judge": "offline-v1",
                                              "self_verifying": None}}]
    assert report._models_section(read(offline))["warning"] == ""
    assert report._models_section(read([{"stage": "x"}])) is None
