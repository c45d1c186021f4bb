"""The inventory ``deployctl -H`` copied to this host: removed once the verb (or the unit it started) is done.

The laptop uploads it into ``mktemp -d /tmp/deployctl-inventory.XXXXXX`` and passes ``--uploaded-inventory``.
The deployctl that received it owns the directory and removes it when it ends, on success, failure, refusal
or a hang-up; a long verb hands it to its transient unit instead, which removes it when it stops (even
killed), since the work goes on after the SSH session. The dead-man's switch fires after the unit may be
gone: it recovers with a copy kept in the state directory, never with the upload.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from deployctl.console.options import inventory_path
from deployctl.errors import InputError, UsageError


UPLOAD_OPTION = "--uploaded-inventory"
# What `mktemp -d /tmp/deployctl-inventory.XXXXXX` makes, and nothing else: the only path ever removed.
_UPLOADED = re.compile(r"/tmp/deployctl-inventory\.[A-Za-z0-9]{6}/inventory\.yaml")


def upload_directory(inventory: str) -> Path:
    """The directory of an uploaded inventory; a usage error for any other path (nothing else is removed)."""
    if not _UPLOADED.fullmatch(inventory):
        raise UsageError(f"{UPLOAD_OPTION}: {inventory!r} is not an inventory uploaded by `deployctl -H`",
                         hint=f"{UPLOAD_OPTION} is for `deployctl -H` only; leave it out")
    return Path(inventory).parent


@dataclass
class Upload:
    directory: Path
    handed_over: bool = False

    def hand_over(self) -> Path:
        """A unit removes it from now on: this process must not."""
        self.handed_over = True
        return self.directory

    def remove(self) -> None:
        if not self.handed_over:
            shutil.rmtree(self.directory, ignore_errors=True)  # rmtree leaves a symlink alone


def claim(args: argparse.Namespace) -> Upload | None:
    """The upload this command owns (with ``--uploaded-inventory``), removed on a hang-up as well."""
    if not getattr(args, "uploaded_inventory", False):
        return None
    upload = Upload(upload_directory(inventory_path(args)))

    def hang_up(signum: int, frame: FrameType | None) -> None:
        # A dropped SSH session with a terminal: remove it, then die of SIGHUP as before.
        upload.remove()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGHUP, hang_up)
    return upload


def owned(args: argparse.Namespace) -> Upload | None:
    return getattr(args, "upload", None)


def lasting_copy(args: argparse.Namespace, state_dir: Path, deployment: str) -> str:
    """The inventory for a command that runs after this one (the dead-man's recover): the upload goes away."""
    if owned(args) is None:
        return str(Path(inventory_path(args)).resolve())
    copy = state_dir / "operations" / f"{deployment}.inventory.yaml"
    copy.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(Path(inventory_path(args)).read_bytes())
    return str(copy)


def refuse_lasting_use(args: argparse.Namespace, what: str) -> None:
    """Something that runs long after this command (a timer) cannot use an inventory that is removed."""
    if owned(args) is not None:
        raise InputError(f"{what} would run with {inventory_path(args)}, uploaded by -H and removed when this"
                         " command ends", hint="put the inventory on the host and pass --remote-inventory")
