"""The verifiers, in order: the one list every other module reads (ADR 0002).

Adding a verifier V6 is: a module ``verify/v6_<name>.py`` declaring its ``SPEC``
(:class:`~docverify.verify.spec.VerifierSpec`: codes, rule phase, offline judgment, prompt,
findings model, LLM inputs, new catalogue rows), one line below, its prompt file
``include/prompts/<prompt>.md``. Its new codes are rows of its spec (``new_codes``); the registry's
catalogue (:attr:`Registry.catalogue`) is the specification's plus those, built once; an issue's agent
must be one of the registry's ids (checked by :func:`docverify.pipeline.document.assemble`). A test's
toy verifier is ``REGISTRY.extended(TOY)``: nothing global changes (ADR 0039). ``tests/docverify/test_registry.py`` checks the registry, the code catalogue and
the prompts against each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from docverify.domain.codes import CATALOGUE, CodeSpec
from docverify.verify import v1_schema, v2_consistency, v3_traps, v4_evidence
from docverify.verify.spec import VerifierSpec


@dataclass(frozen=True)
class Registry:
    """An ordered, checked set of verifiers (V1 first: its parse step runs before the others)."""

    specs: tuple[VerifierSpec, ...]
    #: the specification's catalogue plus every verifier's ``new_codes``, built once (read-only)
    catalogue: Mapping[str, CodeSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = [s.agent for s in self.specs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"two verifiers share an agent id: {ids}")
        if not ids or ids[0] != "V1":
            raise ValueError("V1 (the schema check) must be the first verifier")
        codes = [c for s in self.specs for c in s.codes]
        if len(set(codes)) != len(codes):
            raise ValueError("a code is claimed by two verifiers")
        rows = dict(CATALOGUE)
        for spec in self.specs:
            for row in spec.new_codes:
                if rows.get(row.code, row) != row:
                    raise ValueError(f"verifier {spec.agent}: {row.code} is already in the catalogue as {rows[row.code]}")
                rows[row.code] = row
        object.__setattr__(self, "catalogue", MappingProxyType(rows))
        for spec in self.specs:
            spec.check(self.catalogue)

    def __iter__(self) -> Iterator[VerifierSpec]:
        return iter(self.specs)

    def __getitem__(self, agent: str) -> VerifierSpec:
        for spec in self.specs:
            if spec.agent == agent:
                return spec
        raise KeyError(f"no verifier {agent!r} in the registry ({', '.join(self.agent_ids)})")

    def __contains__(self, agent: object) -> bool:
        return any(s.agent == agent for s in self.specs)

    @property
    def agent_ids(self) -> tuple[str, ...]:
        """Every verifier's id, in order (the agent type of issues and runs)."""
        return tuple(s.agent for s in self.specs)

    @property
    def judged(self) -> tuple[VerifierSpec, ...]:
        """The verifiers with a judgment phase (V2, V3, V4), in order."""
        return tuple(s for s in self.specs if s.judged)

    @property
    def judged_ids(self) -> tuple[str, ...]:
        return tuple(s.agent for s in self.judged)

    def extended(self, *specs: VerifierSpec) -> Registry:
        """A copy with ``specs`` appended (a test's toy verifier; this registry is unchanged)."""
        return Registry((*self.specs, *specs))

    def code_owner(self, code: str) -> VerifierSpec | None:
        return next((s for s in self.specs if code in s.codes), None)


def build(specs: Iterable[VerifierSpec]) -> Registry:
    return Registry(tuple(specs))


#: The verifiers of the pipeline, in order. One line per verifier.
REGISTRY = build([
    v1_schema.SPEC,
    v2_consistency.SPEC,
    v3_traps.SPEC,
    v4_evidence.SPEC,
])
