"""One LLM rate limiter shared by every task of a night: requests and tokens per minute, per model.

The quota of a model (Gemini: requests per minute and tokens per minute, per project and model) is
one budget for the whole night, but the night's LLM calls come from many task processes at once
(LocalExecutor: one process per task instance; Celery/Kubernetes: several machines). A per-task
``concurrency`` alone cannot keep them under the quota: 4 tasks × 8 calls at 1 s latency ask for
~1,900 requests a minute, and a 60-requests-per-minute quota answers most of them with 429.

Design (ADR 0014, chosen over the alternatives it rejects):

* **GCRA ("virtual scheduling") in one small state file per model, under an ``fcntl`` lock.** A
  caller *reserves* the next free slot — ``admit = max(now, tat)``, then ``tat = admit + cost ×
  interval`` — and sleeps until ``admit``. Two dimensions share one reservation: requests
  (interval ``window / rpm``) and tokens (interval ``window / tpm`` per token, the cost being the
  call's estimated tokens, corrected after the call by :meth:`RateLimiter.charge`). Reservations
  are spaced, never bursty, so a sliding per-minute window on the provider's side sees at most
  ``rpm × headroom`` requests in any minute; ``headroom`` (default 0.98) absorbs the jitter between
  our clock and the moment a request reaches the provider. The lock is held for one read-modify-
  write of a ~60-byte file (tens of microseconds), never across a sleep or a model call.
* **A departure gate** (:meth:`RateLimiter.depart`, passed right before each request is sent):
  callers that wake late (a stalled event loop) would otherwise leave in a burst; the gate keeps
  actual departures at least ``gate_interval`` apart, so no window holds more than the quota
  whatever the lateness.
* **A 429 pauses everybody** (:meth:`RateLimiter.pause`): the provider's ``Retry-After`` moves the
  shared ``tat``, so every process waits instead of each one discovering the quota by itself.
* **Several machines** (Celery workers, Kubernetes pods): each machine keeps its own file and
  enforces ``share = 1 / hosts`` of the quota (Variable ``docverify_llm_limiter_hosts``). That can
  leave quota unused when one machine is idle, but needs nothing beyond the local disk.

Rejected: (b) a bucket in the artifact store with create-if-absent leases — one or two object
writes per request on ``gs://`` (tens of milliseconds each, rate-limited per object by GCS
itself at about one write per second) is slower than the quota it guards; (c) each task pacing
its own calls at ``rpm / pool slots`` (aiolimiter-style) — wastes the quota of every idle slot and
still lets the tasks' bursts collide. Libraries: ``aiolimiter`` (PyPI) is in-process only;
``limits`` shares state only through Redis/Memcached/MongoDB; ``pyrate-limiter``'s SQLite bucket
with a file lock would share request counts across processes, but has no shared pause on a 429
and adds a dependency and an SQLite file for what is ~100 lines of stdlib here.

Times are ``time.time()`` (shared by every process of a machine). Nothing here logs or stores
anything about the calls beyond counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import math
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["LimiterWaitExceeded", "RateLimiter", "pool_slots_for"]


class LimiterWaitExceeded(Exception):
    """The next free slot is further away than the caller may wait (nothing was reserved)."""

    def __init__(self, wait_s: float, max_wait_s: float):
        super().__init__(f"the next free LLM slot is {wait_s:.1f}s away, beyond the {max_wait_s:.1f}s the call may wait")
        self.wait_s = wait_s
        self.max_wait_s = max_wait_s


def pool_slots_for(rpm: float, latency_s: float, concurrency: int) -> int:
    """Slots of the ``llm`` pool that keep a quota of ``rpm`` busy (Little's law): the calls in
    flight at that rate are ``rpm / 60 × latency_s``; each task runs up to ``concurrency`` of them,
    plus one slot so a task starting up or finishing does not leave the quota idle. More slots
    than that only make tasks wait at the limiter (harmless, but they hold executor slots)."""
    if rpm <= 0:
        raise ValueError("rpm must be > 0 (an unlimited quota is bounded by the executor's parallelism)")
    return max(1, math.ceil(rpm / 60.0 * latency_s / max(1, concurrency))) + 1


class RateLimiter:
    """Requests and tokens per ``window_s`` for one model, shared through ``state_dir``.

    Args:
        key: what the quota belongs to (the model id; a different key is a different budget).
        rpm: requests per window (0 = unlimited).
        tpm: tokens per window (0 = unlimited). The LLM judge charges input tokens only (ADR 0018):
            Gemini's TPM quota counts input tokens, not output or thoughts.
        state_dir: directory of the shared state file (one machine); None keeps the state in this
            process only (tests, one-off CLI runs).
        share: the fraction of the quota this machine enforces (``1 / hosts``).
        headroom: the fraction of the (shared) quota actually scheduled.
        window_s: the quota's window (60 for per-minute quotas; tests use seconds).
    """

    def __init__(self, key: str, *, rpm: float = 0, tpm: float = 0, state_dir: str | os.PathLike[str] | None = None,
                 share: float = 1.0, headroom: float = 0.98, window_s: float = 60.0,
                 clock: Callable[[], float] = time.time) -> None:
        if rpm < 0 or tpm < 0:
            raise ValueError("rpm and tpm must be >= 0 (0 = unlimited)")
        if not 0 < share <= 1 or not 0 < headroom <= 1 or window_s <= 0:
            raise ValueError("share and headroom must be in (0, 1], window_s > 0")
        self.key = key
        self.rpm, self.tpm, self.share, self.headroom, self.window_s = rpm, tpm, share, headroom, window_s
        scale = share * headroom
        self.request_interval = window_s / (rpm * scale) if rpm else 0.0
        self.token_interval = window_s / (tpm * scale) if tpm else 0.0
        # the departure gate's spacing: between the quota's and the schedule's (headroom halved), so
        # late departures catch up with the schedule while no window holds more than the quota
        self.gate_interval = window_s / (rpm * share * (1 + headroom) / 2) if rpm else 0.0
        self.clock = clock
        self.path: pathlib.Path | None = None
        if state_dir is not None:
            d = pathlib.Path(state_dir)
            d.mkdir(parents=True, exist_ok=True)
            self.path = d / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
        self._mem: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def unlimited(self) -> bool:
        return not (self.request_interval or self.token_interval)

    # ------------------------------------------------------------------ shared state
    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, float]]:
        """The state under an exclusive lock (thread lock + ``flock`` on the file); written back on exit."""
        with self._lock:
            if self.path is None:
                yield self._mem
                return
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = b""
                while chunk := os.read(fd, 4096):
                    raw += chunk
                try:
                    state = json.loads(raw) if raw else {}
                    state = {k: float(v) for k, v in state.items()} if isinstance(state, dict) else {}
                except (ValueError, TypeError):  # a torn or foreign file: start afresh
                    state = {}
                yield state
                data = json.dumps(state).encode()
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, data)
            finally:
                os.close(fd)  # closing releases the flock

    # ------------------------------------------------------------------ operations
    def reserve(self, tokens: int = 0, *, max_wait_s: float = math.inf) -> float:
        """Reserve one request of ``tokens`` and return how long to wait before sending it;
        :class:`LimiterWaitExceeded` (nothing reserved) if that is more than ``max_wait_s``."""
        if self.unlimited:
            return 0.0
        now = self.clock()
        with self._state() as st:
            # "p": a 429's pause (both dimensions); "r"/"t": the requests'/tokens' next free time;
            # "d": the departure gate (:meth:`depart`)
            admit = max(now, st.get("p", 0.0), st.get("r", 0.0), st.get("t", 0.0))
            wait = admit - now
            if wait > max_wait_s:
                raise LimiterWaitExceeded(wait, max_wait_s)
            if self.request_interval:
                st["r"] = max(st.get("r", 0.0), admit) + self.request_interval
            if self.token_interval:
                st["t"] = max(st.get("t", 0.0), admit) + max(0, tokens) * self.token_interval
        return wait

    async def acquire(self, tokens: int = 0, *, max_wait_s: float = math.inf, depart: bool = True) -> float:
        """:meth:`reserve`, sleep until the slot, then (``depart``) pass :meth:`depart`'s gate;
        returns the seconds waited. A caller with work of its own between the slot and the request
        (client set-up) passes ``depart=False`` and calls :meth:`depart` right before sending."""
        wait = self.reserve(tokens, max_wait_s=max_wait_s)
        if wait > 0:
            await asyncio.sleep(wait)
        return wait + (await self.depart() if depart else 0.0)

    async def depart(self) -> float:
        """The departure gate: no two requests of this model leave (in any process of the machine)
        less than ``gate_interval`` apart; returns the seconds waited.

        Reservations are spaced, but a caller that wakes late (a busy event loop, a CPU-starved
        process, a client's first set-up) sends late, and the callers queued behind it, woken on
        time, would then leave in a burst: several late wakes compress into one instant and a
        sliding window on the provider's side sees more than the quota (seen: four requests in 6 ms
        after a 0.5 s stall, a 429 on a 1 s window with 20 % headroom). The gate re-spaces the
        actual departures, so a window holds at most ``window / gate_interval + 1`` of them
        whatever the lateness; its spacing is shorter than the reservations' (half the headroom),
        so on schedule it does not wait and a late queue catches up with the schedule."""
        if not self.gate_interval:
            return 0.0
        waited = 0.0
        while True:
            now = self.clock()
            with self._state() as st:
                gate = st.get("d", 0.0)
                if now >= gate:
                    st["d"] = now + self.gate_interval
                    return waited
            await asyncio.sleep(gate - now)
            waited += gate - now

    def charge(self, *, requests: int = 0, tokens: int = 0) -> None:
        """Correct the budget after a call: requests it made beyond the one reserved (pydantic-ai's
        re-asks for schema-invalid output) and the difference between its real and estimated tokens
        (negative gives tokens back). Never waits; later reservations absorb it."""
        if self.unlimited or not (requests or tokens):
            return
        now = self.clock()
        with self._state() as st:
            if requests and self.request_interval:
                st["r"] = max(st.get("r", 0.0), now if requests > 0 else 0.0) + requests * self.request_interval
            if tokens and self.token_interval:
                st["t"] = max(st.get("t", 0.0), now if tokens > 0 else 0.0) + tokens * self.token_interval

    def pause(self, seconds: float) -> None:
        """The provider refused a request (429, ``Retry-After: seconds``): no slot of this model
        is given out by any process before ``now + seconds``."""
        if self.unlimited or seconds <= 0:
            return
        until = self.clock() + seconds
        with self._state() as st:
            st["p"] = max(st.get("p", 0.0), until)

    def __repr__(self) -> str:
        return (f"RateLimiter({self.key!r}, rpm={self.rpm}, tpm={self.tpm}, share={self.share}, "
                f"shared={'file' if self.path else 'process'})")
