"""OpenLineage events as a data engineer receives them (ADR 0040): from a loopback HTTP receiver
(the provider's HTTP transport, as a Marquez or Dataplex endpoint gets them) or from a task log
(the console transport), parsed with openlineage-python's own event classes and checked: a START
and a COMPLETE per task instance, the declared datasets, the facets against the schemas shipped in
include/openlineage/, and no clinical text or raw file name anywhere in an event."""

from __future__ import annotations

import json
import pathlib
import re
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackServer

REPO = pathlib.Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "include" / "openlineage"


class LineageReceiver(LoopbackServer):
    """POST /api/v1/lineage → the event kept (Marquez's endpoint path, the transport's default)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        lock = threading.Lock()
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/api/v1/lineage":
                    self.send_response(404)
                else:
                    with lock:
                        events.append(json.loads(body))
                    self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.serve(Handler)

    def transport(self) -> str:
        """The value of ``AIRFLOW__OPENLINEAGE__TRANSPORT`` that sends every event here."""
        return json.dumps({"type": "http", "url": self.base_url, "endpoint": "api/v1/lineage"})


def events_from_log(text: str) -> list[dict[str, Any]]:
    """The events the console transport wrote into a log (one JSON object per log line)."""
    out = []
    for line in text.splitlines():
        if "openlineage.client.transport.console" not in line:
            continue
        start = line.find('{"eventTime"')
        end = line.rfind("} [openlineage.client.transport.console]")
        if start >= 0 and end > start:
            out.append(json.loads(line[start:end + 1]))
    return out


def parse(event: dict[str, Any]) -> Any:
    """The event rebuilt with openlineage-python's classes (their validators check the run id is a
    UUID, the event time ISO 8601, the event type one of the spec's)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    return RunEvent(eventType=RunState(event["eventType"]), eventTime=event["eventTime"],
                    run=Run(runId=event["run"]["runId"], facets={}),
                    job=Job(namespace=event["job"]["namespace"], name=event["job"]["name"], facets={}),
                    producer=event["producer"],
                    inputs=[InputDataset(namespace=d["namespace"], name=d["name"]) for d in event.get("inputs") or []],
                    outputs=[OutputDataset(namespace=d["namespace"], name=d["name"])
                             for d in event.get("outputs") or []])


def check_facet(name: str, facet: dict[str, Any]) -> None:
    """A custom facet against its schema in include/openlineage/ (the part the project defines)."""
    import jsonschema

    schema_name = {"docverify_task": "DocverifyTaskRunFacet", "docverify_night": "DocverifyNightRunFacet"}[name]
    schema = json.loads((SCHEMAS / f"{schema_name}.json").read_text())
    own = schema["$defs"][schema_name]["allOf"][1]
    jsonschema.validate(facet, own)
    assert facet["_schemaURL"].endswith(f"include/openlineage/{schema_name}.json#/$defs/{schema_name}")


def task_events(events: list[dict[str, Any]], dag_id: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The events of one Dag's task instances, by (job name, run id)."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in events:
        if e["job"]["name"].startswith(dag_id + "."):
            out.setdefault((e["job"]["name"], e["run"]["runId"]), []).append(e)
    return out


def datasets(event: dict[str, Any], key: str) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in event.get(key) or []}


def leaks(events: list[dict[str, Any]], phi: set[str], file_names: set[str]) -> list[str]:
    """Clinical text fragments (tests.phi_scan) and raw input file names found in the events."""
    from tests.phi_scan import leaks as text_leaks

    blob = json.dumps(events, ensure_ascii=False)
    found = text_leaks(blob, phi)
    found += sorted(n for n in file_names if re.search(re.escape(n), blob))
    return found
