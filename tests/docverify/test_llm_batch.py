"""Batch mode (issue 15, Variable ``docverify_llm_mode=batch``): the collect pass records the requests
the online judge would send, the Google provider's Gemini hook uploads them and runs the batch job
against the fake Batch API (tests/fake_gemini.py), ingest writes the answers into the verdict cache,
and verify then runs from it — the same routes as the same night online, no online call when every
item succeeded, failed items asked online, a failed job never accepting anything unverified, and a
re-run creating no job."""

from __future__ import annotations

import json

import pytest
from tests.batch_stages import copy_samples, llm_batch_rounds, run_stages
from tests.fake_gemini import FakeGemini, error_body

from docverify.llm.cache import InMemoryVerdictCache, VerdictCache
from docverify.llm.cost import estimate_cost
from docverify.llm.faults import BackoffRetry
from docverify.llm.judge import LLMJudge
from docverify.reporting import report
from docverify.stages import batch_mode as llm_batch
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

DS = "2026-11-21"


def llm_judge(fake: FakeGemini, cache) -> LLMJudge:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    return LLMJudge(model, "google:gemini-2.5-flash", cache=cache,
                    retry_policy=BackoffRetry(max_attempts=2, initial_wait_s=0.01, max_wait_s=0.02))


def sample_batch(root, repo_dir) -> Batch:
    copy_samples(root, DS)
    return Batch(store=ArtifactStore(root), ds=DS, run_id="batch-test")


def run_night(b: Batch, judge: LLMJudge, before_verify=None) -> dict:
    run_stages(b, judge, shard_size=5, before_verify=before_verify)
    report.write(b)
    return json.loads(b.store.read_bytes(f"reports/{DS}/batch_report.json"))


def routes(rep: dict) -> dict[str, str]:
    return {d["doc_id"]: (d["final_decision"], d.get("error")) for d in rep["per_document"]}


def verify_calls(b: Batch) -> int:
    """Online LLM calls made by the verify tasks (the batch rounds' answers are cache hits there)."""
    return sum(s["llm"]["calls"] for s in b.fresh().rs.stages() if s["stage"] == "verify")


def cache_keys(root) -> set[str]:
    return {p.stem for p in (root / "cache" / "llm").glob("*.json")}


@pytest.fixture
def fake(monkeypatch):
    server = FakeGemini().start()
    # the provider's GenAIGeminiAPIHook builds genai.Client(api_key=…): the installed google-genai reads
    # GOOGLE_GEMINI_BASE_URL (google/genai/_base_url.py); GoogleBaseHook reads its connection
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')
    yield server
    server.stop()


@pytest.fixture(scope="module")
def online(tmp_path_factory, repo_dir):
    """The sample night online against the fake: routes, report, the cache keys and request bodies."""
    root = tmp_path_factory.mktemp("online")
    server = FakeGemini().start()
    try:
        b = sample_batch(root, repo_dir)
        rep = run_night(b, llm_judge(server, VerdictCache(b.store)))
        bodies = sorted(json.dumps(body, sort_keys=True) for _, body in server.requests)
    finally:
        server.stop()
    return {"report": rep, "keys": cache_keys(root), "bodies": bodies}


# =========================================================================== unit


def test_the_collect_pass_records_the_body_the_online_judge_sends(tmp_path, fake):
    import asyncio

    from docverify.domain.models import DocumentBundle, Page
    from docverify.judging.judges import CallDeferred

    bundle = DocumentBundle(doc_id="d1", file_path="d1.pdf", sha256="1" * 64, total_pages=1,
                            processing_timestamp="2026-01-01T00:00:00Z", parser="t",
                            pages=[Page(page_num=1, text="COMPLETE BLOOD COUNT\nWBC 5.1 x10^3/uL")])
    cache = InMemoryVerdictCache()
    rec = llm_batch.RecordingJudge(llm_judge(fake, cache))
    with pytest.raises(CallDeferred):
        asyncio.run(rec.classify(bundle))
    assert len(rec.recorded) == 1 and fake.count == 0  # recorded, not sent
    (req,) = rec.recorded.values()
    assert req.kind == "classify" and req.doc_id == "d1"
    online = llm_judge(fake, cache)
    assert req.key == online.cache_key_for("classify", bundle)
    asyncio.run(online.classify(bundle))  # the online call: the same body, now cached
    assert fake.count == 1 and fake.requests[0][1] == req.body
    rec2 = llm_batch.RecordingJudge(online)
    result = asyncio.run(rec2.classify(bundle))  # a cache hit is not recorded
    assert result.classification.doc_id == "d1" and rec2.recorded == {}


def test_a_non_gemini_model_is_refused():
    with pytest.raises(ValueError, match="Gemini"):
        llm_batch.RecordingJudge(LLMJudge("test", "test"))


def _answer(args: dict, tokens=(100, 10)) -> dict:
    return {"candidates": [{"content": {"parts": [{"functionCall": {"name": "final_result", "args": args}}]},
                            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": tokens[0], "candidatesTokenCount": tokens[1]},
            "modelVersion": "gemini-2.5-flash"}


# --------------------------------------------------------------------------- degenerate answers (ADR 0005)

@pytest.fixture(scope="module")
def realapi(corpora_dir):
    import pathlib

    return pathlib.Path(corpora_dir) / "realapi"


@pytest.fixture(scope="module")
def real_line(realapi) -> dict:
    """A response line shaped like the real batch results (batch/ellmer_state-capitals-gemini.json
    ``results[0].body``: STOP, usageMetadata with thoughts and serviceTier, modelVersion, responseId),
    its text part replaced by the output tool's call with an empty findings list."""
    body = json.loads((realapi / "batch" / "ellmer_state-capitals-gemini.json").read_text())["results"][0]["body"]
    part = body["candidates"][0]["content"]["parts"][0]
    body["candidates"][0]["content"]["parts"] = [
        {"functionCall": {"name": "final_result", "args": {"findings": []}}, "thoughtSignature": part["thoughtSignature"]}]
    body["modelVersion"] = "gemini-2.5-flash"
    return body


def _edit(body: dict, fn) -> dict:
    out = json.loads(json.dumps(body))
    fn(out)
    return out


def test_a_real_empty_findings_list_is_an_answer(real_line):
    assert llm_batch.degenerate_reason(real_line) is None
    assert llm_batch.output_of(real_line, "V2").findings == []


DEGENERATE = {
    "max_tokens": (lambda b: b["candidates"][0].__setitem__("finishReason", "MAX_TOKENS"), "finishReason MAX_TOKENS"),
    "no_finish_reason": (lambda b: b["candidates"][0].pop("finishReason"), "finishReason unspecified"),
    "zero_output_tokens": (lambda b: b["usageMetadata"].pop("candidatesTokenCount"), "no output tokens"),
    "no_usage": (lambda b: b.pop("usageMetadata"), "no output tokens"),
    "no_candidates": (lambda b: b.pop("candidates"), "no candidate"),
    "empty_text": (lambda b: b["candidates"][0]["content"].__setitem__("parts", [{"text": ""}]), "no tool call"),
    "args_left_out": (lambda b: b["candidates"][0]["content"]["parts"][0]["functionCall"].pop("args"),
                      "empty tool arguments"),
}


@pytest.mark.parametrize("case", list(DEGENERATE))
def test_a_degenerate_answer_is_not_no_issue(real_line, case):
    fn, why = DEGENERATE[case]
    line = _edit(real_line, fn)
    assert llm_batch.degenerate_reason(line) == why


@pytest.mark.parametrize("path", ["gemini/max_tokens_empty_25pro.json", "gemini/safety_finish_15flash.json",
                                  "gemini/response_blocked_model_armor_vertex.json",
                                  "gemini/prompt_blocked_model_armor_vertex.json",
                                  "gemini/unexpected_tool_call_3flash.json",
                                  "gemini/max_tokens_text_25flash.json"])
def test_recorded_unfinished_answers_are_degenerate(realapi, path):
    assert llm_batch.degenerate_reason(json.loads((realapi / path).read_text())) is not None


def test_recorded_finished_tool_calls_are_not_degenerate(realapi):
    for name in ("tool_output_25flash_thoughtsig.json", "tool_output_20flash.json"):
        assert llm_batch.degenerate_reason(json.loads((realapi / "gemini" / name).read_text())) is None
    blocked = json.loads((realapi / "errors" / "prompt_blocked_prohibited_25flash.json").read_text())["body"]
    assert llm_batch.degenerate_reason(blocked) == "no candidate"


def test_the_sdk_dump_of_an_inline_answer_is_read_too():
    """Inline responses are ``job.model_dump(mode="json")``: snake_case names."""
    ok = {"candidates": [{"content": {"parts": [{"function_call": {"name": "final_result", "args": {"findings": []}}}]},
                          "finish_reason": "STOP"}], "usage_metadata": {"candidates_token_count": 7}}
    assert llm_batch.degenerate_reason(ok) is None
    ok["candidates"][0]["finish_reason"] = "MAX_TOKENS"
    assert llm_batch.degenerate_reason(ok) == "finishReason MAX_TOKENS"


def test_ingest_routes_degenerate_answers_online_and_counts_them(tmp_path, real_line):
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="t")
    judge = LLMJudge("test", "google:gemini-2.5-flash", cache=VerdictCache(b.store))
    keys = {k: {"kind": "V2", "doc_id": f"doc{i}"} for i, k in enumerate(("ok", "cut", "empty", "nocand"))}
    b.store.write_json(llm_batch.index_rel(b, "judgments"), {"round": "judgments", "model": "gemini-2.5-flash",
                                                             "requests": keys})
    lines = [{"key": "ok", "response": real_line},
             {"key": "cut", "response": _edit(real_line, DEGENERATE["max_tokens"][0])},
             {"key": "empty", "response": _edit(real_line, DEGENERATE["zero_output_tokens"][0])},
             {"key": "nocand", "response": _edit(real_line, DEGENERATE["no_candidates"][0])}]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    out = llm_batch.ingest(b, judge, "judgments", {"name": "batches/b1", "state": "JOB_STATE_SUCCEEDED"},
                           llm_batch.results_from_jsonl(data))
    rec = out.record["llm_batch"]
    assert (rec["succeeded"], rec["degenerate"], rec["failed"], rec["online_fallback"]) == (1, 3, 0, 3)
    assert judge.cache.get("ok") == {"findings": []}
    assert all(judge.cache.get(k) is None for k in ("cut", "empty", "nocand"))  # verify asks these online
    # priced by the model that answered (modelVersion), not the judge's configured name ("test")
    assert out.record["price_model"] == "gemini-2.5-flash" and rec["answered_by"] == ["gemini-2.5-flash"]


def test_ingest_caches_valid_answers_only_and_counts_the_rest(tmp_path):
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="t")
    judge = LLMJudge("test", "google:gemini-2.5-flash", cache=VerdictCache(b.store))
    judge.price_model = "gemini-2.5-flash"
    keys = {k: {"kind": "V2", "doc_id": f"doc{i}"} for i, k in enumerate(("ok", "err", "bad", "gone"))}
    b.store.write_json(llm_batch.index_rel(b, "judgments"), {"round": "judgments", "model": "gemini-2.5-flash",
                                                             "requests": keys})
    lines = [{"key": "ok", "response": _answer({"findings": []})},
             {"key": "err", "error": {"code": 13, "message": "x"}},
             {"key": "bad", "response": _answer({"findings": "not a list"})}, "not json"]
    data = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines).encode()
    out = llm_batch.ingest(b, judge, "judgments", {"name": "batches/b1", "state": "JOB_STATE_SUCCEEDED"},
                           llm_batch.results_from_jsonl(data))
    rec = out.record["llm_batch"]
    assert (rec["requests"], rec["succeeded"], rec["failed"], rec["missing"], rec["online_fallback"]) == (4, 1, 2, 1, 3)
    assert judge.cache.get("ok") == {"findings": []}
    assert all(judge.cache.get(k) is None for k in ("err", "bad", "gone"))  # left to verify's online calls
    assert b.store.read_json("cache/llm/ok.json")["batch_job"] == "batches/b1"
    assert out.record["llm_batch_per_document"] == {"doc0": {"requests": 1, "input_tokens": 100, "output_tokens": 10,
                                                      "cached_tokens": 0}}
    # a failed job: nothing is cached, every request goes online
    out = llm_batch.ingest(b, judge, "judgments", {"name": None, "state": "JOB_FAILED"}, None)
    assert (out.record["llm_batch"]["succeeded"], out.record["llm_batch"]["online_fallback"]) == (0, 4)


def test_inline_results_are_read_by_their_key():
    job = {"dest": {"inlined_responses": [
        {"metadata": {"key": "k1"}, "response": {"candidates": [{"content": {"parts": [
            {"function_call": {"name": "final_result", "args": {"findings": []}}}]}}]}},
        {"metadata": {"key": "k2"}, "error": {"code": 13}}]}}
    res = llm_batch.results_from_inline(job)
    assert set(res) == {"k1", "k2"} and res["k2"]["error"] == {"code": 13}
    assert llm_batch.output_of(res["k1"]["response"], "V3").findings == []


def test_batch_requests_cost_the_tables_batch_price():
    online = estimate_cost("gemini-2.5-flash", input_tokens=10**6, output_tokens=10**6)
    batch = estimate_cost("gemini-2.5-flash", input_tokens=10**6, output_tokens=10**6, batch=True)
    assert batch.usd == pytest.approx(online.usd / 2) and batch.note == "batch prices of the table"


# =========================================================================== nights


@pytest.mark.slow
def test_a_batch_night_routes_like_online_with_no_online_call_then_reruns_without_a_job(tmp_path, repo_dir,
                                                                                       fake, online):
    b = sample_batch(tmp_path, repo_dir)
    judge = llm_judge(fake, VerdictCache(b.store))
    rep = run_night(b, judge, llm_batch_rounds(judge))
    assert routes(rep) == routes(online["report"])
    assert fake.batch_jobs == 2 and fake.uploads == 2 and fake.downloads == 2
    assert verify_calls(b) == 0 and fake.count == 0  # every request was answered by a batch job
    sent = sorted(json.dumps(json.loads(line)["request"], sort_keys=True)
                  for rnd in llm_batch.ROUNDS
                  for line in b.store.read_bytes(llm_batch.requests_rel(b, rnd)).decode().split("\n") if line)
    assert sent == online["bodies"]  # exactly the requests the online night sent, built by the same code
    assert cache_keys(tmp_path) == online["keys"]
    llm, on = rep["llm"], online["report"]["llm"]
    assert llm["mode"] == "batch" and on["mode"] == "online"
    assert llm["batch"]["succeeded"] == on["calls"] and llm["batch"]["online_fallback"] == 0
    assert (llm["batch"]["input_tokens"], llm["batch"]["output_tokens"]) == (on["input_tokens"], on["output_tokens"])
    assert llm["calls"] == 0 and llm["cost_usd"] == pytest.approx(on["cost_usd"] / 2, rel=1e-3)
    assert llm["batch"]["cost_note"] == "batch prices of the table"
    md = (tmp_path / "reports" / DS / "batch_report.md").read_text()
    assert "mode batch" in md and "at the batch price" in md

    # a second run of the same night: everything is cached, no job, no call, the same routes
    rerun = run_night(Batch(store=b.store, ds=DS, run_id="batch-test-2"), judge, llm_batch_rounds(judge))
    assert fake.batch_jobs == 2 and fake.count == 0 and routes(rerun) == routes(rep)
    assert rerun["llm"]["batch"]["requests"] == 0 and rerun["llm"]["cost_usd"] == 0


@pytest.mark.slow
def test_failed_items_are_asked_online(tmp_path, repo_dir, fake, online):
    fake.batch_fail_fraction = 0.25
    b = sample_batch(tmp_path, repo_dir)
    judge = llm_judge(fake, VerdictCache(b.store))
    rep = run_night(b, judge, llm_batch_rounds(judge))
    assert routes(rep) == routes(online["report"])
    batch_keys = {p.stem for p in (tmp_path / "cache" / "llm").glob("*.json")
                  if json.loads(p.read_text()).get("batch_job")}
    assert rep["llm"]["batch"]["failed"] > 0 and batch_keys < online["keys"]
    # verify asked online exactly what no batch job answered
    assert verify_calls(b) == fake.count == len(online["keys"] - batch_keys) > 0
    assert cache_keys(tmp_path) == online["keys"]


@pytest.mark.slow
def test_degenerate_items_are_asked_online(tmp_path, repo_dir, fake, online):
    """A quarter of the job's answers are degenerate (fake_gemini.degenerate: the brain's schema-valid
    arguments under MAX_TOKENS without output tokens): none is cached from the job, verify asks them
    online, and the night routes as online."""
    fake.batch_degenerate_fraction = 0.25
    b = sample_batch(tmp_path, repo_dir)
    judge = llm_judge(fake, VerdictCache(b.store))
    rep = run_night(b, judge, llm_batch_rounds(judge))
    assert routes(rep) == routes(online["report"])
    records = [s["llm_batch"] for s in b.fresh().rs.stages() if s.get("llm_batch")]
    degenerate = sum(r["degenerate"] for r in records)
    batch_keys = {p.stem for p in (tmp_path / "cache" / "llm").glob("*.json")
                  if json.loads(p.read_text()).get("batch_job")}
    assert degenerate > 0 and rep["llm"]["batch"]["online_fallback"] == degenerate
    # verify asked online exactly what no batch job answered: the degenerate items, and the judgments of a
    # document whose classification was degenerate (not collected: they depend on it)
    assert verify_calls(b) == fake.count == len(online["keys"] - batch_keys) >= degenerate
    assert cache_keys(tmp_path) == online["keys"]


@pytest.mark.slow
def test_a_failed_job_falls_back_online_and_never_accepts_unverified(tmp_path, repo_dir, fake, online):
    fake.batch_job_fails = True
    b = sample_batch(tmp_path, repo_dir)
    judge = llm_judge(fake, VerdictCache(b.store))
    rep = run_night(b, judge, llm_batch_rounds(judge))
    assert routes(rep) == routes(online["report"])  # answered online instead
    assert rep["llm"]["batch"]["succeeded"] == 0 and verify_calls(b) == len(online["keys"])
    assert {j["state"] for j in rep["llm"]["batch"]["jobs"]} == {"JOB_FAILED"}


@pytest.mark.slow
def test_a_failed_job_and_a_broken_endpoint_escalate_everything(tmp_path, repo_dir, fake):
    fake.batch_job_fails = True
    # issue 22: was a persistent 500, which is now an outage (waited out, then ServiceOutage fails the
    # task for Airflow to retry, tests/docverify/llm/test_real_faults.py); every request refused is a 400
    fake.script = [(400, error_body(400, "INVALID_ARGUMENT", "Request contains an invalid argument."))]
    b = sample_batch(tmp_path, repo_dir)
    judge = llm_judge(fake, VerdictCache(b.store))
    rep = run_night(b, judge, llm_batch_rounds(judge))
    assert {d["final_decision"] for d in rep["per_document"]} == {"ESCALATE_TO_SME"}
    assert not list((tmp_path / "accepted").rglob("*.json"))


# =========================================================================== pricing by the answering model

def _response(model_name: str, i: int, o: int):
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    return ModelResponse(parts=[TextPart("x")], usage=RequestUsage(input_tokens=i, output_tokens=o),
                         model_name=model_name)


def test_each_call_is_priced_by_the_model_that_answered():
    from docverify.llm.cost import price_responses

    msgs = [_response("gemini-2.5-flash", 1000, 100), _response("models/gemini-2.5-pro", 2000, 300)]
    flash = estimate_cost("gemini-2.5-flash", input_tokens=1000, output_tokens=100).usd
    pro = estimate_cost("gemini-2.5-pro", input_tokens=2000, output_tokens=300).usd
    cost = price_responses(msgs)
    assert cost.usd == pytest.approx(flash + pro) and cost.model == "gemini-2.5-flash+gemini-2.5-pro"
    assert price_responses(msgs[:1]).usd == flash and price_responses(msgs[:1]).model == "gemini-2.5-flash"
    assert price_responses([_response("no-such-model", 10, 1)]).usd is None


def test_the_price_model_of_a_fallback_judge_is_the_answering_model():
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.test import TestModel

    from docverify.llm.cost import answered_price_model, price_model_of, price_name

    assert price_name("fallback:gemini-2.5-flash,gemini-2.5-pro") is None
    assert price_name("google-gla:gemini-2.5-flash") == price_name("models/gemini-2.5-flash") == "gemini-2.5-flash"
    assert price_model_of(FallbackModel(TestModel(), TestModel())) is None
    flash, pro = _response("gemini-2.5-flash", 1, 1), _response("gemini-2.5-pro", 1, 1)
    assert answered_price_model(None, [flash]) == "gemini-2.5-flash"
    assert answered_price_model("fallback:gemini-2.5-flash,gemini-2.5-pro", [flash]) == "gemini-2.5-flash"
    assert answered_price_model("gemini-2.5-flash", [pro]) == "gemini-2.5-flash+gemini-2.5-pro"
    assert answered_price_model("gemini-2.5-flash+gemini-2.5-pro", [flash]) == "gemini-2.5-flash+gemini-2.5-pro"
    # a token total of several models is not priced (no silent mix); none spent costs nothing
    several = estimate_cost("gemini-2.5-flash+gemini-2.5-pro", input_tokens=10, output_tokens=1)
    assert several.usd is None and "several models" in several.note
    assert estimate_cost("gemini-2.5-flash+gemini-2.5-pro", input_tokens=0, output_tokens=0).usd == 0.0
    assert estimate_cost(price_name("models/gemini-2.5-flash"), input_tokens=10**6, output_tokens=0).usd == \
        estimate_cost("gemini-2.5-flash", input_tokens=10**6, output_tokens=0).usd > 0


def test_a_fallback_judge_can_batch_to_its_first_model(fake):
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    def m(name):
        return GoogleModel(name, provider=GoogleProvider(api_key="k", base_url=fake.base_url))

    judge = LLMJudge(FallbackModel(m("gemini-2.5-flash"), m("gemini-2.5-pro")), "google:gemini-2.5-flash")
    assert llm_batch.RecordingJudge(judge).batch_model == "gemini-2.5-flash"
