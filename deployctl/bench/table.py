"""A sweep's result as the operators' table (C, aggregate and per-request tok/s, latencies, ok)."""

from __future__ import annotations

from deployctl.bench.result import BenchResult


def render_table(result: BenchResult) -> str:
    """The operators' table, one row per trial, plus TTFT/ITL columns; under it a line per invalid trial
    and one per note of a level (e.g. C above the server's capacity), numbered from the rows."""
    many = any(len(lv.trials) > 1 for lv in result.levels)
    head = ["C"] + (["Trial"] if many else []) + [
        "Agg tok/s", "Per-req tok/s", "Tokens", "Wall(s)", "Ok", "TTFT p50/p99 (ms)", "ITL p50/p99 (ms)",
    ]
    rows, notes = [], []
    numbers: dict[str, int] = {}  # one number per distinct line: a note shared by a level's trials once

    def number(text: str) -> str:
        if text not in numbers:
            numbers[text] = len(notes) + 1
            notes.append(f"[{numbers[text]}] {text}")
        return f"[{numbers[text]}]"

    for lv in result.levels:
        for t in lv.trials:
            marks = [] if t.valid else [number(f"C={t.concurrency} trial {t.trial}: invalid: {t.invalid_reason}")]
            marks += [number(f"C={t.concurrency}: {n}") for n in t.notes]
            mark = f" {''.join(marks)}" if marks else ""
            ok = f"{t.requests_ok}" if not t.requests_failed else f"{t.requests_ok} ({t.requests_failed} failed)"
            rows.append([f"{t.concurrency}{mark}"] + ([str(t.trial)] if many else []) + [
                f"{t.output_tok_s:.1f}", _num(t.per_request_tok_s.mean, 1), str(t.output_tokens), f"{t.wall_s:.1f}",
                ok, f"{_ms(t.ttft_s.p50)} / {_ms(t.ttft_s.p99)}", f"{_ms(t.itl_s.p50)} / {_ms(t.itl_s.p99)}",
            ])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
    return "\n".join(out + notes)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.1f}"
