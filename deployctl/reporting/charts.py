"""The report's charts: matplotlib figures rendered to inline SVG, each with its numbers as a table.

matplotlib's object API (``Figure`` + the SVG canvas, no pyplot) keeps no global state and needs no
display. Text stays text in the SVG (``svg.fonttype: none``): smaller files, and the numbers on the axes
can be searched and read by a screen reader. Colours are Okabe–Ito (safe for the common colour-vision
deficiencies), and baseline and candidate also differ by marker shape and line style, never by hue alone.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable, Sequence

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

# Okabe & Ito (2008): distinguishable with protanopia, deuteranopia and tritanopia.
PALETTE = {"baseline": "#0072B2", "candidate": "#E69F00", "verify": "#009E73", "this run": "#0072B2"}
CATEGORICAL = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = {"baseline": "o", "candidate": "^", "verify": "s", "this run": "o"}
LINES = {"baseline": "-", "candidate": "--", "verify": ":", "this run": "-"}
FAIL_COLOUR, PASS_COLOUR, LIMIT_COLOUR = "#D55E00", "#009E73", "#555555"
# The smallest text of a chart, in points: 8.5 pt is 11.3 CSS px at the chart's own size, which is how a
# phone shows it (the page lets a chart scroll in its box there rather than shrink it; see page.html.j2).
SMALL = 8.5

_STYLE = {
    "svg.fonttype": "none",  # text as <text>, not glyph outlines
    "svg.hashsalt": "deployctl",  # stable element ids: the same data gives the same file
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 96,
}


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Chart:
    key: str  # a stable id: the page's anchors and the tests find charts by it
    title: str
    svg: str  # empty when there is nothing to draw; ``note`` then says why
    table: Table
    note: str = ""


def colour(role: str, index: int = 0) -> str:
    """The role's colour; other series (phases, levels) take the eight Okabe–Ito colours in turn."""
    return PALETTE.get(role) or CATEGORICAL[index % len(CATEGORICAL)]


def marker(role: str) -> str:
    return MARKERS.get(role, "D")


def line(role: str) -> str:
    return LINES.get(role, "-.")


def render(width_in: float, height_in: float, draw: Callable[[Figure], None], *, left_in: float = 0.75) -> str:
    """Draw into a fresh figure and return its SVG without the XML prologue, ready to inline.

    Margins are fixed in inches rather than found by constrained layout, which draws the figure a second
    time to measure it: that halves the rendering time, and these charts' labels are of known length.
    """
    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(width_in, height_in))
        fig.subplots_adjust(left=left_in / width_in, right=1 - 0.15 / width_in, bottom=0.55 / height_in,
                            top=1 - 0.3 / height_in, wspace=0.3, hspace=0.15)
        draw(fig)
        buf = io.StringIO()
        FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def fmt(value: float | None, spec: str = "{:.1f}") -> str:
    return "—" if value is None else spec.format(value)


def concurrency_axis(ax, levels: Sequence[int]) -> None:
    """Concurrency on a log-2 axis labelled with the levels themselves."""
    if len(levels) > 1 and min(levels) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(levels))
    ax.set_xticklabels([str(c) for c in levels])
    ax.minorticks_off()
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.set_xlabel("concurrency (C)")


def _plain(value: float, _pos: object) -> str:
    return f"{value:g}"


def log_axis(ax) -> None:
    """A log y axis labelled 2, 5, 10, 20 rather than 2×10¹: plain labels also skip mathtext, the slowest part
    of drawing a log axis."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    ax.yaxis.set_minor_formatter(NullFormatter())
