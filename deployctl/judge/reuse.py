"""Whether a stored baseline measurement is still true of today's server, and the trial that checks it.

A baseline is reused only when nothing that changes a GPU server's speed changed since it was measured:
the unit (its hash), the sweep, the host, the SGLang version, the GPU model and driver, the power limit
and the clocks policy; and it is recent. Even then the host may have drifted (thermals, a neighbour, a
firmware update nobody recorded), so one confirmation trial per critical level is run on today's server
and compared with the stored trials; only when every level agrees is the baseline reused (with the
confirmation trial added to it), else a fresh baseline is measured.

Pure: the fingerprints, the clock reading and the trial values come in; a decision with its reasons
goes out. What the ledger stores with a baseline is a ``BaselineFingerprint`` (``to_dict``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from deployctl.bench.result import BenchResult
from deployctl.judge.stats import NoiseEstimate, pool
from deployctl.judge.metrics import METRICS
from deployctl.judge.wording import duration


@dataclass(frozen=True)
class BaselineFingerprint:
    """What a baseline measurement measured; a field that is None was not known (and never matches)."""

    unit_hash: str
    sweep: str  # the bench key: levels, tokens, requests per level
    host: str | None = None
    sglang_version: str | None = None
    gpu_model: str | None = None
    gpu_driver: str | None = None
    power_limit_w: float | None = None
    clocks_policy: str | None = None  # e.g. "default", "locked 1980 MHz"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BaselineFingerprint":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_LABELS = {
    "unit_hash": "the unit", "sweep": "the sweep", "host": "the host", "sglang_version": "the SGLang version",
    "gpu_model": "the GPU model", "gpu_driver": "the GPU driver", "power_limit_w": "the GPU power limit",
    "clocks_policy": "the GPU clocks policy",
}


@dataclass(frozen=True)
class ReuseDecision:
    reusable: bool
    reasons: tuple[str, ...]  # why not, or what is reused and how old


# A baseline of the same unit, host, version and sweep this recent is reused by promote and bisect.
BASELINE_MAX_AGE_S = 3600.0


def reuse_decision(
    stored: BaselineFingerprint, measured_at: float, current: BaselineFingerprint, now: float, max_age_s: float
) -> ReuseDecision:
    """Whether the baseline measured at ``measured_at`` under ``stored`` may stand in for one under ``current``."""
    reasons = []
    for name, label in _LABELS.items():
        was, is_ = getattr(stored, name), getattr(current, name)
        if is_ is None or was is None:
            reasons.append(f"{label} is not known for {'today' if is_ is None else 'the stored baseline'}")
        elif was != is_:
            reasons.append(f"{label} changed: {was} → {is_}")
    age = now - measured_at
    if age > max_age_s:
        reasons.append(f"measured {duration(age)} ago, older than the {duration(max_age_s)} allowed")
    elif age < 0:
        reasons.append("measured in the future: the clock moved back")
    if reasons:
        return ReuseDecision(False, tuple(reasons))
    return ReuseDecision(True, (f"the baseline measured {duration(age)} ago matches unit, sweep, host, SGLang, GPU, "
                                "driver, power limit and clocks",))


@dataclass(frozen=True)
class Confirmation:
    agrees: bool
    reason: str


def confirm(
    stored: Sequence[float], trial: float, prior: NoiseEstimate | None, *, alpha: float = 0.01
) -> Confirmation:
    """Does one new trial of the live release agree with its stored trials at this level?

    A prediction interval for one new value (logs, σ pooled with the learned prior): outside it at
    ``alpha`` two-sided, the stored baseline no longer describes the server and a fresh one is measured.
    ``alpha`` is the chance of a needless fresh baseline, not an error of the verdict. One trial sees a
    drift only when it is large against one trial's noise (at σ = 3 %, about 10 % or more); smaller
    drifts are the price of reuse, bounded by ``max_age_s``.
    """
    # Here, not at the top: the ledger reads a ``BaselineFingerprint`` back for every read-only verb,
    # which then costs no scipy (benchmarks/cli_startup.py).
    from scipy.special import stdtrit

    logs = [math.log(v) for v in stored]
    n = len(logs)
    mean = sum(logs) / n
    noise = pool(prior, sum((x - mean) ** 2 for x in logs), n - 1)
    moved = math.log(trial) - mean
    text = f"confirmation trial {trial:.1f} against the stored mean {math.exp(mean):.1f} ({_pct(moved)})"
    if noise is None:
        return Confirmation(False, f"{text}: one stored trial and no learned noise, nothing to test against")
    half = float(stdtrit(noise.df, 1 - alpha / 2)) * noise.sigma * math.sqrt(1 + 1 / n)
    if abs(moved) > half:
        return Confirmation(False, f"{text}: outside the stored trials' noise (±{100 * math.expm1(half):.1f} %)")
    return Confirmation(True, f"{text}: agrees (within ±{100 * math.expm1(half):.1f} %)")


def confirm_levels(
    stored: BenchResult, trial: BenchResult, levels: Sequence[int], metric: str,
    noise: Mapping[int, NoiseEstimate],
) -> dict[int, Confirmation]:
    """``confirm`` at each level: the stored trials' ``metric`` against the confirmation trial's."""
    out = {}
    for c in levels:
        before, now = _values(stored, c, metric), _values(trial, c, metric)
        if not before or not now:
            out[c] = Confirmation(False, "no valid " + ("stored trial" if not before else "confirmation trial"))
        else:
            out[c] = confirm(before, now[0], noise.get(c))
    return out


def trial_seconds(result: BenchResult) -> float:
    """Seconds of one trial, as the confirmation trials took them: a sweep's warm-up, which a fresh
    baseline runs as well, is not counted as saved."""
    walls = [t.wall_s for level in result.levels for t in level.trials]
    return sum(walls) / len(walls) if walls else 0.0


def _values(result: BenchResult, c: int, metric: str) -> list[float]:
    level = result.level(c)
    value = METRICS[metric].value
    found = [value(t) for t in level.trials if t.invalid_reason is None] if level else []
    return [float(v) for v in found if v is not None and math.isfinite(v) and v > 0]


def _pct(log_change: float) -> str:
    return f"{100 * math.expm1(log_change):+.1f} %".replace("-", "−")


@dataclass(frozen=True)
class ReuseAccount:
    """What reusing a baseline saved, for promote's output and the ledger: counted, not guessed."""

    reused_from: int  # the release whose baseline was reused
    age_s: float
    confirmation_trials: int  # run today instead of the baseline
    baseline_trials: int  # what a fresh baseline would have run, planned from today's spread and learned σ
    trial_s: float  # seconds of one trial, as measured by the confirmation trials

    @property
    def saved_s(self) -> float:
        return (self.baseline_trials - self.confirmation_trials) * self.trial_s

    def describe(self) -> str:
        return (f"baseline: reused the measurement of release {self.reused_from} ({duration(self.age_s)} old), "
                f"checked by {self.confirmation_trials} confirmation trial(s) instead of {self.baseline_trials} "
                f"baseline trials: {self.saved_s:.0f} s of benchmark saved")
