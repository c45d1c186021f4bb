"""deployctl restart: render a profile, install it as the known-good unit, restart, wait until ready."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.options import add_deployment_and_profile, profile_for_lone_word
from deployctl.console.release_verbs import locked, say, state_dir
from deployctl.errors import InputError, JobFailed, exit_code_of
from deployctl.flows.recover import recover_held, refuse_if_failed
from deployctl.operations.restart import RestartReport, http_health_probe, restart_and_wait
from deployctl.operations.site import Site, make_site
from deployctl.startup.journal_line import JournalLine
from deployctl.startup.readiness import Crashed, Ready, TimedOut


NAME = "restart"
HELP = "render a profile, install it, restart the unit and wait until the server is ready"
DESCRIPTION = """\
Render DEPLOYMENT's profile into its unit, install it atomically as the known-good unit (the previous
file is kept for rollback), daemon-reload, restart over D-Bus and wait until the server is ready: the
"fired up and ready to roll" log line or /health answering 200. No benchmark and no judge: to try a
change with an automatic rollback, use `deployctl promote`.

Without --profile the profile of the installed unit is re-rendered (picking up inventory edits).
A promote left unfinished by a dead controller is recovered first (rolled back, or its keep finished),
and said; exit 12 if that recovery could not bring the known-good unit back.
Exit 0 when ready; 6 when the server crashed, failed to start or timed out (with its last log lines).

examples:
  deployctl restart -d glm5 --profile baseline
  deployctl restart glm5 --follow             # the positional alias of -d glm5
  deployctl restart -d glm5 --follow             # print the startup log as it is written
  deployctl restart -d glm5 --profile baseline --adopt   # take over a hand-written unit (kept for rollback)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment_and_profile(parser, default=None, help="the profile to install (default: the installed unit's)")
    parser.add_argument("--timeout", metavar="S", type=float, default=None,
                        help="seconds to wait for readiness (default: policy gates.startup_timeout_s)")
    parser.add_argument("--adopt", action="store_true",
                        help="replace a unit file deployctl did not write (its content is kept for rollback)")
    parser.add_argument("--follow", "-f", action="store_true", help="print the startup log as it is written")


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    profile_for_lone_word(args, inv.deployments)  # `restart baseline -d glm5`
    site = make_site(inv, args.deployment, state_dir(args))
    with locked(site, NAME):
        recovered = recover_held(site, NAME)
        say([r.line for r in recovered])
        refuse_if_failed(site, recovered)
        installed, report = asyncio.run(_restart(site, args))
    failure = None if report.ok else JobFailed(
        f"{report.unit} is not ready ({report.outcome.kind})", result=report.outcome.kind,
        hint=f"journalctl --no-pager -n 200 _SYSTEMD_INVOCATION_ID={report.invocation_id}"
        if report.invocation_id else f"systemctl status {report.unit}")
    if args.json:
        data = report_json(report, installed)
        data["recovered"] = [r.line for r in recovered]
        if failure is not None:  # a failure under --json says so in the one document, as every error does
            data.update(error=failure.message, hint=failure.hint, exit_code=exit_code_of(failure))
        print(json.dumps(data, indent=2))
    else:
        print("\n".join([f"recovered: {r.line}" for r in recovered] + report_lines(report, installed)))
    if failure is None:
        return 0
    failure.after_result = True
    raise failure


def _profile(site: Site, wanted: str | None) -> str:
    if wanted:
        return wanted
    installed = site.unit_files().known_good(site.unit)
    if installed is None or not installed.profile:
        known = ", ".join(site.deployment.profiles)
        raise InputError(f"{site.unit} has no installed deployctl profile: say which with --profile ({known})")
    return installed.profile


async def _restart(site: Site, args: argparse.Namespace) -> tuple[str, RestartReport]:
    site.refuse_leftover_trial()
    files = site.unit_files()
    profile = _profile(site, args.profile)
    rendered = site.render(profile)
    current = files.known_good(site.unit)
    changed = current is None or current.text != rendered.text
    if current is not None and not changed:
        installed = f"{current.path} unchanged ({profile})"
    else:
        done = files.install(site.unit, rendered.text, adopt=args.adopt)
        installed = f"installed {profile} at {done.path}"
    timeout = args.timeout or site.policy.gates.startup_timeout_s
    follow = _echo if args.follow and not args.json else None
    systemd = await site.endpoint.connect()
    try:
        # Only when needed: a non-root operator restarting an unchanged unit holds no reload-daemon grant
        # (systemd/50-deployctl.rules), which would also authorise re-executing PID 1.
        if changed or (await systemd.unit_state(site.unit)).need_daemon_reload:
            await systemd.reload()
        report = await restart_and_wait(systemd, site.endpoint.journal(), site.unit, timeout_s=timeout,
                                        probe=http_health_probe(site.url + "/health"), on_line=follow)
    finally:
        await systemd.close()
    return installed, report


def _echo(line: JournalLine) -> None:
    print(("  systemd: " if line.from_manager else "  ") + line.display, file=sys.stderr, flush=True)


def report_lines(report: RestartReport, installed: str) -> list[str]:
    out = [installed]
    if report.start_limit_reset:
        out.append(f"cleared the start limit of {report.unit} (reset-failed)")
    outcome = report.outcome
    if isinstance(outcome, Ready):
        out.append(f"{report.unit} is ready after {outcome.elapsed_s:.1f} s (via {outcome.via})")
        return out
    if isinstance(outcome, Crashed):
        out.append(f"{report.unit} did not come up: {outcome.reason}")
    elif isinstance(outcome, TimedOut):
        out.append(f"{report.unit} is not ready after {outcome.elapsed_s:.0f} s; "
                   f"last line: {outcome.last_line or '(no output)'}")
    if outcome.last_lines:
        out.append("last log lines:")
        out.extend(f"  {line}" for line in outcome.last_lines)
    return out


def report_json(report: RestartReport, installed: str) -> dict[str, object]:
    outcome = report.outcome
    data: dict[str, object] = {
        "unit": report.unit, "installed": installed, "job": report.job.result, "outcome": outcome.kind,
        "ready": report.ok, "elapsed_s": round(outcome.elapsed_s, 3), "invocation_id": report.invocation_id,
        "start_limit_reset": report.start_limit_reset,
    }
    if isinstance(outcome, Ready):
        data["via"] = outcome.via
    else:
        data["last_lines"] = list(outcome.last_lines)
    if isinstance(outcome, Crashed):
        data["reason"] = outcome.reason
    if isinstance(outcome, TimedOut):
        data["last_line"] = outcome.last_line
    return data
