"""Write the specification's worked examples to include/examples/<name>/{bundle,classification}.json."""

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from scripts.support.examples import WORKED_EXAMPLES  # noqa: E402

for name, build in WORKED_EXAMPLES.items():
    bundle, classification = build()
    out = ROOT / "include" / "examples" / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "bundle.json").write_text(bundle.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "classification.json").write_text(json.dumps(classification, indent=2) + "\n", encoding="utf-8")
    print(f"wrote include/examples/{name}/")
