"""The output gate's verdict: PASS, FAIL ("output changed: …") or INCONCLUSIVE, from the baseline's
reference answers, the baseline's own re-scoring of them (the A/A floor), and the candidate's scoring and
greedy answers. Pure: the live side (``deployctl.live.output_gate``) gathers the inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from deployctl.inventory.policy import OutputGatePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.outputgate.accuracy import Paired, paired
from deployctl.outputgate.compare import Reference, Scored, ShiftStats, shift, stats
from deployctl.outputgate.probes import ProbeSet, correct


@dataclass(frozen=True)
class Example:
    """A prompt whose answer changed: the two greedy answers side by side."""

    probe_id: str
    prompt: str
    baseline: str
    candidate: str
    position: int  # the first token where they part

    def to_dict(self) -> dict[str, Any]:
        return {"probe_id": self.probe_id, "prompt": self.prompt, "baseline": self.baseline,
                "candidate": self.candidate, "position": self.position}


@dataclass(frozen=True)
class OutputVerdict:
    outcome: JudgeOutcome
    reasons: tuple[str, ...]
    probe_version: str
    accuracy: Paired
    shift: ShiftStats
    floor: ShiftStats  # the baseline server scoring its own answers: the A/A noise
    examples: tuple[Example, ...] = ()
    failed: int = 0
    requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "reasons": list(self.reasons), "probe_version": self.probe_version,
                "accuracy": self.accuracy.to_dict(), "shift": self.shift.to_dict(), "floor": self.floor.to_dict(),
                "examples": [e.to_dict() for e in self.examples], "failed": self.failed, "requests": self.requests}


def _pct(x: float) -> str:
    return f"{x:.1f} %"


def decide(policy: OutputGatePolicy, probes: ProbeSet, refs: Mapping[str, Reference],
           floor_scores: Mapping[str, Scored], scores: Mapping[str, Scored], answers: Mapping[str, str],
           *, failed: int = 0, requests: int = 0) -> OutputVerdict:
    checkable = [p for p in probes.probes if p.checkable and p.id in refs and p.id in answers]
    acc = paired([correct(p, refs[p.id].text) for p in checkable], [correct(p, answers[p.id]) for p in checkable])
    cand = stats([shift(refs[i], scores[i]) for i in refs if i in scores])
    floor = stats([shift(refs[i], floor_scores[i]) for i in refs if i in floor_scores])
    examples = _examples(probes, refs, scores, answers)
    said = (f"accuracy {acc.baseline_right}/{acc.prompts} → {acc.candidate_right}/{acc.prompts}, "
            f"mean KL {cand.mean_kl:.2g} (A/A {floor.mean_kl:.2g}, limit {policy.max_mean_kl:g}), "
            f"same top token {_pct(cand.same_top_pct)} (A/A {_pct(floor.same_top_pct)}, limit "
            f"{_pct(policy.min_same_top_pct)}), probes {probes.version}")

    def verdict(outcome: JudgeOutcome, reasons: list[str]) -> OutputVerdict:
        return OutputVerdict(outcome, tuple(reasons), probes.version, acc, cand, floor, examples, failed, requests)

    changed = []
    if acc.lost > acc.gained and acc.p_worse < policy.accuracy_alpha:
        changed.append(f"accuracy {acc.baseline_right}/{acc.prompts} → {acc.candidate_right}/{acc.prompts} "
                       f"({acc.lost} answers lost, {acc.gained} gained; McNemar p={acc.p_worse:.2g})")
    if cand.mean_kl > policy.max_mean_kl:
        changed.append(f"mean KL {cand.mean_kl:.3g} > {policy.max_mean_kl:g} (A/A {floor.mean_kl:.2g})")
    if cand.same_top_pct < policy.min_same_top_pct:
        changed.append(f"same top token {_pct(cand.same_top_pct)} < {_pct(policy.min_same_top_pct)} "
                       f"(A/A {_pct(floor.same_top_pct)})")
    if changed:  # a clear change stands even when some probes failed: what was measured already shows it
        return verdict(JudgeOutcome.FAIL, ["output changed: " + "; ".join(changed)])
    total = requests or 1
    if 100.0 * failed / total > policy.max_failed_pct:
        return verdict(JudgeOutcome.INCONCLUSIVE, [f"output gate: {failed} of {requests} probe requests failed; "
                                              f"no verdict on the outputs ({said})"])
    if not refs or cand.tokens == 0:
        return verdict(JudgeOutcome.INCONCLUSIVE, ["output gate: no probe answer could be compared"])
    noisy = []
    if floor.mean_kl * policy.floor_margin > policy.max_mean_kl:
        noisy.append(f"its A/A mean KL {floor.mean_kl:.2g} is within ×{policy.floor_margin:g} of the limit")
    if (100 - floor.same_top_pct) * policy.floor_margin > 100 - policy.min_same_top_pct:
        noisy.append(f"its A/A same top token {_pct(floor.same_top_pct)} is within ×{policy.floor_margin:g} "
                     "of the limit")
    if noisy:
        return verdict(JudgeOutcome.INCONCLUSIVE, ["output gate: the baseline server disagrees with itself too much "
                                              "to judge (" + "; ".join(noisy) + "); raise gates.output limits "
                                              "or make the server deterministic"])
    return verdict(JudgeOutcome.PASS, [f"outputs unchanged: {said}"])


def _examples(probes: ProbeSet, refs: Mapping[str, Reference], scores: Mapping[str, Scored],
              answers: Mapping[str, str], most: int = 3) -> tuple[Example, ...]:
    """The earliest-diverging prompts whose greedy answers really differ, checkable ones first."""
    found = []
    for p in probes.probes:
        if p.id not in refs or p.id not in scores or p.id not in answers:
            continue
        where = shift(refs[p.id], scores[p.id]).first_divergence
        if where is not None and answers[p.id].strip() != refs[p.id].text.strip():
            found.append((not p.checkable, where, Example(p.id, p.prompt, refs[p.id].text, answers[p.id], where)))
    found.sort(key=lambda t: (t[0], t[1]))
    return tuple(e for _, _, e in found[:most])


def _short(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def verdict_lines(v: OutputVerdict) -> list[str]:
    """The gate in a terminal or a cron mail: the verdict, accuracy, the KL summary, diverging prompts."""
    a, s, f = v.accuracy, v.shift, v.floor
    lo, hi = a.interval(a.candidate_right)
    lines = [f"output gate: {v.outcome.value} · probes {v.probe_version} · {s.prompts} prompts, {v.requests} requests"
             + (f", {v.failed} failed" if v.failed else ""),
             f"  accuracy {a.baseline_right}/{a.prompts} → {a.candidate_right}/{a.prompts} "
             f"(95 % interval {100 * lo:.0f}–{100 * hi:.0f} %; {a.lost} lost, {a.gained} gained; McNemar p={a.p_worse:.2g})",
             f"  KL mean {s.mean_kl:.2g}, median {s.median_kl:.2g}, p99 {s.p99_kl:.2g}, max {s.max_kl:.2g} "
             f"(A/A mean {f.mean_kl:.2g}); same top token {s.same_top_pct:.1f} % (A/A {f.same_top_pct:.1f} %); "
             f"Δp RMS {s.dp_rms:.3f}",
             f"  greedy answers part from the baseline's in {s.diverged_prompts} of {s.prompts} prompts"]
    for e in v.examples:
        lines.append(f"  [{e.probe_id}] {_short(e.prompt)!r}: baseline {_short(e.baseline, 30)!r}, "
                     f"candidate {_short(e.candidate, 30)!r} (from token {e.position})")
    return lines
