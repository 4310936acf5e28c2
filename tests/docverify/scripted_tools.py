"""A pydantic-ai FunctionModel function that answers every call with the next scripted
output-tool arguments (the last one repeats; an exception is raised), counting the calls and
keeping each call's user prompt — for the jury and second-opinion tests."""

from __future__ import annotations

from pydantic_ai.messages import ModelResponse, ToolCallPart


class ToolScript:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0
        self.prompts: list[str] = []

    def __call__(self, messages, info):
        self.calls += 1
        self.prompts.append(messages[-1].parts[-1].content)
        a = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(a, BaseException):
            raise a
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, a)])


def votes(*pairs):
    """A juror voting (action, reason_code) per call: ``votes(("KEEP", "OTHER"))``."""
    return ToolScript(*(p if isinstance(p, BaseException) else {"vote": p[0], "reason_code": p[1]} for p in pairs))
