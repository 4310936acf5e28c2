"""A loopback HTTP server speaking just enough of the OpenAI Chat Completions API
(``POST /v1/chat/completions``) for the real ``openai`` client behind pydantic-ai's
``OpenAIChatModel`` — how a hospital that cannot send PHI out runs the judge on a self-hosted model
(vLLM, Ollama, any OpenAI-compatible server). A TEST FAKE, never a model.

The bodies are **built** in the documented shape of the Chat Completions API (a ``chat.completion``
object whose one choice's assistant message calls the request's output tool, ``finish_reason``
``tool_calls``, ``usage`` with ``prompt_tokens`` / ``completion_tokens``; errors as ``{"error":
{"message", "type", "param", "code"}}``). They are not recordings: the shared corpora
(``realapi/``) hold no OpenAI-shaped answer (ADR 0034).

Answers, like :mod:`tests.fake_gemini`: ``fake.script = [(status, reply), …]`` — the n-th request
gets the n-th entry (the last one repeats); ``reply`` is a JSON body, a callable ``body -> JSON
body`` or :data:`MALFORMED` (a 200 whose body is not JSON). Without a script every request is
answered by ``fake.brain`` (default: :func:`no_findings` — a judgment with no findings). Counted:
``requests`` (path, body), ``count``.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackServer

MALFORMED = object()
_IDS = itertools.count(1)


def output_tool(body: dict) -> str:
    """The name of the request's (only) output tool."""
    return body["tools"][0]["function"]["name"]


def tool_parameters(body: dict) -> dict:
    return body["tools"][0]["function"].get("parameters") or {}


def user_text(body: dict) -> str:
    out = []
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        else:
            out += [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    return "".join(out)


def tool_call(body: dict, args: dict, *, prompt_tokens: int | None = None, completion_tokens: int = 40,
              model: str | None = None) -> dict:
    """A ``chat.completion`` whose assistant message calls the request's output tool with ``args``."""
    n = next(_IDS)
    prompt = prompt_tokens if prompt_tokens is not None else max(1, len(user_text(body)) // 4)
    return {
        "id": f"chatcmpl-fake{n:06d}",
        "object": "chat.completion",
        "created": 1764201600 + n,
        "model": model or body.get("model", "served-model"),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": None, "refusal": None,
                        "tool_calls": [{"id": f"call_fake{n:06d}", "type": "function",
                                        "function": {"name": output_tool(body), "arguments": json.dumps(args)}}]},
            "logprobs": None,
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                  "total_tokens": prompt + completion_tokens},
    }


def error_body(message: str, type_: str, code: str | None = None) -> dict:
    """The documented error object of the OpenAI API (vLLM answers the same shape)."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


RATE_LIMITED = (429, error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"))
SERVER_ERROR = (500, error_body("The server had an error while processing your request.", "server_error"))


def no_findings(body: dict) -> dict:
    return tool_call(body, {"findings": []})


class FakeOpenAI(LoopbackServer):
    def __init__(self) -> None:
        self.script: list[tuple[int, Any]] = []
        self.brain: Callable[[dict], dict] = no_findings
        self.requests: list[tuple[str, dict]] = []
        self.count = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.count += 1
                    fake.requests.append((self.path, body))
                    n = len(fake.requests)
                    status, reply = fake.script[min(n, len(fake.script)) - 1] if fake.script else (200, fake.brain)
                if not self.path.endswith("/chat/completions"):
                    status, reply = 404, error_body(f"no route {self.path}", "invalid_request_error")
                if reply is MALFORMED:
                    data = b'{"id": "chatcmpl-x", "choices": [{"message": {"tool_calls": ['
                else:
                    try:
                        data = json.dumps(reply(body) if callable(reply) else reply).encode()
                    except Exception as exc:  # noqa: BLE001 - a fake's bug is a 500, not a dropped socket
                        status, data = 500, json.dumps(error_body(type(exc).__name__, "server_error")).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.serve(Handler, path="/v1")

    def kinds(self) -> list[str]:
        """Each request's call kind, from its output tool's schema: ``V2_BLIND``, ``classify`` or a judgment."""
        out = []
        for _, body in self.requests:
            params = json.dumps(tool_parameters(body))
            out.append("V2_BLIND" if "segment_readings" in params else
                       "classify" if "dominant_type_overall" in params else "judgment")
        return out
