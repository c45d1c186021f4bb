"""deployctl show: the whole evidence of one release."""

from __future__ import annotations

import argparse
import sys

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.console.output import emit, emit_json
from deployctl.console.release_arg import add_release_arguments, named_release
from deployctl.console.release_verbs import existing_state_dir
from deployctl.console.story import add_recompute_argument, load_story
from deployctl.decisions.evidence import LevelRow
from deployctl.decisions.report import release_lines
from deployctl.errors import InputError
from deployctl.judge.outcome import LevelState
from deployctl.reporting.story import Story, mean_or_none, trial_values


NAME = "show"
HELP = "print one release: who, when, unit, startup facts, benchmark table, verdict and reasons"
DESCRIPTION = """\
Everything the ledger holds about RELEASE: who promoted what and when, the unit text (secrets redacted),
the startup facts of baseline and candidate, the benchmark table with every level's verdict, the verdict
and its reasons, the result. The verdicts are the ones decided at the time, stored with the release with
the judge policy and noise estimate then in force; --recompute judges the stored trials again under today's
inventory and says so (as it does, marked "recomputed", for a release stored without its verdict).
--json adds every step (intent before outcome) and the raw benchmark samples.

examples:
  deployctl show 12
  deployctl show -d glm5                 # glm5's newest release
  deployctl show 12 --json | jq '.benchmarks[0].result.levels'
  deployctl show 12 --format markdown    # the table to paste into a ticket
  deployctl show 12 --recompute          # the verdicts under today's inventory policy
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_release_arguments(parser, deployment_parser=parser)
    parser.add_argument("--format", choices=("text", "markdown"), default="text",
                        help="markdown: the operators' table, baseline and candidate side by side (GitHub-flavoured)")
    add_recompute_argument(parser)


def run(args: argparse.Namespace) -> int:
    directory = existing_state_dir(args)
    if not (directory / LEDGER_FILE).exists():  # a read-only verb never creates the ledger
        raise InputError(f"no release {args.release or ''}: there is no ledger in {directory} yet",
                         hint="`deployctl history` lists the releases recorded")
    with Ledger.open(directory) as ledger:
        release = named_release(args, ledger)
        story, *_ = load_story(args, ledger, release)
        if args.format == "markdown":
            from deployctl.reporting.markdown import comparison_markdown

            sys.stdout.write(comparison_markdown(story))
            return 0
        benches = ledger.benches(release.id)
        events = ledger.events(release.id)
    if args.json:
        emit_json({**release.to_dict(), "events": [vars(e) for e in events], "benchmarks": [b.to_dict() for b in benches],
                   "decided": story.decided.to_detail() if story.decided else None,
                   "verdict_source": story.verdict_source})
    else:
        emit(release_lines(release, benches, events, judged=level_rows(story), verdict_note=story.verdict_source))
    return 0


def level_rows(story: Story) -> list[LevelRow]:
    """The table's rows with every level's verdict as the story has it (stored, or recomputed)."""
    base, cand = story.run("baseline"), story.run("candidate")
    if cand is None:
        return []
    rows = []
    for iv in story.intervals:
        b = mean_or_none(trial_values(base.result.level(iv.concurrency).trials)) \
            if base and base.result.level(iv.concurrency) else None
        level = cand.result.level(iv.concurrency)
        k = mean_or_none(trial_values(level.trials)) if level else None
        change = 100 * iv.interval.change if iv.interval else ((k - b) / b * 100 if b and k is not None else None)
        state = LevelState(iv.state) if iv.state in LevelState.__members__ else None
        rows.append(LevelRow(iv.concurrency, b, k, change, state))
    return rows
