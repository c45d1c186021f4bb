"""What the judge decided, as stored with the release: the verdict, each level's interval, the policy and
the noise in force. The reports show this, not a recomputation under today's inventory.

The runner records it as the release's ``note`` event ``verdict`` after each judgement (the last one is the
verdict the promote acted on), in the ledger's existing events table. ``verdict`` inside it is the judge's
own serialised form (``judge.verdict.Verdict.to_dict``), kept whole so whatever the judge adds to it
flows through (``reporting.story`` reads the levels' states and intervals out of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from deployctl.decisions.records import Event

VERDICT_EVENT = "verdict"


@dataclass(frozen=True)
class Decided:
    outcome: str
    policy: Mapping[str, Any]  # the judge policy in force (JudgePolicy.model_dump)
    noise: Mapping[str, Any]  # the learned σ per level the judge pooled in ({"8": {"sigma", "df"}})
    verdict: Mapping[str, Any]  # the judge's own serialised verdict
    # The rolled-back verdict decided over server starts (``judge.starts.StartsVerdict.to_dict``), when it was.
    starts: Mapping[str, Any] | None = None

    def to_detail(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "policy": dict(self.policy), "noise": dict(self.noise),
                "verdict": dict(self.verdict), "starts": dict(self.starts) if self.starts is not None else None}

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> "Decided":
        verdict = detail.get("verdict") or {}
        return cls(str(detail.get("outcome") or verdict.get("outcome") or "?"), detail.get("policy") or {},
                   detail.get("noise") or {}, verdict, detail.get("starts") or None)

    def starts_line(self) -> str | None:
        """What deciding over two baseline starts concluded, and the restart σ it assumed; None: not asked."""
        s = self.starts
        if not s:
            return None
        reasons = s.get("reasons") or ["?"]
        restart = s.get("restart") or {}
        sigma = restart.get("sigma")
        said = (f"; restart σ {100 * float(sigma):.1f} % a start ({restart.get('source', '?')})"
                if isinstance(sigma, (int, float)) else "")
        return f"decided over server starts ({s.get('outcome', '?')}): {reasons[0]}{said}"

    def policy_line(self) -> str:
        """The policy in force, in one line: what a reader needs to read the intervals."""
        p = self.policy
        if not p:
            return "judge policy: not stored"
        parts = [f"metric {p.get('metric', '?')}", f"limit −{p.get('limit_pct', '?'):g} %"
                 if isinstance(p.get("limit_pct"), (int, float)) else "limit ?",
                 f"{100 * float(p.get('confidence', 0.95)):g} % intervals",
                 f"false fail {p.get('false_fail', '?')}", f"miss {p.get('miss', '?')}",
                 f"{p.get('min_trials', '?')}–{p.get('max_trials', '?')} trials"]
        overrides = p.get("levels") or {}
        for c, rule in sorted(overrides.items(), key=lambda kv: int(kv[0])):
            if isinstance(rule, Mapping) and rule.get("limit_pct") is not None:
                parts.append(f"C={c} limit −{rule['limit_pct']:g} %")
        return "judge policy in force: " + ", ".join(parts)

    def noise_line(self) -> str:
        """The noise estimate in force: the learned σ per level, and what the judge's verdict says of its own."""
        parts = [_sigma(c, n) for c, n in sorted(self.noise.items(), key=lambda kv: int(kv[0]))
                 if isinstance(n, Mapping) and "sigma" in n and "df" in n]
        # The judge's own account of the noise it used (a field whose name says noise), where it gives one.
        said = next((v for k, v in sorted(self.verdict.items()) if "noise" in k and v), None)
        text = "learned noise in force: " + ("; ".join(parts) if parts else "none (the trials' own spread only)")
        if said is not None:
            text += "; judge: " + _judge_noise(said)
        return text


def decided(events: Iterable[Event]) -> Decided | None:
    """The verdict the promote acted on (its last judgement), or None when none was stored (a release
    recorded before verdicts were stored, or one never judged)."""
    found = None
    for e in events:
        if e.kind == "note" and e.name == VERDICT_EVENT:
            found = e
    return Decided.from_detail(found.detail) if found is not None else None


def _sigma(concurrency: Any, noise: Mapping[str, Any]) -> str:
    return f"C={concurrency}: σ {100 * float(noise['sigma']):.2f} % ({noise['df']} df)"


def _judge_noise(said: Any) -> str:
    """The judge's noise in one line; its ``levels`` (one mapping each) as the learned σ are, which ``_flat``
    would cut to "…" two levels deep."""
    levels = said.get("levels") if isinstance(said, Mapping) else None
    if not isinstance(levels, list):
        return _flat(said)
    parts = [_sigma(n.get("concurrency", "?"), n) for n in levels
             if isinstance(n, Mapping) and isinstance(n.get("sigma"), (int, float)) and "df" in n]
    rest = _flat({k: v for k, v in said.items() if k != "levels"})
    return "; ".join([*parts, rest] if rest else parts)


def _flat(value: Any, depth: int = 0) -> str:
    """A stored value in one line: scalars as they are, mappings as ``key value`` pairs (two levels deep)."""
    if isinstance(value, Mapping):
        if depth >= 2:
            return "…"
        return ", ".join(f"{k} {_flat(v, depth + 1)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                         if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return "; ".join(_flat(v, depth + 1) for v in value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)
