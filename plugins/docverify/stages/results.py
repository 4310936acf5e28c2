"""What the night's stages return: one typed result per stage, serialised only where a task hands it
to Airflow (``xcom()``; ADR 0044). The run store keeps each stage's whole record
(:class:`~docverify.storage.runstore.StageRecord`); a result carries that record and the counts its
task reports, so a caller reads attributes mypy checks instead of keys of a dict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from pydantic import JsonValue

from docverify.storage.runstore import DocSummary, StageRecord


class StageXCom(TypedDict, total=False):
    """A stage task's XCom: the counts of its record; a verify or retry shard adds its documents by
    route and by final decision (the task's OpenLineage facet shows them)."""

    stage: str
    docs: int
    errors: int
    cache_hits: int
    seconds: float
    parser: str
    routes: dict[str, int]
    final_decisions: dict[str, int]


@dataclass(frozen=True)
class StageOutcome:
    """A stage that keeps a record (layout, its parts, verify and retry shards): the record as stored."""

    record: StageRecord

    @property
    def stage(self) -> str:
        return self.record["stage"]

    @property
    def docs(self) -> int:
        return self.record.get("docs", 0)

    @property
    def errors(self) -> int:
        return self.record.get("errors", 0)

    @property
    def cache_hits(self) -> int:
        return self.record.get("cache_hits", 0)

    @property
    def documents(self) -> Mapping[str, DocSummary]:
        """A verify or retry shard's documents (their summaries); empty for other stages."""
        docs = self.record.get("documents")
        return docs if isinstance(docs, dict) else {}

    def xcom(self) -> StageXCom:
        r, out = self.record, StageXCom()
        if "stage" in r:
            out["stage"] = r["stage"]
        if "docs" in r:
            out["docs"] = r["docs"]
        if "errors" in r:
            out["errors"] = r["errors"]
        if "cache_hits" in r:
            out["cache_hits"] = r["cache_hits"]
        if "seconds" in r:
            out["seconds"] = r["seconds"]
        if "parser" in r:
            out["parser"] = r["parser"]
        return out

    def xcom_with_routes(self) -> StageXCom:
        """:meth:`xcom` and the shard's documents counted by route and by final decision (after the retry)."""
        out = self.xcom()
        docs = self.documents.values()
        out["routes"] = dict(Counter(str(d.get("route")) for d in docs))
        finals = Counter(str(d["final_decision"]) for d in docs if d.get("final_decision"))
        if finals:
            out["final_decisions"] = dict(finals)
        return out


class DiscoveredXCom(TypedDict):
    manifest: str
    documents: int


@dataclass(frozen=True)
class Discovered:
    """Discovery's result: the night's manifest (its URI) and how many PDFs it lists."""

    manifest: str
    documents: int

    def xcom(self) -> DiscoveredXCom:
        return {"manifest": self.manifest, "documents": self.documents}


class LayoutPartXCom(TypedDict):
    token: str
    part: int
    doc_ids: list[str]


@dataclass(frozen=True)
class LayoutPart:
    """One part of the local layout's plan (one mapped ``layout_parse`` task): the plan's token, which
    the part's record must carry, its number and its documents."""

    token: str
    part: int
    doc_ids: list[str] = field(default_factory=list)

    def xcom(self) -> LayoutPartXCom:
        return {"token": self.token, "part": self.part, "doc_ids": list(self.doc_ids)}

    @classmethod
    def from_xcom(cls, value: Mapping[str, JsonValue]) -> LayoutPart:
        """The part as Airflow hands it to the mapped task (the plan's XCom), checked."""
        token, part, doc_ids = value.get("token"), value.get("part"), value.get("doc_ids")
        if not isinstance(token, str) or not isinstance(part, int) or not isinstance(doc_ids, list) \
                or not all(isinstance(d, str) for d in doc_ids):
            raise ValueError(f"not a layout part (token, part, doc_ids): {sorted(value)}")
        return cls(token=token, part=part, doc_ids=[str(d) for d in doc_ids])


@dataclass(frozen=True)
class Collected:
    """Batch mode's collect pass of one round: the requests that miss the verdict cache (0: nothing to
    send, no file written), by kind, the requests file in the store and the model the job runs on."""

    round: str
    requests: int
    by_kind: dict[str, int]
    rel: str | None
    model: str


@dataclass(frozen=True)
class Arbitrated:
    """V5's branch: the task ids to follow and the documents per route."""

    routes: list[str]
    counts: dict[str, int]


class WrittenXCom(TypedDict, total=False):
    accepted: int
    packets: int
    kept: int
    kept_reviewed: int
    uri: str


@dataclass(frozen=True)
class Accepted:
    """The accept stage: the documents whose accepted record it wrote, and their folder."""

    accepted: list[str]
    uri: str

    def xcom(self) -> WrittenXCom:
        return {"accepted": len(self.accepted), "uri": self.uri}


@dataclass(frozen=True)
class PacketsWritten:
    """write_sme_packets: the packets written and those an SME had already answered (kept), and their folder."""

    packets: list[str]
    kept_reviewed: list[str]
    uri: str

    def xcom(self) -> WrittenXCom:
        return {"packets": len(self.packets), "kept_reviewed": len(self.kept_reviewed), "uri": self.uri}


@dataclass(frozen=True)
class AuditDrawn:
    """The night's audit: the sample drawn among ``accepted`` documents, the audit packets written and
    those an earlier run of the night had written (kept), and their folder."""

    packets: list[str]
    kept: list[str]
    sample: list[str]
    accepted: int
    uri: str

    def xcom(self) -> WrittenXCom:
        return {"packets": len(self.packets), "kept": len(self.kept), "uri": self.uri}
