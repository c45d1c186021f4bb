"""Printing for the verbs: plain lines for pipes and cron mail, rich tables and a live step line on a terminal.

The words come from ``deployctl.decisions.report`` (pure); this module only decides how they reach the stream.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Sequence, TextIO

from deployctl.decisions import machine as m
from deployctl.decisions.cost import CostEstimate, eta
from deployctl.decisions.evidence import LevelRow
from deployctl.decisions.report import num, table_lines
from deployctl.decisions.state import PHASE_WIDTH
from deployctl.judge.outcome import LevelState


def emit(lines: Sequence[str], *, stream: TextIO | None = None, rows: Sequence[LevelRow] = ()) -> None:
    """Print ``lines``; on a terminal the benchmark table is drawn by rich instead of as plain text."""
    out = stream or sys.stdout
    if not out.isatty() or not rows:
        out.write("\n".join(lines) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out)
    table_text = table_lines(rows)
    start = lines.index(table_text[0]) if table_text[0] in lines else None
    before = lines if start is None else lines[:start]
    after = [] if start is None else lines[start + len(table_text):]
    console.print("\n".join(before), highlight=False, markup=False, soft_wrap=True)
    table = Table()
    for title in ("C", "baseline tok/s", "candidate tok/s", "change"):
        table.add_column(title, justify="right")
    table.add_column("verdict")
    for r in rows:
        style = {LevelState.FAIL: "red", LevelState.PASS: "green"}.get(r.verdict) if r.verdict else None
        table.add_row(str(r.concurrency), num(r.baseline_tok_s), num(r.candidate_tok_s), num(r.change_pct, "{:+.1f} %"),
                      r.verdict_text, style=style)
    if start is not None:
        console.print(table)
    console.print("\n".join(after), highlight=False, markup=False, soft_wrap=True)


def emit_json(data: Any, stream: TextIO | None = None) -> None:
    (stream or sys.stdout).write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


# Where a step's text starts: after the elapsed time and the phase column (a detail line is indented to it).
_STEP_TEXT_AT = len(f"[{0:6.1f}s] ") + PHASE_WIDTH + 1


class TerminalProgress:
    """Progress for a promote: a spinner line per step on a terminal, a plain line per step otherwise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.cost: CostEstimate | None = None  # once known, each step line ends with the ETA

    def expect(self, cost: CostEstimate) -> None:
        """The promote's price (``decisions.cost``): from now on every step line says what is left of it."""
        self.cost = cost

    def step(self, phase: m.Phase, text: str) -> None:
        elapsed = time.monotonic() - self.started
        if self.cost is not None:
            text = f"{text} · {eta(self.cost, elapsed)}"
        if self.stream.isatty():
            self.stream.write(f"\x1b[2m[{elapsed:6.1f}s]\x1b[0m \x1b[1m{phase.value:<{PHASE_WIDTH}}\x1b[0m {text}\n")
        else:
            self.stream.write(f"[{elapsed:6.1f}s] {phase.value:<{PHASE_WIDTH}} {text}\n")
        self.stream.flush()

    def detail(self, text: str) -> None:
        """A line within a step (a finished benchmark trial), indented under it."""
        self.stream.write(f"{'':{_STEP_TEXT_AT}}{text}\n")
        self.stream.flush()
