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
    return pathlib.Path(__file__).resolve().parents[3] / "include"


def read_include(rel: str) -> bytes:
    """The bytes of ``include/<rel>``; a missing file is an error that says where it belongs."""
    path = include_dir() / rel
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        raise FileNotFoundError(
            f"{path} is missing: it ships with the repository under include/{folder} "
            f"(set DOCVERIFY_INCLUDE_DIR if include/ lives elsewhere)"
        ) from exc


@functools.cache
def load_rule(name: str) -> Any:
    """``include/rules/<name>.json``, parsed (cached: rules are read-only data)."""
    return json.loads(read_include(f"rules/{name}.json").decode("utf-8"))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
