"""How a bisect ended, pure: each trial (``Step``), the outcome (``BisectOutcome``) and the lines and JSON that
say it (as ``report`` does for a promote). ``deployctl.flows.bisect`` fills them in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deployctl.decisions.bisect_changes import Change
from deployctl.decisions.bisect_search import Culprit, Finding, Observation, Trial


@dataclass(frozen=True)
class Step:
    """One trial as it ran: what it tried, its release, what it cost and what it said."""

    trial: Trial
    profile: str
    release_id: int
    result: str
    observation: Observation
    restarts: int
    bench_s: float
    wall_s: float


@dataclass
class BisectOutcome:
    deployment: str
    profile: str
    base: str  # the live profile the changes are laid over
    changes: tuple[Change, ...]
    steps: list[Step] = field(default_factory=list)
    finding: Finding | None = None
    stopped: str | None = None  # why the search ended early (budget, abort, a failed rollback)
    exit_code: int = 0
    survivor_name: str | None = None
    survivor_yaml: str | None = None
    blamed_before: tuple[int, ...] = ()  # blamed by the candidate's own startup facts, no trial needed
    blamed_so_far: tuple[Culprit, ...] = ()  # when the search stopped early: what it had blamed by then
    # subsets no trial decided (inconclusive after every re-measurement, or when the budget ran out)
    undecided: tuple[frozenset[int], ...] = ()
    wall_s: float = 0.0

    @property
    def restarts(self) -> int:
        return sum(s.restarts for s in self.steps)

    @property
    def benchmarked(self) -> int:
        return sum(1 for s in self.steps if s.observation.benchmarked)

    @property
    def bench_s(self) -> float:
        return sum(s.bench_s for s in self.steps)


def _names(out: BisectOutcome, subset: Any) -> str:
    return ", ".join(f"#{i + 1} {out.changes[i].text}" for i in sorted(subset)) or "no change"


def outcome_lines(out: BisectOutcome) -> list[str]:
    lines = [f"bisect {out.profile} on {out.deployment}: {len(out.changes)} change(s) from {out.base}:"]
    lines += [f"  #{i + 1} {c.text}" for i, c in enumerate(out.changes)]
    lines.append("trials:")
    for n, s in enumerate(out.steps, 1):
        kind = "promote" if s.trial.final else "bisect"
        lines.append(f"  {n}. release {s.release_id} ({kind}, {s.profile}): {_names(out, s.trial.subset)}")
        lines.append(f"     {s.trial.purpose} → {s.result}; {s.observation.summary}")
        lines.append(f"     {s.restarts} restart(s), {'benchmarked' if s.observation.benchmarked else 'no benchmark'}"
                     f" ({s.bench_s:.1f} s of traffic), {s.wall_s:.1f} s")
    finding = out.finding
    if finding is not None and finding.candidate_passed:
        lines.append("the candidate passes now: there is nothing to explain (promote it)")
    elif finding is not None:
        for c in finding.culprits:
            what = "interaction of" if c.interaction else "culprit"
            lines.append(f"{what}: {_names(out, c.changes)} (by {c.how})")
            lines += [f"  evidence: {e}" for e in c.evidence]
        if not finding.survivors and not finding.undecided:
            lines.append("every change is a culprit: the baseline stays")
    if out.undecided:
        lines += [f"could not decide: {_names(out, subset)} stayed inconclusive after every trial of it; nothing "
                  "is blamed on it (run the bisect again when the host is steadier)" for subset in out.undecided]
        if finding is not None and finding.undecided:
            lines.append("the search stopped there: the known-good unit runs, nothing was promoted")
    if out.stopped:
        lines.append(f"stopped: {out.stopped}; the known-good unit runs")
        lines += [f"  blamed so far (by {c.how}): {_names(out, c.changes)}" for c in out.blamed_so_far]
    if out.survivor_yaml:
        kept = "kept" if out.exit_code == 0 else "NOT kept (it did not pass)"
        lines.append(f"the candidate minus the culprits ({out.survivor_name}) was {kept}; "
                     "paste it under the deployment's profiles (deployctl does not edit the inventory):")
        lines += ["  " + line for line in out.survivor_yaml.rstrip().splitlines()]
    lines.append(f"{len(out.steps)} trial(s), {out.benchmarked} benchmarked, {out.restarts} restart(s), "
                 f"{out.bench_s:.1f} s of benchmark traffic, {out.wall_s:.1f} s in all; exit {out.exit_code}")
    return lines


def outcome_json(out: BisectOutcome) -> dict[str, Any]:
    finding = out.finding
    return {
        "deployment": out.deployment, "profile": out.profile, "base": out.base,
        "changes": [c.text for c in out.changes],
        "trials": [{"release": s.release_id, "profile": s.profile, "final": s.trial.final, "purpose": s.trial.purpose,
                    "changes": sorted(s.trial.subset), "result": s.result, "summary": s.observation.summary,
                    "observed": s.observation.word,
                    "benchmarked": s.observation.benchmarked, "restarts": s.restarts, "bench_s": round(s.bench_s, 2),
                    "wall_s": round(s.wall_s, 2)} for s in out.steps],
        "culprits": [{"changes": sorted(c.changes), "texts": [out.changes[i].text for i in sorted(c.changes)],
                      "how": c.how, "interaction": c.interaction, "evidence": list(c.evidence)}
                     for c in (finding.culprits if finding else ())],
        "candidate_passed": bool(finding and finding.candidate_passed),
        "survivors": sorted(finding.survivors) if finding else None,
        "survivor_yaml": out.survivor_yaml, "stopped": out.stopped,
        "blamed_so_far": [sorted(c.changes) for c in out.blamed_so_far],
        "undecided": [sorted(subset) for subset in out.undecided], "exit_code": out.exit_code,
        "restarts": out.restarts, "benchmarked": out.benchmarked, "bench_s": round(out.bench_s, 2),
        "wall_s": round(out.wall_s, 2),
    }
