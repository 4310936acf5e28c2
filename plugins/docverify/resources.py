"""Data files of the project (``include/``): rules, prompts, schemas, samples.

The domain core finds ``include/`` beside ``plugins/`` (the repository layout, which is also
the Astro/Composer layout); ``DOCVERIFY_INCLUDE_DIR`` overrides it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
from typing import Any


def include_dir() -> pathlib.Path:
    env = os.environ.get("DOCVERIFY_INCLUDE_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2] / "include"


@functools.cache
def load_rule(name: str) -> Any:
    """``include/rules/<name>.json``, parsed (cached: rules are read-only data)."""
    path = include_dir() / "rules" / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"rule file {path} is missing: it ships with the repository under include/rules/ "
            f"(set DOCVERIFY_INCLUDE_DIR if include/ lives elsewhere)"
        ) from exc


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: Where the shared test corpora are looked for, in order, after ``$DOCVERIFY_CORPORA``: beside
#: the checkout (``../shared/corpora``), then the workplace's fixed location (a clone made
#: elsewhere, e.g. by CI in a temporary folder, still finds them).
CORPORA_FALLBACKS = (pathlib.Path(__file__).resolve().parents[3] / "shared" / "corpora",
                     pathlib.Path("/work/shared/corpora"))


def default_corpora_dir() -> pathlib.Path:
    env = os.environ.get("DOCVERIFY_CORPORA")
    if env:
        return pathlib.Path(env)
    for candidate in CORPORA_FALLBACKS:
        if candidate.is_dir():
            return candidate
    return CORPORA_FALLBACKS[0]
