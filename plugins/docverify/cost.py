"""Estimated LLM cost from token counts, with the maintained price table of ``genai-prices``
(no hand-typed prices). An estimate: list prices of the package's bundled snapshot, no
discounts; cached input tokens at the provider's cache-read price. Requests served by a Gemini
batch job (``batch=True``) are priced with the table's batch variant (``processing: batch``);
for a model the table has no batch price for, the documented 50 % of the online price is applied
and the note says so."""

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


#: Gemini Batch API: "50% of the standard cost" (https://ai.google.dev/gemini-api/docs/batch-mode); used
#: only when genai-prices has no batch variant for the model.
BATCH_DISCOUNT = 0.5


def estimate_cost(model: str | None, *, input_tokens: int, output_tokens: int, cached_tokens: int = 0,
                  provider: str = "google", batch: bool = False) -> CostEstimate:
    """The cost of the given tokens on ``model`` (e.g. ``gemini-2.5-flash``). ``input_tokens``
    includes the cached ones (as Gemini counts them). Unknown model → ``usd`` None with a note;
    no model (offline) → 0.0."""
    if not model:
        return CostEstimate(0.0 if not (input_tokens or output_tokens) else None, None, price_source(),
                            "no LLM model" if not (input_tokens or output_tokens) else "tokens without a model name")
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached_tokens)
    try:
        price = calc_price(usage, model_ref=model, provider_id=provider)
        if batch:
            batch_price = calc_price(usage, model_ref=model, provider_id=provider, price_context={"processing": "batch"})
    except LookupError as exc:
        return CostEstimate(None, model, price_source(), f"no price for {model!r} ({type(exc).__name__})")
    if not batch:
        return CostEstimate(round(float(price.total_price), 6), price.model.id, price_source())
    if batch_price.total_price < price.total_price or not price.total_price:
        return CostEstimate(round(float(batch_price.total_price), 6), price.model.id, price_source(),
                            "batch prices of the table")
    return CostEstimate(round(float(price.total_price) * BATCH_DISCOUNT, 6), price.model.id, price_source(),
                        f"no batch price in the table: {BATCH_DISCOUNT:.0%} of the online price (the Batch API's "
                        f"documented discount)")
