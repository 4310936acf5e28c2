"""The arbiters, one module each, rules as ordered data (the documents named are the specification's,
in shared/spec, outside this repository):

* :mod:`.v5` — the V5 table of ``v5_arbiter.md`` (routes a document from its issues);
* :mod:`.cr_vote` — the CR_V2 vote (and CR v1) of ``cr_v2_vote.md`` (three agents' votes → one action);
* :mod:`.fraud_decision` — the decision arbiter of ``decision_arbiter.md`` (an LLM judge with a
  deterministic fallback and safety overrides; written for fraud decisions).
"""
