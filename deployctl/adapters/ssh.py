"""The system ``ssh``: so the operator's ~/.ssh/config, agent, jump hosts and ControlMaster all apply.

Pure parts (target parsing, argv building, classifying a failed connection) are tested on data; ``run``
and ``probe`` are the only places a process starts. ssh exits 255 for its own failures, anything else is
the remote command's exit code.
"""

from __future__ import annotations

import ctypes
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
from typing import Sequence

from deployctl.errors import ExitCode, InputError, RemoteError

SSH_FAILED = 255
# ssh's own messages (OpenSSH 9.2) that mean the host answered but would not let us in.
_REFUSED = ("Permission denied", "Host key verification failed", "Too many authentication failures",
            "REMOTE HOST IDENTIFICATION HAS CHANGED")
_TARGET = re.compile(r"(?:(?P<user>[^@\s:/]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::(?P<port>\d{1,5}))?")


@dataclass(frozen=True)
class Target:
    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + (f":{self.port}" if self.port else "")


def parse_target(text: str) -> Target:
    """``[USER@]HOST[:PORT]`` (an IPv6 address in brackets)."""
    match = _TARGET.fullmatch(text)
    if not match or match["host"].startswith("-"):
        raise InputError(f"not an SSH target: {text!r}", hint="use -H [USER@]HOST[:PORT], e.g. -H root@gpu-node-3:2222")
    port = int(match["port"]) if match["port"] else None
    if port is not None and not 0 < port < 65536:
        raise InputError(f"not a TCP port: {port}")
    return Target(host=match["host"].strip("[]"), user=match["user"], port=port)


def ssh_argv(target: Target, remote: str, *, tty: bool, batch: bool,
             options: Sequence[str] = (), connect_timeout_s: int = 15) -> list[str]:
    """``ssh`` running ``remote`` (a command line for the remote shell, quoted by the caller) on ``target``.

    ``tty``: a terminal on the host, so Ctrl-C reaches the remote deployctl (detach or abort);
    ``batch``: never prompt (no terminal here to answer), fail at once instead."""
    argv = ["ssh", "-t" if tty else "-T", "-o", f"ConnectTimeout={connect_timeout_s}"]
    if batch:
        argv += ["-o", "BatchMode=yes"]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    return [*argv, *options, target.host, remote]


def connection_error(target: Target, stderr: str) -> RemoteError:
    """What a failed ssh (exit 255) means for the operator, from ssh's last words."""
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "no message from ssh")
    if any(marker in stderr for marker in _REFUSED):
        return RemoteError(f"{target} refused the SSH login: {last}", exit_code=ExitCode.SSH_REFUSED,
                           hint=f"check the key (ssh-add -l) and the user; `ssh {target.host}` by hand shows more")
    return RemoteError(f"cannot reach {target} over SSH: {last}", exit_code=ExitCode.SSH_UNREACHABLE,
                       hint="check the host name, port and network (or your ~/.ssh/config for a jump host)")


def compatible(local: str, remote: str) -> bool:
    """Same major.minor: the verbs and their arguments match (patch releases only fix)."""
    return local.split(".")[:2] == remote.split(".")[:2]


def capture(argv: Sequence[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(list(argv), input=stdin, capture_output=True, timeout=120)
    except FileNotFoundError:
        raise RemoteError("the ssh client is not installed here", exit_code=ExitCode.SSH_UNREACHABLE,
                          hint="apt-get install openssh-client") from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"ssh did not finish within 120 s: {shlex.join(argv)}", exit_code=ExitCode.SSH_UNREACHABLE,
                          hint="check the network; ConnectTimeout in ~/.ssh/config bounds the connection") from None


_PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with_parent() -> None:
    """In the child: SIGTERM when deployctl dies. Out of the terminal's session, nothing else would end it."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(argv: Sequence[str], *, own_session: bool = False) -> subprocess.Popen[bytes]:
    """Start ssh with this process's stdin, stdout and stderr; ``own_session``: the terminal's signals
    (Ctrl-C) do not reach it, and it ends when this process does."""
    return subprocess.Popen(list(argv), start_new_session=own_session,
                            preexec_fn=_die_with_parent if own_session else None)


def stream(argv: Sequence[str], *, own_session: bool = False) -> int:
    """Run ssh with this terminal's stdin, stdout and stderr: output streams as it comes."""
    return start(argv, own_session=own_session).wait()
