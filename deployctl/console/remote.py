"""``deployctl -H [USER@]HOST[:PORT] VERB …``: run the verb on the host over the system ssh.

One connection checks the host's deployctl version and writes nothing there. A second runs the verb (long
verbs in a transient unit, so a dropped connection does not stop them) and streams its output and exit
code; the laptop's inventory travels inside that same command line and the host's shell writes it into a
private temporary directory right before it ``exec``s deployctl, which owns and removes it
(deployctl.console.upload). So every upload has an owner on the host from the moment it exists: a
refused version or a connection that never got there leaves nothing behind.

Exit codes tell the SSH failures apart: 32/33 the verb never started (no connection, login refused), 34
the host's deployctl does not fit, 35 the verb started and the link was lost (it goes on; ``attach``).
ssh's own messages go to a log file (``-E``) read after a failure, so the terminal only shows the verb's.

Without a terminal (``deployctl -H host promote … | tee log``) ssh runs in its own session: Ctrl-C is this
process's alone, which detaches (exit 30, the attach hint), or with ``--abort-on-interrupt`` aborts the
operation over a second connection and follows its rollback to the end. With a terminal ssh puts it in
raw mode and Ctrl-C reaches the host's deployctl, which asks. The ledger on the host records the
inventory's sha256 (computed there) and where it came from (laptop path, git commit). Not a verb (no ``NAME``).
"""

from __future__ import annotations

import argparse
import base64
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from deployctl import __version__
from deployctl.adapters.ssh import (
    SSH_FAILED,
    Target,
    capture,
    compatible,
    connection_error,
    parse_target,
    ssh_argv,
    start,
    stream,
)
from deployctl.console.options import INVENTORY_ENV, inventory_path
from deployctl.console.upload import UPLOAD_OPTION
from deployctl.errors import ExitCode, InputError, RemoteError


REMOTE_COMMAND_ENV = "DEPLOYCTL_REMOTE_COMMAND"  # the deployctl on the host, e.g. "sudo deployctl"
SSH_OPTIONS_ENV = "DEPLOYCTL_SSH_OPTIONS"  # more ssh options, e.g. "-i ~/.ssh/deploy_key"
ORIGIN_ENV = "DEPLOYCTL_INVENTORY_FROM"  # set on the host from --inventory-from: where the inventory came from
LONG_VERBS = ("promote", "rollback")
UPLOADED = "@DEPLOYCTL_UPLOADED@"  # in the verb's arguments, where the host's shell puts the upload's path
# The inventory rides in the command line (base64): well under Linux's 128 KiB for one argument.
MAX_INVENTORY_BYTES = 64 * 1024
_SSH_LOG_LEVEL = ("-o", "LogLevel=VERBOSE")  # ssh's log (-E) then says whether the login got through
_LOGGED_IN = "Authenticated to "
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


def _probe(target: Target, base: list[str], options: Sequence[str], batch: bool) -> None:
    """Check the host's deployctl version. Nothing is written on the host."""
    done = capture(ssh_argv(target, shlex.join([*base, "--version"]), tty=False, batch=batch, options=options))
    err = done.stderr.decode(errors="replace")
    if done.returncode == SSH_FAILED:
        raise connection_error(target, err)
    out = done.stdout.decode(errors="replace").split()
    if done.returncode != 0 or len(out) < 2 or out[0] != "deployctl":
        raise RemoteError(f"no deployctl on {target} ({shlex.join(base)}): {err.strip() or 'exit ' + str(done.returncode)}",
                          exit_code=ExitCode.REMOTE_INCOMPATIBLE,
                          hint=f"install deployctl {__version__} on the host, or set {REMOTE_COMMAND_ENV} (e.g. 'sudo deployctl')")
    if not compatible(__version__, out[1]):
        raise RemoteError(f"{target} runs deployctl {out[1]}; this one is {__version__}",
                          exit_code=ExitCode.REMOTE_INCOMPATIBLE,
                          hint=f"install deployctl {__version__} on the host (or the host's version here)")


def verb_script(command: Sequence[str], inventory: bytes | None) -> str:
    """The host's shell command: write the inventory (if any) where ``UPLOADED`` stands, then exec deployctl.

    A private directory, not a file in /tmp: templates are looked up next to the inventory, and another
    user of the host must not be able to put one there. Between ``mktemp`` and ``exec`` the shell owns it
    (and removes it if writing fails); from the ``exec`` on, the deployctl that received it does."""
    line = shlex.join(command)
    if inventory is None:
        return f"exec {line}"
    if len(inventory) > MAX_INVENTORY_BYTES:
        raise InputError(f"the inventory ({len(inventory)} bytes) is too large for -H to send in the command line"
                         f" (at most {MAX_INVENTORY_BYTES // 1024} KiB)",
                         hint="put the inventory on the host and pass --remote-inventory")
    blob = base64.b64encode(inventory).decode()
    failed = shlex.quote("error: could not write the inventory into a private directory in /tmp on the host\n"
                         "hint: the remote user needs a writable /tmp (and base64); or use --remote-inventory\n")
    return (f'umask 077 && d=$(mktemp -d /tmp/deployctl-inventory.XXXXXX) || {{ printf {failed} >&2; exit 34; }}; '
            f'printf %s {blob} | base64 -d >"$d/inventory.yaml" || {{ rm -rf -- "$d"; printf {failed} >&2; exit 34; }}; '
            'exec ' + line.replace(UPLOADED, '"$d/inventory.yaml"'))


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
    _probe(target, base, options, batch=not interactive)
    origin = inventory_origin(local) if local else None
    script = verb_script([*base, *remote_argv(argv, args.verb, UPLOADED if data is not None else None, origin)], data)
    where = getattr(args, "deployment", None)
    with tempfile.NamedTemporaryFile(prefix="deployctl-ssh-", suffix=".log") as log:
        ssh = ssh_argv(target, script, tty=interactive, batch=not interactive,
                       options=[*_SSH_LOG_LEVEL, "-E", log.name, *options])
        if interactive:
            code = stream(ssh)  # raw mode: Ctrl-C goes to the host's deployctl, which asks detach or abort
        else:
            code = _without_terminal(ssh, target, base, options, args, host)
        if code != SSH_FAILED:
            return code
        said = Path(log.name).read_text(errors="replace")
    if _LOGGED_IN not in said:  # it never got to the host: nothing started, nothing uploaded
        raise connection_error(target, said)
    raise RemoteError(f"the SSH connection to {target} was lost after {args.verb} started there",
                      exit_code=ExitCode.SSH_LINK_LOST,
                      hint=f"a promote or rollback goes on on the host; `deployctl -H {host} attach {where or 'DEPLOYMENT'}`"
                           " follows it" if args.verb in LONG_VERBS else
                           "it went on there until it noticed; run it again once the host answers")


def _without_terminal(ssh: list[str], target: Target, base: list[str], options: Sequence[str],
                      args: argparse.Namespace, host: str) -> int:
    """ssh in its own session, so the terminal's Ctrl-C is ours alone: detach, or abort and follow."""
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        proc = start(ssh, own_session=True)
        while proc.poll() is None and not interrupted:
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        if not interrupted:
            return proc.returncode
        proc.terminate()  # this connection only: the operation is PID 1's on the host
        proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    where = getattr(args, "deployment", None)
    if not (getattr(args, "abort_on_interrupt", False) and where and args.verb in LONG_VERBS):
        print(f"\ndetached: {args.verb} goes on on {target}; `deployctl -H {host} attach {where or 'DEPLOYMENT'}`"
              " follows it again", file=sys.stderr)
        return ExitCode.DETACHED
    state = [f"--state-dir={args.state_dir}"] if getattr(args, "state_dir", None) else []
    attach = shlex.join([*base, *state, "attach", where, "--abort"])
    print(f"\naborting {args.verb} of {where} on {target}; following its rollback", file=sys.stderr)
    return stream(ssh_argv(target, attach, tty=False, batch=True, options=options), own_session=True)
