"""deployctl canary: the scheduled watch of the live release, and the one try of a pending candidate."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from deployctl.adapters import textfile
from deployctl.console.in_unit import dead_man
from deployctl.console.inventory_args import inventory_path, load_inventory_from_args
from deployctl.console.options import add_deployment, complete_deployments
from deployctl.console.release_verbs import state_dir
from deployctl.console.upload import refuse_lasting_use
from deployctl.decisions.canary import every_to_calendar
from deployctl.errors import ExitCode, InputError, UsageError
from deployctl.flows.canary import QUIET, live_after, most_serious, rebaseline_live, run_one
from deployctl.operations.canary_units import Paths, canary_timer_name, install as install_units, install_plan
from deployctl.operations.canary_units import private_tmp_for, protect_home_for
from deployctl.operations.site import make_site


NAME = "canary"
HELP = "the scheduled canary: watch the live release, try the pending candidate once (for timers and cron)"
DESCRIPTION = """\
`deployctl canary DEPLOYMENT` (or --all) runs once, now; `deployctl canary install DEPLOYMENT [--every
PERIOD]` schedules it: writes deployctl-canary@.service and .timer with this installation's paths and
enables deployctl-canary@DEPLOYMENT.timer over D-Bus (PERIOD: 1min at least; 15min, 6h, 1d; default 6h).
All or nothing: systemd is reached first, and a failure puts the files back as they were; --dry-run prints
what it would write and enable. --every only schedules: given to a run, it is refused rather than ignored.

Run by a timer or cron, once per deployment (or --all):

1. watch: health, then passive first: the server's own /metrics (SGLang's --enable-metrics) over
   policy.canary.passive_window_s while it serves users — generated tokens per running request at the
   window's occupancy, TTFT/ITL/E2E from the histograms — with no request of ours, judged against the
   release's passive reference at that occupancy (its first such window, pinned). Only a server that
   served nobody over the window (or exports no /metrics) gets a short benchmark at the policy's levels,
   judged against the release's own reference (pinned by `canary rebaseline`, else its promotion's
   measurement, else the stored baseline of its unit, pinned at first use, else its first watch). Stored
   in the ledger; a significant step down in the release's series of watches (change points,
   E-divisive means) also counts, so a small persistent loss is caught. → ok, degraded, or unclear
   (the judge could not decide within its trials: never read as ok, never acted on; an installed canary
   looks again after policy.canary.unclear_recheck_s).
2. try: if policy.canary.profile renders a unit other than the live one, and that exact unit was not
   yet judged on this SGLang version, and it is inside policy.canary.window: a full `deployctl promote`
   of it. A rejected or inconclusive candidate is not tried again until it changes.
3. policy.canary.on_degraded: rollback (default: alert): a degraded live release makes it try the
   release before it (inside the window), judged against the degraded one just measured; kept only if
   it measures better now (not worse anywhere, better medians, significantly better somewhere), else
   the degraded release is restored: "degraded, no better release".

Silent when all is well (cron mails only when something happened); -v says what it did. Each run is
a journal entry (SYSLOG_IDENTIFIER=deployctl, DEPLOYCTL_DEPLOYMENT, DEPLOYCTL_RELEASE, DEPLOYCTL_VERDICT),
a Prometheus textfile for node_exporter, and on anything but ok a webhook call (policy.canary.webhook).

exit codes: 0 ok · 4 busy (another deployctl holds the lock; nothing was done) · 20 degraded ·
            23 unclear (could not decide) · 22 degraded, rolled back to the release before it (it measures better now) ·
            21 candidate promoted · 10 candidate rejected, rolled back · 11 inconclusive, baseline kept ·
            12 rollback failed · 2 bad input.  With --all, the most serious of the deployments'.

examples:
  deployctl canary install glm5 --every 6h   # write + enable deployctl-canary@glm5.timer
  deployctl canary glm5                 # one run, as the timer does it
  deployctl canary --all -v             # every deployment, saying what happened
  deployctl canary rebaseline glm5      # pin the live release's reference, measured now
  journalctl SYSLOG_IDENTIFIER=deployctl DEPLOYCTL_VERDICT=degraded
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="DEPLOYMENT", nargs="*",
                        help="same as -d DEPLOYMENT (an alias), or --all; `install DEPLOYMENT` writes and enables its timer; "
                             "`rebaseline DEPLOYMENT` pins the live release's reference, measured now"
                        ).completer = _complete_target  # type: ignore[attr-defined]
    parser.add_argument("--all", action="store_true", help="every deployment of the inventory, one after another")
    add_deployment(parser, alias=False, help="the deployment (same as the positional DEPLOYMENT)")
    parser.add_argument("--textfile-dir", metavar="DIR", default=None,
                        help="node_exporter's textfile directory (default: $DEPLOYCTL_TEXTFILE_DIR, else "
                             f"{textfile.DEFAULT_TEXTFILE_DIR} when it exists)")
    parser.add_argument("--every", metavar="PERIOD", default=None,
                        help="with install: how often the timer runs it (1min at least; 15min, 6h, 1d; default 6h)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with install: print the files it would write and the timer it would enable; change nothing")


def _complete_target(prefix: str, parsed_args: argparse.Namespace, **kwargs: Any) -> list[str]:
    """The words before a deployment (install, rebaseline), then the inventory's deployments."""
    words = [] if getattr(parsed_args, "target", None) else [w for w in ("install", "rebaseline") if w.startswith(prefix)]
    return words + complete_deployments(prefix, parsed_args, **kwargs)


def _targets(args: argparse.Namespace) -> list[str]:
    """The positional words, with -d DEPLOYMENT as the last one (`canary -d glm5`, `canary install -d glm5`)."""
    return [*args.target, *([args.deployment] if args.deployment else [])]


def run(args: argparse.Namespace) -> int:
    args.target = _targets(args)
    if args.target[:1] == ["install"]:
        return install(args)
    if args.dry_run:  # a run's watch changes nothing, but it may try a candidate: never pretend it would not
        raise UsageError("--dry-run goes with `canary install`; nothing else of canary has one",
                         hint="`deployctl canary install DEPLOYMENT --dry-run` shows what install would write")
    if args.target[:1] == ["rebaseline"]:
        return rebaseline(args)
    if args.every is not None:  # a run happens now, once: a schedule given to it would be silently lost
        raise UsageError(f"--every {args.every} schedules the canary; this runs it once, now",
                         hint=f"deployctl canary install {' '.join(args.target) or 'DEPLOYMENT'} --every {args.every}")
    if len(args.target) > 1 or bool(args.target) == bool(args.all):
        raise InputError("say which one deployment to watch, or --all", hint="e.g. `deployctl canary glm5`")
    inv = load_inventory_from_args(args)
    names = list(inv.deployments) if args.all else args.target
    runs = []
    for name in names:
        site = make_site(inv, name, state_dir(args))
        result = run_one(site, textfile_dir(args), dead_man(args, site))
        if result.error is not None and not args.all:
            raise result.error  # one deployment: the CLI's error policy says it (and as JSON under --json)
        if not args.json and (result.code != ExitCode.OK or args.verbose):
            print("\n".join([*result.lines, *(result.detail if args.verbose else [])]),
                  file=sys.stdout if result.code in QUIET else sys.stderr)
        runs.append(result)
    if args.json:
        print(json.dumps({"runs": [{"deployment": r.deployment, "verdict": r.verdict, "exit_code": r.code,
                                    "release": live_after(r)[0],
                                    "watched_release": r.watch.release.id if r.watch else None,
                                    "rollback": asdict(r.rollback) if r.rollback else None,
                                    "lines": r.lines, "detail": r.detail} for r in runs]}, indent=2))
    return most_serious([r.code for r in runs])


def install(args: argparse.Namespace) -> int:
    if len(args.target) != 2:
        raise InputError("say which deployment: `deployctl canary install DEPLOYMENT --every 6h`")
    args.every = args.every or "6h"
    try:
        calendar, delay_s = every_to_calendar(args.every)
    except ValueError as exc:
        raise InputError(f"--every: {exc}") from None
    refuse_lasting_use(args, "the canary's timer")
    site = make_site(load_inventory_from_args(args), args.target[1], state_dir(args))
    metrics = textfile_dir(args)
    inventory = str(Path(inventory_path(args)).resolve())
    paths = Paths(python=sys.executable, inventory=inventory, protect_home=protect_home_for(sys.executable, inventory),
                  private_tmp=private_tmp_for(sys.executable, sys.prefix, inventory, str(Path(__file__).parent)),
                  state_dir=str(site.state_dir.resolve()), textfile_dir=str(metrics) if metrics else None,
                  unit_dir=str(site.endpoint.unit_dir), runtime_unit_dir=str(site.endpoint.runtime_dir),
                  backup_dir=str(site.endpoint.backup_dir) if site.endpoint.backup_dir else None)
    if args.dry_run:
        for path, text in install_plan(site, paths, calendar, delay_s).items():
            state = "new" if not path.exists() else "unchanged" if path.read_text() == text else "changed"
            print(f"would write {path} ({state})")
        print(f"would enable and start {canary_timer_name(site.name)}: a canary of {site.name} every {args.every} "
              f"({calendar}, up to {delay_s} s later); nothing was changed")
        return ExitCode.OK
    written = asyncio.run(install_units(site, paths, calendar, delay_s))
    if args.verbose:
        print("\n".join(f"wrote {w}" for w in written[:-1]))
    print(f"{written[-1]} enabled: a canary of {site.name} every {args.every} ({calendar}, up to {delay_s} s later); "
          f"see `systemctl list-timers {written[-1]}`")
    return ExitCode.OK


def rebaseline(args: argparse.Namespace) -> int:
    if len(args.target) != 2:
        raise InputError("say which deployment: `deployctl canary rebaseline DEPLOYMENT`")
    site = make_site(load_inventory_from_args(args), args.target[1], state_dir(args))

    print(rebaseline_live(site))
    return ExitCode.OK


def textfile_dir(args: argparse.Namespace) -> Path | None:
    explicit = args.textfile_dir or os.environ.get("DEPLOYCTL_TEXTFILE_DIR")
    if explicit:
        return Path(explicit)
    return textfile.DEFAULT_TEXTFILE_DIR if textfile.DEFAULT_TEXTFILE_DIR.is_dir() else None
