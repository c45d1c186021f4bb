"""deployctl show: the whole evidence of one release."""

from __future__ import annotations

import argparse
import sys

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.commands._release_verbs import existing_state_dir
from deployctl.commands.output import emit, emit_json
from deployctl.errors import InputError
from deployctl.promote.report import release_lines

NAME = "show"
HELP = "print one release: who, when, unit, startup facts, benchmark table, verdict and reasons"
DESCRIPTION = """\
Everything the ledger holds about RELEASE: who promoted what and when, the unit text (secrets redacted),
the startup facts of baseline and candidate, the benchmark table, the verdict and its reasons, the result.
--json adds every step (intent before outcome) and the raw benchmark samples.

examples:
  deployctl show 12
  deployctl show 12 --json | jq '.benchmarks[0].result.levels'
  deployctl show 12 --format markdown    # the table to paste into a ticket
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("release", metavar="RELEASE", type=int, help="a release id from `deployctl history`")
    parser.add_argument("--format", choices=("text", "markdown"), default="text",
                        help="markdown: the operators' table, baseline and candidate side by side (GitHub-flavoured)")


def run(args: argparse.Namespace) -> int:
    directory = existing_state_dir(args)
    if not (directory / LEDGER_FILE).exists():  # a read-only verb never creates the ledger
        raise InputError(f"no release {args.release}: there is no ledger in {directory} yet",
                         hint="`deployctl history` lists the releases recorded")
    with Ledger.open(directory) as ledger:
        if args.format == "markdown":
            from deployctl.commands.report import load_story
            from deployctl.reporting.markdown import comparison_markdown

            story, *_ = load_story(args, ledger, ledger.get(args.release))
            sys.stdout.write(comparison_markdown(story))
            return 0
        release = ledger.get(args.release)
        benches = ledger.benches(release.id)
        events = ledger.events(release.id)
    if args.json:
        emit_json({**release.to_dict(), "events": [vars(e) for e in events], "benchmarks": [vars(b) for b in benches]})
    else:
        emit(release_lines(release, benches, events))
    return 0
