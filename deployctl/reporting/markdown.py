"""The operators' table as GitHub-flavoured markdown, to paste into a ticket or a chat."""

from __future__ import annotations

import re
from statistics import fmean
from typing import Sequence

from deployctl.bench.result import BenchResult, TrialResult
from deployctl.reporting.charts import Chart
from deployctl.reporting.story import Story

_NUMBER = re.compile(r"[-+−]?[\d.]+( %)?(/\d+)?|—")
_COLUMNS = ("Agg tok/s", "Per-req tok/s", "Tokens", "Wall(s)", "Ok")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """GitHub-flavoured: numbers right-aligned (a column whose cells are all numbers, ratios or "—")."""
    def numeric(k: int) -> bool:
        return bool(rows) and all(_NUMBER.fullmatch(r[k]) for r in rows)

    align = ["---:" if numeric(k) else ":---" for k in range(len(header))]
    return [_row(header), "|" + "|".join(align) + "|", *(_row(r) for r in rows)]


def _level_cells(result: BenchResult | None, c: int) -> list[str]:
    """One level over its trials: mean of the valid trials' rates, sums of tokens, wall time and requests."""
    level = result.level(c) if result else None
    trials: tuple[TrialResult, ...] = level.trials if level else ()
    if not trials:
        return ["—"] * len(_COLUMNS)
    valid = [t for t in trials if t.valid] or list(trials)
    per_req = [t.per_request_tok_s.mean for t in valid if t.per_request_tok_s.mean is not None]
    ok = sum(t.requests_ok for t in trials)
    failed = sum(t.requests_failed for t in trials)
    return [f"{fmean(t.output_tok_s for t in valid):.1f}", f"{fmean(per_req):.1f}" if per_req else "—",
            str(sum(t.output_tokens for t in trials)), f"{sum(t.wall_s for t in trials):.1f}",
            f"{ok}/{ok + failed}"]


def comparison_markdown(story: Story) -> str:
    """Baseline and candidate side by side per level, with the change and the judge's state of the level."""
    base, cand = story.run("baseline"), story.run("candidate")
    levels = sorted({lv.concurrency for r in (base, cand) if r for lv in r.result.levels})
    states = {i.concurrency: i for i in story.intervals}
    header = ["C", *(f"{c} (baseline)" for c in _COLUMNS), *(f"{c} (candidate)" for c in _COLUMNS), "Change", "Verdict"]
    rows = []
    for c in levels:
        b, k = _level_cells(base.result if base else None, c), _level_cells(cand.result if cand else None, c)
        iv = states.get(c)
        if iv is not None and iv.interval is not None:
            change = f"{100 * iv.interval.change:+.1f} %"
        elif b[0] != "—" and k[0] != "—":
            change = f"{100 * (float(k[0]) / float(b[0]) - 1):+.1f} %"
        else:
            change = "—"
        rows.append([str(c), *b, *k, change, iv.state if iv else "—"])
    lines = _table(header, rows) if rows else ["(no benchmark was recorded for this release)"]
    r = story.release
    if r is not None:
        lines = [f"**Release {r.id}** {r.kind} of `{r.profile or 'installed unit'}` on `{r.deployment}`: "
                 f"**{(r.result or 'unfinished').upper()}**" + (f" — {r.reasons[0]}" if r.reasons else ""), "", *lines]
    if story.verdict_source and rows:
        lines += ["", f"_{_cell(story.verdict_source)}_"]
    return "\n".join(lines) + "\n"


def sweep_markdown(result: BenchResult) -> str:
    """One sweep (``bench``): a row per trial, as the terminal table has it."""
    many = any(len(lv.trials) > 1 for lv in result.levels)
    header = ["C", *(["Trial"] if many else []), *_COLUMNS, "Note"]
    rows = []
    for lv in result.levels:
        for t in lv.trials:
            ok = f"{t.requests_ok}/{t.requests_ok + t.requests_failed}"
            note = "; ".join(([] if t.valid else [f"invalid: {t.invalid_reason}"]) + list(t.notes))
            per_req = "—" if t.per_request_tok_s.mean is None else f"{t.per_request_tok_s.mean:.1f}"
            rows.append([str(t.concurrency), *([str(t.trial)] if many else []), f"{t.output_tok_s:.1f}", per_req,
                         str(t.output_tokens), f"{t.wall_s:.1f}", ok, note])
    return "\n".join(_table(header, rows)) + "\n"


def chart_markdown(chart: Chart) -> str:
    """A chart's numbers (the table under it on the page) as markdown, e.g. the history across releases."""
    return "\n".join([f"**{chart.title}**", "", *_table(chart.table.header, chart.table.rows)]) + "\n"
