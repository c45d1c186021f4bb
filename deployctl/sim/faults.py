"""SGLANG_SIM_FAULT: simulator-only failure knobs (never SGLang flags), comma-separated."""

from __future__ import annotations

from dataclasses import dataclass

OUTPUT_FAULTS = frozenset({"wrong_sums", "garbage"})  # served at full speed, answered wrongly
START_FAULTS = frozenset({"oom_kv_cache", "oom_cuda_graph", "nccl", "rank_killed", "model_not_found"})
PHASES = ("args", "init", "load", "pools", "capture", "http", "warmup", "ready")
# other names operators reach for, mapped to the phase they mean
PHASE_ALIASES = {"nccl": "init", "distributed": "init", "weights": "load", "load_weights": "load",
                 "kv_cache": "pools", "memory": "pools", "cuda_graph": "capture", "graphs": "capture",
                 "uvicorn": "http", "listen": "http", "warm_up": "warmup"}


@dataclass(frozen=True)
class Faults:
    start: frozenset[str] = frozenset()   # failure endings played during startup
    hang_phase: str | None = None         # stop making progress when this phase begins
    crash_after: int | None = None        # SIGKILL the server after N completed requests
    error_rate: float = 0.0               # share of requests answered with HTTP 500
    stall_streams: bool = False           # streams send their first token, then nothing
    batch_stall: float = 0.0              # share of batches whose tail is admitted late (engine.py)
    batch_stall_s: float = 0.9            # by this many simulated seconds
    slow_start: float = 1.0               # extra multiplier on startup phase durations
    outputs: frozenset[str] = frozenset()  # wrong_sums | garbage: the answers change (deployctl/sim/answers.py)


class FaultSpecError(ValueError):
    pass


def parse_faults(spec: str | None) -> Faults:
    """Parse e.g. 'hang:capture', 'crash_after:50,error_rate:0.02'; errors name the accepted forms."""
    start: set[str] = set()
    out: dict = {}
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        try:
            if name in START_FAULTS and not arg:
                start.add(name)
            elif name in OUTPUT_FAULTS and not arg:
                out["outputs"] = out.get("outputs", frozenset()) | {name}
            elif name == "hang" and PHASE_ALIASES.get(arg, arg) in PHASES:
                out["hang_phase"] = PHASE_ALIASES.get(arg, arg)
            elif name == "crash_after":
                out["crash_after"] = int(arg)
            elif name == "error_rate":
                out["error_rate"] = float(arg)
            elif name == "stall_streams" and not arg:
                out["stall_streams"] = True
            elif name == "batch_stall":
                rate, _, seconds = arg.partition(":")
                out["batch_stall"] = float(rate)
                if seconds:
                    out["batch_stall_s"] = float(seconds)
                if not 0 <= out["batch_stall"] <= 1 or out.get("batch_stall_s", 0.0) < 0:
                    raise ValueError(item)
            elif name == "slow_start":
                out["slow_start"] = float(arg) if arg else 10.0
            else:
                raise ValueError(item)
        except ValueError:
            raise FaultSpecError(
                f"SGLANG_SIM_FAULT: cannot read {item!r}; use {', '.join(sorted(START_FAULTS))}, "
                f"hang:<{'|'.join(PHASES)}>, crash_after:<N>, error_rate:<p>, stall_streams, "
                f"batch_stall:<p>[:<seconds>], slow_start[:<x>]"
            ) from None
    return Faults(start=frozenset(start), **out)
