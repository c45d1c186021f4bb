"""What an operator reads after a promote, a rollback, ``history`` or ``show``.

Pure formatting into plain lines (what a log or a pipe gets) and JSON-ready dicts (the ``--json`` edge,
where the evidence types become plain values); ``deployctl.console.output.emit`` prints the lines, or on
a terminal the same content with rich tables. The order follows the operator's
questions: what changed, what the server said at startup (and why), how it performed against the
baseline, the verdict and its reasons, what was done to the host, and which release to look up.
"""

from __future__ import annotations

import time
from statistics import mean
from typing import Any, Iterable, Sequence

from deployctl.bench.result import BenchResult, LevelTelemetry
from deployctl.inventory.policy import JudgePolicy, Policy
from deployctl.outputgate.verdict import verdict_lines
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import LevelRow, Plan, PreflightResult, PromoteOutcome
from deployctl.decisions.records import Release
from deployctl.decisions.state import PHASE_WIDTH

HEADLINE = {
    m.Result.KEPT: "KEPT: the candidate is live",
    m.Result.PASSED: "PASSED (a bisect trial): judged, then rolled back to the known-good configuration",
    m.Result.UNCHANGED: "UNCHANGED: the candidate is what is installed already",
    m.Result.REJECTED: "REJECTED: rolled back to the known-good configuration",
    m.Result.INCONCLUSIVE: "INCONCLUSIVE: the baseline was kept",
    m.Result.REFUSED: "REFUSED: nothing was changed",
    m.Result.ABORTED: "ABORTED",
    m.Result.ROLLBACK_FAILED: "ROLLBACK FAILED: manual action needed",
}


def _mean_tok_s(result: BenchResult | None, concurrency: int) -> float | None:
    level = result.level(concurrency) if result else None
    values = [t.output_tok_s for t in level.trials if t.valid] if level else []
    return mean(values) if values else None


def level_rows(baseline: BenchResult | None, candidate: BenchResult | None, judged: Sequence[LevelRow] = ()) -> list[LevelRow]:
    """One row per level: the judge's rows where it gave them, else plain means of the trials."""
    if judged:
        return list(judged)
    levels = sorted({lv.concurrency for r in (baseline, candidate) if r for lv in r.levels})
    rows = []
    for c in levels:
        b, k = _mean_tok_s(baseline, c), _mean_tok_s(candidate, c)
        change = (k - b) / b * 100 if b and k is not None else None
        rows.append(LevelRow(c, b, k, change, None))
    return rows


def num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if value is None else fmt.format(value)


def table_lines(rows: Sequence[LevelRow]) -> list[str]:
    header = ("C", "baseline tok/s", "candidate tok/s", "change", "verdict")
    body = [
        (str(r.concurrency), num(r.baseline_tok_s), num(r.candidate_tok_s), num(r.change_pct, "{:+.1f} %"), r.verdict_text)
        for r in rows
    ]
    widths = [max(len(x[i]) for x in (header, *body)) for i in range(len(header))]

    def fmt(cells: Sequence[str]) -> str:
        return " | ".join(c.rjust(w) for c, w in zip(cells, widths))

    return [fmt(header), "-+-".join("-" * w for w in widths), *(fmt(b) for b in body)]


def telemetry_lines(baseline: BenchResult | None, candidate: BenchResult | None) -> list[str]:
    """Per level, what the GPUs and the server's processes did, baseline beside candidate (the incidents'
    clue: 250 W of 600 W under load, then 125 W), and the levels' notes (C above capacity)."""
    from deployctl.bench.telemetry import render_telemetry

    out = []
    for c in sorted({lv.concurrency for r in (baseline, candidate) if r for lv in r.levels}):
        parts = [f"{role} {text}" for role, result in (("baseline", baseline), ("candidate", candidate))
                 if (text := render_telemetry(level_telemetry(result, c)))]
        if parts:
            out.append(f"  C={c}: " + "; ".join(parts))
        level = candidate.level(c) if candidate else None
        notes = dict.fromkeys(n for t in (level.trials if level else ()) for n in t.notes)
        out += [f"  C={c}: note: {n}" for n in notes]
    return ["telemetry per level (mean over its trials):", *out] if out else []


def level_telemetry(result: BenchResult | None, concurrency: int) -> LevelTelemetry | None:
    """The trials' telemetry of one level as one: means of the per-trial means (peaks for RSS and process count)."""
    level = result.level(concurrency) if result else None
    ts = [t.telemetry for t in level.trials if t.telemetry is not None] if level else []
    if not ts:
        return None

    def avg(name: str) -> float | None:
        values = [getattr(t, name) for t in ts if getattr(t, name) is not None]
        return round(mean(values), 1) if values else None

    def peak(name: str) -> Any:
        values = [getattr(t, name) for t in ts if getattr(t, name) is not None]
        return max(values) if values else None

    return LevelTelemetry(
        source=ts[0].source, gpu_power_w=avg("gpu_power_w"), gpu_power_limit_w=avg("gpu_power_limit_w"),
        gpu_util_pct=avg("gpu_util_pct"), gpu_mem_used_gb=avg("gpu_mem_used_gb"),
        process_cpu_pct=avg("process_cpu_pct"), process_rss_gb=peak("process_rss_gb"),
        process_count=peak("process_count"),
    )


def plan_lines(plan: Plan, *, restart: bool = True) -> list[str]:
    # Here, not at the top: the judge over server starts needs scipy, which `history` and `show` (the rest
    # of this module) never pay for (benchmarks/cli_startup.py).
    from deployctl.judge.starts import RESTART_GUARD

    lines = [f"promote {plan.profile} → {plan.deployment} ({plan.unit_name})"]
    if plan.unchanged:
        lines.append("  the candidate renders to the unit installed now: nothing to do")
        return lines
    lines.append("  profile diff (known-good → candidate):")
    lines += [f"    {d}" for d in plan.profile_diff] or ["    (unit text differs; flags and environment equal)"]
    if restart:
        lines.append(f"  would restart: {plan.unit_name} (the trial lives in a runtime directory until kept)")
    p = plan.policy
    lines.append(
        f"  benchmark: C={','.join(map(str, p.bench.concurrency))}, {p.bench.input_tokens} in / {p.bench.output_tokens} out,"
        f" baseline {_baseline_trials(p.judge)}, candidate {p.judge.min_trials}–{p.judge.max_trials}"
    )
    lines.append(
        f"  judge: {p.judge.metric}, limit −{p.judge.limit_pct:g} %; an unchanged candidate failed ≤ {100 * p.judge.false_fail:g} %,"
        f" twice the limit passed ≤ {100 * p.judge.miss:g} %; inconclusive → {p.judge.inconclusive.replace('_', ' ')}"
    )
    lines.append(
        f"  restart offset: a FAIL that a {100 * RESTART_GUARD:g} % offset a server start could explain, a PASS it could "
        "hide twice the limit behind, or a final INCONCLUSIVE, is decided over server starts (the candidate restarted once more, then the rollback's "
        "verification, each at every critical level)")
    latency = [f"{name} p99 may rise ≤ {limit:g} %" for name, limit in
               (("TTFT", p.judge.ttft_p99_limit_pct), ("ITL", p.judge.itl_p99_limit_pct)) if limit is not None]
    if latency:
        lines.append("  latency gates: " + "; ".join(latency))
    lines.append("  startup gates: " + "; ".join(startup_gates(p)))
    o = p.gates.output
    lines.append("  output gate: " + (
        f"{o.probes or 'all'} probe prompts × {o.max_new_tokens} greedy tokens, top {o.top_k}, "
        f"{'before the sweep' if o.run == 'first' else 'after a passing verdict'}; fails on an accuracy drop "
        f"(McNemar p < {o.accuracy_alpha:g}), mean KL > {o.max_mean_kl:g} or same top token < {o.min_same_top_pct:g} %"
        if o.enabled else "off (gates.output.enabled: false)"))
    return lines


def startup_gates(policy: Policy) -> list[str]:
    """Every startup gate the policy turns on, in words (``promote --dry-run`` shows them all)."""
    g = policy.gates
    gates = []
    if g.max_running_requests_drop_pct is not None:
        gates.append(f"max_running_requests may drop ≤ {g.max_running_requests_drop_pct:g} %")
    if g.max_total_num_tokens_drop_pct is not None:
        gates.append(f"KV cache tokens (max_total_num_tokens) may drop ≤ {g.max_total_num_tokens_drop_pct:g} %")
    if g.cuda_graph_must_stay_enabled:
        gates.append("CUDA graphs must stay enabled")
    if g.new_failure_warnings:
        gates.append("no new failure-class warnings")
    gates.append(f"ready within {g.startup_timeout_s:g} s")
    return gates


def preflight_lines(result: PreflightResult | None) -> list[str]:
    return [f"pre-flight warning: {w}" for w in result.warnings] if result is not None else []


def outcome_lines(out: PromoteOutcome, heading: str | None = None, *, plan_shown: bool = False) -> list[str]:
    """The story of a promote (or, with ``heading``, of a rollback, whose plan has no policy to show);
    ``plan_shown``: the plan and the pre-flight warnings were printed before the work, as they came."""
    ev, state = out.evidence, out.state
    if plan_shown:
        lines = []
    else:
        lines = ([heading] if heading else plan_lines(out.plan, restart=False)) + preflight_lines(ev.preflight)
    if ev.reuse is not None:
        lines.append(f"  {ev.reuse.describe()}")
    elif ev.fresh_because and ev.baseline is not None:
        lines.append("  baseline: measured fresh, because " + "; ".join(ev.fresh_because))
    if ev.start_failure is not None:
        lines.append(f"startup: did not come up ({ev.start_failure.kind}): {ev.start_failure.message}")
        lines += [f"  | {ln}" for ln in ev.start_failure.last_lines[-5:]]
    if ev.startup_diff:
        lines.append("startup diff (baseline → candidate):")
        lines += [f"  {d}" for d in ev.startup_diff]
    if ev.gate_failures:
        lines += [f"startup gate FAIL: {f}" for f in ev.gate_failures]
    rows = level_rows(ev.baseline, ev.candidate, ev.judge.levels if ev.judge else ())
    if ev.candidate is not None and rows:
        lines.append("")
        lines += table_lines(rows)
        lines.append("")
        lines += telemetry_lines(ev.baseline, ev.candidate)
    if ev.judge is not None:
        lines.append(f"verdict: {ev.judge.outcome.value}")
    if ev.starts is not None:
        # the reasons below say what decided it and the restart σ it allowed for
        starts = f"its {m.starts_word(1 + len(ev.candidate_again))}" if ev.candidate_again else "its first only"
        lines.append(f"verdict over server starts (the baseline's before the promote and after the rollback, the "
                     f"candidate's {starts}): {ev.starts.outcome.value}")
    if ev.output is not None:
        lines += verdict_lines(ev.output)
    said = {f"startup gate: {f}" for f in ev.gate_failures}  # the reasons repeat them: printed once, above
    lines += [f"  - {r}" for r in state.reasons if r not in said]
    if ev.drift is not None and ev.drift.drifted:
        lines.append("  note: the restored baseline measured differently from before: environment drift, not only the candidate")
    if state.done:
        lines.append("done:")
        lines += [f"  - {d}" for d in state.done]
    headline = HEADLINE.get(state.result, state.phase.value) if state.result else state.phase.value
    if state.result is m.Result.ABORTED:
        untouched = "nothing on the host was changed" in state.reasons
        headline += ": nothing was changed" if untouched else ": rolled back to the known-good configuration"
    lines.append(f"{headline} · release {out.release_id} · exit {out.exit_code}")
    if state.result is m.Result.ROLLBACK_FAILED:
        lines.append(
            f"  the known-good unit text is kept in the ledger: `deployctl show {out.release_id}`;"
            f" check `journalctl -u {out.plan.unit_name}` and `systemctl status {out.plan.unit_name}`"
        )
    if ev.bench_time.total_s > 0:
        lines.append(f"  {ev.bench_time.describe()}")
    trials = ev.trials(out.plan.policy.judge.max_trials)
    if trials is not None:
        lines.append(f"  {trials.describe()}")
    lines.append(f"  controller overhead {out.overhead_s:.2f} s of {out.wall_s:.1f} s")
    return lines


def outcome_json(out: PromoteOutcome) -> dict[str, Any]:
    ev = out.evidence
    return {
        "release": out.release_id,
        "deployment": out.plan.deployment,
        "profile": out.plan.profile,
        "result": out.state.result.value if out.state.result else None,
        "phase": out.state.phase.value,
        "exit_code": out.exit_code,
        "reasons": list(out.state.reasons),
        "done": list(out.state.done),
        "drift": out.state.drift,
        "profile_diff": list(out.plan.profile_diff),
        "startup_diff": list(ev.startup_diff),
        "gate_failures": list(ev.gate_failures),
        "preflight": {"errors": list(ev.preflight.errors), "warnings": list(ev.preflight.warnings)} if ev.preflight else None,
        "verdict": ev.judge.outcome.value if ev.judge else None,
        "noise": ev.judge.record.get("noise") if ev.judge else None,  # the noise in force (docs/judge.md)
        "starts": ev.starts.to_dict() if ev.starts else None,  # the verdict decided over server starts
        "levels": [{**vars(r), "verdict": r.verdict_text}
                   for r in level_rows(ev.baseline, ev.candidate, ev.judge.levels if ev.judge else ())],
        "baseline_reused_from": ev.baseline_reused_from,
        "output": None if ev.output is None else {
            **ev.output.to_dict(), "reference_from": ev.outputs_reference.reused_from if ev.outputs_reference else None},
        "benchmark": {**ev.bench_time.to_dict(), "fresh_because": list(ev.fresh_because),
                      "trials": trials.to_dict() if (trials := ev.trials(out.plan.policy.judge.max_trials)) else None},
        "timings_s": {**ev.timings, "wall": out.wall_s, "controller_overhead": out.overhead_s},
    }


def _when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def history_lines(releases: Iterable[Release]) -> list[str]:
    rows = [
        ("*" if r.live else " ", str(r.id), _when(r.started_at), r.deployment, r.kind, r.profile or "—",
         r.result or (f"running ({r.phase})" if r.phase else "running"), r.unit_hash[:12], r.who)
        for r in releases
    ]
    if not rows:
        return ["no releases recorded yet"]
    header = ("", "id", "when", "deployment", "kind", "profile", "result", "unit hash", "who")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i == 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), *(line(row) for row in rows)]


def _fact(value: Any) -> Any:
    """A startup fact for one line: a structured one (cuda_graph) by its state."""
    return value.get("state", value) if isinstance(value, dict) else value


def live_release_line(release: Release | None, installed_hash: str | None = None) -> str:
    """One line for ``deployctl status``: which release runs, since when, by whom; a hand edit shows."""
    if release is None:
        return "live release: none recorded (deployctl has not promoted this deployment yet)"
    what = release.profile or "(unnamed)"
    line = f"live release {release.id}: {what} ({release.kind} {_when(release.finished_at or release.started_at)} by {release.who})"
    if installed_hash is not None and installed_hash != release.unit_hash:
        line += "; the installed unit differs from it (edited by hand?)"
    return line


def release_lines(release: Release, benches: Sequence[Any] = (), events: Sequence[Any] = (), *,
                  judged: Sequence[LevelRow] = (), verdict_note: str = "") -> list[str]:
    """``show``'s text; ``judged``: the table's rows with each level's verdict (stored, or recomputed as
    ``verdict_note`` says), else plain means."""
    r = release
    lines = [
        f"release {r.id}: {r.kind} of {r.profile or '(installed unit)'} on {r.deployment}" + ("  [live]" if r.live else ""),
        f"  who: {r.who}   started: {_when(r.started_at)}   finished: {_when(r.finished_at)}",
        f"  result: {r.result or 'unfinished'}   verdict: {r.verdict or '—'}   last phase: {r.phase or '—'}",
        f"  unit: {r.unit_name}  sha256 {r.unit_hash}" + ("  (secrets redacted)" if r.redacted else ""),
    ]
    if r.previous_id:
        lines.append(f"  tried against: release {r.previous_id}")
    if r.reasons:
        lines.append("  reasons:")
        lines += [f"    - {x}" for x in r.reasons]
    for role, report in (("baseline", r.baseline_startup), ("candidate", r.startup)):
        if report:
            keys = ("max_running_requests", "max_total_num_tokens", "context_len", "cuda_graph", "sglang_version")
            facts = ", ".join(f"{k}={_fact(report.get(k))}" for k in keys if report.get(k) is not None)
            lines.append(f"  {role} startup: {facts or '(no facts)'}")
    by_role: dict[str, BenchResult] = {}
    for b in benches:
        by_role[b.role] = b.bench
    if "candidate" in by_role:
        lines += ["", *table_lines(level_rows(by_role.get("baseline"), by_role["candidate"], judged))]
        lines += [f"  ({verdict_note})" if verdict_note else "", *([""] if verdict_note else [])]
        lines += telemetry_lines(by_role.get("baseline"), by_role["candidate"])
    if events:
        lines.append("  steps (intent before each side effect, then its outcome):")
        for e in events:
            said = (*e.detail.get("reasons", ()), *e.detail.get("notes", ())) if e.kind == "outcome" else ()
            detail = "; ".join(said) or e.detail.get("reason", "")
            lines.append(f"    {e.at - r.started_at:+8.1f}s  {e.phase:<{PHASE_WIDTH}} {e.kind:<7} {e.name}" + (f": {detail}" if detail else ""))
    lines.append("  unit text:")
    lines += [f"    {ln}" for ln in r.unit_text.splitlines()]
    return lines


# --- printing ---------------------------------------------------------------------------------------


def _baseline_trials(judge: JudgePolicy) -> str:
    if judge.baseline_trials is not None:
        return f"{judge.baseline_trials} trials"
    return (f"{judge.min_trials}–{judge.max_trials} trials, sized in rounds from their spread pooled over "
            "the levels and the host's learned noise")
