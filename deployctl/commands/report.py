"""deployctl report: a release's evidence as one self-contained HTML file, or its table as markdown."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.adapters.ledger import LEDGER_FILE
from deployctl.console.inventory_args import inventory_path
from deployctl.console.release_arg import add_release_arguments, named_release
from deployctl.console.release_verbs import existing_state_dir
from deployctl.console.options import complete_deployments
from deployctl.errors import DeployctlError, InputError
from deployctl.inventory.policy import JudgePolicy
from deployctl.decisions.records import Event, Release, StoredBench
from deployctl.reporting.story import Story

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


def add_recompute_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recompute", action="store_true",
                        help="judge the stored trials again under today's inventory policy (marked RECOMPUTED) "
                             "instead of showing the verdict stored with the release")


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


def load_story(args: argparse.Namespace, ledger: Ledger, release: Release) -> tuple[Story, Release | None, list[Event], str]:
    """A release's story from the ledger (with the baseline it reused, if so), its known-good release, its
    events, and a line saying which judge policy a recomputation would run under (``--recompute``, or a
    release stored without its verdict)."""
    from deployctl.reporting.story import release_story

    benches = ledger.benches(release.id)
    events = ledger.events(release.id)
    known_good = ledger.get(release.previous_id) if release.previous_id else None
    reused = _reused_baseline(ledger, release, known_good, benches)
    policy, said = _judge_policy(args, release)
    story = release_story(release, benches, events, reused_baseline=reused, policy=policy, policy_said=said,
                          recompute=bool(getattr(args, "recompute", False)))
    return story, known_good, events, said


def _reused_baseline(ledger: Ledger, release: Release, known_good: Release | None,
                     benches: list[StoredBench]) -> StoredBench | None:
    candidate = next((b for b in benches if b.role == "candidate"), None)
    if known_good is None or candidate is None or any(b.role == "baseline" for b in benches):
        return None
    return ledger.baseline_before(unit_hash=known_good.unit_hash, bench_key=candidate.bench_key, before=candidate.at)


def _judge_policy(args: argparse.Namespace, release: Release) -> tuple[JudgePolicy, str]:
    """The deployment's judge policy from the inventory, or the default one, and a line that says which."""
    from deployctl.inventory.model import deployment_policy, load_inventory

    path = inventory_path(args)
    try:
        inv = load_inventory(path)
        policy = deployment_policy(inv, release.deployment).judge
    except (DeployctlError, OSError, KeyError, ValueError) as exc:
        reason = getattr(exc, "message", None) or str(exc)
        return JudgePolicy(), f"the default judge policy (the inventory {path} could not be used: {reason})"
    return policy, f"today's judge policy of {release.deployment} in {path}"


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
