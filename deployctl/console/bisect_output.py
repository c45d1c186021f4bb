"""How a bisect ended, for the terminal: the changes, each trial, the culprit(s) and what was promoted
(lines or JSON). Used by ``bisect`` and by ``promote --bisect``."""

from __future__ import annotations

from deployctl.console.output import emit, emit_json
from deployctl.decisions.bisect_report import BisectOutcome, outcome_json, outcome_lines


def report(out: BisectOutcome, *, as_json: bool) -> None:
    if as_json:
        emit_json(outcome_json(out))
    else:
        emit(outcome_lines(out))
