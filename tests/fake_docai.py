"""A fake Document AI REST server (``http.server`` on 127.0.0.1) for the real
``google-cloud-documentai`` client: ``:process`` answers with a given Document (the real Layout
Parser output of the shared corpora in the tests), ``:batchProcess`` starts a long-running
operation, ``GET /v1/<operation>`` reports it not done ``not_done_polls`` times, then done with
per-document statuses; ``write_shards`` (optional) writes each input's output shards where a batch
job would. A TEST FAKE, not Document AI.

The finished operation has the shape of the real ones recorded in
``shared/corpora/realapi/docai_ops/`` (``metadata`` BatchProcessMetadata with ``state``,
``stateMessage``, create/update times, ``individualProcessStatuses`` [{inputGcsSource, status {}
(OK: code omitted), outputGcsDestination, humanReviewStatus}], ``done: true``, ``response``
BatchProcessResponse). When some documents fail, it ends the way Document AI does — a partial
failure: ``state`` FAILED, ``error`` {code 3, "Failed to process all documents."} and no
``response``, while the documents that succeeded keep their status OK and output folder.
``operations_served`` maps an operation name to a body answered verbatim (a recorded operation)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

PROJECT = "test-project"



class FakeDocumentAI:
    """State and behaviour of the fake server. Inputs whose name contains ``bad`` fail inside a
    finished operation (INVALID_ARGUMENT); a processor named ``broken`` makes the whole operation
    fail. ``fail_process`` / ``fail_get`` make the next N such requests answer ``fail_status``."""

    def __init__(self, document: dict) -> None:
        self.document = document
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, dict | None]] = []
        self.operations: dict[str, dict] = {}
        self.not_done_polls = 2
        self.fail_process = 0
        self.fail_get = 0
        self.fail_status = 503
        self.write_shards = None  # callable(output_folder_uri, input_uri, document) when outputs are wanted
        self.fail_input = None  # callable(input_uri) -> True when that input should fail (e.g. a corrupt PDF)
        self.operations_served: dict[str, dict] = {}  # name -> body answered verbatim by GET
        self._next_id = 1000

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.operations.clear()
            self.operations_served.clear()
            self.not_done_polls, self.fail_process, self.fail_get, self.fail_status = 2, 0, 0, 503
            self.write_shards = None

    def batch_calls(self) -> list[dict]:
        return [body for method, path, body in self.requests if path.endswith(":batchProcess")]

    def handle(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        with self.lock:
            self.requests.append((method, path, body))
            if method == "POST" and path.endswith(":process"):
                if self.fail_process > 0:
                    self.fail_process -= 1
                    return self._error(self.fail_status)
                if "rawDocument" not in (body or {}):
                    return self._error(400, "INVALID_ARGUMENT", "rawDocument is required")
                return 200, {"document": self.document}
            if method == "POST" and path.endswith(":batchProcess"):
                return 200, self._start(path, body or {})
            if method == "GET" and "/operations/" in path:
                if self.fail_get > 0:
                    self.fail_get -= 1
                    return self._error(self.fail_status)
                name = path.removeprefix("/v1/")
                if name in self.operations_served:
                    return 200, self.operations_served[name]
                if name not in self.operations:
                    return self._error(404, "NOT_FOUND", f"operation {name} not found")
                return 200, self._poll(name)
            return self._error(404, "NOT_FOUND", f"no route {method} {path}")

    def _start(self, path: str, body: dict) -> dict:
        processor = path.removeprefix("/v1/").removesuffix(":batchProcess")
        location = processor.split("/")[3]
        self._next_id += 1
        name = f"projects/{PROJECT}/locations/{location}/operations/{self._next_id}"
        docs = body["inputDocuments"]["gcsDocuments"]["documents"]
        self.operations[name] = {
            "polls": 0,
            "inputs": [d["gcsUri"] for d in docs],
            "mime_types": [d["mimeType"] for d in docs],
            "output": body["documentOutputConfig"]["gcsOutputConfig"]["gcsUri"].rstrip("/"),
            "broken": processor.rsplit("/", 1)[-1] == "broken",
        }
        return {"name": name, "metadata": {"@type": _META_TYPE, "state": "RUNNING"}}

    def _poll(self, name: str) -> dict:
        op = self.operations[name]
        op["polls"] += 1
        if op["polls"] <= self.not_done_polls:
            return {"name": name, "metadata": {"@type": _META_TYPE, "state": "RUNNING"}}
        op_id = name.rsplit("/", 1)[-1]
        statuses = []
        for i, uri in enumerate(op["inputs"]):
            if op["broken"]:
                statuses.append({"inputGcsSource": uri, "status": {"code": 13, "message": "Internal error."}})
            elif "bad" in uri or (self.fail_input is not None and self.fail_input(uri)):
                statuses.append({"inputGcsSource": uri, "status": {"code": 3, "message": "Unsupported input file format."}})
            else:  # proto3 JSON: status {} (code 0 omitted), outputGcsDestination present
                folder = f"{op['output']}/{op_id}/{i}"
                statuses.append({"inputGcsSource": uri, "status": {}, "outputGcsDestination": folder,
                                 "humanReviewStatus": {"state": "SKIPPED"}})
                if self.write_shards and op["polls"] == self.not_done_polls + 1:
                    self.write_shards(folder, uri, self.document)
        failed = sum(1 for st in statuses if st["status"])
        meta = {"@type": _META_TYPE, "state": "FAILED" if failed else "SUCCEEDED",
                "stateMessage": (PARTIAL_FAILURE if failed else f"Processed {len(statuses)} document(s) successfully"),
                "createTime": "2026-11-20T01:00:00.123456Z", "updateTime": "2026-11-20T01:02:00.654321Z",
                "individualProcessStatuses": statuses}
        if op["broken"]:
            return {"name": name, "done": True, "metadata": meta,
                    "error": {"code": 13, "message": "Processor internal error."}}
        if failed:  # Document AI's partial failure: the operation's error, the per-document statuses kept
            return {"name": name, "done": True, "metadata": meta, "error": {"code": 3, "message": PARTIAL_FAILURE}}
        return {"name": name, "done": True, "metadata": meta,
                "response": {"@type": "type.googleapis.com/google.cloud.documentai.v1.BatchProcessResponse"}}

    @staticmethod
    def _error(code: int, status: str = "UNAVAILABLE", message: str = "The service is unavailable.") -> tuple[int, dict]:
        return code, {"error": {"code": code, "message": message, "status": status}}


_META_TYPE = "type.googleapis.com/google.cloud.documentai.v1.BatchProcessMetadata"
PARTIAL_FAILURE = "Failed to process all documents."


def _handler(fake: FakeDocumentAI):
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = urllib.parse.urlsplit(self.path).path
            code, payload = fake.handle(method, path, json.loads(raw) if raw else None)
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            self._answer("POST")

        def do_GET(self):
            self._answer("GET")

        def log_message(self, *args):  # keep the test output quiet
            pass

    return Handler




def serve(document: dict) -> tuple[FakeDocumentAI, http.server.ThreadingHTTPServer]:
    """Start a fake on a free port (``fake.url``); stop it with ``server.shutdown()``."""
    fake = FakeDocumentAI(document)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    return fake, server


def layout_parser_document(pdf_bytes: bytes) -> dict:
    """A Layout-Parser-shaped Document (``documentLayout.blocks`` of text blocks with page spans,
    no top-level text, no pages) made from a PDF's text layer with the local parser: what the
    fake batch job writes for inputs it has no recorded output for. Empty blocks for a PDF
    without text; raises on a PDF that cannot be opened."""
    import tempfile

    from docverify.layout.errors import ParseError
    from docverify.layout.local_pdf import parse_pdf

    with tempfile.NamedTemporaryFile(suffix=".pdf") as fh:
        fh.write(pdf_bytes)
        fh.flush()
        try:
            bundle = parse_pdf(fh.name)
        except ParseError as exc:
            if exc.code == "NO_TEXT_LAYER":
                return {"documentLayout": {"blocks": []}}
            raise
    blocks = []
    for page in bundle.pages:
        for k, para in enumerate(page.paragraphs or [page.text]):
            kind = "heading-1" if k == 0 and len(para) < 80 else "paragraph"
            blocks.append({"blockId": str(len(blocks) + 1),
                           "textBlock": {"text": para, "type": kind},
                           "pageSpan": {"pageStart": page.page_num, "pageEnd": page.page_num}})
    return {"documentLayout": {"blocks": blocks}}
