"""The verdict cache: a call's key (model, prompt and framing hashes, settings, the exact inputs it
reads) and where verdicts are kept (the artifact store, or memory in tests)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, JsonValue

from docverify.domain.resources import sha256_bytes
from docverify.llm.prompts import RENDER_VERSION, SYSTEM_INSTRUCTIONS, prompt_hash
from docverify.llm.schemas import OUTPUT_TYPES

if TYPE_CHECKING:
    from pydantic_ai.settings import ModelSettings

logger = logging.getLogger("docverify.llm")

#: a verdict-cache entry as stored: the key, the provenance (model id, prompt name and hash, call kind,
#: a batch job's name), created_at and the validated output, JSON
CacheEntry = dict[str, JsonValue]


# --------------------------------------------------------------------------- cache keys


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def framing_hash(output_type: type[BaseModel]) -> str:
    """Everything besides the prompt file that shapes what the model sees for a call whose answer is
    ``output_type``: the system instructions, the rendering version and the output schema. The only
    place this hash is computed (the judge's extended registries use it too)."""
    schema = output_type.model_json_schema()
    return sha256_bytes(
        canonical_json({"system": SYSTEM_INSTRUCTIONS, "render": RENDER_VERSION, "schema": schema}).encode()
    )


FRAMING_HASHES = {kind: framing_hash(output_type) for kind, output_type in OUTPUT_TYPES.items()}


def cache_key(
    model_id: str,
    prompt_name: str,
    inputs: Mapping[str, object],
    *,
    framing: str = "",
    settings: ModelSettings | None = None,
) -> str:
    """sha256 of the model id, the prompt name + the hash of its file (+ the framing hash and the
    model settings) and the canonical JSON of the call's inputs."""
    material = {
        "model_id": model_id,
        "prompt": {"name": prompt_name, "hash": prompt_hash(prompt_name), "framing": framing},
        "settings": settings,
        "inputs": inputs,
    }
    return hashlib.sha256(canonical_json(material).encode()).hexdigest()


# --------------------------------------------------------------------------- verdict cache


class JsonStore(Protocol):
    """Where a :class:`VerdictCache` keeps its entries: an
    :class:`~docverify.storage.store.ArtifactStore`."""

    def exists(self, rel: str) -> bool: ...

    def read_json(self, rel: str) -> JsonValue: ...

    def write_json(self, rel: str, obj: CacheEntry) -> bool: ...


class VerdictCache:
    """Cached model answers under ``cache/llm/<key>.json`` of an :class:`ArtifactStore`.

    An entry holds the validated structured output and provenance (model id, prompt name and
    hash, creation time), never the inputs. Read errors and unreadable entries are misses; write
    errors are logged and ignored (a cache must never fail a judgment)."""

    PREFIX = "cache/llm"

    def __init__(self, store: JsonStore | None):
        self.store = store

    def rel(self, key: str) -> str:
        return f"{self.PREFIX}/{key}.json"

    def _read(self, key: str) -> JsonValue:
        """The stored entry of ``key`` as read (JSON, not yet checked), or None."""
        assert self.store is not None, "a VerdictCache without a store overrides _read and _write"
        rel = self.rel(key)
        if not self.store.exists(rel):
            return None
        return self.store.read_json(rel)

    def _write(self, key: str, entry: CacheEntry) -> None:
        assert self.store is not None, "a VerdictCache without a store overrides _read and _write"
        self.store.write_json(self.rel(key), entry)

    def get(self, key: str) -> dict[str, JsonValue] | None:
        """The cached output of ``key``, or None."""
        try:
            entry = self._read(key)
        except Exception as exc:  # noqa: BLE001 - a broken entry is a miss
            logger.warning("llm cache read failed key=%s error=%s", key, type(exc).__name__)
            return None
        output = entry.get("output") if isinstance(entry, dict) else None
        if not isinstance(output, dict):
            return None
        return output

    def put(self, key: str, output: dict[str, JsonValue], **provenance: str | None) -> None:
        entry: CacheEntry = {
            "key": key,
            **provenance,
            "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "output": output,
        }
        try:
            self._write(key, entry)
        except Exception as exc:  # noqa: BLE001
            logger.warning("llm cache write failed key=%s error=%s", key, type(exc).__name__)


class InMemoryVerdictCache(VerdictCache):
    """The same cache in a dict (tests, one-off CLI runs)."""

    def __init__(self) -> None:
        super().__init__(store=None)
        self.entries: dict[str, CacheEntry] = {}

    def _read(self, key: str) -> JsonValue:
        entry = self.entries.get(key)
        return json.loads(json.dumps(entry)) if entry is not None else None

    def _write(self, key: str, entry: CacheEntry) -> None:
        self.entries[key] = json.loads(json.dumps(entry))
