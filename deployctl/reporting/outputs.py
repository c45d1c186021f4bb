"""The report's output-gate panel: accuracy with its interval, the KL distribution against the A/A floor
and the limit, and the first diverging prompts side by side (from the release's ``outputs`` event)."""

from __future__ import annotations

from typing import Any, Mapping

from deployctl.reporting.charts import FAIL_COLOUR, LIMIT_COLOUR, SMALL, Chart, Table, colour, render


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def output_charts(gate: Mapping[str, Any], max_mean_kl: float | None = None) -> tuple[Chart, ...]:
    a, s, f = gate["accuracy"], gate["shift"], gate["floor"]
    deciles = list(s.get("kl_quantiles") or [])
    floor = list(f.get("kl_quantiles") or [])

    def draw(fig) -> None:
        ax = fig.subplots()
        xs = list(range(0, 101, 10))
        ax.plot(xs, [max(v, 1e-9) for v in deciles], marker="^", color=colour("candidate"), label="candidate vs baseline",
                gid="kl-candidate")
        if floor:
            ax.plot(xs, [max(v, 1e-9) for v in floor], marker="o", linestyle=":", color=colour("baseline"),
                    label="baseline vs itself (A/A floor)", gid="kl-floor")
        if max_mean_kl:
            ax.axhline(max_mean_kl, color=LIMIT_COLOUR, linestyle="--", linewidth=1, label=f"mean KL limit {max_mean_kl:g}")
        ax.axhline(max(s["mean_kl"], 1e-9), color=FAIL_COLOUR if gate["outcome"] == "FAIL" else colour("verify"),
                   linewidth=1, label=f"candidate mean KL {s['mean_kl']:.2g}")
        ax.set_yscale("log")
        ax.set_xlabel("percentile of tokens")
        ax.set_ylabel("KL divergence (nats)")
        ax.legend(fontsize=SMALL, loc="upper left")

    lo, hi = a["candidate_interval"]
    blo, bhi = a["baseline_interval"]
    rows = (
        ("verdict", gate["outcome"]),
        ("probe set", gate["probe_version"]),
        ("accuracy, baseline", f"{a['baseline_right']}/{a['prompts']} ({_pct(blo)}–{_pct(bhi)})"),
        ("accuracy, candidate", f"{a['candidate_right']}/{a['prompts']} ({_pct(lo)}–{_pct(hi)})"),
        ("answers lost / gained", f"{a['lost']} / {a['gained']} (McNemar p={a['p_worse']:.2g})"),
        ("KL mean / median / p99 / max", f"{s['mean_kl']:.2g} / {s['median_kl']:.2g} / {s['p99_kl']:.2g} / {s['max_kl']:.2g}"),
        ("A/A floor KL mean", f"{f['mean_kl']:.2g}"),
        ("same top token", f"{s['same_top_pct']:.1f} % (A/A {f['same_top_pct']:.1f} %)"),
        ("Δp RMS", f"{s['dp_rms']:.3f}"),
        ("prompts whose greedy answer parts", f"{s['diverged_prompts']} of {s['prompts']}"),
    )
    kl = Chart("output-gate", "Outputs: accuracy and the KL distribution (candidate vs baseline)",
               render(8, 2.6, draw) if deciles else "", Table(("measure", "value"), rows),
               "" if deciles else "no token was compared")
    examples = tuple((e["probe_id"], e["prompt"], e["baseline"], e["candidate"], str(e["position"]))
                     for e in gate.get("examples") or ())
    side = Chart("output-examples", "Outputs: the first diverging prompts, side by side", "",
                 Table(("probe", "prompt", "baseline says", "candidate says", "from token"), examples),
                 "" if examples else "no greedy answer parted from the baseline's")
    return kl, side
