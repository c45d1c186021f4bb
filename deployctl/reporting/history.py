"""Live throughput per level across a deployment's releases: rejected candidates marked as rejected (and
only those: a bisect trial that passed or an inconclusive promote is a candidate tried, not rejected), the
release live now marked, and every trial the judge set aside listed with why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from deployctl.bench.result import BenchResult
from deployctl.decisions.records import Release
from deployctl.reporting.charts import FAIL_COLOUR, SMALL, Chart, Table, colour, fmt, render
from deployctl.reporting.page import Page, render_page
from deployctl.reporting.story import mean_or_none, set_aside_trials, trial_values


@dataclass(frozen=True)
class ReleaseRuns:
    release: Release
    runs: dict[str, BenchResult]  # role → sweep (baseline, candidate, verify)


def _live_after(item: ReleaseRuns) -> BenchResult | None:
    """What served after the release: the kept candidate, else the baseline measured before it (which a
    rejected candidate was rolled back to), else the restored baseline's short verification."""
    if item.release.result == "kept":
        return item.runs.get("candidate")
    return item.runs.get("baseline") or item.runs.get("verify")


def history_chart(items: Sequence[ReleaseRuns]) -> Chart:
    items = sorted((i for i in items if i.runs), key=lambda i: i.release.id)
    levels = sorted({lv.concurrency for i in items for r in i.runs.values() for lv in r.levels})

    def level_mean(result: BenchResult | None, c: int) -> float | None:
        level = result.level(c) if result else None
        return mean_or_none(trial_values(level.trials)) if level else None

    def draw(fig) -> None:
        ax = fig.subplots()
        xs = [i.release.id for i in items]
        for n, c in enumerate(levels):
            pts = [(x, v) for x, i in zip(xs, items) if (v := level_mean(_live_after(i), c)) is not None]
            if pts:
                ax.plot(*zip(*pts), "-o", color=colour("level", n), markersize=4, label=f"C={c} live", gid=f"live-C{c}")
            rejected = [(i.release.id, v) for i in items if i.release.result == "rejected"
                        and (v := level_mean(i.runs.get("candidate"), c)) is not None]
            if rejected:
                ax.scatter(*zip(*rejected), marker="X", s=55, color=colour("level", n), edgecolors=FAIL_COLOUR,
                           linewidths=0.8, zorder=3, gid=f"rejected-C{c}", label=f"C={c} rejected candidate")
            # Tried and rolled back without a rejection: a bisect trial that passed, an inconclusive promote.
            tried = [(i.release.id, v) for i in items if i.release.result not in ("kept", "rejected")
                     and (v := level_mean(i.runs.get("candidate"), c)) is not None]
            if tried:
                ax.plot(*zip(*tried), "o", markersize=6, markerfacecolor="none", color=colour("level", n),
                        markeredgewidth=0.8, zorder=3, gid=f"tried-C{c}",
                        label=f"C={c} candidate tried, not kept (not rejected)")
        live_now = [i.release.id for i in items if i.release.live]
        for x in live_now:
            ax.axvline(x, color="#888888", linestyle=":", linewidth=1, gid="live-now", label=f"live now: release {x}")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_xlabel("release")
        ax.set_ylabel("output tok/s (mean of trials)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.2)  # room for the legend above the highest point
        ax.legend(fontsize=SMALL, frameon=False, ncols=4, loc="upper left")

    header = ("release", "kind", "profile", "result", *(f"C={c} live" for c in levels),
              *(f"C={c} candidate" for c in levels), "live now", "trials set aside")
    rows = tuple(
        (str(i.release.id), i.release.kind, i.release.profile or "—", i.release.result or "unfinished",
         *(fmt(level_mean(_live_after(i), c)) for c in levels),
         *(fmt(level_mean(i.runs.get("candidate"), c)) for c in levels),
         "live now" if i.release.live else "—", "; ".join(set_aside_trials(i.runs)) or "—")
        for i in items
    )
    note = "" if items else "no release of this deployment has a benchmark in the ledger"
    return Chart("history", "Live throughput per level across releases (× = a rejected candidate, ○ = a candidate "
                 "tried and rolled back without a rejection, dotted = live now)",
                 render(9, 3.6, draw) if items else "", Table(header, rows), note)


def history_page(deployment: str, items: Sequence[ReleaseRuns]) -> str:
    return render_page(Page(title=f"Throughput history of {deployment}", charts=(history_chart(items),),
                            footer="made by deployctl from the ledger"))
