"""Hand-built benchmark sweeps: trials with the output tok/s (and telemetry) a judge test needs."""

from __future__ import annotations

from deployctl.bench.result import (
    BenchResult,
    LevelResult,
    LevelTelemetry,
    Percentiles,
    TrialResult,
)

BASE = [1000.0, 1012.0, 991.0, 1004.0, 996.0]


def trial(c: int, i: int, tok_s: float, *, ttft_p99: float = 1.0, invalid: str | None = None,
          power: float | None = None) -> TrialResult:
    p = Percentiles()
    tel = LevelTelemetry(source="nvml", gpu_power_w=power, gpu_util_pct=None) if power is not None else None
    return TrialResult(
        concurrency=c, trial=i, started_at=0.0, wall_s=60.0, requests_ok=2 * c, requests_failed=0,
        output_tokens=int(tok_s * 60), input_tokens=1000 * 2 * c, output_tok_s=tok_s, input_tok_s=0.0,
        per_request_tok_s=Percentiles(mean=tok_s / c), ttft_s=Percentiles(p99=ttft_p99), itl_s=p, tpot_s=p,
        e2e_s=p, invalid_reason=invalid, telemetry=tel,
    )


def sweep(levels: dict[int, list]) -> BenchResult:
    out = []
    for c, values in levels.items():
        trials = tuple(v if isinstance(v, TrialResult) else trial(c, i + 1, v) for i, v in enumerate(values))
        out.append(LevelResult(c, trials))
    return BenchResult(url="http://127.0.0.1:1", model="m", input_tokens=1000, output_tokens=1000,
                       started_at=0.0, levels=tuple(out))
