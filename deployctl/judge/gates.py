"""Startup gates: facts from the candidate's startup log that reject it before any benchmark request.

The incident that motivates them: adding two "fusion" flags made SGLang report
``max_running_requests=26`` where the baseline had 48. That is a capacity loss the benchmark at C=64
would only show indirectly; the startup log says it outright, so the gate fails the candidate and
names both numbers. Pure: two ``StartupReport``s (or their ``to_dict()`` form, as the ledger and the
runner hold them) and the policy's ``StartupGates`` in, a ``GateVerdict`` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from deployctl.inventory.policy import StartupGates
from deployctl.startup.parser import MoeWarning, StartupReport

ReportLike = Union[StartupReport, Mapping[str, Any]]

_MOE_KIND_TEXT = {
    "default_config": "no tuned MoE kernel config for this GPU, Triton's default is used",
    "down_config_missing_using_up_or_default": "no tuned MoE down-projection config, the up one or the default is used",
    "fallback_other_triton_version": "the tuned MoE config comes from another Triton version",
}


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    failures: list[str]
    notes: tuple[str, ...] = ()  # facts that could not be checked, said once


def check_startup_gates(
    baseline: ReportLike | None, candidate: ReportLike, gates: StartupGates
) -> GateVerdict:
    """Check the candidate's startup facts against the baseline's (None: nothing to compare with)."""
    cand = _report(candidate)
    base = _report(baseline) if baseline is not None else None
    if not cand.ready:
        return GateVerdict(False, [_not_ready(cand)])
    failures: list[str] = []
    notes: list[str] = []
    if base is not None:
        for label, b, c, limit in (
            ("effective max_running_requests", base.max_running_requests, cand.max_running_requests,
             gates.max_running_requests_drop_pct),
            ("KV cache capacity (max_total_num_tokens)", base.max_total_num_tokens, cand.max_total_num_tokens,
             gates.max_total_num_tokens_drop_pct),
        ):
            _capacity_gate(label, b, c, limit, failures, notes)
        if gates.cuda_graph_must_stay_enabled:
            for label, b_state, c_state in (
                ("CUDA graphs", base.cuda_graph.state, cand.cuda_graph.state),
                ("piecewise CUDA graphs", base.piecewise_cuda_graph.state, cand.piecewise_cuda_graph.state),
            ):
                if b_state == "captured" and c_state in ("disabled", "failed"):
                    why = cand.piecewise_cuda_graph.reason if label.startswith("piecewise") else None
                    failures.append(
                        f"{label} became {c_state} (baseline: captured)" + (f": {why}" if why else "")
                    )
        if gates.new_failure_warnings:
            known = {_warning_key(w) for w in base.moe_config_warnings}
            for w in cand.moe_config_warnings:
                if _warning_key(w) not in known:
                    failures.append(f"new warning, not in the baseline: {_describe(w)}")
                    known.add(_warning_key(w))
    return GateVerdict(not failures, failures, tuple(notes))


def _report(report: ReportLike) -> StartupReport:
    return report if isinstance(report, StartupReport) else StartupReport.from_dict(report)


def _not_ready(report: StartupReport) -> str:
    if report.failure is not None:
        failed = report.failure
        where = f" on {failed.rank_kind} rank {failed.rank}" if failed.rank is not None else ""
        return f"the candidate did not start{where}: {report.failure.kind}: {report.failure.message}"
    phase = f" (last phase: {report.phase})" if report.phase else ""
    return f"the candidate never reported ready{phase}"


def _capacity_gate(
    label: str, before: int | None, after: int | None, limit_pct: float | None,
    failures: list[str], notes: list[str],
) -> None:
    if limit_pct is None:
        return
    if before is None or after is None:
        side = "baseline" if before is None else "candidate"
        notes.append(f"{label} not checked: the {side}'s startup log does not report it")
        return
    if before <= 0 or after >= before:
        return
    drop = 100 * (before - after) / before
    if drop > limit_pct:
        failures.append(
            f"{label} fell from {before} to {after} (−{drop:.1f} %, more than the {limit_pct:g} % allowed)"
        )


def _warning_key(w: MoeWarning) -> tuple[str, str]:
    return (w.kind, w.config_file)


def _describe(w: MoeWarning) -> str:
    text = _MOE_KIND_TEXT.get(w.kind, w.kind)
    ranks = f" on ranks {', '.join(map(str, w.ranks))}" if w.ranks else ""
    return f"{text} ({w.config_file}){ranks}"
