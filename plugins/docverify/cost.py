"""Estimated LLM cost from token counts, with the maintained price table of ``genai-prices``
(no hand-typed prices). An estimate: list prices of the package's bundled snapshot, no
discounts, no batch pricing; cached input tokens at the provider's cache-read price."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version


@dataclass(frozen=True)
class CostEstimate:
    usd: float | None
    model: str | None
    source: str
    note: str = ""

    def as_dict(self) -> dict:
        return {"usd": self.usd, "model": self.model, "source": self.source, "note": self.note}


def price_source() -> str:
    return f"genai-prices {version('genai-prices')}"


def estimate_cost(model: str | None, *, input_tokens: int, output_tokens: int, cached_tokens: int = 0,
                  provider: str = "google") -> CostEstimate:
    """The cost of the given tokens on ``model`` (e.g. ``gemini-2.5-flash``). ``input_tokens``
    includes the cached ones (as Gemini counts them). Unknown model → ``usd`` None with a note;
    no model (offline) → 0.0."""
    if not model:
        return CostEstimate(0.0 if not (input_tokens or output_tokens) else None, None, price_source(),
                            "no LLM model" if not (input_tokens or output_tokens) else "tokens without a model name")
    from genai_prices import Usage, calc_price

    try:
        price = calc_price(Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                 cache_read_tokens=cached_tokens), model_ref=model, provider_id=provider)
    except LookupError as exc:
        return CostEstimate(None, model, price_source(), f"no price for {model!r} ({type(exc).__name__})")
    return CostEstimate(round(float(price.total_price), 6), price.model.id, price_source())
