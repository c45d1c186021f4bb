"""``deployctl -H [USER@]HOST[:PORT] VERB …``: run the verb on the host over the system ssh.

One connection checks the host's deployctl version and copies the laptop's inventory into a private
temporary directory there; a second runs the verb with that inventory (long verbs in a transient unit, so a
dropped connection does not stop them) and streams its output and exit code. The host removes the
directory once the verb is done with it (deployctl.commands._upload). The ledger on the host
records the inventory's sha256 (computed there) and where it came from (laptop path, git commit). Not a verb (no ``NAME``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from deployctl import __version__
from deployctl.adapters.ssh import SSH_FAILED, Target, capture, compatible, connection_error, parse_target, ssh_argv, stream
from deployctl.commands._upload import UPLOAD_OPTION
from deployctl.commands.options import INVENTORY_ENV, inventory_path
from deployctl.errors import ExitCode, InputError, RemoteError

REMOTE_COMMAND_ENV = "DEPLOYCTL_REMOTE_COMMAND"  # the deployctl on the host, e.g. "sudo deployctl"
SSH_OPTIONS_ENV = "DEPLOYCTL_SSH_OPTIONS"  # more ssh options, e.g. "-i ~/.ssh/deploy_key"
ORIGIN_ENV = "DEPLOYCTL_INVENTORY_FROM"  # set on the host from --inventory-from: where the inventory came from
LONG_VERBS = ("promote", "rollback")
_LOCAL_ONLY = {"-H": True, "--host": True, "--remote-inventory": False, UPLOAD_OPTION: False}  # option → takes a value
_INVENTORY = ("-i", "--inventory")


def strip_options(argv: Sequence[str], options: dict[str, bool]) -> list[str]:
    """``argv`` without the given options (``-X v``, ``--x v``, ``--x=v``, ``-Xv`` forms)."""
    short = [o for o, takes_value in options.items() if takes_value and len(o) == 2]
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = options[name] and "=" not in arg
            continue
        if any(arg.startswith(o) and len(arg) > 2 for o in short):
            continue  # -Xvalue
        out.append(arg)
    return out


def remote_argv(argv: Sequence[str], verb: str, inventory: str | None, origin: str | None) -> list[str]:
    """The arguments for the host's deployctl: no -H, the uploaded inventory (its to remove), long verbs in a unit."""
    forward = strip_options(argv, _LOCAL_ONLY)
    if inventory is not None:
        forward = [UPLOAD_OPTION, *strip_options(forward, {o: True for o in _INVENTORY}), "-i", inventory]
    if verb in LONG_VERBS and "--in-unit" not in forward:
        forward.append("--in-unit")
    return (["--inventory-from", origin] if origin else []) + forward


def inventory_origin(path: Path) -> str:
    """``laptop:/abs/path git:COMMIT[+dirty]``: where the inventory the host receives came from."""
    parts = [f"{socket.gethostname()}:{path.resolve()}"]
    try:
        head = subprocess.run(["git", "-C", str(path.resolve().parent), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(path.resolve().parent), "status", "--porcelain", "--", path.name],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            parts.append(f"git:{head.stdout.strip()}" + ("+dirty" if dirty else ""))
    except (OSError, subprocess.TimeoutExpired):
        pass  # no git here: the hash alone says what was promoted
    return " ".join(parts)


def _probe(target: Target, base: list[str], inventory: bytes | None, options: Sequence[str], batch: bool) -> str | None:
    """Check the host's deployctl version; upload the inventory. Its path on the host (None without one)."""
    script = shlex.join([*base, "--version"])
    if inventory is not None:
        # A private directory, not a file in /tmp: templates are looked up next to the inventory, and
        # another user of the host must not be able to put one there.
        script += (' && umask 077 && d=$(mktemp -d /tmp/deployctl-inventory.XXXXXX)'
                   ' && cat >"$d/inventory.yaml" && echo "$d/inventory.yaml"')
    done = capture(ssh_argv(target, script, tty=False, batch=batch, options=options), inventory or b"")
    err = done.stderr.decode(errors="replace")
    if done.returncode == SSH_FAILED:
        raise connection_error(target, err)
    out = done.stdout.decode(errors="replace").split()
    if done.returncode == 127 or len(out) < 2 or out[0] != "deployctl":
        raise RemoteError(f"no deployctl on {target} ({shlex.join(base)}): {err.strip() or 'exit ' + str(done.returncode)}",
                          exit_code=ExitCode.REMOTE_INCOMPATIBLE,
                          hint=f"install deployctl {__version__} on the host, or set {REMOTE_COMMAND_ENV} (e.g. 'sudo deployctl')")
    if not compatible(__version__, out[1]):
        raise RemoteError(f"{target} runs deployctl {out[1]}; this one is {__version__}",
                          exit_code=ExitCode.REMOTE_INCOMPATIBLE,
                          hint=f"install deployctl {__version__} on the host (or the host's version here)")
    if done.returncode != 0:
        raise RemoteError(f"could not copy the inventory to {target}: {err.strip()}", exit_code=ExitCode.REMOTE_INCOMPATIBLE,
                          hint="the remote user needs a writable /tmp; or use --remote-inventory")
    return out[2] if inventory is not None and len(out) > 2 else None


def _local_inventory(args: argparse.Namespace) -> Path | None:
    """The inventory to send: the one named (-i, $DEPLOYCTL_INVENTORY), else the default one if it exists."""
    path = Path(inventory_path(args))
    named = getattr(args, "inventory", None) or os.environ.get(INVENTORY_ENV)
    return path if named or path.exists() else None


def run_remote(host: str, argv: Sequence[str], args: argparse.Namespace, *, remote_inventory: bool) -> int:
    target = parse_target(host)
    base = shlex.split(os.environ.get(REMOTE_COMMAND_ENV) or "deployctl")
    options = shlex.split(os.environ.get(SSH_OPTIONS_ENV, ""))
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    local = None if remote_inventory else _local_inventory(args)
    try:
        data = local.read_bytes() if local else None
    except OSError as exc:
        raise InputError(f"cannot read the inventory {local}: {exc.strerror}",
                         hint="pass -i FILE, or --remote-inventory to use the host's own") from None
    uploaded = _probe(target, base, data, options, batch=not interactive)
    origin = inventory_origin(local) if local else None
    command = shlex.join([*base, *remote_argv(argv, args.verb, uploaded, origin)])
    code = stream(ssh_argv(target, command, tty=interactive, batch=not interactive, options=options))
    if code == SSH_FAILED:
        where = getattr(args, "deployment", None) or "DEPLOYMENT"
        print(f"error: the SSH connection to {target} ended (ssh exit 255)", file=sys.stderr)
        print(f"hint: a promote or rollback goes on on the host; `deployctl -H {host} attach {where}` follows it",
              file=sys.stderr)
        return ExitCode.SSH_UNREACHABLE
    return code
