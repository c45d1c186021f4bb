"""The performance model (pure): decode step time by batch size, prefill time, power draw."""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Mapping

from deployctl.sim.world import world


@dataclass(frozen=True)
class PerfModel:
    points: tuple[tuple[int, float], ...]   # (batch size, aggregate decode tok/s)
    prefill_tok_s: float
    accept_length: float                    # mean tokens per request per decode step
    factor: float                           # noise x throughput factor x forced-fusion penalty
    idle_w: float
    load_w: float
    power_limit_w: float
    power_factor: float
    drift_sigma: float = 0.0                # within-run noise: a new factor every drift_period_s simulated
    drift_period_s: float = 10.0
    swing: tuple[float, ...] = ()           # SGLANG_SIM_SWING: factors taken in turn, swing_every requests each
    swing_every: int = 0

    def aggregate(self, batch: int) -> float:
        """Aggregate decode tokens/s at this batch size (linear between calibration points)."""
        sizes = [b for b, _ in self.points]
        if batch <= sizes[0]:
            return self.points[0][1] * batch / sizes[0]
        if batch >= sizes[-1]:
            return self.points[-1][1]
        i = bisect.bisect_left(sizes, batch)
        (b0, t0), (b1, t1) = self.points[i - 1], self.points[i]
        return t0 + (t1 - t0) * (batch - b0) / (b1 - b0)

    def decode_step_s(self, batch: int) -> float:
        return batch * self.accept_length / (self.aggregate(batch) * self.factor)

    def prefill_s(self, tokens: int) -> float:
        return 0.004 + tokens / (self.prefill_tok_s * self.factor)

    def power_w(self, busy: float, batch: float) -> float:
        """Per-GPU power: idle plus a load share that grows with occupancy (the GPUs are starved)."""
        occupancy = min(1.0, 0.55 + 0.45 * batch / 64)
        loaded = self.idle_w + (self.load_w - self.idle_w) * busy * occupancy
        return max(self.idle_w, min(self.power_limit_w, loaded * self.power_factor)) if busy > 0 else self.idle_w


def parse_swing(spec: str | None) -> tuple[int, tuple[float, ...]]:
    """SGLANG_SIM_SWING ``'8:1,0.5,0.25'`` → ``(8, (1.0, 0.5, 0.25))``; unset or empty → ``(0, ())``.

    A server whose speed swings from one batch of requests to the next (a noisy neighbour, throttling),
    deterministically: a test can make a candidate's trials as far apart as it needs, whatever the host."""
    if not spec:
        return 0, ()
    every, _, factors = spec.partition(":")
    try:
        n, values = int(every), tuple(float(f) for f in factors.split(","))
    except ValueError:
        n, values = 0, ()
    if n < 1 or not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"SGLANG_SIM_SWING: cannot read {spec!r}; use <requests>:<factor>,<factor>,… "
                         "with positive numbers, e.g. 8:1,0.5,0.25")
    return n, values


def build(model: Mapping, env: Mapping[str, str], idle_w: float, power_limit_w: float, cuda_graph: bool,
          speculative: bool, flags: Mapping[str, object] | None = None, arch: str = "sm120",
          p2p: bool = False, tp: int = 1) -> PerfModel:
    """The serving model for one run: calibration x flags that pass their arch gate x noise x knobs."""
    w = world()
    perf = model["perf"]
    graph_factor = w["effects"]["no_cuda_graph_throughput"]
    if cuda_graph != perf.get("calibrated_with_cuda_graph", True):
        flag_factor = graph_factor if not cuda_graph else 1 / graph_factor
    else:
        flag_factor = 1.0
    if p2p and tp > 1:
        flag_factor *= w["effects"]["p2p_throughput"]
    for effect in w["effects"]["flag_throughput"]:
        if (flags or {}).get(effect["flag"]) and arch in effect["archs"]:
            flag_factor *= effect["factor"]
    sigma = float(env.get("SGLANG_SIM_NOISE", w["effects"]["noise_sigma"]))
    seed = env.get("SGLANG_SIM_SEED")
    rng = random.Random(seed) if seed is not None else random.Random()
    factor = (math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else 1.0) * flag_factor
    factor *= float(env.get("SGLANG_SIM_THROUGHPUT_FACTOR", "1") or 1)
    power = 1.0
    pair = w["effects"]["synthetic_interaction"]
    if all(env.get(name, "0") == "1" for name in pair["env"]):
        factor *= pair["throughput"]
    if env.get("SGLANG_SIM_FORCE_AR_FUSION", "0") == "1":
        factor *= w["effects"]["force_ar_fusion"]["throughput"]
        power *= w["effects"]["force_ar_fusion"]["power"]
    # the calibration tables include speculative decoding where the preset's reference run used it
    gain = 1.0 if speculative else float(perf.get("speculative_gain", 1.0))
    points = tuple(sorted((int(b), float(t) / gain) for b, t in perf["decode_agg_tok_s"].items()))
    swing_every, swing = parse_swing(env.get("SGLANG_SIM_SWING"))
    return PerfModel(points=points, prefill_tok_s=float(perf["prefill_tok_s"]),
                     accept_length=float(perf["accept_length"]) if speculative else 1.0,
                     factor=factor, idle_w=idle_w, load_w=float(perf["load_power_w"]),
                     power_limit_w=power_limit_w, power_factor=power,
                     drift_sigma=sigma * w["effects"]["drift_share"], drift_period_s=w["effects"]["drift_period_s"],
                     swing=swing, swing_every=swing_every)
