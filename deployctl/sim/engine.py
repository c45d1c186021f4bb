"""Continuous batching on a virtual clock.

At most max_running_requests run, and only while their prompts plus requested output fit the KV
pool (max_total_num_tokens); the rest queue. Each iteration is either a prefill step (admits
queued requests up to chunked_prefill_size tokens) or a decode step in which every running request
gains its speculative accept length. Simulated time advances by the model's step time; the loop
sleeps until real time = simulated time / SGLANG_SIM_TIME_SCALE, so a scaled run reports
proportionally higher tok/s while every ratio stays the same.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from dataclasses import dataclass, field

from deployctl.sim.batchlog import BatchLog
from deployctl.sim.throughput import PerfModel

_MAX_LAG_S = 0.25
_TAU_S = 1.0  # beyond this the loop stops owing time: a CPU-bound simulator shows up as lost throughput


@dataclass(eq=False)
class Request:
    prompt_tokens: int
    max_tokens: int
    stream: bool
    stop_reason: str = "length"   # "stop" when the simulated model ends on EOS
    generated: int = 0
    finished: bool = False
    aborted: bool = False
    first_token_at: float | None = None  # the event loop's clock when its prefill gave the first token
    _waiter: asyncio.Future | None = field(default=None, repr=False)

    async def wait_change(self) -> None:
        if self.finished:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Engine:
    def __init__(self, perf: PerfModel, max_running: int, chunked_prefill: int, time_scale: float,
                 seed: str | None = None, kv_tokens: int = 1 << 62, log: BatchLog | None = None) -> None:
        self.perf = perf
        self.max_running = max(1, max_running)
        self.kv_tokens = kv_tokens
        self._reserved = 0     # KV tokens the running requests will need at their full length
        self.log = log
        self._busy_clock = 0.0
        # Simulated seconds spent stepping (the model's time, before SGLANG_SIM_TIME_SCALE): tokens over it
        # are what the model serves, whatever a loaded host does to the wall clock.
        self.simulated_s = 0.0
        self._drift = 1.0
        self._drift_until = 0.0
        self.submitted = 0     # generation requests so far: SGLANG_SIM_SWING turns on this count
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.chunked_prefill = max(chunked_prefill, 1) if chunked_prefill > 0 else 1 << 30
        self.time_scale = time_scale
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.rng = random.Random(seed)
        self._kick: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        self._busy = 0.0       # share of recent real time spent stepping (time constant _TAU_S)
        self._batch = 0.0      # recent mean batch size
        self._last = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def submit(self, req: Request) -> None:
        self.submitted += 1
        self.waiting.append(req)
        if self._kick is not None and not self._kick.done():
            self._kick.set_result(None)

    def abort(self, req: Request) -> None:
        req.aborted = True

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        accept = self.perf.accept_length
        base, whole = int(accept), accept - int(accept)
        t0, vt = loop.time(), 0.0
        while True:
            if not self.waiting and not self.running:
                self._kick = loop.create_future()
                await self._kick
                t0, vt = loop.time(), 0.0
            admitted: list[Request] = []
            budget = self.chunked_prefill
            while self.waiting and len(self.running) + len(admitted) < self.max_running:
                req = self.waiting[0]
                if req.aborted:
                    self.waiting.popleft()
                    continue
                need = req.prompt_tokens + req.max_tokens
                if (admitted and req.prompt_tokens > budget) or \
                        ((self.running or admitted) and self._reserved + need > self.kv_tokens):
                    break
                admitted.append(self.waiting.popleft())
                budget -= req.prompt_tokens
                self._reserved += need
            if admitted:
                dt = self.perf.prefill_s(sum(r.prompt_tokens for r in admitted))
            else:
                dt = self.perf.decode_step_s(len(self.running))
            dt /= self._drift_factor(dt) * self._swing_factor()
            vt += dt
            self.simulated_s += dt
            delay = t0 + vt / self.time_scale - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                if delay < -_MAX_LAG_S:
                    t0 -= delay + _MAX_LAG_S
                await asyncio.sleep(0)
            self._observe(loop.time(), len(self.running) + len(admitted))
            if admitted:
                if self.log is not None:
                    tokens = sum(r.prompt_tokens for r in admitted)
                    used = sum(r.prompt_tokens + r.generated for r in self.running) + tokens
                    self.log.prefill(len(admitted), tokens, len(self.running), len(self.waiting), used, dt / self.time_scale,
                                     sum(r.prompt_tokens for r in self.waiting))
                for req in admitted:
                    if req.aborted:
                        self._release(req)
                        continue
                    req.generated = 1
                    req.first_token_at = loop.time()
                    self.prompt_tokens_total += req.prompt_tokens
                    self.generation_tokens_total += 1
                    self._finish_or_wake(req)
                    if req.finished:
                        self._release(req)
                    else:
                        self.running.append(req)
                continue
            still: list[Request] = []
            rng = self.rng.random
            before = self.running
            generated = 0
            for req in self.running:
                if req.aborted:
                    self._release(req)
                    continue
                gain = base + (1 if whole and rng() < whole else 0)
                gain = min(gain, req.max_tokens - req.generated)
                req.generated += gain
                generated += gain
                self._finish_or_wake(req)
                if req.finished:
                    self._release(req)
                else:
                    still.append(req)
            self.running = still
            self.generation_tokens_total += generated
            if self.log is not None and self.log.tick(generated, len(before)):
                used = sum(r.prompt_tokens + r.generated for r in before)
                self.log.decode(len(before), len(self.waiting), used)

    def _drift_factor(self, dt: float) -> float:
        """Within-run speed wander on the busy clock (idle time does not advance it)."""
        self._busy_clock += dt
        if self._busy_clock >= self._drift_until and self.perf.drift_sigma > 0:
            self._drift = math.exp(self.rng.gauss(0.0, self.perf.drift_sigma))
            self._drift_until = self._busy_clock + self.perf.drift_period_s
        return self._drift

    def _swing_factor(self) -> float:
        """SGLANG_SIM_SWING: the factor of the block of requests the latest submitted one belongs to."""
        swing, every = self.perf.swing, self.perf.swing_every
        if not swing or not self.submitted:
            return 1.0
        return swing[(self.submitted - 1) // every % len(swing)]

    def kv_tokens_used(self) -> int:
        return sum(r.prompt_tokens + r.generated for r in self.running)

    def _release(self, req: Request) -> None:
        self._reserved -= req.prompt_tokens + req.max_tokens

    def _observe(self, now: float, batch: int) -> None:
        gap = now - self._last
        # idle time since the previous step decays the load, the step itself adds to it
        keep = math.exp(-gap / _TAU_S)
        self._busy = self._busy * keep + (1 - keep) * (1.0 if gap < 0.2 else 0.0)
        self._batch = self._batch * keep + (1 - keep) * batch
        self._last = now

    def load(self, now: float) -> tuple[float, float]:
        """(busy share, mean batch) over the last second or so, for the simulated power draw."""
        keep = math.exp(-max(now - self._last, 0.0) / _TAU_S)
        return self._busy * keep, self._batch * keep

    @staticmethod
    def _finish_or_wake(req: Request) -> None:
        if req.generated >= req.max_tokens:
            req.finished = True
            req._wake()
        elif req.stream:
            req._wake()
