"""One function per chart of the report: a ``Story`` in, a ``Chart`` (SVG + its numbers) out."""

from __future__ import annotations

from statistics import fmean, quantiles
from typing import Sequence

from deployctl.bench.result import BenchResult, TrialResult
from deployctl.bench.telemetry import Sample, samples_from_dicts
from deployctl.judge.metrics import METRICS
from deployctl.reporting.charts import (
    FAIL_COLOUR, LIMIT_COLOUR, PASS_COLOUR, SMALL, Chart, Table, colour, concurrency_axis, fmt, line, log_axis, marker,
    render,
)
from deployctl.reporting.story import Run, Story, mean_or_none, per_request_tok_s, set_aside_trials, trial_values

_STATE_COLOUR = {"PASS": PASS_COLOUR, "FAIL": FAIL_COLOUR}


def _levels(runs: Sequence[Run]) -> list[int]:
    return sorted({lv.concurrency for r in runs for lv in r.result.levels})


def _trials(result: BenchResult, c: int) -> tuple[TrialResult, ...]:
    level = result.level(c)
    return level.trials if level else ()


def throughput(story: Story, note: str = "") -> Chart:
    runs = [r for r in story.runs if r.role != "verify"] or list(story.runs)
    levels = _levels(runs)
    intervals = {i.concurrency: i for i in story.intervals}

    def draw(fig) -> None:
        axes = fig.subplots(1, 2 if intervals else 1, squeeze=False)[0]
        ax = axes[0]
        for n, run in enumerate(runs):
            xs, ys, mx, my = [], [], [], []
            for c in levels:
                values = trial_values(_trials(run.result, c))
                spread = [(k - (len(values) - 1) / 2) * 0.04 for k in range(len(values))]
                xs += [c * 2 ** s for s in spread]
                ys += values
                if values:
                    mx.append(c)
                    my.append(fmean(values))
            ax.plot(mx, my, line(run.role), color=colour(run.role, n), linewidth=1.2, label=f"{run.role} (mean)")
            points = ax.scatter(xs, ys, marker=marker(run.role), color=colour(run.role, n), s=22, zorder=3,
                                edgecolors="white", linewidths=0.4, label=f"{run.role} trials")
            points.set_gid(f"trials-{run.role.replace(' ', '-')}")
        concurrency_axis(ax, levels)
        ax.set_ylabel("output tok/s (aggregate)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
        ax.legend(fontsize=SMALL, frameon=False, loc="upper left")
        if intervals:
            ax2 = axes[1]
            for c, iv in sorted(intervals.items()):
                col = _STATE_COLOUR.get(iv.state, LIMIT_COLOUR)
                if iv.interval is not None:
                    ch = 100 * iv.interval.change
                    bars = ax2.errorbar([c], [ch], yerr=[[ch - 100 * iv.interval.low], [100 * iv.interval.high - ch]],
                                        fmt="D", color=col, capsize=4, markersize=5)
                    bars.lines[0].set_gid(f"interval-C{c}")
                ax2.text(c, 1.0, iv.state, transform=ax2.get_xaxis_transform(), ha="center", va="bottom",
                         fontsize=SMALL, color=col, fontweight="bold")
            limits = {iv.limit_pct for iv in intervals.values()}
            for lim in limits:
                ax2.axhline(-lim, color=LIMIT_COLOUR, linestyle="--", linewidth=1, label=f"limit −{lim:g} %")
            ax2.axhline(0, color="#000000", linewidth=0.6)
            concurrency_axis(ax2, sorted(intervals))
            conf = f"{story.judge_confidence:.0%} " if story.judge_confidence else ""
            ax2.set_ylabel(f"{METRICS[story.judge_metric].label}: candidate vs baseline, % ({conf}interval)", fontsize=SMALL)
            ax2.legend(fontsize=SMALL, frameon=False, loc="lower left")

    header = ["C"]
    for run in runs:
        header += [f"{run.role} trials (tok/s)", f"{run.role} mean"]
    if intervals:
        header += ["change", "judge's interval", "limit", "level"]
    rows = []
    for c in levels:
        row = [str(c)]
        for run in runs:
            values = trial_values(_trials(run.result, c))
            row += [", ".join(f"{v:.1f}" for v in values) or "—", fmt(mean_or_none(values))]
        if intervals:
            iv = intervals.get(c)
            ci = iv.interval if iv else None
            row += [fmt(100 * ci.change if ci else None, "{:+.1f} %"),
                    f"{100 * ci.low:+.1f} … {100 * ci.high:+.1f} %" if ci else "—",
                    f"−{iv.limit_pct:g} %" if iv else "—", iv.state if iv else "—"]
        rows.append(tuple(row))
    said = [f"the {r.role} was measured for release {r.reused_from} and reused" for r in runs if r.reused_from]
    said += [note] if note and intervals else []
    said += [f"set aside (not judged, not drawn): {t}" for t in set_aside_trials({r.role: r.result for r in runs})]
    return Chart("throughput", "Throughput vs concurrency", render(9.5 if intervals else 6, 3.4, draw),
                 Table(tuple(header), tuple(rows)), "; ".join(said))


def latency(story: Story) -> Chart:
    runs = list(story.runs)
    levels = _levels(runs)
    metrics = (("ttft_s", "TTFT"), ("itl_s", "ITL"))
    pcts = (("p50", "-"), ("p90", "--"), ("p99", ":"))

    def mean_pct(run: Run, c: int, name: str, p: str) -> float | None:
        values = [getattr(getattr(t, name), p) for t in _trials(run.result, c) if t.valid]
        return mean_or_none([1000 * v for v in values if v is not None])

    def draw(fig) -> None:
        axes = fig.subplots(1, 2)
        for ax, (name, label) in zip(axes, metrics):
            for n, run in enumerate(runs):
                for p, style in pcts:
                    pts = [(c, v) for c in levels if (v := mean_pct(run, c, name, p)) is not None]
                    if pts:
                        ax.plot(*zip(*pts), style, marker=marker(run.role), color=colour(run.role, n), markersize=4,
                                label=f"{run.role} {p}", gid=f"{name}-{run.role.replace(' ', '-')}-{p}")
            concurrency_axis(ax, levels)
            log_axis(ax)
            ax.set_ylabel(f"{label} (ms, log scale)")
            ax.set_title(label, fontsize=9)
        axes[0].legend(fontsize=SMALL, frameon=False, ncols=len(runs))

    header = ("C", "run", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "ITL p90", "ITL p99")
    rows = tuple(
        (str(c), run.role, *(fmt(mean_pct(run, c, name, p), "{:.1f} ms") for name, _ in metrics for p, _ in pcts))
        for c in levels for run in runs if _trials(run.result, c)
    )
    return Chart("latency", "TTFT and ITL percentiles per level (mean over trials)", render(9.5, 3.2, draw),
                 Table(header, rows))


def per_request(story: Story) -> Chart:
    runs = [r for r in story.runs if r.role != "verify"] or list(story.runs)
    levels = _levels(runs)
    dist = {(run.role, c): per_request_tok_s(_trials(run.result, c)) for run in runs for c in levels}

    def draw(fig) -> None:
        ax = fig.subplots()
        width = 0.8 / max(len(runs), 1)
        for n, run in enumerate(runs):
            data = [(k, dist[(run.role, c)]) for k, c in enumerate(levels) if dist[(run.role, c)]]
            if not data:
                continue
            pos = [k - 0.4 + width * (n + 0.5) for k, _ in data]
            box = ax.boxplot([d for _, d in data], positions=pos, widths=width * 0.85, patch_artist=True,
                             showfliers=True, flierprops={"marker": marker(run.role), "markersize": 3},
                             medianprops={"color": "#000000", "linewidth": 1.2})  # not matplotlib's orange
            for patch in box["boxes"]:
                patch.set(facecolor=colour(run.role, n), alpha=0.75, edgecolor="#333333",
                          hatch="" if n == 0 else "//", gid=f"box-{run.role.replace(' ', '-')}")
            ax.plot([], [], "s", color=colour(run.role, n), label=run.role)
        ax.set_xticks(range(len(levels)))
        ax.set_xticklabels([str(c) for c in levels])
        ax.set_xlabel("concurrency (C)")
        ax.set_ylabel("per-request tok/s (decode)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=SMALL, frameon=False)

    rows = []
    for c in levels:
        for run in runs:
            d = dist[(run.role, c)]
            if d:
                q = quantiles(d, n=10) if len(d) > 1 else [d[0]] * 9
                rows.append((str(c), run.role, str(len(d)), f"{q[0]:.1f}", f"{q[4]:.1f}", f"{q[8]:.1f}"))
    return Chart("per-request", "Per-request tok/s distribution per level", render(6.5, 3.2, draw),
                 Table(("C", "run", "requests", "p10", "p50", "p90"), tuple(rows)))


def _gpu_series(samples: Sequence[Sample]) -> dict[str, list[tuple[float, float]]]:
    """Per sample, the mean over the GPUs of each figure, against seconds since the first sample."""
    out: dict[str, list[tuple[float, float]]] = {"power_w": [], "power_limit_w": [], "sm_util_pct": [], "mem_used_gb": []}
    t0 = samples[0].t if samples else 0.0
    for s in samples:
        for key, series in out.items():
            values = [getattr(g, key) for g in s.gpus if getattr(g, key) is not None]
            if values:
                series.append((s.t - t0, fmean(values)))
    return out


def _source(result: BenchResult) -> str | None:
    sources = {t.telemetry.source for lv in result.levels for t in lv.trials if t.telemetry}
    return sources.pop() if len(sources) == 1 else None


def _unavailable(result: BenchResult) -> str | None:
    return next((t.telemetry.details.get("gpu_unavailable") for lv in result.levels for t in lv.trials
                 if t.telemetry and t.telemetry.details.get("gpu_unavailable")), None)


def telemetry(story: Story) -> Chart:
    runs = [r for r in story.runs if r.role != "verify"] or list(story.runs)
    series = {r.role: _gpu_series(samples_from_dicts(r.result.telemetry_samples)) for r in runs}
    drawn = [r for r in runs if series[r.role]["power_w"] or series[r.role]["sm_util_pct"]]
    said = []
    for r in runs:
        source = _source(r.result)
        if r not in drawn:
            why = _unavailable(r.result) or "no GPU samples were recorded"
            said.append(f"{r.role}: GPU telemetry unavailable ({why})")
        elif source == "simulated":
            said.append(f"{r.role}: simulated (the simulator's model of the GPUs, not a measurement)")
        elif source:
            said.append(f"{r.role}: measured ({source})")
    panels = (("power_w", "GPU power (W per GPU)"), ("sm_util_pct", "SM utilisation (%)"), ("mem_used_gb", "GPU memory used (GB per GPU)"))

    def draw(fig) -> None:
        axes = fig.subplots(3, 1, sharex=True)
        for ax, (key, label) in zip(axes, panels):
            for n, run in enumerate(drawn):
                pts = series[run.role][key]
                if pts:
                    ax.plot(*zip(*pts), line(run.role), color=colour(run.role, n), linewidth=1.2,
                            label=run.role, gid=f"{key}-{run.role.replace(' ', '-')}")
                limit = series[run.role]["power_limit_w"] if key == "power_w" else []
                if limit:
                    ax.plot(*zip(*limit), color=LIMIT_COLOUR, linestyle=(0, (4, 2)), linewidth=0.9,
                            label=f"{run.role} power limit" if n == 0 or len(drawn) > 1 else None)
            ax.set_ylabel(label, fontsize=SMALL)
            ax.set_ylim(bottom=0)
            if key == "sm_util_pct":
                ax.set_ylim(0, 105)
        axes[0].legend(fontsize=SMALL, frameon=False, ncols=3)
        axes[-1].set_xlabel("seconds since the run's first sample")

    def summary(run: Run, key: str) -> str:
        pts = series[run.role][key]
        return fmt(fmean(v for _, v in pts) if pts else None) + (f" (max {max(v for _, v in pts):.1f})" if pts else "")

    rows = tuple((r.role, str(len(r.result.telemetry_samples)), summary(r, "power_w"), summary(r, "power_limit_w"),
                  summary(r, "sm_util_pct"), summary(r, "mem_used_gb"), _source(r.result) or "—") for r in runs)
    table = Table(("run", "samples", "power W (mean)", "limit W", "SM % (mean)", "memory GB (mean)", "source"), rows)
    return Chart("telemetry", "GPU power against its limit, SM utilisation and memory over time",
                 render(8, 5.2, draw) if drawn else "", table, "; ".join(said))


def timeline(story: Story) -> Chart:
    phases = story.phases

    def draw(fig) -> None:
        ax = fig.subplots()
        for k, p in enumerate(phases):
            ax.broken_barh([(p.start_s, max(p.seconds, 0.01))], (k - 0.35, 0.7), color=colour("x", k), gid=f"phase-{p.phase}")
            ax.annotate(f"{p.seconds:.1f} s", (p.end_s, k), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=SMALL)
        ax.set_yticks(range(len(phases)))
        ax.set_yticklabels([p.phase for p in phases])
        ax.invert_yaxis()
        ax.set_xlabel("seconds since the promote started")
        ax.grid(axis="y", visible=False)

    rows = tuple((p.phase, f"{p.start_s:.1f}", f"{p.end_s:.1f}", f"{p.seconds:.1f}") for p in phases)
    return Chart("timeline", "Where the time went: the phases", render(8, 0.9 + 0.28 * len(phases), draw, left_in=0.9) if phases else "",
                 Table(("phase", "start (s)", "end (s)", "seconds"), rows), "" if phases else "no steps were recorded")
