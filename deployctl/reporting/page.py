"""The HTML page: one self-contained file (inline SVG and CSS, no script, nothing fetched)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from jinja2 import Environment, PackageLoader, select_autoescape

from deployctl import __version__
from deployctl.reporting import figures
from deployctl.reporting.changes import Changes
from deployctl.reporting.outputs import output_charts
from deployctl.reporting.charts import Chart
from deployctl.reporting.story import Story

_BAD = ("rejected", "rollback_failed", "aborted", "refused")


@dataclass(frozen=True)
class Page:
    title: str
    subtitle: str = ""
    verdict: str = ""
    verdict_class: str = ""
    reasons: tuple[str, ...] = ()
    changes: Changes | None = None
    charts: tuple[Chart, ...] = ()
    footer: str = ""


@lru_cache(maxsize=1)
def _template():
    env = Environment(loader=PackageLoader("deployctl.reporting", "."), autoescape=select_autoescape(["j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    return env.get_template("page.html.j2")


def render_page(page: Page) -> str:
    return _template().render(version=__version__, **vars(page))


def _when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts))


def verdict_line(story: Story) -> str:
    """The verdict and why, in one line: the result, then the first reason (the judge's headline or the gate)."""
    r = story.release
    assert r is not None
    result = (r.result or "unfinished").upper()
    why = r.reasons[0] if r.reasons else r.verdict
    return f"{result}: {why}" if why else result


def release_page(story: Story, changes: Changes | None, *, policy_note: str = "") -> str:
    r = story.release
    assert r is not None
    charts = [figures.throughput(story, policy_note), figures.latency(story), figures.per_request(story),
              figures.telemetry(story), figures.timeline(story)] if story.runs else [figures.timeline(story)]
    if story.outputs:
        charts[1:1] = output_charts(story.outputs)  # after the throughput: what the candidate says
    page = Page(
        title=f"Release {r.id}: {r.kind} of {r.profile or '(installed unit)'} on {r.deployment}",
        subtitle=f"{r.unit_name} · by {r.who} · {_when(r.started_at)} → {_when(r.finished_at)}"
                 + (f" · tried against release {r.previous_id}" if r.previous_id else ""),
        verdict=verdict_line(story),
        verdict_class="bad" if (r.result or "") in _BAD else "good" if r.result == "kept" else "",
        reasons=tuple(r.reasons[1:]),
        changes=changes,
        charts=tuple(charts),
        footer=f"made by deployctl {__version__} from the ledger's records of release {r.id}",
    )
    return render_page(page)


def bench_page(story: Story, title: str) -> str:
    charts = (figures.throughput(story), figures.latency(story), figures.per_request(story), figures.telemetry(story))
    return render_page(Page(title=title, charts=charts, footer=f"made by deployctl {__version__} from one benchmark sweep"))
