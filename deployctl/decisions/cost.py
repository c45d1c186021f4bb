"""What a promote costs in GPU time, before it runs (pure): trials × their measured duration + server starts ×
this host's measured start time, × the deployment's GPUs.

The expected figure is what past promotes of this deployment on this host spent (trials, their seconds,
server starts and how long each took to be ready), averaged; with no history it falls back to defaults from
the policy, and says so. The worst case is the policy's ceiling: every level at ``max_trials`` on both sides,
then the step over server starts at every critical level on every start it may ask for
(``judge.starts.starts_a_side``), priced at this host's measured durations. docs/cost.md has the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from deployctl.inventory.policy import Policy
from deployctl.judge.wording import duration


# With no history: a trial and a server start of this long, and one start plus its rollback (promotes made
# 1.7–2.2 starts each in the calibration); the estimate says it rests on these.
DEFAULT_TRIAL_S = 60.0
DEFAULT_START_S = 300.0
DEFAULT_RESTARTS = 2
# Server starts a side of a verdict decided over starts (``judge.starts.STARTS`` / ``STARTS_ONE_LEVEL``),
# repeated here so that pricing a dry run does not import scipy; tests/unit/test_cost.py pins them together.
STARTS = 2
STARTS_ONE_LEVEL = 3
# The SGLang flags whose product is the GPUs one server spans (tensor × data × pipeline parallel).
_PARALLEL_FLAGS = (("tp", "tp-size", "tensor-parallel-size"), ("dp", "dp-size", "data-parallel-size"),
                   ("pp", "pp-size", "pipeline-parallel-size"))


@dataclass(frozen=True)
class PastPromote:
    """What one finished promote on this host spent, from the ledger: the trials it ran (their own wall time),
    of them the baseline's (a fresh baseline's, or a stored one's confirmation trials: ``reused``) with their
    seconds, and the server starts it made (restart to ready)."""

    trials: int
    trial_s: float
    starts: int
    start_s: float
    baseline_trials: int = 0
    baseline_s: float = 0.0
    reused: bool = False


@dataclass(frozen=True)
class CostEstimate:
    """Expected and worst-case cost of one promote; seconds are wall time, GPU-hours are that × ``gpus``."""

    expected_trials: float
    expected_trial_s: float  # the expected trials' seconds (the baseline's and the candidate's side each priced
    worst_trials: int        # at their own trials' duration: a slow candidate's trials cost more)
    worst_trial_s: float
    expected_starts: float
    worst_starts: int
    start_s: float  # one server start to ready, on this host (or the default)
    gpus: int
    basis: str  # what the estimate rests on, for the operator

    @property
    def expected_s(self) -> float:
        return self.expected_trial_s + self.expected_starts * self.start_s

    @property
    def worst_s(self) -> float:
        return self.worst_trial_s + self.worst_starts * self.start_s

    @property
    def expected_gpu_h(self) -> float:
        return self.expected_s * self.gpus / 3600.0

    @property
    def worst_gpu_h(self) -> float:
        return self.worst_s * self.gpus / 3600.0

    def describe(self) -> list[str]:
        return [f"cost: expected {self.expected_gpu_h:.2f} GPU-hours ({duration(self.expected_s)} on {self.gpus} GPU(s):"
                f" {self.expected_trials:.1f} trials, {self.expected_starts:.1f} server starts), worst case"
                f" {self.worst_gpu_h:.2f} GPU-hours ({duration(self.worst_s)}: {self.worst_trials} trials,"
                f" {self.worst_starts} server starts)",
                f"  the estimate rests on {self.basis}"]

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "basis": self.basis, "start_s": self.start_s,
                "expected": {"trials": self.expected_trials, "trial_s": self.expected_trial_s,
                             "starts": self.expected_starts, "wall_s": self.expected_s, "gpu_hours": self.expected_gpu_h},
                "worst": {"trials": self.worst_trials, "trial_s": self.worst_trial_s, "starts": self.worst_starts,
                          "wall_s": self.worst_s, "gpu_hours": self.worst_gpu_h}}


def estimate(policy: Policy, history: Sequence[PastPromote], gpus: int, *, reuse: bool = False) -> CostEstimate:
    """The price of a promote under ``policy`` on a host whose past promotes spent ``history``; ``reuse``: a
    stored baseline of the live unit is recent enough to be reused after one confirmation trial a critical
    level (``judge.reuse``), instead of measuring a fresh one."""
    levels = len(policy.bench.concurrency)
    critical = sum(policy.judge.rule_for(c).role == "critical" for c in policy.bench.concurrency)
    most = policy.judge.max_trials
    starts = STARTS_ONE_LEVEL if critical == 1 else STARTS
    # Worst: the fixed design's trials on the first start; then the candidate's later starts (C2, C3) and the
    # restored baseline's (B2, B3) each measure every critical level at max_trials. Starts: the candidate's,
    # the rollback, and the baseline's restarts in place (B3).
    worst_trials = 2 * levels * most + 2 * (starts - 1) * critical * most
    worst_starts = 2 * starts - 1
    timed = [p for p in history if p.trials > 0]
    started = [p for p in history if p.starts > 0]
    said = "a stored baseline reused after a confirmation trial a critical level" if reuse else "a fresh baseline"
    if not timed or not started:
        baseline = critical if reuse else levels * policy.judge.min_trials
        trials = baseline + levels * policy.judge.min_trials
        return CostEstimate(
            expected_trials=trials, expected_trial_s=trials * DEFAULT_TRIAL_S, worst_trials=worst_trials,
            worst_trial_s=worst_trials * DEFAULT_TRIAL_S, expected_starts=DEFAULT_RESTARTS, worst_starts=worst_starts,
            start_s=DEFAULT_START_S, gpus=gpus,
            basis=f"no history on this host: defaults ({DEFAULT_TRIAL_S:.0f} s a trial, {DEFAULT_START_S:.0f} s a"
                  f" server start, {policy.judge.min_trials} trials a level a side, {DEFAULT_RESTARTS} starts); {said}")
    # Each side at its own trials' duration; the baseline's side is priced apart, as whether this promote
    # reuses a stored baseline is known before it runs.
    one = sum(p.trial_s for p in timed) / sum(p.trials for p in timed)
    measured = sum(p.baseline_trials for p in timed)
    baseline_one = sum(p.baseline_s for p in timed) / measured if measured else one
    others = sum(p.trials - p.baseline_trials for p in timed)
    candidate_one = sum(p.trial_s - p.baseline_s for p in timed) / others if others else one
    fresh = [p for p in timed if not p.reused and p.baseline_trials]
    if reuse:
        baseline, baseline_s = float(critical), critical * baseline_one
    elif fresh:
        baseline = sum(p.baseline_trials for p in fresh) / len(fresh)
        baseline_s = sum(p.baseline_s for p in fresh) / len(fresh)
    else:
        baseline = float(levels * policy.judge.min_trials)
        baseline_s = baseline * baseline_one
    candidate = others / len(timed)
    return CostEstimate(
        expected_trials=baseline + candidate, expected_trial_s=baseline_s + candidate * candidate_one,
        worst_trials=worst_trials,
        worst_trial_s=worst_trials / 2 * (baseline_one + candidate_one),  # half of them the baseline's (B1–B3)
        expected_starts=sum(p.starts for p in started) / len(started), worst_starts=worst_starts,
        start_s=sum(p.start_s for p in started) / sum(p.starts for p in started), gpus=gpus,
        basis=f"from {len(history)} promote(s) on this host; {said}")


def eta(cost: CostEstimate, elapsed_s: float) -> str:
    """What a running promote's progress line says is left: the expected wall time less what has passed; past
    it, the worst case is what bounds the wait."""
    left = cost.expected_s - elapsed_s
    if left > 0:
        return f"ETA {duration(left)} (expected {duration(cost.expected_s)})"
    return f"past the expected {duration(cost.expected_s)}; worst case {duration(cost.worst_s)}"


def spent(promote: PastPromote, gpus: int) -> float:
    """GPU-hours one finished promote spent: its trials and its server starts, as the estimate counts them."""
    return (promote.trial_s + promote.start_s) * gpus / 3600.0


def server_gpus(flags: Mapping[str, Any], host_gpus: int) -> int:
    """The GPUs one server spans: tp × dp × pp from its flags, else every GPU of the host."""
    product = 1
    named = False
    for names in _PARALLEL_FLAGS:
        value = next((flags[n] for n in names if n in flags and flags[n] not in (None, True, False)), None)
        if value is not None:
            named = True
            product *= int(value)
    return product if named else host_gpus
