"""The DAGs' params as models (issue 41 item 2, ADR 0055): one field per param, its default, bounds and
description declared once. The DAG builds its trigger-form ``Param`` s from the model
(:meth:`DagParams.dag_params`), and a task reads the run's params through it once
(:meth:`DagParams.of`): typed values, the same defaults, a comma list already split — no
``int(params.get(name, default))`` repeating the DAG's default."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.fields import FieldInfo

from docverify.stages.common import MAX_SHARDS
from docverify.stages.layout import LAYOUT_SHARD_SIZE

if TYPE_CHECKING:
    from airflow.sdk import Param

    from docverify_airflow.night import TaskContext

_JSON_TYPES: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}


def comma_list(raw: str | Sequence[str] | None) -> Sequence[str]:
    """A comma-separated text as its non-empty, stripped items (``None`` or blank: none)."""
    if raw is None:
        return ()
    if isinstance(raw, str):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    return raw


#: a comma-separated list of names in the form, a tuple of them in the task
CommaList = Annotated[tuple[str, ...], BeforeValidator(comma_list)]


def _schema_type(f: FieldInfo) -> str | list[str]:
    """The JSON-schema type of a param's field: a nullable text (or comma list) is ``["null", "string"]``
    (an empty form field is null, and the form does not require it); else the field's type."""
    ann = f.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType) or typing.get_origin(ann) is tuple:
        return ["null", "string"]
    if isinstance(ann, type) and ann in _JSON_TYPES:
        return _JSON_TYPES[ann]
    raise TypeError(f"a param's type is bool, int, float, str, a nullable text or a comma list, not {ann!r}")


class DagParams(BaseModel):
    """A DAG's params. Subclasses declare one field each (``Field(default, ge=…, le=…, description=…)``)."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_default=True)

    @classmethod
    def of(cls, context: TaskContext) -> Self:
        """The run's params (``context["params"]``), validated: a missing one takes its default; a value
        outside its bounds raises ``ValueError`` naming it (a deterministic failure: not retried)."""
        return cls.model_validate(dict(context.get("params") or {}))

    @classmethod
    def dag_params(cls) -> dict[str, Param]:
        """The DAG's ``params``: one ``airflow.sdk.Param`` per field, in declaration order, with the field's
        default, JSON-schema type, bounds and description."""
        from airflow.sdk import Param

        out: dict[str, Param] = {}
        for name, f in cls.model_fields.items():
            bounds = {key: value for m in f.metadata for key, attr in (("minimum", "ge"), ("maximum", "le"))
                      if (value := getattr(m, attr, None)) is not None}
            out[name] = Param(None if f.default == () else f.default, type=_schema_type(f),
                              description=f.description, **bounds)
        return out


class NightParams(DagParams):
    """The params of the nightly Dag ``clinical_doc_verification``."""

    # nullable: an empty field in the trigger/backfill form means "not set", and every date of a
    # backfill then reads its own incoming/<ds>/ ({ds} in a prefix is replaced by the run's date)
    batch_prefix: str | None = Field(None, description=(
        "Ad-hoc batch: a prefix under the storage root instead of incoming/<ds> (empty: incoming/<ds>; {ds} is "
        "replaced by the run's date, e.g. uploads/{ds})"))
    shard_size: int = Field(25, ge=1, le=500, description=(
        "Documents per mapped verify/retry task at least: it grows with the night so at most max_shards tasks run"))
    max_shards: int = Field(MAX_SHARDS, ge=1, le=1024, description=(
        "Mapped verify (and retry) task instances per night at most (Airflow's [core] max_map_length caps it)"))
    max_documents: int = Field(0, ge=0, description="Stop after this many PDFs (0 = all)")
    reuse_cached: bool = Field(True, description="Reuse unchanged bundles and classifications from an earlier run")
    concurrency: int = Field(8, ge=1, le=64, description="Documents processed concurrently inside one shard")
    layout_shard_size: int = Field(LAYOUT_SHARD_SIZE, ge=1, le=100000, description=(
        "PDFs per mapped layout_parse task at least (local parser): it grows with the night so at most max_shards "
        "tasks run"))
    parse_workers: int = Field(2, ge=1, le=16, description="Parser child processes")
    parse_timeout_s: float = Field(60, ge=1, description=(
        "Seconds a PDF may take to open before TIMEOUT; then each page has Variable docverify_parse_page_timeout_s, "
        "the PDF at most docverify_parse_file_ceiling_s (ADR 0047)"))

    def prefix(self, ds: str) -> str:
        """The batch's prefix for the run of ``ds``: unset/empty → "" (the batch is ``incoming/<ds>/``);
        ``{ds}`` inside it is replaced by the run's date, so one prefix serves a whole backfill with each
        date reading its own folder."""
        return (self.batch_prefix or "").strip().replace("{ds}", ds)


class ReviewParams(DagParams):
    """The params of the SME review Dag ``sme_review``."""

    max_reviews: int = Field(50, ge=1, le=1000, description="Open at most this many reviews per run (most severe first)")
    assignees: CommaList = Field((), description=(
        "User names who may answer, comma separated (empty: the Variable docverify_sme_assignees, else anyone)"))
    response_timeout_hours: float = Field(72, ge=0.01, description=(
        "Hours to wait for an answer; then the packet stays pending"))
