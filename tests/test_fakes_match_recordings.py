"""The test fakes (tests/fake_gemini.py, tests/fake_docai.py) against the real recorded traffic of
``../shared/corpora/realapi`` (read there, never copied): the *key paths* of what a fake sends — every
key, recursively, with its JSON value type (``candidates[].content.parts[].functionCall``: object) —
are compared with the key paths of the recordings of the same message.

* a fake must not send a key path (with that type) the recordings never show — unless it is listed
  in :data:`DOCUMENTED_UNRECORDED` with the reason (a field Google documents for a situation no
  recording holds, e.g. a failed operation's ``error``);
* a fake must send every key path the recordings *always* show for that kind of message (e.g.
  ``modelVersion``, ``responseId``, ``usageMetadata.totalTokenCount`` of an answer).

Types are JSON's (``string``, ``number``, ``boolean``, ``null``, ``object``, ``array``): proto3 JSON
sends int64 as strings (``batchStats.requestCount`` "4", ``sizeBytes``), int32 as numbers (token
counts) — a fake sending the other one would be caught. Free-form values (a tool call's ``args``, a
Document's page contents) are compared down to the key that holds them only.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml
from tests import fake_docai, fake_gemini

#: free-form payloads: compared as "an object is there", not inside
OPAQUE = ("functionCall.args", "function_call.args")


def _type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    return "array" if isinstance(v, list) else "object"


def key_paths(obj: Any, prefix: str = "") -> set[str]:
    """Every ``path:type`` of a JSON value (list items as ``[]``, the root not included)."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{prefix}.{k}" if prefix else k
            out.add(f"{p}:{_type(v)}")
            if not p.endswith(OPAQUE):
                out |= key_paths(v, p)
    elif isinstance(obj, list):
        for v in obj:
            out.add(f"{prefix}[]:{_type(v)}")
            out |= key_paths(v, f"{prefix}[]")
    return out


def union(bodies) -> set[str]:
    return set().union(*(key_paths(b) for b in bodies))


def always(bodies) -> set[str]:
    sets = [key_paths(b) for b in bodies]
    return set.intersection(*sets) if sets else set()


#: key paths the fakes send that no recording shows, each with why it is right (Google's documented
#: message for a situation the corpora hold no recording of)
DOCUMENTED_UNRECORDED: dict[str, str] = {
    # google.longrunning.Operation.error (google.rpc.Status) of a FAILED batch job / Document AI operation
    "error:object": "Operation.error of a failed job or operation (google.rpc.Status)",
    "error.code:number": "google.rpc.Status.code",
    "error.message:string": "google.rpc.Status.message",
    # an inline-request batch job's answers (BatchGenerateContent with inlined requests): InlinedResponses
    "metadata.output.inlinedResponses:object": "GenerateContentBatchOutput.inlinedResponses (inline requests)",
    "metadata.output.inlinedResponses.inlinedResponses:array": "InlinedResponses.inlinedResponses",
    "metadata.output.inlinedResponses.inlinedResponses[]:object": "InlinedResponse",
    "metadata.output.inlinedResponses.inlinedResponses[].metadata:object": "InlinedResponse.metadata",
    "metadata.output.inlinedResponses.inlinedResponses[].metadata.key:string": "the request's key (our metadata)",
    "metadata.output.inlinedResponses.inlinedResponses[].response:object": "InlinedResponse.response",
    "metadata.output.inlinedResponses.inlinedResponses[].error:object": "InlinedResponse.error (google.rpc.Status)",
    "metadata.output.inlinedResponses.inlinedResponses[].error.code:number": "google.rpc.Status.code",
    "metadata.output.inlinedResponses.inlinedResponses[].error.message:string": "google.rpc.Status.message",
    # Document AI: a failed document's status (google.rpc.Status; recorded ones are all OK: {})
    "metadata.individualProcessStatuses[].status.code:number": "IndividualProcessStatus.status.code",
    "metadata.individualProcessStatuses[].status.message:string": "IndividualProcessStatus.status.message",
}


@pytest.fixture(scope="module")
def realapi(corpora_dir) -> pathlib.Path:
    return pathlib.Path(corpora_dir) / "realapi"


def _json(path: pathlib.Path) -> Any:
    return json.loads(path.read_text())


# --------------------------------------------------------------------------- recordings

def recorded_answers(realapi: pathlib.Path) -> list[dict]:
    """Every recorded GenerateContentResponse: the cassettes of gemini/, the batch job's answers, the
    answers of the Files API cassette, the blocked prompt of errors/."""
    out = [_json(p) for p in sorted((realapi / "gemini").glob("*.json"))
           if p.name not in ("PROVENANCE.json", "error_400_invalid_argument_vertex.json")]
    out += [r["body"] for r in _json(realapi / "batch" / "ellmer_state-capitals-gemini.json")["results"]]
    out += [b for b in upload_cassette(realapi) if "candidates" in b]
    out.append(_json(realapi / "errors" / "prompt_blocked_prohibited_25flash.json")["body"])
    return out


def finished_answers(realapi: pathlib.Path) -> list[dict]:
    """The recorded answers of a generation that ended by itself (finishReason STOP)."""
    return [b for b in recorded_answers(realapi)
            if (b.get("candidates") or [{}])[0].get("finishReason") == "STOP"]


def recorded_errors(realapi: pathlib.Path) -> list[dict]:
    out = [e["body"] for e in _json(realapi / "errors" / "errors_from_issues.json").values()]
    out.append(_json(realapi / "gemini" / "error_400_invalid_argument_vertex.json"))
    return out


def upload_cassette(realapi: pathlib.Path) -> list[dict]:
    """The JSON answers of the recorded Files API cassette (an upload's File, generateContent answers)."""
    doc = yaml.safe_load((realapi / "batch" / "ellmer_google-upload.yml").read_text())
    out = []
    for inter in doc["http_interactions"]:
        text = (inter["response"].get("body") or {}).get("string") or ""
        try:
            out.append(json.loads(text))
        except ValueError:
            continue
    return out


def recorded_operations(realapi: pathlib.Path) -> list[dict]:
    """The recorded Document AI v1 operations (the v1beta3 one is another API version)."""
    ops = [e["body"] for e in _json(realapi / "docai_ops" / "operations.json").values()]
    ops += [e["body"] for k, e in _json(realapi / "docai_ops" / "operations_recorded.json").items()
            if "v1beta3" not in k]
    return ops


# --------------------------------------------------------------------------- what the fakes send

REQUEST = {"tools": [{"functionDeclarations": [{"name": "final_result", "parameters": {
    "properties": {"findings": {"items": {"properties": {"code": {"enum": ["LABEL_TEXT_MISMATCH"]}}}}}}}]}],
    "contents": [{"role": "user", "parts": [{"text": "<document total_pages=\"1\"><page number=\"1\">\nx\n"
                                                     "</page></document>"}]}]}


def fake_answers() -> list[dict]:
    return [fake_gemini.function_call(REQUEST, {"findings": []}),
            fake_gemini.function_call(REQUEST, {"findings": []}, cached_tokens=600),
            fake_gemini.text_reply("hello"),
            fake_gemini.offline_brain(REQUEST)]


def fake_errors() -> list[dict]:
    return [fake_gemini.error_body(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            fake_gemini.quota_body(12.0)]


def fake_batch_views() -> dict[str, dict]:
    """The fake's ``batches.get`` answers: a file-input job SUCCEEDED (the recorded situation), and
    the states no recording holds (inline SUCCEEDED, FAILED, PENDING)."""
    fake = fake_gemini.FakeGemini()
    try:
        fake.files["files/u1"] = json.dumps({"key": "k1", "request": REQUEST}).encode() + b"\n"
        views = {}
        for kind, file in (("file", "files/u1"), ("inline", None)):
            job = {"name": f"batches/{kind}", "model": "models/gemini-2.5-flash", "created": 0.0,
                   "display_name": "docverify-x", "file": file, "done": None,
                   "items": [{"key": "k1", "request": REQUEST}]}
            views[kind] = fake._job_view(job)
        fake.batch_job_fails = True
        views["failed"] = fake._job_view({"name": "batches/f", "model": "models/gemini-2.5-flash", "created": 0.0,
                                          "display_name": None, "file": "files/u1", "done": None, "items": []})
        return views
    finally:
        fake.server.server_close()


def fake_uploaded_file() -> dict:
    """The fake's answer to the final upload request (upload, finalize)."""
    import urllib.request

    fake = fake_gemini.FakeGemini().start()
    try:
        start = urllib.request.Request(f"{fake.base_url}/upload/v1beta/files", data=b"{}", method="POST",
                                       headers={"X-Goog-Upload-Command": "start"})
        with urllib.request.urlopen(start) as r:  # noqa: S310 - the loopback fake
            url = r.headers["X-Goog-Upload-URL"]
        final = urllib.request.Request(url, data=b'{"key": "k"}\n', method="POST",
                                       headers={"X-Goog-Upload-Command": "upload, finalize"})
        with urllib.request.urlopen(final) as r:  # noqa: S310
            return json.loads(r.read())
    finally:
        fake.stop()


def fake_operations() -> dict[str, dict]:
    fake = fake_docai.FakeDocumentAI({"documentLayout": {"blocks": []}})
    fake.not_done_polls = 0
    out = {}
    for name, inputs in (("ok", ["gs://in/a.pdf"]), ("partial", ["gs://in/a.pdf", "gs://in/bad.pdf"])):
        _, started = fake.handle("POST", "/v1/projects/p/locations/us/processors/x:batchProcess", {
            "inputDocuments": {"gcsDocuments": {"documents": [{"gcsUri": u, "mimeType": "application/pdf"}
                                                              for u in inputs]}},
            "documentOutputConfig": {"gcsOutputConfig": {"gcsUri": "gs://out/night/"}}})
        out[name] = fake.handle("GET", f"/v1/{started['name']}", None)[1]
    return out


# --------------------------------------------------------------------------- the checks

#: where a batch job's inline answers (GenerateContentResponse) sit: compared with the recorded answers
INLINE_ANSWER = "metadata.output.inlinedResponses.inlinedResponses[].response."


def _unrecorded(sent: set[str], recorded: set[str], answers: set[str] = frozenset()) -> set[str]:
    return {p for p in sent - recorded if p not in DOCUMENTED_UNRECORDED
            and not (p.startswith(INLINE_ANSWER) and p.removeprefix(INLINE_ANSWER) in answers)}


def test_the_key_path_collector():
    assert key_paths({"a": {"b": [1, {"c": "4"}]}, "functionCall": {"args": {"x": 1}}}) == {
        "a:object", "a.b:array", "a.b[]:number", "a.b[]:object", "a.b[].c:string", "functionCall:object",
        "functionCall.args:object"}


def test_the_gemini_fakes_answers_match_the_recorded_answers(realapi):
    recorded = union(recorded_answers(realapi))
    sent = union(fake_answers())
    assert not _unrecorded(sent, recorded), f"the fake sends what no recording shows: {sorted(sent - recorded)}"
    required = always(finished_answers(realapi))
    for answer in fake_answers():
        missing = required - key_paths(answer)
        assert not missing, f"the fake's answer lacks what every finished recording has: {sorted(missing)}"
    assert {"modelVersion:string", "responseId:string", "usageMetadata.totalTokenCount:number",
            "usageMetadata.promptTokenCount:number"} <= required  # the rule has teeth


def test_the_fakes_degenerate_answer_matches_a_recorded_unfinished_one(realapi):
    """fake_gemini.degenerate (MAX_TOKENS, no candidatesTokenCount) sends nothing the recordings never show."""
    sent = union([fake_gemini.degenerate(a) for a in fake_answers()])
    assert not _unrecorded(sent, union(recorded_answers(realapi)))


def test_the_gemini_fakes_errors_match_the_recorded_errors(realapi):
    bodies = recorded_errors(realapi)
    sent = union(fake_errors())
    assert not _unrecorded(sent, union(bodies)), sorted(sent - union(bodies))
    for body in fake_errors():
        assert always(bodies) <= key_paths(body), sorted(always(bodies) - key_paths(body))


def test_the_fake_batch_job_matches_the_recorded_batches_get(realapi):
    recorded = _json(realapi / "batch" / "ellmer_state-capitals-gemini.json")["batch"]
    views = fake_batch_views()
    sent = union(views.values())
    answers = union(recorded_answers(realapi))
    assert not _unrecorded(sent, key_paths(recorded), answers), sorted(_unrecorded(sent, key_paths(recorded), answers))
    missing = key_paths(recorded) - key_paths(views["file"])  # the recorded situation: a file job SUCCEEDED
    assert not missing, f"the fake's finished file job lacks: {sorted(missing)}"


def test_the_fake_uploaded_file_matches_the_recorded_upload(realapi):
    recorded = [b for b in upload_cassette(realapi) if "file" in b and "name" in b["file"]]
    assert recorded
    sent = key_paths(fake_uploaded_file())
    assert not _unrecorded(sent, union(recorded)), sorted(sent - union(recorded))
    assert not always(recorded) - sent, f"the fake's File lacks: {sorted(always(recorded) - sent)}"


def test_the_fake_docai_operation_matches_the_recorded_operations(realapi):
    ops = recorded_operations(realapi)
    views = fake_operations()
    sent = union(views.values())
    assert not _unrecorded(sent, union(ops)), sorted(_unrecorded(sent, union(ops)))
    assert not always(ops) - key_paths(views["ok"]), sorted(always(ops) - key_paths(views["ok"]))


def test_the_check_fails_on_an_invented_or_missing_key(realapi):
    """The comparison catches a fake that sends a key no recording has, or drops a required one."""
    answer = fake_answers()[0]
    invented = {**answer, "usageMetadata": {**answer["usageMetadata"], "billedTokens": 3}}
    assert _unrecorded(key_paths(invented), union(recorded_answers(realapi))) == {"usageMetadata.billedTokens:number"}
    dropped = {k: v for k, v in answer.items() if k != "responseId"}
    assert "responseId:string" in always(finished_answers(realapi)) - key_paths(dropped)
    as_number = {**answer, "usageMetadata": {**answer["usageMetadata"], "promptTokenCount": "12"}}
    assert "usageMetadata.promptTokenCount:string" in _unrecorded(key_paths(as_number),
                                                                  union(recorded_answers(realapi)))


def test_the_fake_layout_parser_document_matches_the_recorded_one(corpora_dir):
    """fake_docai.layout_parser_document (what the fake batch job writes for an input it has no
    recording for) against the real Layout Parser output ../shared/corpora/docai/layout_parser.json."""
    from tests.batch_stages import SAMPLES

    recorded = key_paths(_json(pathlib.Path(corpora_dir) / "docai" / "layout_parser.json"))
    pdf = SAMPLES / "note_mts_19.pdf"
    sent = key_paths(fake_docai.layout_parser_document(pdf.read_bytes()))
    assert sent and not _unrecorded(sent, recorded), sorted(_unrecorded(sent, recorded))
    assert "documentLayout.blocks[].textBlock.text:string" in sent
