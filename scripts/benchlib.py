"""What every benchmark script does last: print its Markdown report and write it to
``docs/benchmarks/<name>`` (unless ``--no-write``)."""

from __future__ import annotations

import pathlib

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def publish(lines: list[str], name: str, *, write: bool = True) -> str:
    """Join ``lines``, print them, and write ``docs/benchmarks/<name>`` when ``write``."""
    text = "\n".join(lines) + "\n"
    print(text)
    if write:
        out = BENCHMARKS / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"written {out}")
    return text
