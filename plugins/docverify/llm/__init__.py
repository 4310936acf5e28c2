"""The LLM judge on pydantic-ai: one module per job, imported from where each name is defined.

:mod:`~docverify.llm.judge` (:class:`~docverify.llm.judge.LLMJudge` itself),
:mod:`~docverify.llm.prompts` (prompt files, framing, the inputs of each call),
:mod:`~docverify.llm.schemas` (the output models),
:mod:`~docverify.llm.cache` (cache keys, the verdict cache),
:mod:`~docverify.llm.faults` (transient faults, throttling, the retry policies) and
:mod:`~docverify.stages.batch_mode` (batch mode's collect and apply passes).

This package re-exports nothing (ADR 0032). Logs carry only doc ids, prompt names/hashes, the
model id, cache hit/miss and token counts — never page text, snippets or model messages (PHI).
"""
