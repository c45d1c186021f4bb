"""The options every verb shares, and the one way to name a deployment.

Global options (-i/--inventory, --state-dir, -v, --json, --no-color) are defined on the top parser and
again on each verb's parser with ``default=SUPPRESS``, so they work before or after the verb and the
verb's value wins only when it is given.

The deployment is ``-d/--deployment NAME`` in every verb that takes one. Where no other positional
argument is in the way, the first positional is accepted as an alias (``deployctl status glm5``).
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


def add_deployment_and_profile(parser: argparse.ArgumentParser, *, default: str | None, help: str) -> None:
    """The one convention of the verbs that take both (render, check, restart, as promote and bisect):
    ``VERB [DEPLOYMENT [PROFILE]]``, or ``-d`` and ``--profile``; a lone positional that is no deployment
    but a profile of one is the profile (``check candidate -d glm5``, ``check candidate``)."""
    add_deployment(parser)
    add_profile(parser, default=None, help=help)  # the default is applied once the words are placed
    parser.add_argument("profile_word", nargs="?", metavar="PROFILE", default=None,
                        help="same as --profile PROFILE, after DEPLOYMENT (`deployctl VERB glm5 candidate`)"
                        ).completer = complete_profiles  # type: ignore[attr-defined]
    parser.set_defaults(_profile_default=default)


def finish_arguments(args: argparse.Namespace) -> None:
    """Merge the positional alias into ``args.deployment`` (both given and different: a usage error, except
    where the verb takes a profile: there the word is the profile, ``check candidate -d glm5``)."""
    if getattr(args, "profile_word", None) is not None:
        _name_profile(args, args.profile_word)
    alias = getattr(args, "deployment_alias", None)
    if alias is None:
        return
    if args.deployment not in (None, alias):
        if hasattr(args, "profile_word") and args.profile_word is None:  # `check candidate -d glm5`?
            args.lone_word = alias  # the inventory decides (profile_for_lone_word)
            return
        raise UsageError(f"two deployments named: {alias!r} and -d {args.deployment!r}",
                         hint="name the deployment once, with -d DEPLOYMENT")
    args.deployment = alias
    args.deployment_by_position = True


def _name_profile(args: argparse.Namespace, name: str) -> None:
    if args.profile not in (None, name):
        raise UsageError(f"two profiles named: {name!r} and --profile {args.profile!r}", hint="name the profile once")
    args.profile = name


def profile_for_lone_word(args: argparse.Namespace, deployments: dict[str, Any]) -> None:
    """``VERB WORD`` where WORD is no deployment but a profile of one: WORD is the profile (the deployment
    then comes from -d or the inventory having only one). Then the verb's default profile, if none was named."""
    if not hasattr(args, "profile_word"):
        return

    def is_profile(word: str | None) -> bool:
        return word not in deployments and any(word in d.profiles for d in deployments.values())

    beside_d = getattr(args, "lone_word", None)
    if beside_d is not None:
        if not is_profile(beside_d):
            raise UsageError(f"two deployments named: {beside_d!r} and -d {args.deployment!r}",
                             hint="name the deployment once, with -d DEPLOYMENT")
        _name_profile(args, beside_d)
    elif getattr(args, "deployment_by_position", False) and is_profile(args.deployment):
        _name_profile(args, args.deployment)
        args.deployment = None
    if args.profile is None:
        args.profile = args._profile_default


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


def complete_profile_or_deployment(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The first word of ``VERB PROFILE [-d D]`` / ``VERB D PROFILE`` (promote, bisect): either one, until -d
    names the deployment."""
    deployments = [] if parsed_args.deployment else complete_deployments(prefix, parsed_args)
    return deployments + [name for name in complete_profiles(prefix, parsed_args) if name not in deployments]


def complete_second_profile(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The second word of ``VERB D PROFILE``: the profiles of D, which argparse placed in ``profile``."""
    named = argparse.Namespace(**{**vars(parsed_args), "deployment": parsed_args.deployment or parsed_args.profile})
    return complete_profiles(prefix, named)


def complete_releases(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The newest release ids of the ledger (of -d DEPLOYMENT, when named), newest first."""
    from deployctl.adapters.ledger import LEDGER_FILE, Ledger, resolve_state_dir

    directory = resolve_state_dir(getattr(parsed_args, "state_dir", None), os.environ)
    if not (directory / LEDGER_FILE).exists():  # completion never creates a ledger
        return []
    try:
        with Ledger.open(directory) as ledger:
            releases = ledger.history(getattr(parsed_args, "deployment", None), 20)
    except Exception:  # an unreadable ledger completes nothing rather than spilling an error into the shell
        return []
    return [str(r.id) for r in releases if str(r.id).startswith(prefix)]
