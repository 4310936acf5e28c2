"""Estimated LLM cost from token counts, with the maintained price table of ``genai-prices``
(no hand-typed prices). An estimate: list prices of the package's bundled snapshot, no
discounts; cached input tokens at the provider's cache-read price. Requests served by a Gemini
batch job (``batch=True``) are priced with the table's batch variant (``processing: batch``);
for a model the table has no batch price for, the documented 50 % of the online price is applied
and the note says so."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import Model


class CostDict(TypedDict):
    """:meth:`CostEstimate.as_dict`."""

    usd: float | None
    model: str | None
    source: str
    note: str


@dataclass(frozen=True)
class CostEstimate:
    usd: float | None
    model: str | None
    source: str
    note: str = ""

    def as_dict(self) -> CostDict:
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
    no model (offline) → 0.0. Several models (``a+b``, :func:`answered_price_model`: a fallback
    model answered some calls) → None: a token total cannot be split between their prices."""
    if model and SEVERAL in model:
        return CostEstimate(None if (input_tokens or output_tokens) else 0.0, model, price_source(),
                            f"answered by several models ({model.replace(SEVERAL, ', ')}): the tokens are "
                            f"not split per model; price each call by its model (price_responses)")
    model = price_name(model) if model else model
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


# --------------------------------------------------------------------------- the model that answered

#: The separator of a price model name that stands for several answering models (``a+b``): such a
#: total cannot be priced (its tokens are not split per model), :func:`estimate_cost` says so.
SEVERAL = "+"
_PREFIXES = ("google-gla:", "google-vertex:", "google-cloud:", "google:", "gemini:", "models/",
             "publishers/google/models/")


def price_name(model_name: str | None) -> str | None:
    """The price table's name of a model as a configuration or an answer names it: ``google:``
    / ``google-gla:`` / ``models/`` prefixes off (a response's ``modelVersion`` is
    ``gemini-2.5-flash`` or ``models/…``). A FallbackModel's name (``fallback:a,b``) names no
    model that answered: None."""
    if not model_name:
        return None
    name = str(model_name).strip()
    if name.startswith("fallback:"):
        return None
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if name.startswith(p):
                name, changed = name[len(p):], True
    return name or None


def price_model_of(model: Model) -> str | None:
    """The price model of a configured pydantic-ai model before any answer: its name, or None for
    a ``FallbackModel`` (which of its models answers is only known from each response:
    :func:`answered_price_model`)."""
    from pydantic_ai.models.fallback import FallbackModel

    if isinstance(model, FallbackModel):
        return None
    return price_name(getattr(model, "model_name", None))


def _responses(messages: ModelResponse | Iterable[ModelMessage] | None) -> list[ModelResponse]:
    from pydantic_ai.messages import ModelResponse

    if isinstance(messages, ModelResponse):
        return [messages]
    return [m for m in (messages or []) if isinstance(m, ModelResponse)]


def answered_price_model(current: str | None, messages: ModelResponse | Iterable[ModelMessage] | None) -> str | None:
    """The judge's price model after a call whose messages are ``messages`` (pydantic-ai
    ``ModelResponse`` objects; others ignored): the model that answered (each response's
    ``model_name``), merged with ``current``. One model throughout → its name (priced as usual);
    a second model answering (a FallbackModel's fallback) → ``a+b``, which :func:`estimate_cost`
    refuses to price from a token total (None with a note) — exact figures come from
    :func:`price_responses`, per call."""
    names = {n for n in (price_name(x) for x in str(current or "").split(SEVERAL)) if n}
    for r in _responses(messages):
        n = price_name(r.model_name)
        if n:
            names.add(n)
    return SEVERAL.join(sorted(names)) if names else None


def price_responses(messages: ModelResponse | Iterable[ModelMessage] | None, *, batch: bool = False) -> CostEstimate:
    """The cost of a run's model responses (``result.all_messages()`` or ``new_messages()``), each
    priced by the model that answered it (``ModelResponse.model_name``) and its own usage — a
    FallbackModel's calls are priced at the rates of whichever model answered. ``usd`` None when a
    response has tokens but no known model; ``model``: the answering model, or ``a+b``."""
    total = 0.0
    models: set[str] = set()
    unpriced: list[str] = []
    for r in _responses(messages):
        u = r.usage
        name = price_name(r.model_name)
        cost = estimate_cost(name, input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0,
                             cached_tokens=u.cache_read_tokens or 0, batch=batch)
        if name:
            models.add(cost.model or name)
        if cost.usd is None:
            unpriced.append(cost.note)
        else:
            total += cost.usd
    model = SEVERAL.join(sorted(models)) or None
    if unpriced:
        return CostEstimate(None, model, price_source(), "; ".join(unpriced))
    return CostEstimate(round(total, 6), model, price_source(),
                        f"priced per answering model: {model}" if len(models) > 1 else "")
