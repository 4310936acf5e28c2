"""Regenerate include/schemas/*.json from the pydantic models (`make schemas`)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "plugins"))

from docverify.domain.json_schemas import render  # noqa: E402

out = pathlib.Path(__file__).resolve().parents[1] / "include" / "schemas"
out.mkdir(parents=True, exist_ok=True)
for name, text in render().items():
    (out / name).write_text(text, encoding="utf-8")
    print(f"wrote include/schemas/{name}")
