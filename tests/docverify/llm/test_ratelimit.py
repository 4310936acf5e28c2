"""The night's shared LLM rate limiter (issue 15): one budget across processes, a 429 pauses
everybody, and an LLMJudge under a quota (the fake Gemini endpoint's) neither escalates nor
hammers the quota. Windows are seconds here (not minutes) so the tests run in seconds."""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import time

import pytest
from tests.fake_gemini import FakeGemini, function_call

from docverify.domain.models import ClassificationOutput, DocumentBundle, Page
from docverify.judging.judges import JudgeThrottled
from docverify.llm.faults import BackoffRetry, ThrottlePolicy
from docverify.llm.judge import LLMJudge
from docverify.llm.ratelimit import LimiterWaitExceeded, RateLimiter, pool_slots_for

# real time windows and two processes (≈ 18 s): the full suite, not the inner loop
pytestmark = pytest.mark.slow

PAGES = ["SURGICAL PATHOLOGY REPORT\nFinal Diagnosis: invasive ductal carcinoma.", "Microscopic description."]


def _worker(state_dir, rpm, window_s, n, out, barrier) -> None:
    """One process: ``n`` requests through the shared limiter, each sent when its slot comes."""
    limiter = RateLimiter("model-x", rpm=rpm, window_s=window_s, state_dir=state_dir, headroom=1.0)
    barrier.wait(timeout=60)  # both processes start asking at the same moment

    async def one():
        await limiter.acquire()
        out.put(time.time())

    async def main():
        await asyncio.gather(*(one() for _ in range(n)))

    asyncio.run(main())


def _max_in_window(stamps: list[float], window_s: float) -> int:
    stamps = sorted(stamps)
    best, j = 0, 0
    for i, t in enumerate(stamps):
        while stamps[j] <= t - window_s:
            j += 1
        best = max(best, i - j + 1)
    return best


def _run_two_processes(state_dir, rpm=10, window_s=1.0, n=10) -> list[float]:
    ctx = multiprocessing.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(2)
    procs = [ctx.Process(target=_worker, args=(state_dir, rpm, window_s, n, out, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    stamps = [out.get(timeout=60) for _ in range(2 * n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return stamps


def test_two_processes_share_one_budget(tmp_path):
    # 10 requests per 1 s window, 2 processes × 10 requests each: together they must be spread
    # over ≥ 1.9 s (20 slots 0.1 s apart) and never exceed 10 in any window (+1 for clock jitter)
    stamps = _run_two_processes(tmp_path / "limiter")
    assert max(stamps) - min(stamps) >= 1.85
    assert _max_in_window(stamps, 1.0) <= 11


def test_without_the_shared_file_two_processes_double_the_rate():
    # the control: each process alone (state in-process) sends its 10 at its own pace, 2× the quota
    stamps = _run_two_processes(None)
    assert _max_in_window(stamps, 1.0) >= 16


def test_reservations_are_spaced_and_bounded():
    now = [1000.0]
    lim = RateLimiter("m", rpm=60, headroom=1.0, clock=lambda: now[0])
    assert [lim.reserve() for _ in range(3)] == [0.0, 1.0, 2.0]
    with pytest.raises(LimiterWaitExceeded):
        lim.reserve(max_wait_s=2.5)  # the next slot is 3 s away: refused, and nothing reserved
    assert lim.reserve(max_wait_s=3.0) == 3.0
    lim.pause(30)  # a 429 with Retry-After: 30 — nobody gets a slot before now + 30
    assert lim.reserve() == 30.0
    assert RateLimiter("m").reserve() == 0.0 and RateLimiter("m").unlimited  # 0 = unlimited


def _stalled_queue(depart: bool) -> tuple[RateLimiter, list[float]]:
    """Six callers reserve their slots, then the event loop stalls past all of them (a client's
    first set-up, a CPU-starved process) before they send."""
    lim = RateLimiter("m", rpm=10, window_s=1.0, headroom=0.8)  # slots 0.125 s apart, gate 0.111 s

    async def one(out: list[float]) -> None:
        await lim.acquire(depart=depart)
        out.append(time.time())

    async def main() -> list[float]:
        out: list[float] = []
        tasks = [asyncio.create_task(one(out)) for _ in range(6)]
        await asyncio.sleep(0)  # every caller has reserved its slot
        time.sleep(0.8)
        await asyncio.gather(*tasks)
        return out

    return lim, asyncio.run(main())


def test_departure_gate_respaces_a_stalled_queue():
    lim, stamps = _stalled_queue(depart=True)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert min(gaps) >= lim.gate_interval - 0.01  # no burst after the stall …
    assert lim.gate_interval < lim.request_interval  # … and on schedule the gate never waits
    _, bunched = _stalled_queue(depart=False)  # the control: the late wakes leave together
    assert max(bunched[1:5]) - min(bunched[1:5]) < 0.05


def test_tokens_per_minute_and_charge():
    now = [0.0]
    lim = RateLimiter("m", tpm=6000, headroom=1.0, clock=lambda: now[0])  # 100 tokens a second
    assert lim.reserve(500) == 0.0
    assert lim.reserve(100) == pytest.approx(5.0)  # the first 500 tokens occupy 5 s
    lim.charge(tokens=-300)  # the first call used 300 tokens less than estimated: given back
    assert lim.reserve(100) == pytest.approx(3.0)
    lim.charge(requests=2)  # no request dimension: nothing to charge
    assert lim.reserve(0) == pytest.approx(4.0)


def test_state_file_survives_garbage(tmp_path):
    lim = RateLimiter("m", rpm=60, state_dir=tmp_path, headroom=1.0)
    lim.path.write_text("{not json")
    assert lim.reserve() == 0.0 and lim.reserve() == pytest.approx(1.0, abs=0.05)


def test_pool_slots_for():
    assert pool_slots_for(60, 1.0, 8) == 2  # 1 request in flight: one task (+1)
    assert pool_slots_for(1000, 3.0, 8) == 8  # 50 in flight / 8 per task = 7 (+1)
    with pytest.raises(ValueError):
        pool_slots_for(0, 1.0, 8)


# --------------------------------------------------------------------------- the judge under a quota


def bundle(i: int) -> DocumentBundle:
    return DocumentBundle(doc_id=f"doc_{i}", file_path=f"doc_{i}.pdf", sha256="0" * 64, total_pages=len(PAGES),
                          processing_timestamp="2026-11-21T00:00:00Z", parser="test",
                          pages=[Page(page_num=j + 1, text=f"{t} ({i})") for j, t in enumerate(PAGES)])


@pytest.fixture
def fake():
    server = FakeGemini(rpm=8, window_s=1.0).start()  # 8 requests per second, 429 + Retry-After beyond
    yield server
    server.stop()


def judge(fake: FakeGemini, **kw) -> LLMJudge:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    return LLMJudge(model, "gemini-2.5-flash", retry_policy=BackoffRetry(max_attempts=2, initial_wait_s=0.01,
                                                                          max_wait_s=0.02), **kw)


def _classification(fake) -> ClassificationOutput:
    cls = asyncio.run(judge(fake).classify(bundle(0))).classification
    time.sleep(1.05)  # the classification's request leaves the fake's 1 s window
    return cls


async def _night(j: LLMJudge, cls: ClassificationOutput, n: int):
    # V3: one call each (V2 adds its blind reading, ADR 0034)
    return await asyncio.gather(*(j.judge("V3", bundle(i), cls) for i in range(n)))


def test_judge_under_the_shared_limiter_sends_no_429(tmp_path):
    # 8 requests a second as in the other tests, over a 5 s window: the departure gate spaces requests
    # 1 / (8 × 0.9) s apart, so a 1 s window could hold exactly the quota's 8 and one request delayed in
    # transport (a loaded machine) then showed as a 9th; a 5 s window holds at most 37 of the quota's 40.
    # 48 calls: more than one window's quota, so a burst would be refused
    fake = FakeGemini(rpm=40, window_s=5.0).start()
    try:
        cls = _classification(fake)
        fake.script = [(200, lambda b: function_call(b, {"findings": []}))]
        base = len(fake.requests)
        # headroom 0.8: the jitter between a reservation and the request's arrival (client set-up, the
        # event loop) is ~0.1 s — 0.2 % of a 60 s window (the default headroom 0.98), 2 % of this 5 s one
        limiter = RateLimiter("gemini-2.5-flash", rpm=40, window_s=5.0, state_dir=tmp_path, headroom=0.8)
        started = time.monotonic()
        results = asyncio.run(_night(judge(fake, limiter=limiter), cls, 48))  # 48 calls at once, 8/s
        assert all(r.issues == [] for r in results)
        assert fake.throttled == 0  # the quota never had to refuse one
        # every judgment's own request reached the endpoint; a loaded machine can make the client resend one
        # (a transport retry after a dropped connection, never a 429), so the distinct requests are counted
        sent = [json.dumps(body, sort_keys=True) for _, body in fake.requests[base:]]
        assert len(set(sent)) == 48 and len(sent) <= 48 + 2
        assert time.monotonic() - started >= 47 / (8 * 0.8) - 0.1  # paced by the limiter, not by the fake's 429s
    finally:
        fake.stop()


def test_judge_without_limiter_waits_out_429s_and_never_escalates(fake):
    cls = _classification(fake)
    fake.script = [(200, lambda b: function_call(b, {"findings": []}))]
    results = asyncio.run(_night(judge(fake, throttle=ThrottlePolicy(max_wait_s=30)), cls, 24))
    assert fake.throttled > 0  # the quota did answer 429 …
    assert all(r.issues == [] for r in results)  # … and no judgment became VERIFICATION_INCOMPLETE


def test_judge_raises_judge_throttled_when_the_waiting_budget_is_spent(fake, tmp_path):
    cls = _classification(fake)
    fake.script = [(200, lambda b: function_call(b, {"findings": []}))]
    limiter = RateLimiter("gemini-2.5-flash", rpm=2, window_s=1.0, state_dir=tmp_path)  # 0.5 s a slot
    j = judge(fake, limiter=limiter, throttle=ThrottlePolicy(max_wait_s=1.0))

    async def night():
        return await asyncio.gather(*(j.judge("V2", bundle(i), cls) for i in range(6)),
                                    return_exceptions=True)

    results = asyncio.run(night())
    thrown = [r for r in results if isinstance(r, BaseException)]
    assert thrown and all(isinstance(r, JudgeThrottled) for r in thrown)
    done = [r for r in results if not isinstance(r, BaseException)]
    assert done and all(r.issues == [] for r in done)  # nothing escalated, whether it ran or was throttled
