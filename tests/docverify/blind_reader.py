"""V2's blind reading (ADR 0034) kept apart in FunctionModel tests: :func:`blind_aside` wraps a
FunctionModel function so that a blind-reading call (its output tool has ``segment_readings``) goes to
a separate reader and every other call to the wrapped function — a test written for one judgment's
call still scripts that call. The default reader has no opinion (every segment read at probability
0.0: never a disagreement) and counts its calls; tests of the blind reading itself script their own."""

from __future__ import annotations

import json
import re

from pydantic_ai.messages import ModelResponse, ToolCallPart

SEGMENTS_RE = re.compile(r"<segments>\n(.*?)\n</segments>", re.S)


def is_blind(info) -> bool:
    return "segment_readings" in json.dumps(info.output_tools[0].parameters_json_schema)


def prompt_text(messages) -> str:
    return "".join(str(getattr(p, "content", "")) for m in messages[:1] for p in m.parts)


class NoOpinion:
    """A blind reader that reads every segment of the prompt at probability 0.0."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages, info) -> ModelResponse:
        self.calls += 1
        segments = json.loads(SEGMENTS_RE.search(prompt_text(messages)).group(1))
        readings = [{"segment_index": s["segment_index"], "doc_type": "Other", "probability": 0.0,
                     "reason": "no opinion (a test reader)"} for s in segments]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"segment_readings": readings})])


def blind_aside(fn, reader=None):
    """``fn`` for every call but the blind readings, which go to ``reader`` (default :class:`NoOpinion`,
    available as the wrapper's ``.reader``)."""
    reader = reader if reader is not None else NoOpinion()

    def wrapped(messages, info):
        return reader(messages, info) if is_blind(info) else fn(messages, info)

    wrapped.reader = reader  # type: ignore[attr-defined]
    return wrapped
