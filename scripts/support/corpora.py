"""Where the shared corpora are (test and benchmark support, not shipped: ADR 0053).

The corpora are not in the repository. ``$DOCVERIFY_CORPORA`` names their folder; else they are looked
for beside the checkout (``../shared/corpora``), then at the workplace's fixed location, so a clone made
elsewhere (the fresh-clone ``make test`` of ``docs/benchmarks/suite.md``, in a temporary folder) still
finds them. The product names no corpora folder: ``docverify evaluate --corpus DIR`` is given one.
"""

from __future__ import annotations

import os
import pathlib

#: Where the corpora are looked for, in order, after ``$DOCVERIFY_CORPORA``.
CORPORA_FALLBACKS = (pathlib.Path(__file__).resolve().parents[3] / "shared" / "corpora",
                     pathlib.Path("/work/shared/corpora"))


def default_corpora_dir() -> pathlib.Path:
    """``$DOCVERIFY_CORPORA``, else the first of :data:`CORPORA_FALLBACKS` that is a folder, else the
    first (so an error names where they belong)."""
    env = os.environ.get("DOCVERIFY_CORPORA")
    if env:
        return pathlib.Path(env)
    for candidate in CORPORA_FALLBACKS:
        if candidate.is_dir():
            return candidate
    return CORPORA_FALLBACKS[0]
