"""A loopback HTTP server speaking just enough of the Gemini API (``generateContent``) for the real
``google-genai`` client behind pydantic-ai's ``GoogleModel`` — a TEST FAKE, never a model.

Two ways to answer:

* a **script**: ``fake.script = [(status, reply), …]`` — the n-th request gets the n-th entry (the
  last one repeats). ``reply`` is a JSON body, a callable ``body -> JSON body``, :data:`MALFORMED`
  (a 200 whose body is not JSON) or ``Slow(seconds, reply)``;
* the **brain** (when the script is empty): :func:`offline_brain` answers a classification request
  with the *offline* classifier's output for the pages in the prompt, every judgment with no
  findings, every juror with KEEP and the V5 second opinion with AUTO_ACCEPT at 0.9. It lets the nightly DAG run end to end against the real client without a model; what
  it answers is the embedded default's algorithm, so nothing here is an LLM verdict.

Token counts in the usage metadata are ``len(text) // 4`` — plausible numbers for the cost and
usage plumbing, not a tokenizer.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
                          "cachedContentTokenCount": cached_tokens,
                          "totalTokenCount": prompt_tokens + output_tokens},
        "modelVersion": "gemini-2.5-flash",
    }


def text_reply(text: str, *, prompt_tokens: int = 400, output_tokens: int = 30) -> dict:
    """A generateContent response with plain text (a call without output tools)."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
                          "totalTokenCount": prompt_tokens + output_tokens},
        "modelVersion": "gemini-2.5-flash",
    }


def error_body(code: int, status: str, message: str = "fake error") -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def user_text(body: dict) -> str:
    return "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))


def request_kind(body: dict) -> str:
    """``classify`` or the judgment (V2/V3/V4), from the output tool's schema."""
    params = json.dumps(body["tools"][0]["functionDeclarations"][0])
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


def offline_brain(body: dict) -> dict:
    """Classification: the offline classifier on the prompt's pages. Judgments: no findings."""
    from docverify.judges import OfflineJudge
    from docverify.models import DocumentBundle, Page

    text = user_text(body)
    kind = request_kind(body)
    if kind in ("JURY", "JURY_EVIDENCE"):  # every juror upholds the finding it is shown
        args: dict = {"vote": "KEEP", "reason_code": "SUPPORTED_BY_TEXT"}
    elif kind == "V5_SECOND":  # agrees with an acceptance; the safety overrides keep the table's retries
        args = {"route": "AUTO_ACCEPT", "confidence": 0.9, "reasoning": "no serious issue"}
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


class FakeGemini:
    def __init__(self) -> None:
        self.script: list[tuple[int, Any]] = []
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append((self.path, body))
                    n = len(fake.requests)
                    status, reply = fake.script[min(n, len(fake.script)) - 1] if fake.script else (200, offline_brain)
                if isinstance(reply, Slow):
                    time.sleep(reply.seconds)
                    reply = reply.reply
                if reply is MALFORMED:
                    data = b'{"candidates": [{"content": {"parts": [{"functionCall": '
                else:
                    try:
                        data = json.dumps(reply(body) if callable(reply) else reply).encode()
                    except Exception as exc:  # noqa: BLE001 - a fake's bug is a 500, not a dropped socket
                        status, data = 500, json.dumps(error_body(500, "INTERNAL", type(exc).__name__)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> FakeGemini:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kinds(self) -> list[str]:
        return [request_kind(b) for _, b in self.requests]
