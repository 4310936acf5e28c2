"""Compatibility: the V5 table moved to :mod:`docverify.arbiters.v5` (beside the CR_V2 vote and
the decision arbiter). ``from docverify.arbiter import decide`` keeps working."""

from docverify.arbiters.v5 import RULES, Counts, Rule, count, decide

__all__ = ["RULES", "Counts", "Rule", "count", "decide"]
