"""Run a benchmark sweep against one server and put the result in ``deployctl.bench.result`` form.

``run_sweep`` asks the server what it is (/server_info, /model_info), plans the sweep
(``deployctl.bench.plan``), sends discarded warm-up requests, then runs each level's trials one after
another (``deployctl.load.trial.run_trial``: closed loop, or open loop with a request rate) through the
load transport (``deployctl.adapters.http_load``) and summarizes each trial (``deployctl.bench.metrics``).

Stopping: set ``stop`` (the CLI does on Ctrl-C). In-flight requests are cancelled, the trial is kept
with what completed and marked invalid ("interrupted"), and the result so far is returned.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from deployctl.adapters.http_control import ControlClient
from deployctl.adapters.http_load import LoadClient, LoadError
from deployctl.bench.metrics import (
    RequestRecord,
    StreamRecorder,
    TrialContext,
    count_retractions,
    summarize_trial,
)
from deployctl.bench.plan import (
    COMPLETIONS_PATH,
    DEFAULT_VOCAB_SIZE,
    LevelPlan,
    LoadRequest,
    Workload,
    plan_sweep,
)
from deployctl.bench.result import (
    BenchResult,
    LevelTelemetry,
    TrialResult,
    group_levels,
)
from deployctl.inventory.policy import BenchPolicy
from deployctl.load.trial import run_trial, until_done_or_stopped

# None: the log could not be read (retractions then unknown, not zero).
ServerLog = Callable[[float, float], Iterable[str] | None | Awaitable[Iterable[str] | None]]
TelemetryWindow = Callable[[float, float], LevelTelemetry | None]


@dataclass(frozen=True)
class Progress:
    """Reported after each finished request (``trial`` None during warm-up) and after each trial."""

    concurrency: int
    trial: int | None
    done: int
    total: int | None  # None for duration-bound levels
    ok: int
    failed: int
    output_tokens: int
    result: TrialResult | None = None  # set once, when the trial is summarized


ProgressFn = Callable[[Progress], None]


async def run_sweep(
    url: str,
    policy: BenchPolicy,
    *,
    levels: Sequence[int] | None = None,
    trials: int = 1,
    progress: ProgressFn | None = None,
    model: str | None = None,
    vocab_size: int | None = None,
    text_prompt: str | None = None,
    duration_s: float | None = None,
    request_rate: float | None = None,
    seed: int | None = None,
    server_log: ServerLog | None = None,
    telemetry: TelemetryWindow | None = None,
    stop: asyncio.Event | None = None,
    api_key: str | None = None,
) -> BenchResult:
    """Measure every level × trial; never raises for a failed request (failures are data).

    ``server_log(start, end)`` returns the server's log lines in that epoch window (to spot
    retractions); ``telemetry(start, end)`` a per-trial GPU/process summary. Both optional."""
    stop = stop or asyncio.Event()
    async with ControlClient(url, api_key=api_key) as control:
        info = await control.server_info() or {}
        model_info = await control.model_info() or {}
        model_ids = await control.model_ids()
    facts = server_facts(info, model_info, model_ids)
    workload = Workload(
        model=model or facts["model"] or "default",
        input_tokens=policy.input_tokens,
        output_tokens=policy.output_tokens,
        vocab_size=vocab_size or facts["vocab_size"] or DEFAULT_VOCAB_SIZE,
        text_prompt=text_prompt,
        seed=seed if seed is not None else time.time_ns() % 2**31,
    )
    plan = plan_sweep(policy, workload, levels=levels, trials=trials, duration_s=duration_s, request_rate=request_rate)
    started_at = time.time()
    results: list[TrialResult] = []
    async with LoadClient(url, timeout_s=policy.request_timeout_s, api_key=api_key) as client:
        if plan.warmup and not stop.is_set():
            await _warm_up(client, plan.warmup, stop, progress)
        for level in plan.levels:
            if stop.is_set():
                break
            run = await run_trial(client, level, stop=stop, on_done=_level_progress(level, progress))
            end = run.started_at + run.wall_s
            ctx = TrialContext(
                concurrency=level.concurrency,
                trial=level.trial,
                started_at=run.started_at,
                wall_s=run.wall_s,
                planned_requests=level.requests if duration_s is None else len(run.records),
                max_failure_rate=policy.max_failure_rate,
                open_loop=request_rate is not None,
                server_capacity=facts["capacity"],
                retractions=await _retractions(server_log, run.started_at, end),
                client=run.client,
                interrupted=run.interrupted,
                telemetry=telemetry(run.started_at, end) if telemetry else None,
            )
            trial = summarize_trial(run.records, ctx)
            results.append(trial)
            if progress:
                progress(Progress(level.concurrency, level.trial, len(run.records), len(run.records),
                                  trial.requests_ok, trial.requests_failed, trial.output_tokens, trial))
    return BenchResult(
        url=url,
        model=workload.model,
        input_tokens=policy.input_tokens,
        output_tokens=policy.output_tokens,
        started_at=started_at,
        levels=group_levels(results),
        server_info={k: v for k, v in facts.items() if v is not None},
        client=LoadClient.name,
    )


async def _warm_up(client: LoadClient, requests: Sequence[LoadRequest], stop: asyncio.Event,
                   progress: ProgressFn | None) -> None:
    done = []

    async def one(request: LoadRequest) -> None:
        recorder = StreamRecorder(time.perf_counter(), request.prompt_tokens, request.max_tokens)
        try:
            await client.stream(COMPLETIONS_PATH, request.body, recorder)
        except LoadError:
            pass  # warm-up results are discarded; a dead server shows in the first level
        done.append(request)
        if progress:
            progress(Progress(0, None, len(done), len(requests), len(done), 0, 0))

    await until_done_or_stopped(asyncio.gather(*(one(r) for r in requests)), stop)


def _level_progress(level: LevelPlan, progress: ProgressFn | None) -> Callable[[RequestRecord], None] | None:
    if progress is None:
        return None
    counts = {"done": 0, "ok": 0, "failed": 0, "tokens": 0}
    total = level.requests if level.duration_s is None else None

    def on_done(record: RequestRecord) -> None:
        counts["done"] += 1
        if record.sample.ok:
            counts["ok"] += 1
            counts["tokens"] += record.sample.output_tokens
        else:
            counts["failed"] += 1
        progress(Progress(level.concurrency, level.trial, counts["done"], total, counts["ok"], counts["failed"],
                          counts["tokens"]))

    return on_done


async def _retractions(server_log: ServerLog | None, start: float, end: float) -> int | None:
    if server_log is None:
        return None
    lines = server_log(start, end)
    if inspect.isawaitable(lines):
        lines = await lines
    return None if lines is None else count_retractions(lines)


def server_facts(server_info: dict[str, Any], model_info: dict[str, Any], model_ids: Sequence[str]) -> dict[str, Any]:
    """What the sweep needs from the server's own reports: model name to send, effective request
    capacity (the TP0 scheduler value, not the CLI one), version, vocabulary size when reported."""
    capacity = None
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        per_dp = states[0].get("effective_max_running_requests_per_dp")
        if isinstance(per_dp, int):
            capacity = per_dp * int(server_info.get("dp_size") or 1)
    if capacity is None and isinstance(server_info.get("max_running_requests"), int):
        capacity = server_info["max_running_requests"]
    served = server_info.get("served_model_name")
    vocab = model_info.get("vocab_size") or server_info.get("vocab_size")
    return {
        "model": served or (model_ids[0] if model_ids else None) or model_info.get("model_path"),
        "version": server_info.get("version"),
        "capacity": capacity,
        "vocab_size": vocab if isinstance(vocab, int) else None,
    }


