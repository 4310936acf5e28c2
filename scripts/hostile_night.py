"""The hostile night's figures for the README ("What can go wrong"): one night with one hostile
input of every kind, the heavy ones included (20,000 blank pages, a 5 MB text page, a 1 GB flate
bomb), run in process through every stage on a fresh local root.

    .venv/bin/python scripts/hostile_night.py      # (make hostile)

Prints the documents, how many were lost, silently accepted, read or written outside the root
(audit hook), escalated with a typed error, and the peak resident memory of this process and of
its largest parse worker (getrusage)."""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

from scripts.support.corpora import default_corpora_dir  # noqa: E402
from tests.hostile import kit  # noqa: E402

from docverify.judging.judges import OfflineJudge  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="docverify-hostile-") as tmp:
        corpora = default_corpora_dir()
        t0 = time.perf_counter()
        night = kit.make_night(pathlib.Path(tmp), corpora=corpora if corpora.is_dir() else None, heavy=True)
        t1 = time.perf_counter()
        run = kit.run_night(night, OfflineJudge())
        t2 = time.perf_counter()
        figures = kit.check_night(night, run)
    figures.update(build_seconds=round(t1 - t0, 1), run_seconds=round(t2 - t1, 1), peak_rss_mb=kit.peak_rss_mb(),
                   errors_by_code=dict(sorted(_codes(run).items())))
    print(json.dumps(figures, indent=2))


def _codes(run: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in run["report"]["errors"]:
        out[e["error"]] = out.get(e["error"], 0) + 1
    return out


if __name__ == "__main__":
    main()
