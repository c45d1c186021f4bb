"""What the release verbs (promote, rollback, abort, history, show, demo) and their flows share: arguments, the
site, the ledger, the lock, adoption of the installed unit (recovery before anything else: ``flows.recover``)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from deployctl.adapters.ledger import LEDGER_FILE, Ledger, live_release, resolve_state_dir, who_from_env
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.options import (
    DEPLOYMENT_HELP,
    add_deployment,
    add_profile,
    complete_profile_or_deployment,
    complete_second_profile,
)
from deployctl.decisions import machine as m
from deployctl.decisions.records import Release
from deployctl.decisions.report import live_release_line
from deployctl.errors import InputError
from deployctl.inventory.policy import Policy
from deployctl.judge.stalls import MAX_STALL_EXTRA
from deployctl.operations.site import Site, make_site
from deployctl.units.stamp import unit_hash


def add_site_arguments(parser: argparse.ArgumentParser, *, alias: bool = True, help: str = DEPLOYMENT_HELP) -> None:
    add_deployment(parser, alias=alias, help=help)


def add_candidate_arguments(parser: argparse.ArgumentParser, *, profile_help: str, dry_run_help: str,
                            fresh_baseline_help: str) -> None:
    """What promote and bisect both take: ``VERB PROFILE [-d D]``, ``VERB D PROFILE`` and ``--profile P``;
    --dry-run, --skip-preflight and --fresh-baseline."""
    parser.add_argument("profile", metavar="PROFILE", nargs="?", help=profile_help
                        ).completer = complete_profile_or_deployment  # type: ignore[attr-defined]
    add_profile(parser, default=None, help="the same as PROFILE, named as check, render and restart name it",
                dest="profile_option")
    parser.add_argument("second", nargs="?", help=argparse.SUPPRESS  # `VERB D PROFILE`: the alias of -d D
                        ).completer = complete_second_profile  # type: ignore[attr-defined]
    add_site_arguments(parser, alias=False, help="the deployment (optional when the inventory has only one; also "
                                                 "accepted as the first of two positional arguments)")
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument("--skip-preflight", action="store_true", help="do not run the pre-flight checks")
    parser.add_argument("--skip-output-gate", action="store_true",
                        help="do not compare the candidate's answers with the baseline's (for a model that cannot "
                             "return log-probabilities; gates.output.enabled: false says it for good)")
    parser.add_argument("--fresh-baseline", action="store_true", help=fresh_baseline_help)


def state_dir(args: argparse.Namespace) -> Path:
    return resolve_state_dir(getattr(args, "state_dir", None), os.environ)


def existing_state_dir(args: argparse.Namespace) -> Path:
    """The state directory of a read-only verb: one that does not exist is said, never created."""
    path = state_dir(args)
    if not path.is_dir():
        raise InputError(f"the state directory {path} does not exist: deployctl has recorded nothing here",
                         hint="pass --state-dir DIR (or $DEPLOYCTL_STATE_DIR) where deployctl keeps its ledger")
    return path


def site_from_args(args: argparse.Namespace) -> Site:
    return make_site(load_inventory_from_args(args), args.deployment, state_dir(args))


def who() -> str:
    return who_from_env(os.environ, sys.stdin.isatty())


def limits(policy: Policy, *, preflight: bool = True, output_gate: bool = True) -> m.Limits:
    # Each round adds at least one trial, so this many rounds always reach the judge's max_trials, and the
    # trials a stall set aside on top of it.
    rounds = policy.judge.max_trials - policy.judge.min_trials + 1 + MAX_STALL_EXTRA
    return m.Limits(bench_rounds=rounds, keep_when_inconclusive=policy.judge.inconclusive == "keep_candidate",
                    preflight=preflight, output_gate=output_gate and policy.gates.output.enabled,
                    output_first=policy.gates.output.run == "first")


@contextmanager
def locked(site: Site, verb: str) -> Iterator[DeploymentLock]:
    """Hold the unit's lock for the whole verb; ``Busy`` (exit 4) at once when someone else has it.

    A verb that changes things also makes the state directory (0700), which read-only verbs expect and
    never create: the lock no longer lives there, so it is made here."""
    lock = site.lock()
    lock.acquire(verb, who())
    try:
        site.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        lock.release()
        raise InputError(f"cannot create the state directory {site.state_dir}: {exc.strerror}",
                         hint="run as root, or pass --state-dir DIR (or $DEPLOYCTL_STATE_DIR)") from None
    try:
        yield lock
    finally:
        lock.release()


def adopt_installed(ledger: Ledger, site: Site) -> int | None:
    """The live release of the installed known-good unit, recorded as "adopted" if the ledger lacks it."""
    known = site.unit_files().known_good(site.unit)
    if known is None:
        return None
    digest = unit_hash(known.text)
    live = ledger.live_release(site.name)
    if live is not None and live.unit_hash == digest:
        return live.id
    same = ledger.release_with_hash(site.name, digest)
    if same is not None:
        ledger.mark_live(same.id)
        return same.id
    return ledger.begin_release(
        deployment=site.name, kind="adopted", unit_name=site.unit, unit_text=known.text, unit_hash=digest,
        who=who(), profile=known.profile, host=site.host, finished=True, live=True, result="adopted",
    )


def say(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def read_live_release(site: Site) -> tuple[Release | None, str]:
    """The live release and its line for ``status``, without creating a ledger where none is.

    A caller who cannot write the state directory cannot read the WAL ledger either: the line says so."""
    if not (site.state_dir / LEDGER_FILE).exists():
        return None, live_release_line(None)
    if not os.access(site.state_dir, os.W_OK):
        return None, f"live release: unknown (reading the ledger in {site.state_dir} needs root)"
    known = site.unit_files().known_good(site.unit)
    with Ledger.open(site.state_dir) as ledger:
        release = live_release(ledger, site.name)
    return release, live_release_line(release, unit_hash(known.text) if known else None)
