"""JSON Schemas of the exported models, as written to ``include/schemas/``."""

from __future__ import annotations

import json

from docverify.domain.models import EXPORTED_MODELS


def render() -> dict[str, str]:
    """File name → schema text, for every exported model."""
    return {f"{m.__name__}.json": json.dumps(m.model_json_schema(), indent=2, ensure_ascii=False) + "\n"
            for m in EXPORTED_MODELS}
