"""A promote's inputs as plain data — a plan, a policy, benchmark results, a startup report — and a ledger
that lives in memory, so the runner's tests touch no disk. The fakes of its protocols: runner_fakes.py."""

from __future__ import annotations

from typing import Any, Mapping

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.inventory.policy import BenchPolicy, JudgePolicy, Policy
from deployctl.decisions.evidence import Plan, StartOutcome
from deployctl.startup.parser import StartupReport
from deployctl.units.stamp import unit_hash

POLICY = Policy(bench=BenchPolicy(concurrency=[1, 64]), judge=JudgePolicy(min_trials=1), verify_concurrency=[1])


def startup(max_running_requests: int = 48) -> StartupReport:
    """A ready server's report: the scheduler's decision and the version, what the runner reads."""
    return StartupReport("ready", server_info_max_running_requests=max_running_requests, sglang_version="0.5.10")


READY = StartOutcome(True, "ready", startup=startup(48), wait_s=2.0)


def memory_ledger() -> Ledger:
    return Ledger.in_memory()


def bench(tok_s: Mapping[int, float], trials: int = 1, ok: int = 4, spread: float = 0.0) -> BenchResult:
    """``trials`` trials a level around ``tok_s``, ``spread`` apart (a fraction: 0.02 is 2 % between trials)."""
    p = Percentiles(1.0, 1.0, 1.0, 1.0)

    def value(v: float, t: int) -> float:
        return v * (1 + spread * (t - (trials - 1) / 2))

    levels = tuple(
        LevelResult(c, tuple(
            TrialResult(c, t, 0.0, 1.0, ok, 0 if ok else 4, int(value(v, t)), 0, value(v, t), 0.0, p, p, p, p, p,
                        failures={} if ok else {"connect": 4})
            for t in range(trials)))
        for c, v in tok_s.items()
    )
    return BenchResult("http://x", "m", 1000, 1000, 0.0, levels)


KNOWN_GOOD_TEXT = "[Service]\nExecStart=/x\n"
CANDIDATE_TEXT = "[Service]\nExecStart=/x --new\n"


def plan(**kw: Any) -> Plan:
    args = dict(deployment="qwen", profile="candidate", unit_name="sglang-qwen.service",
                candidate_text=CANDIDATE_TEXT, candidate_hash=unit_hash(CANDIDATE_TEXT),
                known_good_text=KNOWN_GOOD_TEXT, known_good_hash=unit_hash(KNOWN_GOOD_TEXT), url="http://127.0.0.1:1",
                policy=POLICY, host="h1")
    args.update(kw)
    return Plan(**args)
