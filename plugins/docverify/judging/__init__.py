"""The judgment phases behind one interface (:mod:`docverify.judging.judges`); the offline judge
and the LLM judge (:mod:`docverify.llm.judge`) implement it."""
