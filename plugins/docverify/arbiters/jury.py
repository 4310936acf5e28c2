"""The CR_V2 vote at work: an LLM jury over the findings of the judgment phases (V2, V3, V4).

Optional, off on the embedded default (Variable ``docverify_jury``). When on, every finding a
judgment phase raised — never a rule phase's — is reviewed by three jurors A, B and C (each an
``LLMJudge``: its own model and/or prompt; C is the evidence-facet juror with
``include/prompts/jury_evidence_facet_v1.md``). Each votes KEEP / DROP / FLIP / FLAG with a reason
code, and :func:`docverify.arbiters.cr_vote.arbiter_vote` decides:

* KEEP — the finding stands (its ``details["jury"]`` holds the votes and the rule);
* DROP — a false alarm: the finding is removed;
* FLIP — the opposite presence level holds (PRIMARY <-> MENTION_ONLY): the finding becomes a
  ``JURY_FLIP`` issue (MAJOR, auto-fixable), so V5 routes the document to the retry, whose fixer
  flips the label and verifies again. A FLIP whose target (segment, type, a flippable level) cannot
  be read from the finding becomes FLAG ``POLARITY_UNCERTAIN``;
* FLAG — the finding stays and a ``JURY_FLAG`` issue (MAJOR, non-fixable: V5 escalates) carries
  the flag_reason into the packet.

Domain mapping of the CR_V2 document (README "CR_V2 jury"): the conflict type of a finding is
``granularity_overlap_candidate`` for V4's evidence findings (evidence vs label granularity) and
``REDUNDANT_UPPER_REF`` for V3's context traps (a mere reference to another document type) —
both give juror C, the evidence facet, the facet-minority protection — and ``polarity_conflict``
for V2's label/text findings (no facet priority).

Bounded: at most ``max_findings`` findings per judgment are reviewed (one call per distinct
juror: jurors on the same model with the same prompt share one answer, so A and B on one
connection cost one call and vote alike — give them different connections for an independent
panel); the rest keep
their finding unchanged and are counted as ``unreviewed``. Every call goes through the juror's
verdict cache, so a re-run costs no call. A juror whose call fails votes FLAG with reason
``JUROR_FAILED``. A ``VERIFICATION_INCOMPLETE`` issue (the judgment itself failed) is never put to
the jury.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Protocol, TypedDict

from pydantic import BaseModel

from docverify.arbiters.cr_vote import AGENTS, Vote, VoteResult, VoteResultDict, arbiter_vote
from docverify.arbiters.v5 import evidence_pages
from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue, VerifierRun
from docverify.judging.judges import JudgeThrottled, JudgmentResult, Usage
from docverify.llm.schemas import JuryVote
from docverify.verify.llm_io import judgment_view, page_entry

#: finding code → CR_V2 conflict type
CONFLICT_TYPES: dict[str, str] = {
    "EVIDENCE_FABRICATED": "granularity_overlap_candidate",
    "EVIDENCE_WEAK": "granularity_overlap_candidate",
    "ANCHOR_NOT_ON_PAGE": "granularity_overlap_candidate",
    "EVIDENCE_OUTSIDE_SEGMENT": "granularity_overlap_candidate",
    "TRAP_CONTEXT": "REDUNDANT_UPPER_REF",
    "TRAP_ADMIN_DOCUMENT": "REDUNDANT_UPPER_REF",
    "TRAP_ROUTINE_LAB_GENOMIC": "REDUNDANT_UPPER_REF",
    "LABEL_TEXT_MISMATCH": "polarity_conflict",
}
DEFAULT_CONFLICT = "polarity_conflict"
FLIPPABLE = {"PRIMARY": "MENTION_ONLY", "MENTION_ONLY": "PRIMARY"}
NOT_REVIEWED = frozenset({"VERIFICATION_INCOMPLETE", "JURY_FLIP", "JURY_FLAG"})
JUROR_FAILED = "JUROR_FAILED"
MAX_FINDINGS = 8
MAX_PAGES = 4
_SEG_RE = re.compile(r"segments\[(\d+)\]")


def conflict_type(issue: Issue) -> str:
    return CONFLICT_TYPES.get(issue.code, DEFAULT_CONFLICT)


class AskingLLM(Protocol):
    """What the jury and the V5 second opinion use of an ``LLMJudge`` (its model, verdict cache,
    retries and timeout): one cached call of a kind → (validated output or None, usage, error
    class name or "")."""

    model_id: str

    async def ask(self, kind: str, doc_id: str, inputs: dict[str, object]) -> tuple[BaseModel | None, Usage, str]: ...


#: A FLIP's target in a finding's ``details["flip"]`` (``from`` is a keyword: the functional form)
FlipTarget = TypedDict("FlipTarget", {"segment_index": int, "doc_type": str, "from": str, "to": str})


class JuryRecord(VoteResultDict):
    """One reviewed finding in the ``jury`` VerifierRun's votes (and its ``details["jury"]``)."""

    code: str
    conflict_type: str


@dataclass(frozen=True)
class Juror:
    name: str  # A, B or C
    llm: AskingLLM  # an LLMJudge: model, verdict cache, retries, timeout
    kind: str = "JURY"  # the prompt: JURY (general) or JURY_EVIDENCE (C, the evidence facet)


def flip_target(issue: Issue, cls: ClassificationOutput) -> FlipTarget | None:
    """(segment_index, doc_type, from, to) of a FLIP, or None when the finding does not say."""
    d = issue.details or {}
    seg_index = d.get("segment_index")
    if not isinstance(seg_index, int):
        m = _SEG_RE.search(issue.location or "")
        seg_index = int(m.group(1)) if m else None
    if seg_index is None and len(cls.segments) == 1:
        seg_index = cls.segments[0].segment_index
    seg = next((s for s in cls.segments if s.segment_index == seg_index), None)
    if seg is None:
        return None
    doc_type = d.get("doc_type")
    if not isinstance(doc_type, str):
        doc_type = next((t for t in (tc.doc_type for tc in seg.classifications) if t in (issue.location or "")), None)
    if doc_type is None:
        doc_type = seg.dominant_type
    tc = next((tc for tc in seg.classifications if tc.doc_type == doc_type), None)
    if tc is None or tc.presence_level not in FLIPPABLE:
        return None
    return {"segment_index": seg.segment_index, "doc_type": doc_type, "from": tc.presence_level,
            "to": FLIPPABLE[tc.presence_level]}


def _finding_pages(issue: Issue, cls: ClassificationOutput) -> list[int]:
    pages = evidence_pages([issue])
    if not pages:
        t = flip_target(issue, cls)
        seg_index = t["segment_index"] if t else None
        m = _SEG_RE.search(issue.location or "")
        seg_index = seg_index or (int(m.group(1)) if m else None)
        seg = next((s for s in cls.segments if s.segment_index == seg_index), cls.segments[0] if cls.segments else None)
        if seg is not None:
            pages = list(range(seg.page_start, seg.page_end + 1))
    return pages[:MAX_PAGES]


def juror_inputs(issue: Issue, bundle: DocumentBundle, cls: ClassificationOutput) -> dict[str, object]:
    wanted = set(_finding_pages(issue, cls))
    return {
        "total_pages": bundle.total_pages,
        "pages": [page_entry(p.page_num, p.text) for p in bundle.pages if p.page_num in wanted],
        "classification": judgment_view(cls),
        "finding": {"agent": issue.agent, "code": issue.code, "severity": issue.severity, "message": issue.message,
                    "location": issue.location, "details": issue.details},
    }


@dataclass
class JuryCounts:
    reviewed: int = 0
    unreviewed: int = 0
    kept: int = 0
    dropped: int = 0
    flipped: int = 0
    flagged: int = 0
    juror_failures: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Jury:
    def __init__(self, jurors: list[Juror], *, version: str = "v2", max_findings: int = MAX_FINDINGS):
        if sorted(j.name for j in jurors) != list(AGENTS):
            raise ValueError("a jury is exactly three jurors named A, B and C")
        self.jurors = sorted(jurors, key=lambda j: j.name)
        self.version = version
        self.max_findings = max(0, int(max_findings))
        self.name = f"cr_{version}-jury[" + ",".join(f"{j.name}:{j.llm.model_id}/{j.kind}" for j in self.jurors) + "]"

    async def _votes(self, issue: Issue, bundle: DocumentBundle, cls: ClassificationOutput
                     ) -> tuple[dict[str, Vote], Usage, int]:
        inputs = juror_inputs(issue, bundle, cls)
        usage, failures = Usage(), 0

        # jurors on the same model with the same prompt would give the same answer: one call for them
        groups: dict[tuple[int, str], list[Juror]] = {}
        for j in self.jurors:
            groups.setdefault((id(j.llm), j.kind), []).append(j)

        async def one(j: Juror) -> tuple[BaseModel | None, Usage, str]:
            return await j.llm.ask(j.kind, bundle.doc_id, inputs)

        keys = list(groups)
        answers = await asyncio.gather(*(one(groups[k][0]) for k in keys), return_exceptions=True)
        for ans in answers:  # throttling is not a juror's failure: the task waits and retries
            if isinstance(ans, JudgeThrottled):
                raise ans
        votes: dict[str, Vote] = {}
        for k, ans in zip(keys, answers, strict=True):
            if not isinstance(ans, BaseException):
                usage.add(ans[1])
            answer = None if isinstance(ans, BaseException) else ans[0]
            for j in groups[k]:
                if not isinstance(answer, JuryVote):  # a fault, or no output
                    failures += 1
                    votes[j.name] = Vote("FLAG", JUROR_FAILED)
                else:
                    votes[j.name] = Vote(answer.vote, answer.reason_code)
        return votes, usage, failures

    async def review(self, agent: str, bundle: DocumentBundle, cls: ClassificationOutput,
                     result: JudgmentResult) -> tuple[list[Issue], VerifierRun, JuryCounts, Usage]:
        """The judgment's findings after the jury, a ``jury`` VerifierRun with every vote (codes
        only), the counts and the jury's usage. Never raises: a fault of a juror is its FLAG vote."""
        counts, usage = JuryCounts(), Usage()
        out: list[Issue] = []
        records: list[JuryRecord] = []
        budget = self.max_findings
        for issue in result.issues:
            if issue.code in NOT_REVIEWED:
                out.append(issue)
                continue
            if budget <= 0:
                counts.unreviewed += 1
                out.append(issue)
                continue
            budget -= 1
            votes, u, failures = await self._votes(issue, bundle, cls)
            usage.add(u)
            counts.reviewed += 1
            counts.juror_failures += failures
            res = arbiter_vote(votes, conflict_type(issue), version=self.version)
            target = flip_target(issue, cls) if res.final_action == "FLIP" else None
            if res.final_action == "FLIP" and target is None:
                res = VoteResult("FLAG", "POLARITY_UNCERTAIN", res.rule, res.version, res.votes, res.reason_codes,
                                 res.merged)
            record: JuryRecord = {"code": issue.code, "conflict_type": conflict_type(issue), **res.to_dict()}
            records.append(record)
            jury_details = {"jury": record}
            if res.final_action == "KEEP":
                counts.kept += 1
                out.append(issue.model_copy(update={"details": {**issue.details, **jury_details}}))
            elif res.final_action == "DROP":
                counts.dropped += 1
            elif res.final_action == "FLIP":
                counts.flipped += 1
                assert target is not None
                out.append(make_issue(
                    "JURY_FLIP", f"The jury ({self.version}, rule {res.rule}) found the opposite presence level "
                    f"for {target['doc_type']} in segment {target['segment_index']}: {target['from']} -> "
                    f"{target['to']} (finding {issue.code})", agent=agent, location=issue.location,
                    suggested_fix=f"Set {target['doc_type']} to {target['to']} in segment {target['segment_index']}",
                    details={**jury_details, "flip": target, "finding_code": issue.code}))
            else:
                counts.flagged += 1
                out.append(issue.model_copy(update={"details": {**issue.details, **jury_details}}))
                out.append(make_issue(
                    "JURY_FLAG", f"The jury could not settle finding {issue.code}: {res.flag_reason} "
                    f"(rule {res.rule}; votes {', '.join(f'{a}={v}' for a, v in res.votes.items())})",
                    agent=agent, location=issue.location,
                    suggested_fix="Decide whether the finding holds", details={**jury_details,
                                                                                "flag_reason": res.flag_reason,
                                                                                "finding_code": issue.code}))
        run = VerifierRun(agent=agent, phase="jury", implementation=self.name, issue_count=len(out),
                          llm_calls=usage.llm_calls, cache_hits=usage.cache_hits, input_tokens=usage.input_tokens,
                          output_tokens=usage.output_tokens, votes=records)
        return out, run, counts, usage


async def review_judgment(agent: str, bundle: DocumentBundle, cls: ClassificationOutput, result: JudgmentResult,
                          jury: Jury | None) -> tuple[list[Issue], list[VerifierRun], Usage]:
    """The pipeline's one call: no jury (the default) → the judgment's issues unchanged, no run."""
    if jury is None:
        return result.issues, [], Usage()
    issues, run, _, usage = await jury.review(agent, bundle, cls, result)
    return issues, [run], usage
