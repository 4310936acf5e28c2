"""A loopback HTTP server speaking just enough of the Gemini API (``generateContent``) for the real
``google-genai`` client behind pydantic-ai's ``GoogleModel`` — a TEST FAKE, never a model.

Two ways to answer:

* a **script**: ``fake.script = [(status, reply), …]`` — the n-th request gets the n-th entry (the
  last one repeats). ``reply`` is a JSON body, a callable ``body -> JSON body``, :data:`MALFORMED`
  (a 200 whose body is not JSON) or ``Slow(seconds, reply)``;
  V2's blind reading (ADR 0034) is answered by the brain and kept apart (``blind_requests``, not
  ``requests``, not consuming the script) unless ``script_blind`` is True — so a script written for
  one judgment's call still answers that call; a test of the blind reading's own faults sets it;
* the **brain** (when the script is empty): :func:`offline_brain` answers a classification request
  with the *offline* classifier's output for the pages in the prompt, every judgment with no
  findings, every juror with KEEP and the V5 second opinion with AUTO_ACCEPT at 0.9. It lets the nightly DAG run end to end against the real client without a model; what
  it answers is the embedded default's algorithm, so nothing here is an LLM verdict.

Token counts in the usage metadata are ``len(text) // 4`` — plausible numbers for the cost and
usage plumbing, not a tokenizer.

A provider's limits, for benchmarks and quota tests (issue 15): ``latency_s`` (every answer takes
at least that long), ``max_concurrency`` (requests beyond it queue, as on a saturated endpoint)
and ``rpm`` (requests accepted per sliding ``window_s``; beyond it a 429 ``RESOURCE_EXHAUSTED``
with a ``Retry-After`` header and a ``google.rpc.RetryInfo`` detail saying when the window has
room again; a refused request does not count against the quota). Counted: ``requests``,
``throttled`` (429s sent by the quota), ``peak_concurrency``, ``busy_s`` (the sum of the accepted
requests' time in the handler: effective concurrency = busy_s / wall).

    python -m tests.fake_gemini --latency 1 --rpm 60 --port 0   # a standalone endpoint (prints its URL)

The **Batch API** (issue 15, batch mode), as the ``google-genai`` client speaks it: the Files API's
resumable upload (``POST /upload/v1beta/files`` then the session URL, ``upload, finalize``),
``POST /v1beta/models/<model>:batchGenerateContent`` (an uploaded JSONL file, ``{"key", "request"}``
per line, or inline requests), ``GET /v1beta/batches/<id>`` (PENDING, RUNNING for the second half of
``batch_delay_s``, then SUCCEEDED — or FAILED with ``batch_job_fails``), results as a file
(``GET /v1beta/files/<id>:download``: ``{"key", "response" | "error"}`` per line) for a file
source, inline for inline requests. Each item is answered like ``generateContent`` with the
brain (:func:`offline_brain`: the same answer, never the script); ``batch_fail_fraction`` of the
items (spread evenly) answer an INTERNAL error instead, ``batch_degenerate_fraction`` a degenerate
answer (:func:`degenerate`). Counted: ``batch_jobs`` (created),
``batch_items``, ``batch_polls``, ``uploads``, ``downloads``; these requests are not counted in
``requests``/``count`` (the online ``generateContent`` calls). A finished job has the fields of the
real ``batches.get`` in ``shared/corpora/realapi/batch/ellmer_state-capitals-gemini.json``
(``inputConfig``, ``output``/``response.responsesFile``, ``batchStats`` as strings, times). Faults
(issue 22): ``batch_poll_errors`` (the next N polls answer 503 UNAVAILABLE), ``batch_results_late_polls``
(a job reported SUCCEEDED before its results are set, for N polls); ``jobs_served`` answers a
recorded ``batches.get`` body verbatim.

An **outage** (off by default): while ``overloaded`` is True (a toggle a test or benchmark flips), or
for ``outage_s`` seconds from the arrival of request number ``outage_after_requests + 1`` (a window
that opens by itself), every ``generateContent`` request is answered at once with the real overload
answer — HTTP 503 and the body of ``err_503_overloaded`` (``UNAVAILABLE`` "The model is overloaded.
Please try again later.") read from ``shared/corpora/realapi/errors/errors_from_issues.json`` at run
time (:func:`overload_body`), never copied here. Such a request is counted in ``requests``/``count``
and in ``overloaded_answers``, not against the quota; ``outage_opened_at``/``outage_closed_at`` are
the window's ``time.monotonic()`` bounds.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import json
import math
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackServer

MALFORMED = object()
PAGE_RE = re.compile(r'<page number="(\d+)"[^>]*>\n(.*?)\n</page>', re.S)


@dataclass
class Slow:
    seconds: float
    reply: Any


def function_call(body: dict, args: dict, *, prompt_tokens: int = 1200, output_tokens: int = 40,
                  cached_tokens: int = 0) -> dict:
    """A generateContent response calling the request's (only) output tool with ``args``."""
    name = body["tools"][0]["functionDeclarations"][0]["name"]
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage_metadata(prompt_tokens, output_tokens, cached_tokens),
        "modelVersion": answering_model(),
        "responseId": response_id(),
    }


def text_reply(text: str, *, prompt_tokens: int = 400, output_tokens: int = 30) -> dict:
    """A generateContent response with plain text (a call without output tools)."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage_metadata(prompt_tokens, output_tokens),
        "modelVersion": answering_model(),
        "responseId": response_id(),
    }


def usage_metadata(prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> dict:
    """``usageMetadata`` as the recordings of realapi/gemini/ have it: proto3 JSON omits a zero
    (``cachedContentTokenCount`` only when some were cached, with its ``cacheTokensDetails``), and the
    prompt's tokens per modality."""
    usage: dict[str, Any] = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
                             "totalTokenCount": prompt_tokens + output_tokens,
                             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}]}
    if cached_tokens:
        usage["cachedContentTokenCount"] = cached_tokens
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached_tokens}]
    return usage


_RESPONSE_IDS = itertools.count(1)
_ANSWERING = threading.local()


def answering_model() -> str:
    """The ``modelVersion`` of an answer built by this module: the model the request was sent to (the
    URL's ``models/<model>``, or the batch job's model), as the real API names the model that
    answered; ``gemini-2.5-flash`` outside a request."""
    return getattr(_ANSWERING, "model", None) or "gemini-2.5-flash"


def _model_of_path(path: str) -> str | None:
    m = re.search(r"/models/([^/:?]+)", path)
    return m.group(1) if m else None


def response_id() -> str:
    """A ``responseId`` like the real ones (22 URL-safe characters), unique per answer of the process."""
    return f"fake{next(_RESPONSE_IDS):018d}"


def degenerate(response: dict, finish_reason: str = "MAX_TOKENS") -> dict:
    """``response`` made degenerate (schema-valid arguments, but the generation was cut): ``finish_reason``
    instead of STOP and no ``candidatesTokenCount`` (proto3 omits the zero), as
    realapi/gemini/max_tokens_empty_25pro.json's usage block shows."""
    out = json.loads(json.dumps(response))
    out["candidates"][0]["finishReason"] = finish_reason
    usage = out.get("usageMetadata") or {}
    usage.pop("candidatesTokenCount", None)
    usage["totalTokenCount"] = usage.get("promptTokenCount", 0)
    return out


def error_body(code: int, status: str, message: str = "fake error") -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def user_text(body: dict) -> str:
    return "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))


def request_kind(body: dict) -> str:
    """``classify`` or the judgment (V2/V3/V4), from the output tool's schema."""
    params = json.dumps(body["tools"][0]["functionDeclarations"][0])
    if "segment_readings" in params:  # V2's blind reading (ADR 0034): no issue code in its schema
        return "V2_BLIND"
    if "NEGATION_SCOPE" in params:  # the jury's vote (issue 14); the evidence-facet prompt names itself
        return "JURY_EVIDENCE" if "juror C of three" in user_text(body) else "JURY"
    if "ESCALATE_TO_SME" in params:
        return "V5_SECOND"
    if "dominant_type_overall" in params:
        return "classify"
    for code, kind in (("LABEL_TEXT_MISMATCH", "V2"), ("TRAP_CONTEXT", "V3"), ("EVIDENCE_FABRICATED", "V4")):
        if code in params:
            return kind
    raise ValueError("unknown request kind")


def _is_blind(body: dict) -> bool:
    try:
        return request_kind(body) == "V2_BLIND"
    except (KeyError, IndexError, TypeError, ValueError):
        return False


def offline_brain(body: dict) -> dict:
    """Classification: the offline classifier on the prompt's pages. Judgments: no findings."""
    from docverify.domain.models import DocumentBundle, Page
    from docverify.judging.judges import OfflineJudge

    text = user_text(body)
    kind = request_kind(body)
    if kind in ("JURY", "JURY_EVIDENCE"):  # every juror upholds the finding it is shown
        args: dict = {"vote": "KEEP", "reason_code": "SUPPORTED_BY_TEXT"}
    elif kind == "V5_SECOND":  # agrees with an acceptance; the safety overrides keep the table's retries
        args = {"route": "AUTO_ACCEPT", "confidence": 0.9, "reasoning": "no serious issue"}
    elif kind == "V2_BLIND":  # each segment read on its own pages by the offline classifier
        args = {"segment_readings": blind_readings(text)}
    elif kind != "classify":
        args = {"findings": []}
    else:
        pages = [Page(page_num=int(n), text=t) for n, t in PAGE_RE.findall(text)]
        bundle = DocumentBundle(doc_id="fake", file_path="fake.pdf", sha256="0" * 64, total_pages=len(pages),
                                processing_timestamp="2026-01-01T00:00:00Z", parser="fake", pages=pages)
        result = asyncio.run(OfflineJudge().classify(bundle))
        args = result.classification.model_dump(mode="json", exclude={"doc_id", "classifier"})
    return function_call(body, args, prompt_tokens=max(1, len(text) // 4),
                         output_tokens=max(1, len(json.dumps(args)) // 4))


SEGMENTS_RE = re.compile(r"<segments>\n(.*?)\n</segments>", re.S)


def blind_readings(text: str) -> list[dict]:
    """The brain's blind reading (V2_BLIND): each segment of the prompt's ``<segments>`` block labelled
    with the offline classifier's dominant type on that segment's pages alone, at the confidence it
    gives that type (never the classification under verification: the prompt does not hold it)."""
    from docverify.domain.models import DocumentBundle, Page
    from docverify.judging.judges import OfflineJudge

    pages = {int(n): t for n, t in PAGE_RE.findall(text)}
    readings = []
    for seg in json.loads(SEGMENTS_RE.search(text).group(1)):
        own = [Page(page_num=i + 1, text=pages[n])
               for i, n in enumerate(n for n in sorted(pages) if seg["page_start"] <= n <= seg["page_end"])]
        bundle = DocumentBundle(doc_id="fake", file_path="fake.pdf", sha256="0" * 64, total_pages=len(own),
                                processing_timestamp="2026-01-01T00:00:00Z", parser="fake", pages=own)
        cls = asyncio.run(OfflineJudge().classify(bundle)).classification
        label = cls.dominant_type_overall
        conf = max((tc.confidence for sg in cls.segments for tc in sg.classifications if tc.doc_type == label),
                   default=0.5)
        readings.append({"segment_index": seg["segment_index"], "doc_type": label, "probability": conf,
                         "reason": "the offline classifier's reading of these pages (a test fake)"})
    return readings


def quota_body(retry_after: float) -> dict:
    """The Gemini API's 429 for a per-minute quota, with the RetryInfo pydantic-ai reads."""
    body = error_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded for metric: generate_content_requests "
                                                 "per minute per project per model. Please retry.")
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                 "retryDelay": f"{retry_after:.0f}s"}]
    return body


def overload_body() -> dict:
    """The Gemini API's real 503 overload body (``err_503_overloaded`` of the shared corpora's
    realapi/errors/errors_from_issues.json, read from there: ``$DOCVERIFY_CORPORA`` or the project's
    default corpora folder); FileNotFoundError when the corpora are absent."""
    import pathlib

    from scripts.support.corpora import default_corpora_dir

    path = pathlib.Path(default_corpora_dir()) / "realapi" / "errors" / "errors_from_issues.json"
    entry = json.loads(path.read_text())["err_503_overloaded"]
    assert entry["status"] == 503, entry
    return entry["body"]


def respond(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict | None = None,
            content_type: str = "application/json") -> None:
    """One answer of the fake (every endpoint); a client that gave up (timeout) is not an error."""
    try:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


class FakeGemini(LoopbackServer):
    def __init__(self, *, latency_s: float = 0.0, max_concurrency: int = 0, rpm: int = 0,
                 window_s: float = 60.0, keep_bodies: bool = True) -> None:
        self.script: list[tuple[int, Any]] = []
        #: V2's blind readings (ADR 0034) follow the script only when this is True; else (the default) a
        #: scripted fake answers them with the brain and keeps them in ``blind_requests``, not ``requests``
        self.script_blind = False
        self.blind_requests: list[tuple[str, dict]] = []
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.latency_s, self.rpm, self.window_s = latency_s, rpm, window_s
        self.keep_bodies = keep_bodies  # a long benchmark keeps counts only
        self.slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency > 0 else None
        self.accepted: collections.deque[float] = collections.deque()  # arrival times inside the window
        self.count = self.throttled = self.in_flight = self.peak_concurrency = 0
        self.busy_s = 0.0
        self.first_at: float | None = None
        self.last_at: float | None = None
        # the Batch API (see the module docstring)
        self.batch_delay_s = 0.0
        self.batch_fail_fraction = 0.0
        #: items (spread evenly) answered with a *degenerate* line: the brain's schema-valid arguments under
        #: finishReason MAX_TOKENS without candidatesTokenCount (what a truncated generation looks like)
        self.batch_degenerate_fraction = 0.0
        self.batch_job_fails = False
        self.batch_poll_errors = 0  # the next N GET batches/<id> answer 503 UNAVAILABLE (a transient poll error)
        self.batch_results_late_polls = 0  # polls of a SUCCEEDED job answered before its results are set
        self.jobs_served: dict[str, dict] = {}  # name -> a batches.get body answered verbatim (a recording)
        self.files: dict[str, bytes] = {}
        self.uploads_open: dict[str, bytearray] = {}
        self.jobs: dict[str, dict] = {}
        self.batch_jobs = self.batch_items = self.batch_polls = self.uploads = self.downloads = 0
        # an outage (see the module docstring): a toggle, or a window opened by the n-th request
        self.overloaded = False
        self.outage_after_requests: int | None = None
        self.outage_s = 0.0
        self.outage_opened_at: float | None = None
        self.outage_closed_at: float | None = None
        self.overloaded_answers = 0
        self._overload: bytes | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                fake._batch_get(self)

            def do_POST(self):  # noqa: N802
                if self.path.startswith("/upload/") or ":batchGenerateContent" in self.path:
                    fake._batch_post(self)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if fake.slots is not None:
                    fake.slots.acquire()
                try:
                    self._answer(body)
                finally:
                    if fake.slots is not None:
                        fake.slots.release()

            def _answer(self, body: dict) -> None:
                started = time.monotonic()
                with fake.lock:
                    fake.count += 1
                    blind_aside = bool(fake.script) and not fake.script_blind and _is_blind(body)
                    if blind_aside:  # answered by the brain, outside the script and `requests` (ADR 0034)
                        fake.blind_requests.append((self.path, body if fake.keep_bodies else {}))
                    else:
                        fake.requests.append((self.path, body if fake.keep_bodies else {}))
                    n = 0 if blind_aside else len(fake.requests)
                    down = fake._in_outage(started)
                    fake.overloaded_answers += down
                    refused = None if down else fake._over_quota(started)
                    if refused is not None:
                        fake.throttled += 1
                    elif not down:
                        fake.in_flight += 1
                        fake.peak_concurrency = max(fake.peak_concurrency, fake.in_flight)
                        fake.first_at = started if fake.first_at is None else fake.first_at
                if down:
                    respond(self, 503, fake._overload_data())
                    return
                if refused is not None:
                    respond(self, 429, json.dumps(quota_body(refused)).encode(), {"Retry-After": str(math.ceil(refused))})
                    return
                try:
                    self._reply(body, n, started)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1
                        fake.busy_s += time.monotonic() - started
                        fake.last_at = time.monotonic()

            def _reply(self, body: dict, n: int, started: float) -> None:
                with fake.lock:
                    status, reply = fake.script[min(n, len(fake.script)) - 1] if fake.script and n else (200, offline_brain)
                if isinstance(reply, Slow):
                    time.sleep(reply.seconds)
                    reply = reply.reply
                if reply is MALFORMED:
                    data = b'{"candidates": [{"content": {"parts": [{"functionCall": '
                else:
                    try:
                        _ANSWERING.model = _model_of_path(self.path)
                        data = json.dumps(reply(body) if callable(reply) else reply).encode()
                    except Exception as exc:  # noqa: BLE001 - a fake's bug is a 500, not a dropped socket
                        status, data = 500, json.dumps(error_body(500, "INTERNAL", type(exc).__name__)).encode()
                rest = fake.latency_s - (time.monotonic() - started)
                if rest > 0:
                    time.sleep(rest)
                respond(self, status, data)

            def log_message(self, *args):
                pass

        self.serve(Handler)

    def kinds(self) -> list[str]:
        return [request_kind(b) for _, b in self.requests]

    def _in_outage(self, now: float) -> bool:
        """Whether a request arriving at ``now`` meets the outage (the toggle, or the window, opened by
        the request after ``outage_after_requests`` and closed ``outage_s`` later). Called under the lock,
        after the request is counted."""
        if self.overloaded:
            return True
        if self.outage_after_requests is None or self.outage_s <= 0:
            return False
        if self.outage_opened_at is None:
            if self.count <= self.outage_after_requests:
                return False
            self.outage_opened_at = now
            self.outage_closed_at = now + self.outage_s
        return now < self.outage_closed_at  # type: ignore[operator]

    def _overload_data(self) -> bytes:
        if self._overload is None:
            self._overload = json.dumps(overload_body()).encode()
        return self._overload

    def _over_quota(self, now: float) -> float | None:
        """None if the request fits the quota (and is counted), else the seconds until it would.
        Called under the lock."""
        if self.rpm <= 0:
            return None
        while self.accepted and self.accepted[0] <= now - self.window_s:
            self.accepted.popleft()
        if len(self.accepted) < self.rpm:
            self.accepted.append(now)
            return None
        return max(0.001, self.accepted[0] + self.window_s - now)

    # ------------------------------------------------------------------ the Batch API
    def _batch_post(self, h: BaseHTTPRequestHandler) -> None:
        data = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        command = h.headers.get("X-Goog-Upload-Command", "")
        if h.path.startswith("/upload/v1beta/files") and command.startswith("start"):
            with self.lock:
                sid = f"u{len(self.uploads_open) + len(self.files) + 1}"
                self.uploads_open[sid] = bytearray()
            self._json(h, 200, {}, {"X-Goog-Upload-URL": f"{self.base_url}/upload/session/{sid}"})
            return
        if h.path.startswith("/upload/session/"):
            sid = h.path.rsplit("/", 1)[-1]
            with self.lock:
                buf = self.uploads_open[sid]
                buf.extend(data)
                final = "finalize" in command
                if final:
                    name = f"files/{sid}"
                    self.files[name] = bytes(self.uploads_open.pop(sid))
                    self.uploads += 1
            if not final:
                self._json(h, 200, {}, {"x-goog-upload-status": "active"})
                return
            import base64

            digest = base64.b64encode(hashlib.sha256(self.files[name]).hexdigest().encode()).decode()
            self._json(h, 200, {"file": {  # the File of realapi/batch/ellmer_google-upload.yml (its fields)
                "name": name, "displayName": name.split("/")[-1], "mimeType": "jsonl",
                "sizeBytes": str(len(self.files[name])), "createTime": "2026-11-22T01:00:00.159379Z",
                "updateTime": "2026-11-22T01:00:00.159379Z", "expirationTime": "2026-11-24T01:00:00.403313302Z",
                "sha256Hash": digest, "uri": f"{self.base_url}/v1beta/{name}", "state": "ACTIVE",
                "source": "UPLOADED"}}, {"x-goog-upload-status": "final"})
            return
        # POST /v1beta/models/<model>:batchGenerateContent
        model = h.path.split("/models/", 1)[-1].split(":", 1)[0]
        batch = json.loads(data)["batch"]
        source = batch.get("inputConfig") or batch.get("input_config") or {}
        file_name = source.get("fileName") or source.get("file_name")
        if file_name:
            if file_name not in self.files:
                self._json(h, 404, error_body(404, "NOT_FOUND", f"{file_name} not found"))
                return
            items = [json.loads(line) for line in self.files[file_name].decode().split("\n") if line.strip()]
        else:
            items = [{"key": (r.get("metadata") or {}).get("key"), "request": r["request"]}
                     for r in (source.get("requests") or {}).get("requests", [])]
        with self.lock:
            self.batch_jobs += 1
            name = f"batches/b{self.batch_jobs}"
            self.jobs[name] = {"name": name, "model": f"models/{model}", "created": time.monotonic(),
                               "display_name": batch.get("displayName") or batch.get("display_name"),
                               "items": items, "file": file_name or None, "done": None}
        self._json(h, 200, self._job_view(self.jobs[name]))

    def _job_state(self, job: dict) -> str:
        age = time.monotonic() - job["created"]
        if age < self.batch_delay_s / 2:
            return "BATCH_STATE_PENDING"
        if age < self.batch_delay_s:
            return "BATCH_STATE_RUNNING"
        return "BATCH_STATE_FAILED" if self.batch_job_fails else "BATCH_STATE_SUCCEEDED"

    def _job_view(self, job: dict) -> dict:
        state = self._job_state(job)
        meta: dict[str, Any] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                                "name": job["name"], "model": job["model"], "state": state}
        if job.get("display_name"):
            meta["displayName"] = job["display_name"]
        meta["createTime"] = meta["updateTime"] = "2026-11-22T01:00:00.000000001Z"
        if job["file"]:
            meta["inputConfig"] = {"fileName": job["file"]}
        out: dict[str, Any] = {"name": job["name"], "metadata": meta}
        if state == "BATCH_STATE_SUCCEEDED" and job.setdefault("late", self.batch_results_late_polls) > 0:
            job["late"] -= 1  # reported SUCCEEDED before its results are set (seen in live runs)
            out["done"] = True
            return out
        if state == "BATCH_STATE_FAILED":
            out["done"] = True
            out["error"] = {"code": 13, "message": "fake batch job failure"}
        elif state == "BATCH_STATE_SUCCEEDED":
            answers = self._run_job(job)
            meta["endTime"] = "2026-11-22T01:05:00.000000001Z"
            meta["batchStats"] = {"requestCount": str(len(answers)),  # int64 as strings, as Google sends them
                                  "successfulRequestCount": str(sum(1 for a in answers if "response" in a))}
            if job["file"]:
                meta["output"] = {"responsesFile": f"files/{job['name'].split('/')[-1]}-results"}
                out["response"] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                                            "GenerateContentBatchOutput", **meta["output"]}
            else:
                meta["output"] = {"inlinedResponses": {"inlinedResponses": [
                    {k: v for k, v in {"response": a.get("response"), "error": a.get("error"),
                                       "metadata": {"key": a["key"]}}.items() if v is not None} for a in answers]}}
            out["done"] = True
        return out

    def _run_job(self, job: dict) -> list[dict]:
        """Every item answered once, as generateContent's brain would (a fraction fails)."""
        with self.lock:
            if job["done"] is not None:
                return job["done"]
        answers = []
        frac, dfrac = self.batch_fail_fraction, self.batch_degenerate_fraction
        for i, item in enumerate(job["items"]):
            if frac > 0 and math.floor((i + 1) * frac) > math.floor(i * frac):
                answers.append({"key": item["key"], "error": {"code": 13, "message": "fake item failure"}})
                continue
            try:
                _ANSWERING.model = job["model"].removeprefix("models/")
                response = offline_brain(item["request"])
                if dfrac > 0 and math.floor((i + 1) * dfrac) > math.floor(i * dfrac):
                    response = degenerate(response)
                answers.append({"key": item["key"], "response": response})
            except Exception as exc:  # noqa: BLE001 - a fake's bug is a failed item
                answers.append({"key": item["key"], "error": {"code": 13, "message": type(exc).__name__}})
        with self.lock:
            if job["done"] is None:
                job["done"] = answers
                self.batch_items += len(answers)
                if job["file"]:
                    self.files[f"files/{job['name'].split('/')[-1]}-results"] = "".join(
                        json.dumps(a) + "\n" for a in answers).encode()
            return job["done"]

    def _batch_get(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0].removeprefix("/v1beta/")
        if path.startswith("batches/"):
            with self.lock:
                self.batch_polls += 1
                job = self.jobs.get(path)
                served = self.jobs_served.get(path)
                overloaded = self.batch_poll_errors > 0
                self.batch_poll_errors -= overloaded
            if overloaded:
                self._json(h, 503, error_body(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
            elif served is not None:
                self._json(h, 200, served)
            elif job is None:
                self._json(h, 404, error_body(404, "NOT_FOUND", f"{path} not found"))
            else:
                self._json(h, 200, self._job_view(job))
            return
        if path.startswith("files/") and path.endswith(":download"):
            name = path.removesuffix(":download")
            with self.lock:
                data = self.files.get(name)
                self.downloads += data is not None
            if data is None:
                self._json(h, 404, error_body(404, "NOT_FOUND", f"{name} not found"))
                return
            respond(h, 200, data, content_type="application/octet-stream")
            return
        self._json(h, 404, error_body(404, "NOT_FOUND", path))

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, body: dict, headers: dict | None = None) -> None:
        respond(h, status, json.dumps(body).encode(), headers)

    def stats(self) -> dict:
        with self.lock:
            span = (self.last_at - self.first_at) if self.first_at is not None and self.last_at is not None else 0.0
            return {"requests": self.count, "throttled": self.throttled, "peak_concurrency": self.peak_concurrency,
                    "busy_s": self.busy_s, "span_s": span,
                    "effective_concurrency": self.busy_s / span if span > 0 else 0.0}


def main() -> None:
    import argparse
    import signal
    import sys

    ap = argparse.ArgumentParser(description="a loopback fake Gemini endpoint (test fake, never a model)")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=0)
    ap.add_argument("--rpm", type=int, default=0)
    ap.add_argument("--stats", help="write the counters as JSON to this file on SIGTERM/SIGINT")
    args = ap.parse_args()
    fake = FakeGemini(latency_s=args.latency, max_concurrency=args.concurrency, rpm=args.rpm,
                      keep_bodies=False).start()
    print(fake.base_url, flush=True)

    def done(*_):
        if args.stats:
            with open(args.stats, "w") as fh:
                json.dump(fake.stats(), fh)
        fake.stop()
        sys.exit(0)

    signal.signal(signal.SIGTERM, done)
    signal.signal(signal.SIGINT, done)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
