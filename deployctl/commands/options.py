"""The options every verb shares, and the one way to name a deployment.

Global options (-i/--inventory, --state-dir, -v, --json, --no-color) are defined on the top parser and
again on each verb's parser with ``default=SUPPRESS``, so they work before or after the verb and the
verb's value wins only when it is given.

The deployment is ``-d/--deployment NAME`` in every verb that takes one. Where no other positional
argument is in the way, the first positional is accepted as an alias (``deployctl status glm5``).

Not a verb (no ``NAME``), so the CLI's discovery skips it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Iterable

from deployctl.errors import UsageError

DEFAULT_INVENTORY = "/etc/deployctl/inventory.yaml"
INVENTORY_ENV = "DEPLOYCTL_INVENTORY"
DEPLOYMENT_HELP = "the deployment (optional when the inventory has only one)"
FILES_IN_THE_WAY = " (-d only: the positional arguments here are files)"
ALIAS_HELP = "same as -d DEPLOYMENT (an alias)"


def add_global_options(parser: argparse.ArgumentParser, *, in_verb: bool) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if in_verb else value

    group = parser.add_argument_group("global options (before or after the verb)")
    group.add_argument("-i", "--inventory", metavar="FILE", default=default(None),
                       help=f"inventory YAML (default: ${INVENTORY_ENV}, else {DEFAULT_INVENTORY})")
    group.add_argument("--state-dir", metavar="DIR", default=default(None),
                       help="where the ledger lives (default: $DEPLOYCTL_STATE_DIR, else /var/lib/deployctl)")
    group.add_argument("-v", "--verbose", action="count", default=default(0), help="more log output (-vv for debug)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="print the result as JSON on stdout; an error is {\"error\", \"hint\", \"exit_code\"}")
    group.add_argument("--no-color", action="store_true", default=default(False),
                       help="no colour (also: $NO_COLOR, or stdout not a terminal)")


def add_deployment(parser: argparse.ArgumentParser, *, alias: bool = True, help: str = DEPLOYMENT_HELP) -> None:
    """``-d/--deployment``; with ``alias``, also an optional first positional DEPLOYMENT."""
    action = parser.add_argument("-d", "--deployment", metavar="DEPLOYMENT", default=None, help=help)
    action.completer = complete_deployments  # type: ignore[attr-defined]
    if alias:
        positional = parser.add_argument("deployment_alias", nargs="?", metavar="DEPLOYMENT", default=None,
                                         help=ALIAS_HELP)
        positional.completer = complete_deployments  # type: ignore[attr-defined]


def add_profile(parser: argparse.ArgumentParser, *, default: str | None, help: str, dest: str = "profile") -> None:
    action = parser.add_argument("--profile", "-p", metavar="PROFILE", default=default, help=help, dest=dest)
    action.completer = complete_profiles  # type: ignore[attr-defined]


def finish_arguments(args: argparse.Namespace) -> None:
    """Merge the positional alias into ``args.deployment`` (both given and different: a usage error)."""
    alias = getattr(args, "deployment_alias", None)
    if alias is None:
        return
    if args.deployment not in (None, alias):
        raise UsageError(f"two deployments named: {alias!r} and -d {args.deployment!r}",
                         hint="name the deployment once, with -d DEPLOYMENT")
    args.deployment = alias


def shift_deployment(args: argparse.Namespace, fields: Iterable[str], extra: str) -> None:
    """``verb D X … Y``: when the hidden ``extra`` positional caught a value, the first one was D."""
    if getattr(args, extra, None) is None:
        return
    names = [*fields, extra]
    values = [getattr(args, name) for name in names]
    args.deployment_alias = values[0]
    for name, value in zip(names, values[1:]):
        setattr(args, name, value)
    setattr(args, extra, None)
    finish_arguments(args)


def inventory_path(args: argparse.Namespace) -> str:
    """-i/--inventory, then $DEPLOYCTL_INVENTORY, then /etc/deployctl/inventory.yaml."""
    return getattr(args, "inventory", None) or os.environ.get(INVENTORY_ENV) or DEFAULT_INVENTORY


# --- completion (argcomplete calls these with the arguments parsed so far) ---------------------------


def _inventory_quietly(parsed_args: argparse.Namespace) -> Any:
    from deployctl.inventory.model import load_inventory

    try:
        return load_inventory(inventory_path(parsed_args))
    except Exception:  # a broken inventory completes nothing rather than spilling an error into the shell
        return None


def complete_deployments(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    inv = _inventory_quietly(parsed_args)
    return [name for name in (inv.deployments if inv else ()) if name.startswith(prefix)]


def complete_profiles(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    inv = _inventory_quietly(parsed_args)
    if inv is None:
        return []
    wanted = getattr(parsed_args, "deployment", None) or getattr(parsed_args, "deployment_alias", None)
    deps = [inv.deployments[wanted]] if wanted in inv.deployments else list(inv.deployments.values())
    names = dict.fromkeys(p for dep in deps for p in dep.profiles)
    return [name for name in names if name.startswith(prefix)]
