"""deployctl status: what runs now — state, PID, uptime, installed profile and hash, live release, last log
lines — after recovering a promote whose controller died."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass

from deployctl.adapters.ledger import LedgerError
from deployctl.adapters.unitfiles import UnitFile
from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.output import TerminalProgress
from deployctl.console.release_verbs import add_site_arguments, existing_state_dir, read_live_release
from deployctl.decisions.records import Release
from deployctl.errors import ExitCode
from deployctl.flows.recover import Recovered, failed_recovery_hint, recover_now
from deployctl.operations.site import Site, make_site
from deployctl.units.stamp import read_stamp
from deployctl.units.state import UnitState


NAME = "status"
HELP = "show a deployment's unit: state, PID, uptime, installed profile and hash, last log lines"
DESCRIPTION = """\
The unit's state over D-Bus, the installed unit file's X-Deployctl-* stamp (profile, hash, whether it
was edited by hand since deployctl wrote it), the live release in the ledger, a trial left by an
unfinished promote, and the last lines of the current invocation's log.

First, when a promote's controller died (killed, host crash) and left its work unfinished, status
finishes it as recovery does: rolls back to the known-good unit (or finishes a keep) and says so. That
needs root; other operators get a read-only view in which the leftover trial shows.

Exit 0; 12 when that recovery could not bring the known-good unit back; 5 when the ledger cannot be
read or written (damaged, disk full, locked): the unit's state is shown all the same.

examples:
  deployctl status -d glm5
  deployctl status glm5 --json -n 50     # the positional alias of -d glm5
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser)
    parser.add_argument("-n", "--lines", type=int, default=10, metavar="N", help="journal lines to show (default 10; as journalctl -n: in history -n counts releases, as git log -n)")


@dataclass(frozen=True)
class Status:
    deployment: str
    state: UnitState
    unit_file: UnitFile | None
    trial: UnitFile | None
    log: tuple[str, ...]
    now: float  # wall clock, for the uptime
    live_release: str = ""  # report.live_release_line
    live_release_id: int | None = None
    recovered: tuple[str, ...] = ()  # what recovery did first, one line each
    host: str = ""  # the inventory's host of the deployment: fleet tools check it is the machine they reached

    @property
    def uptime_s(self) -> float | None:
        if self.state.active_state != "active" or not self.state.active_enter_us:
            return None
        return max(0.0, self.now - self.state.active_enter_us / 1e6)

    def to_dict(self) -> dict[str, object]:
        stamp = read_stamp(self.unit_file.text) if self.unit_file else None
        return {
            "deployment": self.deployment,
            "host": self.host,
            "unit": self.state.name,
            "load_state": self.state.load_state,
            "active_state": self.state.active_state,
            "sub_state": self.state.sub_state,
            "result": self.state.result,
            "main_pid": self.state.main_pid or None,
            "uptime_s": None if self.uptime_s is None else round(self.uptime_s, 1),
            "n_restarts": self.state.n_restarts,
            "invocation_id": self.state.invocation_id or None,
            "need_daemon_reload": self.state.need_daemon_reload,
            "unit_file": str(self.unit_file.path) if self.unit_file else None,
            "profile": stamp.profile if stamp else None,
            "unit_hash": self.unit_file.sha256 if self.unit_file else None,  # the ledger's rule
            "unit_intact": stamp.intact if stamp else None,
            "managed": bool(self.unit_file and self.unit_file.managed),
            "trial": str(self.trial.path) if self.trial else None,
            "trial_profile": self.trial.profile if self.trial else None,
            "live_release": self.live_release_id,
            "live_release_line": self.live_release,
            "recovered": list(self.recovered),
            "last_lines": list(self.log),
        }


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    if days:
        return f"{days}d {h}h"
    if hours:
        return f"{hours}h {m}m"
    return f"{minutes}m {s}s" if minutes else f"{s}s"


def status_lines(status: Status) -> list[str]:
    d = status.to_dict()
    state = f"{d['active_state']}/{d['sub_state']}"
    if status.uptime_s is not None:
        state += f", up {_duration(status.uptime_s)}"
    elif d["result"] not in ("", "success"):
        state += f" (result {d['result']}, main process {status.state.exit_description})"
    out = [f"recovered: {line}" for line in status.recovered]
    out += [f"{d['unit']} ({d['deployment']})", f"  state:     {state}"]
    if d["main_pid"]:
        out.append(f"  main PID:  {d['main_pid']}")
    if d["n_restarts"]:
        out.append(f"  restarts:  {d['n_restarts']} (by systemd, Restart=)")
    if status.unit_file is None:
        out.append("  unit file: not installed")
    else:
        out.append(f"  unit file: {d['unit_file']}")
        if d["profile"]:
            intact = "" if d["unit_intact"] else "  (edited by hand since deployctl wrote it)"
            out.append(f"  profile:   {d['profile']}  hash {str(d['unit_hash'])[:12]}{intact}")
        else:
            out.append("  profile:   (not written by deployctl)")
    if status.live_release:
        out.append(f"  {status.live_release}")
    if status.trial is not None:
        out.append(f"  trial:     {d['trial']} ({d['trial_profile'] or '?'}) — a promote is unfinished")
    if d["need_daemon_reload"]:
        out.append("  note:      the unit file changed on disk since systemd loaded it (daemon-reload pending)")
    if status.log:
        out.append("  last lines:")
        out.extend(f"    {line}" for line in status.log)
    return out


async def collect(site: Site, lines: int, live: tuple[Release | None, str], recovered: tuple[str, ...] = ()) -> Status:
    files = site.unit_files()
    systemd = await site.endpoint.connect()
    try:
        state = await systemd.unit_state(site.unit)
    finally:
        await systemd.close()
    log: tuple[str, ...] = ()
    if state.invocation_id and lines > 0:
        entries = await site.endpoint.journal().read(state.invocation_id, last=lines)
        log = tuple(line.display for line in entries if line.display)
    release, line = live
    return Status(deployment=site.name, state=state, unit_file=files.known_good(site.unit),
                  trial=files.trial(site.unit), log=log, now=time.time(), live_release=line,
                  live_release_id=release.id if release else None, recovered=recovered,
                  host=site.deployment.host)


def run(args: argparse.Namespace) -> int:
    site = make_site(load_inventory_from_args(args), args.deployment, existing_state_dir(args))
    # Steps of a recovery go to stderr as they happen (a rollback takes a while); its summary is in the status.
    ledger_error: LedgerError | None = None
    recovered: list[Recovered] = []
    try:
        recovered = recover_now(site, NAME, None if args.json else TerminalProgress())
        live = read_live_release(site)
    except LedgerError as exc:  # what runs is shown all the same: it does not need the ledger
        ledger_error = exc
        live = None, f"live release: unknown ({exc.message})"
    status = asyncio.run(collect(site, args.lines, live, tuple(r.line for r in recovered)))
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
    else:
        print("\n".join(status_lines(status)))
    if ledger_error is not None:
        print(f"error: {ledger_error.message}\nhint: {ledger_error.hint}", file=sys.stderr)
        return ExitCode.ENVIRONMENT
    if any(r.failed for r in recovered):
        print(f"error: the recovery could not bring the known-good unit back\nhint: {failed_recovery_hint(site.name)}",
              file=sys.stderr)
        return ExitCode.ROLLBACK_FAILED
    return ExitCode.OK
