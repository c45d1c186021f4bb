"""Changes as the operators write them: ``−12.4 %``, ``−12.4 % (95 % CI −14.1 … −10.6 %)``."""

from __future__ import annotations

from deployctl.judge.stats import ChangeInterval


def format_pct(x: float) -> str:
    """A relative change as the operators write it: ``−12.4 %``, ``+0.3 %``."""
    return f"{signed(100 * x)} %"


def format_interval(iv: ChangeInterval) -> str:
    """``−12.4 % (95 % CI −14.1 … −10.6 %)``."""
    return (
        f"{format_pct(iv.change)} ({100 * iv.confidence:g} % CI "
        f"{signed(100 * iv.low)} … {signed(100 * iv.high)} %)"
    )


def signed(v: float) -> str:
    text = f"{v:+.1f}"
    if text in ("+0.0", "-0.0"):
        return "±0.0"
    return text.replace("-", "−")


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``: a duration as an operator reads it (an age, a cost, an ETA)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
