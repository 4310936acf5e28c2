"""include/schemas/ must match the models: a model change without `make schemas` fails here."""

import json

from docverify.domain.json_schemas import render


def test_committed_schemas_match_models(repo_dir):
    folder = repo_dir / "include" / "schemas"
    expected = render()
    committed = {p.name for p in folder.glob("*.json")}
    assert committed == set(expected), "run `make schemas`"
    for name, text in expected.items():
        assert (folder / name).read_text(encoding="utf-8") == text, f"{name} drifted from the model: run `make schemas`"


def test_classification_schema_names_the_five_types():
    schema = json.loads(render()["ClassificationOutput.json"])
    assert schema["$defs"]["DocType"]["enum"] == ["Clinical Note", "Pathology Report", "Genomic Report",
                                                  "Radiology Report", "Other"]
