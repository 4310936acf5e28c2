"""The doc ids of the sample night (include/samples): opaque since ADR 0050, so tests name a
sample by its file's stem and get its id from the product's own rule, never a pasted hash."""

from __future__ import annotations

import pathlib

from docverify.storage.paths import doc_id_for

SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "include" / "samples"


def sid(stem: str) -> str:
    """The doc id discover gives ``<stem>.pdf``."""
    return doc_id_for(f"{stem}.pdf")


#: every sample PDF's stem by its doc id (to read a report or a packet back as sample names)
STEM_OF = {sid(p.stem): p.stem for p in SAMPLES.glob("*.pdf")}


def stem_of(doc_id: str) -> str:
    """The sample stem of a doc id (the id itself when it is no sample's)."""
    return STEM_OF.get(doc_id, doc_id)


def expected_routes() -> dict[str, str]:
    """include/samples/expected_routes.json's routes by doc id (a retried one: ``AUTO_RETRY→<final>``)."""
    import json

    routes = json.loads((SAMPLES / "expected_routes.json").read_text())["routes"]
    return {sid(stem): route for stem, route in routes.items()}
