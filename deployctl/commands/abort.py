"""deployctl abort: stop a running promote, bisect or canary run; it rolls back to the known-good unit."""

from __future__ import annotations

import argparse
import os
import signal
import time

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import is_alive
from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import add_site_arguments, say, site_from_args, who
from deployctl.decisions.report import release_lines
from deployctl.errors import Busy
from deployctl.flows.abort import abort_request_path
from deployctl.flows.recover import recover_now, refuse_if_failed


NAME = "abort"
ABORTABLE = ("promote", "bisect", "canary", "demo")
HELP = "stop a running promote, bisect or canary run and roll it back"
DESCRIPTION = """\
Signal the promote, bisect or canary run holding DEPLOYMENT's lock (SIGTERM, with your name as the
reason): it cancels what it is doing (a benchmark, a startup wait) and rolls back to the known-good unit,
then exits 130. A canary run that is only watching the live release stops; it had changed nothing. abort
waits for that to finish (--wait seconds) and prints the release. If the process is already dead, abort
recovers the deployment itself.

examples:
  deployctl abort -d glm5
  deployctl abort -d glm5 --wait 0     # signal and return at once
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser)
    parser.add_argument("--wait", type=float, default=900.0, metavar="S",
                        help="how long to wait for the rollback to finish (default 900)")


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    lock = site.lock()
    holder = lock.holder()
    if holder is None or not is_alive(holder):
        recovered = recover_now(site, NAME)
        refuse_if_failed(site, recovered)  # exit 12: the dead promote's rollback did not bring the known-good back
        lines = [r.line for r in recovered] or [f"no promote of {site.name} is running; nothing to abort"]
        if args.json:
            emit_json({"aborted": None, "said": lines})
        else:
            emit(lines)
        return 0
    if holder.verb not in ABORTABLE:
        raise Busy(f"{site.name}'s lock is held by {holder.describe()}, not by a promote, a bisect or a canary run",
                   hint="only a promote, a bisect or a canary run can be aborted; wait for it to finish")
    abort_request_path(lock).write_text(f"aborted by {who()} with `deployctl abort`")
    os.kill(holder.pid, signal.SIGTERM)
    say([f"sent SIGTERM to {holder.describe()}; it rolls back now"])
    deadline = time.monotonic() + args.wait
    while lock.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    if lock.holder() is not None:
        say([f"still rolling back after {args.wait:g} s; `deployctl history -d {site.name}` shows when it is done"])
        return 0 if args.wait == 0 else 4
    with Ledger.open(site.state_dir) as ledger:
        mine = [r for r in ledger.history(site.name, 10) if r.pid == holder.pid]
        if not mine:
            emit([f"the {holder.verb} stopped before it had recorded a release; nothing was changed"])
            return 0
        release = mine[0]
        benches = ledger.benches(release.id)
    if args.json:
        emit_json(release.to_dict())
    else:
        emit(release_lines(release, benches)[:6])
    return 0
