"""deployctl report: a release's evidence as one self-contained HTML file, or its table as markdown."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.bench.result import BenchResult
from deployctl.console.options import complete_deployments
from deployctl.console.release_arg import add_release_arguments, named_release
from deployctl.console.release_verbs import existing_state_dir
from deployctl.console.story import add_recompute_argument, load_story
from deployctl.errors import InputError


NAME = "report"
HELP = "write a release's evidence as one self-contained HTML file (charts + numbers), or markdown"
DESCRIPTION = """\
One HTML file that tells the story of a promote: the verdict and why, what changed (profile, startup
facts and the flags that explain them, startup gates), throughput against concurrency for baseline and
candidate with every trial and the judge's interval per level, TTFT/ITL percentiles, per-request tok/s,
GPU power/SM/memory over time (or "simulated"/"unavailable"), and where the time went. Each chart has
its numbers in a table under it. Nothing is fetched when it opens: mail it or scp it to a laptop.

--history DEPLOYMENT draws live tok/s per level across the deployment's releases instead, with
rejected candidates marked. --format markdown prints the operators' table (baseline and candidate side
by side, change and verdict) for a ticket or a chat.

The verdicts and intervals are the ones decided at the time, stored with the release, with the judge
policy and the noise estimate then in force (a later change of the inventory's limit does not change what
a release's report says). --recompute runs the judge again on the stored trials under today's inventory
(the default policy when it cannot be read) and says so; a release recorded before verdicts were stored is
recomputed that way too, and its report says "recomputed".

examples:
  deployctl report 12                          # writes release-12.html
  deployctl report 12 -o /tmp/r12.html
  deployctl report -d glm5                     # glm5's newest release (`report -d glm5 12` checks 12 is glm5's)
  deployctl report 12 --format markdown
  deployctl report 12 --recompute              # under today's inventory policy, marked RECOMPUTED
  deployctl report --history glm5 -o glm5-history.html
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    add_release_arguments(what, deployment_parser=parser)
    what.add_argument("--history", metavar="DEPLOYMENT", help="throughput across this deployment's releases"
                      ).completer = complete_deployments  # type: ignore[attr-defined]
    parser.add_argument("-o", "--output", metavar="FILE", help="the HTML file (default release-ID.html; '-' for stdout)")
    parser.add_argument("--format", choices=("html", "markdown"), default="html",
                        help="html (a file) or markdown (the operators' table on stdout)")
    parser.add_argument("-n", "--limit", type=int, default=50, help="with --history: how many releases (default 50)")
    add_recompute_argument(parser)


def run(args: argparse.Namespace) -> int:
    from deployctl.reporting.changes import release_changes
    from deployctl.reporting.history import ReleaseRuns, history_chart, history_page
    from deployctl.reporting.markdown import chart_markdown, comparison_markdown
    from deployctl.reporting.page import release_page

    directory = existing_state_dir(args)
    if not (directory / LEDGER_FILE).exists():  # a read-only verb never creates the ledger
        raise InputError(f"there is no ledger in {directory} yet", hint="`deployctl history` lists the releases recorded")
    with Ledger.open(directory) as ledger:
        if args.history:
            releases = ledger.history(args.history, args.limit)
            if not releases:
                raise InputError(f"no release of deployment {args.history!r} in the ledger {ledger.path}",
                                 hint="see `deployctl history` for the deployments recorded")
            items = [ReleaseRuns(r, {b.role: BenchResult.from_dict(b.result) for b in ledger.benches(r.id)})
                     for r in releases]
            if args.format == "markdown":
                sys.stdout.write(chart_markdown(history_chart(items)))
                return 0
            return _write(history_page(args.history, items), args.output or f"{args.history}-history.html", args.json)
        release = named_release(args, ledger)
        story, known_good, events, said = load_story(args, ledger, release)
    if args.format == "markdown":
        sys.stdout.write(comparison_markdown(story))
        return 0
    html = release_page(story, release_changes(release, known_good, events), policy_note=story.verdict_source or said)
    return _write(html, args.output or f"release-{release.id}.html", args.json)


def _write(html: str, output: str, as_json: bool = False) -> int:
    if output == "-":
        sys.stdout.write(html)
        return 0
    path = Path(output)
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", hint="choose another path with -o FILE") from exc
    size = len(html.encode())
    if as_json:
        print(json.dumps({"written": str(path), "bytes": size}))
    else:
        print(f"wrote {path} ({size / 1024:.0f} KiB)")
    return 0
