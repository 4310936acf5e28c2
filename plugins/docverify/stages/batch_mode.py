"""Batch mode (Variable ``docverify_llm_mode = batch``): the night's LLM requests that miss the verdict
cache go to Gemini batch jobs, and the answers go into the verdict cache, so that the usual
``verify[shard]`` tasks then run from the cache.

Three pieces, no Airflow (the DAG wires them around the Google provider's batch operators):

* **collect** (:func:`collect`): a pass of the same verify code (:func:`docverify.stages.verify.classification_for`
  and :func:`docverify.pipeline.document.verify_document`) over the night with a :class:`RecordingJudge`:
  its LLM transport, on a verdict-cache miss, records the request that the online judge would send
  (the exact ``generateContent`` body pydantic-ai builds, captured at the HTTP layer — no second
  copy of the prompt building) instead of sending it. A classification that is not cached stops
  the document there (:class:`~docverify.judging.judges.CallDeferred`): its judgments depend on it, so they
  are collected in the next round, after the classifications came back. The requests are written
  as the Batch API's JSONL, ASCII-escaped so that a line is a request whatever the text holds (``{"key": <verdict-cache key>, "request": {...}}``) to
  ``runs/<ds>/_llm_batch/<round>.requests.jsonl`` with an index (key → call kind, document).
  Nothing else is written: no result, no lineage line (with nothing to send, the round's record
  says so and no job is created: a re-run of a cached night creates none).
* **ingest** (:func:`ingest`): the batch job's answers (its results file, or its inline responses)
  are validated against the call's output schema and written into the verdict cache under the
  request's key, with the provenance the online path writes (plus the job's name). An item that
  failed, is missing, does not validate, or is *degenerate* (:func:`degenerate_reason`: a
  schema-valid answer the model did not really give — no candidate, a finishReason other than
  STOP, no output tokens, no or empty tool arguments) is counted and left out: verify finds no cache entry
  and calls the model online (the usual retries, throttling and ``VERIFICATION_INCOMPLETE``
  path) — a failed item, a degenerate answer or a failed job is never an answer. The round's record
  (``_stages/llm_batch_<round>.json``: requests, succeeded, failed, degenerate, missing, the job's
  state, tokens per document, the model that answered — each line's ``modelVersion``) is what the
  report prices at the batch rate.
* the parsing of one answer (:func:`output_of`) shared by both result forms.

Logs carry counts, call kinds, keys and the job's name — never request or answer text (PHI).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, JsonValue

from docverify.domain.models import DocumentBundle
from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
from docverify.judging.judges import CallDeferred, ClassifyResult, JudgeThrottled, Usage
from docverify.llm.cost import SEVERAL, price_name
from docverify.llm.faults import ClassificationError
from docverify.llm.judge import JudgeOutcome, LLMJudge
from docverify.llm.prompts import PROMPTS, load_prompt, prompt_hash, render_user_prompt
from docverify.llm.schemas import OUTPUT_TYPES
from docverify.pipeline.document import verify_document
from docverify.stages.common import Batch, StageStats, gather_bounded
from docverify.stages.results import Collected, StageOutcome
from docverify.stages.verify import classification_for, night_index, read_bundle

if TYPE_CHECKING:
    import httpx2
    from pydantic_ai.models.google import GoogleModel

log = logging.getLogger("docverify.stages.batch_mode")

ROUNDS = ("classify", "judgments")

#: One line of a batch job's results as Gemini wrote it (``{"key", "response" | "error"}``), or one of
#: its inline responses: JSON from outside, read here (:func:`degenerate_reason`, :func:`output_of`)
ResultItem = dict[str, JsonValue]
#: A ``GenerateContentResponse`` as JSON (the REST camelCase, or the SDK dump's snake_case)
Response = dict[str, JsonValue]
#: The batch job as the Gemini API describes it (``BatchJob.model_dump(mode="json")``), or
#: ``{"name": None, "state": "JOB_FAILED"}`` when the job task failed
JobJSON = Mapping[str, JsonValue]


def requests_rel(batch: Batch, round_key: str) -> str:
    return f"{batch.rs.night}/_llm_batch/{round_key}.requests.jsonl"


def index_rel(batch: Batch, round_key: str) -> str:
    return f"{batch.rs.night}/_llm_batch/{round_key}.index.json"


def job_rel(batch: Batch, round_key: str) -> str:
    """The round's batch job record (``{"name", "input_source", "model", "requests_sha256"}``),
    written before the job task waits, so a retry or a re-run re-attaches to the job."""
    return f"{batch.rs.night}/_llm_batch/{round_key}.job.json"


@dataclass
class BatchRequest:
    key: str
    kind: str
    doc_id: str
    body: dict[str, JsonValue]  # the generateContent request body, as captured


class _Captured(Exception):  # noqa: N818 - a signal from the capturing transport, not an error
    def __init__(self, body: dict[str, JsonValue]):
        super().__init__("request captured")
        self.body = body


def _capturing_model(model_name: str) -> GoogleModel:
    """A pydantic-ai ``GoogleModel`` of ``model_name`` whose HTTP transport raises the request body
    instead of sending it: the body the online judge would send, built by the same code."""
    import httpx2
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    def capture(request: httpx2.Request) -> httpx2.Response:
        raise _Captured(json.loads(request.content))

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(capture), timeout=60)
    return GoogleModel(model_name, provider=GoogleProvider(api_key="collect-only", http_client=client))


class RecordingJudge(LLMJudge):
    """The collect pass's judge: the online judge's id, settings and cache (so the same keys), on a
    model that records each cache miss (:attr:`recorded`, by key) instead of calling it. A missed
    classification raises :class:`CallDeferred`; a missed judgment is discarded by the pass."""

    def __init__(self, judge: LLMJudge):
        from pydantic_ai.models.fallback import FallbackModel

        # ADR 0034: a classifier on another model records its classifications on its own capturing model
        classifier = RecordingJudge(judge.classifier) if judge.classifier is not None else None

        # a fallback connection (fallback_conn_ids): the job goes to its first model; what the job does
        # not answer is asked online by verify, through the whole FallbackModel
        primary = judge.model.models[0] if isinstance(judge.model, FallbackModel) else judge.model
        model_name = getattr(primary, "model_name", None)
        if primary.system not in ("google-gla", "google-vertex", "google") or not model_name:
            raise ValueError(f"batch mode needs a Gemini model (Variable docverify_llm_mode=batch), not "
                             f"{primary.system}:{model_name}; set docverify_llm_mode to online")
        super().__init__(_capturing_model(model_name), judge.model_id, cache=judge.cache,
                         output_retries=judge.output_retries, timeout_s=None,
                         model_settings=judge.model_settings, retry_policy=None, registry=judge.registry,
                         classifier=classifier)
        self.batch_model = model_name
        self.recorded: dict[str, BatchRequest] = {}

    async def _call(self, kind: str, doc_id: str, inputs: dict[str, Any]) -> JudgeOutcome:
        key = self._key(kind, inputs)
        hit = await self._cached(kind, doc_id, key)
        if hit is not None:
            return hit
        if key not in self.recorded:
            _, instructions = load_prompt(PROMPTS[kind])
            try:
                await self._agents[kind].run(render_user_prompt(inputs, instructions))
            except _Captured as captured:
                self.recorded[key] = BatchRequest(key, kind, doc_id, captured.body)
            else:  # pragma: no cover - the transport never answers
                raise RuntimeError("the capturing transport sent a request")
        return JudgeOutcome(None, Usage(), key, error=CallDeferred(f"{kind} for {doc_id} recorded for a batch job"))

    async def classify(self, bundle: DocumentBundle) -> ClassifyResult:
        try:
            return await super().classify(bundle)
        except ClassificationError as exc:
            if isinstance(exc.cause, CallDeferred):
                raise exc.cause from None
            raise


def collect(batch: Batch, judge: LLMJudge, round_key: str, *, policy: VerifyPolicy = DEFAULT_POLICY) -> Collected:
    """The collect pass of one round (see the module docstring): the night's requests that miss the
    verdict cache, written as the Batch API's JSONL (``requests`` 0: nothing to send, no file written). ``policy``: the night's
    :class:`~docverify.domain.policy.VerifyPolicy`, the one the verify tasks use, so the pass takes the
    same decisions (and asks for the same calls) as the online path."""
    if round_key not in ROUNDS:
        raise ValueError(f"unknown batch round {round_key!r}")
    rec = RecordingJudge(judge)
    index = night_index(batch)
    by_id = {d.doc_id: d for d in index.documents}
    stats = StageStats("llm_batch_collect")  # thrown away: the pass's counts are the recorded requests
    deferred = 0

    async def one(doc_id: str) -> None:
        nonlocal deferred
        rs = batch.rs
        try:
            bundle = read_bundle(batch, doc_id)
            got = await classification_for(batch, by_id[doc_id], bundle, rs.result(doc_id), rec, stats,
                                        lineage_on=False)  # lineage: the verify task's
        except CallDeferred:
            deferred += 1
            return
        except JudgeThrottled:  # pragma: no cover - the recording judge sends nothing
            raise
        except Exception as exc:  # noqa: BLE001 - verify reports this document's fault; nothing to record
            log.info("batch collect %s doc_id=%s: unreadable (%s); verify will report it",
                     round_key, doc_id, type(exc).__name__)
            return
        if not isinstance(got, tuple):  # a DocResult: an input error, verify reports it
            return
        raw, _meta = got
        try:
            await verify_document(bundle, raw, rec, max_retries=0, contain_faults=True, policy=policy)
        except JudgeThrottled:  # pragma: no cover - the recording judge sends nothing
            raise
        except Exception as exc:  # noqa: BLE001 - verify reports this document's fault; nothing to record
            log.info("batch collect %s doc_id=%s: verify path failed (%s); verify will report it",
                     round_key, doc_id, type(exc).__name__)
        rs.forget(doc_id)

    async def run() -> None:
        await gather_bounded([functools.partial(one, d) for d in index.ok], batch.concurrency)

    asyncio.run(run())
    recorded, batch_model = _round_requests(rec, judge, round_key)
    by_kind: dict[str, int] = {}
    for r in recorded:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    rel = _write_round(batch, judge, round_key, recorded, batch_model)
    log.info("batch collect %s: %d request(s) miss the verdict cache %s; %d classification(s) awaited first",
             round_key, len(recorded), by_kind, deferred if round_key == "classify" else 0)
    return Collected(round=round_key, requests=len(recorded), by_kind=by_kind, rel=rel if recorded else None,
                     model=batch_model)


def _round_requests(rec: RecordingJudge, judge: LLMJudge, round_key: str) -> tuple[list[BatchRequest], str]:
    """The requests one round sends (in document, kind order) and the model of its job."""
    recorded_by_key = dict(rec.recorded)
    batch_model = rec.batch_model
    if rec.classifier is not None and not judge.self_verifying:
        # ADR 0034: the classifier and the judge on different models. A batch job has one model, so the
        # classify round sends only classifications (on the classifier's model) and the judgments round only
        # judgments; what a round leaves out is asked in the other round or online by verify
        assert isinstance(rec.classifier, RecordingJudge)
        if round_key == "classify":
            recorded_by_key = dict(rec.classifier.recorded)
            batch_model = rec.classifier.batch_model
    elif rec.classifier is not None:
        assert isinstance(rec.classifier, RecordingJudge)
        recorded_by_key.update(rec.classifier.recorded)
    return sorted(recorded_by_key.values(), key=lambda r: (r.doc_id, r.kind)), batch_model


def _write_round(batch: Batch, judge: LLMJudge, round_key: str, recorded: list[BatchRequest],
                 batch_model: str) -> str:
    """The round's index (always: an earlier run's must not be ingested) and its requests' JSONL; with
    nothing to send, no file and the round ingested at once (its record says so). Returns the JSONL's path."""
    rel = requests_rel(batch, round_key)
    batch.rs.write_json(index_rel(batch, round_key), {  # always: an earlier run's index must not be ingested
        "round": round_key, "model": batch_model,
        "model_id": judge.classifier_model_id if round_key == "classify" else judge.model_id,
        "requests": {r.key: {"kind": r.kind, "doc_id": r.doc_id} for r in recorded}})
    if recorded:
        lines = "".join(json.dumps({"key": r.key, "request": r.body}, sort_keys=True) + "\n"
                        for r in recorded)
        batch.rs.write_bytes(rel, lines.encode())
    else:  # nothing to send, no job: the round's record says so (the report names the mode)
        if batch.rs.exists(rel):
            batch.rs.delete(rel)
        ingest(batch, judge, round_key, None, None)
    return rel


# =========================================================================== results


def _object(value: JsonValue, what: str) -> dict[str, JsonValue]:
    """``value`` when it is a JSON object, else ValueError naming ``what`` (an unusable answer)."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


def _array(value: JsonValue, what: str) -> list[JsonValue]:
    """``value`` when it is a JSON array, else ValueError naming ``what``."""
    if not isinstance(value, list):
        raise ValueError(f"{what} is not an array")
    return value


def output_of(response: Response, kind: str) -> BaseModel:
    """The validated structured output of one ``GenerateContentResponse`` (the output tool's
    arguments), or ValueError."""
    candidates = _array(response.get("candidates") or [], "candidates")
    if not candidates:
        raise ValueError("no candidate")
    content = _object(_object(candidates[0], "a candidate").get("content") or {}, "content")
    for part in _array(content.get("parts") or [], "parts"):
        part = _object(part, "a part")
        call = part.get("functionCall") or part.get("function_call")
        if call is not None:
            return OUTPUT_TYPES[kind].model_validate(_object(call, "a function call").get("args") or {})
    raise ValueError("no function call in the answer")


def _get(d: JsonValue, *names: str) -> JsonValue:
    """The first of ``names`` present in ``d`` (the REST camelCase or the SDK dump's snake_case)."""
    return next((d[n] for n in names if isinstance(d, dict) and d.get(n) is not None), None)


def _whole(value: JsonValue) -> int:
    """A token count as the line gives it: a number or its text (int() refuses anything else)."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"a token count is a number, not {type(value).__name__}")


def degenerate_reason(response: Response) -> str | None:
    """Why a batch answer is *degenerate* — schema-valid perhaps, but not an answer the model gave —
    or None for a real answer. The rule (ADR 0005), on what the response line itself carries:

    1. it has a candidate (a line with only ``usageMetadata`` / ``promptFeedback`` was blocked or
       dropped);
    2. the candidate's ``finishReason`` is ``STOP`` (MAX_TOKENS, SAFETY, RECITATION, MODEL_ARMOR,
       UNEXPECTED_TOOL_CALL, … or none at all — proto3 omits FINISH_REASON_UNSPECIFIED — mean the
       generation did not end by itself);
    3. ``usageMetadata.candidatesTokenCount`` > 0: the model emitted output tokens (proto3 omits a
       zero; a real ``{"findings": []}`` tool call costs several tokens, thinking tokens do not
       count);
    4. the output tool was called with a non-empty ``args`` object (no call, an empty text part or
       ``args`` left out is no answer; an explicit ``{"findings": []}`` is one).

    So a real "no issue" is ``{"findings": []}`` in a finished (STOP) generation that produced
    output tokens; the same arguments under MAX_TOKENS, with zero output tokens or without a
    candidate are degenerate: not cached, asked online by verify, counted as ``degenerate``."""
    candidates = _get(response, "candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        return "no candidate"
    cand = candidates[0]
    finish = _get(cand, "finishReason", "finish_reason")
    finish = str(finish).rsplit(".", 1)[-1] if finish is not None else None
    if finish != "STOP":
        return f"finishReason {finish or 'unspecified'}"
    usage = _get(response, "usageMetadata", "usage_metadata") or {}
    try:
        out_tokens = _whole(_get(usage, "candidatesTokenCount", "candidates_token_count") or 0)
    except (TypeError, ValueError):
        out_tokens = 0
    if out_tokens <= 0:
        return "no output tokens"
    content = _get(cand, "content")
    parts = content.get("parts") if isinstance(content, dict) else None
    calls = [c for part in (parts if isinstance(parts, list) else []) if isinstance(part, dict)
             for c in (_get(part, "functionCall", "function_call"),) if isinstance(c, dict)]
    if not calls:
        return "no tool call"
    args = calls[0].get("args")
    if not isinstance(args, dict) or not args:
        return "empty tool arguments"
    return None


def answer_model(response: Response) -> str | None:
    """The model that answered a batch line (``modelVersion``), as the price table names it."""
    version = _get(response, "modelVersion", "model_version")
    return price_name(str(version) if version else None)


def _usage_of(response: Response) -> tuple[int, int, int]:
    u = _object(response.get("usageMetadata") or response.get("usage_metadata") or {}, "usageMetadata")
    def g(*names: str) -> int:
        return _whole(next((u[n] for n in names if u.get(n) is not None), 0))
    return (g("promptTokenCount", "prompt_token_count"),
            g("candidatesTokenCount", "candidates_token_count") + g("thoughtsTokenCount", "thoughts_token_count"),
            g("cachedContentTokenCount", "cached_content_token_count"))


def results_from_jsonl(data: bytes) -> dict[str, ResultItem]:
    """A results file (one ``{"key", "response" | "error"}`` per line) by key; unreadable lines are skipped
    (their requests count as missing)."""
    out: dict[str, ResultItem] = {}
    # "\n" only: str.splitlines would also split at U+2028 & co., which JSON may hold raw inside a string
    for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            item: JsonValue = json.loads(line)
            if not isinstance(item, dict):
                raise TypeError("a results line is a JSON object")
            out[str(item["key"])] = item
        except (ValueError, KeyError, TypeError):
            log.warning("batch results: line %d unreadable, skipped", n)
    return out


def results_from_inline(job: JobJSON) -> dict[str, ResultItem]:
    """The inline responses of a job (``job.model_dump(mode="json")``: ``dest.inlined_responses``,
    each with the request's ``metadata.key``) by key."""
    out: dict[str, ResultItem] = {}
    dest = job.get("dest")
    responses = dest.get("inlined_responses") if isinstance(dest, dict) else None
    for item in responses if isinstance(responses, list) else []:
        if not isinstance(item, dict):
            continue
        metadata = item.get("metadata") or {}
        key = metadata.get("key") if isinstance(metadata, dict) else None
        if key:
            out[str(key)] = {"key": key, "response": item.get("response"), "error": item.get("error")}
    return out


def _answer_of(item: ResultItem | None, kind: str, what: str) -> tuple[BaseModel, Response] | str:
    """(the answer, its response) of one result item, or why it is none (``missing`` / ``failed`` /
    ``degenerate``): an item that is no usable answer is asked online by verify (logged with ``what``:
    ids, never content)."""
    if item is None:
        return "missing"
    response, error = item.get("response"), item.get("error")
    if error or not isinstance(response, dict):
        log.warning("%s: item failed (%s); verify calls it online", what,
                    error.get("code", "no response") if isinstance(error, dict) else "no response")
        return "failed"
    why = degenerate_reason(response)
    if why is not None:  # schema-valid perhaps, but not an answer: never "no issue"
        log.warning("%s: degenerate answer (%s); verify calls it online", what, why)
        return "degenerate"
    try:
        return output_of(response, kind), response
    except Exception as exc:  # noqa: BLE001 - an unusable answer is a failed item
        log.warning("%s: answer unusable (%s); verify calls it online", what, type(exc).__name__)
        return "failed"


def _count_usage(per_doc: dict[str, dict[str, int]], totals: dict[str, int], doc_id: str,
                 response: Response) -> None:
    """One answer's tokens into its document's counts and the round's totals."""
    i, o, c = _usage_of(response)
    d = per_doc.setdefault(doc_id, {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0})
    d["requests"] += 1
    for name, n in (("input_tokens", i), ("output_tokens", o), ("cached_tokens", c)):
        d[name] += n
        totals[name] += n


def ingest(batch: Batch, judge: LLMJudge, round_key: str, job: JobJSON | None,
           results: dict[str, ResultItem] | None) -> StageOutcome:
    """Write one round's batch answers into the verdict cache (see the module docstring).
    ``job``: the batch job as a dict (``name``, ``state``) or None when no job ran (it failed, or
    nothing was sent); ``results``: the answers by key (:func:`results_from_jsonl` /
    :func:`results_from_inline`), None when there are none. Returns the round's record."""
    stats = StageStats("llm_batch")
    idx = batch.rs.get_json(index_rel(batch, round_key), memo=False) or {"requests": {}}
    wanted: dict[str, dict[str, str]] = idx.get("requests") or {}
    name = (job or {}).get("name")
    job_name = name if isinstance(name, str) else None
    state = str((job or {}).get("state") or ("NO_JOB" if wanted else "NOTHING_TO_SEND"))
    results = results or {}
    counts = {"requests": len(wanted), "succeeded": 0, "failed": 0, "degenerate": 0, "missing": 0}
    answered_by: set[str] = set()
    per_doc: dict[str, dict[str, int]] = {}
    totals = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    cache = judge.cache
    for key, meta in wanted.items():
        kind, doc_id = meta["kind"], meta["doc_id"]
        answer = _answer_of(results.get(key), kind, f"batch {round_key} job={job_name} {kind} doc_id={doc_id} key={key}")
        if isinstance(answer, str):
            counts[answer] += 1
            continue
        output, response = answer
        if cache is not None:
            cache.put(key, output.model_dump(mode="json"),
                      model_id=judge.classifier_model_id if kind == "classify" else judge.model_id, prompt=PROMPTS[kind],
                      prompt_hash=prompt_hash(PROMPTS[kind]), call=kind, batch_job=job_name)
        counts["succeeded"] += 1
        answered_by.add(answer_model(response) or idx.get("model") or "")
        _count_usage(per_doc, totals, doc_id, response)
    fallback = counts["failed"] + counts["degenerate"] + counts["missing"]
    if wanted:
        log.info("batch %s job=%s state=%s: %d request(s), %d answered into the verdict cache, %d failed, "
                 "%d degenerate, %d missing; %d will be asked online by verify", round_key, job_name, state,
                 counts["requests"], counts["succeeded"], counts["failed"], counts["degenerate"], counts["missing"],
                 fallback)
    stats.docs = len(per_doc)
    # priced by the model that answered (each line's modelVersion), not the judge's configured name (a
    # fallback connection's "fallback:a,b" has no price); several → "a+b", which the report does not price
    answered_by.discard("")
    stats.price_model = (SEVERAL.join(sorted(answered_by)) if answered_by
                         else price_name(judge.price_model))
    return StageOutcome(stats.save(batch, f"llm_batch_{round_key}", llm_batch={
        "round": round_key, "job": job_name, "state": state, **counts, "online_fallback": fallback, **totals,
        "model": idx.get("model"), "answered_by": sorted(answered_by)}, llm_batch_per_document=per_doc))
